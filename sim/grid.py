"""Carbon-intensity signals of power grids: load, align to UTC, exact integrals, forecasts.

What is modelled: the carbon intensity of the electricity a site draws, in g CO2e per kWh,
as a *piecewise-constant* function of simulation time (float seconds since the scenario
start, UTC). Trace samples hold from their timestamp until the next one; the last sample
holds for the trace's median step. Operational carbon of a job is then an exact integral of
piecewise-constant power times this step function, computed from prefix sums (no polling).

- `CarbonSignal`: the step function, with O(log n) `value_at` / `cumulative` / `integral`.
- `load_trace_csv`: a user CSV trace -> UTC series in g/kWh, loudly validated (`TraceError`
  naming file and line).
- `load_zone`: a trace from the project's `grid_data/` catalog.
- `signal_for_site`: the signal of `scenario.sites[i]`, covering the whole scenario.
- `Forecaster`: the only window a policy has into the future (perfect or noisy, seeded).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from sim.errors import ScenarioError, TraceError

if TYPE_CHECKING:
    from sim.scenario import ForecastConfig, Scenario

__all__ = [
    "GRID_DATA_DIR",
    "UNIT_TO_G_PER_KWH",
    "CarbonSignal",
    "Forecaster",
    "available_zones",
    "load_trace_csv",
    "load_zone",
    "signal_for_site",
]

GRID_DATA_DIR = Path(__file__).resolve().parent.parent / "grid_data"
"""The project's carbon-trace catalog. Found relative to the source tree, which works because
the package is installed editable from the repository; a later change moves the data into
package data (`importlib.resources`)."""

UNIT_TO_G_PER_KWH = {"g/kWh": 1.0, "kg/kWh": 1000.0, "lbs/MWh": 0.45359237}
"""Factor converting a trace value in the given unit to g/kWh (1 lb = 453.59237 g)."""

SERIES_NAME = "carbon_intensity_g_per_kwh"


# --- the signal ----------------------------------------------------------------------------


class CarbonSignal:
    """Piecewise-constant carbon intensity (g/kWh) over simulation time (s since scenario start).

    Value i holds on [times_s[i], times_s[i+1]); the last value holds on [times_s[-1], end_s).
    The domain is [times_s[0], end_s]; `times_s[0]` may be negative (a trace step that began
    before the scenario start). Querying outside the domain raises `ValueError`.

    Attributes (read-only arrays):
        times_s: float64 ascending breakpoints, s.
        values_g_per_kwh: float64 carbon intensity on each step, g/kWh.
        end_s: end of the last step, s.
        kind: "average" or "marginal" emissions.
    """

    __slots__ = (
        "times_s",
        "values_g_per_kwh",
        "end_s",
        "kind",
        "_t",
        "_v",
        "_cum",
        "_t0",
        "_knots_s",
        "_knots_cum",
    )

    def __init__(
        self,
        times_s: Sequence[float] | np.ndarray,
        values_g_per_kwh: Sequence[float] | np.ndarray,
        end_s: float,
        kind: str = "average",
    ) -> None:
        t = np.array(times_s, dtype=np.float64)
        v = np.array(values_g_per_kwh, dtype=np.float64)
        end_s = float(end_s)
        if t.ndim != 1 or v.shape != t.shape or t.size == 0:
            raise ValueError(
                f"times_s and values_g_per_kwh must be 1-D of equal, non-zero length, "
                f"got shapes {t.shape} and {v.shape}"
            )
        if not (np.all(np.isfinite(t)) and math.isfinite(end_s)):
            raise ValueError("times_s and end_s must be finite")
        if np.any(np.diff(t) <= 0):
            i = int(np.argmax(np.diff(t) <= 0))
            raise ValueError(f"times_s must be strictly ascending, got {t[i]} then {t[i + 1]}")
        if end_s <= t[-1]:
            raise ValueError(f"end_s ({end_s}) must be after the last breakpoint ({t[-1]})")
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise ValueError("values_g_per_kwh must be finite and >= 0")
        if kind not in ("average", "marginal"):
            raise ValueError(f"kind must be 'average' or 'marginal', got {kind!r}")
        t.setflags(write=False)
        v.setflags(write=False)
        self.times_s = t
        self.values_g_per_kwh = v
        self.end_s = end_s
        self.kind = kind
        # Prefix sums: _cum[i] = integral from t[0] to t[i]. Kept as Python lists too, so the
        # scalar paths (called per job start/finish) are bisect + float arithmetic only.
        knots = np.append(t, end_s)
        cum = np.concatenate(([0.0], np.cumsum(v * np.diff(knots))))
        cum.setflags(write=False)
        self._knots_s = knots
        self._knots_cum = cum
        self._t: list[float] = t.tolist()
        self._v: list[float] = v.tolist()
        self._cum: list[float] = cum.tolist()
        self._t0 = self._t[0]

    def __repr__(self) -> str:
        return (
            f"CarbonSignal({len(self._t)} steps, {self._t0:g}..{self.end_s:g} s, "
            f"{min(self._v):.4g}..{max(self._v):.4g} g/kWh, {self.kind})"
        )

    def __len__(self) -> int:
        return len(self._t)

    # -- construction

    @classmethod
    def constant(
        cls, value_g_per_kwh: float, horizon_s: float, kind: str = "average"
    ) -> CarbonSignal:
        """A constant intensity (g/kWh) over [0, horizon_s] (s)."""
        return cls([0.0], [value_g_per_kwh], horizon_s, kind=kind)

    @classmethod
    def from_series(
        cls,
        series: pd.Series,
        start: datetime,
        horizon_s: float,
        *,
        what: str,
        kind: str = "average",
    ) -> CarbonSignal:
        """The step function of a trace, in seconds since `start`, covering [0, horizon_s].

        `series`: values in g/kWh on a DatetimeIndex (UTC; a naive index is read as UTC).
        Each sample holds until the next; the last one holds for the median step.
        `what` names the trace in errors. Raises `ScenarioError` when the trace does not
        cover [start, start + horizon_s], naming both times. Only the breakpoints needed for
        the horizon are kept (plus the one at or before 0).
        """
        if not isinstance(series.index, pd.DatetimeIndex):
            raise ScenarioError(f"{what}: trace index must be timestamps, got {series.index.dtype}")
        if len(series) < 2:
            raise ScenarioError(f"{what}: trace needs at least 2 samples, got {len(series)}")
        idx = series.index
        idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
        start_ts = _utc(start)
        t = np.asarray((idx - start_ts).total_seconds(), dtype=np.float64)
        v = np.asarray(series.to_numpy(), dtype=np.float64)
        steps = np.diff(t)
        if np.any(steps <= 0):
            i = int(np.argmax(steps <= 0))
            raise ScenarioError(
                f"{what}: trace timestamps must be strictly increasing, "
                f"got {_fmt_time(idx[i])} then {_fmt_time(idx[i + 1])}"
            )
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            i = int(np.argmax(~np.isfinite(v) | (v < 0)))
            raise ScenarioError(
                f"{what}: trace value at {_fmt_time(idx[i])} is {v[i]}, "
                f"expected a finite number >= 0"
            )
        last_step_s = float(np.median(steps))
        covered_end_s = float(t[-1]) + last_step_s
        if t[0] > 0:
            raise ScenarioError(
                f"{what}: trace starts {_fmt_time(idx[0])}, after the scenario start "
                f"{_fmt_time(start_ts)}"
            )
        if covered_end_s < horizon_s:
            end_ts = idx[-1] + pd.Timedelta(seconds=last_step_s)
            scen_end = start_ts + pd.Timedelta(seconds=horizon_s)
            raise ScenarioError(
                f"{what}: trace ends {_fmt_time(end_ts)}, before the scenario end "
                f"{_fmt_time(scen_end)}"
            )
        i0 = int(np.searchsorted(t, 0.0, side="right")) - 1  # last breakpoint at or before 0
        i1 = int(np.searchsorted(t, horizon_s, side="left"))  # first breakpoint at/after end
        i1 = max(i1, i0 + 1)
        return cls(t[i0:i1], v[i0:i1], horizon_s, kind=kind)

    # -- queries (scalar fast paths use bisect on Python lists)

    def _check(self, t_s: float) -> None:
        if not (self._t0 <= t_s <= self.end_s):
            raise ValueError(
                f"t_s={t_s} is outside the signal's domain [{self._t0}, {self.end_s}] s"
            )

    def value_at(self, t_s: float) -> float:
        """Carbon intensity (g/kWh) at time `t_s` (s); at `end_s`, the last step's value."""
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        return self._v[bisect_right(self._t, t_s) - 1]

    def cumulative(self, t_s: float | np.ndarray) -> float | np.ndarray:
        """Exact integral of the intensity from `times_s[0]` to `t_s`, in (g/kWh)*s.

        Scalars take a bisect path; arrays are vectorised with `np.interp` on the prefix sums
        (exact up to rounding, since the integral is piecewise linear between breakpoints).
        """
        if not isinstance(t_s, float | int):
            arr = np.asarray(t_s, dtype=np.float64)
            if arr.size and (arr.min() < self._t0 or arr.max() > self.end_s):
                bad = arr[(arr < self._t0) | (arr > self.end_s)][0]
                self._check(float(bad))
            return np.interp(arr, self._knots_s, self._knots_cum)
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        i = bisect_right(self._t, t_s) - 1
        return self._cum[i] + self._v[i] * (t_s - self._t[i])

    def integral(self, t0_s: float, t1_s: float) -> float:
        """Exact integral of the intensity over [t0_s, t1_s] (s), in (g/kWh)*s.

        Multiply by a constant power in kW and divide by 3600 to get grams. Computed from the
        two partial steps plus a prefix-sum difference over the whole steps between them, so
        short intervals late in a long signal keep full relative precision.
        """
        if t1_s < t0_s:
            raise ValueError(f"integral needs t0_s <= t1_s, got {t0_s} > {t1_s}")
        if not (self._t0 <= t0_s and t1_s <= self.end_s):
            self._check(t0_s)
            self._check(t1_s)
        t, v = self._t, self._v
        i = bisect_right(t, t0_s) - 1
        j = bisect_right(t, t1_s) - 1
        if i == j:
            return v[i] * (t1_s - t0_s)
        return v[i] * (t[i + 1] - t0_s) + (self._cum[j] - self._cum[i + 1]) + v[j] * (t1_s - t[j])

    def mean(self, t0_s: float, t1_s: float) -> float:
        """Time-weighted mean intensity (g/kWh) over [t0_s, t1_s]; the value at t0_s if equal."""
        if t1_s == t0_s:
            return self.value_at(t0_s)
        return self.integral(t0_s, t1_s) / (t1_s - t0_s)

    def breakpoints_between(self, t0_s: float, t1_s: float) -> np.ndarray:
        """Breakpoints (s) strictly inside (t0_s, t1_s), ascending (a read-only view)."""
        return self.times_s[bisect_right(self._t, t0_s) : bisect_left(self._t, t1_s)]

    def step_index(self, t_s: float) -> int:
        """Index i of the step holding at `t_s` (times_s[i] <= t_s < times_s[i+1])."""
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        return bisect_right(self._t, t_s) - 1


