"""The fluid fidelity's `ServiceSim`, `Fluid`: a service's requests as flows, a step at a
time (the definitions: the package docstring), from the chain (`chain`), the latency
tables (`latency`), the fine pass (`burst`) and the percentiles (`percentiles`); times in
s, token rates in tokens/s, power in W, energy in kWh as `ServiceSim` reports it.

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
- **Power** of a piece at a site: R x E[power(n / R) - power_w[0]] over the chain (the
  substeps of a piece computed one after another, the fine pass's bins), not the power at
  the mean batch (power is concave); constant over the piece from its start, so the
  model's energy is exact; an `advance_to` reports its changes in one call (arrays).

Requests count in the step they arrived in, served or dropped when they arrive (the wait
they will have is known then); a backlog shed later (fewer replicas) and the requests
queued or in flight at `close` are taken back from the latest steps.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.models.llm_replica import ReplicaModel
from sim.serving.fluid.burst import (
    _PASS_BIN_S,
    _PASS_LEVELS,
    _PASS_NODES,
    _PASS_QUIET_S,
    _PASS_SPLIT,
    _PASS_SPLITS,
    _BatchPass,
    _excess_dispersion,
    _uniform_mixture_quantiles,
)
from sim.serving.fluid.chain import LOAD_GRID, PoolTable, _lerp, _locate, pool_table
from sim.serving.fluid.latency import (
    _LOG_RATES,
    LATENCY_GRID_S,
    RATE_GRID_PER_S,
    _Latency,
    _locate_log,
)
from sim.serving.fluid.percentiles import (
    _MIN_WAIT_PROB,
    _invert_grid,
    _mixture_pct,
    _Part,
    _Passed,
    _Queued,
    _Stationary,
    _TpotAcc,
    _TtftAcc,
)
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceSim

_SUBSTEPS = 8
"""Substeps of a piece over which the batch's relaxation is linearised."""
_QUEUEING = 1e-3
"""A wait probability above which a queue can build up (the exposure of the slots)."""
_SETTLED = 0.01
"""A piece whose batch, moving towards its fixed point, lags the load by less than this
share of the capacity in tokens per second is taken as settled (no memory needed)."""


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
        self._served_site = np.zeros((k, sites))
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
            self._take_back(shed, to_dropped=True, site=site)
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
            self._served_site[k0 : k0 + len(dur), site] += res.served
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
            if results:  # no replica ready anywhere: every arrival was dropped
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

    def source_changed(self, t_s: float) -> None:
        """The fluid level reads no arrival ahead of its time; a directive changes the
        output tokens the backlog's requests are expected to generate."""
        self.advance_to(t_s)
        self._mean_out = float(self.source.tokens.mean_output) * self.source.output_factor(t_s)

    def served_by_site(self) -> np.ndarray:
        return self._served_site.copy()

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

    def _take_back(self, count: float, to_dropped: bool, site: int | None = None) -> None:
        """Move `count` served requests of the latest steps to dropped (or unfinished):
        `site`'s (its backlog shed), as far as it served them; else every site's in
        proportion."""
        k = min(int(self._t // self.step_s), self.n_steps - 1)
        while count > 1e-12 and k >= 0:
            take = min(count, self._served[k])
            if take > 0:
                keep = 1 - take / self._served[k]
                self._tokens[k] *= keep
                self._slo_met[k] = min(self._slo_met[k], self._served[k] - take)
                self._take_back_site(k, take, keep, site)
                self._served[k] -= take
                if to_dropped:
                    self._dropped[k] += take
                else:
                    self._unfinished += take
                count -= take
            k -= 1

    def _take_back_site(self, k: int, take: float, keep: float, site: int | None) -> None:
        """Step `k`'s requests served per site less `take` (a share `1 - keep` of all):
        from `site` first, the rest from every site in proportion."""
        row = self._served_site[k]
        if site is not None:
            own = min(take, float(row[site]))
            row[site] -= own
            rest = float(row.sum())
            take -= own
            keep = 1.0 - take / rest if rest > 0 else 1.0
        row *= keep

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
