"""The fluid fidelity of LLM serving: a service's requests as flows, a step at a time.

Per step of `step_s` (split into pieces by a `configure` or `set_shares` inside it) and
site, the source's arrivals A and output tokens O of the piece (times the site's share)
meet R ready replicas of one `ReplicaModel`: the offered token rate x = O / duration
against the capacity x_cap = R x slots / iter_s[slots] tokens/s, the load rho = x / x_cap.
The definitions are those of `sim.serving.service_sim`.

- **The batch.** A replica with n sequences in flight is a processor-sharing server of
  n / iter_s[n] tokens/s. The dispatcher sends each request to the least loaded replica,
  so n sequences over R replicas run R x tps(n / R) tokens/s and draw R x power(n / R)
  (tps and power_w linear between integers: the balanced split). With Poisson arrivals n
  is a birth-death chain (up at the arrival rate, down at the token rate / E[out]; past
  c = R x slots a FIFO queue drained at the full batch's rate) whose stationary law
  pi(n) ~ prod_{k<=n} x / (R tps(k / R)), geometric of ratio rho beyond c, holds for any
  output-token distribution below c (processor sharing with a state-dependent rate is
  insensitive). It is Little's law made a distribution: its mode solves the fixed point
  N = lambda_r E[out] iter_s(N), its mean satisfies Little's law with the token-weighted
  iteration time, and both are the fixed point when iter_s is constant. `pool_table`
  tabulates it per (model, R) over rho.
- **Waiting.** An arrival waits when all c slots are busy, C = P(n >= c) (Erlang C of the
  chain; M/M/1 for one slot and a constant iteration time), then for an exponential time
  of rate theta = (x_cap - x) / (E[out] k), k = (ca^2 + cs^2) / 2 the Allen-Cunneen factor
  (cs^2 of the output tokens from the token sample, ca^2 = 1). A queue built only by
  fluctuations over the time T the slots have been near full (C > 1e-3) holds about
  sigma sqrt(T) requests (sigma^2 = 2 k lambda), which bounds the mean wait by
  sqrt(4 k lambda T / pi) E[out] / x_cap: near saturation a queue does not reach its
  stationary size within minutes. Not admitted within `timeout_s`: dropped, C
  exp(-theta timeout_s) of the arrivals.
- **Memory.** Near saturation the throughput flattens, so the batch takes minutes to
  follow the load (time constant E[out] / (dX/dn)). A piece whose batch would lag its
  load by more than 1% of the capacity, a piece past the capacity and a piece with a
  backlog carry state and are computed one after another; the rest is one numpy pass per
  site. There the mean batch n follows dn/dt = (x - X(n)) / E[out] (X the chain's
  throughput at mean batch n), linearised over substeps, and the chain is taken at the
  load whose mean batch is n; past the capacity the batch fills the slots, then a backlog
  of work W grows at x - x_cap (an arrival waits W / x_cap, uniform over the stretch; W
  never exceeds x_cap x timeout_s, the rest is dropped) and drains at x_cap - x, every
  slot busy.
- **Bursts.** Arrivals burstier than Poisson within a step (the excess index of
  dispersion of the source's counts in windows of 0.5 to 30 s within steps, measured once
  on its first 6 hours: 10 to 90 for the Azure code trace, 0 for a Poisson process or the
  synthetic generator) fill and drain the slots within seconds, which no stationary law
  sees. Such a source is followed by a fine pass instead (`_BatchPass`), block by block
  (one `advance_to`), its state carried between blocks: bins of 50 ms, split down to one
  request where its arrivals are apart (their output tokens are then known), the batch
  the cohorts still in flight (processor sharing: each has received the same number of
  tokens since its admission), the queue FIFO with its timeout. From it come each
  piece's power and mean batch, and its arrivals' waits (uniform between the quantiles
  `_PASS_LEVELS` of the pass's waits) and times per token (their times in service over
  their output tokens). Its cost grows with the requests and the busy time (a Python loop
  over bins and substeps of at most `_PASS_TOKENS` tokens): seconds per hour of trace.
- **Latency.** ttft = wait + prefill_s(input tokens) + rtt_s[site], with Q = prefill +
  round trip from the token sample (piecewise linear between 44 quantiles, finer in the
  tail). An arrival admitted at once joins the least loaded replica, which then runs
  m = floor(n / R) + 1 sequences; one that waited runs a full batch; its tpot is
  iter_s[m]. The SLO is met jointly (a request that waited runs in a full batch),
  assuming the input tokens independent of the batch.
- **Power** of a piece at a site: R x E[power(n / R) - power_w[0]] over the chain (the
  substeps of a piece computed one after another, the fine pass's bins), not the power at
  the mean batch (power is concave); constant over the piece from its start, so the
  model's energy is exact; an `advance_to` reports its changes in one call (arrays).
- **Percentiles** of a step invert its mixture of sites, pieces and components; the
  run-wide p99 inverts the request-weighted mixture of all steps, kept on a fixed log grid
  of latencies (1 ms to 1 h, 400 bins; tpot on the iteration times).

Requests count in the step they arrived in, served or dropped when they arrive (the wait
they will have is known then); a backlog shed later (fewer replicas) and the requests
queued or in flight at `close` are taken back from the latest steps.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from sim.serving.config import SloConfig
from sim.serving.replica import ReplicaModel
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceSim
from sim.serving.sources import RequestSource

__all__ = ["Fluid", "PoolTable", "pool_table"]

LOAD_GRID = np.unique(
    np.concatenate(
        [
            [0.0],
            np.geomspace(1e-6, 0.2, 100),
            np.linspace(0.2, 0.95, 76),
            1.0 - np.geomspace(0.05, 1e-4, 60),
        ]
    )
)
"""Loads rho = x / x_cap the chain is tabulated at (interpolated linearly in between)."""
LATENCY_GRID_S = np.geomspace(1e-3, 3600.0, 401)
"""The log grid of latencies (1 ms to 1 h) of the run-wide distributions and tables, s."""
RATE_GRID_PER_S = np.geomspace(1e-4, 1e4, 65)
"""Decay rates theta of the wait's exponential tail the latency tables cover, 1/s."""
_Q_LEVELS = np.unique(
    np.concatenate([np.linspace(0.0, 0.9, 19), 1.0 - np.geomspace(0.1, 1e-4, 25), [1.0]])
)
"""Probability levels of the quantiles the prefill + round-trip distribution is kept at."""
_MIN_WAIT_PROB = 1e-9
"""A wait probability below this is taken as no wait at all."""
_NEGLIGIBLE = 1e-3
"""Waits of probability below this share of 1 - p leave a p-quantile to Q's."""
_BISECTIONS = 12
"""Bisection steps of a percentile (in log latency, between bounds)."""
_SUBSTEPS = 8
"""Substeps of a piece over which the batch's relaxation is linearised."""
_BURST_WINDOWS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Windows the arrivals' dispersion within a step is measured over, s."""
_BURST_SAMPLE_S = 6 * 3600.0
"""The arrivals' dispersion is measured over the first 6 hours at most."""
_CALM = 0.02
"""An excess dispersion (or rate variance) below this is taken as Poisson."""
_QUEUEING = 1e-3
"""A wait probability above which a queue can build up (the exposure of the slots)."""
_SETTLED = 0.01
"""A piece whose batch, moving towards its fixed point, lags the load by less than this
share of the capacity in tokens per second is taken as settled (no memory needed)."""
_PASS_BIN_S = 0.05
"""Bins of the fine pass of bursty arrivals (`_BatchPass`), s: short enough to hold one
request or none most of the time (whose output tokens are then known exactly)."""
_PASS_SPLIT = 8
_PASS_SPLITS = 4
"""A bin holding more than one request is split into _PASS_SPLIT, at most _PASS_SPLITS
times (down to 12 us): one request per bin, whose output tokens are known."""
_PASS_QUIET_S = 1.0
"""Bins without arrivals are merged up to this length, s."""
_PASS_TOKENS = 4.0
"""A substep of the fine pass gives each sequence at most this many tokens."""
_PASS_AHEAD_S = 120.0
"""The fine pass looks this far past its block at least (no further arrivals), s: the
waits of the requests still queued and the times in service of those in flight."""
_PASS_LEVELS = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0])
"""Probability levels between which a piece's waits from the fine pass are uniform."""
_PASS_NODES = 32
"""Quantile nodes of the output tokens a request's time per token is taken at."""


