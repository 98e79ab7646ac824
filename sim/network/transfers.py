"""Transfers in flight on the WAN: a fluid model the engine drives by events.

Each transfer sends its bits at a rate that is constant between events (a transfer starts
or finishes sending). With `contention = true` the rates are the max-min fair share of the
links' capacities (progressive filling: raise every rate together, freeze the transfers of
a link when it fills, go on with the others), each capped at `flow_gbps`; without, every
transfer gets its route's bottleneck alone. A transfer is delivered `propagation_s` after
its last bit is sent. Energy is linear in the bits sent; carbon is charged exactly, per
stretch of constant rate, at each zone's intensity (a zone's power over a stretch is its
energy per Gbit x the rate).

Engine loop::

    tid = wan.transfers.start(src, dst, gb, now_s, tag=job_id)
    ...schedule a wake-up at wan.transfers.next_event_s() (after every start and advance)
    done = wan.transfers.advance(now_s)   # at each wake-up: the transfers delivered by now
    part = wan.transfers.cancel(tid, now_s)  # stopped early: the record of the bits sent

A wake-up that finds nothing to do returns []; so stale wake-ups are harmless.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from sim.network.energy import GBIT_PER_GB
from sim.network.routes import Route, RouteEnergy, Transfer

if TYPE_CHECKING:
    from sim.config.scenario import WanConfig

_TOL = 1e-9


class Network(Protocol):
    """What `Transfers` asks of the WAN it moves data on (`sim.network.wan.Wan`)."""

    @property
    def config(self) -> WanConfig: ...
    def route(self, src: str, dst: str) -> Route: ...
    def route_energy(self, route: Route) -> RouteEnergy: ...
    def carbon_g(self, zone: str, t0_s: float, t1_s: float) -> float: ...
    def solo_rate_gbps(self, route: Route) -> float: ...


@dataclass(eq=False)
class _Flow:
    id: int
    route: Route
    gb: float
    start_s: float
    tag: Any
    kwh_per_gbit: dict[str, float]
    remaining_gbit: float
    t_s: float  # time up to which it has been progressed
    rate_gbps: float = 0.0
    send_end_s: float = math.inf
    deliver_s: float | None = None  # set when the last bit is sent
    carbon_g: dict[str, float] = field(default_factory=dict)


class Transfers:
    """The transfers in flight on one `Wan` (module docstring). Time only moves forward."""

    def __init__(self, wan: Network) -> None:
        self._wan = wan
        self._shared = bool(wan.config.contention)
        self._flow_cap = wan.config.flow_gbps
        self._flows: dict[int, _Flow] = {}
        self._next_id = 0
        self.now_s = 0.0
        """Time up to which the transfers have been progressed, s."""

    def __len__(self) -> int:
        """Transfers started and not yet delivered by `advance`."""
        return len(self._flows)

    # -- engine API

    def start(self, src: str, dst: str, gb: float, now_s: float, tag: Any = None) -> int:
        """Start moving `gb` GB from site `src` to `dst` at `now_s`; returns its id. The
        rates of the transfers sharing its links drop from now on."""
        wan = self._wan
        route = wan.route(src, dst)
        gb = float(gb)
        if not (math.isfinite(gb) and gb >= 0):
            raise ValueError(f"gb must be a finite number >= 0, got {gb}")
        self._run_until(now_s)
        tid = self._next_id
        self._next_id += 1
        per_gb = wan.route_energy(route).by_zone_kwh_per_gb
        flow = _Flow(
            tid,
            route,
            gb,
            now_s,
            tag,
            {z: k / GBIT_PER_GB for z, k in per_gb.items()},
            gb * GBIT_PER_GB,
            now_s,
        )
        self._flows[tid] = flow
        if src == dst:
            flow.deliver_s = now_s
        elif flow.remaining_gbit == 0:
            flow.deliver_s = now_s + route.propagation_s
        else:
            self._rerate(now_s)
        return tid

    def advance(self, now_s: float) -> list[Transfer]:
        """Progress every transfer to `now_s`; returns the transfers delivered by then (at
        or before `now_s`), in delivery order, and forgets them."""
        self._run_until(now_s)
        until = now_s + _TOL * max(1.0, now_s)
        done = sorted(
            (f for f in self._flows.values() if f.deliver_s is not None and f.deliver_s <= until),
            key=lambda f: (f.deliver_s, f.id),
        )
        for f in done:
            del self._flows[f.id]
        return [self._record(f) for f in done]

    def next_event_s(self) -> float | None:
        """When `advance` next has something to do (a transfer finishes sending, which
        changes others' rates, or is delivered); None when nothing is in flight."""
        times = [f.send_end_s if f.deliver_s is None else f.deliver_s for f in self._flows.values()]
        return min(times, default=None)

    def eta_s(self, tid: int) -> float:
        """Delivery time of transfer `tid` if no other transfer starts or ends meanwhile."""
        f = self._flow(tid)
        return f.deliver_s if f.deliver_s is not None else f.send_end_s + f.route.propagation_s

    def rate_gbps(self, tid: int) -> float:
        """Current sending rate of transfer `tid`, Gbit/s (0 once all is sent)."""
        f = self._flow(tid)
        return f.rate_gbps if f.deliver_s is None else 0.0

    def estimate(self, tid: int) -> Transfer:
        """Transfer `tid`'s record as it would end at the current rates (energy exact;
        duration and carbon estimated)."""
        f = self._flow(tid)
        rec = self._record(f)
        if f.deliver_s is not None:
            return rec
        wan = self._wan
        t, end = f.t_s, f.send_end_s
        carbon = dict(f.carbon_g)
        for z, k in f.kwh_per_gbit.items():
            carbon[z] = carbon.get(z, 0.0) + k * f.rate_gbps * wan.carbon_g(z, t, end)
        from dataclasses import replace

        return replace(
            rec,
            end_s=end + f.route.propagation_s,
            carbon_kg=sum(carbon.values()) / 1000,
            carbon_by_zone_kg=MappingProxyType({z: g / 1000 for z, g in carbon.items()}),
        )

    def cancel(self, tid: int, now_s: float) -> Transfer:
        """Stop transfer `tid` at `now_s`: its final record covers only the bits sent by then
        (`gb`, energy and exact carbon of those; `end_s` = `now_s`, or its delivery if it was
        all sent), and the transfers sharing its links speed up from now on."""
        self._run_until(now_s)
        f = self._flow(tid)
        del self._flows[tid]
        if f.deliver_s is None:
            f.gb -= f.remaining_gbit / GBIT_PER_GB
            f.deliver_s = now_s
            self._rerate(now_s)
        return self._record(f)

    def what_if_rate_gbps(self, route: Route) -> float:
        """The rate a new transfer on `route` would get now, beside those in flight."""
        if route.src == route.dst:
            return math.inf
        flows = [(f.id, f.route) for f in self._flows.values() if f.deliver_s is None]
        rates = self._rates([*flows, (-1, route)])
        return rates[-1]

    # -- internals

    def _flow(self, tid: int) -> _Flow:
        f = self._flows.get(tid)
        if f is None:
            raise KeyError(f"no transfer {tid} in flight (unknown, or already delivered)")
        return f

    def _record(self, f: _Flow) -> Transfer:
        """The transfer's record so far (final once it is delivered)."""
        energy = {z: k * f.gb * GBIT_PER_GB for z, k in f.kwh_per_gbit.items()}
        end = f.deliver_s if f.deliver_s is not None else math.inf
        return Transfer(
            f.route.src,
            f.route.dst,
            f.gb,
            f.start_s,
            end,
            f.route.propagation_s if f.route.src != f.route.dst else 0.0,
            sum(energy.values()),
            sum(f.carbon_g.values()) / 1000,
            f.route,
            MappingProxyType(energy),
            MappingProxyType({z: g / 1000 for z, g in f.carbon_g.items()}),
            id=f.id,
            tag=f.tag,
        )

    def _run_until(self, t: float) -> None:
        if t < self.now_s - _TOL * max(1.0, self.now_s):
            raise ValueError(f"time moves forward: now is {self.now_s} s, got {t} s")
        t = max(t, self.now_s)
        while True:
            sending = [f for f in self._flows.values() if f.deliver_s is None]
            if not sending:
                break
            t_next = min(f.send_end_s for f in sending)
            if t_next > t + _TOL * max(1.0, t):  # within rounding of t: it ends now
                break
            for f in sending:
                self._progress(f, t_next)
            tol = _TOL * max(1.0, t_next)
            for f in sending:
                if f.send_end_s <= t_next + tol:
                    f.remaining_gbit = 0.0
                    f.deliver_s = f.send_end_s + f.route.propagation_s
                    f.rate_gbps = 0.0
            self._rerate(t_next)
        for f in self._flows.values():
            if f.deliver_s is None:
                self._progress(f, t)
        self.now_s = t

    def _progress(self, f: _Flow, t: float) -> None:
        """Send at the current rate from f.t_s to t, charging carbon exactly."""
        if t <= f.t_s:
            return
        wan = self._wan
        for z, k in f.kwh_per_gbit.items():
            f.carbon_g[z] = f.carbon_g.get(z, 0.0) + k * f.rate_gbps * wan.carbon_g(z, f.t_s, t)
        f.remaining_gbit = max(0.0, f.remaining_gbit - f.rate_gbps * (t - f.t_s))
        f.t_s = t

    def _rerate(self, t: float) -> None:
        sending = [f for f in self._flows.values() if f.deliver_s is None]
        rates = self._rates([(f.id, f.route) for f in sending])
        for f, r in zip(sending, rates, strict=True):
            f.rate_gbps = r
            f.send_end_s = t + f.remaining_gbit / r

    def _rates(self, flows: list[tuple[int, Route]]) -> list[float]:
        """Rates of `flows` (id, route): max-min fair with contention, else each alone."""
        cap = self._flow_cap
        if not self._shared:
            return [self._wan.solo_rate_gbps(r) for _, r in flows]
        return max_min_rates([r.links for _, r in flows], cap)


def max_min_rates(
    flows: list[tuple[tuple[Hashable, float], ...]], flow_cap: float | None = None
) -> list[float]:
    """Max-min fair rates of flows, each given as its links ((key, capacity), ...), every
    rate at most `flow_cap` (progressive filling)."""
    left: dict[Hashable, float] = {}
    users: dict[Hashable, set[int]] = {}
    for i, links in enumerate(flows):
        for key, c in links:
            left[key] = c
            users.setdefault(key, set()).add(i)
    rates = [math.inf] * len(flows)
    active = {i for i, links in enumerate(flows) if links}
    while active:
        share = min((left[k] / len(u) for k, u in users.items() if u), default=math.inf)
        if flow_cap is not None and flow_cap <= share:
            share = flow_cap
            frozen = set(active)
        else:
            frozen = set()
            for k, u in users.items():
                if u and left[k] / len(u) <= share * (1 + 1e-12):
                    frozen |= u
        for i in frozen:
            rates[i] = share
            for key, _ in flows[i]:
                left[key] -= share
                users[key].discard(i)
        active -= frozen
    return rates
