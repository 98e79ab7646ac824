"""`Wan`: sites on a backbone graph; routes, transfer time, energy and carbon (docs/wan.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from sim.errors import ScenarioError
from sim.grid.catalog import YearPlan, catalog, year_plan, zone_series
from sim.grid.signal import CarbonSignal
from sim.network.energy import (
    DEFAULT_NETWORK_PUE,
    DEFAULT_REDUNDANCY,
    GBIT_PER_GB,
    J_PER_KWH,
    DeviceModel,
    device_model,
    per_gb_kwh,
)
from sim.network.routes import Device, Hop, Route, RouteEnergy, Transfer
from sim.network.topology import (
    Topology,
    great_circle_km,
    interpolate,
    load_topohub,
    load_topology_file,
)
from sim.network.transfers import Transfers

if TYPE_CHECKING:
    from sim.config.runtime import WanConfig

FALLBACK_ZONE = "fallback"
"""Zone key of devices with no catalog zone within `zone_max_km` (charged at
`fallback_g_per_kwh`)."""


class SiteLike(Protocol):
    name: str
    lat: float
    lon: float


@dataclass(frozen=True)
class Attachment:
    """Where a site joins the graph: its nearest router node, `km` away (great circle)."""

    site: str
    node: Hashable
    node_name: str
    km: float


class Wan:
    """The WAN of a scenario: sites attached to a backbone graph (see docs/wan.md).

    Build with `Wan(scenario.wan, scenario.sites, scenario.start, scenario.horizon_s,
    scenario.years)`.
    Construction loads the topology, attaches every site and checks that all sites are
    connected; errors are `ScenarioError` naming the key. Routes, route energies, zone
    lookups and zone signals are computed on first use and cached.

    For policies (no side effects): `route`, `routes`, `cost`, `energy_kwh`.
    For the engine: `transfer` (contention = false) or `transfers` (a `Transfers`, which
    also works without contention).
    """

    def __init__(
        self,
        config: WanConfig,
        sites: Sequence[SiteLike],
        start: datetime,
        horizon_s: float,
        years_rule: str | None = None,
    ) -> None:
        if start.tzinfo is None:
            raise ValueError(f"start must carry a UTC offset, got {start}")
        self.config = config
        self.start = start
        self.horizon_s = float(horizon_s)
        self.year = start.astimezone(UTC).year
        self.years_rule = years_rule
        """The scenario's `years`: how zone traces of other years are read (sim.grid.catalog)."""
        self.topology: Topology
        if config.topology is not None:
            self.topology = load_topohub(config.topology)
        elif config.topology_file is not None:
            self.topology = load_topology_file(config.topology_file)
        else:  # WanConfig requires exactly one of the two
            raise ValueError("give exactly one of topology, topology_file (got none)")
        self.devices: DeviceModel = device_model()
        self.network_pue = config.network_pue or DEFAULT_NETWORK_PUE
        self.redundancy = config.redundancy or DEFAULT_REDUNDANCY
        self.per_gb_kwh = (
            config.per_gb_kwh if config.per_gb_kwh is not None else per_gb_kwh(self.year)
        )
        self._sites = {s.name: (float(s.lat), float(s.lon)) for s in sites}
        self.attachments: dict[str, Attachment] = {}
        for s in sites:
            node, km = self.topology.nearest_router(float(s.lat), float(s.lon))
            name = self.topology.node_name(node)
            if km > config.max_attach_km:
                raise ScenarioError(
                    f"wan.max_attach_km: site {s.name!r} ({s.lat}, {s.lon}) is {km:.1f} km from "
                    f"the nearest node of topology {self.topology.name!r}, {name!r}; the limit "
                    f"is {config.max_attach_km:g} km"
                )
            self.attachments[s.name] = Attachment(s.name, node, name, km)
        self._check_connected()
        # Routes found so far; a trailing None: there are no more than those.
        self._routes: dict[tuple[str, str], tuple[Route | None, ...]] = {}
        self._energy: dict[tuple[str, str, tuple], RouteEnergy] = {}
        self._solo: dict[
            tuple[str, str], tuple[float, float, tuple[tuple[CarbonSignal, str, float], ...]]
        ] = {}
        """Per (src, dst): the shortest route's solo rate (Gbit/s), propagation delay (s) and,
        per zone in route order, its signal, name and energy per GB (kWh) (`totals`)."""
        self._zone_at: dict[tuple[float, float], str] = {}
        self._signals: dict[str, CarbonSignal] = {}
        self._zones = self._covering_zones()
        self.transfers = Transfers(self)

    def __repr__(self) -> str:
        return (
            f"Wan({self.topology.name!r}, {len(self._sites)} sites, "
            f"energy_model={self.config.energy_model!r}, contention={self.config.contention})"
        )

    # -- sites and routes

    def attachment(self, site: str) -> Attachment:
        self._site(site)
        return self.attachments[site]

    def route(self, src: str, dst: str) -> Route:
        """The shortest route by length from site `src` to site `dst` (cached)."""
        return self._route_list(src, dst, 1)[0]

    def routes(self, src: str, dst: str) -> tuple[Route, ...]:
        """Up to `k_paths` loop-free routes from `src` to `dst`, shortest first (cached).
        The first is `route(src, dst)`."""
        return self._route_list(src, dst, self.config.k_paths)

    def _route_list(self, src: str, dst: str, k: int) -> tuple[Route, ...]:
        self._site(src)
        self._site(dst)
        cached = self._routes.get((src, dst))
        if cached is not None and (len(cached) >= k or cached[-1] is None):
            return tuple(r for r in cached[:k] if r is not None)
        import networkx as nx  # a Wan's topology has imported it

        g = self.topology.graph
        a, b = self.attachments[src].node, self.attachments[dst].node
        found: tuple[Route, ...]
        if src == dst:
            found = (self._make_route(src, dst, ()),)
        elif a == b:
            found = (self._make_route(src, dst, (a,)),)
        elif k == 1:
            found = (self._make_route(src, dst, tuple(nx.shortest_path(g, a, b, weight="km"))),)
        else:
            paths = itertools.islice(nx.shortest_simple_paths(g, a, b, weight="km"), k)
            found = tuple(self._make_route(src, dst, tuple(p)) for p in paths)
        # A list shorter than asked means there are no more: remember that with a None.
        self._routes[(src, dst)] = found if len(found) >= k else (*found, None)
        return found

    def _make_route(self, src: str, dst: str, nodes: tuple[Hashable, ...]) -> Route:
        g = self.topology.graph
        link = self.config.link_gbps
        if not nodes:  # same site
            return Route(src, dst, (), (), (), (0.0, 0.0), 0.0, (), (), (), 0.0)
        hops = []
        for u, v in itertools.pairwise(nodes):
            e = g.edges[u, v]
            hops.append(Hop(u, v, e["km"], e["gbps"] if e["gbps"] is not None else link, e["sea"]))
        legs = (self.attachments[src].km, self.attachments[dst].km)
        km = legs[0] + sum(h.km for h in hops) + legs[1]
        routers = tuple(n for n in nodes if g.nodes[n]["router"])
        spans: list[float] = []
        run = 0.0
        for h in hops:
            run += h.km
            if g.nodes[h.b]["router"]:
                spans.append(run)
                run = 0.0
        # Links are full duplex: each direction is its own capacity.
        links: list[tuple[Hashable, float]] = [(("up", src), link)]
        links += [(("edge", h.a, h.b), h.gbps) for h in hops]
        links.append((("down", dst), link))
        return Route(
            src,
            dst,
            nodes,
            tuple(g.nodes[n]["name"] for n in nodes),
            tuple(hops),
            legs,
            km,
            routers,
            tuple(spans),
            tuple(links),
            km / self.config.fibre_km_per_s,
        )

    # -- energy

    def route_energy(self, route: Route) -> RouteEnergy:
        """Energy per GB along `route` under the scenario's energy model, by zone (cached)."""
        key = (route.src, route.dst, route.nodes)
        cached = self._energy.get(key)
        if cached is None:
            cached = self._energy[key] = self._compute_energy(route)
        return cached

    def _compute_energy(self, route: Route) -> RouteEnergy:
        model = self.config.energy_model
        if model == "none" or route.src == route.dst:
            return RouteEnergy(0.0, MappingProxyType({}))
        g = self.topology.graph
        if model == "per_gb":
            share = self.per_gb_kwh / len(route.router_nodes)
            by_zone: dict[str, float] = {}
            for n in route.router_nodes:
                z = self.zone_of(g.nodes[n]["lat"], g.nodes[n]["lon"])
                by_zone[z] = by_zone.get(z, 0.0) + share
            return RouteEnergy(self.per_gb_kwh, MappingProxyType(by_zone))
        devices = self._place_devices(route)
        factor = self.network_pue * self.redundancy * GBIT_PER_GB / J_PER_KWH
        by_zone = {}
        for d in devices:
            by_zone[d.zone] = by_zone.get(d.zone, 0.0) + d.w_per_gbps * factor
        total = sum(d.w_per_gbps for d in devices) * factor
        return RouteEnergy(total, MappingProxyType(by_zone), tuple(devices))

    def _place_devices(self, route: Route) -> list[Device]:
        """The `path` model's devices along `route` (see sim.network.energy)."""
        g = self.topology.graph
        dm = self.devices
        devices: list[Device] = []

        def at(kind: str, lat: float, lon: float) -> None:
            devices.append(Device(kind, lat, lon, self.zone_of(lat, lon), dm.w_per_gbps[kind]))

        for n in route.router_nodes:
            lat, lon = g.nodes[n]["lat"], g.nodes[n]["lon"]
            for kind, count in dm.per_router_site.items():
                for _ in range(count):
                    at(kind, lat, lon)
        # Spans: source leg, router-to-router fibre, destination leg. A piece is
        # (lat1, lon1, lat2, lon2, km, sea).
        pos = [(g.nodes[n]["lat"], g.nodes[n]["lon"]) for n in route.nodes]
        s_lat, s_lon = self._sites[route.src]
        d_lat, d_lon = self._sites[route.dst]
        spans: list[list[tuple]] = [[(s_lat, s_lon, *pos[0], route.attach_km[0], False)]]
        current: list[tuple] = []
        for i, h in enumerate(route.hops):
            current.append((*pos[i], *pos[i + 1], h.km, h.sea))
            if g.nodes[h.b]["router"]:
                spans.append(current)
                current = []
        spans.append([(*pos[-1], d_lat, d_lon, route.attach_km[1], False)])
        for span in spans:
            length = sum(p[4] for p in span)
            for kind, spacing in dm.spacing_km.items():
                for k in range(1, dm.inline_count(kind, length) + 1):
                    at(kind, *_locate(span, k * spacing, length))
        return devices

    def energy_kwh(self, src: str, dst: str, gb: float) -> float:
        """Energy of moving `gb` GB from `src` to `dst` on the shortest route, kWh."""
        return self.route_energy(self.route(src, dst)).kwh_per_gb * _check_gb(gb)

    # -- carbon zones

    def zone_of(self, lat: float, lon: float) -> str:
        """The catalog zone whose grid powers a device at (lat, lon): the nearest zone
        (by its catalog coordinates) within `zone_max_km` whose traces cover the scenario,
        else FALLBACK_ZONE."""
        key = (round(lat, 6), round(lon, 6))
        zone = self._zone_at.get(key)
        if zone is None:
            zone = FALLBACK_ZONE
            if self._zones:
                names, lats, lons = zip(*self._zones, strict=True)
                d = great_circle_km(lat, lon, lats, lons)
                i = min(range(len(names)), key=lambda j: (d[j], names[j]))
                if d[i] <= self.config.zone_max_km:
                    zone = names[i]
            self._zone_at[key] = zone
        return zone

    def zone_signal(self, zone: str) -> CarbonSignal:
        """The carbon signal a zone's devices are charged at, over [0, horizon_s]; a
        constant `fallback_g_per_kwh` for FALLBACK_ZONE (cached)."""
        sig = self._signals.get(zone)
        if sig is None:
            if zone == FALLBACK_ZONE:
                sig = CarbonSignal.constant(self.config.fallback_g_per_kwh, self.horizon_s)
            else:
                series = zone_series(
                    zone, self.start, self.horizon_s, None, self.config.variant, self.years_rule
                )
                sig = CarbonSignal.from_series(
                    series, self.start, self.horizon_s, what=f"wan zone {zone}"
                )
            self._signals[zone] = sig
        return sig

    def _covering_zones(self) -> list[tuple[str, float, float]]:
        """Catalog zones (zone, lat, lon) whose traces cover the scenario under its `years`
        rule (`sim.grid.catalog.year_plan`), sorted by zone."""
        cat = catalog()
        out = []
        for zone, rows in cat.groupby("zone", sort=True):
            try:
                year_plan(str(zone), self.start, self.horizon_s, None, self.years_rule)
            except ScenarioError:
                continue
            out.append((str(zone), float(rows["lat"].iloc[0]), float(rows["lon"].iloc[0])))
        return out

    def year_plans(self) -> list[YearPlan]:
        """The year plans of the zones whose signals the run read so far, by zone."""
        return [
            year_plan(zone, self.start, self.horizon_s, None, self.years_rule)
            for zone in sorted(self._signals)
            if zone != FALLBACK_ZONE
        ]

    def carbon_g(self, zone: str, t0_s: float, t1_s: float) -> float:
        """Integral of `zone`'s intensity over [t0_s, t1_s], (g/kWh)*s; past the horizon the
        signal's last value holds."""
        if t0_s < 0 or t1_s < t0_s:
            raise ValueError(f"need 0 <= t0_s <= t1_s, got {t0_s}, {t1_s}")
        sig = self.zone_signal(zone)
        end = sig.end_s
        if t1_s <= end:
            return sig.integral(t0_s, t1_s)
        last = sig.value_at(end)
        if t0_s >= end:
            return last * (t1_s - t0_s)
        return sig.integral(t0_s, end) + last * (t1_s - end)

    # -- transfers

    def cost(self, src: str, dst: str, gb: float, t0_s: float, *, path: int = 0) -> Transfer:
        """What moving `gb` GB from `src` to `dst`, starting at `t0_s`, would take: time,
        energy, carbon. No side effects (for policies' what-ifs). `path` picks one of
        `routes(src, dst)` (0: the shortest). With contention, the transfer is priced at the
        rate it would get now beside the transfers in flight, held for its whole duration."""
        gb = _check_gb(gb)
        route = self._pick(src, dst, path)
        if src == dst:
            return self._zero(route, gb, t0_s)
        if self.config.contention:
            rate = self.transfers.what_if_rate_gbps(route)
        else:
            rate = self.solo_rate_gbps(route)
        return self.priced(route, gb, t0_s, rate)

    def totals(self, src: str, dst: str, gb: float, t0_s: float) -> tuple[float, float, float]:
        """(duration s, energy kWh, carbon kg) of `cost(src, dst, gb, t0_s)` on the shortest
        route without contention, the same numbers without building the `Transfer` record:
        what the engine charges and its policies ask for, many times a run."""
        if self.config.contention:
            t = self.cost(src, dst, gb, t0_s)
            return t.duration_s, t.energy_kwh, t.carbon_kg
        solo = self._solo.get((src, dst))
        if solo is None:
            route = self.route(src, dst)
            per_gb = tuple(
                (self.zone_signal(z), z, k)
                for z, k in self.route_energy(route).by_zone_kwh_per_gb.items()
            )
            solo = self._solo[src, dst] = (self.solo_rate_gbps(route), route.propagation_s, per_gb)
        gb = _check_gb(gb)
        if src == dst:
            return 0.0, 0.0, 0.0
        rate_gbps, propagation_s, per_gb = solo
        send_s = gb * GBIT_PER_GB / rate_gbps
        t1_s = t0_s + send_s
        energy_kwh = carbon_kg = 0.0
        for sig, zone, kwh_per_gb in per_gb:  # summed in route order, as `cost` does
            kwh = kwh_per_gb * gb
            energy_kwh += kwh
            if not send_s:
                continue
            if 0.0 <= t0_s and t1_s <= sig.end_s:  # within the zone's signal: carbon_g inlined
                carbon_kg += kwh * sig.integral(t0_s, t1_s) / send_s / 1000
            else:
                carbon_kg += kwh * self.carbon_g(zone, t0_s, t1_s) / send_s / 1000
        duration_s = (t0_s + send_s + propagation_s) - t0_s  # as Transfer.duration_s
        return duration_s, energy_kwh, carbon_kg

    def _zone_carbon_kg(self, zone: str, kwh: float, t0_s: float, send_s: float) -> float:
        """Carbon of `kwh` spent evenly in `zone` over [t0_s, t0_s + send_s], kg."""
        return kwh * self.carbon_g(zone, t0_s, t0_s + send_s) / send_s / 1000 if send_s else 0.0

    def transfer(self, src: str, dst: str, gb: float, t0_s: float, tag: Any = None) -> Transfer:
        """Move `gb` GB from `src` to `dst` starting at `t0_s`.

        Without contention the result is final and nothing is kept (the same as `cost`).
        With contention the transfer joins `transfers` and the result is its current
        estimate, with its `id`; the final record comes from `transfers.advance`."""
        if not self.config.contention:
            out = self.cost(src, dst, gb, t0_s)
            return out if tag is None else _with(out, tag=tag)
        tid = self.transfers.start(src, dst, gb, t0_s, tag=tag)
        return self.transfers.estimate(tid)

    def solo_rate_gbps(self, route: Route) -> float:
        """The rate of a transfer alone on `route`: its bottleneck, capped at `flow_gbps`."""
        cap = self.config.flow_gbps
        return route.bottleneck_gbps if cap is None else min(cap, route.bottleneck_gbps)

    def priced(self, route: Route, gb: float, t0_s: float, rate_gbps: float) -> Transfer:
        """A transfer of `gb` GB along `route` sent at a constant `rate_gbps` from `t0_s`."""
        if route.src == route.dst:
            return self._zero(route, gb, t0_s)
        send_s = gb * GBIT_PER_GB / rate_gbps
        energy = {z: k * gb for z, k in self.route_energy(route).by_zone_kwh_per_gb.items()}
        carbon = {z: self._zone_carbon_kg(z, e, t0_s, send_s) for z, e in energy.items()}
        return Transfer(
            route.src,
            route.dst,
            gb,
            t0_s,
            t0_s + send_s + route.propagation_s,
            route.propagation_s,
            sum(energy.values()),
            sum(carbon.values()),
            route,
            MappingProxyType(energy),
            MappingProxyType(carbon),
        )

    def _zero(self, route: Route, gb: float, t0_s: float) -> Transfer:
        return Transfer(route.src, route.dst, gb, t0_s, t0_s, 0.0, 0.0, 0.0, route)

    def _pick(self, src: str, dst: str, path: int) -> Route:
        if path == 0:
            return self.route(src, dst)
        options = self.routes(src, dst)
        if not 0 <= path < len(options):
            raise ValueError(f"path {path}: {src}->{dst} has {len(options)} route(s)")
        return options[path]

    # -- checks

    def _site(self, name: str) -> None:
        if name not in self._sites:
            raise ValueError(f"unknown site {name!r}; sites: {', '.join(self._sites)}")

    def _check_connected(self) -> None:
        seen: dict[int, str] = {}
        for site, att in self.attachments.items():
            comp = self.topology.component(att.node)
            if seen and comp not in seen:
                other = next(iter(seen.values()))
                o = self.attachments[other]
                raise ScenarioError(
                    f"wan: no route between sites {other!r} and {site!r}: their nodes "
                    f"{o.node_name!r} and {att.node_name!r} are not connected in topology "
                    f"{self.topology.name!r}"
                )
            seen.setdefault(comp, site)


def _locate(span: list[tuple], d_km: float, length: float) -> tuple[float, float]:
    """Where the device `d_km` along `span` is powered: on land, its position (interpolated
    along the piece's great circle); on a submarine piece, the span's nearer end (undersea
    repeaters are fed from the shore)."""
    run = 0.0
    for i, (lat1, lon1, lat2, lon2, km, sea) in enumerate(span):
        if d_km <= run + km or i == len(span) - 1:
            if sea:
                first, last = span[0], span[-1]
                return (first[0], first[1]) if d_km <= length / 2 else (last[2], last[3])
            f = min(1.0, max(0.0, (d_km - run) / km)) if km > 0 else 0.0
            return interpolate(lat1, lon1, lat2, lon2, f)
        run += km
    raise AssertionError("unreachable")


def _check_gb(gb: float) -> float:
    gb = float(gb)
    if not (math.isfinite(gb) and gb >= 0):
        raise ValueError(f"gb must be a finite number >= 0, got {gb}")
    return gb


def _with(t: Transfer, **changes: Any) -> Transfer:
    from dataclasses import replace

    return replace(t, **changes)
