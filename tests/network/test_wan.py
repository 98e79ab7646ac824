"""The WAN model (sim.network, docs/wan.md): routes, transfer time, energy, carbon, contention."""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pytest

from sim.config.loading import load_scenario
from sim.errors import ScenarioError
from sim.network import FALLBACK_ZONE, Wan, device_model, max_min_rates, per_gb_kwh
from sim.network.topology import great_circle_km, load_topology_file
from tests.conftest import REPO, make_scenario, scenario_wan, site

START_2019 = "2019-06-03T00:00:00Z"
FRA = (50.1109, 8.6821)  # the DE catalog point
STO = (59.3293, 18.0686)
MAD = (40.4168, -3.7038)
ROUTER_SITE_W_PER_GBPS = 10 + 2 * 0.05 + 1.5 + 1.5  # router, 2 WDM switches, transponder, muxponder
AMP, REGEN = 0.03, 3.0
OVERHEAD = 1.5 * 2.0  # default network PUE x redundancy
KWH_PER_GB_PER_W_PER_GBPS = 8 / 3.6e6  # 1 GB = 8 Gbit; W/Gbps = J/Gbit


def wan_of(sites: list[dict], start: str = START_2019, tmp_path: Path | None = None, **wan):
    sc = make_scenario(tmp_path, sites=sites, start=start, duration_h=48.0, wan=wan)
    return scenario_wan(sc)


def europe_sites() -> list[dict]:
    return [
        site(name="fra", lat=FRA[0], lon=FRA[1]),
        site(name="sto", lat=STO[0], lon=STO[1]),
        site(name="mad", lat=MAD[0], lon=MAD[1]),
    ]


def graphml(path: Path, nodes: dict, edges: list[tuple], **edge_attrs) -> Path:
    """A GraphML graph: nodes {id: (lat, lon) or (lat, lon, type)}, edges (u, v, attrs)."""
    g = nx.Graph()
    for n, spec in nodes.items():
        attrs = {"lat": spec[0], "lon": spec[1]}
        if len(spec) > 2:
            attrs["type"] = spec[2]
        g.add_node(n, **attrs)
    for u, v, attrs in edges:
        g.add_edge(u, v, **{**edge_attrs, **attrs})
    nx.write_graphml(g, path)
    return path


@pytest.fixture(scope="module")
def world() -> Wan:
    return wan_of(europe_sites(), topology="world")


# --- routes on the topohub world backbone -----------------------------------------------


@pytest.mark.parametrize("dst", ["sto", "mad"])
def test_routes_from_frankfurt_are_between_one_and_two_great_circles(world, dst):
    gc = great_circle_km(*FRA, *(STO if dst == "sto" else MAD))
    route = world.route("fra", dst)
    assert 1.0 * gc < route.km < 2.0 * gc
    assert route.km == pytest.approx(sum(route.attach_km) + sum(h.km for h in route.hops))
    assert route.propagation_s == pytest.approx(route.km / 204_190.0)
    assert world.route("fra", dst) is route  # cached


def test_sites_attach_to_the_nearest_city_and_the_distance_is_reported(world):
    fra = world.attachment("fra")
    assert (fra.node_name, round(fra.km, 1)) == ("Wiesbaden", 31.0)
    assert world.attachment("sto").node_name == "Stockholm"
    assert world.route("fra", "mad").names[0] == "Wiesbaden"


def test_k_paths_gives_distinct_routes_shortest_first(tmp_path):
    wan = wan_of(europe_sites(), topology="world", k_paths=3)
    routes = wan.routes("fra", "mad")
    assert len(routes) == 3 and routes[0] == wan.route("fra", "mad")
    assert [r.km for r in routes] == sorted(r.km for r in routes)
    assert len({r.nodes for r in routes}) == 3
    other = wan.cost("fra", "mad", 10.0, 0.0, path=2)
    assert other.route == routes[2]


# --- energy -------------------------------------------------------------------------------


def test_energy_and_carbon_are_linear_in_bytes_and_zero_for_a_same_site_move(world):
    one = world.cost("fra", "mad", 10.0, 3600.0)
    two = world.cost("fra", "mad", 20.0, 3600.0)
    assert two.energy_kwh == pytest.approx(2 * one.energy_kwh)
    assert two.carbon_kg == pytest.approx(2 * one.carbon_kg)
    assert one.energy_kwh > 0 and one.carbon_kg > 0
    same = world.cost("fra", "fra", 500.0, 3600.0)
    assert (same.duration_s, same.energy_kwh, same.carbon_kg, same.route_km) == (0, 0, 0, 0)


