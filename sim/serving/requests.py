"""LLM inference requests: the columnar `RequestTable`, its file (`requests.parquet`), and a
seeded synthetic generator with daily and weekly cycles (docs/request-format.md).

A request arrives at `arrival_s` (seconds since the trace start or the scenario start),
brings `input_tokens` of prompt (prefill) and asks for `output_tokens` of generation
(decode). Per-request data is columnar (one numpy array per attribute), never one Python
object per request: a day of a busy service holds millions of requests.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.config.services import MAX_SYNTHETIC_REQUESTS, peak_requests
from sim.errors import TraceError
from sim.models.llm import finite_real
from sim.models.token_laws import MAX_TOKENS, FixedLaw, LogNormalLaw, TokenLaw
from sim.util.atomic import write_atomic
from sim.util.columns import freeze_columns

REQUEST_COLUMNS: tuple[str, ...] = ("arrival_s", "input_tokens", "output_tokens")
"""Columns of `requests.parquet`, in the order `RequestTable.to_frame` writes them."""

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S

_META_PREFIX = b"dcsim."
_DTYPES: dict[str, Any] = {
    "arrival_s": np.float64,
    "input_tokens": np.int64,
    "output_tokens": np.int64,
}


@dataclass(frozen=True, eq=False)
class RequestTable:
    """All requests of a trace, columnar, sorted by arrival (index = request number).

    Every field is a 1-D numpy array of the same length. The constructor accepts sequences
    and losslessly convertible dtypes (int32 -> int64, int -> float64), stores read-only
    views and checks the invariants below (ValueError naming the first bad request).
    """

    arrival_s: np.ndarray
    """float64, arrival time, seconds since the trace or scenario start; finite, >= 0,
    non-decreasing."""
    input_tokens: np.ndarray
    """int64 >= 0, prompt (context) tokens, processed in the prefill."""
    output_tokens: np.ndarray
    """int64 >= 1, tokens generated (decode steps)."""

    def __post_init__(self) -> None:
        freeze_columns(self, _DTYPES)
        self._check_invariants()

    def _check_invariants(self) -> None:
        def require(ok: np.ndarray, what: str, values: np.ndarray) -> None:
            if not np.all(ok):
                bad = int(np.flatnonzero(~ok)[0])
                raise ValueError(f"RequestTable: {what} (request {bad}: {values[bad].item()!r})")

        if len(self) == 0:
            return
        t = self.arrival_s
        require(np.isfinite(t) & (t >= 0), "arrival_s must be finite and >= 0", t)
        step = np.diff(t) < 0
        if step.any():
            i = int(np.flatnonzero(step)[0]) + 1
            raise ValueError(
                f"RequestTable: arrival_s must be non-decreasing "
                f"(request {i}: {t[i].item()!r} after {t[i - 1].item()!r})"
            )
        inp, out = self.input_tokens, self.output_tokens
        require((inp >= 0) & (inp <= MAX_TOKENS), f"input_tokens must be 0..{MAX_TOKENS}", inp)
        require((out >= 1) & (out <= MAX_TOKENS), f"output_tokens must be 1..{MAX_TOKENS}", out)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def equals(self, other: RequestTable) -> bool:
        """Whether both tables hold the same requests in the same order."""
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
        )

    @property
    def span_s(self) -> float:
        """Time from the first to the last arrival, s (0 for fewer than two requests)."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0

    def to_frame(self) -> pd.DataFrame:
        """The requests as a DataFrame with the columns `REQUEST_COLUMNS`."""
        return pd.DataFrame({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> RequestTable:
        """A table from a frame with the columns `REQUEST_COLUMNS` (others are ignored);
        token counts held as whole floats are accepted."""
        missing = [c for c in REQUEST_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"requests need column(s) {', '.join(missing)}")
        cols: dict[str, np.ndarray] = {}
        for name in REQUEST_COLUMNS:
            arr = frame[name].to_numpy()
            if name != "arrival_s" and arr.dtype.kind == "f":
                whole = np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) <= MAX_TOKENS)
                if not whole.all():
                    bad = int(np.flatnonzero(~whole)[0])
                    raise ValueError(
                        f"RequestTable: {name} must be whole numbers "
                        f"(request {bad}: {arr[bad].item()!r})"
                    )
                arr = arr.astype(np.int64)
            cols[name] = arr
        return cls(**cols)


# ------------------------------------------------------------------------ the file


