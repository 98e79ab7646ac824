"""Hourly day-ahead wholesale electricity prices of catalog zones (`grid_data/prices/`).

`grid_data/prices/catalog.csv` lists one row per zone-year; each is an hourly Parquet file
of day-ahead auction prices, EUR/MWh, on a UTC index of hour starts. `python -m
sim.grid.build_prices` derives them (grid_data/SOURCES.md, "Day-ahead prices"). Prices
can be negative. A zone-year is the market's local calendar year (for the SMARD data, the
CET year: 8760 hours from 2017-12-31 23:00 UTC for 2018).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

import pandas as pd

from sim.errors import ScenarioError
from sim.grid.catalog import GRID_DATA_DIR, plan_years, wrapped_series

__all__ = ["PRICE_SERIES_NAME", "load_price", "price_series", "price_zone_years"]

PRICE_SERIES_NAME = "price_eur_per_mwh"


@lru_cache(maxsize=1)
def _catalog() -> pd.DataFrame:
    path = GRID_DATA_DIR / "prices" / "catalog.csv"
    if not path.is_file():
        raise ScenarioError(f"no price catalog at {path}; run `python -m sim.grid.build_prices`")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def price_zone_years() -> list[tuple[str, int]]:
    """(zone, year) pairs that have day-ahead prices, sorted."""
    cat = _catalog()
    return sorted(zip(cat["zone"], cat["year"].astype(int), strict=True))


def load_price(zone: str, year: int) -> pd.Series:
    """Hourly day-ahead price of `zone` in `year`, EUR/MWh, on a UTC index of hour starts.
    ScenarioError naming the zone-years that have prices if this one has none."""
    cat = _catalog()
    row = cat[(cat["zone"] == zone) & (cat["year"] == year)]
    if row.empty:
        known = ", ".join(f"{z} {y}" for z, y in price_zone_years())
        raise ScenarioError(f"no day-ahead prices for zone {zone} in {year}; prices: {known}")
    frame = pd.read_parquet(GRID_DATA_DIR / row["file"].iloc[0])
    series = frame.set_index("timestamp")[PRICE_SERIES_NAME].astype("float64")
    series.index.name = "timestamp"
    return series


def price_series(
    zone: str, year: int, start: datetime, horizon_s: float, rule: str | None = None
) -> pd.Series:
    """`zone`'s prices of `year` covering [start, start + horizon_s], EUR/MWh, read under
    the scenario's `years` rule like a carbon trace (`sim.grid.catalog.plan_years`: another
    year only with "align" or "wrap", moved by whole days keeping weekday and hour);
    `attrs["year_plan"]` is the plan. ScenarioError naming both spans if the prices do not
    cover the run."""
    years = sorted(y for z, y in price_zone_years() if z == zone)
    series = load_price(zone, year)
    plan = plan_years(zone, years, start, horizon_s, year, rule, "prices")
    offset = timedelta(days=plan.shift_days)
    t0 = start.astimezone(UTC) - offset
    t1 = t0 + timedelta(seconds=horizon_s)
    if plan.wrapped:
        series = wrapped_series(series, t0, horizon_s)
    first = series.index[0].to_pydatetime()
    end = series.index[-1].to_pydatetime() + timedelta(hours=1)
    if t0 < first or t1 > end:
        raise ScenarioError(
            f"zone {zone}: the run needs prices from {t0:%Y-%m-%d %H:%M} to "
            f"{t1:%Y-%m-%d %H:%M} UTC (from {year}), but the {year} prices cover "
            f'{first:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC; years = "wrap" stays '
            f"within them (docs/grid-years.md)"
        )
    shifted = series.copy()
    shifted.index = shifted.index + pd.Timedelta(offset)
    shifted.attrs = {"year_plan": plan}
    return shifted
