"""The request level's `ServiceSim`, `RequestLevel`: every request of a service simulated,
from its arrival to its last token (the package docstring); times in s, power in W.

Events: the arrivals (read from the source an hour at a time, `records`) merged with a
calendar (heap) of each replica's next completion time (`replicas`), entries invalidated
lazily by a version number. `advance_to` is one loop over these events in time order;
there is no event per token or per iteration. A request at the head of its queue when a
slot frees at `t` is dropped if it has waited more than `timeout_s`; at the horizon the
queued ones that have waited longer are dropped, the others and those in service are
unfinished.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush

from sim.serving.request_level.per_request import PerRequestSim
from sim.serving.request_level.records import _DROPPED, _SERVED, _Requests
from sim.serving.request_level.replicas import _Fleet


class RequestLevel(PerRequestSim):
    """Every request simulated: queues, continuous batching as processor sharing, timeouts,
    draining replicas (package docstring)."""

    _fleet: _Fleet

    def setup(self) -> None:
        super().setup()
        self._requests = _Requests()
        self._fleet = _Fleet(len(self.rtt_s), self._requests, self.timeout_s, self.on_power)

    def advance_to(self, t_s: float) -> None:
        """Serve up to `t_s`: arrivals before it, completions up to it."""
        fleet, req, router = self._fleet, self._requests, self._router
        cal = fleet.cal
        sites = fleet.sites
        arrival_s, output, admit_s, end_s = req.arrival_s, req.output, req.admit_s, req.end_s
        state, site_of, mid = req.state, req.site, req.mid
        on_power = self.on_power
        timeout_s = self.timeout_s
        act, w, cred = router.act, router.w, router.cred
        n_act = len(act)
        total_w = sum(w)
        s0 = act[0] if act else -1
        ct, co, k, base = req.chunk_t, req.chunk_out, req.k, req.base
        n_chunk = len(ct)
        seq = fleet.seq
        inf = math.inf
        while True:
            if k < n_chunk:
                ta = ct[k]
            elif req.fetched_s < t_s and req.fetched_s < self.horizon_s:
                req.fetch(self.source, self.horizon_s)
                ct, co, k, base = req.chunk_t, req.chunk_out, 0, req.base
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
                    if n == 0 and r.pos >= 0:
                        st.idle += 1
                    on_power(r.site, tc, e, st.idle)
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
                    if n == 1:
                        st.idle -= 1
                    on_power(s, ta, e, st.idle)
                    d = heap[0][0] - v
                    seq += 1
                    r.ver = seq
                    heappush(cal, (ta + (d if d > 0.0 else 0.0) * it[n], seq, r))
                else:
                    r.queue.append(i)
        req.k = k
        req.n = base + k
        fleet.seq = seq
        self._now_s = max(self._now_s, t_s)
