"""A service's requests over a run: from a request file (scaled in time, tiled) or the
synthetic generator, read the way each fidelity needs them.

The request level takes the requests themselves, a window at a time
(`requests_between`); the fluid level takes per-step sums (`step_sums`): arrivals and
their input and output tokens. A file gives both from the same requests, so the two
fidelities see the same load; the generator gives the request level its draws and the
fluid level the expected counts (the integral of the rate) at the mean token counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from sim.config.services import SYNTHETIC_CHUNK_S
from sim.models.token_laws import HistogramLaw, TokenLaw
from sim.serving.requests import (
    DAY_S,
    WEEK_S,
    LocalPeak,
    RequestTable,
    TokenSpec,
    rate_at,
    read_requests,
    request_presets,
    synthetic_requests,
    token_law,
)

if TYPE_CHECKING:
    from sim.config.services import RequestSource as RequestSourceConfig
    from sim.serving.importers import RequestImportReport

__all__ = ["FileSource", "RequestSource", "SyntheticSource", "TokenStats", "build_source"]

DAILY_PEAK_S = 14 * 3600.0
"""The generator's daily peak, s after the run's start (as `synthetic_requests`), and its
default local hour (14:00) when the run's start is known. A modelling choice, not a
published value (as the training workload's `peak_hour`)."""
WEEKLY_PEAK_S = 2.5 * DAY_S
_DIRECTIONS = ("input_tokens", "output_tokens")


@dataclass(frozen=True)
class TokenStats:
    """Token counts of a service's requests: means, and a sample for distributions."""

    mean_input: float
    mean_output: float
    input_sample: np.ndarray
    """int64, up to 100,000 input token counts."""
    output_sample: np.ndarray
    """int64, up to 100,000 output token counts (paired with `input_sample`)."""
    input_law: TokenLaw | None = None
    output_law: TokenLaw | None = None
    """The laws of the requests' lengths: the generator's (the scenario's laws, a preset's
    fitted log-normals, a fixed count), a request file's own answers (`output_law` only:
    their exact histogram); None: means alone. A replica model takes the output law's
    in-flight context share (kappa) in place of the calibrated constant (docs/serving.md
    "Lengths as distributions")."""


class RequestSource:
    """The requests of one service over [0, horizon_s)."""

    tokens: TokenStats

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        """The requests arriving in [t0_s, t1_s), times in seconds since the run's start."""
        raise NotImplementedError

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(arrivals, input tokens, output tokens) in each interval [edges[i], edges[i+1])."""
        raise NotImplementedError

    def output_factor(self, t_s: float) -> float:
        """How much longer than `tokens` says the answers of requests arriving at `t_s` are
        (a generation directive's factor, `sim.serving.directives`); 1 here."""
        return 1.0


class FileSource(RequestSource):
    """A request file, its arrival times multiplied by `time_scale`, tiled over the run when
    `repeat` (each copy starts one scaled span + one mean gap after the previous one)."""

    report: RequestImportReport | None = None
    """The import report of a trace imported at the start of the run (None: a dcsim file)."""

    def __init__(self, table: RequestTable, horizon_s: float, time_scale: float, repeat: bool):
        if len(table) == 0:
            raise ValueError("the request file holds no requests")
        t = (table.arrival_s - table.arrival_s[0]) * time_scale
        gap = t[-1] / (len(t) - 1) if len(t) > 1 else 1.0
        period = t[-1] + gap if repeat else math.inf
        copies = max(1, math.ceil(horizon_s / period)) if repeat else 1
        self._t = t
        self._period = period
        self._copies = copies
        self._in = table.input_tokens
        self._out = table.output_tokens
        self._cum_in = np.concatenate([[0], np.cumsum(self._in)])
        self._cum_out = np.concatenate([[0], np.cumsum(self._out)])
        self._horizon_s = horizon_s
        k = min(len(table), 100_000)
        self.tokens = TokenStats(
            float(np.mean(self._in)),
            float(np.mean(self._out)),
            np.asarray(self._in[:k]),
            np.asarray(self._out[:k]),
            output_law=HistogramLaw.of_counts(self._out),
        )

    def _cumulative(self, t_s: np.ndarray, cum: np.ndarray | None) -> np.ndarray:
        """Requests (or their tokens, with `cum`) arrived before each time in `t_s`."""
        t_s = np.minimum(np.asarray(t_s, dtype=float), self._horizon_s)
        n = len(self._t)
        if math.isinf(self._period):
            i = np.searchsorted(self._t, t_s, side="left")
            return i if cum is None else cum[i]
        copy = np.clip(np.floor(t_s / self._period), 0, self._copies)
        i = np.searchsorted(self._t, t_s - copy * self._period, side="left")
        whole = n if cum is None else cum[-1]
        return copy * whole + (i if cum is None else cum[i])

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        t1_s = min(t1_s, self._horizon_s)
        parts = []
        first = 0 if math.isinf(self._period) else int(t0_s // self._period)
        last = 0 if math.isinf(self._period) else int(t1_s // self._period)
        for copy in range(first, min(last, self._copies - 1) + 1):
            offset = 0.0 if math.isinf(self._period) else copy * self._period
            lo = np.searchsorted(self._t, t0_s - offset, side="left")
            hi = np.searchsorted(self._t, t1_s - offset, side="left")
            parts.append((self._t[lo:hi] + offset, self._in[lo:hi], self._out[lo:hi]))
        if not parts:
            return RequestTable(np.zeros(0), np.zeros(0, np.int64), np.ones(0, np.int64))
        return RequestTable(*(np.concatenate(col) for col in zip(*parts, strict=True)))

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.diff(self._cumulative(edges_s, None)).astype(float),
            np.diff(self._cumulative(edges_s, self._cum_in)).astype(float),
            np.diff(self._cumulative(edges_s, self._cum_out)).astype(float),
        )


class SyntheticSource(RequestSource):
    """The synthetic generator (`sim.serving.synthetic_requests`); each hour of the run is
    drawn from its own child seed of `seed`, so any window can be drawn alone and the same
    seed gives the same requests.

    `tokens`: a preset name (both directions, with its fitted correlation), or a pair
    (input, output) of `TokenSpec`s (a preset name, a `TokenLaw`, an int); laws given
    as `TokenLaw`s are the source's `tokens.input_law` / `output_law`. `start`: the run's
    start (a datetime with a UTC offset); with it the daily peak is at local hour
    `daily_peak_hour` in `timezone` (DST followed), without it `DAILY_PEAK_S` after the
    run's start.
    """

    def __init__(
        self,
        rate_per_s: float,
        horizon_s: float,
        seed: np.random.SeedSequence,
        daily_amplitude: float,
        weekly_amplitude: float,
        tokens: str | tuple[TokenSpec, TokenSpec],
        *,
        start: datetime | None = None,
        daily_peak_hour: float = DAILY_PEAK_S / 3600.0,
        timezone: str = "UTC",
    ):
        pair = (tokens, tokens) if isinstance(tokens, str) else tokens
        for key, spec in zip(("input", "output"), pair, strict=True):
            if isinstance(spec, str) and spec not in request_presets():
                where = "tokens" if isinstance(tokens, str) else f"tokens.{key}"
                raise ValueError(
                    f"{where}: unknown token preset {spec!r}; presets: {list(request_presets())}"
                )
        tokens = pair
        self._rate = rate_per_s
        self._cycles = dict(daily_amplitude=daily_amplitude, weekly_amplitude=weekly_amplitude)
        self._peak = None if start is None else LocalPeak(start, daily_peak_hour, timezone)
        self._tokens = tokens
        self._seed = seed
        self._horizon_s = horizon_s
        sample_seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 0))
        sample = synthetic_requests(
            100_000 / 3600.0,
            3600.0,
            np.random.default_rng(sample_seed),
            input_tokens=tokens[0],
            output_tokens=tokens[1],
        )
        laws = [token_law(spec, key) for spec, key in zip(tokens, _DIRECTIONS, strict=True)]
        self.tokens = TokenStats(
            float(np.mean(sample.input_tokens)),
            float(np.mean(sample.output_tokens)),
            sample.input_tokens,
            sample.output_tokens,
            *laws,
        )

    def _daily_peak(self, t0_s: float) -> float | LocalPeak:
        """`rate_at`'s daily peak for times counted from `t0_s` s after the run's start."""
        if self._peak is None:
            return (DAILY_PEAK_S - t0_s) % DAY_S
        return self._peak.shifted(t0_s)

    def _hour(self, h: int) -> RequestTable:
        """The requests of hour `h` of the run, from that hour's own seed."""
        rng = np.random.default_rng(self._hour_seed(h))
        t0 = h * SYNTHETIC_CHUNK_S
        hour = synthetic_requests(
            self._rate,
            SYNTHETIC_CHUNK_S,
            rng,
            daily_amplitude=self._cycles["daily_amplitude"],
            weekly_amplitude=self._cycles["weekly_amplitude"],
            daily_peak_s=self._daily_peak(t0),
            weekly_peak_s=(WEEKLY_PEAK_S - t0) % WEEK_S,
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
        )
        return RequestTable(hour.arrival_s + t0, hour.input_tokens, hour.output_tokens)

    def _hour_seed(self, h: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(self._seed.entropy, spawn_key=(*self._seed.spawn_key, 1, h))

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        t1_s = min(t1_s, self._horizon_s)
        parts = []
        for h in range(int(t0_s // SYNTHETIC_CHUNK_S), int(math.ceil(t1_s / SYNTHETIC_CHUNK_S))):
            hour = self._hour(h)
            sel = (hour.arrival_s >= t0_s) & (hour.arrival_s < t1_s)
            parts.append((hour.arrival_s[sel], hour.input_tokens[sel], hour.output_tokens[sel]))
        if not parts:
            return RequestTable(np.zeros(0), np.zeros(0, np.int64), np.ones(0, np.int64))
        return RequestTable(*(np.concatenate(col) for col in zip(*parts, strict=True)))

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Expected arrivals: the rate's integral over each interval (Simpson's rule on the
        smooth cycles), at the mean token counts."""
        e = np.minimum(np.asarray(edges_s, dtype=float), self._horizon_s)
        a, b = e[:-1], e[1:]
        peak = self._daily_peak(0.0)
        rate = lambda t: rate_at(t, self._rate, **self._cycles, daily_peak_s=peak)  # noqa: E731
        r = (rate(a) + 4 * rate((a + b) / 2) + rate(b)) / 6.0
        n = r * (b - a)
        return n, n * self.tokens.mean_input, n * self.tokens.mean_output


def build_source(
    cfg: RequestSourceConfig,
    horizon_s: float,
    seed: np.random.SeedSequence,
    start: datetime | None = None,
    timezone: str = "UTC",
) -> RequestSource:
    """The `RequestSource` of a service's `requests` table (`sim.config.services`). A trace
    file in another format is imported now; its import report is the source's `report`.
    `start`: the run's start, `timezone`: the zone of the synthetic daily peak when the
    table names none (the origin site's)."""
    if cfg.file is not None:
        if cfg.format == "dcsim":
            table, report = read_requests(cfg.file), None
        else:
            from sim.serving.importers import import_requests

            table, report = import_requests(cfg.format, cfg.file)
        source = FileSource(table, horizon_s, cfg.time_scale, cfg.repeat)
        source.report = report
        return source
    assert cfg.rate_per_s is not None
    tokens = cfg.tokens if isinstance(cfg.tokens, str) else cfg.tokens.specs()
    return SyntheticSource(
        cfg.rate_per_s,
        horizon_s,
        seed,
        cfg.daily_amplitude,
        cfg.weekly_amplitude,
        tokens,
        start=start,
        daily_peak_hour=cfg.daily_peak_hour,
        timezone=cfg.timezone or timezone,
    )