def test_transfer_time_is_propagation_plus_size_over_bottleneck(world):
    t = world.cost("fra", "mad", 100.0, 0.0)  # 800 Gbit at the default 100 Gbit/s
    assert t.duration_s == pytest.approx(8.0 + t.route.km / 204_190.0)
    capped = wan_of(europe_sites(), topology="world", flow_gbps=10.0)
    assert capped.cost("fra", "mad", 100.0, 0.0).duration_s == pytest.approx(80.0 + t.propagation_s)


def test_per_gb_follows_aslan_and_is_about_ten_times_the_path_model(world):
    assert per_gb_kwh(2015) == 0.06
    assert per_gb_kwh(2017) == pytest.approx(0.03)
    assert per_gb_kwh(2020) == pytest.approx(0.06 / 2**2.5)
    per_gb = wan_of(europe_sites(), topology="world", energy_model="per_gb")
    t = per_gb.cost("fra", "mad", 100.0, 0.0)
    assert t.energy_kwh == pytest.approx(100 * 0.015)  # 2019: 0.06 / 2^2
    path = world.cost("fra", "mad", 100.0, 0.0)
    assert 5 < t.energy_kwh / path.energy_kwh < 20  # docs/wan.md: per_gb ~ 11x path
    fixed = wan_of(europe_sites(), topology="world", energy_model="per_gb", per_gb_kwh=0.002)
    assert fixed.energy_kwh("fra", "mad", 100.0) == pytest.approx(0.2)
    none = wan_of(europe_sites(), topology="world", energy_model="none")
    t = none.cost("fra", "mad", 100.0, 0.0)
    assert (t.energy_kwh, t.carbon_kg) == (0, 0) and t.duration_s == path.duration_s


def test_device_counts_on_a_two_hop_1700_km_route(tmp_path):
    # A --900 km-- B --800 km-- C; sites on A and C. Routers at A, B, C; amplifiers strictly
    # inside each span every 80 km: 11 in 900 km (80..880), 9 in 800 km (80..720);
    # no span reaches 1,500 km, so no regenerator.
    path = graphml(
        tmp_path / "g.graphml",
        {"A": (50.0, 0.0), "B": (50.0, 12.0), "C": (50.0, 23.0)},
        [("A", "B", {"length_km": 900.0}), ("B", "C", {"length_km": 800.0})],
    )
    sites = [site(name="a", lat=50.0, lon=0.0), site(name="c", lat=50.0, lon=23.0)]
    wan = wan_of(sites, tmp_path=tmp_path, topology_file=str(path))
    route = wan.route("a", "c")
    assert (route.km, route.spans_km, route.router_hops) == (1700.0, (900.0, 800.0), 2)
    energy = wan.route_energy(route)
    assert energy.counts() == {
        "router": 3, "wdm_switch": 6, "transponder": 3, "muxponder": 3, "amplifier": 20,
    }  # fmt: skip
    w_per_gbps = 3 * ROUTER_SITE_W_PER_GBPS + 20 * AMP
    assert energy.kwh_per_gb == pytest.approx(w_per_gbps * OVERHEAD * KWH_PER_GB_PER_W_PER_GBPS)
    assert wan.cost("a", "c", 50.0, 0.0).energy_kwh == pytest.approx(50 * energy.kwh_per_gb)


def test_one_1700_km_span_through_a_cable_waypoint_has_a_regenerator(tmp_path):
    # A -- W (a submarine-cable waypoint, not a router) -- C: one span of 1,700 km:
    # amplifiers at 80..1680 (21), a regenerator at 1,500 km; routers only at A and C.
    # On a submarine span every in-line device is powered from the nearer shore end.
    path = graphml(
        tmp_path / "g.graphml",
        {"A": (50.0, 0.0), "W": (50.0, 12.0, "Seacable Waypoint"), "C": (50.0, 23.0)},
        [("A", "W", {"length_km": 900.0}), ("W", "C", {"length_km": 800.0})],
        type="seacable",
    )
    sites = [site(name="a", lat=50.0, lon=0.0), site(name="c", lat=50.0, lon=23.0)]
    wan = wan_of(sites, tmp_path=tmp_path, topology_file=str(path))
    route = wan.route("a", "c")
    assert (route.router_nodes, route.spans_km) == (("A", "C"), (1700.0,))
    energy = wan.route_energy(route)
    counts = energy.counts()
    assert (counts["router"], counts["amplifier"], counts["regenerator"]) == (2, 21, 1)
    inline = [d for d in energy.devices if d.kind in ("amplifier", "regenerator")]
    assert {(d.lat, d.lon) for d in inline} == {(50.0, 0.0), (50.0, 23.0)}
    near_c = [d for d in inline if d.lon == 23.0]
    assert len(near_c) == 11 + 1  # amplifiers at 880..1680 km, the regenerator at 1,500 km


