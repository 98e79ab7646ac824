"""Demand-response programs (`sim.market.dr_programs`): each event under a program is settled
against its baseline (previous hour, last 10 weekdays, or a stated constant) and paid per
kWh shed, penalised per kWh above its limit, with a capacity payment per committed kW-month;
amounts are converted to the scenario's currency. Every expected value is computed by hand
from the facility power of four A100s at full power or capped to 290 W."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import sim
from sim.api import SetCap, Start
from sim.errors import ScenarioError
from sim.models.hardware import estimate
from sim.models.pricing import usd_rate
from tests.conftest import make_scenario

MONTH_H = 730.485
"""A month of a capacity payment, h: the mean Gregorian month, 365.2425 d x 24 h / 12
(docs/demand-response-programs.md, "committed_kw x capacity_per_kw_month x duration_h /
730.485")."""

# Four 1-GPU jobs keep the base site's four A100s busy for the whole run (three weeks).
JOBS = [
    {
        "job_id": f"j{i}",
        "submit_time": 0,
        "gpus": 1,
        "work_gpu_h": 5000.0,
        "profile": "compute-bound",
    }
    for i in range(4)
]
CAP_W = 290.0
FULL_KW = 4 * (estimate("A100-80GB", "compute-bound").power_w + 40.0) * 1.5 / 1000
CAPPED_KW = 4 * (estimate("A100-80GB", "compute-bound", CAP_W).power_w + 40.0) * 1.5 / 1000
DAY_S = 86400.0


@dataclass
class CapAt:
    """Starts everything; caps every GPU to 290 W during 02:00-04:00 UTC of the given days
    (0 = the first day of the run) and during every event."""

    days: frozenset[int] = frozenset()
    tick_s: float = 3600.0

    def decide(self, state):
        actions = [Start(j, "a") for j in state.pending]
        day, second = divmod(state.now_s, DAY_S)
        in_hours = int(day) in self.days and 2 * 3600 <= second < 4 * 3600
        on = any(e.start_s <= state.now_s < e.end_s for e in state.demand_response("a"))
        wanted = CAP_W if in_hours or on else None
        if state.site_cap_w("a") != wanted:
            actions.append(SetCap("a", wanted))
        return actions


def event(day: int, **kw) -> dict:
    """A 2 h event at 02:00 UTC of `day` (0 = 2020-06-01, a Monday), under program "p"."""
    return {
        "site": "a",
        "start": f"2020-06-{day + 1:02d}T02:00:00Z",
        "duration_h": 2.0,
        "limit_kw": 2.0,
        "program": "p",
        **kw,
    }


def run(tmp_path, events, program, policy, duration_h=24.0, **overrides):
    scenario = make_scenario(
        tmp_path,
        JOBS,
        duration_h=duration_h,
        demand_response=events,
        dr_programs={"p": program},
        **overrides,
    )
    return sim.simulate(scenario, policy)


def test_previous_hour_pays_the_energy_shed_below_the_hour_before_notice(tmp_path):
    program = {"pay_per_kwh_shed": 0.4, "capacity_per_kw_month": 0.5, "committed_kw": 1.0}
    r = run(tmp_path, [event(0, notice_h=1.0)], program, CapAt())
    (row,) = r.dr_events.to_dict("records")
    shed_kwh = 2.0 * (FULL_KW - CAPPED_KW)  # full power before the notice, capped in the event
    assert row["settlement_baseline_kw"] == pytest.approx(FULL_KW, rel=1e-12)
    assert row["settlement_shed_kwh"] == pytest.approx(shed_kwh, rel=1e-9)
    assert row["payment"] == pytest.approx(0.4 * shed_kwh, rel=1e-9)
    assert row["penalty"] == 0.0  # capped under the 2 kW limit
    capacity = 1.0 * 0.5 * 24.0 / MONTH_H  # one day of a 0.5 per kW-month commitment
    assert r.summary["dr_payment"] == pytest.approx(capacity + 0.4 * shed_kwh, rel=1e-9)
    assert r.summary["dr_penalty"] == 0.0


def test_weekdays_10_averages_the_same_hours_of_the_last_ten_event_free_weekdays(tmp_path):
    # Capped at 02:00-04:00 on June 2 and 3; events on Wednesday June 10 and Tuesday June 16.
    # June 16 looks back over 15, 12, 11, 9, 8, 5, 4, 3, 2, 1: the weekend of the 13th-14th
    # and the event day, the 10th, are skipped; two of the ten days are capped.
    # June 10 has only the 9th, 8th, 5th ... 1st: seven weekdays, two capped.
    r = run(
        tmp_path,
        [event(9), event(15)],
        {"baseline": "weekdays_10", "pay_per_kwh_shed": 0.4},
        CapAt(frozenset({1, 2})),
        duration_h=17 * 24.0,
    )
    june10, june16 = r.dr_events.to_dict("records")
    assert june16["settlement_baseline_days"] == 10
    assert june10["settlement_baseline_days"] == 7
    base16 = (2 * CAPPED_KW + 8 * FULL_KW) / 10
    base10 = (2 * CAPPED_KW + 5 * FULL_KW) / 7
    assert june16["settlement_baseline_kw"] == pytest.approx(base16, rel=1e-9)
    assert june10["settlement_baseline_kw"] == pytest.approx(base10, rel=1e-9)
    assert june16["settlement_shed_kwh"] == pytest.approx(2 * (base16 - CAPPED_KW), rel=1e-9)
    assert june16["payment"] == pytest.approx(0.4 * 2 * (base16 - CAPPED_KW), rel=1e-9)
    assert r.meta["dr_programs"]["events_short_of_10_weekdays"] == 1


def test_weekdays_10_skips_a_day_with_an_event_at_other_hours(tmp_path):
    # An evening event on Tuesday June 9 makes that whole day an event day (CAISO's rule):
    # the June 10 event looks back over the 8th, 5th ... 1st only.
    evening = {**event(8), "start": "2020-06-09T16:00:00Z"}
    r = run(
        tmp_path,
        [evening, event(9)],
        {"baseline": "weekdays_10", "pay_per_kwh_shed": 0.4},
        CapAt(),
        duration_h=11 * 24.0,
    )
    june10 = r.dr_events.to_dict("records")[1]
    assert june10["settlement_baseline_days"] == 6
    assert june10["settlement_baseline_kw"] == pytest.approx(FULL_KW, rel=1e-9)


def test_weekdays_10_without_any_weekday_before_the_event_pays_nothing_and_says_so(tmp_path):
    r = run(tmp_path, [event(0)], {"baseline": "weekdays_10", "pay_per_kwh_shed": 0.4}, CapAt())
    (row,) = r.dr_events.to_dict("records")
    assert row["settlement_baseline_days"] == 0
    assert row["payment"] == 0.0
    assert r.meta["dr_programs"]["events_without_baseline"] == 1


def test_a_constant_baseline_pays_the_shed_below_the_stated_power(tmp_path):
    program = {"baseline": "constant", "baseline_kw": 3.0, "pay_per_kwh_shed": 0.4}
    r = run(tmp_path, [event(0)], program, CapAt())
    (row,) = r.dr_events.to_dict("records")
    assert row["settlement_baseline_kw"] == 3.0
    assert row["settlement_shed_kwh"] == pytest.approx(2 * (3.0 - CAPPED_KW), rel=1e-9)
    # A baseline below what the site drew sheds nothing (never a negative payment).
    low = {**program, "baseline_kw": 0.5}
    (row,) = run(tmp_path, [event(0)], low, CapAt()).dr_events.to_dict("records")
    assert row["settlement_shed_kwh"] == 0.0
    assert row["payment"] == 0.0


def test_missing_the_limit_is_penalised_per_kwh_above_it(tmp_path):
    program = {"pay_per_kwh_shed": 0.4, "penalty_per_kwh_over": 1.5}
    r = run(tmp_path, [event(0)], program, "run_now")
    (row,) = r.dr_events.to_dict("records")
    assert row["penalty"] == pytest.approx(1.5 * 2.0 * (FULL_KW - 2.0), rel=1e-9)
    assert row["payment"] == 0.0  # the site ran at its baseline: nothing shed
    assert r.summary["dr_penalty"] == pytest.approx(row["penalty"], rel=1e-12)


def test_amounts_are_converted_from_the_program_currency_to_the_scenario_currency(tmp_path):
    program = {"currency": "GBP", "penalty_per_kwh_over": 1.5}
    eur = run(tmp_path, [event(0)], program, "run_now").summary["dr_penalty"]
    usd = run(tmp_path, [event(0)], program, "run_now", currency="USD").summary["dr_penalty"]
    overshoot_kwh = 2.0 * (FULL_KW - 2.0)
    assert eur == pytest.approx(1.5 * overshoot_kwh * usd_rate("EUR") / usd_rate("GBP"))
    assert usd == pytest.approx(1.5 * overshoot_kwh * usd_rate("USD") / usd_rate("GBP"))


def test_events_without_a_program_leave_the_money_keys_null(tmp_path):
    no_program = {k: v for k, v in event(0).items() if k != "program"}
    r = sim.simulate(make_scenario(tmp_path, JOBS, demand_response=[no_program]), "run_now")
    assert r.summary["dr_payment"] is None
    assert r.summary["dr_penalty"] is None
    assert "payment" not in r.dr_events.columns
    assert "dr_programs" not in r.meta


@pytest.mark.parametrize(
    ("programs", "entry", "message"),
    [
        ({}, {"program": "nope"}, r"demand_response\[0\]\.program: unknown program 'nope'"),
        ({"p": {"pay_per_kwh_shed": -1}}, {}, "pay_per_kwh_shed"),
        ({"p": {"baseline": "yesterday"}}, {}, "baseline"),
        ({"p": {"baseline": "constant"}}, {}, "baseline_kw is required"),
        ({"p": {"capacity_per_kw_month": 1.0}}, {}, "committed_kw is required"),
        ({"p": {"currency": "XYZ"}}, {}, "unknown currency 'XYZ'"),
    ],
)
def test_program_errors_are_one_line_scenario_errors(tmp_path, programs, entry, message):
    with pytest.raises(ScenarioError, match=message) as err:
        make_scenario(tmp_path, JOBS, demand_response=[{**event(0), **entry}], dr_programs=programs)
    assert "\n" not in str(err.value)
