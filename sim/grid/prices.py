"""Hourly day-ahead wholesale electricity prices of catalog zones, real or modelled.

Two sources (`PRICE_SOURCES`), each a folder of `grid_data/` with a `catalog.csv` listing one
row per zone-year and an hourly Parquet file per zone-year, EUR/MWh, on a UTC index of hour
starts:

- ``"day-ahead"`` (`grid_data/prices/`): the day-ahead auction prices (SMARD, 2018, eight
  zones), derived by `python -m sim.grid.build_prices` (grid_data/SOURCES.md, "Day-ahead
  prices"). Prices can be negative. A zone-year is the market's local calendar year (for
  the SMARD data the CET year: 8760 hours from 2017-12-31 23:00 UTC for 2018).
- ``"modelled"`` (`grid_data/prices_modelled/`): the marginal cost of elmada's PWL merit
  order (the same run as the marginal emission factors, `python -m sim.grid.build_marginal`;
  grid_data/SOURCES.md, "Modelled day-ahead prices"), 2017-2020, 20 zones, on the UTC
  calendar year. A model, not a market price: docs/electricity-costs.md, "Modelled
  prices", compares it with the real 2018 prices. Never negative.

No source stands in for the other: a caller names the one it wants.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Literal

import pandas as pd

from sim.errors import ScenarioError
from sim.grid.catalog import plan_years, wrapped_series
from sim.grid.data_dir import grid_data_dir, read_catalog_csv

__all__ = [
    "PRICE_SERIES_NAME",
    "PRICE_SOURCES",
    "PriceSource",
    "load_price",
    "price_method",
    "price_series",
    "price_zone_years",
]

PRICE_SERIES_NAME = "price_eur_per_mwh"

PriceSource = Literal["day-ahead", "modelled"]

PRICE_SOURCES: dict[str, tuple[str, str]] = {
    # source -> (folder of grid_data, the command that builds it)
    "day-ahead": ("prices", "python -m sim.grid.build_prices"),
    "modelled": ("prices_modelled", "python -m sim.grid.build_marginal"),
}


def _catalog(source: str) -> pd.DataFrame:
    if source not in PRICE_SOURCES:
        raise ScenarioError(f"unknown price source {source!r}; known: {list(PRICE_SOURCES)}")
    folder, command = PRICE_SOURCES[source]
    return read_catalog_csv(grid_data_dir() / folder / "catalog.csv", f"{source} price", command)


def price_zone_years(source: PriceSource = "day-ahead") -> list[tuple[str, int]]:
    """(zone, year) pairs that have prices of `source`, sorted."""
    cat = _catalog(source)
    return sorted(zip(cat["zone"], cat["year"].astype(int), strict=True))


def _row(zone: str, year: int, source: PriceSource) -> pd.Series:
    """The catalog row of `zone`-`year` in `source`; ScenarioError naming the zone-years that
    have prices of `source` (and, for a day-ahead miss, the modelled series if it exists)."""
    cat = _catalog(source)
    row = cat[(cat["zone"] == zone) & (cat["year"] == year)]
    if row.empty:
        known = ", ".join(f"{z} {y}" for z, y in price_zone_years(source))
        hint = ""
        if source == "day-ahead" and (zone, year) in price_zone_years("modelled"):
            hint = (
                f'; modelled prices exist for {zone} {year}: prices = "modelled" (a '
                'merit-order model, docs/electricity-costs.md "Modelled prices")'
            )
        raise ScenarioError(f"no {source} prices for zone {zone} in {year}; prices: {known}{hint}")
    return row.iloc[0]


def load_price(zone: str, year: int, source: PriceSource = "day-ahead") -> pd.Series:
    """Hourly price of `zone` in `year` from `source`, EUR/MWh, on a UTC index of hour
    starts. ScenarioError naming the zone-years that have prices if this one has none."""
    row = _row(zone, year, source)
    frame = pd.read_parquet(grid_data_dir() / row["file"])
    series = frame.set_index("timestamp")[PRICE_SERIES_NAME].astype("float64")
    series.index.name = "timestamp"
    return series


def price_method(zone: str, year: int, source: PriceSource = "day-ahead") -> str:
    """How the `source` prices of `zone` in `year` were made, as its catalog says: the
    `method` column (modelled prices) or the `source` column (day-ahead prices)."""
    row = _row(zone, year, source)
    return str(row["method"] if "method" in row.index else row["source"])


def price_series(
    zone: str,
    year: int,
    start: datetime,
    horizon_s: float,
    rule: str | None = None,
    source: PriceSource = "day-ahead",
) -> pd.Series:
    """`zone`'s `source` prices of `year` covering [start, start + horizon_s], EUR/MWh, read
    under the scenario's `years` rule like a carbon trace (`sim.grid.catalog.plan_years`:
    another year only with "align" or "wrap", moved by whole days keeping weekday and hour);
    `attrs["year_plan"]` is the plan. ScenarioError naming both spans if the prices do not
    cover the run."""
    years = sorted(y for z, y in price_zone_years(source) if z == zone)
    series = load_price(zone, year, source)
    plan = plan_years(zone, years, start, horizon_s, year, rule, "prices")
    offset = timedelta(days=plan.shift_days)
    t0 = start.astimezone(UTC) - offset
    t1 = t0 + timedelta(seconds=horizon_s)
    first = series.index[0].to_pydatetime()
    end = series.index[-1].to_pydatetime() + timedelta(hours=1)
    if rule == "wrap" and (t0 < first or t1 > end):
        # A price year may be a CET year (`build_prices`): wrap where the prices end, not
        # where the UTC calendar year does.
        plan = replace(plan, wrapped=True)
        series = wrapped_series(series, t0, horizon_s)
    first = series.index[0].to_pydatetime()
    end = series.index[-1].to_pydatetime() + timedelta(hours=1)
    if t0 < first or t1 > end:
        raise ScenarioError(
            f"zone {zone}: the run needs prices from {t0:%Y-%m-%d %H:%M} to "
            f"{t1:%Y-%m-%d %H:%M} UTC (from {year}), but the {year} {source} prices cover "
            f'{first:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC; years = "wrap" stays '
            f"within them (docs/grid-years.md)"
        )
    shifted = series.copy()
    shifted.index = shifted.index + pd.Timedelta(offset)
    shifted.attrs = {"year_plan": plan}
    return shifted
