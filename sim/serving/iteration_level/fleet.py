"""The iteration level's replicas at the service's sites (`_Fleet`): which replicas admit
and which drain, their calendar of next events, the models (costs and scheduler limits)
they run; times in s.

Scale-down takes the replicas with the fewest requests (ties: the newest) out of
admission, as the request level does: the requests still waiting there that never started
go to the site's other replicas (dropped if none is left), and the replica serves the rest
with the model it had. The time it will be empty is found by running a copy of it ahead
(`_drain_end_s`), the very arithmetic its events will follow. A new model (a cap change)
applies to the admitting replicas from their next iteration boundary.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from heapq import heappush

from sim.config.services import SchedulerConfig
from sim.models.llm_iteration import IterationCost, iteration_cost
from sim.models.llm_memory import host_bytes_per_s, kv_blocks
from sim.models.llm_replica import ReplicaModel
from sim.serving.iteration_level.records import _IterRequests
from sim.serving.iteration_level.replicas import _Limits, _Replica, _SiteState
from sim.serving.request_level.records import _DROPPED


class _Site:
    """A site's admitting and draining replicas and the model they run now."""

    __slots__ = ("state", "adm", "draining", "mi")

    def __init__(self, index: int, on_power: Callable[..., None]):
        self.state = _SiteState(index, on_power)
        self.adm: list[_Replica] = []
        self.draining: list[_Replica] = []
        self.mi = -1


class _Fleet:
    """The service's replicas, the calendar of their next events (`cal`: (time s, version,
    replica), entries invalidated lazily by the replica's version) and their models."""

    def __init__(
        self,
        schedulers: list[SchedulerConfig],
        requests: _IterRequests,
        timeout_s: float,
        on_power: Callable[..., None],
        replica: type[_Replica] | None = None,
    ):
        self.sites = [_Site(k, on_power) for k in range(len(schedulers))]
        self.replica = _Replica if replica is None else replica
        """The class of its replicas (`_Replica`, read when the fleet is made; a prefill
        pool's: `disaggregated._PrefillReplica`)."""
        self.schedulers = schedulers
        self.models: list[ReplicaModel] = []
        self._runs: list[tuple[IterationCost, _Limits]] = []
        self._sched: list[SchedulerConfig] = []
        self.cal: list[tuple[float, int, _Replica]] = []
        self.seq = 0
        self.rq = requests
        self.timeout_s = timeout_s

    def push(self, r: _Replica, t_s: float) -> None:
        """Put the replica's next event at `t_s` in the calendar (-1: none)."""
        self.seq += 1
        r.ver = self.seq
        r.next_t = t_s
        if t_s >= 0.0:
            heappush(self.cal, (t_s, self.seq, r))

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        """From `t_s`, `ready` replicas of `model` admit at `site` (module docstring);
        returns when the replicas taken out of admission are empty, s."""
        st = self.sites[site]
        mi = self._model_index(site, model)
        if st.mi != mi:
            st.mi = mi
            cost, lim = self._runs[mi]
            for r in st.adm:
                r.lim, r.mi = lim, mi
                r.pending = cost
                t_next = r.cut(t_s) if r.mode == 1 else -1.0
                if t_next >= 0.0:
                    self.push(r, t_next)
        cost, lim = self._runs[st.mi]
        loads = st.state.loads
        if len(st.adm) < ready:
            st.state.idle_changed(t_s, ready - len(st.adm))
        while len(st.adm) < ready:
            st.adm.append(
                self.replica(st.state, len(st.adm), self.rq, cost, lim, st.mi, self.timeout_s, t_s)
            )
            loads.append(0)
        free_s = t_s
        surplus = len(st.adm) - ready
        if surplus > 0:
            by_load = sorted(range(len(st.adm)), key=lambda p: (loads[p], -p))
            out = set(by_load[:surplus])
            leaving = [r for p, r in enumerate(st.adm) if p in out]
            idle_out = sum(1 for r in leaving if r.w == 0.0)
            if idle_out:
                st.state.idle_changed(t_s, -idle_out)
            st.adm = [r for p, r in enumerate(st.adm) if p not in out]
            st.state.loads = loads = [loads[r.pos] for r in st.adm]
            for p, r in enumerate(st.adm):
                r.pos = p
            admit_s = self.rq.admit_s
            moved = []
            for r in leaving:
                r.pos = -1
                fresh = [j for j in r.waiting if admit_s[j] != admit_s[j]]
                r.waiting = type(r.waiting)(j for j in r.waiting if admit_s[j] == admit_s[j])
                moved += fresh
                if r.mode != 0 or r.waiting:
                    st.draining.append(r)
                    free_s = max(free_s, _drain_end_s(r))
            for j in sorted(moved):
                self.dispatch(st, j, t_s)
        st.state.flush(t_s)
        return free_s

    def dispatch(self, st: _Site, j: int, t_s: float) -> None:
        """Send request `j` to the site's admitting replica with the fewest requests at
        `t_s` (dropped if the site has none)."""
        if not st.adm:
            self.rq.state[j] = _DROPPED
            return
        loads = st.state.loads
        p = loads.index(min(loads))
        loads[p] += 1
        r = st.adm[p]
        t_next = r.arrive(j, t_s)
        if t_next >= 0.0:
            self.push(r, t_next)

    def kv_bytes_per_token(self, mi: int) -> float:
        """Bytes of KV cache one token of context holds on a replica of model `mi` (its
        copies over the tensor-parallel GPUs included: `sim.models.llm_memory`)."""
        return self._runs[mi][0].kv.bytes_per_token

    def admitting(self) -> list[int]:
        return [len(st.adm) for st in self.sites]

    def queued(self) -> int:
        return sum(r.queued() for st in self.sites for r in st.adm + st.draining)

    def in_flight(self) -> int:
        return sum(r.in_flight() for st in self.sites for r in st.adm + st.draining)

    def drop_overdue(self, t_s: float) -> None:
        """Drop the waiting requests that never started and have waited more than the
        timeout at `t_s`."""
        rq = self.rq
        for st in self.sites:
            for r in st.adm + st.draining:
                for j in r.waiting:
                    if rq.admit_s[j] != rq.admit_s[j] and t_s - rq.arrival_s[j] > self.timeout_s:
                        rq.state[j] = _DROPPED

    def _model_index(self, site: int, model: ReplicaModel) -> int:
        """Index of `model` (with the site's scheduler) in `models`, added on first sight."""
        sched = self.schedulers[site]
        for mi, known in enumerate(self.models):
            if known is model and self._sched[mi] is sched:
                return mi
        assert sched.max_num_batched_tokens is not None, "the service resolves the budget"
        cost = iteration_cost(model, sched.max_num_batched_tokens)
        lim = _limits(sched, model, cost)
        self.models.append(model)
        self._runs.append((cost, lim))
        self._sched.append(sched)
        return len(self.models) - 1