def write_requests(
    table: RequestTable, out: str | Path, *, metadata: dict[str, str] | None = None
) -> Path:
    """Write `table` to a `.parquet` file, atomically (a temporary file in the same folder,
    then a rename: a failed write leaves `out` as it was). `metadata` (e.g. `trace_start`,
    `source`) is stored in the file's key-value metadata and read by `request_file_metadata`.
    """
    out = Path(out)
    if out.suffix != ".parquet":
        raise TraceError(f"{out}: requests are written as .parquet (e.g. requests.parquet)")
    arrow = pa.Table.from_pandas(table.to_frame(), preserve_index=False)
    meta = dict(arrow.schema.metadata or {})
    for key, value in (metadata or {}).items():
        meta[_META_PREFIX + key.encode()] = str(value).encode()
    arrow = arrow.replace_schema_metadata(meta)
    try:
        write_atomic(out, lambda tmp: pq.write_table(arrow, tmp))
    except OSError as e:
        raise TraceError(f"{out}: cannot write: {e.strerror or e}") from None
    return out


def is_request_file(path: str | Path) -> bool:
    """Whether `path` is a parquet file with the request columns (not a job file)."""
    path = Path(path)
    if path.suffix != ".parquet" or not path.is_file():
        return False
    try:
        names = set(pq.read_schema(path).names)
    except (pa.ArrowException, OSError):
        return False
    return {"arrival_s", "output_tokens"} <= names


def read_requests(path: str | Path) -> RequestTable:
    """The requests of a `requests.parquet` file; `TraceError` naming the file if it is not
    one or breaks an invariant."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        frame = pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError) as e:
        raise TraceError(f"{path}: not a readable parquet file ({e})") from None
    missing = [c for c in REQUEST_COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(
            f"{path}: missing column(s) {', '.join(missing)} of a request file "
            f"(columns present: {', '.join(map(str, frame.columns))})"
        )
    try:
        return RequestTable.from_frame(frame)
    except (TypeError, ValueError) as e:
        raise TraceError(f"{path}: {e}") from None


def request_file_metadata(path: str | Path) -> dict[str, str]:
    """The metadata `write_requests` stored (e.g. `trace_start`, `source`, `format`)."""
    meta = pq.read_schema(path).metadata or {}
    n = len(_META_PREFIX)
    return {k[n:].decode(): v.decode() for k, v in meta.items() if k.startswith(_META_PREFIX)}


# ------------------------------------------------------------------------ the generator


TokenDistribution = LogNormalLaw
"""The log-normal token law (`sim.models.token_laws.LogNormalLaw`), under its former name."""


@dataclass(frozen=True)
class RequestPreset:
    """Fitted token distributions of a trace (sim/data/request_presets.toml)."""

    name: str
    input_tokens: TokenDistribution
    output_tokens: TokenDistribution
    log_correlation: float
    """Pearson correlation of log input and log output tokens in the trace."""
    rate_per_s: float
    """The trace's mean arrival rate (requests / span), for reference."""
    source: str


