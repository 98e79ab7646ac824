"""WAN graphs: topohub topologies or a user's GraphML/GML file -> one normalised `Topology`.

Normalised graph (an undirected, frozen `networkx.Graph`):

- node attributes: `name` (str), `lat`, `lon` (degrees), `router` (bool: a router site,
  where sites may attach and where the `path` energy model places a router; False only
  for topohub's "Seacable Waypoint" nodes, bends of a submarine cable);
- edge attributes: `km` (length: the data's `dist`/`length_km`, else the great-circle
  distance between the endpoints), `gbps` (capacity from the data, or None), `sea` (a
  submarine cable).

Parallel edges collapse to the shortest; self-loops are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import ScenarioError
from sim.models.topologies import bare_name, topohub_key

if TYPE_CHECKING:
    import networkx as nx

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG), km, of every great-circle distance in `sim.network`."""

WAYPOINT_TYPES = {"seacable waypoint"}
SEA_EDGE_TYPES = {"seacable", "submarine"}
LAT_KEYS = ("lat", "latitude")
LON_KEYS = ("lon", "lng", "long", "longitude")
LENGTH_KEYS = ("length_km", "dist", "distance_km")


def great_circle_km(lat1: Any, lon1: Any, lat2: Any, lon2: Any) -> Any:
    """Great-circle (haversine) distance, km, on a sphere of radius `EARTH_RADIUS_KM`.
    Scalars or numpy arrays (broadcast)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dlat = p2 - p1
    dlon = np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin(dlat / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlon / 2) ** 2
    d = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))
    return float(d) if np.ndim(d) == 0 else d


def interpolate(
    lat1: float, lon1: float, lat2: float, lon2: float, f: float
) -> tuple[float, float]:
    """The point a fraction `f` of the way along the great circle from point 1 to point 2."""
    a = _unit(lat1, lon1)
    b = _unit(lat2, lon2)
    omega = math.acos(max(-1.0, min(1.0, float(np.dot(a, b)))))
    if omega < 1e-12:
        return lat1, lon1
    v = (math.sin((1 - f) * omega) * a + math.sin(f * omega) * b) / math.sin(omega)
    return math.degrees(math.asin(max(-1.0, min(1.0, v[2])))), math.degrees(math.atan2(v[1], v[0]))


def _unit(lat: float, lon: float) -> np.ndarray:
    p, q = math.radians(lat), math.radians(lon)
    return np.array([math.cos(p) * math.cos(q), math.cos(p) * math.sin(q), math.sin(p)])


@dataclass(frozen=True, eq=False)
class Topology:
    """A normalised WAN graph (module docstring) and where it came from."""

    name: str
    """"world", "topozoo/Abilene", or the file's path."""
    graph: nx.Graph
    dropped_nodes: int = 0
    """Nodes of a file left out because they have no coordinates (with their edges)."""
    lengths_from_data: int = 0
    """Edges whose length the data gave; the others are great-circle distances."""
    _routers: np.ndarray = field(init=False, repr=False)
    _lat: np.ndarray = field(init=False, repr=False)
    _lon: np.ndarray = field(init=False, repr=False)
    _component: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import networkx as nx  # imported where a WAN is built: `import sim` does not pay for it

        routers = [n for n, r in self.graph.nodes(data="router") if r]
        nodes = self.graph.nodes
        object.__setattr__(self, "_routers", np.array(routers, dtype=object))
        object.__setattr__(self, "_lat", np.array([nodes[n]["lat"] for n in routers], float))
        object.__setattr__(self, "_lon", np.array([nodes[n]["lon"] for n in routers], float))
        comp = {n: i for i, c in enumerate(nx.connected_components(self.graph)) for n in c}
        object.__setattr__(self, "_component", comp)

    def nearest_router(self, lat: float, lon: float) -> tuple[Hashable, float]:
        """The router node nearest to (lat, lon) by great-circle distance, and that distance
        in km (ties: the first node in the graph's order)."""
        d = great_circle_km(lat, lon, self._lat, self._lon)
        i = int(np.argmin(d))
        return self._routers[i], float(d[i])

    def component(self, node: Hashable) -> int:
        """Index of the connected component of `node` (nodes in one component are connected)."""
        return self._component[node]

    def node_name(self, node: Hashable) -> str:
        return self.graph.nodes[node]["name"]


# --- topohub ------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def load_topohub(name: str) -> Topology:
    """A topohub topology by scenario name (see `topohub_key`), normalised; cached."""
    import networkx as nx
    import topohub

    key = topohub_key(name)
    data = topohub.get(key)
    g = nx.Graph()
    for n in data["nodes"]:
        lon, lat = n["pos"]
        kind = str(n.get("type", "")).lower()
        label = n.get("name") or f"{n.get('type', 'node')} {n['id']}"
        g.add_node(
            n["id"],
            name=str(label),
            lat=float(lat),
            lon=float(lon),
            router=kind not in WAYPOINT_TYPES,
        )
    from_data = 0
    for e in data["edges"]:
        u, v = e["source"], e["target"]
        if u == v:
            continue
        km = e.get("dist")
        if km is None:
            km = _gc(g, u, v)
        else:
            from_data += 1
        sea = str(e.get("type", "")).lower() in SEA_EDGE_TYPES
        _add_edge(g, u, v, float(km), None, sea)
    return Topology(bare_name(key), nx.freeze(g), 0, from_data)


