"""Trace files -> UTC series in g/kWh, loudly validated (`TraceError` naming file and line).

One loader per format users already have (see docs/trace-formats.md), and `load_trace`, which
picks one by name:

- "csv": `load_trace_csv`, a timestamp column and a value column in a declared unit;
- "electricitymaps": `load_electricitymaps`, Electricity Maps CSV exports (LCA or direct);
- "watttime": `load_watttime`, WattTime MOER in lbs CO2/MWh (CSV, or the v3 JSON);
- "entsoe": `load_entsoe_generation`, ENTSO-E Actual Generation per Production Type CSV;
- "uk-api": `load_uk_api`, api.carbonintensity.org.uk JSON, national or one region.

Every loader returns a float Series named `SERIES_NAME` on a sorted, unique, tz-aware UTC
DatetimeIndex named "timestamp", in g/kWh, holding each value from its timestamp to the next
(a step function: nothing is resampled). Everything a loader had to repair is counted in
`series.attrs["repairs"]` (a dict, `REPAIR_KEYS`; `CarbonSignal.repairs` carries it into a
run's meta.json) and logged (warning) rather than hidden. Values must be finite numbers from
0 to `MAX_INTENSITY_G_PER_KWH`. Every error is one line naming the file, the CSV line
(header = line 1) or the JSON path (`data[17].intensity.actual`), and the bad value.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import re
import zlib
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any, Literal, overload
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.grid.factors import ENTSOE_FUELS, VARIANTS, intensity_from_generation
from sim.grid.signal import SERIES_NAME, _fmt_time
from sim.util.text import not_utf8

log = logging.getLogger(__name__)

TRACE_FORMATS = ("csv", "electricitymaps", "watttime", "entsoe", "uk-api")
"""Names of the trace formats `load_trace` reads (`sites[i].carbon.format`)."""

"""Emission-factor variants: lifecycle (Electricity Maps "LCA") or direct (combustion only)."""

UNIT_TO_G_PER_KWH = {"g/kWh": 1.0, "kg/kWh": 1000.0, "lbs/MWh": 0.45359237}
"""Factor converting a trace value in the given unit to g/kWh (1 lb = 453.59237 g)."""

REPAIR_KEYS = {
    "mtus_dropped": "ENTSO-E MTUs without any generation number, dropped (the previous "
    "value holds on)",
    "cells_filled": "ENTSO-E generation cells without data, filled with the previous value",
    "negatives_clipped": "negative generation cells set to 0 (ENTSO-E; the zone catalog)",
    "forecast_fallbacks": "UK API entries without an actual intensity: the forecast is used",
    "gaps_filled_h": "hours of a zone-year in which the catalog filled missing data",
}
"""Keys of `series.attrs["repairs"]` (counts) and what each counts. A loader sets the keys
of the repairs it can make, 0 included; "gaps_filled_h" comes from the zone catalog."""

MAX_INTENSITY_G_PER_KWH = 5000.0
"""Largest carbon intensity a trace may hold, g/kWh (after unit conversion). The dirtiest
generation emits about 1,000 g/kWh (coal, lifecycle: IPCC AR5 WGIII Annex III, Table
A.III.2; lignite plants' direct emissions are of the same order), and every average or
marginal intensity is a mix of such plants; 5,000 leaves a wide margin and still catches a
trace in kg/MWh or lbs/MWh read as g/kWh by a factor 1000 mix-up."""

MAX_GENERATION_MW = 1e6
"""Largest generation one ENTSO-E cell may report, MW (1 TW: more than the generating
capacity of all ENTSO-E members together, about 1,000 GW, ENTSO-E Statistical Factsheet)."""

ENTSOE_NEGATIVE_SHARE = 0.05
"""ENTSO-E generation cells below 0 are clipped to 0 and counted when their magnitude is at
most this share of the row's generation (the sum of its positive production-type cells):
station-service consumption and metering offsets of idle plants, booked as negative
generation (Hirth, Muehlenpfordt and Bulkeley 2018, The ENTSO-E Transparency Platform,
Applied Energy 225, section 4 on data quality). Clipping such a cell changes the row's total
by at most 5 %. A larger negative cell is not an artefact but a wrong column or sign:
`TraceError`."""


# --- where a value came from ---------------------------------------------------------------


class _Where:
    """Where row k of a trace came from, for error messages.

    CSV rows are named by line (`trace.csv:12: carbon_intensity ...`, "line 12"); JSON items
    by their path (`trace.json: data[11].intensity.actual ...`, "data[11].from").
    """

    def __init__(self, path: Path, *, lines: np.ndarray | None = None, items: str = "") -> None:
        self.path = path
        self.lines = lines
        self.items = items  # JSON: the array holding the rows, e.g. "data" or "data.data"

    def pos(self, k: int) -> str:
        if self.lines is not None:
            return f"{self.path}:{self.lines[k]}"
        return f"{self.path}: {self.items}[{k}]"

    def at(self, k: int, field: str) -> str:
        """Message prefix naming the file, row k and `field`."""
        if self.lines is not None:
            return f"{self.path}:{self.lines[k]}: {field}"
        return f"{self.path}: {self.items}[{k}].{field}"

    def ref(self, k: int, field: str) -> str:
        """Row k within a message that already names the file."""
        if self.lines is not None:
            return f"line {self.lines[k]}"
        return f"{self.items}[{k}].{field}"


def _short(value: Any, limit: int = 40) -> str:
    if not isinstance(value, str):
        text = json.dumps(value, default=str)
        return text if len(text) <= limit else text[:limit] + "..."
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _field(fields: str | Sequence[str], k: int) -> str:
    return fields if isinstance(fields, str) else fields[k]


# --- reading files -------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    """The file as text: gzip-compressed or not, UTF-8 with or without a BOM."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{path}: cannot read trace file ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{path}: cannot decompress gzip trace file ({e})") from None
    why = not_utf8(raw)
    if why is not None:
        raise TraceError(f"{path}: trace files are UTF-8 text; {why}")
    return raw.decode("utf-8-sig")