@dataclass(frozen=True, eq=False)
class PoolTable:
    """The stationary chain of R replicas of one model (module docstring), tabulated over
    `load` = LOAD_GRID (the offered token rate over the capacity)."""

    model: ReplicaModel
    replicas: int
    capacity_tokens_per_s: float
    """R x slots / iter_s[slots]: output tokens per second with every slot busy."""
    p_wait: np.ndarray
    """P(all R x slots slots busy): the share of arrivals that wait (Erlang C)."""
    in_flight: np.ndarray
    """Mean sequences in flight per replica."""
    extra_w: np.ndarray
    """Mean power over idle per replica, E[power(n / R)] - power_w[0], W."""
    seen_cum: np.ndarray
    """[load, m]: P(admitted at once into a batch of at most m sequences), m = 0..slots."""
    seen_p50: np.ndarray
    seen_p99: np.ndarray
    """Median and 99th percentile of the batch an arrival runs in (a full one if it waits)."""

    @property
    def batch_grid(self) -> np.ndarray:
        """Mean sequences in flight in the pool at each load, then R x slots at load 1."""
        return np.append(self.replicas * self.in_flight, self.replicas * self.model.slots)

    @property
    def rate_grid(self) -> np.ndarray:
        """Token rate (tokens/s) at each of `batch_grid`."""
        return np.append(LOAD_GRID, 1.0) * self.capacity_tokens_per_s

    def batch(self, x_tokens_per_s: np.ndarray) -> np.ndarray:
        """The mean sequences in flight in the pool settled at token rate x (< capacity)."""
        return np.interp(x_tokens_per_s, self.rate_grid, self.batch_grid)

    def load(self, batch: np.ndarray) -> np.ndarray:
        """The load (< 1, within LOAD_GRID) whose chain has `batch` sequences in flight on
        average in the pool."""
        return np.minimum(
            np.interp(batch, self.batch_grid, np.append(LOAD_GRID, 1.0)), LOAD_GRID[-1]
        )

    def lag_tokens_per_s(
        self, before: np.ndarray, settled: np.ndarray, d_s: np.ndarray, e_out: np.ndarray
    ) -> np.ndarray:
        """How far the throughput of a batch moving from `before` to `settled` sequences
        lags the load over a piece of d_s, on average, tokens/s: the gap decays with the
        time constant E[out] / (dX/dn) (X the throughput, taken where it is flattest)."""
        grid = self.batch_grid
        j = np.clip(
            np.searchsorted(grid, np.maximum(before, settled), side="right") - 1, 0, len(grid) - 2
        )
        slope = np.diff(self.rate_grid)[j] / np.diff(grid)[j]
        tau_s = e_out / np.maximum(slope, 1e-12)
        return np.abs(settled - before) * e_out / d_s * -np.expm1(-d_s / tau_s)

    def admitted(self, i: np.ndarray, w: np.ndarray, m: np.ndarray) -> np.ndarray:
        """P(admitted at once into a batch of at most m sequences; m fractional, linear in
        between) at loads located at (i, w) in LOAD_GRID."""
        m = np.clip(m, 0.0, self.model.slots)
        lo = np.minimum(m.astype(np.int64), self.model.slots - 1)
        f = m - lo
        cum = self.seen_cum
        at_lo = cum[i, lo] * (1.0 - w) + cum[i + 1, lo] * w
        at_hi = cum[i, lo + 1] * (1.0 - w) + cum[i + 1, lo + 1] * w
        return at_lo + f * (at_hi - at_lo)

    def iter_at(self, m: np.ndarray) -> np.ndarray:
        """Time per token with m sequences in flight (linear in between), s."""
        return np.interp(m, np.arange(self.model.slots + 1.0), self.model.iter_s)

    def tpot_cdf(self, v_s: np.ndarray, i: np.ndarray, w: np.ndarray) -> np.ndarray:
        """P(tpot <= v_s) at loads located at (i, w) (an arrival that waits runs a full
        batch)."""
        s = self.model.slots
        m = np.interp(v_s, self.model.iter_s[1:], np.arange(1.0, s + 1.0), left=0.0)
        full = v_s >= self.model.iter_s[s]
        at_once = self.admitted(i, w, np.where(full, s, m))
        waits = 1.0 - self.admitted(i, w, np.asarray(float(s)))
        return at_once + np.where(full, waits, 0.0)


@lru_cache(maxsize=128)
def pool_table(model: ReplicaModel, replicas: int) -> PoolTable:
    """The `PoolTable` of `replicas` (>= 1) replicas of `model` (cached)."""
    r, s = int(replicas), model.slots
    c = r * s
    tps = np.arange(s + 1) / model.iter_s
    occupancy = np.arange(c + 1) / r
    pool_tps = r * np.interp(occupancy[1:], np.arange(s + 1), tps)
    cap = r * float(tps[s])
    rho = LOAD_GRID[:, None]
    with np.errstate(divide="ignore"):
        log_ratio = np.log(rho * cap) - np.log(pool_tps)[None, :]
    log_p = np.concatenate([np.zeros((len(LOAD_GRID), 1)), np.cumsum(log_ratio, axis=1)], axis=1)
    log_p -= log_p.max(axis=1, keepdims=True)
    p = np.exp(log_p)
    tail = p[:, -1] * LOAD_GRID / (1.0 - LOAD_GRID)
    total = p.sum(axis=1) + tail
    p /= total[:, None]
    tail /= total
    p_wait = p[:, -1] + tail
    in_flight = p @ occupancy + tail * s
    power = np.interp(occupancy, np.arange(s + 1), model.power_w)
    extra = p @ power + tail * model.power_w[s] - model.power_w[0]
    seen = p[:, :c].reshape(len(LOAD_GRID), s, r).sum(axis=2)
    seen_cum = np.concatenate([np.zeros((len(LOAD_GRID), 1)), np.cumsum(seen, axis=1)], axis=1)
    cum = seen_cum.copy()
    cum[:, s] += p_wait
    quantiles = [
        np.maximum(np.minimum((cum < q * cum[:, -1:]).sum(axis=1), s), 1).astype(float)
        for q in (0.5, 0.99)
    ]
    return PoolTable(model, r, cap, p_wait, in_flight, extra, seen_cum, *quantiles)


