"""The request level's replicas at the service's sites (`_Fleet`): their batches, virtual
clocks and queues, the calendar of their next completions, the models they run and the
sites' power; times in s, power in W.

Each replica under continuous batching is a processor-sharing server: with `n` sequences
in flight every sequence gets one output token per iteration of `model.iter_s[n]` s. A
replica keeps a virtual clock `V`, the iterations elapsed (dV/dt = 1 / iter_s[n]); a
request admitted at virtual time `V0` with `out` output tokens finishes when `V` reaches
`V0 + out`, so a heap of virtual finish times per replica makes every arrival and
completion O(log n) whatever the batch. At most `model.slots` sequences are in flight;
the others wait in the replica's FIFO queue.

Scale-down takes the replicas with the fewest requests (ties: the newest) out of
admission: their queued requests go to the site's other replicas by the same rule, in
arrival order (dropped if the site keeps none), and they drain their batch with the
model they had (a later cap change does not touch them, so the drain time `configure`
returned holds). Scale-up adds empty replicas. A new model (a cap change) applies to
the admitting replicas of the site from `t_s`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heappush

from sim.models.llm_replica import ReplicaModel
from sim.serving.request_level.records import _DROPPED, _Requests


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
        """Index of its model in `_Fleet.models`."""
        self.heap: list[tuple[float, int]] = []
        """(virtual finish time, request index) of the requests in flight."""
        self.queue: deque[int] = deque()
        """Indices of the requests waiting for a slot, in arrival order."""
        self.ver = -1
        """Version of its live calendar entry."""


class _Site:
    """One of the service's sites: its admitting and draining replicas, its power."""

    __slots__ = ("adm", "loads", "draining", "model", "mi", "extra_w", "busy", "idle")

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
        self.idle = 0
        """Admitting replicas with nothing in flight (draining ones always have some)."""


class _Fleet:
    """The service's replicas at its sites, the calendar of their next completions
    (`cal`: (time s, version, replica), entries invalidated lazily by the replica's
    version) and the models they run (`models`, by index). The event loop reads and writes
    `sites`, `cal` and `seq` directly; the rest changes the replicas between its calls.
    Requests are admitted, queued and dropped in `requests`' records."""

    def __init__(
        self, sites: int, requests: _Requests, timeout_s: float, on_power: Callable[..., None]
    ):
        self.sites = [_Site() for _ in range(sites)]
        self.models: list[ReplicaModel] = []
        self._tables: list[tuple[list[float], list[float]]] = []
        """Each model's `iter_s` and `power_w` as lists (the hot loop indexes them)."""
        self.cal: list[tuple[float, int, _Replica]] = []
        """Calendar: (next completion time s, version, replica)."""
        self.seq = 0
        """Last version handed out."""
        self._requests = requests
        self._timeout_s = timeout_s
        self._on_power = on_power

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        """From `t_s`, `ready` replicas of `model` admit at `site` (module docstring);
        returns when the replicas taken out of admission have drained, s."""
        st = self.sites[site]
        if st.model is not model:
            st.model, st.mi = model, self._model_index(model)
            for r in st.adm:
                _touch(r, t_s)
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
                    free_s = max(free_s, _drain_end_s(r))
            for j in moved:
                self._dispatch(st, j, t_s)
        self._report_power(site, t_s)
        return free_s

    def admitting(self) -> list[int]:
        """Admitting replicas at each site."""
        return [len(st.adm) for st in self.sites]

    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return sum(len(r.queue) for st in self.sites for r in st.adm)

    def in_flight(self) -> int:
        """Sequences in flight now."""
        return sum(st.busy for st in self.sites)

    def drop_overdue(self, t_s: float) -> None:
        """Drop the queued requests that have waited more than the timeout at `t_s`."""
        arrival_s, state = self._requests.arrival_s, self._requests.state
        for st in self.sites:
            for r in st.adm:
                for j in r.queue:
                    if t_s - arrival_s[j] > self._timeout_s:
                        state[j] = _DROPPED

    def _model_index(self, model: ReplicaModel) -> int:
        """Index of `model` in `models` (added on first sight, with its tables as lists)."""
        for mi, known in enumerate(self.models):
            if known is model:
                return mi
        self.models.append(model)
        self._tables.append((model.iter_s.tolist(), model.power_w.tolist()))
        return len(self.models) - 1

    def _tables_for(self, mi: int, n: int) -> tuple[list[float], list[float]]:
        """Iteration time and power lists of model `mi` for a replica with `n` in flight: past
        the model's slots (a new model with fewer slots than a batch) the batch runs at the
        full batch's token rate and power."""
        iter_s, power_w = self._tables[mi]
        slots = self.models[mi].slots
        if n <= slots:
            return iter_s, power_w
        extra = range(slots + 1, n + 1)
        return (
            iter_s + [iter_s[slots] * m / slots for m in extra],
            power_w + [power_w[slots]] * len(extra),
        )

    def _schedule(self, r: _Replica) -> None:
        """Put the replica's next completion in the calendar (the same expression as the
        event loop's, so the drain time of `_drain_end_s` is met exactly)."""
        if r.heap:
            d = r.heap[0][0] - r.v
            self.seq += 1
            r.ver = self.seq
            heappush(self.cal, (r.tv_s + (d if d > 0.0 else 0.0) * r.iter_s[r.n], self.seq, r))

    def _admit(self, r: _Replica, j: int, t_s: float) -> None:
        """Admit request `j` on `r` (its clock at `t_s`); the caller reschedules."""
        heappush(r.heap, (r.v + self._requests.output[j], j))
        r.n += 1
        self._requests.admit_s[j] = t_s
        self._requests.mid[j] = r.mi

    def _fill(self, st: _Site, r: _Replica, t_s: float) -> None:
        """Admit from the admitting replica `r`'s queue at `t_s` while it has free slots,
        dropping the requests that waited more than the timeout."""
        while r.queue and r.n < r.slots:
            j = r.queue.popleft()
            if t_s - self._requests.arrival_s[j] > self._timeout_s:
                self._requests.state[j] = _DROPPED
                st.loads[r.pos] -= 1
            else:
                self._admit(r, j, t_s)

    def _dispatch(self, st: _Site, j: int, t_s: float) -> None:
        """Send queued request `j` to the site's admitting replica with the fewest requests at
        `t_s` (dropped if the site has none, or if admitted after more than the timeout)."""
        if not st.adm:
            self._requests.state[j] = _DROPPED
            return
        p = st.loads.index(min(st.loads))
        r = st.adm[p]
        if r.n >= r.slots:
            r.queue.append(j)
            st.loads[p] += 1
        elif t_s - self._requests.arrival_s[j] > self._timeout_s:
            self._requests.state[j] = _DROPPED
        else:
            st.loads[p] += 1
            _touch(r, t_s)
            self._admit(r, j, t_s)
            self._schedule(r)

    def _report_power(self, site: int, t_s: float) -> None:
        """Recount the site's extra power, batch and idle replicas; report them if they
        changed."""
        st = self.sites[site]
        reps = st.adm + st.draining
        e = sum(r.power_w[r.n] - r.power_w[0] for r in reps)
        st.busy = sum(r.n for r in reps)
        idle = sum(1 for r in st.adm if r.n == 0)
        if e != st.extra_w or idle != st.idle:
            st.extra_w, st.idle = e, idle
            self._on_power(site, t_s, e, idle)


def _touch(r: _Replica, t_s: float) -> None:
    """Bring the replica's virtual clock up to `t_s`."""
    r.v += (t_s - r.tv_s) / r.iter_s[r.n]
    r.tv_s = t_s


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
