"""The latency of a request at the fluid level: the prefill + round trip Q of one (model,
rtt) and the tables of the waits built on it, on fixed log grids of latencies (s) and
decay rates of the wait (1/s).

- **Latency.** ttft = wait + prefill_s(input tokens) + rtt_s[site], with Q = prefill +
  round trip from the token sample (piecewise linear between 44 quantiles, finer in the
  tail). An arrival admitted at once joins the least loaded replica, which then runs
  m = floor(n / R) + 1 sequences; one that waited runs a full batch; its tpot is
  iter_s[m]. The SLO is met jointly (a request that waited runs in a full batch),
  assuming the input tokens independent of the batch.
"""

from __future__ import annotations

import math

import numpy as np

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel

LATENCY_GRID_S = np.geomspace(1e-3, 3600.0, 401)
"""The log grid of latencies (1 ms to 1 h) of the run-wide distributions and tables, s."""
RATE_GRID_PER_S = np.geomspace(1e-4, 1e4, 65)
"""Decay rates theta of the wait's exponential tail the latency tables cover, 1/s."""
_Q_LEVELS = np.unique(
    np.concatenate([np.linspace(0.0, 0.9, 19), 1.0 - np.geomspace(0.1, 1e-4, 25), [1.0]])
)
"""Probability levels of the quantiles the prefill + round-trip distribution is kept at."""


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