def test_span_length_rule_and_attachment_legs(tmp_path):
    dm = device_model()
    assert [dm.inline_count("amplifier", km) for km in (0, 79.9, 80, 80.1, 160, 1700)] == [
        0, 0, 0, 1, 1, 21,
    ]  # fmt: skip
    assert [dm.inline_count("regenerator", km) for km in (1500, 1500.1, 3000.1)] == [0, 1, 2]
    # A site 1 degree of latitude (111 km) from its node: its leg holds one amplifier.
    path = graphml(
        tmp_path / "g.graphml",
        {"A": (50.0, 0.0), "B": (50.0, 1.0)},
        [("A", "B", {"length_km": 70})],
    )
    sites = [site(name="a", lat=51.0, lon=0.0), site(name="b", lat=50.0, lon=1.0)]
    wan = wan_of(sites, tmp_path=tmp_path, topology_file=str(path))
    route = wan.route("a", "b")
    assert route.attach_km[0] == pytest.approx(111.2, abs=0.1)
    assert wan.route_energy(route).counts()["amplifier"] == 1


# --- carbon -------------------------------------------------------------------------------


def two_zone_wan(tmp_path: Path, **wan) -> Wan:
    """Two 120 km links of the same length: Warsaw-Lodz (Poland, coal) and Oslo-south of
    Oslo (Norway, hydro), joined by a long link so that all four sites are connected."""
    nodes = {"P1": (52.23, 21.01), "P2": (51.76, 19.46), "N1": (59.91, 10.75), "N2": (59.0, 10.0)}
    edges = [
        ("P1", "P2", {"length_km": 120.0}),
        ("N1", "N2", {"length_km": 120.0}),
        ("P2", "N2", {"length_km": 1000.0}),
    ]
    path = graphml(tmp_path / "g.graphml", nodes, edges)
    sites = [site(name=n.lower(), lat=lat, lon=lon) for n, (lat, lon) in nodes.items()]
    return wan_of(sites, tmp_path=tmp_path, topology_file=str(path), **wan)


def test_each_device_is_charged_at_its_own_zone_coal_costs_more_than_hydro(tmp_path):
    wan = two_zone_wan(tmp_path)
    poland = wan.cost("p1", "p2", 100.0, 6 * 3600.0)
    norway = wan.cost("n1", "n2", 100.0, 6 * 3600.0)
    assert poland.energy_kwh == pytest.approx(norway.energy_kwh)
    assert set(poland.carbon_by_zone_kg) == {"PL"} and set(norway.carbon_by_zone_kg) == {"NO"}
    assert poland.carbon_kg > 10 * norway.carbon_kg
    # Exact: constant power over the sending window times the zone's real signal.
    send_s = poland.duration_s - poland.propagation_s
    ci = wan.zone_signal("PL").integral(6 * 3600.0, 6 * 3600.0 + send_s) / send_s
    assert poland.carbon_kg == pytest.approx(poland.energy_kwh * ci / 1000)
    assert ci == pytest.approx(wan.zone_signal("PL").value_at(6 * 3600.0))  # within one hour


def test_totals_are_the_numbers_of_cost_bit_for_bit(world):
    for src, dst in [("fra", "sto"), ("mad", "sto"), ("sto", "fra"), ("fra", "fra")]:
        for gb, t0_s in [(50.0, 0.0), (500.0, 5000.5), (1.0, 40 * 3600.0), (0.0, 10.0)]:
            t = world.cost(src, dst, gb, t0_s)
            assert world.totals(src, dst, gb, t0_s) == (t.duration_s, t.energy_kwh, t.carbon_kg)
    with pytest.raises(ValueError, match="unknown site"):
        world.totals("fra", "lisbon", 1.0, 0.0)


