"""Demand-response events from the scenario (`sim.market.dr_events`): single events, and the
generators `daily_peak` (a local hour every day) and `high_carbon` (the stretches above a
percentile of the site's carbon intensity), validated at the boundary."""

from __future__ import annotations

import pytest

from sim.engine.build import build_world
from sim.errors import ScenarioError
from sim.market.dr_events import dr_events
from sim.util.streams import random_streams
from tests.conftest import make_scenario, site

JOBS = [
    {"job_id": f"j{i}", "submit_time": 0, "gpus": 1, "work_gpu_h": 10.0, "profile": "compute-bound"}
    for i in range(4)
]


def events_of(scenario, signals) -> list:
    """The concrete events of `scenario`'s `[[demand_response]]` entries."""
    return dr_events(
        scenario.demand_response, scenario.site_names(), scenario.start, scenario.horizon_s, signals
    )


def generated(tmp_path, entry: dict, **overrides) -> list[tuple[str, float, float]]:
    """(key, start h, end h) of the events one generator entry makes."""
    scenario = make_scenario(tmp_path, JOBS, demand_response=[{"site": "a", **entry}], **overrides)
    _, signals = build_world(scenario, random_streams(scenario.seed))
    return [(e.key, e.start_s / 3600, e.end_s / 3600) for e in events_of(scenario, signals)]


def test_a_daily_peak_event_recurs_at_the_local_hour_each_day(tmp_path):
    entry = {"generator": "daily_peak", "hour": 17, "duration_h": 3, "timezone": "Europe/Berlin"}
    # June in Berlin is UTC+2: 17:00 local is 15:00 UTC; the third day's event ends at 66 h.
    assert generated(tmp_path, {**entry, "limit_kw": 1.0}, duration_h=66) == [
        ("demand_response[0]#0", 15.0, 18.0),
        ("demand_response[0]#1", 39.0, 42.0),
        ("demand_response[0]#2", 63.0, 66.0),
    ]
    # An event that would run past the horizon is not generated.
    assert len(generated(tmp_path, {**entry, "limit_kw": 1.0}, duration_h=65)) == 2


def test_high_carbon_events_cover_the_stretches_above_the_percentile(tmp_path):
    trace = tmp_path / "trace.csv"
    hours = [3, 1, 9, 10, 2, 4, 5, 8, 6, 7]  # g/kWh, hour by hour from the start
    trace.write_text(
        "time,ci\n" + "".join(f"2020-06-01 {h:02d}:00,{v}\n" for h, v in enumerate(hours))
    )
    carbon = {"file": str(trace), "time_column": "time", "column": "ci", "unit": "g/kWh"}
    entry = {"generator": "high_carbon", "percentile": 70, "limit_kw": 1.0}
    # The top 30% of the hours (values 8, 9, 10) fall in hours 2-4 and 7-8.
    assert generated(tmp_path, entry, sites=[site(carbon=carbon)], duration_h=10) == [
        ("demand_response[0]#0", 2.0, 4.0),
        ("demand_response[0]#1", 7.0, 8.0),
    ]
    longer = {**entry, "min_duration_h": 1.5}
    assert generated(tmp_path, longer, sites=[site(carbon=carbon)], duration_h=10) == [
        ("demand_response[0]#0", 2.0, 4.0)
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"generator": "daily_peak", "duration_h": 2}, "hour is required"),
        ({"generator": "high_carbon", "duration_h": 2}, "duration_h does not apply"),
        ({"generator": "daily_peak", "hour": 17, "duration_h": 2, "timezone": "Mars/Base"}, "Mars"),
        ({"duration_h": 2}, "start is required for a single event"),
    ],
)
def test_generator_entries_are_validated(tmp_path, entry, message):
    with pytest.raises(ScenarioError, match=message):
        make_scenario(tmp_path, JOBS, demand_response=[{"site": "a", "limit_kw": 1, **entry}])


def test_every_event_of_a_generator_inherits_its_program(tmp_path):
    entry = {"generator": "daily_peak", "hour": 17, "duration_h": 2, "limit_kw": 1.0}
    scenario = make_scenario(
        tmp_path,
        JOBS,
        duration_h=72,
        demand_response=[{"site": "a", **entry, "program": "p"}, {"site": "a", **entry}],
        dr_programs={"p": {"pay_per_kwh_shed": 0.4}},
    )
    _, signals = build_world(scenario, random_streams(scenario.seed))
    programs = [(e.key, e.program) for e in events_of(scenario, signals)]
    assert sorted(programs) == sorted(
        [(f"demand_response[0]#{n}", "p") for n in range(3)]
        + [(f"demand_response[1]#{n}", None) for n in range(3)]
    )
