"""The grid meter: a site with on-site energy is billed and measured for demand response on
its grid import (the site balance's steps), not its facility power; `SetBattery`'s import
cap holds the import in a run; `peak_shaving` lowers the demand charge to the peak
computed by hand."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import sim
from policies import REGISTRY
from policies.peak_shaving import PeakShaving
from sim.api import SetBattery
from sim.market.billing import interval_peaks_kw
from sim.models.hardware import estimate
from tests.conftest import make_scenario, site
from tests.engine.test_services import H100, TWO_SITES, serving_scenario

# Four 1-GPU jobs fill the base site's four A100s for ten hours from 02:00 UTC.
JOBS = [
    {
        "job_id": f"j{i}",
        "submit_time": 7200,
        "gpus": 1,
        "work_gpu_h": 10.0,
        "profile": "compute-bound",
    }
    for i in range(4)
]
FULL_KW = 4 * (estimate("A100-80GB", "compute-bound").power_w + 40.0) * 1.5 / 1000
RATE_PER_KWH, DEMAND_PER_KW_MONTH = 0.10, 10.0
JUNE_COVERED = 1.0 / 30.0  # a day of June
FLAT = [{"days": "all", "start_hour": 0, "end_hour": 24, "rate_per_kwh": RATE_PER_KWH}]
TARIFF = {
    "kind": "tou",
    "timezone": "UTC",
    "periods": FLAT,
    "demand_charge_per_kw_month": DEMAND_PER_KW_MONTH,
    "demand_interval_min": 15,
}
BATTERY = {"capacity_kwh": 20.0, "power_kw": 2.0, "initial_soc": 0.5}


def scenario(tmp_path, battery=True, **overrides):
    equipment = {"battery": BATTERY} if battery else {}
    return make_scenario(tmp_path, JOBS, sites=[site(tariff=TARIFF, **equipment)], **overrides)


def facility_peak_kw(results) -> float:
    power = results.power
    ((_, peak_kw, _),) = interval_peaks_kw(
        power["time_s"].to_numpy(),
        power["facility_w"].to_numpy(),
        results.scenario.horizon_s,
        results.scenario.start,
        "UTC",
        15,
    )
    return peak_kw


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("meter")
    return {
        "plain": sim.simulate(scenario(tmp, battery=False), "run_now"),
        "self": sim.simulate(scenario(tmp), "run_now"),
        "shaving": sim.simulate(scenario(tmp), PeakShaving(target_kw=2.0)),
    }


def test_a_site_with_a_battery_pays_for_its_grid_import_not_its_facility_energy(runs):
    r = runs["self"]
    import_kwh = r.sites["energy_grid_import_kwh"].iloc[0]
    # self-consumption: the battery meets the load from the start, so less is imported
    assert import_kwh < r.sites["energy_facility_kwh"].iloc[0] - 9.0
    assert r.summary["cost_energy"] == pytest.approx(RATE_PER_KWH * import_kwh, rel=1e-12)
    assert r.sites["cost_energy"].iloc[0] == r.summary["cost_energy"]
    plain = runs["plain"]
    assert plain.summary["cost_energy"] == pytest.approx(
        RATE_PER_KWH * plain.summary["energy_facility_kwh"], rel=1e-12
    )
    # the bill's demand charge is the peak of the metered import; the battery emptied
    # before the jobs' ten hours ended, so it is the facility's peak here
    assert r.summary["cost_demand_charge"] == pytest.approx(
        DEMAND_PER_KW_MONTH * FULL_KW * JUNE_COVERED, rel=1e-9
    )


def test_peak_shaving_holds_the_month_peak_at_its_target(runs):
    shaving, self_consumption, plain = runs["shaving"], runs["self"], runs["plain"]
    # by hand: the cap holds import at 2 kW while the jobs run (0.52 kW x 10 h = 5.2 kWh at
    # the terminals, 5.6 kWh stored at the discharge efficiency 0.922, from the battery's
    # 10 kWh and what it charged before), and below it the battery charges up to it: the
    # peak is 2 kW
    assert facility_peak_kw(plain) == pytest.approx(FULL_KW, rel=1e-12)
    assert FULL_KW == pytest.approx(2.52, rel=1e-12)
    expected = DEMAND_PER_KW_MONTH * 2.0 * JUNE_COVERED
    assert shaving.summary["cost_demand_charge"] == pytest.approx(expected, rel=1e-9)
    assert shaving.summary["cost_demand_charge"] < self_consumption.summary["cost_demand_charge"]
    assert shaving.summary["cost_demand_charge"] < plain.summary["cost_demand_charge"]
    # an adjuster: the jobs ran as run_now ran them
    assert shaving.jobs["start_s"].equals(plain.jobs["start_s"])
    hourly = shaving.onsite
    load = hourly["on_site_used_kwh"] + hourly["battery_to_load_kwh"] + hourly["grid_to_load_kwh"]
    assert np.allclose(hourly["load_kwh"], load, rtol=1e-12, atol=0)
    assert REGISTRY["peak_shaving"] is PeakShaving


@dataclass
class PeakProbe:
    """Starts everything; records the month's running import peak it reads each hour."""

    tick_s = 3600.0

    def __post_init__(self):
        self.peaks: dict[float, float | None] = {}

    def decide(self, state):
        self.peaks[state.now_s] = state.onsite("a").month_peak_import_kw
        return [sim.api.Start(j, "a") for j in state.pending]


