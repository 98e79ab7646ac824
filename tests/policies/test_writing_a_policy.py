"""The "Writing a policy" page: its example is the file a scenario loads, it runs end to
end, and it can be unit-tested on a hand-built state as the page shows."""

from __future__ import annotations

import re

import pytest

import sim
from sim.api import Start
from sim.errors import ScenarioError
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import REPO, make_scenario, site

EXAMPLE = REPO / "scenarios" / "policies" / "cleanest_site.py"
SCENARIO = REPO / "scenarios" / "user_policy.toml"


def test_the_page_shows_the_example_file_verbatim():
    page = (REPO / "docs" / "writing-a-policy.md").read_text()
    first_block = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert first_block == EXAMPLE.read_text()


def test_a_scenario_loads_the_policy_from_a_file_next_to_it_and_runs_it():
    scenario = sim.load_scenario(SCENARIO, ["duration_h=12"])
    assert scenario.policy.name == f"{EXAMPLE}:CleanestSite"
    r = sim.simulate(scenario)
    assert r.meta["policy"] == "CleanestSite"
    assert r.summary["jobs_completed"] > 0 and r.summary["deadline_misses"] == 0


def test_its_parameters_are_validated_by_name():
    with pytest.raises(ScenarioError, match=r"^policy.params.max_wait_h: .*valid number.*'six'"):
        build_policy(f"{EXAMPLE}:CleanestSite", {"max_wait_h": "six"})


def test_on_a_hand_built_state_it_starts_a_job_on_the_cleanest_site(tmp_path):
    sites = [
        site(name="dirty", carbon={"constant_g_per_kwh": 400.0}),
        site(name="clean", carbon={"constant_g_per_kwh": 50.0}),
    ]
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 2, "work_gpu_h": 1.0}]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=sites))
    h.advance(0.0)
    policy = build_policy(f"{EXAMPLE}:CleanestSite", {})
    actions = policy.decide(h.state)
    assert actions == [Start(h.job("j"), "clean", gpu_model="A100-80GB")]
    h.apply(actions)
    assert h.job("j").site == "clean"
