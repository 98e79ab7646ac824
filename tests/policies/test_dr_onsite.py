"""Demand response served by on-site energy first: a site with a battery, metered on its
grid import, meets an event from the battery (charged from the notice on) and slows its
jobs only for what the battery cannot supply; afterwards the battery is back to
self-consumption."""

from __future__ import annotations

import pytest

import sim
from policies.demand_response import DrFairSlowdown
from policies.demand_response.onsite import onsite_supply_kw
from tests.conftest import generation_forecast_state as forecast
from tests.conftest import make_scenario, onsite_reading, site
from tests.engine.test_grid_meter import BATTERY, FULL_KW, JOBS

# The grid meter's four jobs on four A100s from 02:00 and its 20 kWh / 2 kW battery; an
# event 04:00-06:00, announced at 03:00; the limit 1.5 kW under the jobs' facility power
LIMIT_KW = FULL_KW - 1.5
EVENT = {
    "site": "a",
    "start": "2020-06-01T04:00:00Z",
    "duration_h": 2.0,
    "notice_h": 1.0,
    "limit_kw": LIMIT_KW,
}


def run(tmp_path, **policy):
    sc = make_scenario(tmp_path, JOBS, sites=[site(battery=BATTERY)], demand_response=[EVENT])
    return sim.simulate(sc, DrFairSlowdown(**policy))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dr_onsite")
    return {"first": run(tmp), "workload": run(tmp, onsite_first=False)}


def hour(results, h: int) -> dict:
    table = results.onsite
    return table[table["start_s"] == h * 3600.0].iloc[0].to_dict()


def test_the_battery_serves_the_event_and_no_job_is_slowed(runs):
    r = runs["first"]
    (row,) = r.dr_events.to_dict("records")
    assert row["compliance"] == 1.0
    assert r.summary["dr_throughput_loss_gpu_h"] == 0.0
    assert r.summary["dr_jobs_affected"] == 0
    for h in (4, 5):  # the battery discharges what the jobs take above the target
        flows = hour(r, h)
        assert flows["grid_to_load_kwh"] == pytest.approx(0.99 * LIMIT_KW, rel=1e-9)
        assert flows["battery_to_load_kwh"] == pytest.approx(FULL_KW - 0.99 * LIMIT_KW, rel=1e-9)


def test_without_it_the_jobs_are_slowed_to_the_limit(runs):
    r = runs["workload"]
    assert r.summary["dr_throughput_loss_gpu_h"] > 0.0
    assert r.summary["dr_jobs_affected"] == 4
    assert r.dr_events["compliance"].iloc[0] == 1.0


def test_the_battery_charges_from_the_notice_and_returns_to_self_consumption(runs):
    r = runs["first"]
    assert hour(r, 3)["grid_to_battery_kwh"] > 0.0  # the notice hour: charging at its rating
    assert hour(r, 2)["grid_to_battery_kwh"] == 0.0  # before it: self-consumption
    after = r.onsite[r.onsite["start_s"] >= 6 * 3600.0]
    assert (after["grid_to_battery_kwh"] == 0.0).all()
    assert after["battery_to_load_kwh"].iloc[0] > 0.0  # meets the deficit again


def test_the_supply_is_the_lowest_generation_plus_the_battery_spread_over_the_time_left():
    # (12 - 0.1 x 20) kWh x 0.9 over 3 h = 3 kW, under the 4 kW rating; generation at least 1
    reading = onsite_reading(battery_kwh=12.0, battery_capacity_kwh=20.0, battery_power_kw=4.0)
    supply_kw = onsite_supply_kw(forecast([2.0, 1.0, 1.5]), reading, 3 * 3600.0)
    assert supply_kw == pytest.approx(4.0, rel=1e-12)
    # over one hour the battery could give 9 kW: its rating limits it
    assert onsite_supply_kw(forecast([0.0]), reading, 3600.0) == 4.0
    # without a battery, the generation alone; at the event's end, nothing
    no_battery = onsite_reading(battery_kwh=None)
    assert onsite_supply_kw(forecast([0.5, 2.0]), no_battery, 7200.0) == 0.5
    assert onsite_supply_kw(forecast([3.0]), reading, 0.0) == 0.0
