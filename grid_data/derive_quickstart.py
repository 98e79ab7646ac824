"""Derive the quickstart carbon traces (hourly, 2020, DE/GB/FR) from the Let's Wait Awhile data.

Source: Wiesner et al., "Let's Wait Awhile: How Temporal Workload Shifting Can Reduce Carbon
Emissions in the Cloud", Middleware 2021 (https://github.com/dos-group/lets-wait-awhile),
files `{ger,gb,fr}_ci.csv`: columns `Time,Carbon Intensity`, UTC timestamps without zone,
average life-cycle gCO2e/kWh computed from ENTSO-E generation data.

Method, per zone:
1. The sub-hourly samples form a step function: each sample holds until the next one.
2. The value of UTC hour h is the time-weighted mean of that step function over [h, h+1h),
   computed exactly from its integral (`sim.grid.CarbonSignal`).
3. An hour in which no sample starts is a gap: its value is linearly interpolated between the
   neighbouring hours' means. Gaps are counted and printed, never filled silently; so are
   "long steps" (an interval between samples longer than the file's median step, i.e.
   missing sub-hourly samples, bridged by holding the previous sample).

Writes `quickstart/{ZONE}_2020.csv.gz` (columns `timestamp,carbon_intensity`, ISO UTC, value
rounded to 1e-4 g/kWh, gzip with a zero mtime so regenerating gives identical bytes) and
`quickstart/catalog.csv`.

    python grid_data/derive_quickstart.py [SOURCE_DIR] [--out OUT_DIR]

SOURCE_DIR defaults to ../shared/data/lets-wait-awhile relative to the repository root.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.grid import CarbonSignal

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "lets-wait-awhile"
DEFAULT_OUT = REPO / "grid_data" / "quickstart"
YEAR = 2020
SOURCE_NOTE = (
    "Wiesner et al. 2021, Let's Wait Awhile (Middleware'21), dos-group/lets-wait-awhile "
    "data/{file}; ENTSO-E generation x IPCC life-cycle factors"
)


@dataclass(frozen=True)
class Zone:
    zone: str
    name: str
    source_file: str
    lat: float
    lon: float
    """Representative location: a major datacenter hub of the zone (for maps and the WAN)."""


ZONES = [
    Zone("DE", "Germany", "ger_ci.csv", 50.1109, 8.6821),  # Frankfurt am Main
    Zone("GB", "Great Britain", "gb_ci.csv", 51.5074, -0.1278),  # London
    Zone("FR", "France", "fr_ci.csv", 48.8566, 2.3522),  # Paris
]


def read_source(path: Path) -> pd.Series:
    df = pd.read_csv(path)
    if list(df.columns) != ["Time", "Carbon Intensity"]:
        sys.exit(f"{path}: expected columns Time,Carbon Intensity, got {list(df.columns)}")
    t = pd.DatetimeIndex(pd.to_datetime(df["Time"], format="ISO8601")).tz_localize("UTC")
    s = pd.Series(df["Carbon Intensity"].to_numpy(dtype=float), index=t)
    if not s.index.is_monotonic_increasing or s.index.has_duplicates:
        sys.exit(f"{path}: timestamps are not strictly increasing")
    if not np.isfinite(s.to_numpy()).all() or (s < 0).any():
        sys.exit(f"{path}: values must be finite and >= 0")
    return s


def hourly(s: pd.Series, year: int) -> tuple[pd.Series, dict[str, object]]:
    """Hourly time-weighted means for a calendar year, and a report of gaps and long steps."""
    start = pd.Timestamp(f"{year}-01-01", tz="UTC")
    end = pd.Timestamp(f"{year + 1}-01-01", tz="UTC")
    hours = pd.date_range(start, end, freq="h", inclusive="left")
    horizon_s = (end - start).total_seconds()
    signal = CarbonSignal.from_series(s, start.to_pydatetime(), horizon_s, what=str(s.name))
    edges_s = np.arange(len(hours) + 1, dtype=float) * 3600.0
    means = np.diff(signal.cumulative(edges_s)) / 3600.0

    in_year = s.index[(s.index >= start) & (s.index < end)]
    present = hours.isin(in_year.floor("h"))
    out = pd.Series(np.where(present, means, np.nan), index=hours)
    gaps = hours[~present]
    out = out.interpolate(method="linear", limit_direction="both")

    steps = s.index.to_series().diff()
    median = steps.median()
    long_mask = (steps > median) & (s.index > start) & (s.index - steps < end)
    long_steps = [(t - d, t) for t, d in zip(s.index[long_mask], steps[long_mask], strict=True)]
    resolutions = sorted({str(d) for d in steps[(s.index > start) & (s.index <= end)].unique()})
    report = {
        "gaps": list(gaps),
        "long_steps": long_steps,
        "median_step": median,
        "resolutions": resolutions,
    }
    return out, report


def write_trace(series: pd.Series, path: Path) -> None:
    buf = io.StringIO()
    buf.write("timestamp,carbon_intensity\n")
    for t, v in zip(series.index, series.to_numpy(), strict=True):
        buf.write(f"{t.strftime('%Y-%m-%dT%H:%M:%SZ')},{v:.4f}\n")
    tmp = path.with_name(path.name + ".tmp")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(buf.getvalue().encode("utf-8"))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "source",
        nargs="?",
        type=Path,
        default=DEFAULT_SOURCE,
        help=f"folder with {{ger,gb,fr}}_ci.csv (default {DEFAULT_SOURCE})",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    catalog = []
    for z in ZONES:
        src = args.source / z.source_file
        s = read_source(src)
        s.name = str(src)
        h, rep = hourly(s, YEAR)
        fname = f"{z.zone}_{YEAR}.csv.gz"
        write_trace(h, args.out / fname)
        gaps = rep["gaps"]
        sha = hashlib.sha256(src.read_bytes()).hexdigest()
        print(
            f"{z.zone} {YEAR}: {src.name} (sha256 {sha[:16]}...), {len(s)} source rows, "
            f"resolution {', '.join(rep['resolutions'])} (median {rep['median_step']}) "
            f"-> {len(h)} hourly rows, mean {h.mean():.1f} g/kWh, "
            f"range {h.min():.1f}..{h.max():.1f}"
        )
        print(
            f"  missing hours (linearly interpolated): {len(gaps)}"
            + (f": {', '.join(str(g) for g in gaps[:10])}" if gaps else "")
        )
        print(
            f"  steps longer than the median step (previous sample held): "
            f"{len(rep['long_steps'])}"
            + "".join(f"\n    {a} -> {b}" for a, b in rep["long_steps"][:10])
        )
        catalog.append(
            {
                "zone": z.zone,
                "name": z.name,
                "year": YEAR,
                "lat": z.lat,
                "lon": z.lon,
                "file": fname,
                "rows": len(h),
                "gaps_filled": len(gaps),
                "source": SOURCE_NOTE.format(file=z.source_file),
            }
        )

    cat_path = args.out / "catalog.csv"
    with open(cat_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(catalog[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(catalog)
    print(f"wrote {cat_path} and {len(catalog)} traces")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
