"""Hourly capacity factors of zones' solar and wind fleets (`grid_data/renewables/`), and
a forecast error model for them. docs/onsite-energy.md, "Generation profiles".

- `capacity_factors(zone, year, technology)`: hourly capacity factor (0..1) on UTC hour
  starts, built by the grid-data build (`sim.grid.capacity_factors`) from ENTSO-E measured
  generation / installed capacity.
- `profile_on_run_clock(zone, technology, start, horizon_s, year, rule)`: the capacity
  factors covering a run, read and moved as the zone's carbon trace is (`years` rule).
- `renewables_catalog()`: every (zone, year, technology) with its annual capacity factor,
  capacities and, for those without a profile, the reason.
- `forecast_capacity_factors(cf, lead_h, nrmse_24h, rng)`: an unbiased multiplicative
  forecast error that grows with lead time, bounded to [0, 1].
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd

from sim.errors import ScenarioError
from sim.grid.capacity_factors import RENEWABLES_CATALOG, TECHNOLOGIES
from sim.grid.catalog import on_run_clock, plan_years
from sim.grid.data_dir import grid_data_dir, read_catalog_csv

__all__ = [
    "NRMSE_24H",
    "capacity_factors",
    "forecast_capacity_factors",
    "profile_on_run_clock",
    "renewables_catalog",
]

NRMSE_24H: dict[str, float] = {
    # Day-ahead RMSE as a fraction of installed capacity, Germany-wide aggregates, 2014:
    # ZSW, "WindSage" project page (zsw-bw.de/en/projects/systemanalyse/windsage.html):
    # PV 2.9 %, wind 3.4 %. A single site's errors are larger (the aggregate averages them).
    "solar": 0.029,
    "wind_onshore": 0.034,
    "wind_offshore": 0.034,
}
"""Default `nrmse_24h` of `forecast_capacity_factors` per technology (cited above)."""


def renewables_catalog() -> pd.DataFrame:
    """The catalog of capacity factors (`grid_data/catalog_renewables.csv`)."""
    return read_catalog_csv(
        grid_data_dir() / RENEWABLES_CATALOG, "renewable capacity-factor", "dcsim grid-data build"
    )


def capacity_factors(zone: str, year: int, technology: str) -> pd.Series:
    """Hourly capacity factor (0..1) of `zone`'s `technology` fleet in `year`, on a UTC
    index of hour starts. ScenarioError (one line) for an unknown technology, or a
    zone-year without that profile, naming the reason or the zone-years that have it."""
    if technology not in TECHNOLOGIES:
        raise ScenarioError(f"unknown technology {technology!r}; known: {list(TECHNOLOGIES)}")
    cat = renewables_catalog()
    rows = cat[(cat["zone"] == zone) & (cat["year"] == year) & (cat["technology"] == technology)]
    if rows.empty or pd.isna(rows.iloc[0]["file"]):
        why = f" ({rows.iloc[0]['exclude_reason']})" if not rows.empty else ""
        have = cat[(cat["technology"] == technology) & cat["file"].notna()]
        known = ", ".join(f"{z} {y}" for z, y in zip(have["zone"], have["year"], strict=True))
        raise ScenarioError(
            f"no {technology} profile for zone {zone} in {year}{why}; have: {known}"
        )
    frame = pd.read_parquet(grid_data_dir() / rows.iloc[0]["file"])
    series = frame.set_index("timestamp")[f"{technology}_cf"].astype("float64")
    series.name = f"{technology}_cf"
    return series


def profile_on_run_clock(
    zone: str,
    technology: str,
    start: datetime,
    horizon_s: float,
    year: int | None,
    rule: str | None,
) -> pd.Series:
    """`zone`'s hourly `technology` capacity factors covering [start, start + horizon_s] on
    the run's clock (UTC hour starts), read from `year` (None: the start's year if it has a
    profile, else the latest) and moved or wrapped by the scenario's `years` rule exactly
    as the zone's carbon trace is (`sim.grid.catalog.plan_years`), so that on-site
    generation and the grid's intensity share their weather. ScenarioError (one line) for a
    zone-year without the profile, with the catalog's reason."""
    cat = renewables_catalog()
    have = cat[(cat["zone"] == zone) & (cat["technology"] == technology) & cat["file"].notna()]
    years = sorted(int(y) for y in have["year"])
    if not years or (year is not None and year not in years):
        capacity_factors(zone, year if year is not None else start.year, technology)  # raises
    plan = plan_years(zone, years, start, horizon_s, year, rule, f"{technology} profile")
    parts = [capacity_factors(zone, y, technology) for y in plan.years_read]
    return on_run_clock(plan, parts, start, horizon_s)


def forecast_capacity_factors(
    cf: np.ndarray, lead_h: float, nrmse_24h: float, rng: np.random.Generator
) -> np.ndarray:
    """A forecast of the capacity factors `cf` (0..1) issued `lead_h` hours ahead.

    Each value is multiplied by an independent log-normal factor of mean 1 (unbiased before
    the cap; zero stays zero, so no sun is forecast at night) and capped at 1:
    ``min(1, cf * exp(s z - s^2 / 2))``, z ~ N(0, 1). Its log-spread grows like the square
    root of the lead up to a day, ``s(h) = s24 * sqrt(min(h, 24) / 24)``, and s24 is set so
    that the day-ahead RMSE in units of capacity is `nrmse_24h` on this series:
    ``s24^2 = ln(1 + nrmse_24h^2 / mean(cf^2))``. ValueError for a negative lead or nrmse."""
    if lead_h < 0 or nrmse_24h < 0:
        raise ValueError(f"lead_h and nrmse_24h must be >= 0, got {lead_h} and {nrmse_24h}")
    cf = np.asarray(cf, dtype=np.float64)
    mean_sq = float(np.mean(cf**2))
    if mean_sq == 0.0:
        return cf.copy()
    s = math.sqrt(math.log1p(nrmse_24h**2 / mean_sq)) * math.sqrt(min(lead_h, 24.0) / 24.0)
    factor = np.exp(s * rng.standard_normal(cf.shape) - s * s / 2)
    return np.minimum(cf * factor, 1.0)