def test_devices_far_from_every_zone_use_the_world_average(tmp_path):
    path = graphml(
        tmp_path / "g.graphml", {"A": (51.17, 71.45), "B": (49.8, 73.1)}, [("A", "B", {})]
    )  # Astana - Karaganda: no catalog zone within 1,000 km
    sites = [site(name="a", lat=51.17, lon=71.45), site(name="b", lat=49.8, lon=73.1)]
    wan = wan_of(sites, tmp_path=tmp_path, topology_file=str(path))
    t = wan.cost("a", "b", 10.0, 0.0)
    assert set(t.carbon_by_zone_kg) == {FALLBACK_ZONE}
    assert t.carbon_kg == pytest.approx(t.energy_kwh * 436.0 / 1000)
    assert wan.route("a", "b").km == pytest.approx(great_circle_km(51.17, 71.45, 49.8, 73.1))


def test_a_transfer_past_the_horizon_holds_the_last_intensity(tmp_path):
    wan = two_zone_wan(tmp_path, link_gbps=0.001)  # 10 GB at 1 Mbit/s: 22 h
    t = wan.cost("p1", "p2", 10.0, 40 * 3600.0)  # the horizon is 48 h
    assert t.end_s > wan.horizon_s and t.carbon_kg > 0


# --- scenario keys and errors ------------------------------------------------------------


def test_a_site_too_far_from_the_graph_is_an_error_naming_site_node_and_distance():
    with pytest.raises(ScenarioError) as err:
        wan_of(europe_sites(), topology="north_america")
    msg = str(err.value)
    assert "\n" not in msg and "wan.max_attach_km" in msg
    assert "'fra'" in msg and "'Milton'" in msg and "4391.7 km" in msg
    with pytest.raises(ScenarioError, match=r"'ship' .* 224\.1 km .*'Gijón'; the limit is 100 km"):
        wan_of([site(name="ship", lat=45.5, lon=-5.0)], topology="europe", max_attach_km=100)


@pytest.mark.parametrize(
    "wan, match",
    [
        ({"topology": "wrld"}, r"wan\.topology: unknown topohub topology 'wrld' \(did you mean"),
        ({"topology": "gabriel/25/0"}, r"wan\.topology: 'gabriel/25/0'.*without latitude"),
        ({"topology": "sndlib/atlanta"}, r"wan\.topology: 'sndlib/atlanta'.*plane coordinates"),
        ({}, r"wan: give exactly one of topology, topology_file \(got none\)"),
        ({"topology": "world", "per_gb_kwh": 0.01}, r'wan: per_gb_kwh is only meaningful with'),
        ({"topology": "world", "energy_model": "x"}, r"wan\.energy_model: .*'x'"),
        ({"topology": "world", "max_attach_km": -1}, r"wan\.max_attach_km: .*-1"),
    ],
)  # fmt: skip
def test_bad_wan_keys_are_one_line_errors_naming_key_and_value(wan, match):
    with pytest.raises(ScenarioError, match=match) as err:
        make_scenario(wan=wan)
    assert "\n" not in str(err.value)


def test_bad_topology_files_are_one_line_errors_naming_key_and_file(tmp_path):
    (tmp_path / "broken.graphml").write_text("<graphml><oops")
    nx.write_graphml(nx.path_graph(3), tmp_path / "nocoords.graphml")
    cases = {
        "missing.graphml": r"wan\.topology_file: cannot read .*missing\.graphml \(no such file\)",
        "broken.graphml": r"wan\.topology_file: .*broken\.graphml: not a valid GraphML graph",
        "nocoords.graphml": r"wan\.topology_file: .*nocoords\.graphml: 0 node\(s\) with coord",
        "graph.txt": r"wan\.topology_file: .*graph\.txt: expected a \.graphml or \.gml file",
    }
    for name, match in cases.items():
        with pytest.raises(ScenarioError, match=match) as err:
            wan_of([site(name="a")], tmp_path=tmp_path, topology_file=name)
        assert "\n" not in str(err.value)


def test_topology_file_is_relative_to_the_scenario_and_the_scenario_round_trips(tmp_path):
    graphml(tmp_path / "net.graphml", {"A": (50.0, 8.0), "B": (52.5, 13.4)}, [("A", "B", {})])
    text = (REPO / "scenarios" / "quickstart.toml").read_text()
    study = tmp_path / "study.toml"
    study.write_text(text + '\n[wan]\ntopology_file = "net.graphml"\ncontention = true\n')
    sc = load_scenario(study)
    assert sc.wan.topology_file == tmp_path / "net.graphml"
    again = tmp_path / "again.toml"
    again.write_text(sc.to_toml())
    assert load_scenario(again).wan == sc.wan


