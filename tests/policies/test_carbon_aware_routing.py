"""carbon_aware_routing: each service's requests go to the sites of least carbon per request
that keep its time-to-first-token budget and its data residency, up to the capacity of the
replicas there; with `scale`, its replicas go to the clean sites too.

Three sites with constant grids: the origin a (Frankfurt, 400 g/kWh), b (Paris, 4.7 ms
round trip, 100 g/kWh) and far (Sydney, 161 ms round trip, 20 g/kWh: the cleanest)."""

from __future__ import annotations

import pandas as pd
import pytest

import sim
from policies.carbon_aware_routing import CarbonAwareRouting, SiteOption, fill_cleanest_first
from policies.chain import Chain
from policies.serve_autoscale import ServeAutoscale
from sim.api import Route
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

H100 = [{"model": "H100-SXM", "count": 8}]
SITES = [
    site(carbon={"constant_g_per_kwh": 400.0}, gpus=H100),
    site(name="b", lat=48.9, lon=2.35, carbon={"constant_g_per_kwh": 100.0}, gpus=H100),
    site(name="far", lat=-33.9, lon=151.2, carbon={"constant_g_per_kwh": 20.0}, gpus=H100),
]
SITE_INDEX = {"a": 0, "b": 1, "far": 2}  # the requests table's `site`: index in the service's


def scenario(ttft_ms=1000.0, rate_per_s=5.0, replicas=None, duration_h=0.5):
    """chat, from a, may run at its `replicas`' sites (default: one replica at each)."""
    replicas = replicas or {"a": 1, "b": 1, "far": 1}
    chat = {
        "name": "chat",
        "model": "Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "gpus_per_replica": 1,
        "max_batch": 64,
        "sites": list(replicas),
        "replicas": replicas,
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": 100},
        "requests": {"rate_per_s": rate_per_s},
    }
    return make_scenario(
        sites=SITES, services=[chat], duration_h=duration_h, serving={"fidelity": "request"}
    )


def share_by_site(result) -> pd.Series:
    """Share of the requests sent to each site (by name)."""
    sites = result.requests["site"].map({k: s for s, k in SITE_INDEX.items()})
    return sites.value_counts(normalize=True)


def test_a_clean_site_beyond_the_ttft_budget_gets_no_requests_a_near_one_does():
    """TTFT 400 ms less the 300 ms margin leaves 100 ms of round trip: far (161 ms) is out
    although it is the cleanest grid, b (4.7 ms) takes the requests. With a 2 s target
    the same policy sends them to far: the rule is what keeps them away."""
    tight = share_by_site(sim.simulate(scenario(ttft_ms=400.0), CarbonAwareRouting()))
    assert "far" not in tight and tight["b"] > 0.99
    loose = share_by_site(sim.simulate(scenario(ttft_ms=2000.0), CarbonAwareRouting()))
    assert loose["far"] > 0.99


def test_a_site_outside_the_services_residency_gets_no_requests():
    """b is the cleanest site within the latency budget and has a replica ready, but chat's
    data may only go to a: no request is served at b (nor at far)."""
    policy = CarbonAwareRouting(allowed_sites={"chat": ["a"]})
    r = sim.simulate(scenario(), policy)
    assert set(r.requests["site"]) == {SITE_INDEX["a"]}
    assert r.summary["requests_served"] > 0.99 * r.summary["requests_total"]


def test_with_scale_a_replica_outside_the_residency_serves_nothing():
    """chat may only go to b but starts with its replica at a: that replica is taken away
    at the first decision, so the requests of b's cold start are dropped, never served
    at a."""
    sc = scenario(replicas={"a": 1, "b": 0})
    r = sim.simulate(sc, CarbonAwareRouting(scale=True, allowed_sites={"chat": ["b"]}))
    served = r.requests[r.requests["state"] == "served"]
    assert set(served["site"]) == {SITE_INDEX["b"]}
    assert r.summary["requests_served"] > 0.99 * r.summary["requests_total"]


