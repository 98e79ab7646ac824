"""The `dcsim` command and the result files it writes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import sim
from sim.results import FILES, SUMMARY_KEYS
from tests.conftest import REPO, run_cli

SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))
SHORTENED = {"carbon_aware_inference.toml": ["--set", "duration_h=24"]}
"""Scenarios run for less than their horizon here (the file itself is validated whole): a
week of three services simulated request by request takes about a minute; a day runs every
part of the file."""


def imported_job_file(path, tmp_path) -> list[str]:
    """The `--set` giving `fragmentation.toml` its job file, which it reads from out/ (the
    Alibaba 2023 trace imported by its study script): imported here into `tmp_path`, or the
    test skipped without ../shared/data."""
    if path.name != "fragmentation.toml":
        return []
    from scripts.study_fragmentation import TRACE, import_jobs

    if not TRACE.is_file():
        pytest.skip(f"Alibaba 2023 trace not found at {TRACE} (no ../shared/data)")
    return ["--set", f"workload.file={import_jobs(tmp_path / 'jobs.parquet')}"]


def test_there_are_scenarios():
    assert any(p.name == "quickstart.toml" for p in SCENARIOS)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_scenario_validates_and_runs(path, tmp_path, capsys):
    job_file = imported_job_file(path, tmp_path)
    code, out = run_cli(["validate", str(path), *job_file], capsys)
    assert code == 0, out.err
    assert "ok:" in out.out
    code, out = run_cli(
        ["run", str(path), "--out", str(tmp_path), *SHORTENED.get(path.name, []), *job_file],
        capsys,
    )
    assert code == 0, out.err
    for name in FILES:
        assert (tmp_path / name).stat().st_size > 0, name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(SUMMARY_KEYS) <= set(summary)
    # a scenario without a [workload] serves requests or runs serverless functions only
    scenario = sim.load_scenario(path)
    done = (
        "jobs_submitted"
        if scenario.workload.has_jobs
        else "requests_served"
        if scenario.services
        else "function_invocations"
    )
    assert summary[done] > 0
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind


def test_run_prints_a_summary_and_where_the_files_went(tmp_path, capsys):
    code, out = run_cli(
        [
            "run",
            str(REPO / "scenarios/quickstart.toml"),
            "--out",
            str(tmp_path),
            "--seed",
            "3",
            "--set",
            "duration_h=72",
        ],
        capsys,
    )
    assert code == 0
    assert "carbon_total_kg" in out.out and "frankfurt" in out.out
    assert str(tmp_path) in out.out.replace("\n", "")
    results = sim.Results.load(tmp_path)
    assert results.scenario.seed == 3 and results.scenario.duration_h == 72
    assert results.meta["seed"] == 3


def test_policy_option_and_overrides_reach_the_run(tmp_path, capsys):
    scenario = REPO / "scenarios/quickstart.toml"
    code, _ = run_cli(
        [
            "run",
            str(scenario),
            "--out",
            str(tmp_path),
            "--policy",
            "run_now",
            "--set",
            "policy.params.backfill=false",
            "--set",
            "sites[1].pue=1.9",
        ],
        capsys,
    )
    assert code == 0
    saved = sim.Results.load(tmp_path).scenario
    assert saved.policy.params == {"backfill": False}
    assert saved.sites[1].pue == 1.9


def test_results_round_trip_through_their_files(tmp_path):
    scenario = sim.load_scenario(REPO / "scenarios/quickstart.toml", ["duration_h=72"])
    results = sim.simulate(scenario)
    loaded = sim.Results.load(results.save(tmp_path))
    assert loaded.summary == results.summary
    assert loaded.scenario == results.scenario
    pd.testing.assert_frame_equal(loaded.jobs, results.jobs)
    pd.testing.assert_frame_equal(loaded.power, results.power)
    pd.testing.assert_frame_equal(loaded.events, results.events, check_categorical=False)


def test_the_readme_policy_example_runs_from_a_file(tmp_path, capsys):
    readme = (REPO / "README.md").read_text()
    code = readme.split("```python\n# my_policy.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "my_policy.py").write_text(code)
    exit_code, out = run_cli(
        [
            "run",
            str(REPO / "scenarios/quickstart.toml"),
            "--out",
            str(tmp_path / "out"),
            "--policy",
            f"{tmp_path / 'my_policy.py'}:CleanFirst",
            "--set",
            "policy.params={}",
        ],
        capsys,
    )
    assert exit_code == 0, out.err
    results = sim.Results.load(tmp_path / "out")
    assert results.meta["policy"] == "CleanFirst"
    assert results.summary["jobs_completed"] > 0
    assert (results.events["kind"] == "defer").any()


def test_grid_data_list_shows_every_zone_year(capsys):
    code, out = run_cli(["grid-data", "list"], capsys)
    assert code == 0, out.err
    assert "zone-years" in out.out
    from sim.grid import available_zones

    assert len(available_zones()) >= 100
    for zone in ("DE", "FR", "US-CAL"):
        assert zone in out.out


def test_grid_data_show_prints_profiles_and_writes_a_figure(tmp_path, capsys):
    figure = tmp_path / "de.png"
    code, out = run_cli(
        ["grid-data", "show", "DE", "--year", "2020", "--plot", str(figure)], capsys
    )
    assert code == 0, out.err
    assert "DE (Germany) 2020" in out.out and "p95" in out.out
    assert figure.stat().st_size > 10_000


def test_grid_data_show_of_an_unknown_zone_is_a_one_line_error(capsys):
    code, out = run_cli(["grid-data", "show", "XX"], capsys)
    assert code == 2
    assert "unknown zone 'XX'" in out.err


def test_workload_import_and_describe_round_trip_a_native_file(tmp_path, capsys):
    source = tmp_path / "jobs.csv"
    source.write_text(
        "job_id,submit_time,gpus,work_gpu_h\na,0,1,2.0\nb,3600,8,16.0\nc,7200,1,0.1\n"
    )
    out = tmp_path / "jobs.parquet"
    code, captured = run_cli(
        ["workload", "import", "native", str(source), "--out", str(out)], capsys
    )
    assert code == 0, captured.err
    assert "3 rows read, 3 jobs imported" in captured.out
    code, captured = run_cli(["workload", "describe", str(out)], capsys)
    assert code == 0, captured.err
    text = captured.out
    assert "GPU count mix" in text and "33.3%" in text  # one job in three has 8 GPUs
    assert "< 10 min" in text and "1 - 4 h" in text


def test_workload_import_of_an_unknown_format_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("x\n")
    code, captured = run_cli(
        [
            "workload",
            "import",
            "slurm",
            str(tmp_path / "t.csv"),
            "--out",
            str(tmp_path / "o.parquet"),
        ],
        capsys,
    )
    assert code == 2
    assert "unknown trace format 'slurm'" in captured.err


def test_workload_import_can_give_the_jobs_deadlines(tmp_path, capsys):
    source = tmp_path / "jobs.csv"
    source.write_text("job_id,submit_time,gpus,work_gpu_h\na,0,1,2.0\nb,3600,8,16.0\n")
    out = tmp_path / "jobs.parquet"
    code, captured = run_cli(
        [
            "workload",
            "import",
            "native",
            str(source),
            "--out",
            str(out),
            "--flex",
            "deferrable_fraction=1.0",
            "--flex",
            "slack=fixed",
            "--flex",
            "slack_h=[6, 6]",
            "--seed",
            "3",
        ],
        capsys,
    )
    assert code == 0, captured.err
    jobs = pd.read_parquet(out)
    # deadline = submit + runtime (2 h on 1 GPU; 2 h on 8 GPUs) + 6 h of slack
    assert pd.to_numeric(jobs["deadline"]).tolist() == [8 * 3600.0, 3600.0 + 8 * 3600.0]


def test_a_usage_error_prints_usage_and_exits_2(capsys):
    code, captured = run_cli(["run", "--no-such-option"], capsys)
    assert code == 2
    assert "No such option" in captured.err or "no such option" in captured.err.lower()


def test_workload_import_runs_a_trace_importer_with_options(tmp_path, capsys):
    trace = tmp_path / "gaia.csv"
    trace.write_text("arrival_time,length,cpus\n0,3600,4\n60,7200,8\n")
    out = tmp_path / "jobs.csv"
    code, captured = run_cli(
        [
            "workload",
            "import",
            "gaia",
            str(trace),
            "--out",
            str(out),
            "--option",
            "unit=s",
            "--option",
            "cpus_per_gpu=4",
        ],
        capsys,
    )
    assert code == 0, captured.err
    assert "2 rows read, 2 jobs imported" in captured.out
    jobs = pd.read_csv(out)
    assert jobs["gpus"].tolist() == [1, 2]
    assert jobs["work_gpu_h"].tolist() == [1.0, 4.0]


def test_grid_data_list_flags_zone_years_with_many_filled_hours(capsys):
    from sim.cli import MANY_FILLED_HOURS
    from sim.grid.catalog import catalog

    many = int((catalog()["gaps_filled"] >= MANY_FILLED_HOURS).sum())
    code, out = run_cli(["grid-data", "list"], capsys)
    assert code == 0, out.err
    assert "hours" in out.out and "filled" in out.out  # the header may wrap
    assert out.out.count("(!)") == many + 1  # each flagged row, and the footnote
    assert f"(!) {many} zone-years have" in out.out


def test_the_printed_summary_groups_its_keys_and_explains_negative_shedding(tmp_path, capsys):
    """Every summary key with a value once, under its group, and no key whose value is null
    (a feature the run does not use: it stays null in summary.json); a negative shed (the
    quickstart's event: run_now ignores it) is explained in a line of its own."""
    from sim.results import SUMMARY_KEYS

    quickstart = REPO / "scenarios" / "quickstart.toml"
    args = ["run", str(quickstart), "--set", "duration_h=72", "--out", str(tmp_path)]
    code, out = run_cli(args, capsys)
    assert code == 0, out.err
    text = out.out
    summary = sim.Results.load(tmp_path).summary
    null = [key for key in SUMMARY_KEYS if summary[key] is None]
    assert "spot_evictions" in null and "cost_compute" in null
    for key in null:
        assert f"  {key} " not in text, key
    assert " - " not in text
    groups = ["jobs", "energy and carbon", "WAN", "demand response", "run"]
    at = [text.index(f"│ {g} ") for g in groups]
    assert at == sorted(at)
    # no services, no job trained to a target, no [rebound] in the quickstart
    assert "inference services" not in text
    assert "training to a target" not in text and "user rebound" not in text
    hidden = ("requests_", "slo_", "ttft_", "tpot_", "tokens_", "rebound_", "function_")
    hidden_keys = ("targets_reached", "time_to_accuracy_mean_h", "energy_to_accuracy_mean_kwh")
    for key in SUMMARY_KEYS:
        if (
            not key.startswith(hidden)
            and key not in hidden_keys
            and ("serving" not in key and "per_1k" not in key)
            and key not in null
        ):
            assert text.count(f"  {key} ") == 1, key
    assert text.index("│   jobs_away_share") > text.index("│ WAN ")
    assert "dr_energy_shed_kwh < 0: the sites drew more energy" in text


def test_the_printed_summary_shows_training_and_rebound_when_the_run_has_them(capsys):
    scenario = REPO / "scenarios" / "energy_efficient_config.toml"
    code, out = run_cli(["run", str(scenario), "--set", "rebound.resubmit_elasticity=0.5"], capsys)
    assert code == 0, out.err
    for text in (
        "│ training to a target",
        "  targets_reached ",
        "│ user rebound",
        "  rebound_jobs ",
    ):
        assert text in out.out, text


def test_the_printout_leads_with_a_headline_of_carbon_per_gpu_hour_at_each_site(capsys):
    """With jobs at several sites the first line says what the run found: each site's
    operational carbon per GPU-hour of its jobs, and the dirtiest over the cleanest; the
    README quotes the quickstart's own line."""
    quickstart = REPO / "scenarios" / "quickstart.toml"
    code, out = run_cli(["run", str(quickstart)], capsys)
    assert code == 0, out.err
    headline = out.out.splitlines()[0]
    assert headline.startswith("headline: a GPU-hour of work emits 7.4x the carbon at london")
    assert "frankfurt 0.117" in headline and "paris 0.0212" in headline
    assert f"\n{headline}\n" in (REPO / "README.md").read_text()
    assert "cost" not in out.out  # the quickstart gives no prices: it says nothing of cost


def test_a_one_site_run_leads_with_its_total_carbon(capsys):
    code, out = run_cli(["run", str(REPO / "scenarios" / "time_shifting.toml"), "--set",
                         "duration_h=24"], capsys)  # fmt: skip
    assert code == 0, out.err
    assert out.out.splitlines()[0].startswith("headline: ")
    assert "kg CO2 in all" in out.out.splitlines()[0]
