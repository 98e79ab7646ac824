"""The jobs of a run: a columnar `JobTable`, a synthetic generator and the job-file loader.

A job is a gang of `gpus` GPUs that must all run on one site. Its size is `work_gpu_h`,
reference GPU-hours (an A100-80GB at its maximum power limit, see `sim.hardware`) summed
over its GPUs: on `gpus` reference GPUs it runs for `work_gpu_h / gpus` hours of wall time.
A job with a deadline (absolute, seconds since the scenario start) may be deferred; a job
without one must run as soon as possible. Interruptible jobs may be suspended and resumed
(`checkpoint_gb` is moved when they resume elsewhere); `data_gb` is the input a job reads
from its `origin_site`.

Per-job data is columnar (one numpy array per attribute, index = internal job number),
never one Python object per job: runs hold hundreds of thousands of jobs.

Sources (`build_jobs` picks one per `scenario.workload`):

- `generate_synthetic`: Poisson arrivals with i.i.d. attributes, drawn from one
  `numpy.random.Generator` in a fixed order (see its docstring). The table depends only on
  (config, site names, horizon, generator state), so the engine hands it a dedicated stream
  and changing the policy never changes the workload.
- `load_job_file`: the native job format (CSV, gzipped CSV or Parquet; docs/job-format.md),
  validated column-wise; the first bad row is reported as `file:line: message` and raised
  as `TraceError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from sim.errors import TraceError
from sim.hardware import PROFILES
from sim.scenario import Scenario, SyntheticWorkload

__all__ = [
    "COLUMNS",
    "OPTIONAL_DEFAULTS",
    "REQUIRED_COLUMNS",
    "JobTable",
    "build_jobs",
    "generate_synthetic",
    "load_job_file",
]

COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "gpus",
    "work_gpu_h",
    "profile",
    "deadline",
    "interruptible",
    "checkpoint_gb",
    "data_gb",
    "origin_site",
)
"""Columns of the native job format, in the order `JobTable.to_frame` writes them."""

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "gpus", "work_gpu_h")

OPTIONAL_DEFAULTS: dict[str, object] = {
    "profile": "mixed",
    "deadline": None,
    "interruptible": False,
    "checkpoint_gb": 0.0,
    "data_gb": 0.0,
    "origin_site": None,
}
"""Value of an optional column when it is absent or empty (None: no deadline / first site)."""

_DTYPES: dict[str, Any] = {
    "job_id": object,
    "submit_s": np.float64,
    "gpus": np.int64,
    "work_gpu_h": np.float64,
    "profile": object,
    "deadline_s": np.float64,
    "interruptible": np.bool_,
    "checkpoint_gb": np.float64,
    "data_gb": np.float64,
    "origin_site": np.int64,
}
# dtype kinds each field accepts (converted without loss to the field's dtype)
_ACCEPTED_KINDS = {object: "OU", np.float64: "fiu", np.int64: "iu", np.bool_: "b"}


# --- the table --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class JobTable:
    """All jobs of a run, columnar, sorted by submit_s (stable), index = internal job number.

    Every field is a 1-D numpy array of the same length. The constructor accepts
    sequences and losslessly convertible dtypes (e.g. int32 -> int64, str -> object),
    stores read-only views, and checks the invariants below (ValueError otherwise:
    user input is validated before, by the generator and the loader).
    """

    job_id: np.ndarray
    """str (object), unique."""
    submit_s: np.ndarray
    """float64, submission time, seconds since the scenario start; >= 0, non-decreasing."""
    gpus: np.ndarray
    """int64 > 0, GPUs the job needs, all on one site (gang)."""
    work_gpu_h: np.ndarray
    """float64 > 0, reference GPU-hours (A100-80GB at max power limit), total over the GPUs."""
    profile: np.ndarray
    """str (object), keys of `sim.hardware.PROFILES`."""
    deadline_s: np.ndarray
    """float64, absolute, seconds since the scenario start, >= submit_s; NaN = no deadline."""
    interruptible: np.ndarray
    """bool, the job may be suspended (checkpointed) and resumed."""
    checkpoint_gb: np.ndarray
    """float64 >= 0, checkpoint size moved when the job resumes on another site, GB."""
    data_gb: np.ndarray
    """float64 >= 0, input data read from the origin site, GB."""
    origin_site: np.ndarray
    """int64 >= 0, index into `scenario.sites` of the site the job is submitted to."""

    def __post_init__(self) -> None:
        n: int | None = None
        for f in fields(self):
            arr = _as_column(f.name, getattr(self, f.name), _DTYPES[f.name])
            object.__setattr__(self, f.name, arr)
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"JobTable.{f.name} has {len(arr)} entries, job_id has {n}")
        self._check_invariants()

    def _check_invariants(self) -> None:
        def require(ok: np.ndarray | bool, what: str, values: np.ndarray) -> None:
            if not np.all(ok):
                bad = np.flatnonzero(~np.asarray(ok))[0] if np.ndim(ok) else 0
                raise ValueError(f"JobTable: {what} (job {bad}: {values[bad]!r})")

        if len(self) == 0:
            return
        submit = self.submit_s
        require(np.isfinite(submit) & (submit >= 0), "submit_s must be finite, >= 0", submit)
        if np.any(np.diff(self.submit_s) < 0):
            raise ValueError("JobTable: submit_s must be sorted (non-decreasing)")
        require(self.gpus > 0, "gpus must be > 0", self.gpus)
        work_ok = np.isfinite(self.work_gpu_h) & (self.work_gpu_h > 0)
        require(work_ok, "work_gpu_h must be > 0", self.work_gpu_h)
        dl = self.deadline_s
        require(np.isnan(dl) | (dl >= self.submit_s), "deadline_s must be >= submit_s or NaN", dl)
        for name in ("checkpoint_gb", "data_gb"):
            col = getattr(self, name)
            require(np.isfinite(col) & (col >= 0), f"{name} must be >= 0", col)
        require(self.origin_site >= 0, "origin_site must be >= 0", self.origin_site)
        unknown = set(pd.unique(self.profile)) - PROFILES.keys()
        if unknown:
            raise ValueError(f"JobTable: unknown profiles {sorted(map(str, unknown))}")
        if not pd.Index(self.job_id).is_unique:
            dup = pd.Index(self.job_id).duplicated()
            raise ValueError(f"JobTable: job_id must be unique, repeated: {self.job_id[dup][0]!r}")

    def __len__(self) -> int:
        return len(self.job_id)

    def equals(self, other: JobTable) -> bool:
        """Whether both tables hold the same jobs in the same order (NaN equals NaN)."""
        return all(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            for a, b in ((getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
        )

    def to_frame(self, site_names: Sequence[str]) -> pd.DataFrame:
        """The jobs in the native job format (columns `COLUMNS`), one row per job.

        Times are numbers of seconds since the scenario start (`submit_time`, `deadline`;
        NaN = no deadline) and `origin_site` is the site's name, so that
        `frame.to_csv(path, index=False)` or `frame.to_parquet(path)` writes a file that
        `load_job_file` reads back unchanged.
        """
        names = np.asarray(list(site_names), dtype=object)
        if len(self) and (len(names) == 0 or self.origin_site.max() >= len(names)):
            raise ValueError(
                f"origin_site {self.origin_site.max()} out of range for {len(names)} site names"
            )
        return pd.DataFrame(
            {
                "job_id": self.job_id,
                "submit_time": self.submit_s,
                "gpus": self.gpus,
                "work_gpu_h": self.work_gpu_h,
                "profile": self.profile,
                "deadline": self.deadline_s,
                "interruptible": self.interruptible,
                "checkpoint_gb": self.checkpoint_gb,
                "data_gb": self.data_gb,
                "origin_site": names[self.origin_site] if len(self) else np.empty(0, object),
            },
            columns=list(COLUMNS),
        )


def _as_column(name: str, value: Any, dtype: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"JobTable.{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in _ACCEPTED_KINDS[dtype]:
        raise TypeError(f"JobTable.{name} must have dtype {np.dtype(dtype)}, got {arr.dtype}")
    if arr.dtype != np.dtype(dtype):
        if arr.size and dtype is not object and not np.can_cast(arr.dtype, dtype, "safe"):
            raise TypeError(f"JobTable.{name}: cannot convert {arr.dtype} to {np.dtype(dtype)}")
        arr = arr.astype(dtype)
    view = arr.view()
    view.flags.writeable = False
    return view


# --- synthetic workloads ------------------------------------------------------------------


def generate_synthetic(
    cfg: SyntheticWorkload,
    site_names: Sequence[str],
    horizon_s: float,
    rng: np.random.Generator,
) -> JobTable:
    """Poisson arrivals over [0, horizon_s) with i.i.d. job attributes drawn from `rng`.

    `horizon_s`: length of the scenario, seconds. The result depends only on the arguments
    (and the generator's state), never on global random state. Draws, in this order, each
    one vectorised over the n jobs:

    1. arrivals: exponential inter-arrival gaps of mean 1/`arrival_rate_per_h`, drawn in
       blocks until the horizon (or `max_jobs` arrivals) is reached;
    2. duration, hours, the wall time on `gpus` reference GPUs: exponential(`mean_h`) or
       lognormal(log(`median_h`), `sigma`); `work_gpu_h = duration_h x gpus`;
    3. gpus: categorical over the `gpus` mix (GPU counts in increasing order);
    4. deferrable: uniform < `deferrable_fraction`;
    5. slack, hours: uniform(`slack_h`); deadline = submit + duration + slack for
       deferrable jobs (it may lie beyond the horizon), NaN for the others;
    6. interruptible: uniform < `interruptible_fraction`;
    7. origin site: categorical over `origin_sites` weights (default: uniform).

    Steps 3 to 7 consume the same amount of randomness whatever their parameters, so
    sweeping e.g. `deferrable_fraction` or the origin weights leaves the other attributes
    of every job unchanged (common random numbers). `profile`, `checkpoint_gb` and
    `data_gb` are the configured constants; job ids are "j0", "j1", ... in submit order.
    """
    if not site_names:
        raise ValueError("generate_synthetic needs at least one site name")
    if not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be finite and > 0, got {horizon_s}")

    submit_s = _poisson_arrivals(cfg.arrival_rate_per_h / 3600.0, horizon_s, cfg.max_jobs, rng)
    n = len(submit_s)

    dist = cfg.duration
    if dist.dist == "exponential":
        duration_h = rng.exponential(dist.mean_h, n)
    else:
        duration_h = rng.lognormal(math.log(dist.median_h), dist.sigma, n)
    # a zero (probability ~2^-53) or underflowed draw would make a job of no work
    duration_h = np.maximum(duration_h, np.finfo(np.float64).tiny)

    counts = np.array(sorted(cfg.gpus), dtype=np.int64)
    gpus = counts[rng.choice(len(counts), size=n, p=_normalised([cfg.gpus[c] for c in counts]))]

    deferrable = rng.random(n) < cfg.deferrable_fraction
    slack_h = rng.uniform(cfg.slack_h[0], cfg.slack_h[1], n)
    deadline_s = np.where(deferrable, submit_s + (duration_h + slack_h) * 3600.0, np.nan)

    interruptible = rng.random(n) < cfg.interruptible_fraction

    origin = rng.choice(len(site_names), size=n, p=_origin_weights(cfg, site_names))

    return JobTable(
        job_id=np.array([f"j{i}" for i in range(n)], dtype=object),
        submit_s=submit_s,
        gpus=gpus,
        work_gpu_h=duration_h * gpus,
        profile=np.full(n, cfg.profile, dtype=object),
        deadline_s=deadline_s,
        interruptible=interruptible,
        checkpoint_gb=np.full(n, float(cfg.checkpoint_gb)),
        data_gb=np.full(n, float(cfg.data_gb)),
        origin_site=origin.astype(np.int64),
    )


def _poisson_arrivals(
    rate_per_s: float, horizon_s: float, max_jobs: int | None, rng: np.random.Generator
) -> np.ndarray:
    """Arrival times in [0, horizon_s) of a Poisson process, at most `max_jobs` of them."""
    limit = math.inf if max_jobs is None else max_jobs
    expected = rate_per_s * horizon_s
    # one block covers the horizon except with probability ~1e-9
    block = int(min(expected + 6.0 * math.sqrt(expected) + 16.0, limit))
    parts: list[np.ndarray] = []
    count, t0 = 0, 0.0
    while count < limit:
        times = t0 + np.cumsum(rng.exponential(1.0 / rate_per_s, block))
        inside = int(np.searchsorted(times, horizon_s, side="left"))
        parts.append(times[:inside])
        count += inside
        if inside < block:
            break
        t0 = float(times[-1])
        block = int(min(block, limit - count))
    out = np.concatenate(parts) if parts else np.empty(0)
    return out[: int(min(len(out), limit))]


def _normalised(weights: Sequence[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return w / w.sum()


def _origin_weights(cfg: SyntheticWorkload, site_names: Sequence[str]) -> np.ndarray:
    """Origin probabilities per site; the scenario schema has checked the weights."""
    if cfg.origin_sites is None:
        return np.full(len(site_names), 1.0 / len(site_names))
    return _normalised([cfg.origin_sites.get(name, 0.0) for name in site_names])


# --- job files ----------------------------------------------------------------------------


def load_job_file(path: str | Path, scenario: Scenario) -> JobTable:
    """Read a job file in the native format (docs/job-format.md) for `scenario`.

    `.csv` and `.csv.gz` are read as CSV, `.parquet` as Parquet. Numeric times are seconds
    since `scenario.start`; string times are ISO-8601 datetimes with a UTC offset. Every
    column is validated with vector operations; the first bad row (in file order) raises
    `TraceError("file:line: message")` (Parquet: "file: row N: message", rows counted
    from 1). The table is sorted by submit time (stable).
    """
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        raw, where = _read_csv(path, gzip=name.endswith(".gz"))
    elif name.endswith(".parquet"):
        raw, where = _read_parquet(path)
    else:
        raise TraceError(f"{path}: unknown job file type; use .csv, .csv.gz or .parquet")
    return _parse(raw, where, scenario)


@dataclass(frozen=True)
class _Where:
    """Names places in a job file: CSV lines (header = line 1) or Parquet rows (from 1)."""

    path: Path
    labels: np.ndarray  # per data row: line number (CSV) or row number (Parquet)
    csv: bool

    def header(self) -> str:
        return f"{self.path}:1" if self.csv else str(self.path)

    def row(self, i: int) -> str:
        return f"{self.path}:{self.labels[i]}" if self.csv else f"{self.path}: row {self.labels[i]}"

    def ref(self, i: int) -> str:
        return f"line {self.labels[i]}" if self.csv else f"row {self.labels[i]}"


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:  # not the path again
        return e.strerror
    return " ".join(str(e).split()) or type(e).__name__


def _read_csv(path: Path, gzip: bool) -> tuple[pd.DataFrame, _Where]:
    # Every cell is read as a string (the header too: repeated names stay visible) and
    # blank lines are kept, so that row k of `table` is line k + 1 of the file.
    try:
        table = _read_csv_arrow(path, gzip)
    except (OSError, EOFError, ValueError, pa.ArrowException):
        # pandas' parser is slower but names the line of a malformed row; it also
        # explains unreadable, empty and non-UTF-8 files
        table = _read_csv_pandas(path, gzip)
    header = [str(c).strip() for c in table.iloc[0].tolist()]
    _check_columns(header, f"{path}:1")
    # first line of each record: one per record, plus the newlines inside quoted values
    newlines = sum(table[c].str.count("\n").to_numpy() for c in table.columns)
    first_line = 1 + np.arange(len(table)) + np.concatenate(([0], np.cumsum(newlines)[:-1]))
    data = table.iloc[1:].set_axis(header, axis=1)
    data = data.apply(lambda c: c.str.strip())
    filled = (data != "").any(axis=1).to_numpy()
    lines = first_line[1:][filled]
    data = data[filled].reset_index(drop=True)
    if data.empty:
        raise TraceError(f"{path}: the file is empty (a header, no jobs)")
    return data, _Where(path, lines, csv=True)


def _read_csv_arrow(path: Path, gzip: bool) -> pd.DataFrame:
    with pa.input_stream(str(path), compression="gzip" if gzip else None) as stream:
        table = pa_csv.read_csv(
            stream,
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
            parse_options=pa_csv.ParseOptions(ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(
                column_types={f"f{i}": pa.string() for i in range(64)},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    frame = table.to_pandas()
    if not all(dtype == "str" for dtype in frame.dtypes):
        raise ValueError("not all columns read as text")  # let the pandas reader handle it
    return frame


def _read_csv_pandas(path: Path, gzip: bool) -> pd.DataFrame:
    try:
        return pd.read_csv(
            path,
            header=None,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
            compression="gzip" if gzip else None,
            encoding="utf-8",
        )
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as e:
        ragged = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if ragged:
            want, line, got = ragged.groups()
            raise TraceError(
                f"{path}:{line}: expected {want} fields like the header, got {got}"
            ) from None
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: cannot read job file: it is not UTF-8 text") from None
    except (OSError, EOFError, ValueError) as e:  # gzip errors
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None


def _read_parquet(path: Path) -> tuple[pd.DataFrame, _Where]:
    try:
        data = pd.read_parquet(path)
    except (OSError, EOFError, ValueError, pa.ArrowException) as e:
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None
    data = data.reset_index(drop=True)
    _check_columns([str(c) for c in data.columns], str(path))
    if data.empty:
        raise TraceError(f"{path}: the file is empty (no jobs)")
    for name in data.columns:
        if not _is_typed(data[name]):
            data[name] = _text(data[name])
    return data, _Where(path, np.arange(1, len(data) + 1), csv=False)


def _check_columns(header: list[str], where: str) -> None:
    seen: set[str] = set()
    for c in header:
        if c in seen:
            raise TraceError(f"{where}: column {c!r} appears more than once")
        seen.add(c)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if missing:
        raise TraceError(
            f"{where}: missing required column(s) {', '.join(map(repr, missing))} "
            f"(columns present: {', '.join(header) or 'none'})"
        )
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise TraceError(
            f"{where}: unknown column {unknown[0]!r}; the job format's columns are "
            f"{', '.join(COLUMNS)}"
        )


# Column parsing. Every parser takes a column as read (CSV: stripped strings; Parquet:
# any dtype) and returns arrays; every check is a boolean mask of bad rows plus a message
# for one row. The first bad row in file order is reported.

_Check = tuple[np.ndarray, Callable[[int], str]]

_ISO_WITH_OFFSET = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[Zz]|[+-]\d\d(?::?\d\d)?)"
_ISO_NAIVE = r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?"
_TRUE = ("true", "1")
_FALSE = ("false", "0")


def _is_typed(col: pd.Series) -> bool:
    """Whether a column holds numbers, booleans or timestamps rather than text."""
    return pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_datetime64_any_dtype(
        col.dtype
    )


def _text(col: pd.Series) -> pd.Series:
    """The column as stripped strings, missing values as "" (text columns come so)."""
    if col.dtype == "str" and not col.hasnans:
        return col
    return col.astype(object).where(col.notna(), "").astype(str).str.strip()


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _numbers(col: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as float64 with NaN where missing or bad, missing mask, not-a-number mask)."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = np.array(col.to_numpy(dtype=np.float64, na_value=np.nan))  # writable copy
        return values, np.isnan(values), np.zeros(len(col), bool)
    text = _text(col)
    missing = (text == "").to_numpy()
    filled = text[~missing] if missing.any() else text
    try:  # fast path: Arrow's exact parser, all-or-nothing
        parsed = pc.cast(pa.array(filled), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowException, TypeError, ValueError):
        parsed = pd.to_numeric(filled, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    values = np.full(len(text), np.nan)
    values[~missing] = parsed
    return values, missing, ~missing & np.isnan(values)


def _times(
    col: pd.Series, name: str, start: pd.Timestamp, where: _Where
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(seconds since start, missing mask, unparseable mask, no-UTC-offset mask)."""
    n = len(col)
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        seconds = np.array(
            ((col - start) / pd.Timedelta(seconds=1)).to_numpy(np.float64, na_value=np.nan)
        )
        no = np.zeros(n, bool)
        return seconds, np.isnan(seconds), no, no
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        raise TraceError(
            f"{where.header()}: column {name!r} holds timestamps without a time zone "
            f"({col.dtype}); store them in UTC (e.g. timestamp[us, tz=UTC]) or as seconds"
        )
    seconds, missing, bad = _numbers(col)
    naive = np.zeros(n, bool)
    if bad.any():
        text = _text(col)[bad]
        dated = text.str.fullmatch(_ISO_WITH_OFFSET).to_numpy(dtype=bool, na_value=False)
        parsed = pd.to_datetime(text[dated], format="ISO8601", utc=True, errors="coerce")
        sub = np.full(len(text), np.nan)
        sub[dated] = ((parsed - start) / pd.Timedelta(seconds=1)).to_numpy(
            np.float64, na_value=np.nan
        )
        seconds[bad] = sub
        naive[bad] = ~dated & text.str.fullmatch(_ISO_NAIVE).to_numpy(dtype=bool, na_value=False)
        bad = bad & np.isnan(seconds) & ~naive
    return seconds, missing, bad, naive


def _booleans(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, bad mask); missing values are False."""
    if pd.api.types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=bool, na_value=False), np.zeros(len(col), bool)
    if pd.api.types.is_numeric_dtype(col.dtype):
        v = col.to_numpy(dtype=np.float64, na_value=0.0)
        return v == 1.0, ~np.isin(v, (0.0, 1.0))
    text = _text(col).str.lower()
    true = text.isin(_TRUE).to_numpy()
    return true, ~(true | text.isin(_FALSE + ("",)).to_numpy())


def _parse(raw: pd.DataFrame, where: _Where, scenario: Scenario) -> JobTable:
    n = len(raw)
    sites = scenario.site_names()
    start = pd.Timestamp(scenario.start).tz_convert("UTC")
    horizon_s = scenario.horizon_s
    largest = max(s.max_pool_gpus for s in scenario.sites)
    checks: list[_Check] = []

    def shown(name: str, i: int) -> str:
        value = raw[name].iloc[i]
        value = value.item() if isinstance(value, np.generic) else value
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."

    def check(mask: np.ndarray, message: Callable[[int], str]) -> None:
        checks.append((np.asarray(mask, dtype=bool), message))

    def column(name: str) -> pd.Series | None:
        return raw[name] if name in raw.columns else None

    # job_id
    ids = _text(raw["job_id"])
    id_missing = (ids == "").to_numpy()
    check(id_missing, lambda i: "job_id is required, got an empty value")
    dup = ids.duplicated(keep="first").to_numpy() & ~id_missing

    def dup_message(i: int) -> str:
        first = int(np.flatnonzero((ids == ids.iloc[i]).to_numpy())[0])
        return f"duplicate job_id {ids.iloc[i]!r} (first on {where.ref(first)})"

    check(dup, dup_message)

    # submit_time
    time_help = "seconds since the scenario start or an ISO-8601 datetime with UTC offset"
    submit_s, s_missing, s_bad, s_naive = _times(raw["submit_time"], "submit_time", start, where)
    check(s_missing, lambda i: "submit_time is required, got an empty value")
    check(s_bad, lambda i: f"submit_time must be {time_help}, got {shown('submit_time', i)}")
    check(
        s_naive,
        lambda i: (
            "submit_time must carry a UTC offset (e.g. 2020-06-01T00:00:00Z), "
            f"got {shown('submit_time', i)}"
        ),
    )
    outside = ~np.isnan(submit_s) & ~((submit_s >= 0) & (submit_s < horizon_s))
    check(
        outside,
        lambda i: (
            f"submit_time must be within the scenario's horizon [0, {horizon_s:.12g}) s "
            f"= [{start.isoformat()}, {scenario.end.isoformat()}), got {shown('submit_time', i)}"
            + ("" if _is_number(raw["submit_time"].iloc[i]) else f" = {submit_s[i]:.12g} s")
        ),
    )

    # gpus
    gpus_f, _, _ = _numbers(raw["gpus"])
    g_ok = np.isfinite(gpus_f) & (gpus_f > 0) & (gpus_f == np.floor(gpus_f))
    check(~g_ok, lambda i: f"gpus must be a positive integer, got {shown('gpus', i)}")
    if scenario.workload.oversized == "error":
        check(
            g_ok & (gpus_f > largest),
            lambda i: (
                f"gpus must be at most {largest} (the largest GPU pool of any site), "
                f'got {shown("gpus", i)}; or set workload.oversized = "reject"'
            ),
        )

    # work_gpu_h
    work, _, _ = _numbers(raw["work_gpu_h"])
    check(
        ~(np.isfinite(work) & (work > 0)),
        lambda i: (
            f"work_gpu_h must be a positive number of GPU-hours, got {shown('work_gpu_h', i)}"
        ),
    )

    # profile
    if (col := column("profile")) is not None:
        profile = _text(col).replace("", OPTIONAL_DEFAULTS["profile"])
        known = ", ".join(sorted(PROFILES))
        check(
            ~profile.isin(list(PROFILES)).to_numpy(),
            lambda i: f"profile must be one of {known}, got {shown('profile', i)}",
        )
        codes, uniques = pd.factorize(profile)  # one str object per distinct profile
        profile_arr = np.asarray(uniques, dtype=object)[codes]
    else:
        profile_arr = np.full(n, OPTIONAL_DEFAULTS["profile"], dtype=object)

    # deadline
    if (col := column("deadline")) is not None:
        deadline_s, _, d_bad, d_naive = _times(col, "deadline", start, where)
        check(
            d_bad,
            lambda i: f"deadline must be empty (none) or {time_help}, got {shown('deadline', i)}",
        )
        check(
            d_naive,
            lambda i: (
                "deadline must carry a UTC offset (e.g. 2020-06-01T00:00:00Z), "
                f"got {shown('deadline', i)}"
            ),
        )
        check(
            np.isinf(deadline_s),
            lambda i: f"deadline must be finite, got {shown('deadline', i)}",
        )
        check(
            deadline_s < submit_s,  # False where either is NaN
            lambda i: (
                f"deadline must not be before submit_time ({shown('submit_time', i)}), "
                f"got {shown('deadline', i)}"
            ),
        )
    else:
        deadline_s = np.full(n, np.nan)

    # interruptible
    if (col := column("interruptible")) is not None:
        interruptible, i_bad = _booleans(col)
        check(
            i_bad,
            lambda i: (
                "interruptible must be true, false, 1 or 0 (empty = false), "
                f"got {shown('interruptible', i)}"
            ),
        )
    else:
        interruptible = np.zeros(n, bool)

    # checkpoint_gb, data_gb
    sizes: dict[str, np.ndarray] = {}
    for name in ("checkpoint_gb", "data_gb"):
        if (col := column(name)) is not None:
            values, missing, _ = _numbers(col)
            values[missing] = 0.0
            check(
                ~(np.isfinite(values) & (values >= 0)),
                lambda i, name=name: f"{name} must be a number >= 0 (GB), got {shown(name, i)}",
            )
            sizes[name] = values
        else:
            sizes[name] = np.zeros(n)

    # origin_site
    if (col := column("origin_site")) is not None:
        origin_names = _text(col)
        origin = pd.Index(sites).get_indexer(origin_names)
        origin[(origin_names == "").to_numpy()] = 0
        check(
            origin < 0,
            lambda i: (
                f"origin_site must be one of the scenario's sites ({', '.join(sites)}), "
                f"got {shown('origin_site', i)}"
            ),
        )
    else:
        origin = np.zeros(n, np.int64)

    _raise_first(checks, where)

    order = np.argsort(submit_s, kind="stable")
    return JobTable(
        job_id=ids.to_numpy(dtype=object)[order],
        submit_s=submit_s[order],
        gpus=gpus_f[order].astype(np.int64),
        work_gpu_h=work[order],
        profile=profile_arr[order],
        deadline_s=deadline_s[order],
        interruptible=interruptible[order],
        checkpoint_gb=sizes["checkpoint_gb"][order],
        data_gb=sizes["data_gb"][order],
        origin_site=origin[order].astype(np.int64),
    )


def _raise_first(checks: list[_Check], where: _Where) -> None:
    """Raise TraceError for the first bad row; on that row, the first failing check."""
    first_row, first_check = None, None
    for mask, message in checks:
        if mask.any():
            i = int(np.argmax(mask))
            if first_row is None or i < first_row:
                first_row, first_check = i, message
    if first_row is None or first_check is None:
        return
    bad_rows = int(np.logical_or.reduce([m for m, _ in checks]).sum())
    more = f" [and {bad_rows - 1} more bad row(s)]" if bad_rows > 1 else ""
    raise TraceError(f"{where.row(first_row)}: {first_check(first_row)}{more}")


# --- the run's workload -------------------------------------------------------------------


def build_jobs(scenario: Scenario, rng: np.random.Generator) -> JobTable:
    """The jobs of `scenario`: generated from `rng` (synthetic) or read from its job file.

    `rng` is the run's dedicated workload stream; a job file does not use it.
    """
    wl = scenario.workload
    if wl.synthetic is not None:
        return generate_synthetic(wl.synthetic, scenario.site_names(), scenario.horizon_s, rng)
    assert wl.file is not None  # the schema guarantees exactly one source
    return load_job_file(wl.file, scenario)
