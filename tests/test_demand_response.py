"""Demand-response events: announced to policies, and measured exactly in the summary."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import sim
from sim.api import SetCap, Start
from sim.hardware import estimate
from tests.conftest import make_scenario

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
                    update={"carbon": sim.scenario.CarbonConfig(zone="DE", year=2020)}
                )
            ]
        }
    )
    sim.simulate(scenario, Watcher())
    assert calls == [0.0, 3600.0, 7200.0, 10800.0, 14400.0]
