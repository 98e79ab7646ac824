"""Zone traces in scenarios: year alignment, year crossing, what-if transforms, kinds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sim
from sim.grid.catalog import alignment_offset, load_zone, zone_series
from tests.conftest import make_scenario, site, site_signal


@given(
    st.datetimes(min_value=datetime(2015, 1, 1), max_value=datetime(2030, 12, 31)),
    st.integers(2017, 2020),
)
def test_alignment_keeps_weekday_and_hour_and_moves_at_most_three_days(start, trace_year):
    start = start.replace(tzinfo=UTC)
    offset = alignment_offset(start, trace_year)
    in_trace = start - offset
    assert offset.total_seconds() % 86400 == 0
    assert in_trace.weekday() == start.weekday() and in_trace.time() == start.time()
    same_day_of_year = datetime(trace_year, 1, 1, tzinfo=UTC) + (
        start - datetime(start.year, 1, 1, tzinfo=UTC)
    )
    assert abs(in_trace - same_day_of_year) <= timedelta(days=3)


def test_a_scenario_in_another_year_sees_the_trace_shifted_by_whole_weeks_of_weekdays():
    start = datetime(2023, 6, 5, tzinfo=UTC)  # a Monday
    series = zone_series("DE", start, 48 * 3600.0, year=2019, rule="align")
    truth = load_zone("DE", 2019)
    # 2019-06-03 is the Monday nearest to 5 June 2019.
    assert series[start] == truth[pd.Timestamp("2019-06-03", tz="UTC")]
    shifted = truth.index + (start - datetime(2019, 6, 3, tzinfo=UTC))
    assert (shifted.day_of_week == truth.index.day_of_week).all()


def test_a_horizon_past_new_year_continues_into_the_next_catalog_year():
    start = datetime(2019, 12, 30, tzinfo=UTC)
    series = zone_series("DE", start, 5 * 24 * 3600.0)
    assert (
        series[pd.Timestamp("2020-01-02 12:00", tz="UTC")]
        == load_zone("DE", 2020)[pd.Timestamp("2020-01-02 12:00", tz="UTC")]
    )


def test_a_horizon_past_the_last_catalog_year_is_an_error_naming_the_years():
    with pytest.raises(sim.ScenarioError, match="zone DE: the scenario needs .* not 2021"):
        zone_series("DE", datetime(2020, 12, 30, tzinfo=UTC), 5 * 24 * 3600.0, year=2020)


def scenario_with(carbon: dict, **kw):
    return make_scenario(sites=[site(carbon=carbon)], start="2020-03-02T00:00:00Z", **kw)


def test_blend_scale_and_offset_apply_in_that_order():
    plain_de = site_signal(scenario_with({"zone": "DE"}), 0)
    plain_fr = site_signal(scenario_with({"zone": "FR"}), 0)
    what_if = site_signal(
        scenario_with(
            {
                "zone": "DE",
                "blend_zone": "FR",
                "blend_weight": 0.25,
                "scale": 0.5,
                "offset_g_per_kwh": 10.0,
            }
        ),
        0,
    )
    for t in (0.0, 3600.0 * 7.5, 3600.0 * 23):
        mixed = 0.75 * plain_de.value_at(t) + 0.25 * plain_fr.value_at(t)
        assert what_if.value_at(t) == pytest.approx(0.5 * mixed + 10.0)


def test_an_offset_that_makes_the_intensity_negative_is_an_error():
    with pytest.raises(sim.ScenarioError, match=r"sites\[0\].carbon: .*negative"):
        site_signal(scenario_with({"zone": "FR", "offset_g_per_kwh": -1000.0}), 0)


def test_results_say_which_kind_of_signal_each_site_used(tmp_path):
    trace = tmp_path / "moer.csv"
    times = pd.date_range("2020-03-02", periods=30, freq="h", tz="UTC")
    pd.DataFrame(
        {"timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "carbon_intensity": 800.0}
    ).to_csv(trace, index=False)
    scenario = make_scenario(
        sites=[
            site(carbon={"zone": "DE"}),
            site(name="b", carbon={"file": str(trace), "unit": "lbs/MWh", "kind": "marginal"}),
        ],
        start="2020-03-02T00:00:00Z",
    )
    meta = sim.simulate(scenario).meta
    assert meta["carbon_signal_kind"] == {"a": "average", "b": "marginal"}
