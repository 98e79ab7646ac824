"""The project's zone catalog (`grid_data/`) and the signal of a scenario's site."""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sim.errors import ScenarioError
from sim.grid.loaders import load_trace_csv
from sim.grid.signal import CarbonSignal

if TYPE_CHECKING:
    from sim.scenario import Scenario

GRID_DATA_DIR = Path(__file__).resolve().parents[2] / "grid_data"
"""The project's carbon-trace catalog. Found relative to the source tree, which works because
the package is installed editable from the repository; a later change moves the data into
package data (`importlib.resources`)."""


@lru_cache(maxsize=1)
def _catalog() -> tuple[dict[str, str], ...]:
    """Rows of every `grid_data/*/catalog.csv`, each with its absolute `path`."""
    out: list[dict[str, str]] = []
    for cat in sorted(GRID_DATA_DIR.glob("*/catalog.csv")):
        with cat.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                row = dict(row)
                row["path"] = str(cat.parent / row["file"])
                out.append(row)
    return tuple(out)


def available_zones() -> list[tuple[str, int]]:
    """(zone, year) pairs in the `grid_data` catalog, sorted."""
    return sorted({(r["zone"], int(r["year"])) for r in _catalog()})


@lru_cache(maxsize=32)
def _load_zone_cached(path: str) -> pd.Series:
    return load_trace_csv(path)


def load_zone(zone: str, year: int) -> pd.Series:
    """Hourly trace (g/kWh, UTC index) of a grid zone for a calendar year from `grid_data/`.

    Raises `ScenarioError` listing the available zones and years when there is none.
    Loaded files are cached; each call returns a fresh copy.
    """
    for row in _catalog():
        if row["zone"] == zone and int(row["year"]) == int(year):
            return _load_zone_cached(row["path"]).copy()
    avail = ", ".join(f"{z} {y}" for z, y in available_zones()) or "none"
    raise ScenarioError(
        f"no carbon trace for zone {zone!r} in {year} in {GRID_DATA_DIR}; available: {avail}"
    )


def signal_for_site(scenario: Scenario, index: int) -> CarbonSignal:
    """The carbon signal of `scenario.sites[index]`, covering [0, scenario.horizon_s].

    From the site's `carbon` config: a catalog zone (year defaults to the scenario start's
    year), a CSV file, or a constant. Raises `ScenarioError` prefixed with the key path
    ``sites[i].carbon``; `TraceError` from reading a file propagates unchanged.
    """
    c = scenario.sites[index].carbon
    key = f"sites[{index}].carbon"
    horizon_s = scenario.horizon_s
    if c.constant_g_per_kwh is not None:
        return CarbonSignal.constant(c.constant_g_per_kwh, horizon_s, kind=c.kind)
    if c.zone is not None:
        year = c.year if c.year is not None else scenario.start.year
        try:
            series = load_zone(c.zone, year)
        except ScenarioError as e:
            raise ScenarioError(f"{key}.zone: {e}") from None
        what = f"{key} (zone {c.zone} {year})"
    elif c.file is not None:
        series = load_trace_csv(
            c.file,
            column=c.column,
            time_column=c.time_column,
            unit=c.unit,
            timezone=c.timezone,
        )
        what = f"{key} (file {c.file})"
    else:  # pragma: no cover - the scenario schema guarantees exactly one source
        raise ScenarioError(f"{key}: give exactly one of zone, file, constant_g_per_kwh")
    return CarbonSignal.from_series(series, scenario.start, horizon_s, what=what, kind=c.kind)