def test_disconnected_sites_are_an_error_naming_both(tmp_path):
    path = graphml(
        tmp_path / "g.graphml",
        {"A": (50.0, 8.0), "B": (50.5, 8.5), "C": (40.0, -3.7), "D": (40.5, -3.2)},
        [("A", "B", {}), ("C", "D", {})],
    )
    sites = [site(name="fra", lat=50.0, lon=8.0), site(name="mad", lat=40.0, lon=-3.7)]
    with pytest.raises(ScenarioError, match=r"no route between sites 'fra' and 'mad'"):
        wan_of(sites, tmp_path=tmp_path, topology_file=str(path))


def test_topology_zoo_gml_files_load_with_capacities(tmp_path):
    gml = tmp_path / "zoo.gml"
    gml.write_text(
        "graph [\n  multigraph 1\n"
        '  node [ id 0 label "Oslo" Longitude 10.75 Latitude 59.91 ]\n'
        '  node [ id 1 label "Stockholm" Longitude 18.07 Latitude 59.33 ]\n'
        '  node [ id 2 label "Cloud" ]\n'
        "  edge [ source 0 target 1 LinkSpeedRaw 10000000000.0 ]\n"
        "  edge [ source 1 target 2 ]\n"
        "]\n"
    )
    topo = load_topology_file(gml)
    assert topo.dropped_nodes == 1 and topo.graph.number_of_nodes() == 2
    sites = [site(name="osl", lat=59.91, lon=10.75), site(name="sto", lat=59.33, lon=18.07)]
    wan = wan_of(sites, tmp_path=tmp_path, topology_file=str(gml))
    t = wan.cost("osl", "sto", 12.5, 0.0)  # 100 Gbit over the 10 Gbit/s link
    assert t.duration_s == pytest.approx(10.0 + t.propagation_s)


# --- contention ---------------------------------------------------------------------------


def line_wan(tmp_path: Path, **wan) -> Wan:
    """a -- b over a 10 Gbit/s link; b -- c at 100 Gbit/s; the legs are not the bottleneck."""
    path = graphml(
        tmp_path / "g.graphml",
        {"A": (50.0, 8.0), "B": (50.0, 10.0), "C": (52.0, 10.0)},
        [("A", "B", {"capacity_gbps": 10.0}), ("B", "C", {"capacity_gbps": 100.0})],
    )
    sites = [
        site(name=n, lat=lat, lon=lon)
        for n, lat, lon in [("a", 50, 8), ("b", 50, 10), ("c", 52, 10)]
    ]
    return wan_of(sites, tmp_path=tmp_path, topology_file=str(path), link_gbps=1000.0, **wan)


def run_all(wan: Wan) -> list:
    done = []
    while (t := wan.transfers.next_event_s()) is not None:
        done += wan.transfers.advance(t)
    return done


def test_two_concurrent_transfers_on_one_bottleneck_each_take_twice_as_long(tmp_path):
    wan = line_wan(tmp_path, contention=True)
    alone = wan.cost("a", "b", 12.5, 0.0)  # 100 Gbit at 10 Gbit/s: 10 s
    assert alone.duration_s - alone.propagation_s == pytest.approx(10.0)
    wan.transfers.start("a", "b", 12.5, 0.0, tag="x")
    wan.transfers.start("a", "b", 12.5, 0.0, tag="y")
    done = run_all(wan)
    assert [t.tag for t in done] == ["x", "y"]
    for t in done:
        assert t.duration_s - t.propagation_s == pytest.approx(20.0)
        assert t.energy_kwh == pytest.approx(alone.energy_kwh)
        assert t.carbon_kg == pytest.approx(alone.carbon_kg, rel=1e-3)  # DE: flat within the hour


def test_rates_are_recomputed_when_transfers_start_and_end(tmp_path):
    wan = line_wan(tmp_path, contention=True)
    x = wan.transfers.start("a", "b", 12.5, 0.0)  # alone: done sending at 10 s
    assert wan.transfers.eta_s(x) == pytest.approx(10.0, abs=1e-2)
    wan.transfers.start("a", "b", 12.5, 5.0)  # from 5 s both at 5 Gbit/s
    assert wan.transfers.advance(5.0) == []
    # x: 50 Gbit left at 5 s -> done at 15 s; y: 50 Gbit by 15 s, then alone -> 20 s.
    prop = wan.route("a", "b").propagation_s
    ends = {t.id: t.end_s - prop for t in run_all(wan)}
    assert ends == pytest.approx({0: 15.0, 1: 20.0})
    # Without contention the two do not interact.
    free = line_wan(tmp_path, contention=False)
    free.transfers.start("a", "b", 12.5, 0.0)
    free.transfers.start("a", "b", 12.5, 5.0)
    assert [t.end_s - prop for t in run_all(free)] == pytest.approx([10.0, 15.0])


