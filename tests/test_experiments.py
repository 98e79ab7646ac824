"""Sweeps: a grid of parameters x seeds, on local processes or Dask, cached and resumable,
with failing runs recorded; statistics over the summary table."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

import sim
from sim.errors import DcsimError, ScenarioError
from sim.study.experiments import parse_grid_item, parse_seeds, plan
from sim.study.stats import mean_ci, paired_differences
from tests.conftest import REPO, run_cli

QUICKSTART = REPO / "scenarios" / "quickstart.toml"
SMALL = ("duration_h=24", "demand_response=[]")  # a day of the quickstart: ~0.1 s a run
GRID = {"policy": ["run_now", "wait_awhile"]}
WALL_CLOCK = ["wall_s", "sim_wall_s"]  # the only columns that may differ between backends


def deterministic(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.drop(columns=WALL_CLOCK).reset_index(drop=True)


def failing_policy(tmp_path) -> str:
    path = tmp_path / "boom.py"
    path.write_text(
        "class Boom:\n"
        "    def decide(self, state):\n"
        "        raise RuntimeError('boom at decision')\n"
    )
    return f"{path}:Boom"


# --- what a sweep writes -------------------------------------------------------------------


def test_a_sweep_writes_one_row_per_run_with_parameters_seed_metrics_and_wall_time(tmp_path):
    summary = sim.sweep(QUICKSTART, GRID, seeds=[0, 1], out=tmp_path, overrides=SMALL, workers=1)
    on_disk = pd.read_parquet(tmp_path / "summary.parquet")
    pd.testing.assert_frame_equal(on_disk, summary.reset_index(drop=True), check_like=False)
    assert list(summary["policy"]) == ["run_now", "run_now", "wait_awhile", "wait_awhile"]
    assert list(summary["seed"]) == [0, 1, 0, 1]
    assert (summary["status"] == "ok").all() and summary["error"].isna().all()
    assert set(sim.results.SUMMARY_KEYS) <= set(summary.columns)
    assert (summary["wall_s"] > 0).all() and (summary["jobs_submitted"] > 0).all()
    for row in summary.itertuples():  # each run's files, as `dcsim run --out` writes them
        results = sim.load_run(tmp_path, row.run_id)
        assert results.summary["carbon_total_kg"] == row.carbon_total_kg
        assert results.scenario.seed == row.seed
    assert sim.load_sweep(tmp_path).attrs["params"] == ["policy"]


def test_same_seed_same_workload_whatever_the_policy(tmp_path):
    summary = sim.sweep(QUICKSTART, GRID, seeds=[3], out=tmp_path, overrides=SMALL, workers=1)
    assert summary["jobs_submitted"].nunique() == 1
    assert summary["run_id"].nunique() == 2


def test_dask_local_cluster_with_two_workers_gives_the_same_summary_as_local_processes(tmp_path):
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    grid = {"policy": ["run_now", "wait_awhile"], "sites[0].pue": [1.1, 1.4]}
    kwargs = {"seeds": [0, 1], "overrides": SMALL, "workers": 2}
    sim.sweep(QUICKSTART, grid, out=tmp_path / "local", backend="local", **kwargs)
    sim.sweep(QUICKSTART, grid, out=tmp_path / "dask", backend="dask", **kwargs)
    local = pd.read_parquet(tmp_path / "local" / "summary.parquet")
    dask = pd.read_parquet(tmp_path / "dask" / "summary.parquet")
    assert len(local) == 8
    assert (dask["status"] == "ok").all(), dask["error"].dropna().tolist()
    pd.testing.assert_frame_equal(deterministic(local), deterministic(dask))
    assert local["carbon_total_kg"].nunique() == 8  # the grid keys did change the runs


# --- resuming and failures -----------------------------------------------------------------


def test_an_interrupted_sweep_resumes_without_recomputing_finished_runs(tmp_path):
    out = tmp_path / "sweep"

    def interrupt_after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sim.sweep(QUICKSTART, GRID, seeds=[0, 1, 2], out=out, overrides=SMALL, workers=1,
                  progress=interrupt_after_two)  # fmt: skip
    partial = pd.read_parquet(out / "summary.parquet")  # what finished is on disk
    assert len(partial) == 2
    finished = {r: (out / "runs" / r / "run.json").stat().st_mtime_ns for r in partial["run_id"]}

    resumed = sim.sweep(QUICKSTART, GRID, seeds=[0, 1, 2], out=out, overrides=SMALL, workers=1)
    assert resumed.attrs["runs_cached"] == 2 and resumed.attrs["runs_executed"] == 4
    for run_id, mtime_ns in finished.items():  # not written again
        assert (out / "runs" / run_id / "run.json").stat().st_mtime_ns == mtime_ns
    fresh = sim.sweep(QUICKSTART, GRID, seeds=[0, 1, 2], out=tmp_path / "fresh",
                      overrides=SMALL, workers=1)  # fmt: skip
    pd.testing.assert_frame_equal(deterministic(resumed), deterministic(fresh))
    assert not list((out / "runs").glob(".*"))  # no half-written run folders


def test_a_failing_run_is_recorded_with_its_error_and_the_sweep_goes_on(tmp_path):
    grid = {"policy": ["run_now", failing_policy(tmp_path)]}
    summary = sim.sweep(QUICKSTART, grid, seeds=[0, 1], out=tmp_path / "s", overrides=SMALL,
                        workers=2)  # fmt: skip
    failed = summary[summary["status"] == "failed"]
    assert len(failed) == 2 and summary.attrs["runs_failed"] == 2
    expected = "PolicyError: policy Boom: decide(state) raised RuntimeError: boom at decision"
    assert (failed["error"] == expected).all()
    assert failed["carbon_total_kg"].isna().all()
    assert (summary.loc[summary["policy"] == "run_now", "status"] == "ok").all()
    run_dir = tmp_path / "s" / "runs" / failed["run_id"].iloc[0]
    assert "boom at decision" in (run_dir / "error.txt").read_text()  # the traceback
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"

    again = sim.sweep(QUICKSTART, grid, seeds=[0, 1], out=tmp_path / "s", overrides=SMALL,
                      workers=1)  # fmt: skip
    assert again.attrs["runs_cached"] == 2 and again.attrs["runs_executed"] == 2  # retried


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """A finished sweep of two runs (run_now and wait_awhile, seed 0) and its summary."""
    out = tmp_path_factory.mktemp("finished") / "sweep"
    return out, sim.sweep(QUICKSTART, GRID, seeds=[0], out=out, overrides=SMALL, workers=1)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edit_summary_value(path: Path) -> None:  # still valid JSON, one number changed
    summary = json.loads(path.read_text())
    summary["carbon_total_kg"] *= 2
    path.write_text(json.dumps(summary, indent=2))


DAMAGE = {
    "jobs.parquet truncated": ("jobs.parquet", truncate, "has changed since the run finished"),
    "summary.json not JSON": (
        "summary.json",
        lambda p: p.write_text('{"jobs_submitted": 1'),
        "has changed since the run finished",
    ),
    "summary.json edited": ("summary.json", edit_summary_value, "has changed since the run"),
    "power.parquet deleted": ("power.parquet", Path.unlink, "cannot be read (No such file"),
    "run.json not JSON": ("run.json", lambda p: p.write_text("{"), "cannot be read (Expecting"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_run_is_recomputed_with_a_line_saying_which_file_and_why(
    damage, finished_sweep, tmp_path, capsys
):
    fresh_out, fresh = finished_sweep
    out = tmp_path / "sweep"
    shutil.copytree(fresh_out, out)
    name, spoil, reason = DAMAGE[damage]
    run_id = fresh["run_id"].iloc[1]
    spoil(out / "runs" / run_id / name)

    again = sim.sweep(QUICKSTART, GRID, seeds=[0], out=out, overrides=SMALL, workers=1)
    err = capsys.readouterr().err
    assert f"recomputing run 1 (policy=wait_awhile, seed 0): runs/{run_id}/{name} {reason}" in err
    assert again.attrs["runs_executed"] == 1 and again.attrs["runs_cached"] == 1
    pd.testing.assert_frame_equal(deterministic(again), deterministic(fresh))
    pd.testing.assert_frame_equal(
        sim.load_run(out, run_id).jobs, sim.load_run(fresh_out, run_id).jobs
    )

    sim.sweep(QUICKSTART, GRID, seeds=[0], out=out, overrides=SMALL, workers=1)
    assert "recomputing" not in capsys.readouterr().err  # repaired: reused as it is


def test_the_cache_key_covers_parameters_seed_and_the_files_the_scenario_names(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submit_time,gpus,work_gpu_h\n1,0,1,1\n2,60,2,4\n")
    sets = [*SMALL, f'workload={{file = "{jobs}"}}']
    ids = [s.run_id for s in plan(QUICKSTART, {"sites[0].pue": [1.1, 1.2]}, [0, 1], sets)]
    assert len(set(ids)) == 4
    assert ids == [s.run_id for s in plan(QUICKSTART, {"sites[0].pue": [1.1, 1.2]}, [0, 1], sets)]
    os.utime(jobs, ns=(1, 1))  # the job file changed
    assert ids[0] != plan(QUICKSTART, {"sites[0].pue": [1.1]}, [0], sets)[0].run_id


# --- input ---------------------------------------------------------------------------------


def test_a_bad_combination_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ScenarioError, match=r"sites\[0\]\.pue.*0\.5.*grid sites\[0\]\.pue=0\.5"):
        sim.sweep(QUICKSTART, {"sites[0].pue": [1.2, 0.5]}, out=tmp_path / "s")
    with pytest.raises(ScenarioError, match="unknown policy 'nope'"):
        sim.sweep(QUICKSTART, {"policy": ["run_now", "nope"]}, out=tmp_path / "s")
    with pytest.raises(ScenarioError, match="--seeds"):
        sim.sweep(QUICKSTART, {"seed": [1, 2]}, out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("option", [["--dask"], ["--scheduler", "tcp://127.0.0.1:8786"]])
def test_dask_options_without_dask_installed_say_what_to_install(
    option, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    monkeypatch.setitem(sys.modules, "dask", None)
    code, out = run_cli(["sweep", str(QUICKSTART), *option, "--out", str(tmp_path / "s")], capsys)
    assert code == 2
    assert out.err.startswith("error: ") and len(out.err.strip().splitlines()) == 1
    assert "pip install 'dcsim[dask]'" in out.err
    assert not (tmp_path / "s").exists()
    with pytest.raises(DcsimError, match=r"pip install 'dcsim\[dask\]'"):
        sim.sweep(QUICKSTART, out=tmp_path / "s", backend="dask")


def test_grid_values_are_toml_values_split_on_top_level_commas():
    assert parse_grid_item("sites[0].pue=1.1, 1.3") == ("sites[0].pue", [1.1, 1.3])
    assert parse_grid_item("policy=run_now,wait_awhile") == ("policy", ["run_now", "wait_awhile"])
    assert parse_grid_item('policy={name="static_cap", params={watts=250}},run_now') == (
        "policy",
        [{"name": "static_cap", "params": {"watts": 250}}, "run_now"],
    )
    assert parse_grid_item("workload.synthetic.slack_h=[2, 6],[6, 24]")[1] == [[2, 6], [6, 24]]
    with pytest.raises(ScenarioError, match="key=value1,value2"):
        parse_grid_item("policy")


def test_seeds_are_ranges_and_lists():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1,5,2-3") == [1, 5, 2, 3]
    for bad in ("a", "3-1", "1-"):
        with pytest.raises(ScenarioError, match="--seeds"):
            parse_seeds(bad)


def test_a_policy_table_in_the_grid_runs_with_its_parameters(tmp_path):
    grid = {"policy": [{"name": "static_cap", "params": {"watts": 200}}, "run_now"]}
    summary = sim.sweep(QUICKSTART, grid, seeds=[0], out=tmp_path, overrides=SMALL, workers=1)
    assert summary["policy"].iloc[0] == '{"name": "static_cap", "params": {"watts": 200}}'
    capped, uncapped = summary["jct_mean_h"]
    assert capped > uncapped


def test_set_policy_params_apply_to_every_policy_of_a_grid_of_policies():
    grid = {"policy": ["run_now", "lowest_carbon_site"]}
    specs = plan(QUICKSTART, grid, [0], [*SMALL, "policy.params.backfill=false"])
    for spec in specs:
        assert tomllib.loads(spec.scenario_toml)["policy"]["params"] == {"backfill": False}


def test_a_set_policy_param_that_a_policy_of_the_grid_does_not_take_is_an_error_naming_it():
    grid = {"policy": ["run_now", "wait_awhile"]}
    with pytest.raises(ScenarioError, match=r"run_now has no parameter 'margin_s'.*grid"):
        plan(QUICKSTART, grid, [0], [*SMALL, "policy.params.margin_s=60"])


# --- the command ---------------------------------------------------------------------------


def test_dcsim_sweep_prints_means_with_intervals_and_exits_1_when_a_run_failed(tmp_path, capsys):
    args = [
        "sweep",
        str(QUICKSTART),
        "--set",
        "duration_h=24",
        "--set",
        "demand_response=[]",
        "--seeds",
        "0-1",
        "--workers",
        "1",
    ]
    code, out = run_cli([*args, "--grid", "policy=run_now", "--out", str(tmp_path / "a")], capsys)
    assert code == 0, out.err
    assert "±" in out.out and "2 runs: 2 run, 0 reused, 0 failed" in out.out
    code, out = run_cli(
        [*args, "--grid", f"policy={failing_policy(tmp_path)}", "--out", str(tmp_path / "b")],
        capsys,
    )
    assert code == 1
    assert "failed: " in out.err and "RuntimeError: boom at decision" in out.err
    code, out = run_cli([*args, "--grid", "sites[9].pue=1.2", "--out", str(tmp_path / "c")], capsys)
    assert code == 2 and out.err.startswith("error: grid sites[9].pue")


def test_dcsim_sweep_over_policies_prints_changes_with_paired_bootstrap_intervals(tmp_path, capsys):
    args = ["sweep", str(QUICKSTART), *[a for s in SMALL for a in ("--set", s)], "--seeds", "0-2"]
    args += ["--grid", "policy=run_now,wait_awhile", "--workers", "1"]
    code, out = run_cli([*args, "--out", str(tmp_path / "a")], capsys)
    assert code == 0, out.err
    text = " ".join(out.out.split())
    assert "change vs run_now, % [95% paired bootstrap interval over seeds 0-2" in text
    summary = sim.load_sweep(tmp_path / "a")
    row = paired_differences(summary, "carbon_total_kg").iloc[0]
    assert row["change_pct_low"] < row["change_pct_high"]
    assert re.search(r"wait_awhile .*\[-?[0-9.]+, -?[0-9.]+\]", text)
    code, out = run_cli([*args, "--baseline", "lowest", "--out", str(tmp_path / "b")], capsys)
    assert code == 2
    assert out.err.strip() == (
        "error: --baseline lowest: not among the swept policies (run_now, wait_awhile)"
    )


# --- statistics ----------------------------------------------------------------------------


def test_mean_ci_is_the_student_t_interval_over_seeds():
    values = np.array([10.0, 12.0, 11.0, 15.0])
    frame = pd.DataFrame({"policy": "a", "seed": range(4), "status": "ok", "x": values})
    row = mean_ci(frame, ["policy"], ["x"]).iloc[0]
    low, high = scipy_stats.t.interval(0.95, 3, loc=values.mean(), scale=scipy_stats.sem(values))
    assert row["runs"] == 4 and row["x_mean"] == pytest.approx(12.0)
    assert (row["x_ci_low"], row["x_ci_high"]) == pytest.approx((low, high))


def test_paired_differences_cancel_what_the_seeds_share():
    seeds = np.arange(5)
    seed_effect = np.array([100.0, 300.0, 50.0, 500.0, 200.0])  # large, shared by both
    frame = pd.DataFrame(
        {
            "policy": ["run_now"] * 5 + ["green"] * 5 + ["broken"] * 2,
            "seed": [*seeds, *seeds, 0, 1],
            "status": ["ok"] * 10 + ["failed"] * 2,
            "carbon_kg": [*seed_effect, *(seed_effect - 10.0 + 0.1 * seeds), np.nan, np.nan],
        }
    )
    frame.attrs["params"] = ["policy"]
    diff = paired_differences(frame, "carbon_kg", baseline="run_now")
    assert list(diff["policy"]) == ["green"]  # failed runs take no part
    row = diff.iloc[0]
    assert row["pairs"] == 5
    assert row["diff_mean"] == pytest.approx(-9.8)
    assert row["diff_ci_high"] < 0 and row["diff_ci_high"] - row["diff_ci_low"] < 1.0
    assert row["change_pct"] == pytest.approx(-9.8 / seed_effect.mean() * 100)
    with pytest.raises(ValueError, match="no finished runs with policy = 'fifo'"):
        paired_differences(frame, "carbon_kg", baseline="fifo")


def test_dcsim_sweep_runs_on_an_existing_dask_cluster(tmp_path, capsys):
    LocalCluster = pytest.importorskip("distributed", reason="no dask extra").LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        code, out = run_cli(
            ["sweep", str(QUICKSTART), *[a for s in SMALL for a in ("--set", s)],
             "--grid", "policy=run_now,wait_awhile", "--seeds", "0-1",
             "--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "remote")],
            capsys,
        )  # fmt: skip
    assert code == 0, out.err
    local = sim.sweep(QUICKSTART, GRID, seeds=[0, 1], out=tmp_path / "local", overrides=SMALL)
    remote = pd.read_parquet(tmp_path / "remote" / "summary.parquet")
    pd.testing.assert_frame_equal(deterministic(remote), deterministic(local))
    assert "4 runs: 4 run, 0 reused, 0 failed" in out.out


def _default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_dcsim_sweep_with_what_finished_kept_and_summarised(tmp_path):
    out = tmp_path / "sweep"
    args = ["sweep", str(QUICKSTART), "--grid", "policy=run_now,wait_awhile,carbon_time",
            "--seeds", "0-40", "--workers", "2", "--out", str(out)]  # fmt: skip
    command = [sys.executable, "-c", "from sim.cli import main; main()", *args]
    # Ctrl-C's default action in the sweep even when the suite runs as a background job
    # (a shell without job control starts those with SIGINT ignored, and Python keeps an
    # ignored SIGINT ignored): a run under `nohup bash .ci/run &` finished the whole sweep.
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               start_new_session=True, preexec_fn=_default_ctrl_c)  # fmt: skip
    deadline = time.monotonic() + 120
    while not list((out / "runs").glob("[0-9a-f]*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "runs finished, kept in" in err and "the same command resumes" in err
    partial = pd.read_parquet(out / "summary.parquet")
    assert 1 <= len(partial) < 123 and (partial["status"] == "ok").all()
    assert not list((out / "runs").glob(".*"))  # no half-written run folders

    first_seeds = sim.sweep(QUICKSTART, {"policy": ["run_now", "wait_awhile", "carbon_time"]},
                            seeds=[0, 1], out=out, workers=2)  # fmt: skip
    finished = set(partial["run_id"])
    assert first_seeds.attrs["runs_cached"] == len(finished & set(first_seeds["run_id"]))


def test_a_grid_policy_refusing_its_parameter_names_the_combination_before_the_users_frames(
    tmp_path,
):
    policy = tmp_path / "mine.py"
    policy.write_text(
        "class Mine:\n"
        "    def __init__(self, watts=1.0):\n"
        "        self.watts = float(watts)\n"
        "    def decide(self, state):\n"
        "        return []\n"
    )
    grid = {"policy": [{"name": f"{policy}:Mine", "params": {"watts": "abc"}}]}
    with pytest.raises(ScenarioError) as e:
        plan(QUICKSTART, grid, [0], SMALL)
    first, *frames = str(e.value).splitlines()
    assert first.startswith(f"policy.params: {policy}:Mine: could not convert string to float")
    assert first.endswith(")") and "(grid policy=" in first
    assert frames == [f'  File "{policy}", line 3, in __init__', "    self.watts = float(watts)"]