def test_the_cleanest_site_takes_no_more_than_its_capacity_share():
    """12 requests/s against one replica at b serving 11.6/s with its batch full: b gets
    at most 80 % of that (the utilisation target), a the rest. Sending all to b, the
    cleanest, would overload it."""
    sc = scenario(rate_per_s=12.0, replicas={"a": 1, "b": 1})
    r = sim.simulate(sc, CarbonAwareRouting())
    h = PolicyHarness(sc)
    capacity_b = 0.8 * h.state.service("chat").capacity_rps("b")
    assert capacity_b < 12.0
    share = share_by_site(r)
    assert 0.9 * capacity_b / 12.0 < share["b"] <= capacity_b / 12.0 + 0.01
    assert share["a"] == pytest.approx(1.0 - share["b"])
    assert r.summary["slo_attainment"] > 0.99


def test_greedy_fill_is_the_least_carbon_split():
    """The fractional knapsack: cleanest first, each up to its share; the excess over all
    of them in proportion to their capacity."""
    options = [SiteOption("x", 2.0, 10.0), SiteOption("y", 1.0, 5.0), SiteOption("z", 3.0, 5.0)]
    assert fill_cleanest_first(options, 10.0, 0.8) == {"y": 4.0, "x": 6.0}
    over = fill_cleanest_first(options, 20.0, 0.5)
    assert over == pytest.approx({"y": 2.5 + 2.5, "x": 5.0 + 5.0, "z": 2.5 + 2.5})
    assert sum(over.values()) == pytest.approx(20.0)


def test_with_scale_it_emits_less_per_token_than_serving_at_the_origin():
    """One replica at the origin a to start. serve_autoscale adds replicas at a (its first
    site) and the requests stay there; carbon_aware_routing with `scale` starts them at b
    (a quarter of a's intensity, within the budget), routes there once they serve, and only
    then takes a's replica away."""
    sc = scenario(replicas={"a": 1, "b": 0}, duration_h=1.0)
    origin = sim.simulate(sc, ServeAutoscale()).summary
    clean = sim.simulate(sc, CarbonAwareRouting(scale=True)).summary
    assert clean["carbon_per_1k_tokens_g"] < 0.6 * origin["carbon_per_1k_tokens_g"]
    assert clean["requests_dropped"] == 0  # a's replica served until b's did
    assert clean["slo_attainment"] > 0.99


def test_route_only_after_serve_autoscale_routes_to_the_clean_replicas():
    """Chained after serve_autoscale, which sizes the replicas (it keeps the two it starts
    with, one at a and one at b), it only routes: all to b, where the default splits the
    requests by replicas, half to a. Fewer grams per 1,000 tokens."""
    sc = scenario(replicas={"a": 1, "b": 1}, rate_per_s=3.0)
    sizing = ServeAutoscale(min_replicas=2)
    default = sim.simulate(sc, sizing).summary
    routed = sim.simulate(sc, Chain([sizing, CarbonAwareRouting()]))
    assert share_by_site(routed)["b"] > 0.99
    assert routed.summary["carbon_per_1k_tokens_g"] < default["carbon_per_1k_tokens_g"]


def test_it_is_deterministic():
    sc = scenario(rate_per_s=12.0, replicas={"a": 1, "b": 0})
    a = sim.simulate(sc, CarbonAwareRouting(scale=True))
    b = sim.simulate(sc, CarbonAwareRouting(scale=True))
    assert a.summary["carbon_serving_kg"] == b.summary["carbon_serving_kg"]
    pd.testing.assert_frame_equal(a.requests, b.requests)


def test_its_route_names_only_candidate_sites():
    h = PolicyHarness(scenario(ttft_ms=400.0))
    (route,) = CarbonAwareRouting().decide(h.state)
    assert isinstance(route, Route) and set(route.shares) == {"b"}


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="utilisation must be in"):
        CarbonAwareRouting(utilisation=0.0)
    with pytest.raises(ValueError, match="signal must be one of"):
        CarbonAwareRouting(signal="tomorrow")
    with pytest.raises(ValueError, match="allowed_sites.chat must name"):
        CarbonAwareRouting(allowed_sites={"chat": []})


def test_a_residency_site_the_service_does_not_have_is_refused_naming_it():
    with pytest.raises(sim.PolicyError, match="allowed_sites.chat names 'nowhere'"):
        sim.simulate(scenario(), CarbonAwareRouting(allowed_sites={"chat": ["nowhere"]}))
