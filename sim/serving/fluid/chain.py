"""The stationary batch chain of R replicas of one model, tabulated over the load (loads
rho = x / x_cap dimensionless, token rates in tokens/s, power in W, times in s).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim.models.llm_replica import ReplicaModel

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
