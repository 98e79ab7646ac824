"""Prefill/decode disaggregation at the iteration level (Splitwise, DistServe;
docs/serving.md "Disaggregation"): `DisaggregatedLevel`, the iteration level with a
service's deployments in two roles, prefill and decode; times in s, energy in J.

- A request goes to a prefill replica (the routing of the iteration level, over the
  prefill deployments only), which runs prefill-only iterations: waiting prompts batched
  under the token budget, chunked as vLLM does, one event per iteration
  (`_PrefillReplica`). Its first token comes at the end of the iteration that computes its
  prompt's last chunk, which ends its time to first token (as Splitwise's TTFT, the prompt
  phase's output); its KV blocks are freed there.
- Its KV cache (prompt tokens x the prefill replica's KV bytes per token, copies over the
  tensor-parallel GPUs included) then crosses the service's link (`sim.models.kv_transfer`)
  to the decode deployment at the same site: it arrives after the link's latency plus
  bytes / bandwidth, its energy drawn as a constant power over the transfer, reported
  with the decode deployment's power (so it is in the site's IT and facility energy and
  carbon exactly).
- On arrival it joins the queue of the decode replica with the fewest requests, holding
  no blocks until that replica's scheduler admits it, as it admits a decode whose KV comes
  back from the host: when blocks for its context are free, with one token of the budget
  (the KV meanwhile waits in the sender's buffers, counted on neither replica). From then
  it decodes as on a co-located replica; its time per output token includes the transfer
  and that wait. A one-token answer is done at the prefill replica and crosses nothing.

The two stages form a pipeline without feedback, so `advance_to` serves the prefill
replicas (the iteration level's event loop), hands the prompts done over to the link, then
serves the decode replicas in their own calendar, the transfers' arrivals merged in time
order.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Sequence
from heapq import heappop, heappush

import numpy as np
import pandas as pd

from sim.config.services import SchedulerConfig
from sim.models.kv_transfer import KvLink
from sim.models.llm_replica import ReplicaModel
from sim.serving.iteration_level.fleet import _Fleet
from sim.serving.iteration_level.records import _IterRequests
from sim.serving.iteration_level.replicas import _Replica
from sim.serving.iteration_level.service import IterationLevel
from sim.serving.request_level.records import _DROPPED, _SERVED
from sim.serving.service_sim import LiveStats, ServiceContext
from sim.serving.sources import RequestSource

__all__ = ["DisaggregatedLevel"]

_J_PER_KWH = 3.6e6


class _DisaggRequests(_IterRequests):
    """The iteration level's records plus each request's KV transfers, and the prompts
    prefilled since the last hand-over (`prefilled`)."""

    def __init__(self) -> None:
        super().__init__()
        self.prefilled: list[int] = []
        """Requests whose prompt a prefill replica completed, not yet handed to the link."""
        self.kv_moves = array("i")
        """Times the request's KV cache crossed the link."""
        self.kv_bytes = array("d")
        """Bytes of KV cache it moved."""
        self.kv_j = array("d")
        """Energy of its transfers, J."""

    def __copy__(self) -> _DisaggRequests:
        """A copy sharing the arrays (a draining replica's look-ahead copies those it
        writes) with a list of its own, so the look-ahead hands nothing over."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.prefilled = []
        return new

    def _extra(self) -> tuple[array, ...]:
        return (*super()._extra(), self.kv_moves, self.kv_bytes, self.kv_j)

    def fetch(self, source: RequestSource, horizon_s: float) -> None:
        super().fetch(source, horizon_s)
        m = len(self.arrival_s) - len(self.kv_moves)
        self.kv_moves.frombytes(np.zeros(m, np.intc).tobytes())
        self.kv_bytes.frombytes(np.zeros(m).tobytes())
        self.kv_j.frombytes(np.zeros(m).tobytes())


class _PrefillReplica(_Replica):
    """A replica that only prefills: every iteration is its own event, and a prompt done
    leaves it (module docstring)."""

    __slots__ = ()

    def _chunks(self, t: float, free: int, admit: bool) -> tuple[int, bool, bool]:
        """The iteration level's chunks, the iteration always ending in an event (a mixed
        iteration: there are no decodes to run an epoch of)."""
        p, held, _ = super()._chunks(t, free, admit)
        return p, held, True

    def _prefilled(self, k: int, t: float) -> None:
        """The chunks of the iteration ending at `t` are computed: the prompts complete
        have their first token and leave, their blocks freed, for the link (a one-token
        answer: served)."""
        for e, c in self.chunks:
            e[2] += c
        self.chunks = []
        rq, bs = self.rq, self.lim.block_size
        assert isinstance(rq, _DisaggRequests)
        left = []
        for e in self.pf:
            if e[2] < e[1]:
                left.append(e)
                continue
            j = e[0]
            self.pf_blocks -= -(-e[2] // bs)
            del self.order[j]
            rq.gen[j] += 1
            rq.first_s[j] = t
            if self.pos >= 0:
                self.site.loads[self.pos] -= 1
            if rq.output[j] <= rq.gen[j]:
                rq.end_s[j] = t
                rq.state[j] = _SERVED
            else:
                rq.prefilled.append(j)
        self.pf = left


class DisaggregatedLevel(IterationLevel):
    """The iteration level with prefill and decode on separate replicas (module docstring).

    `pools`: each deployment's (role, "prefill" or "decode"; its site's index in the
    service's sites); `link`: the link the KV caches cross."""

    def __init__(
        self,
        ctx: ServiceContext,
        schedulers: Sequence[SchedulerConfig],
        pools: Sequence[tuple[str, int]],
        link: KvLink,
    ):
        self._pools = list(pools)
        self._link = link
        super().__init__(ctx, schedulers)

    def setup(self) -> None:
        super().setup()
        if len(self._pools) != len(self.rtt_s):
            raise ValueError(f"pools: one per deployment ({len(self.rtt_s)}), got {self._pools}")
        self._requests = self._rq = rq = _DisaggRequests()
        self._fleet = _Fleet(self._schedulers, rq, self.timeout_s, self.on_power, _PrefillReplica)
        self._decode = _Fleet(self._schedulers, rq, self.timeout_s, self.on_power)
        self._is_decode = np.array([role == "decode" for role, _ in self._pools])
        decode_at = {site: k for k, (role, site) in enumerate(self._pools) if role == "decode"}
        self._peer = [decode_at.get(site, -1) for _, site in self._pools]
        """The decode deployment at each deployment's site (-1: none)."""
        self._pending: list[tuple[float, int]] = []
        """(arrival s, request) of the KV caches on the link."""

    # -- the contract --------------------------------------------------------------------

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        if not self._is_decode[site]:
            return super().configure(t_s, site, ready, model)
        self.advance_to(t_s)
        return self._decode.configure(t_s, site, ready, model)

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        """The iteration level's, over the prefill deployments only."""
        if shares is not None:
            shares = np.where(self._is_decode, 0.0, shares)
            if not shares.sum() > 0:
                shares = None
        super().set_shares(t_s, shares)

    def advance_to(self, t_s: float) -> None:
        """Serve the prefill replicas up to `t_s`, put the prompts they completed on the
        link, then serve the decode replicas up to `t_s`."""
        super().advance_to(t_s)
        self._hand_over()
        self._serve_decodes(t_s)

    def live(self) -> LiveStats:
        """The iteration level's, with the decode replicas' queues and batches and the KV
        caches on the link (in flight)."""
        s = super().live()
        d = self._decode
        return dataclasses.replace(
            s,
            queued=s.queued + d.queued(),
            in_flight=s.in_flight + d.in_flight() + len(self._pending),
        )

    def summary(self) -> dict[str, float]:
        """The iteration level's plus `kv_transfer_gb` and `kv_transfer_energy_kwh` (the
        link's energy, before the site's PUE)."""
        out = super().summary()
        rq, n = self._rq, self._rq.n
        out["kv_transfer_gb"] = float(np.sum(rq._col(rq.kv_bytes, np.float64, 0, n))) / 1e9
        kv_j = float(np.sum(rq._col(rq.kv_j, np.float64, 0, n)))
        out["kv_transfer_energy_kwh"] = kv_j / _J_PER_KWH
        return out

    def request_table(self) -> pd.DataFrame:
        """The iteration level's plus `kv_transfers` (times the request's KV cache crossed
        the link), `kv_transfer_bytes` and `kv_transfer_j` (their energy, J)."""
        table = super().request_table()
        rq, n = self._rq, self._rq.n
        table["kv_transfers"] = rq._col(rq.kv_moves, np.intc, 0, n)
        table["kv_transfer_bytes"] = rq._col(rq.kv_bytes, np.float64, 0, n)
        table["kv_transfer_j"] = rq._col(rq.kv_j, np.float64, 0, n)
        return table

    # -- the two stages ----------------------------------------------------------------------

    def _hand_over(self) -> None:
        """Put the prompts the prefill replicas completed on the link to their site's decode
        deployment (dropped if it has none): their arrival in `_pending`, their energy
        as the power they draw there over the transfer."""
        rq, link, decode = self._rq, self._link, self._decode
        for j in rq.prefilled:
            peer = self._peer[rq.site[j]]
            if peer < 0:
                rq.state[j] = _DROPPED
                continue
            t0 = rq.first_s[j]
            nbytes = rq.input[j] * self._fleet.kv_bytes_per_token(rq.mid[j])
            t1 = t0 + link.seconds(nbytes)
            joules = link.joules(nbytes)
            rq.kv_moves[j] += 1
            rq.kv_bytes[j] += nbytes
            rq.kv_j[j] += joules
            if t1 > t0 and joules > 0.0:
                watts = joules / (t1 - t0)
                st = decode.sites[peer].state
                st.t += (t0, t1)
                st.dw += (watts, -watts)
                st.dn += (1, -1)
                st.di += (0, 0)
            heappush(self._pending, (t1, j))
        rq.prefilled.clear()

    def _serve_decodes(self, t_s: float) -> None:
        """Serve the decode replicas' events up to `t_s` and the KV caches arriving before
        it, in time order (an event first at equal times, as the iteration level does)."""
        rq, decode, pending = self._rq, self._decode, self._pending
        cal = decode.cal
        inf = math.inf
        while True:
            ta = pending[0][0] if pending else inf
            tc = cal[0][0] if cal else inf
            if tc <= ta:
                if tc > t_s:
                    break
                _, ver, r = heappop(cal)
                if ver == r.ver:
                    decode.push(r, r.event(tc))
                continue
            if ta >= t_s:
                break
            _, j = heappop(pending)
            rq.swapped[j] = rq.input[j]
            decode.dispatch(decode.sites[self._peer[rq.site[j]]], j, ta)
        for st in decode.sites:
            st.state.flush(t_s)