def _limits(sched: SchedulerConfig, model: ReplicaModel, cost: IterationCost) -> _Limits:
    """The scheduler limits of `sched` on replicas of `model`."""
    blocks = kv_blocks(cost.kv.budget_bytes, cost.kv.bytes_per_token, sched.block_size)
    capacity = blocks * sched.block_size
    max_len = capacity if sched.max_model_len is None else min(sched.max_model_len, capacity)
    assert sched.max_num_seqs is not None and sched.max_num_batched_tokens is not None
    swap_s = 0.0
    if sched.preemption == "swap":
        swap_s = cost.kv.bytes_per_token / (model.num_gpus * host_bytes_per_s(model.gpu))
    return _Limits(
        sched.max_num_batched_tokens,
        sched.max_num_seqs,
        sched.chunked_prefill,
        sched.block_size,
        blocks,
        max_len,
        swap_s,
        model.prefix_hit_rate,
    )


def _drain_end_s(r: _Replica) -> float:
    """When the replica, admitting no more, will be empty, s: a copy of it (its own copies
    of the records it writes; no power reported) run ahead through its events."""
    rq = copy.copy(r.rq)
    written = ("first_s", "gen", "preempted", "recomputed", "swapped", "admit_s", "end_s")
    for name in (*written, "state", "mid"):
        setattr(rq, name, copy.copy(getattr(r.rq, name)))
    ghost = r.ghost(_SiteState(-1, lambda *a: None), rq)
    end, t_next = r.t, r.next_t
    while t_next >= 0.0:
        end = t_next
        t_next = ghost.event(end)
    return end
