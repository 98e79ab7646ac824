"""Suspend and resume costs: checkpoint writes and reads at the site's storage bandwidth,
periodic checkpoints that stall a job and bound the work a preemption loses."""

from __future__ import annotations

import pytest

import sim
from sim.api import Migrate, Resume, Start, Suspend
from sim.models.hardware import GPU_CATALOG
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site, write_jobs

IDLE_W = GPU_CATALOG["A100-80GB"].idle_w
HOST_W, PUE = 40.0, 1.5  # the base site's


def one_job(tmp_path, checkpoint_gb: float, interval_h: float | None = None, **overrides):
    """One interruptible 1-GPU compute-bound job of 4 reference GPU-hours (4 h on an A100),
    checkpointing every `interval_h` of running (None: only when suspended or migrated)."""
    job = {
        "job_id": "j",
        "submit_time": 0,
        "gpus": 1,
        "work_gpu_h": 4.0,
        "profile": "compute-bound",
        "interruptible": True,
        "checkpoint_gb": checkpoint_gb,
    }
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", [job]))}
    if interval_h is not None:
        workload["checkpoint_interval_h"] = interval_h
    return make_scenario(tmp_path, workload=workload, **overrides)


def test_a_suspended_job_holds_its_gpus_at_idle_power_while_it_writes_its_checkpoint(tmp_path):
    scenario = one_job(tmp_path, checkpoint_gb=100.0)  # 50 s at 2 GB/s
    r = sim.simulate(scenario, Script({0: start, 1: suspend}))
    busy = r.power[["time_s", "busy_gpus"]].drop_duplicates("time_s", keep="last")
    assert busy.set_index("time_s")["busy_gpus"].loc[[3600.0, 3650.0]].tolist() == [1, 0]
    (job,) = r.jobs.to_dict("records")
    assert job["checkpoint_kwh"] == pytest.approx((IDLE_W + HOST_W) * PUE * 50 / 3.6e6)
    assert r.summary["energy_checkpoint_kwh"] == job["checkpoint_kwh"]
    kinds = r.events[r.events["job"] == "j"]["kind"].tolist()
    assert kinds == ["submit", "start", "suspend", "checkpoint", "unfinished"]


def test_a_resumed_job_first_reads_its_checkpoint_then_finishes_its_remaining_work(tmp_path):
    scenario = one_job(tmp_path, checkpoint_gb=100.0)  # 50 s to write, 50 s to read
    r = sim.simulate(scenario, Script({0: start, 1: suspend, 2: resume}))
    (job,) = r.jobs.to_dict("records")
    # 1 h of work before the suspension, 3 h after a 50 s read from t = 2 h.
    assert job["end_s"] == pytest.approx(2 * 3600 + 50 + 3 * 3600)
    assert job["checkpoint_kwh"] == pytest.approx(2 * (IDLE_W + HOST_W) * PUE * 50 / 3.6e6)
    assert job["work_lost_gpu_h"] == 0.0


def test_a_job_resumed_during_its_write_waits_for_the_write_then_reads(tmp_path):
    scenario = one_job(
        tmp_path, checkpoint_gb=100.0, sites=[site(gpus=[{"model": "A100-80GB", "count": 2}])]
    )
    r = sim.simulate(scenario, Script({0: start, 1: suspend, 1.005: resume}))  # 18 s later
    (job,) = r.jobs.to_dict("records")
    assert job["end_s"] == pytest.approx(3600 + 50 + 50 + 3 * 3600)


def test_a_migrating_job_writes_at_the_source_and_reads_at_the_destination(tmp_path):
    two_sites = [site(name="a"), site(name="b", checkpoint_read_gbps=1.0)]
    scenario = one_job(tmp_path, checkpoint_gb=100.0, sites=two_sites)
    r = sim.simulate(scenario, Script({0: start, 1: lambda s: [Migrate(s.running[0], "b")]}))
    (job,) = r.jobs.to_dict("records")
    # 50 s write at a, then a 100 s read at b (1 GB/s), then the remaining 3 h.
    assert job["end_s"] == pytest.approx(3600 + 50 + 100 + 3 * 3600)
    power = r.power.drop_duplicates(["site", "time_s"], keep="last").set_index(["site", "time_s"])
    assert power.loc[("a", 3650.0), "busy_gpus"] == 0  # freed when the write is done


def test_periodic_checkpoints_stall_the_job_and_bound_the_work_a_preemption_loses(tmp_path):
    # 36 GB at 2 GB/s: an 18 s write every hour of running.
    scenario = one_job(tmp_path, checkpoint_gb=36.0, interval_h=1.0)
    duty = 3600 / (3600 + 18)
    plain = sim.simulate(scenario, "run_now").jobs.iloc[0]
    assert plain["end_s"] == pytest.approx(4 * 3600 / duty)

    r = sim.simulate(scenario, Script({0: start, 2.5: suspend, 3: resume}))
    (job,) = r.jobs.to_dict("records")
    # Checkpoints at 1 h and 2 h of running: suspended at 2.5 h, it loses the last 0.5 h.
    assert job["work_lost_gpu_h"] == pytest.approx(0.5 * duty)
    done_by_2h = 2 * duty  # reference GPU-hours saved in the 2 h checkpoint
    read_s = 36.0 / 2.0
    assert job["end_s"] == pytest.approx(3 * 3600 + read_s + (4 - done_by_2h) * 3600 / duty)


def test_the_estimate_of_a_suspended_job_includes_reading_its_checkpoint(tmp_path):
    scenario = one_job(tmp_path, checkpoint_gb=100.0)
    h = PolicyHarness(scenario)
    h.advance(0.0).apply([Start(h.job("j"), "a")])
    h.advance(3600.0).apply([Suspend(h.job("j"))])
    h.advance(7200.0)
    runtime_s, _ = h.state.estimate(h.job("j"), "a")
    assert runtime_s == pytest.approx(50 + 3 * 3600)


# --- a policy that follows a script ---------------------------------------------------


def start(state):
    return [Start(j, "a") for j in state.pending]


def suspend(state):
    return [Suspend(j) for j in state.running]


def resume(state):
    return [Resume(j, "a") for j in state.suspended]


class Script:
    """Calls script[t](state) at the decision points at t hours (ticks every 18 s)."""

    tick_s = 18.0

    def __init__(self, script):
        self.script = dict(script)

    def decide(self, state):
        for t_h in sorted(self.script):
            if abs(state.now_s - t_h * 3600.0) < 1e-6:
                return self.script.pop(t_h)(state)
        return []
