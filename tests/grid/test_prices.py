"""Day-ahead wholesale prices of catalog zones: shape, units, UTC, and the annual means
against published figures."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

import sim.grid
from sim.errors import ScenarioError
from sim.grid.prices import price_series

PUBLISHED_2018_EUR_PER_MWH = {
    # RTE, Bilan electrique 2019, "Market prices in Europe" (source: European power
    # exchanges), 2018 annual average day-ahead prices:
    # https://bilan-electrique-2019.rte-france.com/market-prices-in-europe/?lang=en
    "FR": 50.20,
    "DE": 44.47,
    "NL": 52.53,
    "CH": 52.21,
}


def test_load_price_is_hourly_eur_per_mwh_on_utc_hour_starts_of_the_cet_year():
    series = sim.grid.load_price("DE", 2018)
    assert isinstance(series, pd.Series) and series.dtype == "float64"
    assert str(series.index.tz) == "UTC"
    assert len(series) == 8760
    assert series.index[0] == pd.Timestamp("2017-12-31T23:00Z")  # 2018-01-01 00:00 CET
    assert (series.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    assert series.notna().all()
    # EUR/MWh, not EUR/kWh: a few tens on average, negative in some windy hours.
    assert 20 < series.mean() < 100 and series.min() < 0


@pytest.mark.parametrize("zone", sorted(PUBLISHED_2018_EUR_PER_MWH))
def test_annual_mean_is_within_ten_percent_of_the_published_average(zone):
    mean = sim.grid.load_price(zone, 2018).mean()
    published = PUBLISHED_2018_EUR_PER_MWH[zone]
    assert abs(mean - published) / published < 0.10, (zone, mean, published)


def test_germany_takes_the_joint_de_at_lu_price_before_the_october_2018_split():
    de, at = sim.grid.load_price("DE", 2018), sim.grid.load_price("AT", 2018)
    before = de.index < pd.Timestamp("2018-09-30T22:00Z")  # 2018-10-01 00:00 CEST
    assert (de[before] == at[before]).all()
    assert (de[~before] != at[~before]).any()


def test_a_zone_year_without_prices_is_a_clear_error_naming_those_that_have_some():
    with pytest.raises(ScenarioError, match=r"no day-ahead prices for zone GB in 2018; prices: "):
        sim.grid.load_price("GB", 2018)
    assert ("DE", 2018) in sim.grid.price_zone_years()


def test_a_run_in_another_year_reads_the_prices_only_by_the_years_rule():
    start = datetime(2021, 6, 7, tzinfo=UTC)  # a Monday
    with pytest.raises(ScenarioError, match='starts in 2021 but reads the prices .* "align"'):
        price_series("FR", 2018, start, 3600.0)
    series = price_series("FR", 2018, start, 3600.0, "align")
    truth = sim.grid.load_price("FR", 2018)
    # 2018-06-04 is the Monday nearest to 7 June 2018.
    assert series[pd.Timestamp(start)] == truth[pd.Timestamp("2018-06-04T00:00Z")]
    assert series.attrs["year_plan"].shift_days == (start - datetime(2018, 6, 4, tzinfo=UTC)).days
    wrapped = price_series("FR", 2018, datetime(2018, 12, 31, tzinfo=UTC), 2 * 86400.0, "wrap")
    t = pd.Timestamp("2019-01-01T12:00Z")
    assert wrapped[t] == truth[t - pd.Timedelta(days=364)]
    with pytest.raises(ScenarioError, match="needs its prices .* has 2018, not 2019"):
        price_series("FR", 2018, datetime(2018, 12, 31, tzinfo=UTC), 2 * 86400.0)


def test_wrap_repeats_prices_past_their_own_end_even_inside_the_utc_year():
    # The 2018 prices are a CET year: they end at 2018-12-31 23:00 UTC.
    start = datetime(2018, 12, 31, 22, tzinfo=UTC)
    series = price_series("DE", 2018, start, 1.5 * 3600.0, "wrap")
    assert series.attrs["year_plan"].wrapped
    last = pd.Timestamp("2018-12-31T23:00Z")
    assert series[last] == sim.grid.load_price("DE", 2018)[last - pd.Timedelta(days=364)]