def _utc(ts: pd.Timestamp | datetime) -> pd.Timestamp:
    """A timestamp in UTC; a naive one is taken to be UTC already."""
    ts = pd.Timestamp(ts)
    return ts.tz_localize("UTC") if ts.tz is None else ts.tz_convert("UTC")


def _fmt_time(ts: pd.Timestamp | datetime) -> str:
    """UTC time as 2020-06-01T00:00Z (seconds shown only when non-zero)."""
    ts = _utc(ts)
    if ts.second or ts.microsecond or ts.nanosecond:
        return ts.strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    return ts.strftime("%Y-%m-%dT%H:%M") + "Z"


# --- CSV traces ----------------------------------------------------------------------------


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


# --- the grid_data catalog -----------------------------------------------------------------


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


# --- forecasts -----------------------------------------------------------------------------


class Forecaster:
    """The only window a policy has into the future. Seeded.

    `config.model`:
    - "perfect": the true step function.
    - "gaussian": each step's true value plus independent N(0, sigma) noise with
      sigma = `config.sigma_frac` x the true mean intensity over the forecast window,
      clipped at 0. Noise is drawn from `rng` at call time, so a run is reproducible from its
      seed, and two forecasts of the same hour made at different times differ.
    """

    def __init__(self, config: ForecastConfig, rng: np.random.Generator) -> None:
        if config.model not in ("perfect", "gaussian"):
            raise ValueError(f"unknown forecast model {config.model!r}")
        self.config = config
        self.rng = rng

    def forecast(
        self, signal: CarbonSignal, now_s: float, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forecast step function over [now_s, min(now_s + horizon_s, signal.end_s)).

        Returns (times_s, values_g_per_kwh): times_s[0] == now_s, then the signal's
        breakpoints inside the window; value i holds from times_s[i] to the next time (or the
        window end). Fresh arrays, empty when the window is empty (now_s >= signal.end_s).
        """
        if horizon_s < 0:
            raise ValueError(f"forecast horizon must be >= 0 s, got {horizon_s}")
        end_s = min(now_s + horizon_s, signal.end_s)
        if now_s >= end_s:
            if now_s > signal.end_s or now_s < signal.times_s[0]:
                signal.value_at(now_s)  # raises the domain error
            return np.empty(0), np.empty(0)
        i = signal.step_index(now_s)
        j = bisect_left(signal._t, end_s)
        times = np.empty(j - i)
        times[0] = now_s
        times[1:] = signal.times_s[i + 1 : j]
        values = np.array(signal.values_g_per_kwh[i:j], dtype=np.float64)
        if self.config.model == "gaussian":
            sigma = self.config.sigma_frac * signal.mean(now_s, end_s)
            values += self.rng.normal(0.0, sigma, size=values.size)
            np.clip(values, 0.0, None, out=values)
        return times, values