# --- files --------------------------------------------------------------------------------


def load_topology_file(path: str | Path, key: str = "wan.topology_file") -> Topology:
    """A GraphML (.graphml) or GML (.gml) graph, normalised (module docstring).

    Nodes need latitude/longitude attributes (`lat`/`latitude`, `lon`/`lng`/`long`/
    `longitude`, any case); nodes without them are dropped with their edges and counted
    (`Topology.dropped_nodes`), as topohub does with the Topology Zoo. Edge length: the
    first of `length_km`, `dist`, `distance_km` (km), else the great-circle distance.
    Capacity: `capacity_gbps` (Gbit/s), else `LinkSpeedRaw` (bit/s, Topology Zoo).
    Raises ScenarioError prefixed with `key`, naming the file and the bad node or edge.
    """
    import networkx as nx

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".graphml", ".gml"):
        raise ScenarioError(f"{key}: {path}: expected a .graphml or .gml file, got {suffix!r}")
    if not path.is_file():
        raise ScenarioError(f"{key}: cannot read {path} (no such file)")
    try:
        raw = nx.read_graphml(path) if suffix == ".graphml" else nx.read_gml(path, label=None)
    except Exception as e:  # networkx raises many kinds on malformed files
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        kind = "GraphML" if suffix == ".graphml" else "GML"
        raise ScenarioError(f"{key}: {path}: not a valid {kind} graph ({first})") from None
    g = nx.Graph()
    dropped = 0
    for n, attrs in raw.nodes(data=True):
        low = {str(k).lower(): v for k, v in attrs.items()}
        lat, lon = _first(low, LAT_KEYS), _first(low, LON_KEYS)
        if lat is None or lon is None:
            dropped += 1
            continue
        lat, lon = (
            _number(lat, f"{key}: {path}: node {n!r} latitude"),
            _number(lon, f"{key}: {path}: node {n!r} longitude"),
        )
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise ScenarioError(
                f"{key}: {path}: node {n!r} has lat/lon ({lat}, {lon}) outside [-90, 90] x "
                "[-180, 180]"
            )
        name = low.get("name", low.get("label", n))
        kind = str(low.get("type", "")).lower()
        g.add_node(n, name=str(name), lat=lat, lon=lon, router=kind not in WAYPOINT_TYPES)
    if g.number_of_nodes() < 2:
        raise ScenarioError(
            f"{key}: {path}: {g.number_of_nodes()} node(s) with coordinates, need at least 2 "
            f"(attributes {'/'.join(LAT_KEYS)} and {'/'.join(LON_KEYS)}, any case)"
        )
    from_data = 0
    for u, v, attrs in raw.edges(data=True):
        if u == v or u not in g or v not in g:
            continue
        low = {str(k).lower(): val for k, val in attrs.items()}
        where = f"{key}: {path}: edge {u!r}-{v!r}"
        km = _first(low, LENGTH_KEYS)
        if km is None:
            km = _gc(g, u, v)
        else:
            km = _number(km, f"{where} length")
            from_data += 1
        if not km >= 0:
            raise ScenarioError(f"{where} has length {km} km, expected >= 0")
        gbps = None
        if low.get("capacity_gbps") is not None:
            gbps = _number(low["capacity_gbps"], f"{where} capacity_gbps")
        elif low.get("linkspeedraw") is not None:
            gbps = _number(low["linkspeedraw"], f"{where} LinkSpeedRaw") / 1e9
        if gbps is not None and not gbps > 0:
            raise ScenarioError(f"{where} has capacity {gbps} Gbit/s, expected > 0")
        sea = str(low.get("type", "")).lower() in SEA_EDGE_TYPES
        _add_edge(g, u, v, km, gbps, sea)
    if g.number_of_edges() == 0:
        raise ScenarioError(f"{key}: {path}: no edge between nodes with coordinates")
    return Topology(str(path), nx.freeze(g), dropped, from_data)


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if attrs.get(k) is not None and attrs.get(k) != "":
            return attrs[k]
    return None


def _number(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ScenarioError(f"{what} is not a number: {value!r}") from None
    if not math.isfinite(x):
        raise ScenarioError(f"{what} is not finite: {value!r}")
    return x


def _gc(g: nx.Graph, u: Hashable, v: Hashable) -> float:
    a, b = g.nodes[u], g.nodes[v]
    return great_circle_km(a["lat"], a["lon"], b["lat"], b["lon"])


def _add_edge(
    g: nx.Graph, u: Hashable, v: Hashable, km: float, gbps: float | None, sea: bool
) -> None:
    """Add an edge; a parallel edge keeps the shorter of the two."""
    if g.has_edge(u, v) and g.edges[u, v]["km"] <= km:
        return
    g.add_edge(u, v, km=km, gbps=gbps, sea=sea)
