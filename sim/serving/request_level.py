"""The request level: every request of a service simulated, from its arrival to its last
token (the `ServiceSim` contract and its definitions: `sim.serving.service_sim`).

Each replica under continuous batching is a processor-sharing server: with `n` sequences
in flight every sequence gets one output token per iteration of `model.iter_s[n]` s. A
replica keeps a virtual clock `V`, the iterations elapsed (dV/dt = 1 / iter_s[n]); a
request admitted at virtual time `V0` with `out` output tokens finishes when `V` reaches
`V0 + out`, so a heap of virtual finish times per replica makes every arrival and
completion O(log n) whatever the batch. At most `model.slots` sequences are in flight;
the others wait in the replica's FIFO queue.

Events: the arrivals (read from the source an hour at a time) merged with a calendar
(heap) of each replica's next completion time, entries invalidated lazily by a version
number. `advance_to` is one loop over these events in time order; there is no event per
token or per iteration.

Routing: a request goes to a site by smooth weighted round-robin over the shares
(deterministic: each site's credit grows by its share per request, the site with the
most credit takes it and pays the total; ties to the lowest index), then to the
admitting replica of that site with the fewest requests (in flight + queued; ties to
the lowest index). Sites without an admitting replica take none; with none anywhere the
request is dropped at its arrival. A request at the head of its queue when a slot frees
at `t` is dropped if it has waited more than `timeout_s`; at the horizon the queued ones
that have waited longer are dropped, the others and those in service are unfinished.

Scale-down takes the replicas with the fewest requests (ties: the newest) out of
admission: their queued requests go to the site's other replicas by the same rule, in
arrival order (dropped if the site keeps none), and they drain their batch with the
model they had (a later cap change does not touch them, so the drain time `configure`
returned holds). Scale-up adds empty replicas. A new model (a cap change) applies to
the admitting replicas of the site from `t_s`.

Per-request records live in typed arrays (`array.array`), one element per request; the
times to first token and per output token are computed from them when a table is asked
for (`ttft_s` = admission - arrival + the admitting model's `prefill_s(input_tokens)` +
`rtt_s[site]`; `tpot_s` = (end - admission) / output tokens).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import deque
from heapq import heappop, heappush

import numpy as np
import pandas as pd

from sim.models.llm_replica import ReplicaModel
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceSim

__all__ = ["STATES", "RequestLevel"]

STATES = ("served", "dropped", "unfinished")
"""Categories of `RequestLevel.request_table`'s `state`."""

_UNFINISHED, _SERVED, _DROPPED = 0, 1, 2
"""Codes of the per-request state array (0 also marks a request still in progress)."""
_CATEGORY_OF_CODE = np.array([2, 0, 1], dtype=np.int8)
"""State code -> index into `STATES`."""

_CHUNK_S = 3600.0
"""Arrivals are read from the source this many seconds at a time."""


class _Replica:
    """One replica's state (the hot loop reads and writes these attributes directly)."""

    __slots__ = (
        "site",
        "pos",
        "v",
        "tv_s",
        "n",
        "slots",
        "iter_s",
        "power_w",
        "mi",
        "heap",
        "queue",
        "ver",
    )

    def __init__(
        self,
        site: int,
        pos: int,
        t_s: float,
        tables: tuple[list[float], list[float]],
        slots: int,
        mi: int,
    ):
        self.site = site
        self.pos = pos
        """Index among its site's admitting replicas; -1 once draining."""
        self.v = 0.0
        """Virtual clock: iterations elapsed at `tv_s`."""
        self.tv_s = t_s
        """Time the virtual clock was last brought up to date, s."""
        self.n = 0
        """Sequences in flight."""
        self.slots = slots
        self.iter_s: list[float] = tables[0]
        """Iteration time by sequences in flight, s."""
        self.power_w: list[float] = tables[1]
        """GPU power by sequences in flight, W."""
        self.mi = mi
        """Index of its model in `RequestLevel._models`."""
        self.heap: list[tuple[float, int]] = []
        """(virtual finish time, request index) of the requests in flight."""
        self.queue: deque[int] = deque()
        """Indices of the requests waiting for a slot, in arrival order."""
        self.ver = -1
        """Version of its live calendar entry."""


