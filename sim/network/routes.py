"""What the WAN's parts share: a route through the backbone (`Route`, its `Hop`s), the
energy per GB along it (`RouteEnergy`, the `path` model's `Device`s) and the record of one
transfer (`Transfer`). `Wan` (wan.py) builds and prices them; `Transfers` (transfers.py)
moves data along them."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Device", "Hop", "Route", "RouteEnergy", "Transfer"]


@dataclass(frozen=True)
class Hop:
    """One graph edge of a route, in the route's direction."""

    a: Hashable
    b: Hashable
    km: float
    gbps: float
    """Capacity: the topology's, else `link_gbps`."""
    sea: bool


@dataclass(frozen=True)
class Device:
    """A network device of the `path` model: where it is and which grid zone powers it."""

    kind: str
    lat: float
    lon: float
    zone: str
    w_per_gbps: float
    """Its iGDB intensity, before network PUE and redundancy."""


@dataclass(frozen=True)
class Route:
    """A path from one site to another: attachment leg, graph edges, attachment leg."""

    src: str
    dst: str
    nodes: tuple[Hashable, ...]
    """Graph nodes from the source's attachment node to the destination's (empty for a
    same-site route)."""
    names: tuple[str, ...]
    hops: tuple[Hop, ...]
    attach_km: tuple[float, float]
    """Great-circle attachment legs: source site -> first node, last node -> destination."""
    km: float
    """Total length: both attachment legs and every hop."""
    router_nodes: tuple[Hashable, ...]
    """The nodes that are router sites (topohub's submarine-cable waypoints are not)."""
    spans_km: tuple[float, ...]
    """Fibre between consecutive router sites (a span may cross waypoints)."""
    links: tuple[tuple[Hashable, float], ...]
    """(link key, capacity Gbit/s) of every link the route loads, in its direction (links
    are full duplex), attachment legs included: what concurrent transfers share under
    contention."""
    propagation_s: float
    """km / the signal speed in fibre."""

    @property
    def router_hops(self) -> int:
        """Router-to-router hops (spans)."""
        return len(self.spans_km)

    @property
    def bottleneck_gbps(self) -> float:
        """Smallest capacity along the route (inf for a same-site route)."""
        return min((c for _, c in self.links), default=math.inf)


@dataclass(frozen=True)
class RouteEnergy:
    """Energy per GB moved along a route, and where it is drawn."""

    kwh_per_gb: float
    """All devices, network PUE and redundancy included."""
    by_zone_kwh_per_gb: Mapping[str, float]
    """The same split by the grid zone that powers the devices (FALLBACK_ZONE: none near)."""
    devices: tuple[Device, ...] = ()
    """The `path` model's devices (empty for the other models)."""

    def counts(self) -> dict[str, int]:
        """Devices by kind."""
        out: dict[str, int] = {}
        for d in self.devices:
            out[d.kind] = out.get(d.kind, 0) + 1
        return out


@dataclass(frozen=True)
class Transfer:
    """One data transfer: when it ran, what it cost. Energy is drawn while the data is sent
    (start_s to end_s - propagation_s); the last bit arrives propagation_s later."""

    src: str
    dst: str
    gb: float
    start_s: float
    end_s: float
    propagation_s: float
    energy_kwh: float
    carbon_kg: float
    route: Route
    energy_by_zone_kwh: Mapping[str, float] = field(default_factory=dict)
    carbon_by_zone_kg: Mapping[str, float] = field(default_factory=dict)
    id: int | None = None
    """Set for transfers started in `Wan.transfers`."""
    tag: Any = None
    """The caller's label (e.g. a job id), carried through."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def route_km(self) -> float:
        return self.route.km

    @property
    def hops(self) -> int:
        """Router-to-router hops of the route."""
        return self.route.router_hops