def test_max_min_fair_share_gives_unused_capacity_to_others():
    narrow, wide = ("L1", 10.0), ("L2", 100.0)
    assert max_min_rates([(narrow, wide), (narrow,), (wide,)]) == pytest.approx([5, 5, 95])
    assert max_min_rates([(narrow, wide), (narrow,), (wide,)], flow_cap=4.0) == [4, 4, 4]
    # Full duplex: opposite directions of a link do not compete.
    assert max_min_rates([((("edge", "A", "B"), 10.0),), ((("edge", "B", "A"), 10.0),)]) == [
        10, 10,
    ]  # fmt: skip


def test_random_transfers_never_overload_a_link_and_all_arrive(tmp_path):
    import random

    wan = line_wan(tmp_path, contention=True)
    rng = random.Random(3)
    now, alone, done = 0.0, {}, []
    for _ in range(200):
        now += rng.expovariate(1.0)
        while (t := wan.transfers.next_event_s()) is not None and t <= now:
            done += wan.transfers.advance(t)
        src, dst, gb = rng.choice("abc"), rng.choice("abc"), rng.uniform(0.0, 5.0)
        route = wan.route(src, dst)
        tid = wan.transfers.start(src, dst, gb, now)
        alone[tid] = wan.priced(route, gb, now, wan.solo_rate_gbps(route))
        load: dict = {}
        for f in wan.transfers._flows.values():
            for key, cap in f.route.links:
                load[key] = load.get(key, 0.0) + wan.transfers.rate_gbps(f.id)
                assert load[key] <= cap * (1 + 1e-9)
    done += run_all(wan)
    assert sorted(d.id for d in done) == sorted(alone)
    for d in done:
        assert d.duration_s >= alone[d.id].duration_s * (1 - 1e-9)  # never faster than alone
        assert d.energy_kwh == pytest.approx(alone[d.id].energy_kwh)


def test_cost_sees_transfers_in_flight_without_changing_them(tmp_path):
    wan = line_wan(tmp_path, contention=True)
    wan.transfers.start("a", "c", 125.0, 0.0)
    what_if = wan.cost("a", "b", 12.5, 1.0)
    assert what_if.duration_s - what_if.propagation_s == pytest.approx(20.0)  # half of 10 Gbit/s
    assert len(wan.transfers) == 1
    assert wan.cost("b", "c", 12.5, 1.0).duration_s < 2  # the B-C link has room: 90 Gbit/s
    est = wan.transfer("a", "b", 12.5, 1.0, tag="job-7")
    assert est.id == 1 and est.tag == "job-7" and len(wan.transfers) == 2


def test_a_lone_transfer_in_flight_costs_what_cost_said(tmp_path):
    wan = two_zone_wan(tmp_path, contention=True, link_gbps=0.01)  # 10 GB: 2.2 h, hourly steps
    said = wan.cost("p1", "p2", 10.0, 1800.0)
    wan.transfers.start("p1", "p2", 10.0, 1800.0)
    (done,) = run_all(wan)
    assert done.end_s == pytest.approx(said.end_s)
    assert done.energy_kwh == pytest.approx(said.energy_kwh)
    assert done.carbon_kg == pytest.approx(said.carbon_kg)
    assert wan.transfers.next_event_s() is None


# --- derived data -------------------------------------------------------------------------


def test_network_energy_toml_is_what_the_script_derives(shared_data, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "derive_network_energy", REPO / "scripts" / "derive_network_energy.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "network_energy.toml"
    data = shared_data / "network-energy" / "network_device.yaml"
    assert mod.main(["--data", str(data), "--out", str(out)]) == 0
    assert out.read_text() == (REPO / "sim" / "data" / "network_energy.toml").read_text()
    dm = device_model()
    assert dm.router_site_w_per_gbps == pytest.approx(ROUTER_SITE_W_PER_GBPS)
    assert (dm.w_per_gbps["amplifier"], dm.w_per_gbps["regenerator"]) == (AMP, REGEN)
    assert dict(dm.spacing_km) == {"amplifier": 80.0, "regenerator": 1500.0}
    assert math.isclose(per_gb_kwh(2015), 0.06)
