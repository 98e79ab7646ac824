"""The iteration level's `ServiceSim`, `IterationLevel`: every request of a service through
an engine's iteration schedule (the package docstring); times in s, power in W.

Events: the arrivals (read from the source an hour at a time) merged with a calendar
(heap) of each replica's next event (the end of a mixed iteration, or the first boundary
of a decode epoch where its batch changes), entries invalidated lazily by a version
number. An arrival on a busy replica costs an event only when it moves the replica's next
event earlier (to the end of the iteration in progress).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from heapq import heappop, heappush

import numpy as np
import pandas as pd

from sim.config.services import SchedulerConfig
from sim.serving.iteration_level.fleet import _Fleet
from sim.serving.iteration_level.records import _IterRequests
from sim.serving.request_level.per_request import PerRequestSim
from sim.serving.request_level.records import _DROPPED
from sim.serving.request_level.stats import _request_table
from sim.serving.service_sim import ServiceContext


class IterationLevel(PerRequestSim):
    """Every request through vLLM V1's iteration schedule (package docstring).

    `schedulers`: each deployment's (index `site` of `configure`) scheduler, resolved
    (`SchedulerConfig.resolved`)."""

    _requests: _IterRequests
    _fleet: _Fleet

    def __init__(self, ctx: ServiceContext, schedulers: Sequence[SchedulerConfig]):
        self._schedulers = list(schedulers)
        super().__init__(ctx)

    def setup(self) -> None:
        if len(self._schedulers) != len(self.rtt_s):
            raise ValueError(
                f"schedulers: one per deployment ({len(self.rtt_s)}), got {len(self._schedulers)}"
            )
        super().setup()
        self._requests = _IterRequests()
        self._fleet = _Fleet(self._schedulers, self._requests, self.timeout_s, self.on_power)

    def advance_to(self, t_s: float) -> None:
        """Serve up to `t_s`: arrivals before it, events up to it."""
        fleet, req, router = self._fleet, self._requests, self._router
        cal, sites = fleet.cal, fleet.sites
        state, site_of = req.state, req.site
        act, w, cred = router.act, router.w, router.cred
        n_act = len(act)
        total_w = sum(w)
        s0 = act[0] if act else -1
        ct, k, base = req.chunk_t, req.k, req.base
        n_chunk = len(ct)
        inf = math.inf
        while True:
            if k < n_chunk:
                ta = ct[k]
            elif req.fetched_s < t_s and req.fetched_s < self.horizon_s:
                req.fetch(self.source, self.horizon_s)
                ct, k, base = req.chunk_t, 0, req.base
                n_chunk = len(ct)
                continue
            else:
                ta = inf
            tc = cal[0][0] if cal else inf
            if tc <= ta:
                if tc > t_s:
                    break
                _, ver, r = heappop(cal)
                if ver != r.ver:
                    continue
                # Replicas are independent between arrivals: serve this one's events up to
                # the next arrival at once (the calendar orders them against arrivals only).
                t_next = r.event(tc)
                upto = ta if ta < t_s else t_s
                while 0.0 <= t_next <= upto and t_next < ta:
                    t_next = r.event(t_next)
                fleet.seq += 1
                r.ver = fleet.seq
                r.next_t = t_next
                if t_next >= 0.0:
                    heappush(cal, (t_next, fleet.seq, r))
                continue
            if ta >= t_s:
                break
            i = base + k
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
            loads = st.state.loads
            p = loads.index(min(loads))
            loads[p] += 1
            r = st.adm[p]
            t_next = r.arrive(i, ta)
            if t_next >= 0.0:
                # The event moved: served up to the next arrival, then the calendar entry
                # renewed as `_Fleet.push` does (inline in the hot loop); the old entry is
                # void even when the replica went idle.
                nxt = ct[k] if k < n_chunk else req.fetched_s
                upto = nxt if nxt < t_s else t_s
                while 0.0 <= t_next <= upto and t_next < nxt:
                    t_next = r.event(t_next)
                fleet.seq += 1
                r.ver = fleet.seq
                r.next_t = t_next
                if t_next >= 0.0:
                    heappush(cal, (t_next, fleet.seq, r))
        req.k = k
        req.n = base + k
        for st in sites:
            st.state.flush(t_s)
        self._now_s = max(self._now_s, t_s)

    def summary(self) -> dict[str, float]:
        """The request level's totals plus `requests_preempted` (requests preempted at least
        once) and `requests_refused` (refused at arrival; counted in the dropped too)."""
        rec = self._columns(0, self._requests.n)
        out = self._stats.summary(rec)
        out["requests_preempted"] = float(np.count_nonzero(rec["preemptions"]))
        out["requests_refused"] = float(np.count_nonzero(rec["refused"]))
        return out

    def request_table(self) -> pd.DataFrame:
        """The request level's table (`PerRequestSim.request_table`, with this level's
        latencies) plus `first_token_s`, `preemptions`, `recomputed_tokens` and `refused`
        (a refused request is also 'dropped')."""
        rec = self._columns(0, self._requests.n)
        table = _request_table(self.name, rec)
        for key in ("first_token_s", "preemptions", "recomputed_tokens", "refused"):
            table[key] = rec[key]
        return table

    def _live_columns(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The five columns `live` reads (`_IterRequests.live_columns`)."""
        return self._requests.live_columns(lo, hi, self.rtt_s)
