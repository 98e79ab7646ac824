"""Latency distributions of the fluid level's pieces and their percentiles: the
components of a step's mixture (the chain, a queued backlog) and a
mixture's quantiles (latencies in s).

- **Percentiles** of a step invert its mixture of sites, pieces and components (the
  run-wide p99s: `run_latency`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.serving.fluid.chain import PoolTable, _lerp
from sim.serving.fluid.latency import _Latency

_MIN_WAIT_PROB = 1e-9
"""A wait probability below this is taken as no wait at all."""
_NEGLIGIBLE = 1e-3
"""Waits of probability below this share of 1 - p leave a p-quantile to Q's."""
_BISECTIONS = 12
"""Bisection steps of a percentile (in log latency, between bounds)."""


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