def _locate(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index i and weight w of x between grid[i] and grid[i + 1] (clipped to the grid)."""
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    w = np.clip((x - grid[i]) / (grid[i + 1] - grid[i]), 0.0, 1.0)
    return i, w


def _lerp(table: np.ndarray, i: np.ndarray, w: np.ndarray) -> np.ndarray:
    return table[i] * (1.0 - w) + table[i + 1] * w


_LOG_RATES = np.log(RATE_GRID_PER_S)
_LOG_LATENCIES = np.log(LATENCY_GRID_S)


def _locate_log(log_grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_locate` on a uniform grid of logarithms, for positive x."""
    step = log_grid[1] - log_grid[0]
    f = np.clip((np.log(np.maximum(x, 1e-300)) - log_grid[0]) / step, 0.0, len(log_grid) - 1.0)
    i = np.minimum(f.astype(np.int64), len(log_grid) - 2)
    return i, f - i


class _Latency:
    """The prefill + round trip Q of one (model, rtt) and the wait tables built on it."""

    def __init__(
        self,
        model: ReplicaModel,
        rtt_s: float,
        input_sample: np.ndarray,
        slo: SloConfig,
        timeout_s: float,
    ):
        q = np.sort(model.prefill_s(input_sample)) + rtt_s
        knots = np.quantile(q, _Q_LEVELS)
        # strictly increasing (an atom becomes a segment of 1e-12 s per quantile)
        knots = knots + 1e-12 * np.arange(len(knots))
        self.lo, self.hi = knots[:-1], knots[1:]
        self.knots = knots
        self.mass = np.diff(_Q_LEVELS)
        self._area = np.concatenate(
            [
                [0.0],
                np.cumsum(
                    self.mass / 2 * (self.hi - self.lo) + _Q_LEVELS[:-1] * (self.hi - self.lo)
                ),
            ]
        )
        """The integral of Q's CDF from its least value to each knot, s."""
        self.quantile_s = {p: float(np.quantile(q, p)) for p in (0.5, 0.99)}
        """The exact median and 99th percentile of Q, s."""
        self.cdf_grid = self.cdf(LATENCY_GRID_S)
        ttft_s, self.timeout_s = slo.ttft_ms / 1e3, timeout_s
        self.ttft_target_s = ttft_s
        self.cdf_target = float(self.cdf(np.asarray(ttft_s)))
        theta = RATE_GRID_PER_S
        self.slo_tail = self._exp_weighted(np.asarray(ttft_s), theta, ttft_s - timeout_s) + np.exp(
            -theta * timeout_s
        ) * self.cdf(np.asarray(ttft_s - timeout_s))
        """E[exp(-theta min(T - Q, timeout)); Q <= T] on RATE_GRID (T the TTFT target)."""
        self._h: np.ndarray | None = None
        self._log_h = np.zeros((0, 0))
        self._log_cell = np.zeros((0, 0), dtype=bool)
        """log h, and the cells whose four corners are positive (interpolated in log)."""

    def cdf(self, t_s: np.ndarray) -> np.ndarray:
        """P(Q <= t_s)."""
        return np.interp(t_s, self.knots, _Q_LEVELS)

    def integrated_cdf(self, t_s: np.ndarray) -> np.ndarray:
        """The integral of P(Q <= u) over u up to t_s (exact for the piecewise-linear CDF), s."""
        t = np.asarray(t_s, dtype=float)
        j = np.minimum(
            np.maximum(np.searchsorted(self.knots, t, side="right") - 1, 0), len(self.lo) - 1
        )
        into = np.minimum(np.maximum(t - self.lo[j], 0.0), self.hi[j] - self.lo[j])
        slope = self.mass[j] / (self.hi[j] - self.lo[j])
        inside = self._area[j] + _Q_LEVELS[j] * into + slope * into**2 / 2
        return inside + np.maximum(t - self.knots[-1], 0.0)

    def uniform_wait_cdf(self, t_s: np.ndarray, v0: np.ndarray, v1: np.ndarray) -> np.ndarray:
        """P(Q + W <= t_s), W uniform on [v0, v1] s."""
        lo, hi = np.minimum(v0, v1), np.maximum(v0, v1)
        width = hi - lo
        spread = (self.integrated_cdf(t_s - lo) - self.integrated_cdf(t_s - hi)) / np.maximum(
            width, 1e-300
        )
        return np.where(width > 1e-9, spread, self.cdf(t_s - lo))

    def _exp_weighted(self, t_s: np.ndarray, theta: np.ndarray, lo_s: float) -> np.ndarray:
        """E[exp(-theta (t - Q)); lo < Q <= t], broadcasting t and theta against the
        segments (last axis)."""
        t = np.asarray(t_s)[..., None]
        th = np.asarray(theta)[..., None]
        a = np.maximum(self.lo, lo_s)
        b = np.minimum(self.hi, t)
        span = np.maximum(b - a, 0.0)
        part = np.exp(-th * np.maximum(t - b, 0.0)) * -np.expm1(-th * span) / th
        return (part * self.mass / (self.hi - self.lo)).sum(axis=-1)

    @property
    def h(self) -> np.ndarray:
        """[latency, rate]: E[exp(-theta (t - Q)); Q <= t] on the grids (built on demand)."""
        if self._h is None:
            self._h = self._exp_weighted(
                LATENCY_GRID_S[:, None], RATE_GRID_PER_S[None, :], -math.inf
            )
            self._log_h = np.log(np.maximum(self._h, 1e-300))
            corners = (self._h[:-1, :-1], self._h[:-1, 1:], self._h[1:, :-1], self._h[1:, 1:])
            self._log_cell = np.minimum.reduce(corners) > 1e-250
        return self._h

    def h_at(self, t_s: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """E[exp(-theta (t - Q)); Q <= t] from the table: its logarithm linear in t and in
        theta within a cell (exact for a point mass Q), itself where it vanishes."""
        h = self.h
        gi, _ = _locate_log(_LOG_LATENCIES, t_s)
        ri, _ = _locate_log(_LOG_RATES, theta)
        t0, t1 = LATENCY_GRID_S[gi], LATENCY_GRID_S[gi + 1]
        r0, r1 = RATE_GRID_PER_S[ri], RATE_GRID_PER_S[ri + 1]
        gw = np.clip((t_s - t0) / (t1 - t0), 0.0, 1.0)
        rw = np.clip((theta - r0) / (r1 - r0), 0.0, 1.0)
        corners = (
            (gi, ri, (1 - gw) * (1 - rw)),
            (gi, ri + 1, (1 - gw) * rw),
            (gi + 1, ri, gw * (1 - rw)),
            (gi + 1, ri + 1, gw * rw),
        )
        in_log = np.exp(sum(self._log_h[a, b] * wt for a, b, wt in corners))
        logged = self._log_cell[gi, ri]
        if logged.all():
            return in_log
        return np.where(logged, in_log, sum(h[a, b] * wt for a, b, wt in corners))


class _BatchPass:
    """One site's batch and queue under bursty arrivals, followed bin by bin.

    Processor sharing makes the fluid limit exact in one variable: every sequence in
    flight gets a token per iteration, so all of them have received the same number of
    tokens u(t) since any earlier instant (du/dt = 1 / iter_s[n / R], n in flight over R
    replicas). A cohort of k requests admitted when the counter read u_i still holds
    k P(out > u - u_i) of them, so the batch n = sum_i k_i P(out > u - u_i): the short
    requests of a burst leave first, as in the request level. A cohort is the requests
    of one bin admitted together; their mean output mu is known (the bin's tokens over
    its requests) and, k draws of the token sample given their mean, each spreads about
    it as the sample does about its mean, by sqrt((k - 1) / k) (one request: exactly mu).
    Per bin (`Fluid._serve_pass` makes them `_PASS_BIN_S` long, split down to one
    request where it can), in substeps that give at most `_PASS_TOKENS` tokens, the
    queue, FIFO, fills the free slots c - n (c = R x slots) from its head (a bin's
    arrivals from its start); a request still queued `timeout_s` after its arrival is
    dropped. The bin's arrivals are spread evenly over it, so a request's wait is the
    time the cumulative admissions (and drops) reach its place in the queue minus the
    time the cumulative arrivals did. Later arrivals never delay earlier ones, so the
    waits of those queued at the end of a block are found by going on without arrivals
    until the queue is empty (and the batch too, or `_PASS_AHEAD_S` has passed, for the
    times in service of those admitted late); the state carried to the next block is
    the one at its end.

    Power is concave (idle to one sequence is most of it): with the requests leaving
    independently, E[power(N)] is taken as P(N > 0) power(E[N | N > 0]), P(N = 0) the
    product over cohorts of P(none of its k left in flight) ((1 - p)^floor(k) (1 -
    frac(k) p), p = P(out > u - u_i)).

    Units: times s, u and output tokens in tokens, counts in requests (fractional)."""

    def __init__(self, output_sample: np.ndarray):
        out = np.sort(np.asarray(output_sample, dtype=float))
        self._mean = float(out.mean())
        self._rel = out / self._mean
        """The sample over its mean, sorted."""
        self._top = float(self._rel[-1])
        self.nodes = np.quantile(self._rel, (np.arange(_PASS_NODES) + 0.5) / _PASS_NODES)
        """Outputs over their mean at the mid-levels of `_PASS_NODES` quantile bins."""
        self.k = np.zeros(0)
        """Requests per cohort."""
        self.cu = np.zeros(0)
        """The token counter u when each cohort was admitted."""
        self.mu = np.zeros(0)
        """Each cohort's mean output tokens."""
        self.g = np.zeros(0)
        """Each cohort's spread about its mean relative to the sample's."""
        self.u = 0.0
        self.q_t = np.zeros(0)
        self.q_w = np.zeros(0)
        self.q_n = np.zeros(0)
        self.q_o = np.zeros(0)
        """Requests queued: the start (s) and width (s) of the bin they arrived in, count,
        output tokens."""

    def left(self, done: np.ndarray, mu: np.ndarray, g: np.ndarray) -> np.ndarray:
        """P(out > done) for cohorts of mean mu and spread g (out = mu (1 - g + g X), X
        the sample over its mean)."""
        x = (done / mu - 1.0 + g) / np.maximum(g, 1e-9)
        rel = self._rel
        return 1.0 - np.searchsorted(rel, x, side="right") / len(rel)

    @staticmethod
    def spread(k: np.ndarray) -> np.ndarray:
        """The spread of k draws about their mean relative to the sample's."""
        return np.sqrt(np.maximum(k - 1.0, 0.0) / np.maximum(k, 1e-300))

    def in_flight(self) -> float:
        return float(self.k @ self.left(self.u - self.cu, self.mu, self.g))

    def queued(self) -> float:
        return float(self.q_n.sum())

    def scale(self, keep: float) -> None:
        """Keep this share of the requests in flight (fewer replicas)."""
        self.k = self.k * keep

    def shed(self, keep: float) -> None:
        """Keep this share of the queued requests."""
        self.q_n = self.q_n * keep
        self.q_o = self.q_o * keep

    def run(
        self,
        model: ReplicaModel,
        replicas: int,
        edges: np.ndarray,
        arrivals: np.ndarray,
        tokens: np.ndarray,
        timeout_s: float,
    ) -> dict[str, np.ndarray]:
        """Bins [edges[j], edges[j + 1]) with `arrivals` each, of `tokens` output tokens.
        Per bin: mean sequences in flight `n`, mean extra power `extra_w` (W over idle,
        all replicas); per bin's arrivals: `dropped`, waits `v0` of the first and `v1` of
        the last served (s) and, per output node (`nodes` x the bin's mean output `out`),
        time in service `service_s` (s)."""
        r, s = replicas, model.slots
        c = float(r * s)
        iter_l, power_l = model.iter_s.tolist(), model.power_w.tolist()
        nb = len(arrivals)
        start = len(self.q_n)
        times = np.concatenate([self.q_t, edges[:-1]])
        counts = np.concatenate([self.q_n, arrivals])
        widths = np.concatenate([self.q_w, np.diff(edges)])
        outs = np.concatenate([self.q_o, tokens])
        cum_a = np.concatenate([[0.0], np.cumsum(counts)])
        mean_out = np.where(counts > 0, outs / np.maximum(counts, 1e-300), self._mean)
        knots_t = np.stack([times, times + widths], axis=1).ravel()
        knots_a = np.stack([cum_a[:-1], cum_a[1:]], axis=1).ravel()
        total = float(cum_a[-1])
        spread_in = self.spread(counts)
        cohorts = [self.k, self.cu, self.mu, self.g]
        fresh: list[list[float]] = []
        """Cohorts admitted since the last `batch` (k, u_i, mu, g)."""
        u = self.u
        reach = self._top

        def batch(u: float) -> tuple[float, float]:
            """Sequences in flight (mean) and P(none) at counter u; prunes the cohorts."""
            nonlocal cohorts
            if fresh:
                cohorts = [
                    np.append(a, b) for a, b in zip(cohorts, zip(*fresh, strict=True), strict=True)
                ]
                fresh.clear()
            ka, ca, ma, ga = cohorts
            alive = u - ca < ma * (1.0 - ga + ga * reach)
            if not alive.all():
                cohorts = [v[alive] for v in cohorts]
                ka, ca, ma, ga = cohorts
            if not len(ka):
                return 0.0, 1.0
            p = np.ones(len(ka))  # one request, or several of one output: in flight
            spread = ga > 0
            if spread.any():
                p[spread] = self.left(u - ca[spread], ma[spread], ga[spread])
            whole = np.floor(ka)
            if ((p >= 1.0) & (whole >= 1.0)).any():
                return float(ka @ p), 0.0
            log_p0 = whole @ np.log1p(-np.minimum(p, 1.0 - 1e-16))
            log_p0 += np.log1p(-(ka - whole) * p).sum()
            return float(ka @ p), math.exp(float(log_p0))

        removed = 0.0
        t_l = [float(edges[0])]
        d_l = [0.0]  # cumulative admitted or dropped at each bin's end
        drop_knots = [(0.0, 0.0)]  # (queue position, cumulative dropped)
        dropped = 0.0
        u_l: list[float] = []
        n_mean, w_mean = np.zeros(nb), np.zeros(nb)
        snapshot: tuple[list[np.ndarray], float, float] | None = None
        b = 0
        t = float(edges[0])
        end = float(edges[-1])
        arrived_by = np.interp(edges[1:], knots_t, knots_a, left=0.0, right=total).tolist()
        while True:
            if b == nb:
                batch(u)
                snapshot = (list(cohorts), u, removed)
            t1 = float(edges[b + 1]) if b < nb else t + _PASS_QUIET_S
            arrived = arrived_by[b] if b < nb else total
            n, p0 = batch(u)
            u_l.append(u)
            seq_s = energy = 0.0
            while t < t1 - 1e-12:
                want = arrived - removed
                if n < 1e-9 and want < 1e-9:
                    cohorts = [v[:0] for v in cohorts]
                    t = t1
                    break
                if want > 1e-12 and n < c:
                    adm = min(want, c - n)
                    i = int(np.searchsorted(cum_a, removed, side="right")) - 1
                    while adm > 1e-12 and i < len(counts):  # one cohort per bin of arrivals
                        part = min(float(cum_a[i + 1]) - removed, adm)
                        if part > 1e-12:
                            fresh.append([part, u, float(mean_out[i]), float(spread_in[i])])
                            removed += part
                            n += part
                            adm -= part
                            p0 *= max(1.0 - part, 0.0)
                        i += 1
                busy = 1.0 - p0
                m = n / r
                j = min(int(m), s - 1)
                it = iter_l[1] if m < 1 else iter_l[j] + (m - j) * (iter_l[j + 1] - iter_l[j])
                h = min(t1 - t, _PASS_TOKENS * it)
                if busy > 1e-12:
                    m = max(m / busy, 1.0)
                    j = min(int(m), s - 1)
                    power = power_l[j] + (m - j) * (power_l[j + 1] - power_l[j]) - power_l[0]
                    energy += r * busy * power * h
                seq_s += n * h
                u += h / it
                t += h
                n, p0 = batch(u)
            late = float(np.interp(t1 - timeout_s, knots_t, knots_a, left=0.0, right=total))
            if late > removed:
                drop_knots.append((removed, dropped))
                dropped += late - removed
                removed = late
                drop_knots.append((removed, dropped))
            if b < nb:
                n_mean[b] = seq_s / (t1 - float(edges[b]))
                w_mean[b] = energy / (t1 - float(edges[b]))
            t = t1
            t_l.append(t)
            d_l.append(removed)
            b += 1
            if b >= nb and removed >= total - 1e-9:
                if t >= end + _PASS_AHEAD_S or not len(cohorts[0]):
                    break
        if snapshot is None:
            batch(u)
            snapshot = (list(cohorts), u, removed)
        state, self.u, removed0 = snapshot
        self.k, self.cu, self.mu, self.g = state
        left = np.maximum(cum_a[1:] - np.maximum(cum_a[:-1], removed0), 0.0)
        keep = left > 1e-12
        self.q_t, self.q_w = times[keep], widths[keep]
        self.q_n = np.minimum(left, counts)[keep]
        self.q_o = self.q_n * mean_out[keep]
        # the waits of the block's arrivals
        t_a, d_a = np.array(t_l), np.array(d_l)
        pos_lo, pos_hi = cum_a[start:-1], cum_a[start + 1 :]
        v0 = np.maximum(_first_reach(t_a, d_a, pos_lo) - edges[:-1], 0.0)
        v1 = np.maximum(_first_reach(t_a, d_a, pos_hi) - edges[1:], 0.0)
        drop_knots.append((total + 1.0, dropped))
        dp, dc = np.array(drop_knots).T
        lost = np.interp(pos_hi, dp, dc) - np.interp(pos_lo, dp, dc)
        v0, v1 = np.minimum(v0, timeout_s), np.minimum(v1, timeout_s)
        admit_s = (edges[:-1] + edges[1:]) / 2 + (v0 + v1) / 2
        # time in service of each output node: the counter's times, then its last pace
        u_a = np.array(u_l + [u])
        t_u = t_a[: len(u_a)]
        u_adm = np.interp(admit_s, t_u, u_a)
        spread = self.spread(arrivals)[:, None]
        out = mean_out[start:, None] * (1.0 - spread + spread * self.nodes[None, :])
        goal = u_adm[:, None] + out
        pace = iter_l[1]
        if len(u_a) > 1 and u_a[-1] > u_a[-2]:
            pace = (t_u[-1] - t_u[-2]) / (u_a[-1] - u_a[-2])
        done = np.where(
            goal <= u_a[-1],
            _first_reach(t_u, u_a, goal.ravel()).reshape(goal.shape),
            t_u[-1] + (goal - u_a[-1]) * pace,
        )
        return {
            "n": n_mean,
            "extra_w": w_mean,
            "dropped": lost,
            "v0": v0,
            "v1": v1,
            "service_s": done - admit_s[:, None],
            "out": out,
        }


def _first_reach(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The first time the nondecreasing, piecewise-linear v(t) (knots t, v) reaches x."""
    i = np.clip(np.searchsorted(v, x, side="left"), 1, len(v) - 1)
    lo, hi = v[i - 1], v[i]
    f = np.clip((x - lo) / np.maximum(hi - lo, 1e-300), 0.0, 1.0)
    return t[i - 1] + f * (t[i] - t[i - 1])


@dataclass
class _Stationary:
    """Arrivals of pieces at a site served by the chain at a load (arrays over rows)."""

    lat: _Latency
    pool: PoolTable
    c: np.ndarray
    """P(wait)."""
    theta: np.ndarray
    """Decay rate of the wait, 1/s."""
    i: np.ndarray
    w: np.ndarray
    """The load's place in LOAD_GRID."""

    def rows(self, rows: np.ndarray) -> _Stationary:
        return _Stationary(
            self.lat,
            self.pool,
            self.c[rows],
            self.theta[rows],
            self.i[rows],
            self.w[rows],
        )

    def ttft_pct(self, p: float) -> np.ndarray:
        q = self.lat.quantile_s[p]
        out = np.full(len(self.c), q)
        waits = np.flatnonzero(self.c > _NEGLIGIBLE * (1 - p))
        if len(waits):  # between Q's and Q's largest + the wait's p-quantile
            part = self.rows(waits)
            tail_s = np.log(np.maximum(part.c / (1 - p), 1.0)) / part.theta
            hi = self.lat.knots[-1] + tail_s
            out[waits] = _bisect(part.ttft_cdf, p, np.full(len(waits), q), hi)
        return out

    def ttft_cdf(self, t_s: np.ndarray) -> np.ndarray:
        f = self.lat.cdf(t_s)
        waits = self.c > _MIN_WAIT_PROB
        if waits.any():
            f = f - np.where(waits, self.c * self.lat.h_at(t_s, self.theta), 0.0)
        return f

    def tpot_pct(self, p: float) -> np.ndarray:
        m = _lerp(self.pool.seen_p50 if p == 0.5 else self.pool.seen_p99, self.i, self.w)
        return self.pool.iter_at(m)

    def tpot_cdf(self, v_s: np.ndarray) -> np.ndarray:
        return self.pool.tpot_cdf(v_s, self.i, self.w)


@dataclass
class _Queued:
    """Arrivals of pieces at a site while a backlog is queued: every slot busy, waits
    uniform on [v0, v1] s (arrays over rows)."""

    lat: _Latency
    pool: PoolTable
    v0: np.ndarray
    v1: np.ndarray

    def rows(self, rows: np.ndarray) -> _Queued:
        return _Queued(self.lat, self.pool, self.v0[rows], self.v1[rows])

    def ttft_cdf(self, t_s: np.ndarray) -> np.ndarray:
        return self.lat.uniform_wait_cdf(t_s, self.v0, self.v1)

    def ttft_pct(self, p: float) -> np.ndarray:
        q = self.lat.quantile_s[p]
        lo, hi = np.minimum(self.v0, self.v1), np.maximum(self.v0, self.v1)
        return _bisect(self.ttft_cdf, p, q + lo, q + hi)

    def tpot_pct(self, p: float) -> np.ndarray:
        return np.full(len(self.v0), self.pool.model.iter_s[self.pool.model.slots])

    def tpot_cdf(self, v_s: np.ndarray) -> np.ndarray:
        full = self.pool.model.iter_s[self.pool.model.slots]
        return np.broadcast_to(v_s >= full, self.v0.shape).astype(float)


@dataclass
class _Passed(_Queued):
    """Arrivals of pieces followed by the fine pass (`_BatchPass`): waits uniform on
    [v0, v1] s, time per token `tpot_s` (arrays over rows)."""

    tpot_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def rows(self, rows: np.ndarray) -> _Passed:
        return _Passed(self.lat, self.pool, self.v0[rows], self.v1[rows], self.tpot_s[rows])

    def tpot_pct(self, p: float) -> np.ndarray:
        return self.tpot_s

    def tpot_cdf(self, v_s: np.ndarray) -> np.ndarray:
        return (v_s >= self.tpot_s).astype(float)


_Part = _Stationary | _Queued


def _bisect(
    cdf: Callable[[np.ndarray], np.ndarray], p: float, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """The p-quantile of increasing `cdf` between lo and hi (> 0), bisecting in log."""
    lo, hi = np.maximum(lo, 1e-9), np.maximum(hi, 1e-9)
    for _ in range(_BISECTIONS):
        mid = np.sqrt(lo * hi)
        above = cdf(mid) >= p
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return np.sqrt(lo * hi)


def _mixture_pct(parts: list[tuple[np.ndarray, _Part]], p: float, ttft: bool) -> np.ndarray:
    """The p-quantile (s) of each row's mixture of `parts` (weights, component); NaN where
    all weights are 0."""
    weights = np.array([w for w, _ in parts])
    has = weights > 0
    own = np.zeros(weights.shape)
    for k, (_, c) in enumerate(parts):
        rows = np.flatnonzero(has[k])
        if len(rows):
            part = c if len(rows) == has.shape[1] else c.rows(rows)
            own[k, rows] = part.ttft_pct(p) if ttft else part.tpot_pct(p)
    lo = np.where(has, own, np.inf).min(axis=0)
    hi = np.where(has, own, -np.inf).max(axis=0)
    out = np.where(has.any(axis=0), lo, np.nan)
    mixed = np.flatnonzero(hi > lo * (1 + 1e-9))
    if len(mixed):
        sub = [(w[mixed], c.rows(mixed)) for w, c in parts]
        total = weights[:, mixed].sum(axis=0)

        def cdf(t: np.ndarray) -> np.ndarray:
            f = np.zeros(len(mixed))
            for w, c in sub:
                f += w * (c.ttft_cdf(t) if ttft else c.tpot_cdf(t))
            return f / total

        out[mixed] = _bisect(cdf, p, lo[mixed], hi[mixed])
    return out


@dataclass
class _TtftAcc:
    """Run-wide TTFT mixture of one `_Latency`: requests served by the chain (n, and n x C
    by decay rate of the wait) and requests with uniform waits (ramps of the waits' CDF
    on LATENCY_GRID_S, added up by grid bin)."""

    n: float = 0.0
    by_rate: np.ndarray = field(default_factory=lambda: np.zeros(len(RATE_GRID_PER_S)))
    n_queued: float = 0.0
    ramps: np.ndarray = field(default_factory=lambda: np.zeros((5, len(LATENCY_GRID_S) + 1)))
    """Per bin of a wait's start or end: slope, slope x start, slope, slope x end, atoms."""

    def add_queued(self, n: np.ndarray, v0: np.ndarray, v1: np.ndarray) -> None:
        lo, hi = np.minimum(v0, v1), np.maximum(v0, v1)
        size = len(LATENCY_GRID_S) + 1
        atom = hi - lo < 1e-9
        slope = np.where(atom, 0.0, n / np.where(atom, 1.0, hi - lo))
        i0 = np.searchsorted(LATENCY_GRID_S, lo)
        i1 = np.searchsorted(LATENCY_GRID_S, hi)
        for row, (idx, weights) in enumerate(
            (
                (i0, slope),
                (i0, slope * lo),
                (i1, slope),
                (i1, slope * hi),
                (i0, np.where(atom, n, 0.0)),
            )
        ):
            self.ramps[row] += np.bincount(idx, weights, size)
        self.n_queued += float(n.sum())

    def queued_wait_cdf(self, t_s: np.ndarray) -> np.ndarray:
        """Requests with uniform waits whose wait is <= t_s (t_s >= 0)."""
        c = np.cumsum(self.ramps[:, :-1], axis=1)
        g = LATENCY_GRID_S
        on_grid = c[0] * g - c[1] - (c[2] * g - c[3]) + c[4]
        return np.interp(t_s, np.concatenate([[0.0], g]), np.concatenate([[0.0], on_grid]))


@dataclass
class _TpotAcc:
    """Run-wide tpot mixture of one `PoolTable`: requests served by the chain by load,
    requests in full batches and those of the fine pass."""

    by_load: np.ndarray = field(default_factory=lambda: np.zeros(len(LOAD_GRID)))
    full: float = 0.0
    passed: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """(time per token s, requests) of the fine pass."""


@dataclass
class _SiteResult:
    """What one site did in each piece of an `advance_to` (arrays over pieces)."""

    served: np.ndarray
    dropped: np.ndarray
    tokens: np.ndarray
    slo_met: np.ndarray
    extra_w: np.ndarray
    in_flight: np.ndarray
    """Mean sequences in flight at the site."""
    parts: list[tuple[np.ndarray, _Part]]
    """(requests served, component) over the pieces: the chain at each node of the batch
    (at the piece's load, or in a piece computed one after another at the load whose mean
    batch is the batch then), the backlog growing or draining, the backlog at its limit
    (waits of timeout_s), the nodes past the slots."""
    mixed: np.ndarray
    """bool: pieces with more than the first component (sequential, or the fine pass)."""


class Fluid(ServiceSim):
    """The fluid fidelity (module docstring): per-step flows through queueing formulas."""

    def setup(self) -> None:
        sites = len(self.rtt_s)
        self._ready = np.zeros(sites, dtype=np.int64)
        self._models: list[ReplicaModel | None] = [None] * sites
        self._shares: np.ndarray | None = None
        self._in_flight = np.zeros(sites)
        """Sequences in flight at each site (the state the batch relaxes from)."""
        self._exposed_s = np.zeros(sites)
        """How long each site's slots have been near full (at the current time), s."""
        self._backlog_tokens = np.zeros(sites)
        """Output tokens queued at each site (the fluid backlog's work)."""
        self._backlog = np.zeros(sites)
        """Requests queued at each site."""
        self._reported_w = np.full(sites, np.nan)
        self._t = 0.0
        out = np.asarray(self.source.tokens.output_sample, dtype=float)
        cs2 = float(np.var(out) / np.mean(out) ** 2) if len(out) else 1.0
        self._ac = (1.0 + cs2) / 2.0
        """Allen-Cunneen factor (ca^2 + cs^2) / 2, Poisson arrivals (ca^2 = 1)."""
        self._mean_out = float(self.source.tokens.mean_output)
        self._bursty = _excess_dispersion(self.source, self.step_s, self.horizon_s) is not None
        """Arrivals burstier than Poisson within a step: followed by the fine pass."""
        self._passes: dict[int, _BatchPass] = {}
        """The fine pass of each site (bursty arrivals)."""
        k = self.n_steps
        self._arrived = np.zeros(k)
        self._served = np.zeros(k)
        self._dropped = np.zeros(k)
        self._tokens = np.zeros(k)
        self._slo_met = np.zeros(k)
        self._pct = {col: np.full(k, np.nan) for col in STEP_COLUMNS[5:9]}
        self._open: list[tuple[np.ndarray, _Part]] = []
        """Components of the step in progress (its pieces before the current time)."""
        self._open_seq_s = 0.0
        self._last_in_flight = 0.0
        self._unfinished = 0.0
        self._latencies: dict[tuple[ReplicaModel, float], _Latency] = {}
        self._ttft_acc: dict[_Latency, _TtftAcc] = {}
        self._tpot_acc: dict[PoolTable, _TpotAcc] = {}

    # -- the contract -----------------------------------------------------------------

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        self.advance_to(t_s)
        before = int(self._ready[site])
        self._ready[site] = int(ready)
        self._models[site] = model
        if ready < before:  # the fluid level frees the surplus replicas at once
            self._in_flight[site] *= ready / before
            if site in self._passes:
                self._passes[site].scale(ready / before)
        self._in_flight[site] = min(self._in_flight[site], ready * model.slots)
        most = (
            pool_table(model, int(ready)).capacity_tokens_per_s * self.timeout_s if ready else 0.0
        )
        excess = max(self._backlog_tokens[site] - most, 0.0)
        if excess > 0:
            shed = self._backlog[site] * excess / self._backlog_tokens[site]
            if site in self._passes:
                self._passes[site].shed(1.0 - excess / self._backlog_tokens[site])
            self._backlog[site] -= shed
            self._backlog_tokens[site] -= excess
            self._take_back(shed, to_dropped=True)
        return t_s

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        self.advance_to(t_s)
        self._shares = None if shares is None else np.array(shares, dtype=float)

    def advance_to(self, t_s: float) -> None:
        t_s = min(t_s, self.horizon_s)
        if t_s <= self._t:
            return
        k0 = int(self._t // self.step_s)
        k1 = int(math.ceil(t_s / self.step_s))
        edges = np.concatenate([[self._t], np.arange(k0 + 1, k1) * self.step_s, [t_s]])
        steps = k0 + np.arange(len(edges) - 1)
        self._t = t_s
        dur = np.diff(edges)
        arrivals, _, out_tokens = self.source.step_sums(edges)
        served = np.zeros(len(dur))
        dropped = np.zeros(len(dur))
        tokens = np.zeros(len(dur))
        slo_met = np.zeros(len(dur))
        seq_s = np.zeros(len(dur))
        shares = self._site_shares()
        results: list[_SiteResult] = []
        if shares is None:
            dropped += arrivals
        for site in range(len(self.rtt_s)):
            if self._ready[site] == 0:
                self._report(site, edges[:1], np.zeros(1))
                continue
            share = 0.0 if shares is None else float(shares[site])
            if not self._bursty:
                res = self._serve(site, share, dur, share * arrivals, share * out_tokens)
            else:
                res = self._serve_pass(site, share, edges, share * arrivals, share * out_tokens)
            results.append(res)
            served += res.served
            dropped += res.dropped
            tokens += res.tokens
            slo_met += res.slo_met
            seq_s += res.in_flight * dur
            self._report(site, edges[:-1], res.extra_w)
        span = slice(k0, k0 + len(dur))
        self._arrived[span] += arrivals
        self._served[span] += served
        self._dropped[span] += dropped
        self._tokens[span] += tokens
        self._slo_met[span] += slo_met
        step_end = np.minimum((steps + 1) * self.step_s, self.horizon_s)
        whole = (edges[:-1] == steps * self.step_s) & (edges[1:] >= step_end)
        for j in np.flatnonzero(~whole):  # the first and the last piece at most
            self._open.extend(self._parts(results, np.array([j])))
            self._open_seq_s += seq_s[j]
            if edges[j + 1] >= step_end[j]:
                if self._open:
                    self._record(np.array([steps[j]]), self._open)
                self._last_in_flight = self._open_seq_s / (step_end[j] - steps[j] * self.step_s)
                self._open, self._open_seq_s = [], 0.0
        if whole.any() and results:
            rows = np.flatnonzero(whole)
            mixed = np.zeros(len(dur), dtype=bool)
            for res in results:
                mixed |= res.mixed
            for subset in (rows[~mixed[rows]], rows[mixed[rows]]):
                parts = self._parts(results, subset)
                if parts:
                    self._record(steps[subset], parts)
        if whole.any():
            last = int(np.flatnonzero(whole)[-1])
            self._last_in_flight = seq_s[last] / dur[last]

    def live(self) -> LiveStats:
        k = int(self._t // self.step_s) - 1 if self._t < self.horizon_s else self.n_steps - 1
        if k < 0:
            nan = math.nan
            return LiveStats(nan, float(self._backlog.sum()), 0.0, nan, nan, nan, 0.0)
        length = min((k + 1) * self.step_s, self.horizon_s) - k * self.step_s
        arrived = float(self._arrived[k])
        decided = float(self._served[k] + self._dropped[k])
        return LiveStats(
            rate_per_s=arrived / length,
            queued=float(self._backlog.sum()),
            in_flight=self._last_in_flight,
            ttft_p99_ms=float(self._pct["ttft_p99_ms"][k]),
            tpot_p99_ms=float(self._pct["tpot_p99_ms"][k]),
            slo_attainment=float(self._slo_met[k] / decided) if decided > 0 else math.nan,
            dropped=float(self._dropped[k]),
        )

    def close(self, horizon_s: float) -> None:
        self.advance_to(horizon_s)
        left = float(self._backlog.sum() + self._in_flight.sum())
        self._backlog[:] = 0.0
        self._backlog_tokens[:] = 0.0
        self._in_flight[:] = 0.0
        self._take_back(left, to_dropped=False)

    def step_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "step": np.arange(self.n_steps),
                "arrived": self._arrived,
                "served": self._served,
                "dropped": self._dropped,
                "tokens": self._tokens,
                **{col: self._pct[col] for col in STEP_COLUMNS[5:9]},
                "slo_met": self._slo_met,
            },
            columns=list(STEP_COLUMNS),
        )

    def summary(self) -> dict[str, float]:
        return {
            "requests_total": float(self._arrived.sum()),
            "requests_served": float(self._served.sum()),
            "requests_dropped": float(self._dropped.sum()),
            "requests_unfinished": self._unfinished,
            "slo_met": float(self._slo_met.sum()),
            "tokens_generated": float(self._tokens.sum()),
            "ttft_p99_ms": 1e3 * self._run_ttft_p99_s(),
            "tpot_p99_ms": 1e3 * self._run_tpot_p99_s(),
        }

    # -- one site ---------------------------------------------------------------------

    def _site_shares(self) -> np.ndarray | None:
        """Each site's share of the arrivals now (None: no ready replica anywhere)."""
        ready = self._ready > 0
        if not ready.any():
            return None
        if self._shares is not None:
            s = np.where(ready, self._shares, 0.0)
            if s.sum() > 0:
                return s / s.sum()
        return self._ready / self._ready.sum()

    def _latency(self, site: int, model: ReplicaModel) -> _Latency:
        key = (model, float(self.rtt_s[site]))
        if key not in self._latencies:
            self._latencies[key] = _Latency(
                model, key[1], self.source.tokens.input_sample, self.slo, self.timeout_s
            )
        return self._latencies[key]

    def _serve(
        self, site: int, share: float, dur: np.ndarray, a: np.ndarray, o: np.ndarray
    ) -> _SiteResult:
        """The pieces of length `dur` at `site` (`share` of the arrivals) with `a`
        arrivals of `o` output tokens: the chain at each piece's load in one pass, except
        the pieces with a backlog or a batch still moving, which go one after another
        (`_sequential`)."""
        model = self._models[site]
        assert model is not None
        r, s = int(self._ready[site]), model.slots
        c_slots = r * s
        pool = pool_table(model, r)
        lat = self._latency(site, model)
        cap = pool.capacity_tokens_per_s
        count = len(dur)
        x = o / dur
        lam = a / dur
        e_out = np.where(a > 0, o / np.maximum(a, 1e-300), self._mean_out)
        settled = np.where(x < cap, pool.batch(x), c_slots)
        before = np.concatenate([[self._in_flight[site]], settled[:-1]])
        lag_w = pool.lag_tokens_per_s(before, settled, dur, e_out)
        sequential = (x >= cap) | (lag_w > _SETTLED * cap)
        sequential[0] |= self._backlog_tokens[site] > 0
        full_w = model.power_w[s] - model.power_w[0]
        free_s = dur.copy()
        rho = np.minimum(x / cap, LOAD_GRID[-1])
        busy_s = n_q = v_lo = v_hi = n_lim = dropped = np.zeros(count)
        sub_w: np.ndarray = np.zeros(count)
        sub_n: np.ndarray = np.zeros(count)
        if sequential.any():
            rows, out, subs = self._sequential(site, pool, dur, a, x, e_out, settled, sequential)
            sequential[:] = False
            sequential[rows] = True
            row = rows[subs[:, 0].astype(np.int64)]
            used, n_sub = subs[:, 1], subs[:, 2]
            per_w, per_n = self._nodes(pool, n_sub)
            sub_w = np.bincount(row, used * r * per_w, count)
            sub_n = np.bincount(row, used * r * per_n, count)
            free_s[rows] = out[:, 0]
            rho[rows] = np.bincount(row, used * pool.load(n_sub), count)[rows] / np.maximum(
                out[:, 0], 1e-300
            )
            busy_s, n_q, v_lo, v_hi, n_lim, dropped = np.zeros((6, count))
            for col, values in zip(
                (busy_s, n_q, v_lo, v_hi, n_lim, dropped), out[:, 1:].T, strict=True
            ):
                col[rows] = values
        else:
            self._in_flight[site] = settled[-1]
        i, w = _locate(LOAD_GRID, rho)
        a_free = lam * free_s
        c = _lerp(pool.p_wait, i, w)
        exposure_s = self._exposure(site, c, dur)
        # a queue drains at the chain's slack, or the load's if larger; built up by
        # fluctuations over exposure_s it is about sigma sqrt(exposure_s) requests (only
        # where arrivals may wait: elsewhere theta is never read)
        theta = np.full(count, RATE_GRID_PER_S[-1])
        drop = np.zeros(count)
        waits = np.flatnonzero(c > _MIN_WAIT_PROB)
        if len(waits):
            slack = np.maximum(cap * (1.0 - rho[waits]), cap - x[waits])
            sigma = np.sqrt(
                4.0 * self._ac * lam[waits] * np.maximum(exposure_s[waits], 1e-9) / math.pi
            )
            theta[waits] = (slack / self._ac + cap / np.maximum(sigma, 1e-300)) / e_out[waits]
            drop[waits] = c[waits] * np.exp(-theta[waits] * self.timeout_s)
        tpot_s = self.slo.tpot_ms / 1e3
        m_ok = int(np.searchsorted(model.iter_s[1:], tpot_s, side="right"))
        full_ok = bool(model.iter_s[s] <= tpot_s)
        met = lat.cdf_target * _lerp(pool.seen_cum[:, m_ok], i, w)
        if full_ok and len(waits):
            ri, rw = _locate_log(_LOG_RATES, theta[waits])
            met[waits] += c[waits] * (lat.cdf_target - _lerp(lat.slo_tail, ri, rw))
        stat_n = a_free * (1.0 - drop)
        stat_met = a_free * np.maximum(met, 0.0)
        extra_w = np.where(
            sequential, (sub_w + busy_s * r * full_w) / dur, r * _lerp(pool.extra_w, i, w)
        )
        in_flight = np.where(
            sequential, (sub_n + busy_s * c_slots) / dur, r * _lerp(pool.in_flight, i, w)
        )
        has_q = n_q > 0
        queued = _Queued(lat, pool, np.where(has_q, v_lo, 0.0), np.where(has_q, v_hi, 0.0))
        limit = np.full(count, self.timeout_s)
        parts: list[tuple[np.ndarray, _Part]] = [
            (stat_n, _Stationary(lat, pool, c, theta, i, w)),
            (n_q, queued),
            (n_lim, _Queued(lat, pool, limit, limit)),
        ]
        served = stat_n + n_q + n_lim
        lost = a_free - stat_n + dropped
        met_all = stat_met
        if full_ok:
            met_all = met_all + n_lim * float(
                lat.cdf(np.asarray(lat.ttft_target_s - self.timeout_s))
            )
            if has_q.any():
                met_all[has_q] += n_q[has_q] * queued.rows(np.flatnonzero(has_q)).ttft_cdf(
                    np.asarray(lat.ttft_target_s)
                )
        return _SiteResult(
            served=served,
            dropped=lost,
            tokens=served * e_out,
            slo_met=met_all,
            extra_w=extra_w,
            in_flight=in_flight,
            parts=parts,
            mixed=sequential,
        )

    def _serve_pass(
        self, site: int, share: float, edges: np.ndarray, a: np.ndarray, o: np.ndarray
    ) -> _SiteResult:
        """The pieces between `edges` at `site` (`share` of the arrivals, `a` of them with
        `o` output tokens per piece) followed by the fine pass (`_BatchPass`, bursty
        arrivals): per piece its mean power and batch, and its arrivals' waits as uniform
        components between the quantiles `_PASS_LEVELS` of their waits, each with the
        time per token at the same level (long waits come with full batches)."""
        model = self._models[site]
        assert model is not None
        r = int(self._ready[site])
        pool = pool_table(model, r)
        lat = self._latency(site, model)
        dur = np.diff(edges)
        count = len(dur)
        per = np.maximum(np.ceil(dur / _PASS_BIN_S - 1e-9), 1).astype(np.int64)
        piece = np.repeat(np.arange(count), per)
        within = np.arange(len(piece)) - np.repeat(np.cumsum(per) - per, per)
        points = edges[piece] + within * (dur / per)[piece]
        anchor = within % max(int(round(_PASS_QUIET_S / _PASS_BIN_S)), 1) == 0
        for _ in range(_PASS_SPLITS):  # a bin of several requests split (if they are apart)
            crowded = self.source.step_sums(np.append(points, edges[-1]))[0] > 1
            if not crowded.any():
                break
            lo = points[crowded]
            width = (np.append(points[1:], edges[-1]) - points)[crowded]
            inner = np.arange(1, _PASS_SPLIT) / _PASS_SPLIT
            points = np.concatenate([points, (lo[:, None] + width[:, None] * inner).ravel()])
            anchor = np.concatenate([anchor, np.zeros(len(lo) * len(inner), dtype=bool)])
            order = np.argsort(points, kind="stable")
            points, anchor = points[order], anchor[order]
        piece = np.minimum(np.searchsorted(edges, points, side="right") - 1, count - 1)
        fine = np.append(points, edges[-1])
        arrivals, _, tokens = self.source.step_sums(fine)
        # bins without arrivals merged, up to _PASS_QUIET_S
        some = arrivals > 0
        starts = np.flatnonzero(anchor | some | np.concatenate([[True], some[:-1]]))
        fine = np.append(fine[starts], edges[-1])
        arrivals = share * np.add.reduceat(arrivals, starts)
        tokens = share * np.add.reduceat(tokens, starts)
        piece = piece[starts]
        fpass = self._passes.setdefault(site, _BatchPass(self.source.tokens.output_sample))
        out = fpass.run(model, r, fine, arrivals, tokens, self.timeout_s)
        self._in_flight[site] = fpass.in_flight()
        self._backlog[site] = fpass.queued()
        self._backlog_tokens[site] = self._backlog[site] * self._mean_out
        width = np.diff(fine)
        extra_w = np.bincount(piece, out["extra_w"] * width, count) / dur
        in_flight = np.bincount(piece, out["n"] * width, count) / dur
        served_b = np.maximum(arrivals - out["dropped"], 0.0)
        served = np.bincount(piece, served_b, count)
        e_out = np.where(a > 0, o / np.maximum(a, 1e-300), self._mean_out)
        tpot = out["service_s"] / np.maximum(out["out"], 1e-9)
        ok = (tpot <= self.slo.tpot_ms / 1e3).mean(axis=1)
        v0, v1 = out["v0"], out["v1"]
        met_b = served_b * ok * lat.uniform_wait_cdf(np.asarray(lat.ttft_target_s), v0, v1)
        levels = len(_PASS_LEVELS) - 1
        w_lo, w_hi = np.zeros((levels, count)), np.zeros((levels, count))
        t_lvl = np.zeros((levels, count))
        bounds = np.searchsorted(piece, np.arange(count + 1))
        mid = (_PASS_LEVELS[:-1] + _PASS_LEVELS[1:]) / 2
        for j in np.flatnonzero(served > 0):
            lo_b, hi_b = bounds[j], bounds[j + 1]
            n_b = served_b[lo_b:hi_b]
            q = _uniform_mixture_quantiles(n_b, v0[lo_b:hi_b], v1[lo_b:hi_b], _PASS_LEVELS)
            w_lo[:, j], w_hi[:, j] = q[:-1], q[1:]
            t_j = tpot[lo_b:hi_b].ravel()
            order = np.argsort(t_j, kind="stable")
            cum = np.cumsum(np.repeat(n_b, _PASS_NODES)[order])
            at = np.minimum(np.searchsorted(cum, mid * cum[-1]), len(cum) - 1)
            t_lvl[:, j] = t_j[order][at]
        parts: list[tuple[np.ndarray, _Part]] = [
            (
                served * (_PASS_LEVELS[k + 1] - _PASS_LEVELS[k]),
                _Passed(lat, pool, w_lo[k], w_hi[k], t_lvl[k]),
            )
            for k in range(levels)
        ]
        return _SiteResult(
            served=served,
            dropped=np.bincount(piece, arrivals, count) - served,
            tokens=served * e_out,
            slo_met=np.bincount(piece, met_b, count),
            extra_w=extra_w,
            in_flight=in_flight,
            parts=parts,
            mixed=np.ones(count, dtype=bool),
        )

    @staticmethod
    def _nodes(pool: PoolTable, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At mean batches `batch` (sequences in the pool): extra power and sequences in
        flight per replica (the chain whose mean batch that is; full past the slots)."""
        s = pool.model.slots
        over = batch >= pool.replicas * s
        i, w = _locate(LOAD_GRID, pool.load(batch))
        extra_w = np.where(
            over, pool.model.power_w[s] - pool.model.power_w[0], _lerp(pool.extra_w, i, w)
        )
        return extra_w, np.where(over, s, _lerp(pool.in_flight, i, w))

    def _exposure(self, site: int, c: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """How long, at the middle of each piece, the site's slots have been near full
        (consecutive pieces with a wait probability above _QUEUEING), s."""
        busy = c > _QUEUEING
        if not busy.any():
            self._exposed_s[site] = 0.0
            return np.zeros(len(dur))
        end = np.cumsum(dur)
        start = end - dur
        last_idle = np.maximum.accumulate(np.where(busy, -np.inf, end))
        since = np.where(np.isfinite(last_idle), last_idle, -self._exposed_s[site])
        self._exposed_s[site] = end[-1] - since[-1] if busy[-1] else 0.0
        return np.where(busy, start - since + dur / 2, 0.0)

    def _sequential(
        self,
        site: int,
        pool: PoolTable,
        dur: np.ndarray,
        a: np.ndarray,
        x: np.ndarray,
        e_out: np.ndarray,
        settled: np.ndarray,
        flagged: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces whose state carries over, one after another, from the first flagged
        one until the batch has settled again (module docstring): the mean batch n relaxes
        by dn/dt = (x - X(n)) / E[out] (X the chain's throughput at mean n), linearised
        over substeps; past the capacity it fills the slots, then a backlog of work W
        grows (to at most x_cap x timeout_s) or drains. Returns the pieces, their stretches
        (time without a backlog, time with every slot busy, requests admitted from the
        backlog, its least and most wait, requests admitted after timeout_s, requests
        dropped at the limit) and the substeps without a backlog (index into the pieces,
        duration s, mean batch)."""
        r, s = pool.replicas, pool.model.slots
        c = float(r * s)
        cap = pool.capacity_tokens_per_s
        most = cap * self.timeout_s
        n_grid, x_grid = pool.batch_grid.tolist(), pool.rate_grid.tolist()
        slopes = (np.diff(pool.rate_grid) / np.diff(pool.batch_grid)).tolist()
        top = len(slopes) - 1

        def seg(n: float) -> int:
            return min(max(bisect_right(n_grid, n) - 1, 0), top)

        flagged_at = np.flatnonzero(flagged).tolist()
        d_l, a_l, x_l, eo_l, fix_l = (v.item for v in (dur, a, x, e_out, settled))
        n = float(self._in_flight[site])
        work = float(self._backlog_tokens[site])
        queued = float(self._backlog[site])
        rows: list[int] = []
        out: list[tuple[float, ...]] = []
        subs: list[tuple[int, float, float]] = []
        k, pos, count = flagged_at[0], 0, len(dur)
        if k > 0:
            n = fix_l(k - 1)
        while True:
            d, xk, eo = d_l(k), x_l(k), eo_l(k)
            lam = a_l(k) / d
            t = free_s = busy_s = 0.0
            n_q = n_lim = dropped = 0.0
            v_lo, v_hi = math.inf, -math.inf
            while t < d * (1 - 1e-12):
                h = d - t
                if work > 0 or (n >= c * (1 - 1e-12) and xk >= cap):
                    n = c
                    if xk >= cap:
                        grow = h if xk == cap else min(h, max(most - work, 0.0) / (xk - cap))
                        after = min(work + (xk - cap) * grow, most)
                        n_q += lam * grow
                        v_lo, v_hi = min(v_lo, work / cap), max(v_hi, after / cap)
                        if h > grow:
                            n_lim += lam * (h - grow) * cap / xk
                            dropped += lam * (h - grow) * (1 - cap / xk)
                        queued += (after - work) / eo
                        used = h
                    else:
                        used = min(h, work / (cap - xk))
                        after = 0.0 if used < h else work - (cap - xk) * h
                        n_q += lam * used
                        v_lo, v_hi = min(v_lo, work / cap), max(v_hi, after / cap)
                        queued *= after / work
                    work = after
                    busy_s += used
                    t += used
                    continue
                j = seg(n)
                rate = x_grid[j] + (n - n_grid[j]) * slopes[j]
                tau = eo / max(slopes[j], 1e-12)
                target = n + (xk - rate) * tau / eo
                if xk < cap and (target - fix_l(k)) * (n - fix_l(k)) < 0:
                    # the tangent overshoots the settled batch: head for it at today's rate
                    target = fix_l(k)
                    tau = eo * (target - n) / (xk - rate)
                # substeps while the batch still has far to go (the throughput is concave)
                used = h if abs(target - n) < _SETTLED * c else min(h, d / _SUBSTEPS)
                full = target > c and used >= -tau * math.log1p(-(c - n) / (target - n))
                if full:
                    used = -tau * math.log1p(-(c - n) / (target - n))
                e = math.exp(-used / tau)
                subs.append((len(rows), used, target + (n - target) * tau * (1 - e) / used))
                n = c if full else target + (n - target) * e
                free_s += used
                t += used
            rows.append(k)
            out.append((free_s, busy_s, n_q, v_lo, v_hi, n_lim, dropped))
            k += 1
            if k >= count:
                break
            if work <= 0 and x_l(k) < cap:
                j = seg(max(n, fix_l(k)))
                tau = eo_l(k) / max(slopes[j], 1e-12)
                lag = abs(fix_l(k) - n) * eo_l(k) / d_l(k) * -math.expm1(-d_l(k) / tau)
                if lag <= _SETTLED * cap:
                    while pos < len(flagged_at) and flagged_at[pos] <= k:
                        pos += 1
                    if pos == len(flagged_at):
                        n = fix_l(count - 1)
                        break
                    k = flagged_at[pos]
                    n = fix_l(k - 1)
        self._in_flight[site] = n
        self._backlog_tokens[site] = work
        self._backlog[site] = queued if work > 0 else 0.0
        return np.array(rows), np.array(out), np.array(subs).reshape(-1, 3)

    # -- steps ------------------------------------------------------------------------

    @staticmethod
    def _parts(results: list[_SiteResult], rows: np.ndarray) -> list[tuple[np.ndarray, _Part]]:
        """The components (requests, component) of pieces `rows` over all sites, those
        that serve any."""
        if len(rows) == len(results[0].served):
            return [(n, c) for res in results for n, c in res.parts if n.any()]
        return [(n[rows], c.rows(rows)) for res in results for n, c in res.parts if n[rows].any()]

    def _record(self, steps: np.ndarray, parts: list[tuple[np.ndarray, _Part]]) -> None:
        """Write the percentiles of `steps` (rows of `parts`) and add `parts` to the
        run-wide mixtures."""
        for p, name in ((0.5, "p50"), (0.99, "p99")):
            self._pct[f"ttft_{name}_ms"][steps] = 1e3 * _mixture_pct(parts, p, ttft=True)
            self._pct[f"tpot_{name}_ms"][steps] = 1e3 * _mixture_pct(parts, p, ttft=False)
        for n, comp in parts:
            ttft = self._ttft_acc.setdefault(comp.lat, _TtftAcc())
            tpot = self._tpot_acc.setdefault(comp.pool, _TpotAcc())
            if isinstance(comp, _Stationary):
                ttft.n += float(n.sum())
                waits = comp.c > _MIN_WAIT_PROB
                if waits.any():
                    ri, rw = _locate_log(_LOG_RATES, comp.theta[waits])
                    nc = (n * comp.c)[waits]
                    size = len(RATE_GRID_PER_S)
                    ttft.by_rate += np.bincount(ri, nc * (1 - rw), size)
                    ttft.by_rate += np.bincount(ri + 1, nc * rw, size)
                size = len(LOAD_GRID)
                tpot.by_load += np.bincount(comp.i, n * (1 - comp.w), size)
                tpot.by_load += np.bincount(comp.i + 1, n * comp.w, size)
            elif n.any():
                ttft.add_queued(n, comp.v0, comp.v1)
                if isinstance(comp, _Passed):
                    tpot.passed.append((comp.tpot_s, n))
                else:
                    tpot.full += float(n.sum())

    # -- accounting -------------------------------------------------------------------

    def _take_back(self, count: float, to_dropped: bool) -> None:
        """Move `count` served requests of the latest steps to dropped (or unfinished)."""
        k = min(int(self._t // self.step_s), self.n_steps - 1)
        while count > 1e-12 and k >= 0:
            take = min(count, self._served[k])
            if take > 0:
                keep = 1 - take / self._served[k]
                self._tokens[k] *= keep
                self._slo_met[k] = min(self._slo_met[k], self._served[k] - take)
                self._served[k] -= take
                if to_dropped:
                    self._dropped[k] += take
                else:
                    self._unfinished += take
                count -= take
            k -= 1

    def _report(self, site: int, starts: np.ndarray, extra_w: np.ndarray) -> None:
        """on_power with the changes of the site's extra power (one call: floats for one,
        arrays for more)."""
        changed = np.flatnonzero(
            extra_w != np.concatenate([[self._reported_w[site]], extra_w[:-1]])
        )
        if len(changed) == 1:
            self.on_power(site, float(starts[changed[0]]), float(extra_w[changed[0]]))
        elif len(changed):
            self.on_power(site, starts[changed], extra_w[changed])
        self._reported_w[site] = extra_w[-1]

    def _run_ttft_p99_s(self) -> float:
        cdf = np.zeros(len(LATENCY_GRID_S))
        total = 0.0
        for lat, acc in self._ttft_acc.items():
            cdf += acc.n * lat.cdf_grid
            if acc.by_rate.any():
                cdf -= lat.h @ acc.by_rate
            if acc.n_queued > 0:
                q = (lat.lo + lat.hi) / 2
                waits = acc.queued_wait_cdf(np.maximum(LATENCY_GRID_S[:, None] - q[None, :], 0.0))
                cdf += (
                    waits * np.where(LATENCY_GRID_S[:, None] >= q[None, :], 1.0, 0.0)
                ) @ lat.mass
            total += acc.n + acc.n_queued
        if total <= 0:
            return math.nan
        return _invert_grid(cdf / total, 0.99)

    def _run_tpot_p99_s(self) -> float:
        values, masses = [], []
        for pool, acc in self._tpot_acc.items():
            s = pool.model.slots
            seen = np.diff(pool.seen_cum, axis=1)
            dist = np.zeros(s)
            if acc.by_load.any():
                dist += acc.by_load @ seen
                dist[s - 1] += acc.by_load @ (1.0 - pool.seen_cum[:, s])
            dist[s - 1] += acc.full
            values.append(pool.model.iter_s[1:])
            masses.append(dist)
            for v, n in acc.passed:
                values.append(v)
                masses.append(n)
        if not values:
            return math.nan
        v = np.concatenate(values)
        m = np.concatenate(masses)
        if m.sum() <= 0:
            return math.nan
        order = np.argsort(v, kind="stable")
        cum = np.cumsum(m[order])
        return float(v[order][np.searchsorted(cum, 0.99 * cum[-1])])


def _uniform_mixture_quantiles(
    n: np.ndarray, v0: np.ndarray, v1: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """The quantiles at `levels` (0 and 1: the least and most) of a mixture of uniforms on
    [v0, v1] (an atom where they meet) weighted by n, s: its CDF on 0 and
    LATENCY_GRID_S, linear in between."""
    has = n > 0
    n, lo, hi = n[has], np.minimum(v0, v1)[has], np.maximum(v0, v1)[has]
    g = np.concatenate([[0.0], LATENCY_GRID_S])
    width = hi - lo
    f = np.where(
        width[:, None] > 1e-9,
        np.clip((g[None, :] - lo[:, None]) / np.maximum(width, 1e-9)[:, None], 0.0, 1.0),
        (g[None, :] >= lo[:, None]).astype(float),
    )
    cdf = np.maximum.accumulate(n @ f / n.sum())
    least, most = float(lo.min()), float(hi.max())
    out = np.interp(levels, cdf, g)
    return np.clip(out, least, most)


def _invert_grid(cdf: np.ndarray, p: float) -> float:
    """The p-quantile of a CDF on LATENCY_GRID_S (log-linear in between), s."""
    cdf = np.maximum.accumulate(cdf)
    g = int(np.searchsorted(cdf, p))
    if g == 0:
        return float(LATENCY_GRID_S[0])
    if g >= len(cdf):
        return float(LATENCY_GRID_S[-1])
    frac = (p - cdf[g - 1]) / max(cdf[g] - cdf[g - 1], 1e-300)
    return float(np.exp(_LOG_LATENCIES[g - 1] + frac * (_LOG_LATENCIES[g] - _LOG_LATENCIES[g - 1])))


def _excess_dispersion(
    source: RequestSource, step_s: float, horizon_s: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Windows (s) and the excess over Poisson of the index of dispersion of the source's
    arrival counts in windows of that length within a step (their variance about the
    step's mean over the mean, minus 1), over the first _BURST_SAMPLE_S at most; None when no window
    shows any (a Poisson process, or the expected counts of the synthetic generator)."""
    sample_s = min(horizon_s, _BURST_SAMPLE_S)
    steps = int(sample_s // step_s)
    windows, excess = [], []
    for window_s in _BURST_WINDOWS_S:
        bins = int(step_s // window_s)
        if bins < 2 or steps < 1:
            continue
        starts = np.arange(steps)[:, None] * step_s + np.arange(bins + 1)[None, :] * window_s
        edges = np.append(starts.ravel(), steps * step_s)  # each step's bins, then a gap
        counts = source.step_sums(edges)[0].reshape(steps, bins + 1)[:, :bins]
        total = counts.sum()
        if total <= 0:
            continue
        spread = ((counts - counts.mean(axis=1, keepdims=True)) ** 2).sum() * bins / (bins - 1)
        windows.append(window_s)
        excess.append(max(spread / total - 1.0, 0.0))
    if not windows or max(excess) < _CALM:
        return None
    return np.array(windows), np.array(excess)