@cache
def request_presets() -> dict[str, RequestPreset]:
    """The shipped presets (`azure-code`, `azure-conv`), name -> `RequestPreset`."""
    text = resources.files("sim").joinpath("data/request_presets.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    out = {}
    for name, p in raw["presets"].items():
        dists = {
            key: TokenDistribution(
                float(p[key]["mu"]), float(p[key]["sigma"]), int(p[key]["min"]), int(p[key]["max"])
            )
            for key in ("input_tokens", "output_tokens")
        }
        out[name] = RequestPreset(
            name,
            dists["input_tokens"],
            dists["output_tokens"],
            float(p["log_correlation"]),
            float(p["rate_per_s"]),
            str(raw["source"]),
        )
    return out


TokenSpec = str | TokenLaw | int
"""A token count spec of the generator: a preset name, a `TokenLaw`, or an int (fixed)."""


def token_law(spec: TokenSpec, which: str) -> TokenLaw:
    """The law `spec` names for `which` ("input_tokens" or "output_tokens": a preset's
    direction); ValueError for an unknown preset, TypeError for another kind of value."""
    if isinstance(spec, TokenLaw):
        return spec
    if isinstance(spec, str):
        presets = request_presets()
        if spec not in presets:
            raise ValueError(f"{which}: unknown preset {spec!r}; presets: {', '.join(presets)}")
        return getattr(presets[spec], which)
    if isinstance(spec, int | np.integer) and not isinstance(spec, bool):
        return FixedLaw(int(spec))
    raise TypeError(f"{which}: expected a preset name, a TokenLaw or an int, got {spec!r}")


@dataclass(frozen=True)
class LocalPeak:
    """A daily peak at local hour `hour` of the IANA time zone `timezone` (daylight saving
    time followed), for times counted in seconds from `start` (a datetime with a UTC offset).

    Used as `rate_at`'s `daily_peak_s`: at each time it gives the peak's offset that puts
    the cosine's maximum at that local hour. Where the zone's UTC offset changes (a DST
    switch), the cycle jumps with the wall clock, by the change (an hour).
    """

    start: datetime
    hour: float
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.start.utcoffset() is None:
            raise ValueError(f"LocalPeak: start must carry a UTC offset, got {self.start}")
        h = finite_real(self.hour)
        if h is None or not 0 <= h < 24:
            raise ValueError(f"daily_peak_hour must be in [0, 24), got {self.hour!r}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {self.timezone!r}") from None

    def shifted(self, dt_s: float) -> LocalPeak:
        """The same peak for times counted from `dt_s` seconds after `start`."""
        return replace(self, start=self.start + timedelta(seconds=dt_s))

    def utc_offsets_s(self, t_s: np.ndarray | float) -> np.ndarray:
        """The zone's UTC offset (s, DST included) at each time `t_s` (s after `start`)."""
        t = np.asarray(t_s, dtype=np.float64)
        breaks, values = self._offset_steps(t)
        return np.asarray(values)[np.searchsorted(breaks, t, side="right")]

    def _offset_steps(self, t: np.ndarray) -> tuple[list[float], list[float]]:
        """(times the offset changes, the offsets from before the first to after the last)
        over the span of the times `t`. The offset is read on a daily grid over the span
        and each change is located to a millisecond by bisection (zones change their offset
        months apart)."""
        if t.size == 0 or self.timezone == "UTC":
            return [], [0.0]
        tz = ZoneInfo(self.timezone)

        def offset(x: float) -> float:
            moment = self.start + timedelta(seconds=x)
            return moment.astimezone(tz).utcoffset().total_seconds()  # type: ignore[union-attr]

        lo, hi = float(np.min(t)), float(np.max(t))
        grid = [*np.arange(lo, hi, DAY_S).tolist(), hi]
        offsets = [offset(x) for x in grid]
        breaks, values = [], [offsets[0]]
        for k in range(len(grid) - 1):
            if offsets[k + 1] != offsets[k]:
                a, b = grid[k], grid[k + 1]
                while b - a > 1e-3:
                    mid = 0.5 * (a + b)
                    a, b = (mid, b) if offset(mid) == offsets[k] else (a, mid)
                breaks.append(b)
                values.append(offsets[k + 1])
        return breaks, values

    def peak_s(self, t_s: np.ndarray | float) -> np.ndarray | float:
        """`rate_at`'s daily_peak_s at the times `t_s` (s after `start`), in [0, 1 day): one
        number when the zone's offset does not change over their span, else one each."""
        t = np.asarray(t_s, dtype=np.float64)
        breaks, values = self._offset_steps(t)
        offset = values[0] if not breaks else self.utc_offsets_s(t)
        utc = self.start.astimezone(UTC)
        start_of_day_s = utc.hour * 3600 + utc.minute * 60 + utc.second + utc.microsecond / 1e6
        return (self.hour * 3600.0 - start_of_day_s - offset) % DAY_S


def rate_at(
    t_s: np.ndarray | float,
    rate_per_s: float,
    *,
    daily_amplitude: float = 0.0,
    weekly_amplitude: float = 0.0,
    daily_peak_s: float | LocalPeak = 14 * 3600.0,
    weekly_peak_s: float = 2.5 * DAY_S,
) -> np.ndarray:
    """The generator's arrival rate at `t_s` (seconds since the start), requests/s:

    rate_per_s x (1 + a_d cos(2 pi (t - daily_peak_s) / 1 day))
               x (1 + a_w cos(2 pi (t - weekly_peak_s) / 1 week)).

    `daily_peak_s`: seconds after the start, or a `LocalPeak` (a local hour in a time zone,
    its offset then read at each time). Its mean over whole weeks is `rate_per_s` (and
    over whole days when a_w = 0), DST switches aside.
    """
    t = np.asarray(t_s, dtype=np.float64)
    peak = daily_peak_s.peak_s(t) if isinstance(daily_peak_s, LocalPeak) else daily_peak_s
    day = 1.0 + daily_amplitude * np.cos(2 * np.pi * (t - peak) / DAY_S)
    week = 1.0 + weekly_amplitude * np.cos(2 * np.pi * (t - weekly_peak_s) / WEEK_S)
    return rate_per_s * day * week


def synthetic_requests(
    rate_per_s: float,
    duration_s: float,
    rng: np.random.Generator | int,
    *,
    daily_amplitude: float = 0.0,
    weekly_amplitude: float = 0.0,
    daily_peak_s: float | LocalPeak = 14 * 3600.0,
    weekly_peak_s: float = 2.5 * DAY_S,
    input_tokens: TokenSpec = "azure-conv",
    output_tokens: TokenSpec = "azure-conv",
    correlated: bool = True,
) -> RequestTable:
    """Requests of a non-homogeneous Poisson process over [0, duration_s), by thinning.

    The rate is `rate_at(t, rate_per_s, ...)`: a mean of `rate_per_s` requests/s with a
    daily cycle (relative amplitude `daily_amplitude` in [0, 1), peak `daily_peak_s`
    after the start, default 14:00 when the start is midnight, or a `LocalPeak`: a local
    hour in a time zone) and a weekly cycle
    (`weekly_amplitude`, peak `weekly_peak_s` after the start). Amplitudes 0 (the default)
    give a homogeneous Poisson process. Candidates arrive at the peak rate and each is kept
    with probability rate(t) / peak rate.

    Token counts: `input_tokens` and `output_tokens` are a preset name (`azure-code`,
    `azure-conv`: the log-normals fitted to the Azure LLM inference traces 2023), a
    `TokenLaw` (`sim.models.token_laws`: log-normal, histogram, fixed), or an int (every
    request the same). When both name the same
    preset and `correlated` is true, log input and log output tokens are drawn with the
    preset's fitted correlation. `rng` is a numpy Generator or a seed: the same seed gives
    the same requests.
    """
    rate = finite_real(rate_per_s)
    if rate is None or rate < 0:
        raise ValueError(f"rate_per_s must be a finite number >= 0, got {rate_per_s!r}")
    duration = finite_real(duration_s)
    if duration is None or duration < 0:
        raise ValueError(f"duration_s must be a finite number >= 0, got {duration_s!r}")
    for name, a in (("daily_amplitude", daily_amplitude), ("weekly_amplitude", weekly_amplitude)):
        x = finite_real(a)
        if x is None or not 0 <= x < 1:
            raise ValueError(f"{name} must be in [0, 1), got {a!r}")
    rate_per_s, duration_s = rate, duration
    expected = peak_requests(rate, daily_amplitude, weekly_amplitude, duration)
    if expected > MAX_SYNTHETIC_REQUESTS:
        raise ValueError(
            f"rate_per_s={rate_per_s!r}, duration_s={duration_s!r} (with the cycles' peak): "
            f"about {expected:.3g} requests expected, more than the {MAX_SYNTHETIC_REQUESTS:.0e} "
            f"the generator makes in memory"
        )
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    dist_in = token_law(input_tokens, "input_tokens")
    dist_out = token_law(output_tokens, "output_tokens")
    shortest = int(dist_out.quantile(0.0))
    if shortest < 1:
        raise ValueError(f"output_tokens: a request generates >= 1 token, got min {shortest}")
    rho = 0.0
    if correlated and isinstance(input_tokens, str) and input_tokens == output_tokens:
        rho = request_presets()[input_tokens].log_correlation

    peak = rate_per_s * (1 + daily_amplitude) * (1 + weekly_amplitude)
    cycles: dict[str, Any] = dict(
        daily_amplitude=daily_amplitude,
        weekly_amplitude=weekly_amplitude,
        daily_peak_s=daily_peak_s,
        weekly_peak_s=weekly_peak_s,
    )
    chunks: list[np.ndarray] = []
    if peak > 0 and duration_s > 0:
        t = 0.0
        block = int(min(max(peak * duration_s * 1.05 + 100, 1000), 1 << 22))
        while t < duration_s:
            times = t + np.cumsum(gen.exponential(1.0 / peak, block))
            t = float(times[-1])
            times = times[times < duration_s]
            keep = gen.random(len(times)) * peak < rate_at(times, rate_per_s, **cycles)
            chunks.append(times[keep])
    arrival = np.concatenate(chunks) if chunks else np.zeros(0)
    z = gen.standard_normal((2, len(arrival)))
    z_out = rho * z[0] + math.sqrt(1 - rho * rho) * z[1]
    return RequestTable(
        arrival, dist_in.sample_from_normal(z[0]), dist_out.sample_from_normal(z_out)
    )
