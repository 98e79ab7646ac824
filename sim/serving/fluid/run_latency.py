"""The run-wide p99s of the fluid level: every step's mixture of latency distributions
weighted by its requests, accumulated per `_Latency` (TTFT) and per `PoolTable` (time per
output token), and inverted at the end of the run (latencies in s).

- The TTFT mixture is kept on a fixed log grid of latencies (`LATENCY_GRID_S`, 1 ms to
  1 h, 400 bins): the chain's requests by the decay rate of their wait, those with
  uniform waits (a backlog) as ramps of the waits' CDF; the tpot mixture on the
  iteration times of the pool's model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.serving.fluid.chain import LOAD_GRID, PoolTable
from sim.serving.fluid.latency import (
    _LOG_LATENCIES,
    _LOG_RATES,
    LATENCY_GRID_S,
    RATE_GRID_PER_S,
    _Latency,
    _locate_log,
)
from sim.serving.fluid.percentiles import _MIN_WAIT_PROB, _Part, _Stationary


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
    """Run-wide tpot mixture of one `PoolTable`: requests served by the chain by load and
    requests in full batches."""

    by_load: np.ndarray = field(default_factory=lambda: np.zeros(len(LOAD_GRID)))
    full: float = 0.0


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


class _RunLatency:
    """The run-wide TTFT and tpot mixtures of the requests served (`add` a step's parts),
    and their 99th percentiles, s."""

    def __init__(self) -> None:
        self._ttft_acc: dict[_Latency, _TtftAcc] = {}
        self._tpot_acc: dict[PoolTable, _TpotAcc] = {}

    def add(self, parts: list[tuple[np.ndarray, _Part]]) -> None:
        """Add the components `parts` (requests served, component) to the mixtures."""
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
                tpot.full += float(n.sum())

    def ttft_p99_s(self) -> float:
        """The run's 99th percentile time to first token, s (NaN: nothing served)."""
        cdf, total = self._ttft_cdf()
        if total <= 0:
            return math.nan
        return _invert_grid(cdf / total, 0.99)

    def _ttft_cdf(self) -> tuple[np.ndarray, float]:
        """(requests served with TTFT <= each of LATENCY_GRID_S, all requests served)."""
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
        return cdf, total

    def tpot_p99_s(self) -> float:
        """The run's 99th percentile time per output token, s (NaN: nothing served)."""
        v, m = self._tpot_masses()
        if m.sum() <= 0:
            return math.nan
        order = np.argsort(v, kind="stable")
        cum = np.cumsum(m[order])
        return float(v[order][np.searchsorted(cum, 0.99 * cum[-1])])

    def _tpot_masses(self) -> tuple[np.ndarray, np.ndarray]:
        """(time per output token s, requests served at it), unordered."""
        values, masses = [np.zeros(0)], [np.zeros(0)]
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
        return np.concatenate(values), np.concatenate(masses)

    def mixtures_ms(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The run's served requests' `ttft_ms` and `tpot_ms` as (latencies ms, requests)
        (`ServiceSim.latency_mixtures`): the TTFT mixture's mass in each bin of
        LATENCY_GRID_S spread evenly in log latency over `_SUB_BINS` points inside it (as
        `_invert_grid` reads it: a pooled percentile is within half a sub-bin, 0.12%, of
        the interpolated one), the mass at or below the grid's first point on it; the tpot
        mixture as it is."""
        cdf, _ = self._ttft_cdf()
        mass = np.diff(np.maximum.accumulate(np.maximum(cdf, 0.0)), prepend=0.0)
        inside = (np.arange(_SUB_BINS) + 0.5) / _SUB_BINS
        log_ms = _LOG_LATENCIES[:-1, None] + inside[None, :] * np.diff(_LOG_LATENCIES)[:, None]
        ttft_ms = np.concatenate([LATENCY_GRID_S[:1], np.exp(log_ms).ravel()]) * 1e3
        ttft_n = np.concatenate([mass[:1], np.repeat(mass[1:] / _SUB_BINS, _SUB_BINS)])
        tpot_s, tpot_n = self._tpot_masses()
        return {
            "ttft_ms": (ttft_ms, ttft_n),
            "tpot_ms": (1e3 * tpot_s, np.maximum(tpot_n, 0.0)),
        }


_SUB_BINS = 16
"""Points a bin of LATENCY_GRID_S (3.8% wide) is spread over in `mixtures_ms`."""
