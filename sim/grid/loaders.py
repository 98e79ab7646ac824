"""Trace files -> UTC series in g/kWh, loudly validated (`TraceError` naming file and line)."""

from __future__ import annotations

import csv
import gzip
import io
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.grid.signal import SERIES_NAME, _fmt_time

if TYPE_CHECKING:
    pass

UNIT_TO_G_PER_KWH = {"g/kWh": 1.0, "kg/kWh": 1000.0, "lbs/MWh": 0.45359237}
"""Factor converting a trace value in the given unit to g/kWh (1 lb = 453.59237 g)."""


def _short(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _read_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, data rows and their 1-based line numbers (blank lines skipped). Reads .gz too."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{path}: cannot read trace file ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise TraceError(f"{path}: cannot decompress gzip trace file ({e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise TraceError(f"{path}:{line}: not UTF-8 text ({e.reason})") from None
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


def _tz(timezone: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        return None


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
    header, rows, lines = _read_rows(path)
    for name in (time_column, column):
        if name not in header:
            raise TraceError(
                f"{path}:1: no column {name!r}; the columns are: "
                f"{', '.join(repr(h) for h in header)}"
            )
    ti, vi = header.index(time_column), header.index(column)
    width = len(header)
    for row, line in zip(rows, lines, strict=True):
        if len(row) != width:
            raise TraceError(
                f"{path}:{line}: expected {width} fields like the header, got {len(row)}"
            )
    if len(rows) < 2:
        where = f"{path}:{lines[-1] if lines else 1}"
        raise TraceError(f"{where}: a trace needs at least 2 data rows, got {len(rows)}")
    line_arr = np.asarray(lines)

    # values
    raw_values = pd.Series([r[vi].strip() for r in rows], dtype=object)
    values = pd.to_numeric(raw_values, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        k = int(np.argmax(bad))
        raise TraceError(f"{path}:{line_arr[k]}: {column} is not a number: {_short(raw_values[k])}")
    if (values < 0).any():
        k = int(np.argmax(values < 0))
        raise TraceError(f"{path}:{line_arr[k]}: {column} must be >= 0, got {raw_values[k]}")
    values = values * UNIT_TO_G_PER_KWH[unit]

    # timestamps
    raw_times = pd.Series([r[ti].strip() for r in rows], dtype=object)
    aware = raw_times.str.slice(10).str.contains(r"[Zz+\-]", regex=True).to_numpy(dtype=bool)
    if aware.any() and not aware.all():
        k = int(np.argmax(aware != aware[0]))
        raise TraceError(
            f"{path}:{line_arr[k]}: {time_column} {_short(raw_times[k])} "
            f"{'has' if aware[k] else 'lacks'} a UTC offset, unlike line {line_arr[0]}; "
            f"give all timestamps with an offset or none"
        )
    zone = _tz(timezone)
    if zone is None:
        where = f"{path}:{line_arr[0]}" if not aware[0] else f"{path}"
        example = f" for naive timestamps such as {_short(raw_times[0])}" if not aware[0] else ""
        raise TraceError(
            f"{where}: unknown time zone {timezone!r}{example} (expected an IANA name such "
            f"as 'Europe/Berlin' or 'UTC')"
        )
    parsed = pd.to_datetime(raw_times, format="ISO8601", errors="coerce", utc=bool(aware[0]))
    nat = parsed.isna().to_numpy()
    if nat.any():
        k = int(np.argmax(nat))
        raise TraceError(
            f"{path}:{line_arr[k]}: {time_column} is not an ISO 8601 timestamp: "
            f"{_short(raw_times[k])}"
        )
    index = pd.DatetimeIndex(parsed)
    if not aware[0]:
        index = _localize(index, zone)

    secs = np.asarray((index - index[0]).total_seconds(), dtype=np.float64)
    steps = np.diff(secs)
    if (steps <= 0).any():
        k = int(np.argmax(steps <= 0)) + 1
        what = "duplicates" if steps[k - 1] == 0 else "is earlier than"
        in_utc = ""
        if aware[0] or zone.key != "UTC":
            in_utc = f" (in UTC: {_fmt_time(index[k])} and {_fmt_time(index[k - 1])})"
        raise TraceError(
            f"{path}:{line_arr[k]}: {time_column} {_short(raw_times[k])} {what} the timestamp "
            f"on line {line_arr[k - 1]} ({_short(raw_times[k - 1])}){in_utc}; timestamps must "
            f"be strictly increasing in UTC"
        )
    index.name = "timestamp"
    return pd.Series(values, index=index, name=SERIES_NAME)


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
