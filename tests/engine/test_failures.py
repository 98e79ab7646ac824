"""GPU and node failures (`[failures]`): they follow their rate, a failed job loses its work
since its last checkpoint and is placed again, and work is conserved."""

from __future__ import annotations

import math

import pytest

import sim
from sim.config.runtime import LLAMA3_FAILURES_PER_GPU_H
from sim.errors import ScenarioError
from tests.conftest import (
    jobs_of,
    make_scenario,
    one_line_cli_error,
    site,
    trace_file,
    write_jobs,
)

H = 3600.0


def scenario_with(tmp_path, jobs, failures, interval_h=None, **overrides):
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs))}
    if interval_h is not None:
        workload["checkpoint_interval_h"] = interval_h
    return make_scenario(tmp_path, workload=workload, failures=failures, **overrides)


def trace(tmp_path, text: str) -> dict:
    return trace_file(tmp_path, "failures.csv", text)


def busy_scenario(tmp_path, rate_per_gpu_h, seed=1, interval_h=None):
    """64 GPUs kept busy for a week by jobs of 1 to 8 GPUs, with checkpoints of 10 GB (with
    periodic ones a failed job reads its last again, held 5 s: held GPUs fail too)."""
    jobs = jobs_of([1, 2, 4, 8] * 40, work_gpu_h=80.0, checkpoint_gb=10.0)
    return scenario_with(
        tmp_path,
        jobs,
        {"rate_per_gpu_h": rate_per_gpu_h},
        interval_h,
        seed=seed,
        duration_h=168.0,
        sites=[site(gpus=[{"model": "A100-80GB", "count": 64}])],
    )


@pytest.mark.parametrize("interval_h", [None, 1.0])
def test_failures_follow_their_rate_per_gpu_hour_of_running_jobs(tmp_path, interval_h):
    rate = 0.04
    r = sim.simulate(busy_scenario(tmp_path, rate, interval_h=interval_h))
    running_gpu_h = r.jobs["gpu_h"].sum()  # run_now suspends nothing: all of it running
    expected = rate * running_gpu_h
    assert expected > 300
    assert abs(r.summary["failures"] - expected) < 4 * math.sqrt(expected)
    assert r.summary["failures"] == (r.events["kind"] == "fail").sum() == r.jobs["failures"].sum()


@pytest.mark.parametrize("interval_h", [None, 1.0])
def test_work_is_conserved_work_done_is_work_needed_plus_work_lost(tmp_path, interval_h):
    jobs = jobs_of([1, 2, 1, 4] * 3, work_gpu_h=12.0)  # no checkpoint to write or read
    scenario = scenario_with(tmp_path, jobs, {"rate_per_gpu_h": 0.1}, interval_h, duration_h=400.0)
    r = sim.simulate(scenario)
    done = r.jobs[r.jobs["state"] == "completed"]
    assert len(done) == len(jobs) and r.summary["failures"] > 10
    # On A100-80GB, uncapped, one GPU-hour is one reference GPU-hour of work.
    assert done["gpu_h"].to_numpy() == pytest.approx(
        (done["work_gpu_h"] + done["work_lost_failures_gpu_h"]).to_numpy(), rel=1e-9
    )
    assert r.summary["work_lost_failures_gpu_h"] == pytest.approx(
        r.jobs["work_lost_failures_gpu_h"].sum()
    )
    assert r.summary["work_lost_gpu_h"] == 0.0  # preemption losses are counted apart
    fails = r.events[r.events["kind"] == "fail"]
    assert fails["value"].sum() == pytest.approx(r.summary["work_lost_failures_gpu_h"])
    if interval_h is not None:  # never more than an interval of work per failure
        gpus = fails["job"].map(dict(zip(r.jobs["job_id"], r.jobs["gpus"], strict=True)))
        assert (fails["value"] <= gpus.astype(float) * interval_h + 1e-9).all()


def test_without_periodic_checkpoints_a_failed_job_starts_again_from_scratch(tmp_path):
    failures = trace(tmp_path, "time_h,site\n1.5,a\n")
    r = sim.simulate(scenario_with(tmp_path, jobs_of([1], 4.0, checkpoint_gb=100.0), failures))
    (job,) = r.jobs.to_dict("records")
    assert job["failures"] == 1
    assert job["work_lost_failures_gpu_h"] == pytest.approx(1.5)
    assert job["end_s"] == pytest.approx(1.5 * H + 4 * H)  # no checkpoint to read
    assert job["checkpoint_kwh"] == 0.0
    events = r.events[r.events["job"] == "j0"]
    assert events["kind"].tolist() == ["submit", "start", "fail", "start", "finish"]
    assert events["time_s"].tolist()[2:4] == [1.5 * H, 1.5 * H]  # placed again at once


def test_with_periodic_checkpoints_a_failed_job_reads_its_last_checkpoint_again(tmp_path):
    failures = trace(tmp_path, "time_h,site\n1.5,a\n")
    scenario = scenario_with(
        tmp_path, jobs_of([1], 4.0, checkpoint_gb=100.0), failures, interval_h=1.0
    )
    r = sim.simulate(scenario)
    (job,) = r.jobs.to_dict("records")
    duty = H / (H + 50.0)  # 50 s to write 100 GB at 2 GB/s every hour of running
    # The last checkpoint came after 1 h of running: the half hour since is lost.
    assert job["work_lost_failures_gpu_h"] == pytest.approx(0.5 * duty)
    left_gpu_s = 4 * H - H * duty
    # Placed again at 1.5 h, it first reads its checkpoint (50 s at 2 GB/s).
    assert job["end_s"] == pytest.approx(1.5 * H + 50.0 + left_gpu_s / duty)