def _read_rows(path: Path, text: str | None = None) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, data rows and their 1-based line numbers (blank lines skipped). Reads .gz too."""
    if text is None:
        text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    line = 0
    try:
        for row in reader:
            first_line = line + 1
            line = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = [h.strip() for h in row]
                continue
            rows.append(row)
            lines.append(first_line)
    except csv.Error as e:
        raise TraceError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None
    if header is None:
        raise TraceError(f"{path}: empty file, expected a header line")
    return header, rows, lines


def _read_json(path: Path, text: str | None = None) -> Any:
    try:
        return json.loads(_read_text(path) if text is None else text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None


class _Table:
    """A CSV trace file: header, rows (lists of cells) and where each row came from."""

    def __init__(self, path: Path, text: str | None = None) -> None:
        self.path = path
        self.header, self.rows, lines = _read_rows(path, text)
        self.lines = np.asarray(lines, dtype=np.int64)
        self.where = _Where(path, lines=self.lines)

    def columns_message(self) -> str:
        return f"the columns are: {', '.join(repr(h) for h in self.header)}"

    def column(self, name: str) -> int:
        """Index of the column `name`; a `TraceError` naming line 1 if there is none."""
        if name not in self.header:
            raise TraceError(f"{self.path}:1: no column {name!r}; {self.columns_message()}")
        return self.header.index(name)

    @overload
    def find(self, names: Sequence[str], what: str, *, required: Literal[True] = ...) -> int: ...
    @overload
    def find(self, names: Sequence[str], what: str, *, required: bool) -> int | None: ...
    def find(self, names: Sequence[str], what: str, *, required: bool = True) -> int | None:
        """Index of the first column whose name matches one of `names`, ignoring case, spacing
        and the subscript in gCO₂; a `TraceError` naming line 1 if `required` and none does."""
        normal = [_normal(h) for h in self.header]
        for name in names:
            if _normal(name) in normal:
                return normal.index(_normal(name))
        if required:
            expected = " or ".join(repr(n) for n in names)
            raise TraceError(
                f"{self.path}:1: no {what} column ({expected}); {self.columns_message()}"
            )
        return None

    def check_shape(self) -> None:
        """Every row as wide as the header, and at least 2 rows."""
        width = len(self.header)
        for row, line in zip(self.rows, self.lines, strict=True):
            if len(row) != width:
                raise TraceError(
                    f"{self.path}:{line}: expected {width} fields like the header, got {len(row)}"
                )
        if len(self.rows) < 2:
            line = self.lines[-1] if len(self.rows) else 1
            raise TraceError(
                f"{self.path}:{line}: a trace needs at least 2 data rows, got {len(self.rows)}"
            )

    def check_single(self, i: int, advice: str) -> None:
        """Column i holds one value throughout (one zone, one area), or a `TraceError`."""
        cells = self.cells(i)
        other = (cells != cells[0]).to_numpy()
        if other.any():
            k = int(np.argmax(other))
            raise TraceError(
                f"{self.where.at(k, self.header[i])} {_short(cells[k])} differs from "
                f"{_short(cells[0])} on {self.where.ref(0, '')}; {advice}"
            )

    def cells(self, i: int) -> pd.Series:
        """Column i as stripped strings (object dtype), one per row."""
        return pd.Series([r[i].strip() for r in self.rows], dtype=object)


def _normal(name: str) -> str:
    return " ".join(name.replace("₂", "2").lower().split())


# --- values and times (shared by every loader) ---------------------------------------------


def _parse_values(
    raw: pd.Series,
    where: _Where,
    field: str | Sequence[str],
    *,
    factor: float = 1.0,
    at_most: float = MAX_INTENSITY_G_PER_KWH,
    unit: str = "g/kWh",
    negative_ok: bool = False,
) -> np.ndarray:
    """Finite numbers x `factor` (float64) from 0 (any sign if `negative_ok`) to `at_most`
    `unit`, or a `TraceError` naming the first bad one (NaN and +-inf are not numbers)."""
    parsed = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(parsed)
    if bad.any():
        k = int(np.argmax(bad))
        raise TraceError(f"{where.at(k, _field(field, k))} is not a number: {_short(raw[k])}")
    if not negative_ok and (parsed < 0).any():
        k = int(np.argmax(parsed < 0))
        raise TraceError(f"{where.at(k, _field(field, k))} must be >= 0, got {_plain(raw[k])}")
    values = parsed * factor
    if (np.abs(values) > at_most).any():
        k = int(np.argmax(np.abs(values) > at_most))
        shown = _plain(raw[k]) if factor == 1.0 else f"{_plain(raw[k])} = {values[k]:.4g} {unit}"
        raise TraceError(
            f"{where.at(k, _field(field, k))} must be at most {at_most:,.0f} {unit}, got "
            f"{shown}; check the unit"
        )
    return values


def _parse_times(
    raw: pd.Series, where: _Where, field: str, timezone: str
) -> tuple[pd.DatetimeIndex, bool]:
    """ISO 8601 strings -> UTC index, and whether the input was not plain UTC (so that error
    messages should show the UTC times). Naive times are wall-clock times in `timezone`,
    converted by `_localize`; times with an offset are converted by it. All or none of the
    times must carry an offset."""
    aware = raw.str.slice(10).str.contains(r"[Zz+\-]", regex=True).to_numpy(dtype=bool)
    if aware.any() and not aware.all():
        k = int(np.argmax(aware != aware[0]))
        if pd.isna(pd.to_datetime(raw[k], format="ISO8601", errors="coerce")):
            raise TraceError(f"{where.at(k, field)} is not an ISO 8601 timestamp: {_short(raw[k])}")
        raise TraceError(
            f"{where.at(k, field)} {_short(raw[k])} "
            f"{'has' if aware[k] else 'lacks'} a UTC offset, unlike {where.ref(0, field)}; "
            f"give all timestamps with an offset or none"
        )
    zone = _tz(timezone)
    if zone is None:
        at = where.pos(0) if not aware[0] else f"{where.path}"
        example = f" for naive timestamps such as {_short(raw[0])}" if not aware[0] else ""
        raise TraceError(
            f"{at}: unknown time zone {timezone!r}{example} (expected an IANA name such "
            f"as 'Europe/Berlin' or 'UTC')"
        )
    parsed = pd.to_datetime(raw, format="ISO8601", errors="coerce", utc=bool(aware[0]))
    nat = parsed.isna().to_numpy()
    if nat.any():
        k = int(np.argmax(nat))
        raise TraceError(f"{where.at(k, field)} is not an ISO 8601 timestamp: {_short(raw[k])}")
    index = pd.DatetimeIndex(parsed)
    if not aware[0]:
        index = _localize(index, zone)
    return index, bool(aware[0]) or zone.key != "UTC"


def _check_increasing(
    index: pd.DatetimeIndex, raw: pd.Series, where: _Where, field: str, show_utc: bool
) -> None:
    """Strictly increasing UTC times, or a `TraceError` naming the first step back."""
    secs = np.asarray((index - index[0]).total_seconds(), dtype=np.float64)
    steps = np.diff(secs)
    if (steps <= 0).any():
        k = int(np.argmax(steps <= 0)) + 1
        what = "duplicates" if steps[k - 1] == 0 else "is earlier than"
        in_utc = ""
        if show_utc:
            in_utc = f" (in UTC: {_fmt_time(index[k])} and {_fmt_time(index[k - 1])})"
        raise TraceError(
            f"{where.at(k, field)} {_short(raw[k])} {what} the timestamp "
            f"on {where.ref(k - 1, field)} ({_short(raw[k - 1])}){in_utc}; timestamps must "
            f"be strictly increasing in UTC"
        )


def _trace(
    index: pd.DatetimeIndex,
    values: np.ndarray,
    repairs: dict[str, int] | None = None,
    **attrs: Any,
) -> pd.Series:
    """The loaders' common result; `attrs["repairs"]` counts what was repaired (empty if
    nothing: `REPAIR_KEYS` names every count a loader may make)."""
    index = pd.DatetimeIndex(index)
    index.name = "timestamp"
    out = pd.Series(np.asarray(values, dtype=np.float64), index=index, name=SERIES_NAME)
    out.attrs.update(attrs)
    out.attrs["repairs"] = {k: int(v) for k, v in (repairs or {}).items()}
    return out


def _timed_values(
    where: _Where,
    raw_times: pd.Series,
    time_field: str,
    raw_values: pd.Series,
    value_field: str | Sequence[str],
    *,
    factor: float = 1.0,
    timezone: str = "UTC",
    **attrs: Any,
) -> pd.Series:
    """The common path of every single-value format: values, then times, then order."""
    values = _parse_values(raw_values, where, value_field, factor=factor)
    index, show_utc = _parse_times(raw_times, where, time_field, timezone)
    _check_increasing(index, raw_times, where, time_field, show_utc)
    return _trace(index, values, **attrs)


def _tz(timezone: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        return None


def _localize(naive: pd.DatetimeIndex, zone: ZoneInfo) -> pd.DatetimeIndex:
    """Naive wall-clock times in `zone` -> UTC, PEP 495 rules for DST folds and gaps."""
    local = naive.tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
    utc_naive = local.tz_convert("UTC").tz_localize(None)
    odd = np.flatnonzero(local.isna())
    if odd.size:
        repeated = naive.duplicated(keep="first")
        out = utc_naive.to_numpy(copy=True)
        for k in odd:
            wall = naive[k].to_pydatetime().replace(tzinfo=zone, fold=int(repeated[k]))
            out[k] = np.datetime64(wall.astimezone(UTC).replace(tzinfo=None), "us")
        utc_naive = pd.DatetimeIndex(out)
    return utc_naive.tz_localize("UTC")


def _check_variant(path: Path, variant: str) -> None:
    if variant not in VARIANTS:
        raise TraceError(
            f"{path}: unknown emission-factor variant {variant!r}; known: {', '.join(VARIANTS)}"
        )


def _note(path: Path, message: str) -> None:
    log.warning("%s: %s", path, message)


# --- generic CSV ---------------------------------------------------------------------------


def load_trace_csv(
    path: str | Path,
    *,
    column: str = "carbon_intensity",
    time_column: str = "timestamp",
    unit: str = "g/kWh",
    timezone: str = "UTC",
) -> pd.Series:
    """Read a carbon-intensity trace from a CSV file (optionally gzip-compressed).

    `time_column` holds ISO 8601 timestamps (``2020-06-01 00:00``, ``2020-06-01T00:00:00Z``,
    ``2020-06-01T02:00+02:00``). Timestamps with a UTC offset are converted to UTC; naive
    timestamps are wall-clock times in `timezone` (IANA name), converted to UTC with the
    rules of PEP 495:

    - a wall time repeated when clocks go back (e.g. 02:30 on 2020-10-25 in Europe/Berlin)
      is the first (summer-time) instant when it first appears and the second (standard-time)
      instant when it appears again;
    - a wall time skipped when clocks go forward (02:30 on 2020-03-29 in Europe/Berlin) is read
      with the offset in force before the change (02:30+01:00 = 01:30 UTC).

    A file may not mix naive and offset timestamps. Values in `column` are converted from
    `unit` ("g/kWh", "kg/kWh" x1000, "lbs/MWh" x0.45359237) to g/kWh.

    Returns a float Series named "carbon_intensity_g_per_kwh" on a UTC DatetimeIndex named
    "timestamp". Raises `TraceError`, one line naming the file, the line (header = line 1)
    and the bad value, for: an unreadable file, a missing column, a non-numeric or negative
    value, an unparseable timestamp, unsorted or duplicated timestamps, fewer than 2 rows,
    an unknown time zone or unit.
    """
    path = Path(path)
    if unit not in UNIT_TO_G_PER_KWH:
        raise TraceError(f"{path}: unknown unit {unit!r}; known: {', '.join(UNIT_TO_G_PER_KWH)}")
    t = _Table(path)
    ti, vi = t.column(time_column), t.column(column)
    t.check_shape()
    return _timed_values(
        t.where,
        t.cells(ti),
        time_column,
        t.cells(vi),
        column,
        factor=UNIT_TO_G_PER_KWH[unit],
        timezone=timezone,
        format="csv",
    )


# --- Electricity Maps ----------------------------------------------------------------------

_EM_TIME = ("Datetime (UTC)",)
_EM_VALUE = {
    # Exports up to 2023 say "(LCA)"; later ones "Carbon intensity ... (Life cycle)".
    "lifecycle": (
        "Carbon Intensity gCO₂eq/kWh (LCA)",
        "Carbon intensity gCO₂eq/kWh (Life cycle)",
    ),
    "direct": ("Carbon Intensity gCO₂eq/kWh (direct)",),
}
_EM_ZONE = ("Zone Id",)


def load_electricitymaps(path: str | Path, *, variant: str = "lifecycle") -> pd.Series:
    """Read an Electricity Maps CSV export (app.electricitymaps.com/datasets, the data
    portal): 5-minute, hourly, daily, monthly or yearly history of one zone.

    Columns read: ``Datetime (UTC)`` (naive UTC times, or ISO 8601 with an offset) and, by
    `variant`, the lifecycle intensity ``Carbon Intensity gCO₂eq/kWh (LCA)`` (exports up to
    2023) or ``Carbon intensity gCO₂eq/kWh (Life cycle)`` (later exports), or the direct one
    ``Carbon Intensity gCO₂eq/kWh (direct)``; column names match ignoring case, spacing and
    "CO₂" written "CO2". If there is a ``Zone Id`` column it must hold one zone. Values are
    g CO2eq/kWh already. Other columns (percentages, data source, estimation) are not read.
    """
    path = Path(path)
    _check_variant(path, variant)
    t = _Table(path)
    ti = t.find(_EM_TIME, "Electricity Maps time")
    vi = t.find(_EM_VALUE[variant], f"Electricity Maps {variant} carbon-intensity")
    zi = t.find(_EM_ZONE, "zone", required=False)
    t.check_shape()
    if zi is not None:
        t.check_single(zi, "export one zone per file")
    return _timed_values(
        t.where,
        t.cells(ti),
        t.header[ti],
        t.cells(vi),
        t.header[vi],
        format="electricitymaps",
        variant=variant,
    )


# --- WattTime ------------------------------------------------------------------------------

_WT_COLUMNS = (("point_time", "value"), ("timestamp", "MOER"))
_WT_TIME_NAMES = ("point_time", "timestamp", "time", "datetime")
_WT_UNITS = "lbs_co2_per_mwh"


def load_watttime(path: str | Path) -> pd.Series:
    """Read WattTime MOER history (marginal operating emissions rate, lbs CO2/MWh) and
    convert it to g/kWh (x 0.45359237). 5-minute data stays 5-minute.

    Accepted layouts (times are UTC unless they carry an offset):

    - CSV ``point_time,value`` (API v3 /v3/historical as saved by the watttime SDK's
      `get_historical_csv`; more columns such as ``version`` are ignored);
    - CSV ``timestamp,MOER`` (API v2 historical downloads; more columns are ignored);
    - CSV with a ``time``/``timestamp``/``point_time``/``datetime`` column and exactly one
      other column holding the MOER (e.g. ``time,Caiso_North`` as in Vessim's datasets);
    - the v3 JSON response ``{"data": [{"point_time": ..., "value": ...}], "meta":
      {"units": "lbs_co2_per_mwh", ...}}`` (a file whose first character is ``{``).
    """
    path = Path(path)
    factor = UNIT_TO_G_PER_KWH["lbs/MWh"]
    text = _read_text(path)
    if text.lstrip()[:1] == "{":
        return _watttime_json(path, text, factor)
    t = _Table(path, text)
    for time_name, value_name in _WT_COLUMNS:
        if time_name in t.header and value_name in t.header:
            ti, vi = t.header.index(time_name), t.header.index(value_name)
            break
    else:
        tis = [i for i, h in enumerate(t.header) if h.lower() in _WT_TIME_NAMES]
        if len(t.header) != 2 or len(tis) != 1:
            raise TraceError(
                f"{path}:1: not a WattTime MOER file: expected the columns 'point_time,value', "
                f"'timestamp,MOER', or a time column and one value column; "
                f"{t.columns_message()}"
            )
        ti, vi = tis[0], 1 - tis[0]
    t.check_shape()
    return _timed_values(
        t.where,
        t.cells(ti),
        t.header[ti],
        t.cells(vi),
        t.header[vi],
        factor=factor,
        format="watttime",
    )


def _watttime_json(path: Path, text: str, factor: float) -> pd.Series:
    doc = _read_json(path, text)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise TraceError(f'{path}: not a WattTime v3 response: expected {{"data": [...]}}')
    meta = doc.get("meta")
    units = meta.get("units") if isinstance(meta, dict) else None
    if units is not None and units != _WT_UNITS:
        raise TraceError(f"{path}: meta.units is {units!r}; expected {_WT_UNITS!r} (a MOER)")
    where = _Where(path, items="data")
    times = _json_times(where, data, "point_time")
    values = pd.Series(
        [_json_number(_json_get(where, k, d, ("value",))) for k, d in enumerate(data)], dtype=object
    )
    return _timed_values(
        where, times, "point_time", values, "value", factor=factor, format="watttime"
    )


def _json_times(where: _Where, items: list, key: str) -> pd.Series:
    """The `key` strings of a JSON array of at least 2 objects; `TraceError` for a short
    array, an item that is not an object, a missing key or a time that is not a string."""
    if len(items) < 2:
        raise TraceError(
            f"{where.path}: {where.items}: a trace needs at least 2 entries, got {len(items)}"
        )
    times: list[str] = []
    for k, item in enumerate(items):
        t = _json_get(where, k, item, (key,))
        if not isinstance(t, str):
            raise TraceError(f"{where.at(k, key)} is not an ISO 8601 timestamp: {_short(t)}")
        times.append(t.strip())
    return pd.Series(times, dtype=object)


def _json_get(where: _Where, k: int, item: Any, keys: tuple[str, ...]) -> Any:
    """item[keys[0]][keys[1]]... of item k; `TraceError` naming the path if absent."""
    node = item
    for depth, key in enumerate(keys):
        inner = ".".join(keys[:depth])
        what = where.at(k, inner) if inner else where.pos(k)
        if not isinstance(node, dict):
            raise TraceError(f"{what} is not an object: {_short(node)}")
        if key not in node:
            raise TraceError(f"{what} has no {key!r}")
        node = node[key]
    return node


def _json_number(v: Any) -> Any:
    """JSON true/false are not numbers (pandas would read them as 1 and 0)."""
    return json.dumps(v) if isinstance(v, bool) else v


# --- UK Carbon Intensity API ---------------------------------------------------------------

UK_VALUES = ("actual", "forecast")


def load_uk_api(path: str | Path, *, value: str = "actual") -> pd.Series:
    """Read a response of the GB Carbon Intensity API (api.carbonintensity.org.uk), saved as
    JSON: half-hourly g CO2/kWh from each entry's ``from`` time (UTC).

    Layouts:

    - national, e.g. ``/intensity/{from}/{to}``: ``{"data": [{"from": "2020-01-01T00:00Z",
      "to": ..., "intensity": {"forecast": 186, "actual": 190, "index": "moderate"}}, ...]}``;
    - one region, e.g. ``/regional/intensity/{from}/{to}/regionid/{id}``: ``{"data":
      {"regionid": 13, ..., "data": [{"from": ..., "intensity": {"forecast": ...},
      "generationmix": [...]}]}}``, or the same object inside a one-element ``data`` list.

    `value="actual"` (default) uses ``intensity.actual`` and falls back to
    ``intensity.forecast`` where the actual is null or absent (the regional API publishes
    forecasts only, so there every entry falls back). The number of fallbacks is in
    ``series.attrs["repairs"]["forecast_fallbacks"]`` and logged as a warning.
    `value="forecast"` uses the forecast throughout. ``generationmix`` is not read.
    """
    path = Path(path)
    if value not in UK_VALUES:
        raise TraceError(f"{path}: unknown value {value!r}; known: {', '.join(UK_VALUES)}")
    doc = _read_json(path)
    data = doc.get("data") if isinstance(doc, dict) else None
    if isinstance(data, dict) and "data" in data:
        entries, items = data["data"], "data.data"
    elif isinstance(data, list) and data and isinstance(data[0], dict) and "regions" in data[0]:
        n = len(data[0]["regions"]) if isinstance(data[0]["regions"], list) else "several"
        raise TraceError(
            f"{path}: data[0].regions holds {n} regions; save the response for one region "
            f"(/regional/intensity/{{from}}/{{to}}/regionid/{{id}})"
        )
    elif isinstance(data, list) and data and isinstance(data[0], dict) and "data" in data[0]:
        if len(data) != 1:
            raise TraceError(
                f"{path}: data holds {len(data)} regions; a trace file must hold one region"
            )
        entries, items = data[0]["data"], "data[0].data"
    elif isinstance(data, list):
        entries, items = data, "data"
    else:
        raise TraceError(
            f'{path}: not a Carbon Intensity API response: expected {{"data": [...]}} '
            f'or {{"data": {{"regionid": ..., "data": [...]}}}}'
        )
    if not isinstance(entries, list):
        raise TraceError(f"{path}: {items} is not an array: {_short(entries)}")
    where = _Where(path, items=items)
    times = _json_times(where, entries, "from")
    fields: list[str] = []
    raw: list[Any] = []
    fallbacks = 0
    for k, entry in enumerate(entries):
        intensity = _json_get(where, k, entry, ("intensity",))
        if not isinstance(intensity, dict):
            raise TraceError(f"{where.at(k, 'intensity')} is not an object: {_short(intensity)}")
        v = intensity.get(value)
        name = value
        if v is None and value == "actual":
            v, name = intensity.get("forecast"), "forecast"
            fallbacks += v is not None
        if v is None:
            has = "neither an actual nor a forecast" if value == "actual" else "no forecast"
            raise TraceError(f"{where.at(k, 'intensity')} has {has} value")
        fields.append(f"intensity.{name}")
        raw.append(_json_number(v))
    out = _timed_values(
        where, times, "from", pd.Series(raw, dtype=object), fields, format="uk-api", value=value
    )
    if value == "actual":
        out.attrs["repairs"] = {"forecast_fallbacks": fallbacks}
        if fallbacks:
            _note(
                path,
                f"{fallbacks} of {len(out)} entries have no actual intensity; "
                f"used intensity.forecast for them",
            )
    return out


# --- ENTSO-E -------------------------------------------------------------------------------

_ENTSOE_COLUMN = re.compile(
    r"^(?P<type>.+?)\s+-\s+Actual\s+(?P<kind>Aggregated|Consumption)\s*[\[(]MW[\])]$",
    re.IGNORECASE,
)
_MTU_HEADER = re.compile(r"^MTU\s*(?:\((?P<zone>[^)]*)\))?$", re.IGNORECASE)
_DT = r"(?P<d{n}>\d{{2}})[./](?P<m{n}>\d{{2}})[./](?P<y{n}>\d{{4}}) (?P<H{n}>\d{{2}}):(?P<M{n}>\d{{2}})(?::(?P<S{n}>\d{{2}}))?"  # noqa: E501
_MTU = (
    rf"^{_DT.format(n=0)}\s*(?:\((?P<z0>[^)]*)\))?\s*-\s*"
    rf"{_DT.format(n=1)}\s*(?:\((?P<z1>[^)]*)\))?$"
)
_MTU_FIXED_H = {"UTC": 0, "GMT": 0, "WET": 0, "WEST": 1, "CET": 1, "CEST": 2, "EET": 2, "EEST": 3}
"""Time-zone labels of a single offset (hours east of UTC)."""
_MTU_ZONES = {
    "CET/CEST": "Europe/Brussels",
    "EET/EEST": "Europe/Athens",
    "WET/WEST": "Europe/Lisbon",
}
"""Time-zone labels that follow daylight saving, as the Transparency Platform offers them."""
_NOT_EXPECTED = ("n/e", "N/E")
_NO_DATA = ("N/A", "n/a", "", "-")


def load_entsoe_generation(path: str | Path, *, variant: str = "lifecycle") -> pd.Series:
    """Read an ENTSO-E Transparency Platform export of "Actual Generation per Production
    Type" (16.1.B&C) for one area as CSV, and derive the average carbon intensity of the
    generation mix with `sim.grid.factors` (`variant` "lifecycle" or "direct").

    Columns read: ``MTU`` (also ``MTU (CET/CEST)``, ``MTU (UTC)``, ...) and every
    ``<production type>  - Actual Aggregated [MW]`` column; ``Actual Consumption`` columns
    (pumped-storage pumping) are not part of the mix and not read. Production types map to
    dcsim fuels by `sim.grid.factors.ENTSOE_FUELS`; storage discharge does not count. If
    there is an ``Area`` column it must hold one area.

    MTU cells are intervals, ``01.01.2020 00:00 - 01.01.2020 01:00`` (also with ``/`` and
    seconds); the interval start is the timestamp. Its time zone is the label in the cell
    (``(CET)``, ``(CEST)``, ``(UTC)``, ``(CET/CEST)``; the one after the start, else after
    the end), else the one in the column name, else CET/CEST, the platform's default (noted
    in ``attrs["mtu_time_zone_assumed"]``). ``CET/CEST`` is Brussels time: the hour repeated
    when clocks go back in October is CEST (UTC+2) when it first appears and CET (UTC+1) the
    second time; ``EET/EEST`` and ``WET/WEST`` likewise.

    Cells: ``n/e`` (not expected: the area has no such plant) is 0 MW. ``N/A``, ``-`` or
    empty is no data: a row with no number at all is dropped (its MTU holds the previous
    value, as in any step function) and counted in ``attrs["repairs"]["mtus_dropped"]``; a
    missing cell in a row with data takes the previous value of its production type (the
    next one at the start of the file, 0 if the type has no value at all), counted in
    ``attrs["repairs"]["cells_filled"]``. A negative cell is set to 0 MW and counted in
    ``attrs["repairs"]["negatives_clipped"]`` when it is small: at most
    `ENTSOE_NEGATIVE_SHARE` (5 %) of its row's generation, or in a storage column (not in
    the mix); a larger one raises `TraceError`. All three are logged as warnings.
    Non-numeric cells or cells above `MAX_GENERATION_MW`, a production type `ENTSOE_FUELS`
    does not know, and a row whose mix is 0 MW raise `TraceError`.
    """

    path = Path(path)
    _check_variant(path, variant)
    t = _Table(path)
    where = t.where

    # columns
    mtu_cols = [i for i, h in enumerate(t.header) if _MTU_HEADER.match(h)]
    if len(mtu_cols) != 1:
        raise TraceError(
            f"{path}:1: expected one MTU column (e.g. 'MTU' or 'MTU (CET/CEST)'), found "
            f"{len(mtu_cols)}; {t.columns_message()}"
        )
    mi = mtu_cols[0]
    fuels_by_name = {_normal(name): fuel for name, fuel in ENTSOE_FUELS.items()}
    gen_cols: dict[int, str] = {}  # column index -> dcsim fuel
    for i, h in enumerate(t.header):
        m = _ENTSOE_COLUMN.match(h)
        if m is None or m["kind"].lower() != "aggregated":
            continue
        fuel = fuels_by_name.get(_normal(m["type"]))
        if fuel is None:
            raise TraceError(
                f"{path}:1: column {h!r}: unknown production type {m['type'].strip()!r}; "
                f"known: {', '.join(ENTSOE_FUELS)}"
            )
        gen_cols[i] = fuel
    if not gen_cols:
        raise TraceError(
            f"{path}:1: no '<production type>  - Actual Aggregated [MW]' columns; "
            f"{t.columns_message()}"
        )
    ai = t.find(("Area",), "area", required=False)
    t.check_shape()
    if ai is not None:
        t.check_single(ai, "export one area per file")

    # generation, MW by production type: n/e -> 0, no data -> NaN
    n = len(t.rows)
    gen = np.empty((n, len(gen_cols)), dtype=np.float64)
    number = np.zeros((n, len(gen_cols)), dtype=bool)
    for j, i in enumerate(gen_cols):
        raw = t.cells(i)
        not_expected = raw.isin(_NOT_EXPECTED).to_numpy()
        no_data = raw.isin(_NO_DATA).to_numpy()
        special = not_expected | no_data
        gen[:, j] = _parse_values(
            raw.where(~special, "0"),
            where,
            t.header[i],
            at_most=MAX_GENERATION_MW,
            unit="MW",
            negative_ok=True,
        )
        gen[no_data, j] = np.nan
        number[:, j] = ~special
    names = [t.header[i] for i in gen_cols]
    clipped = _clip_negative_generation(
        gen, names, [f != "storage" for f in gen_cols.values()], where
    )

    # times
    raw_mtu = t.cells(mi)
    index, assumed = _mtu_to_utc(raw_mtu, where, t.header[mi])
    _check_increasing(index, raw_mtu, where, t.header[mi], True)

    # rows without data; filling of missing cells
    has_data = number.any(axis=1)
    dropped = int(n - has_data.sum())
    frame = pd.DataFrame(gen[has_data], columns=list(range(len(gen_cols))))
    filled = int(frame.isna().to_numpy().sum())
    frame = frame.ffill().bfill().fillna(0.0)
    if len(frame) < 2:
        raise TraceError(
            f"{path}: only {len(frame)} of {n} MTUs have generation data; a trace needs at least 2"
        )
    kept = np.flatnonzero(has_data)
    fuel_of = list(gen_cols.values())
    by_fuel = pd.DataFrame(
        {
            fuel: frame[[j for j, f in enumerate(fuel_of) if f == fuel]].sum(axis=1)
            for fuel in dict.fromkeys(fuel_of)
        }
    )
    ci = intensity_from_generation(by_fuel, variant).to_numpy(dtype=np.float64)
    if np.isnan(ci).any():
        k = int(kept[int(np.argmax(np.isnan(ci)))])
        raise TraceError(
            f"{where.at(k, t.header[mi])} {_short(raw_mtu[k])}: the generation mix is 0 MW "
            f"(storage discharge excluded); cannot derive an intensity"
        )
    repairs = {"mtus_dropped": dropped, "cells_filled": filled, "negatives_clipped": clipped}
    attrs: dict[str, Any] = {"format": "entsoe", "variant": variant}
    attrs["mtu_time_zone_assumed"] = assumed
    if clipped:
        _note(path, f"{clipped} negative generation cells clipped to 0 MW")
    if dropped:
        _note(path, f"{dropped} of {n} MTUs have no generation data (N/A); dropped")
    if filled:
        _note(path, f"{filled} missing generation cells (N/A) filled with the previous value")
    if assumed:
        _note(path, "the MTU column names no time zone; read as CET/CEST (Europe/Brussels)")
    return _trace(index[kept], ci, repairs, **attrs)


def _clip_negative_generation(
    gen: np.ndarray, names: list[str], in_mix: list[bool], where: _Where
) -> int:
    """Set the negative cells of `gen` (MW, rows x the columns `names`, NaN: no data)
    to 0 and return how many there were. A negative cell of a column in the mix may be at
    most `ENTSOE_NEGATIVE_SHARE` of its row's generation (its positive mix cells), else
    `TraceError` naming the line, the column and the value; storage columns are not in the
    mix (pumping booked as negative generation), so any negative value of theirs is clipped."""
    negative = gen < 0  # False where NaN
    if not negative.any():
        return 0
    mix = np.asarray(in_mix, dtype=bool)
    total = np.where((gen > 0) & mix, gen, 0.0).sum(axis=1)
    too_large = negative & mix & (-gen > ENTSOE_NEGATIVE_SHARE * total[:, None])
    if too_large.any():
        k, j = (int(x) for x in np.argwhere(too_large)[0])
        raise TraceError(
            f"{where.at(k, names[j])} is {gen[k, j]:g} MW, more negative than "
            f"{ENTSOE_NEGATIVE_SHARE:.0%} of the row's generation ({total[k]:,.0f} MW): not a "
            f"metering artefact that could be clipped to 0; check the column and its sign"
        )
    gen[negative] = 0.0
    return int(negative.sum())


def _mtu_to_utc(raw: pd.Series, where: _Where, field: str) -> tuple[pd.DatetimeIndex, bool]:
    """MTU interval strings -> UTC interval starts, and whether the time zone was assumed."""
    m = raw.str.extract(_MTU)
    bad = m["d0"].isna().to_numpy()
    if bad.any():
        k = int(np.argmax(bad))
        raise TraceError(
            f"{where.at(k, field)} is not an MTU interval like "
            f"'01.01.2020 00:00 - 01.01.2020 01:00': {_short(raw[k])}"
        )
    iso = m["y0"] + "-" + m["m0"] + "-" + m["d0"] + " " + m["H0"] + ":" + m["M0"] + ":"
    iso = iso + m["S0"].fillna("00")
    naive = pd.to_datetime(iso, format="%Y-%m-%d %H:%M:%S", errors="coerce")
    nat = naive.isna().to_numpy()
    if nat.any():
        k = int(np.argmax(nat))
        raise TraceError(f"{where.at(k, field)} has an invalid date or time: {_short(raw[k])}")
    header = _MTU_HEADER.match(field)
    header_zone = header["zone"] if header else None
    assumed = bool(header_zone is None and m["z0"].isna().all() and m["z1"].isna().all())
    label = m["z0"].fillna(m["z1"]).fillna(header_zone or "CET/CEST").str.strip().str.upper()
    naive_idx = pd.DatetimeIndex(naive)
    out = np.empty(len(raw), dtype="datetime64[us]")
    for lab in label.unique():
        rows = (label == lab).to_numpy()
        if lab in _MTU_FIXED_H:
            utc = naive_idx[rows] - pd.Timedelta(hours=_MTU_FIXED_H[lab])
        elif lab in _MTU_ZONES:
            utc = _localize(naive_idx[rows], ZoneInfo(_MTU_ZONES[lab])).tz_localize(None)
        else:
            k = int(np.argmax(rows))
            known = ", ".join([*_MTU_ZONES, *_MTU_FIXED_H])
            raise TraceError(
                f"{where.at(k, field)} {_short(raw[k])}: unknown time zone {lab!r}; known: {known}"
            )
        out[rows] = utc.as_unit("us").to_numpy()
    return pd.DatetimeIndex(out).tz_localize("UTC"), assumed


# --- dispatch ------------------------------------------------------------------------------


def load_trace(
    path: str | Path,
    *,
    format: str = "csv",
    column: str = "carbon_intensity",
    time_column: str = "timestamp",
    unit: str = "g/kWh",
    timezone: str = "UTC",
    variant: str = "lifecycle",
) -> pd.Series:
    """Read a carbon-intensity trace in one of `TRACE_FORMATS` (see the table in this module's
    docstring and docs/trace-formats.md). `column`, `time_column`, `unit` and `timezone` apply
    to "csv"; `variant` ("lifecycle" or "direct") to "electricitymaps" and "entsoe"."""
    path = Path(path)
    if format == "csv":
        return load_trace_csv(
            path, column=column, time_column=time_column, unit=unit, timezone=timezone
        )
    if format == "electricitymaps":
        return load_electricitymaps(path, variant=variant)
    if format == "watttime":
        return load_watttime(path)
    if format == "entsoe":
        return load_entsoe_generation(path, variant=variant)
    if format == "uk-api":
        return load_uk_api(path)
    raise TraceError(f"{path}: unknown trace format {format!r}; known: {', '.join(TRACE_FORMATS)}")
