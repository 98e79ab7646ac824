"""Solar and wind capacity factors of the zones (docs/onsite-energy.md, "Generation profiles")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.errors import ScenarioError
from sim.grid.build import year_hours
from sim.grid.capacity_factors import capacity_factor_profile, hourly_capacity_mw
from sim.grid.renewables import (
    NRMSE_24H,
    capacity_factors,
    forecast_capacity_factors,
    renewables_catalog,
)

# Published national figures, (zone, year, technologies) -> capacity factor. "derived" =
# published generation / (hours x mean of the published start and end capacities).
PUBLISHED_CF = {
    # Panorama de l'électricité renouvelable au 31/12/2019 (RTE, SER, Enedis, ADEeF, ORE), as
    # reported in "France : la production éolienne en forte augmentation en 2019",
    # enviscope.com: wind load factor 24.7 % in 2019, 22.8 % in 2018.
    ("FR", 2019, ("wind_onshore",)): 0.247,
    ("FR", 2018, ("wind_onshore",)): 0.228,
    # Same Panorama (lebatimentartisanal.com, reseaudurable.com): solar 11.6 TWh in 2019,
    # 9,436 MW at end 2019 after 890 MW added: 11.6e6 / (8760 x (8546 + 9436) / 2) (derived).
    ("FR", 2019, ("solar",)): 11.6e6 / (8760 * (8546 + 9436) / 2),
    # Germany 2019 onshore: ZSW/BDEW, ~104 TWh (farmer.pl, "Niemcy: wzrost produkcji energii
    # ... ze źródeł odnawialnych"); Deutsche WindGuard: 53,912 MW at end 2019 after a net
    # 981 MW added (dailyscience.me, myeasydialer.com/article/1672294) (derived).
    ("DE", 2019, ("wind_onshore",)): 104e6 / (8760 * (53912 - 981 / 2)),
    # Denmark 2020, all wind: IEA Wind TCP, "Wind Energy in Denmark" (iea-wind.org): 16.35
    # TWh; 6.311 GW at end 2020 after 220 MW added onshore (derived).
    ("DK", 2020, ("wind_onshore", "wind_offshore")): 16.35e6 / (8784 * (6311 - 220 / 2)),
}


def _built_cf(zone: str, year: int, techs: tuple[str, ...]) -> float:
    """Annual CF of the technologies together: energy over mean capacity, from the catalog."""
    cat = renewables_catalog()
    rows = cat[(cat["zone"] == zone) & (cat["year"] == year) & cat["technology"].isin(techs)]
    assert len(rows) == len(techs) and rows["file"].notna().all(), rows
    mean_cap = (rows["capacity_start_mw"] + rows["capacity_end_mw"]) / 2
    return float((rows["capacity_factor"] * mean_cap).sum() / mean_cap.sum())


@pytest.mark.parametrize("key", list(PUBLISHED_CF), ids=lambda k: f"{k[0]}-{k[1]}-{'+'.join(k[2])}")
def test_annual_capacity_factors_match_the_published_national_figures_within_10_percent(key):
    built = _built_cf(*key)
    assert built == pytest.approx(PUBLISHED_CF[key], rel=0.10)


def test_a_profile_is_hourly_utc_over_the_whole_year_and_within_0_1():
    cf = capacity_factors("DE", 2019, "solar")
    assert cf.index.equals(year_hours(2019))
    assert cf.min() >= 0 and cf.max() <= 1
    assert cf.mean() == pytest.approx(0.1025, abs=5e-4)  # catalog figure


def test_a_profile_the_data_rules_excluded_is_an_error_giving_the_reason():
    with pytest.raises(ScenarioError, match=r"no solar profile for zone NL in 2020 \(.*partial"):
        capacity_factors("NL", 2020, "solar")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("XX", 2019, "solar"), r"no solar profile for zone XX in 2019; have: AT 2017"),
        (("DE", 2031, "solar"), r"no solar profile for zone DE in 2031; have:"),
        (("DE", 2019, "hydro"), r"unknown technology 'hydro'; known: \['solar'"),
    ],
)
def test_unknown_zone_year_or_technology_is_a_one_line_error(args, message):
    with pytest.raises(ScenarioError, match=message) as e:
        capacity_factors(*args)
    assert "\n" not in str(e.value)


def test_capacity_grows_linearly_from_one_january_to_the_next():
    hours = year_hours(2019)
    cap = hourly_capacity_mw(100.0, 200.0, hours)
    assert cap[0] == 100.0 and cap[-1] == pytest.approx(200.0, abs=0.02)
    assert cap[len(hours) // 2] == pytest.approx(150.0, abs=0.01)


def _sunny_year(scale: float) -> pd.Series:
    hours = year_hours(2019)
    day = np.clip(np.sin((hours.hour.to_numpy() - 6) / 12 * np.pi), 0, None)
    return pd.Series(scale * day, index=hours)


def test_a_few_hours_above_capacity_are_clipped_and_counted():
    gen = _sunny_year(80.0)
    gen.iloc[[12, 36]] = 120.0  # two spikes above 100 MW
    p = capacity_factor_profile(gen, np.full(len(gen), 100.0), filled_hours=0)
    assert p.exclude_reason is None and p.clipped_hours == 2
    assert p.cf.max() == 1.0 and p.peak_cf == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("scale", "filled", "reason"),
    [
        (130.0, 0, "above the installed capacity"),  # fleet larger than the capacity says
        (40.0, 0, "highest hour 0.40"),  # feed covering part of the fleet
        (80.0, 500, "500 of 8760 hours filled"),
    ],
)
def test_zone_years_whose_generation_and_capacity_disagree_are_excluded(scale, filled, reason):
    p = capacity_factor_profile(_sunny_year(scale), np.full(8760, 100.0), filled_hours=filled)
    assert reason in (p.exclude_reason or "")


def test_a_month_where_the_feed_lost_the_fleet_excludes_the_year():
    gen = _sunny_year(80.0)
    gen[gen.index.month == 7] *= 0.1
    p = capacity_factor_profile(gen, np.full(8760, 100.0), filled_hours=0)
    assert "month 7" in (p.exclude_reason or "")


def test_forecast_is_seeded_unbiased_bounded_and_grows_with_lead_time():
    cf = capacity_factors("DE", 2019, "wind_onshore").to_numpy()
    draw = lambda lead, seed: forecast_capacity_factors(  # noqa: E731
        cf, lead, NRMSE_24H["wind_onshore"], np.random.default_rng(seed)
    )
    assert np.array_equal(draw(24, 1), draw(24, 1))
    assert np.array_equal(draw(0, 1), cf)
    many = np.stack([draw(24, s) for s in range(200)])
    assert many.min() >= 0 and many.max() <= 1
    assert many.mean() == pytest.approx(cf.mean(), rel=0.005)
    rmse = lambda f: float(np.sqrt(np.mean((f - cf) ** 2)))  # noqa: E731
    assert rmse(draw(24, 2)) == pytest.approx(NRMSE_24H["wind_onshore"], rel=0.05)
    assert (
        rmse(draw(1, 2))
        < rmse(draw(6, 2))
        < rmse(draw(24, 2))
        == pytest.approx(rmse(draw(48, 2)), rel=0.05)
    )


def test_forecast_keeps_night_at_zero():
    cf = capacity_factors("DE", 2019, "solar").to_numpy()
    f = forecast_capacity_factors(cf, 24, NRMSE_24H["solar"], np.random.default_rng(0))
    assert np.all(f[cf == 0] == 0)