def test_the_running_month_peak_is_the_largest_import_over_ended_intervals(tmp_path):
    probe = PeakProbe()
    sim.simulate(scenario(tmp_path), probe)
    # self-consumption: the battery meets the idle load until 02:00 (import 0), then the
    # jobs' FULL_KW at its 2 kW rating (import FULL_KW - 2) until it is empty (before
    # 07:00), then all of it
    assert probe.peaks[3600.0] == 0.0
    assert probe.peaks[3 * 3600.0] == pytest.approx(FULL_KW - 2.0, rel=1e-9)
    assert probe.peaks[23 * 3600.0] == pytest.approx(FULL_KW, rel=1e-9)


def test_peak_shaving_refuses_a_negative_target():
    with pytest.raises(ValueError, match="target_kw = -1"):
        PeakShaving(target_kw=-1)


@dataclass
class CapFromStart:
    """Holds site a's import at or below `cap_kw` from the first decision on."""

    cap_kw: float

    def decide(self, state):
        actions = [sim.api.Start(j, "a") for j in state.pending]
        if state.onsite("a").battery_import_cap_kw != self.cap_kw:
            actions.append(SetBattery("a", import_cap_kw=self.cap_kw))
        return actions


def dr_event(**kw):
    return {"site": "a", "start": "2020-06-01T04:00:00Z", "duration_h": 2.0, **kw}


def test_a_demand_response_event_is_measured_on_grid_import(tmp_path):
    sc = scenario(tmp_path, demand_response=[dr_event(limit_kw=2.0)])
    r = sim.simulate(sc, CapFromStart(2.0))
    (row,) = r.dr_events.to_dict("records")
    assert row["compliance"] == 1.0  # the facility draws FULL_KW > 2 kW throughout
    assert row["peak_kw"] == pytest.approx(2.0, rel=1e-9)
    assert r.summary["dr_overshoot_kwh"] == 0.0
    without = scenario(tmp_path, battery=False, demand_response=[dr_event(limit_kw=2.0)])
    plain = sim.simulate(without, "run_now")
    assert plain.dr_events["compliance"].iloc[0] == 0.0


def test_the_baseline_at_notice_is_the_grid_import_of_the_hour_before(tmp_path):
    # notice at 03:00: over 02:00-03:00 the jobs draw FULL_KW and self-consumption
    # discharges the battery at its 2 kW rating (10 kWh from 00:00 at the idle load, then
    # 2 kW: it lasts), so the import is FULL_KW - 2
    sc = scenario(tmp_path, demand_response=[dr_event(reduction_pct=20.0, notice_h=1.0)])
    r = sim.simulate(sc, "run_now")
    (row,) = r.dr_events.to_dict("records")
    assert row["baseline_kw"] == pytest.approx(FULL_KW - 2.0, rel=1e-9)
    notice = r.events[r.events["kind"] == "dr_notice"].iloc[0]
    assert notice["value"] == pytest.approx(0.8 * (FULL_KW - 2.0), rel=1e-9)


@dataclass
class Issues:
    """Issues `action` at the first decision."""

    action: SetBattery

    def decide(self, state):
        return [self.action]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (SetBattery("a", 1.0, import_cap_kw=2.0), "give power_kw or import_cap_kw, not both"),
        (SetBattery("a", import_cap_kw=-1.0), "import_cap_kw = -1.0 must be finite and >= 0"),
        (SetBattery("a", import_cap_kw=float("inf")), "import_cap_kw = inf must be finite"),
    ],
)
def test_a_cap_the_battery_cannot_hold_is_a_one_line_policy_error(tmp_path, action, message):
    with pytest.raises(sim.api.PolicyError) as e:
        sim.simulate(scenario(tmp_path), Issues(action))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_the_baseline_at_notice_counts_the_services_power_once(tmp_path):
    # a site with a battery and an inference service: the live balance's import includes
    # the service's power, so the baseline is the import of the hour before the notice
    # exactly as the results' balance has it (notice at 01:00: the hour from 00:00)
    small = {"capacity_kwh": 4.0, "power_kw": 0.5, "initial_soc": 0.5}  # covers part of it
    sites = [site(gpus=H100, battery=small), TWO_SITES[1]]
    event = dr_event(start="2020-06-01T01:30:00Z", duration_h=0.5, notice_h=0.5, reduction_pct=20.0)
    r = sim.simulate(serving_scenario(tmp_path, sites=sites, demand_response=[event]), "run_now")
    (row,) = r.dr_events.to_dict("records")
    first_hour = r.onsite[r.onsite["start_s"] == 0.0].iloc[0]
    assert first_hour["grid_import_kwh"] > 0.5  # the service's replica draws from the grid
    assert row["baseline_kw"] == pytest.approx(first_hour["grid_import_kwh"], rel=1e-9)