class _Site:
    """One of the service's sites: its admitting and draining replicas, its power."""

    __slots__ = ("adm", "loads", "draining", "model", "mi", "extra_w", "busy")

    def __init__(self) -> None:
        self.adm: list[_Replica] = []
        """Admitting replicas, oldest first."""
        self.loads: list[int] = []
        """Requests (in flight + queued) of each admitting replica."""
        self.draining: list[_Replica] = []
        """Replicas out of admission still serving their batch."""
        self.model: ReplicaModel | None = None
        self.mi = -1
        self.extra_w = 0.0
        """Sum over its replicas of power_w[n] - power_w[0], W."""
        self.busy = 0
        """Sequences in flight over its replicas."""


class RequestLevel(ServiceSim):
    """Every request simulated: queues, continuous batching as processor sharing, timeouts,
    draining replicas (module docstring)."""

    def setup(self) -> None:
        self._sites = [_Site() for _ in range(len(self.rtt_s))]
        self._models: list[ReplicaModel] = []
        self._tables: list[tuple[list[float], list[float]]] = []
        """Each model's `iter_s` and `power_w` as lists (the hot loop indexes them)."""
        self._cal: list[tuple[float, int, _Replica]] = []
        """Calendar: (next completion time s, version, replica)."""
        self._seq = 0
        """Last version handed out."""
        self._now_s = 0.0
        self._shares: tuple[float, ...] | None = None
        self._act: list[int] = []
        """Sites that take requests, and their weights and credits (round-robin)."""
        self._w: list[float] = []
        self._cred: list[float] = []
        # Per-request records, index = arrival order.
        self._arrival_s = array("d")
        self._input = array("q")
        self._output = array("q")
        self._site = array("i")
        """Site the request was sent to, -1 if none."""
        self._admit_s = array("d")
        self._end_s = array("d")
        self._state = array("b")
        self._mid = array("i")
        """Index of the model that admitted it, -1 if not admitted."""
        # The chunk of arrivals being read.
        self._fetched_s = 0.0
        self._chunk_t: list[float] = []
        self._chunk_out: list[int] = []
        self._k = 0
        self._base = 0
        self._n = 0
        """Requests arrived so far."""

    # -- the contract --------------------------------------------------------------------

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        self.advance_to(t_s)
        st = self._sites[site]
        if st.model is not model:
            st.model, st.mi = model, self._model_index(model)
            for r in st.adm:
                self._touch(r, t_s)
                r.iter_s, r.power_w = self._tables_for(st.mi, r.n)
                r.slots, r.mi = model.slots, st.mi
                self._fill(st, r, t_s)
                self._schedule(r)
        while len(st.adm) < ready:
            st.adm.append(_Replica(site, len(st.adm), t_s, self._tables[st.mi], model.slots, st.mi))
            st.loads.append(0)
        free_s = t_s
        surplus = len(st.adm) - ready
        if surplus > 0:
            by_load = sorted(range(len(st.adm)), key=lambda p: (st.loads[p], -p))
            out = set(by_load[:surplus])
            leaving = [r for p, r in enumerate(st.adm) if p in out]
            st.adm = [r for p, r in enumerate(st.adm) if p not in out]
            st.loads = [st.loads[r.pos] for r in st.adm]
            for p, r in enumerate(st.adm):
                r.pos = p
            moved = sorted(j for r in leaving for j in r.queue)
            for r in leaving:
                r.queue.clear()
                r.pos = -1
                if r.n:
                    st.draining.append(r)
                    free_s = max(free_s, self._drain_end_s(r))
            for j in moved:
                self._dispatch(st, j, t_s)
        self._report_power(site, t_s)
        self._reweight()
        return free_s

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        self.advance_to(t_s)
        if shares is None:
            self._shares = None
        else:
            s = np.asarray(shares, dtype=float)
            if s.shape != (len(self._sites),) or not np.all(np.isfinite(s) & (s >= 0)):
                raise ValueError(
                    f"shares must be {len(self._sites)} finite values >= 0, got {shares!r}"
                )
            self._shares = tuple(s.tolist())
        self._reweight()

    def advance_to(self, t_s: float) -> None:
        """Serve up to `t_s`: arrivals before it, completions up to it."""
        cal = self._cal
        sites = self._sites
        arrival_s, output, admit_s, end_s = (
            self._arrival_s,
            self._output,
            self._admit_s,
            self._end_s,
        )
        state, site_of, mid = self._state, self._site, self._mid
        on_power = self.on_power
        timeout_s = self.timeout_s
        act, w, cred = self._act, self._w, self._cred
        n_act = len(act)
        total_w = sum(w)
        s0 = act[0] if act else -1
        ct, co, k, base = self._chunk_t, self._chunk_out, self._k, self._base
        n_chunk = len(ct)
        seq = self._seq
        inf = math.inf
        while True:
            if k < n_chunk:
                ta = ct[k]
            elif self._fetched_s < t_s and self._fetched_s < self.horizon_s:
                self._fetch()
                ct, co, k, base = self._chunk_t, self._chunk_out, 0, self._base
                n_chunk = len(ct)
                continue
            else:
                ta = inf
            tc = cal[0][0] if cal else inf
            if tc <= ta:
                # A replica's next completion.
                if tc > t_s:
                    break
                _, ver, r = heappop(cal)
                if ver != r.ver:
                    continue
                heap = r.heap
                v = heap[0][0]
                n0 = n = r.n
                while heap and heap[0][0] <= v:
                    j = heappop(heap)[1]
                    end_s[j] = tc
                    state[j] = _SERVED
                    n -= 1
                freed = n0 - n
                queue = r.queue
                if queue:
                    slots = r.slots
                    while queue and n < slots:
                        j = queue.popleft()
                        if tc - arrival_s[j] > timeout_s:
                            state[j] = _DROPPED
                            freed += 1
                            continue
                        heappush(heap, (v + output[j], j))
                        admit_s[j] = tc
                        mid[j] = r.mi
                        n += 1
                r.n = n
                r.v = v
                r.tv_s = tc
                st = sites[r.site]
                if r.pos >= 0:
                    st.loads[r.pos] -= freed
                if n != n0:
                    pw = r.power_w
                    st.busy += n - n0
                    e = st.extra_w + (pw[n] - pw[n0]) if st.busy else 0.0
                    st.extra_w = e
                    on_power(r.site, tc, e)
                if heap:
                    seq += 1
                    r.ver = seq
                    heappush(cal, (tc + (heap[0][0] - v) * r.iter_s[n], seq, r))
                elif r.pos < 0:
                    st.draining.remove(r)
            else:
                # An arrival.
                if ta >= t_s:
                    break
                i = base + k
                out = co[k]
                k += 1
                if n_act == 1:
                    s = s0
                elif n_act == 0:
                    state[i] = _DROPPED
                    continue
                else:
                    best, top = 0, -inf
                    for x in range(n_act):
                        c = cred[x] + w[x]
                        cred[x] = c
                        if c > top:
                            best, top = x, c
                    cred[best] = top - total_w
                    s = act[best]
                site_of[i] = s
                st = sites[s]
                loads = st.loads
                p = loads.index(min(loads))
                loads[p] += 1
                r = st.adm[p]
                n = r.n
                if n < r.slots:
                    it = r.iter_s
                    v = r.v + (ta - r.tv_s) / it[n]
                    r.v = v
                    r.tv_s = ta
                    heap = r.heap
                    heappush(heap, (v + out, i))
                    n += 1
                    r.n = n
                    admit_s[i] = ta
                    mid[i] = r.mi
                    pw = r.power_w
                    e = st.extra_w + (pw[n] - pw[n - 1])
                    st.extra_w = e
                    st.busy += 1
                    on_power(s, ta, e)
                    d = heap[0][0] - v
                    seq += 1
                    r.ver = seq
                    heappush(cal, (ta + (d if d > 0.0 else 0.0) * it[n], seq, r))
                else:
                    r.queue.append(i)
        self._k = k
        self._n = base + k
        self._seq = seq
        self._now_s = max(self._now_s, t_s)

    def source_changed(self, t_s: float) -> None:
        """Forget the arrivals read ahead from `t_s` on (their records too), to read them
        again from the source."""
        self.advance_to(t_s)
        first = self._base + self._k
        for records in (
            self._arrival_s,
            self._input,
            self._output,
            self._site,
            self._admit_s,
            self._end_s,
            self._state,
            self._mid,
        ):
            del records[first:]
        self._chunk_t, self._chunk_out = [], []
        self._k, self._base = 0, first
        self._fetched_s = min(self._fetched_s, t_s)

    def live(self) -> LiveStats:
        """The last completed step's requests as far as known now: the time to first token
        of those admitted, the time per output token of those served, the SLO attainment
        over those served or dropped (NaN with none); queue and batch now."""
        queued = float(sum(len(r.queue) for st in self._sites for r in st.adm))
        in_flight = float(sum(st.busy for st in self._sites))
        k = math.floor(self._now_s / self.step_s) - 1
        if k < 0:
            return LiveStats(0.0, queued, in_flight, math.nan, math.nan, math.nan, 0.0)
        lo = bisect_left(self._arrival_s, k * self.step_s, 0, self._n)
        hi = bisect_left(self._arrival_s, (k + 1) * self.step_s, lo, self._n)
        rec = self._records(lo, hi)
        served = rec["state"] == _SERVED
        decided = served | (rec["state"] == _DROPPED)
        ttft_ms, tpot_ms = rec["ttft_ms"], rec["tpot_ms"]
        admitted = np.isfinite(ttft_ms)
        met = int(np.count_nonzero(self._met(ttft_ms[served], tpot_ms[served])))
        n_decided = int(np.count_nonzero(decided))
        return LiveStats(
            rate_per_s=(hi - lo) / self.step_s,
            queued=queued,
            in_flight=in_flight,
            ttft_p99_ms=_p99(ttft_ms[admitted]),
            tpot_p99_ms=_p99(tpot_ms[served]),
            slo_attainment=met / n_decided if n_decided else math.nan,
            dropped=float(np.count_nonzero(rec["state"] == _DROPPED)),
        )

    def close(self, horizon_s: float) -> None:
        self.advance_to(horizon_s)
        for st in self._sites:
            for r in st.adm:
                for j in r.queue:
                    if horizon_s - self._arrival_s[j] > self.timeout_s:
                        self._state[j] = _DROPPED

    def step_table(self) -> pd.DataFrame:
        rec = self._records(0, self._n)
        n = self.n_steps
        step = np.clip(np.floor(rec["arrival_s"] / self.step_s), 0, n - 1).astype(np.int64)
        served = rec["state"] == _SERVED
        s_step = step[served]
        ttft, tpot = rec["ttft_ms"][served], rec["tpot_ms"][served]
        met = self._met(ttft, tpot)
        ttft_p = _grouped_percentiles(s_step, ttft, n, (50.0, 99.0))
        tpot_p = _grouped_percentiles(s_step, tpot, n, (50.0, 99.0))
        columns = (
            np.arange(n),
            np.bincount(step, minlength=n),
            np.bincount(s_step, minlength=n),
            np.bincount(step[rec["state"] == _DROPPED], minlength=n),
            np.bincount(s_step, weights=rec["output_tokens"][served], minlength=n).astype(np.int64),
            ttft_p[0],
            ttft_p[1],
            tpot_p[0],
            tpot_p[1],
            np.bincount(s_step[met], minlength=n),
        )
        return pd.DataFrame(dict(zip(STEP_COLUMNS, columns, strict=True)))

    def summary(self) -> dict[str, float]:
        rec = self._records(0, self._n)
        served = rec["state"] == _SERVED
        ttft, tpot = rec["ttft_ms"][served], rec["tpot_ms"][served]
        return {
            "requests_total": float(self._n),
            "requests_served": float(np.count_nonzero(served)),
            "requests_dropped": float(np.count_nonzero(rec["state"] == _DROPPED)),
            "requests_unfinished": float(np.count_nonzero(rec["state"] == _UNFINISHED)),
            "slo_met": float(np.count_nonzero(self._met(ttft, tpot))),
            "tokens_generated": float(rec["output_tokens"][served].sum()),
            "ttft_p99_ms": _p99(ttft),
            "tpot_p99_ms": _p99(tpot),
        }

    def served_by_site(self) -> np.ndarray:
        rec = self._records(0, self._n)
        served = rec["state"] == _SERVED
        step = np.clip(np.floor(rec["arrival_s"][served] / self.step_s), 0, self.n_steps - 1)
        sites = len(self._sites)
        flat = step.astype(np.int64) * sites + rec["site"][served]
        counts = np.bincount(flat, minlength=self.n_steps * sites)
        return counts.reshape(self.n_steps, sites).astype(float)

    def request_table(self) -> pd.DataFrame:
        """One row per arrived request: `service`, `arrival_s`, `site` (-1: none), token
        counts, `state` ('served', 'dropped', 'unfinished'; before `close`, unfinished means
        still in progress), `ttft_ms` (NaN if never admitted), `tpot_ms` and `end_s` (NaN
        unless served)."""
        rec = self._records(0, self._n)
        m = self._n
        return pd.DataFrame(
            {
                "service": pd.Categorical.from_codes(np.zeros(m, np.int8), [self.name]),
                "arrival_s": rec["arrival_s"],
                "site": rec["site"],
                "input_tokens": rec["input_tokens"],
                "output_tokens": rec["output_tokens"],
                "state": pd.Categorical.from_codes(_CATEGORY_OF_CODE[rec["state"]], STATES),
                "ttft_ms": rec["ttft_ms"],
                "tpot_ms": rec["tpot_ms"],
                "end_s": rec["end_s"],
            }
        )

    # -- helpers -------------------------------------------------------------------------

    def _fetch(self) -> None:
        """Read the next chunk of arrivals and open their records."""
        t0 = self._fetched_s
        self._fetched_s = min(t0 + _CHUNK_S, self.horizon_s)
        tab = self.source.requests_between(t0, self._fetched_s)
        m = len(tab.arrival_s)
        self._base = len(self._arrival_s)
        self._arrival_s.frombytes(np.ascontiguousarray(tab.arrival_s, np.float64).tobytes())
        self._input.frombytes(np.ascontiguousarray(tab.input_tokens, np.int64).tobytes())
        self._output.frombytes(np.ascontiguousarray(tab.output_tokens, np.int64).tobytes())
        minus_one = np.full(m, -1, np.intc).tobytes()
        nan = np.full(m, np.nan).tobytes()
        self._site.frombytes(minus_one)
        self._mid.frombytes(minus_one)
        self._admit_s.frombytes(nan)
        self._end_s.frombytes(nan)
        self._state.frombytes(np.full(m, _UNFINISHED, np.int8).tobytes())
        self._chunk_t = tab.arrival_s.tolist()
        self._chunk_out = tab.output_tokens.tolist()
        self._k = 0

    def _model_index(self, model: ReplicaModel) -> int:
        """Index of `model` in `_models` (added on first sight, with its tables as lists)."""
        for mi, known in enumerate(self._models):
            if known is model:
                return mi
        self._models.append(model)
        self._tables.append((model.iter_s.tolist(), model.power_w.tolist()))
        return len(self._models) - 1

    def _tables_for(self, mi: int, n: int) -> tuple[list[float], list[float]]:
        """Iteration time and power lists of model `mi` for a replica with `n` in flight: past
        the model's slots (a new model with fewer slots than a batch) the batch runs at the
        full batch's token rate and power."""
        iter_s, power_w = self._tables[mi]
        slots = self._models[mi].slots
        if n <= slots:
            return iter_s, power_w
        extra = range(slots + 1, n + 1)
        return (
            iter_s + [iter_s[slots] * m / slots for m in extra],
            power_w + [power_w[slots]] * len(extra),
        )

    @staticmethod
    def _touch(r: _Replica, t_s: float) -> None:
        """Bring the replica's virtual clock up to `t_s`."""
        r.v += (t_s - r.tv_s) / r.iter_s[r.n]
        r.tv_s = t_s

    def _schedule(self, r: _Replica) -> None:
        """Put the replica's next completion in the calendar (the same expression as the
        event loop's, so the drain time of `_drain_end_s` is met exactly)."""
        if r.heap:
            d = r.heap[0][0] - r.v
            self._seq += 1
            r.ver = self._seq
            heappush(self._cal, (r.tv_s + (d if d > 0.0 else 0.0) * r.iter_s[r.n], self._seq, r))

    def _admit(self, r: _Replica, j: int, t_s: float) -> None:
        """Admit request `j` on `r` (its clock at `t_s`); the caller reschedules."""
        heappush(r.heap, (r.v + self._output[j], j))
        r.n += 1
        self._admit_s[j] = t_s
        self._mid[j] = r.mi

    def _fill(self, st: _Site, r: _Replica, t_s: float) -> None:
        """Admit from the admitting replica `r`'s queue at `t_s` while it has free slots,
        dropping the requests that waited more than the timeout."""
        while r.queue and r.n < r.slots:
            j = r.queue.popleft()
            if t_s - self._arrival_s[j] > self.timeout_s:
                self._state[j] = _DROPPED
                st.loads[r.pos] -= 1
            else:
                self._admit(r, j, t_s)

    def _dispatch(self, st: _Site, j: int, t_s: float) -> None:
        """Send queued request `j` to the site's admitting replica with the fewest requests at
        `t_s` (dropped if the site has none, or if admitted after more than the timeout)."""
        if not st.adm:
            self._state[j] = _DROPPED
            return
        p = st.loads.index(min(st.loads))
        r = st.adm[p]
        if r.n >= r.slots:
            r.queue.append(j)
            st.loads[p] += 1
        elif t_s - self._arrival_s[j] > self.timeout_s:
            self._state[j] = _DROPPED
        else:
            st.loads[p] += 1
            self._touch(r, t_s)
            self._admit(r, j, t_s)
            self._schedule(r)

    @staticmethod
    def _drain_end_s(r: _Replica) -> float:
        """When the replica, admitting no more, finishes its last request, s: its virtual
        finish times in order, the batch shrinking by one at each (the event loop's
        arithmetic, step by step)."""
        t, v, n, it = r.tv_s, r.v, r.n, r.iter_s
        for vf, _ in sorted(r.heap):
            d = vf - v
            t = t + (d if d > 0.0 else 0.0) * it[n]
            v = vf
            n -= 1
        return t

    def _report_power(self, site: int, t_s: float) -> None:
        """Recount the site's extra power and batch; report the power if it changed."""
        st = self._sites[site]
        reps = st.adm + st.draining
        e = sum(r.power_w[r.n] - r.power_w[0] for r in reps)
        st.busy = sum(r.n for r in reps)
        if e != st.extra_w:
            st.extra_w = e
            self.on_power(site, t_s, e)

    def _reweight(self) -> None:
        """Round-robin weights: the shares of the sites with an admitting replica (None, or
        none of those with a share: proportional to the admitting replicas); credits restart
        when the weights change."""
        ready = [float(len(st.adm)) for st in self._sites]
        w = ready
        if self._shares is not None:
            shared = [sh if k > 0 else 0.0 for sh, k in zip(self._shares, ready, strict=True)]
            if sum(shared) > 0:
                w = shared
        act = [s for s, x in enumerate(w) if x > 0]
        weights = [w[s] for s in act]
        if act != self._act or weights != self._w:
            self._act, self._w, self._cred = act, weights, [0.0] * len(act)

    def _met(self, ttft_ms: np.ndarray, tpot_ms: np.ndarray) -> np.ndarray:
        """Which requests met the SLO (both latencies within target)."""
        return (ttft_ms <= self.slo.ttft_ms) & (tpot_ms <= self.slo.tpot_ms)

    def _records(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Copies of the records of requests lo..hi-1 and their latencies, ms."""

        def col(a: array, dtype: type) -> np.ndarray:
            return np.frombuffer(a, dtype, hi - lo, lo * a.itemsize).copy()

        rec = {
            "arrival_s": col(self._arrival_s, np.float64),
            "input_tokens": col(self._input, np.int64),
            "output_tokens": col(self._output, np.int64),
            "site": col(self._site, np.intc),
            "admit_s": col(self._admit_s, np.float64),
            "end_s": col(self._end_s, np.float64),
            "state": col(self._state, np.int8),
            "mid": col(self._mid, np.intc),
        }
        prefill_s = np.full(hi - lo, np.nan)
        for mi in np.unique(rec["mid"][rec["mid"] >= 0]):
            sel = rec["mid"] == mi
            prefill_s[sel] = self._models[mi].prefill_s(rec["input_tokens"][sel])
        rtt_s = self.rtt_s[np.maximum(rec["site"], 0)]
        rec["ttft_ms"] = (rec["admit_s"] - rec["arrival_s"] + prefill_s + rtt_s) * 1e3
        rec["tpot_ms"] = (rec["end_s"] - rec["admit_s"]) / rec["output_tokens"] * 1e3
        return rec


def _p99(x: np.ndarray) -> float:
    """99th percentile (linear interpolation, as `np.percentile`), NaN when empty."""
    if not len(x):
        return math.nan
    xs = np.sort(x)
    h = (len(xs) - 1) * 0.99
    lo = int(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def _grouped_percentiles(
    group: np.ndarray, x: np.ndarray, n_groups: int, qs: tuple[float, ...]
) -> list[np.ndarray]:
    """Percentiles `qs` of `x` within each group 0..n_groups-1 (linear interpolation, as
    `np.percentile`; NaN for an empty group)."""
    # Sorted by group then value; the NaN at the end is what an empty group reads.
    xs = np.append(x[np.lexsort((x, group))], np.nan)
    counts = np.bincount(group, minlength=n_groups)
    starts = np.where(counts > 0, np.cumsum(counts) - counts, len(x))
    last = np.maximum(counts - 1, 0)
    out = []
    for q in qs:
        h = last * (q / 100.0)
        lo = np.floor(h).astype(np.int64)
        a, b = xs[starts + lo], xs[starts + np.minimum(lo + 1, last)]
        out.append(a + (h - lo) * (b - a))
    return out
