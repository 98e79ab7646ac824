"""The fluid level's serving arithmetic: a site's pieces of one `advance_to` through the
chain, and the state the flows carry from one call to the next (`_Flows`); times in s,
token rates in tokens/s, power in W.

- **Waiting.** An arrival waits when all c slots are busy, C = P(n >= c) (Erlang C of the
  chain; M/M/1 for one slot and a constant iteration time), then for an exponential time
  of rate theta = (x_cap - x) / (E[out] k), k = (ca^2 + cs^2) / 2 the Allen-Cunneen factor
  (cs^2 of the output tokens from the token sample, ca^2 = 1). A queue built only by
  fluctuations over the time T the slots have been near full (C > 1e-3) holds about
  sigma sqrt(T) requests (sigma^2 = 2 k lambda), which bounds the mean wait by
  sqrt(4 k lambda T / pi) E[out] / x_cap: near saturation a queue does not reach its
  stationary size within minutes. Not admitted within `timeout_s`: dropped, C
  exp(-theta timeout_s) of the arrivals.
- **Memory**: `memory`.
- **Power** of a piece at a site: R x E[power(n / R) - power_w[0]] over the chain (the
  substeps of a piece computed one after another), not the power at
  the mean batch (power is concave); constant over the piece from its start, so the
  model's energy is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel
from sim.serving.fluid.chain import LOAD_GRID, PoolTable, _lerp, _locate, pool_table
from sim.serving.fluid.latency import _LOG_RATES, RATE_GRID_PER_S, _Latency, _locate_log
from sim.serving.fluid.memory import _SETTLED, _Carried, _sequential
from sim.serving.fluid.percentiles import _MIN_WAIT_PROB, _Part, _Queued, _Stationary
from sim.serving.sources import RequestSource

_QUEUEING = 1e-3
"""A wait probability above which a queue can build up (the exposure of the slots)."""


@dataclass
class _SiteResult:
    """What one site did in each piece of an `advance_to` (arrays over pieces)."""

    site: int
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
    """bool: pieces with more than the first component (computed one after another)."""


class _Flows:
    """The service's flows at its sites (module docstring): what each site serves of its
    share of the arrivals in the pieces of an `advance_to` (`serve`), and the state
    carried between calls: sequences in flight, queued output tokens and requests, how
    long the slots have been near full (s)."""

    def __init__(
        self,
        source: RequestSource,
        slo: SloConfig,
        timeout_s: float,
        rtt_s: np.ndarray,
    ):
        self.source = source
        self.slo = slo
        self.timeout_s = timeout_s
        self.rtt_s = rtt_s
        """Round trip from the origin to each site, s."""
        sites = len(rtt_s)
        self.in_flight = np.zeros(sites)
        """Sequences in flight at each site (the state the batch relaxes from)."""
        self.exposed_s = np.zeros(sites)
        """How long each site's slots have been near full (at the current time), s."""
        self.backlog_tokens = np.zeros(sites)
        """Output tokens queued at each site (the fluid backlog's work)."""
        self.backlog = np.zeros(sites)
        """Requests queued at each site."""
        out = np.asarray(source.tokens.output_sample, dtype=float)
        cs2 = float(np.var(out) / np.mean(out) ** 2) if len(out) else 1.0
        self.ac = (1.0 + cs2) / 2.0
        """Allen-Cunneen factor (ca^2 + cs^2) / 2, Poisson arrivals (ca^2 = 1)."""
        self.mean_out = float(source.tokens.mean_output)
        """Output tokens a queued request is expected to generate."""
        self._latencies: dict[tuple[ReplicaModel, float], _Latency] = {}

    def resize(self, t_s: float, site: int, before: int, ready: int, model: ReplicaModel) -> float:
        """From `t_s`, `site` goes from `before` to `ready` replicas of `model`: the surplus
        replicas are freed at once with their share of the batch, and the backlog past
        what the new capacity admits within `timeout_s` is shed. Returns the requests
        shed."""
        if ready < before:
            self.in_flight[site] *= ready / before
        self.in_flight[site] = min(self.in_flight[site], ready * model.slots)
        most = pool_table(model, ready).capacity_tokens_per_s * self.timeout_s if ready else 0.0
        excess = max(self.backlog_tokens[site] - most, 0.0)
        if excess > 0:
            shed = self.backlog[site] * excess / self.backlog_tokens[site]
            self.backlog[site] -= shed
            self.backlog_tokens[site] -= excess
            return float(shed)
        return 0.0

    def clear(self) -> float:
        """Empty every queue and batch (the horizon); returns the requests they held."""
        left = float(self.backlog.sum() + self.in_flight.sum())
        self.backlog[:] = 0.0
        self.backlog_tokens[:] = 0.0
        self.in_flight[:] = 0.0
        return left

    def _latency(self, site: int, model: ReplicaModel) -> _Latency:
        key = (model, float(self.rtt_s[site]))
        if key not in self._latencies:
            self._latencies[key] = _Latency(
                model, key[1], self.source.tokens.input_sample, self.slo, self.timeout_s
            )
        return self._latencies[key]

    def serve(
        self, site: int, model: ReplicaModel, r: int, dur: np.ndarray, a: np.ndarray, o: np.ndarray
    ) -> _SiteResult:
        """The pieces of length `dur` (s) at `site` with `a` arrivals of `o` output tokens:
        the chain at each piece's load in one pass, except the pieces with a backlog or a
        batch still moving, which go one after another (`_sequential`)."""
        s = model.slots
        c_slots = r * s
        pool = pool_table(model, r)
        lat = self._latency(site, model)
        cap = pool.capacity_tokens_per_s
        count = len(dur)
        x = o / dur
        lam = a / dur
        e_out = np.where(a > 0, o / np.maximum(a, 1e-300), self.mean_out)
        settled = np.where(x < cap, pool.batch(x), c_slots)
        before = np.concatenate([[self.in_flight[site]], settled[:-1]])
        lag_w = pool.lag_tokens_per_s(before, settled, dur, e_out)
        sequential = (x >= cap) | (lag_w > _SETTLED * cap)
        sequential[0] |= self.backlog_tokens[site] > 0
        full_w = model.power_w[s] - model.power_w[0]
        free_s = dur.copy()
        rho = np.minimum(x / cap, LOAD_GRID[-1])
        busy_s = n_q = v_lo = v_hi = n_lim = dropped = np.zeros(count)
        sub_w: np.ndarray = np.zeros(count)
        sub_n: np.ndarray = np.zeros(count)
        if sequential.any():
            carried = _Carried(
                float(self.in_flight[site]),
                float(self.backlog_tokens[site]),
                float(self.backlog[site]),
            )
            rows, out, subs, carried = _sequential(
                pool, self.timeout_s, carried, dur, a, x, e_out, settled, sequential
            )
            self.in_flight[site], self.backlog_tokens[site], self.backlog[site] = carried
            sequential[:] = False
            sequential[rows] = True
            row = rows[subs[:, 0].astype(np.int64)]
            used, n_sub = subs[:, 1], subs[:, 2]
            per_w, per_n = _nodes(pool, n_sub)
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
            self.in_flight[site] = settled[-1]
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
                4.0 * self.ac * lam[waits] * np.maximum(exposure_s[waits], 1e-9) / math.pi
            )
            theta[waits] = (slack / self.ac + cap / np.maximum(sigma, 1e-300)) / e_out[waits]
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
            site=site,
            served=served,
            dropped=lost,
            tokens=served * e_out,
            slo_met=met_all,
            extra_w=extra_w,
            in_flight=in_flight,
            parts=parts,
            mixed=sequential,
        )

    def _exposure(self, site: int, c: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """How long, at the middle of each piece, the site's slots have been near full
        (consecutive pieces with a wait probability above _QUEUEING), s."""
        busy = c > _QUEUEING
        if not busy.any():
            self.exposed_s[site] = 0.0
            return np.zeros(len(dur))
        end = np.cumsum(dur)
        start = end - dur
        last_idle = np.maximum.accumulate(np.where(busy, -np.inf, end))
        since = np.where(np.isfinite(last_idle), last_idle, -self.exposed_s[site])
        self.exposed_s[site] = end[-1] - since[-1] if busy[-1] else 0.0
        return np.where(busy, start - since + dur / 2, 0.0)


def _nodes(pool: PoolTable, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At mean batches `batch` (sequences in the pool): extra power (W) and sequences in
    flight per replica (the chain whose mean batch that is; full past the slots)."""
    s = pool.model.slots
    over = batch >= pool.replicas * s
    i, w = _locate(LOAD_GRID, pool.load(batch))
    extra_w = np.where(
        over, pool.model.power_w[s] - pool.model.power_w[0], _lerp(pool.extra_w, i, w)
    )
    return extra_w, np.where(over, s, _lerp(pool.in_flight, i, w))
