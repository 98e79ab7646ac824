"""Demand-response events: announced to policies, and measured exactly in the summary."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import sim
from sim.api import Resume, SetCap, Start, Suspend
from sim.models.hardware import estimate
from tests.conftest import make_scenario, write_jobs

# Four 1-GPU jobs fill the base site's four A100s for ten hours.
JOBS = [
    {"job_id": f"j{i}", "submit_time": 0, "gpus": 1, "work_gpu_h": 10.0, "profile": "compute-bound"}
    for i in range(4)
]
ACTIVE_W = estimate("A100-80GB", "compute-bound").power_w
FULL_KW = 4 * (ACTIVE_W + 40.0) * 1.5 / 1000  # facility power with all GPUs busy


def event(**kw):
    return {"site": "a", "start": "2020-06-01T02:00:00Z", "duration_h": 2.0, **kw}


@dataclass
class CapDuringEvents:
    """Starts everything; caps the site to `cap_w` while an event is on."""

    cap_w: float

    def decide(self, state):
        actions = [Start(j, "a") for j in state.pending]
        on = any(e.start_s <= state.now_s < e.end_s for e in state.demand_response("a"))
        wanted = self.cap_w if on else None
        if state.site_cap_w("a") != wanted:
            actions.append(SetCap("a", wanted))
        return actions


def test_an_uncooperative_site_overshoots_by_the_hand_computed_energy(tmp_path):
    scenario = make_scenario(tmp_path, JOBS, demand_response=[event(limit_kw=2.0)])
    s = sim.simulate(scenario, "run_now").summary
    assert s["dr_compliance"] == 0.0
    assert s["dr_overshoot_kwh"] == pytest.approx((FULL_KW - 2.0) * 2.0, rel=1e-12)


def test_capping_during_the_event_complies_fully(tmp_path):
    scenario = make_scenario(tmp_path, JOBS, demand_response=[event(limit_kw=2.0)])
    r = sim.simulate(scenario, CapDuringEvents(cap_w=290.0))
    assert r.summary["dr_compliance"] == 1.0
    assert r.summary["dr_overshoot_kwh"] == 0.0
    caps = r.events[r.events["kind"] == "setcap"]
    assert caps["time_s"].tolist() == [2 * 3600.0, 4 * 3600.0]


def test_a_percentage_limit_is_taken_below_the_mean_power_of_the_hour_before_notice(tmp_path):
    ev = event(reduction_pct=20.0, notice_h=1.0)
    r = sim.simulate(make_scenario(tmp_path, JOBS, demand_response=[ev]), "run_now")
    notice = r.events[r.events["kind"] == "dr_notice"].iloc[0]
    assert notice["time_s"] == 3600.0
    assert notice["value"] == pytest.approx(0.8 * FULL_KW, rel=1e-12)
    kinds = r.events[r.events["kind"].str.startswith("dr_")]
    assert list(zip(kinds["kind"], kinds["time_s"], strict=True)) == [
        ("dr_notice", 3600.0),
        ("dr_start", 7200.0),
        ("dr_end", 14400.0),
    ]


def test_policies_that_ask_for_signal_steps_are_called_at_each_step(tmp_path):
    calls = []

    @dataclass
    class Watcher:
        signal_steps = True

        def decide(self, state):
            calls.append(state.now_s)
            return []

    scenario = make_scenario(tmp_path, JOBS[:1], duration_h=5.0)
    scenario = scenario.model_copy(
        update={
            "sites": [
                scenario.sites[0].model_copy(
                    update={"carbon": sim.config.CarbonConfig(zone="DE", year=2020)}
                )
            ]
        }
    )
    sim.simulate(scenario, Watcher())
    assert calls == [0.0, 3600.0, 7200.0, 10800.0, 14400.0]


def test_event_metrics_are_measured_against_the_hour_before_notice(tmp_path):
    """Capping four busy GPUs to 290 W for a 2 h event: shed, peak and rebound by hand."""
    scenario = make_scenario(tmp_path, JOBS, demand_response=[event(limit_kw=2.0)])
    r = sim.simulate(scenario, CapDuringEvents(cap_w=290.0))
    capped = estimate("A100-80GB", "compute-bound", 290.0)
    capped_kw = 4 * (capped.power_w + 40.0) * 1.5 / 1000
    (row,) = r.dr_events.to_dict("records")
    assert row["baseline_kw"] == pytest.approx(FULL_KW, rel=1e-12)
    assert row["peak_kw"] == pytest.approx(capped_kw, rel=1e-12)
    assert row["energy_kwh"] == pytest.approx(2.0 * capped_kw, rel=1e-12)
    s = r.summary
    assert s["dr_energy_shed_kwh"] == pytest.approx(2.0 * (FULL_KW - capped_kw), rel=1e-9)
    assert s["dr_peak_reduction_kw"] == pytest.approx(FULL_KW - capped_kw, rel=1e-9)
    assert s["dr_rebound_peak_kw"] == pytest.approx(0.0, abs=1e-9)  # back to the baseline


def test_jobs_slowed_in_an_event_carry_their_slowdown_and_lost_work(tmp_path):
    scenario = make_scenario(tmp_path, JOBS, demand_response=[event(limit_kw=2.0)])
    r = sim.simulate(scenario, CapDuringEvents(cap_w=290.0))
    fraction = estimate("A100-80GB", "compute-bound", 290.0).throughput_fraction
    assert r.jobs["dr_slowdown"].tolist() == pytest.approx([1.0 / fraction] * 4, rel=1e-12)
    s = r.summary
    assert s["dr_jobs_affected"] == 4 and s["dr_jobs_paused"] == 0
    # Four reference GPUs (A100, compute-bound: speed 1) lose (1 - fraction) for 2 h each.
    assert s["dr_throughput_loss_gpu_h"] == pytest.approx(4 * 2.0 * (1.0 - fraction), rel=1e-9)
    assert s["slowdown_jain_index"] == pytest.approx(1.0)


@dataclass
class PauseDuringEvents:
    """Starts everything; suspends job j0 for the event and resumes it afterwards."""

    def decide(self, state):
        actions = [Start(j, "a") for j in state.pending]
        on = any(e.start_s <= state.now_s < e.end_s for e in state.demand_response("a"))
        if on:
            actions += [Suspend(j) for j in state.running if j.id == "j0"]
        else:
            actions += [Resume(j, "a") for j in state.suspended]
        return actions


def test_a_job_paused_through_an_event_loses_all_its_event_work(tmp_path):
    jobs = [{**j, "interruptible": True} for j in JOBS]
    scenario = make_scenario(tmp_path, jobs, demand_response=[event(limit_kw=2.0)])
    r = sim.simulate(scenario, PauseDuringEvents())
    s = r.summary
    assert s["dr_jobs_affected"] == 1 and s["dr_jobs_paused"] == 1  # the others lost nothing
    assert s["dr_throughput_loss_gpu_h"] == pytest.approx(2.0, rel=1e-9)  # j0's 2 h
    assert r.jobs["dr_slowdown"].tolist() == [float("inf"), 1.0, 1.0, 1.0]
    # Jain over the jobs' in-event throughput shares (0, 1, 1, 1): the paused job counts.
    assert s["slowdown_jain_index"] == pytest.approx(3**2 / (4 * 3))


def test_overlapping_events_count_their_common_time_once(tmp_path):
    events = [event(limit_kw=2.0), event(limit_kw=2.0, start="2020-06-01T03:00:00Z")]
    r = sim.simulate(make_scenario(tmp_path, JOBS, demand_response=events), CapDuringEvents(290.0))
    fraction = estimate("A100-80GB", "compute-bound", 290.0).throughput_fraction
    # Events 2-4 h and 3-5 h: 3 h of event time, not 4.
    assert r.summary["dr_throughput_loss_gpu_h"] == pytest.approx(4 * 3.0 * (1.0 - fraction))


def test_without_events_the_event_metrics_are_empty(tmp_path):
    s = sim.simulate(make_scenario(tmp_path, JOBS), "run_now").summary
    assert s["dr_compliance"] is None and s["dr_energy_shed_kwh"] == 0.0
    assert s["dr_jobs_affected"] == 0 and s["dr_throughput_loss_gpu_h"] == 0.0


# --- event generators ------------------------------------------------------------------


def test_periodic_checkpoint_stalls_are_not_counted_as_event_losses(tmp_path):
    jobs = [{**j, "checkpoint_gb": 360.0} for j in JOBS]  # a 3 min write every hour
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs)), "checkpoint_interval_h": 1}
    scenario = make_scenario(
        tmp_path,
        workload=workload,
        demand_response=[event(limit_kw=100.0)],  # never binds
    )
    r = sim.simulate(scenario, "run_now")
    assert r.jobs["dr_slowdown"].tolist() == pytest.approx([1.0] * 4)
    assert r.summary["dr_throughput_loss_gpu_h"] == pytest.approx(0.0, abs=1e-12)
    assert r.summary["dr_jobs_affected"] == 0
