"""Every registered policy is documented with all its parameters, and the documented
chain runs as written."""

from __future__ import annotations

import dataclasses
import re
import tomllib

import pytest

import sim
from policies import REGISTRY
from tests.conftest import BASE, REPO, make_scenario, run_cli

INDEX = (REPO / "docs" / "policies.md").read_text()


def family_page(name: str) -> str:
    """The text of the page the index's row for `name` links to (the index itself if none)."""
    row = re.search(rf"^\| `{name}` \|.*$", INDEX, re.M)
    assert row, f"{name} is not in docs/policies.md"
    link = re.search(r"\]\(([\w-]+\.md)\)", row.group(0))
    return (REPO / "docs" / link.group(1)).read_text() if link else INDEX


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_policy_is_in_the_index_and_its_page_names_every_parameter(name):
    page = family_page(name)
    assert f"`{name}`" in page
    cls = REGISTRY[name]
    if dataclasses.is_dataclass(cls):
        for field in (f for f in dataclasses.fields(cls) if f.init):  # its parameters
            assert f"`{field.name}`" in page, f"{name}: parameter {field.name} not documented"


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, re.S)


def test_the_documented_chain_runs_from_a_scenario(tmp_path):
    policy = tomllib.loads(toml_blocks(INDEX)[0])["policy"]
    readme = tomllib.loads(
        next(b for b in toml_blocks((REPO / "README.md").read_text()) if "chain" in b)
    )["policy"]
    assert [m["name"] for m in readme["params"]["policies"]] == [
        m["name"] for m in policy["params"]["policies"]
    ]
    synthetic = {
        **BASE["workload"]["synthetic"],
        "deferrable_fraction": 1.0,
        "slack_h": [4.0, 8.0],
        "max_jobs": 20,
    }
    event = {"site": "a", "start": "2020-06-01T12:00:00Z", "duration_h": 2, "reduction_pct": 20}
    scenario = make_scenario(
        tmp_path, policy=policy, workload={"synthetic": synthetic}, demand_response=[event]
    )
    r = sim.simulate(scenario)
    assert r.meta["policy"] == "Chain"
    assert r.summary["jobs_completed"] > 0


REQUIRED = {  # policies without a usable default need one parameter
    "carbon_threshold": ["--set", "policy.params.percentile=30"],
    "static_cap": ["--set", "policy.params.watts=250"],
}


@pytest.mark.parametrize("name", sorted(set(REGISTRY) - {"chain"}))
def test_each_policy_runs_from_the_command_line(name, capsys, tmp_path):
    scenario = REPO / "scenarios" / "demand_response.toml"
    args = ["run", str(scenario), "--policy", name, *REQUIRED.get(name, []), "--out", str(tmp_path)]
    code, out = run_cli(args, capsys)
    assert code == 0, out.err
    assert sim.Results.load(tmp_path).meta["policy"] == REGISTRY[name].__name__


def test_a_chain_drops_a_later_members_start_that_no_longer_fits(tmp_path):
    """run_now starts A on all four GPUs; carbon_threshold would defer A (dropped: A is
    taken) and start B on the same GPUs (dropped: they are no longer free)."""
    jobs = [
        {"job_id": "A", "submit_time": 0, "gpus": 4, "work_gpu_h": 4.0, "deadline": 86000},
        {"job_id": "B", "submit_time": 0, "gpus": 4, "work_gpu_h": 4.0},
    ]
    members = [
        {"name": "run_now"},
        {"name": "carbon_threshold", "params": {"threshold_g_per_kwh": 100}},
    ]
    policy = {"name": "chain", "params": {"policies": members}}
    r = sim.simulate(make_scenario(tmp_path, jobs, policy=policy))
    starts = r.events[r.events["kind"] == "start"]
    assert starts[["time_s", "job"]].values.tolist() == [[0.0, "A"], [3600.0, "B"]]


def test_the_readme_lists_every_summary_key_and_result_file():
    from sim.results import FILES, SUMMARY_KEYS

    readme = (REPO / "README.md").read_text()
    row = re.search(r"^\| `summary.json` \|(.*)$", readme, re.M).group(1)
    assert re.findall(r"`(\w+)`", row.split(";")[0]) == list(SUMMARY_KEYS)
    for name in FILES:
        assert f"`{name}`" in readme