def test_a_trace_failure_hits_a_running_job_at_its_site_weighted_by_gpus(tmp_path):
    rows = "".join(f"{0.1 * k:.1f},a\n" for k in range(1, 201))
    failures = trace(tmp_path, "time_h,site\n" + rows)
    scenario = scenario_with(tmp_path, jobs_of([1, 3], work_gpu_h=1e4), failures)
    r = sim.simulate(scenario)
    counts = r.jobs.set_index("job_id")["failures"]
    assert counts.sum() == 200
    # The 3-GPU job is hit with probability 3/4: within 4 sigma of 150.
    assert abs(counts["j1"] - 150) < 4 * math.sqrt(200 * 0.75 * 0.25)


def test_a_trace_failure_at_a_site_without_running_jobs_interrupts_nothing(tmp_path):
    failures = trace(tmp_path, "time_h,site\n1,b\n30,a\n")  # b runs nothing; 30 h is past
    scenario = scenario_with(
        tmp_path,
        jobs_of([1], 4.0),
        failures,
        sites=[site(), site(name="b", lat=48.9, lon=2.35)],
    )
    r = sim.simulate(scenario)
    assert r.summary["failures"] == 0
    assert r.jobs["end_s"].tolist() == [4 * H]


def test_failures_are_reproducible_by_seed_and_move_no_other_draw(tmp_path):
    def run(seed, failures=True):
        scenario = busy_scenario(tmp_path, 0.02, seed=seed)
        if not failures:
            scenario = scenario.model_copy(update={"failures": None})
        return sim.simulate(scenario)

    a, b, c = run(1), run(1), run(2)
    assert a.summary["failures"] == b.summary["failures"]
    assert a.jobs.equals(b.jobs)
    assert a.jobs["failures"].tolist() != c.jobs["failures"].tolist()
    # A synthetic workload draws the same jobs with and without failures.
    syn = {
        "synthetic": {"arrival_rate_per_h": 5.0, "duration": {"dist": "exponential", "mean_h": 2.0}}
    }
    with_f = sim.simulate(make_scenario(workload=syn, failures={"rate_per_gpu_h": 0.05}))
    without = sim.simulate(make_scenario(workload=syn))
    assert with_f.jobs["work_gpu_h"].equals(without.jobs["work_gpu_h"])
    assert with_f.summary["failures"] > 0


def test_without_failures_every_summary_key_and_column_is_zero():
    r = sim.simulate(make_scenario())
    assert r.summary["failures"] == 0
    assert r.summary["work_lost_failures_gpu_h"] == 0.0
    assert (r.jobs["failures"] == 0).all()
    assert (r.jobs["work_lost_failures_gpu_h"] == 0.0).all()


def test_the_llama3_rate_is_419_interruptions_in_54_days_on_16384_gpus():
    assert LLAMA3_FAILURES_PER_GPU_H == pytest.approx(1.973e-5, rel=1e-3)
    scenario = make_scenario(failures={"rate_per_gpu_h": "llama3"})
    assert scenario.failures is not None
    assert scenario.failures.rate() == LLAMA3_FAILURES_PER_GPU_H


@pytest.mark.parametrize(
    ("failures", "fragment"),
    [
        ({}, "failures: give exactly one of rate_per_gpu_h or trace"),
        ({"rate_per_gpu_h": -1}, 'failures.rate_per_gpu_h: must be in [0, 1] or "llama3", got -1'),
        ({"rate_per_gpu_h": 2}, 'failures.rate_per_gpu_h: must be in [0, 1] or "llama3", got 2'),
        ({"rate_per_gpu_h": 1e-5, "trace": "f.csv"}, "give exactly one"),
    ],
)
def test_a_bad_failures_table_is_a_scenario_error(failures, fragment):
    with pytest.raises(ScenarioError) as e:
        make_scenario(failures=failures)
    assert fragment in str(e.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("time,site\n1,a\n", ":1: the header must be time_h,site"),
        ("time_h,site\n1,a\nsoon,a\n", ":3: time_h must be a number >= 0, got 'soon'"),
        ("time_h,site\n-2,a\n", ":2: time_h must be a number >= 0, got '-2'"),
        ("time_h,site\n1,z\n", ":2: unknown site 'z' (sites: a)"),
        ("time_h,site\n1,a,x\n", ":2: expected 2 fields (time_h,site)"),
    ],
)
def test_a_bad_trace_row_is_one_error_naming_the_file_the_line_and_the_value(
    tmp_path, text, fragment
):
    failures = trace(tmp_path, text)
    with pytest.raises(ScenarioError) as e:
        sim.simulate(scenario_with(tmp_path, jobs_of([1], 1.0), failures))
    message = str(e.value)
    assert message.startswith(f"failures.trace: {tmp_path / 'failures.csv'}:")
    assert fragment in message and "\n" not in message


def test_the_cli_reports_a_bad_trace_on_one_line_with_exit_2(tmp_path, capsys):
    files = {"failures.csv": "time_h,site\nlater,a\n"}
    line = one_line_cli_error(tmp_path, capsys, files, '[failures]\ntrace = "failures.csv"')
    assert "failures.csv:2: time_h must be a number >= 0, got 'later'" in line
