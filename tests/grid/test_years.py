"""The `years` rule: a run that needs a zone-year the catalog lacks reads another year only as
the scenario chose, and every substitution is recorded in meta.json and printed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

import sim
from sim.grid.catalog import load_zone, year_plan, zone_series
from tests.conftest import make_scenario, run_cli, site

DAY_S = 86400.0


def test_without_a_rule_a_run_in_a_year_the_catalog_lacks_is_an_error_naming_both_rules():
    with pytest.raises(sim.ScenarioError, match=r'starts in 2023 .* years = "align" .* "wrap"'):
        year_plan("DE", datetime(2023, 6, 5, tzinfo=UTC), DAY_S, None, None)


def test_without_a_rule_another_year_named_by_the_scenario_is_an_error_too():
    with pytest.raises(sim.ScenarioError, match="starts in 2020 but reads the trace of 2019"):
        year_plan("DE", datetime(2020, 6, 1, tzinfo=UTC), DAY_S, 2019, None)


def test_without_a_rule_a_run_in_its_own_years_reads_them_unmoved_across_new_year():
    plan = year_plan("DE", datetime(2019, 12, 30, tzinfo=UTC), 5 * DAY_S, None, None)
    assert plan.years_read == (2019, 2020) and plan.shift_days == 0 and not plan.substituted


def test_align_past_the_last_catalog_year_is_an_error_that_names_wrap():
    with pytest.raises(sim.ScenarioError, match=r'not 2021; years = "wrap" stays within 2020'):
        year_plan("DE", datetime(2020, 12, 28, tzinfo=UTC), 10 * DAY_S, None, "align")


def test_wrap_reads_past_the_years_end_whole_weeks_earlier_keeping_weekday_and_hour():
    start = datetime(2020, 12, 28, tzinfo=UTC)  # a Monday
    series = zone_series("DE", start, 10 * DAY_S, rule="wrap")
    truth = load_zone("DE", 2020)
    assert series.attrs["year_plan"].wrapped and series.attrs["year_plan"].years_read == (2020,)
    assert series.index.is_monotonic_increasing and series.index.is_unique
    hourly = pd.date_range(start, start + timedelta(days=10), freq="h", tz="UTC")
    assert hourly.isin(series.index).all()
    for t in pd.date_range("2021-01-01", "2021-01-07 23:00", freq="7h", tz="UTC"):
        source = t - pd.Timedelta(days=364)
        assert source.year == 2020 and source.day_of_week == t.day_of_week
        assert series[t] == truth[source]
    inside = pd.Timestamp("2020-12-30 05:00", tz="UTC")
    assert series[inside] == truth[inside]


def test_wrap_of_another_year_moves_it_then_fills_before_its_start_from_its_first_weeks():
    start = datetime(2023, 1, 1, tzinfo=UTC)  # a Sunday; aligned to 2020 it falls in 2019
    plan = year_plan("DE", start, 3 * DAY_S, None, "wrap")
    assert plan.trace_year == 2020 and plan.shift_days % 7 == 0 and plan.wrapped
    series = zone_series("DE", start, 3 * DAY_S, rule="wrap")
    truth = load_zone("DE", 2020)
    t = pd.Timestamp(start)
    trace_time = t - pd.Timedelta(days=plan.shift_days)
    assert trace_time.year == 2019  # before the trace year: read 364 days later
    assert series[t] == truth[trace_time + pd.Timedelta(days=364)]


def test_a_substitution_is_recorded_in_meta_and_printed(tmp_path, capsys):
    scenario = make_scenario(
        sites=[site(carbon={"zone": "DE"})], start="2023-06-05T00:00:00Z", years="align"
    )
    meta = sim.simulate(scenario).meta
    assert meta["years"]["rule"] == "align"
    (sub,) = meta["years"]["substitutions"]
    assert sub["site"] == "a" and sub["zone"] == "DE" and sub["years_read"] == [2020]
    assert sub["shift_days"] == 1099 and not sub["wrapped"]  # 2020-06-01 -> 2023-06-05

    file = tmp_path / "s.toml"
    file.write_text(
        'name = "years"\nstart = 2023-06-05T00:00:00Z\nduration_h = 2\nyears = "wrap"\n'
        '[[sites]]\nname = "a"\nlat = 50.1\nlon = 8.7\ncarbon = { zone = "DE" }\n'
        'gpus = [{ model = "V100", count = 2 }]\n'
        "[workload.synthetic]\narrival_rate_per_h = 1.0\n"
        'duration = { dist = "exponential", mean_h = 1.0 }\n'
    )
    code, out = run_cli(["run", str(file)], capsys)
    assert code == 0, out.err
    assert "years = 'wrap': site a reads zone DE from 2020 (moved by +1099 days)" in out.out


def test_a_run_in_its_own_year_records_no_substitution():
    scenario = make_scenario(sites=[site(carbon={"zone": "DE"})], start="2020-06-01T00:00:00Z")
    assert sim.simulate(scenario).meta["years"] == {"rule": None, "substitutions": []}


def test_wholesale_prices_of_another_year_follow_the_rule_and_are_recorded():
    tariffed = site(carbon={"zone": "DE"}, tariff={"kind": "wholesale", "year": 2018})
    with pytest.raises(sim.ScenarioError, match=r"sites\[0\]\.tariff: .* reads the prices of 2018"):
        sim.simulate(make_scenario(sites=[tariffed], start="2020-06-01T00:00:00Z"))
    scenario = make_scenario(sites=[tariffed], start="2020-06-01T00:00:00Z", years="align")
    (sub,) = sim.simulate(scenario).meta["years"]["substitutions"]
    assert sub["prices"] and sub["zone"] == "DE" and sub["years_read"] == [2018]
    assert sub["shift_days"] % 7 == 0
