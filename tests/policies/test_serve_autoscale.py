"""serve_autoscale: replicas for the forecast peak with headroom, its GPUs before the jobs',
and it chains after every training-job policy."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import sim
from policies import REGISTRY, RunNow, ServeAutoscale
from policies.chain import Chain
from sim.api import Scale, Start
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

H100 = [{"model": "H100-SXM", "count": 8}]
CHAT = {
    "name": "chat",
    "model": "Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "gpus_per_replica": 1,
    "max_batch": 64,
    "sites": ["a", "b"],
    "replicas": {"a": 1},
    "slo": {"ttft_ms": 2000, "tpot_ms": 100},
    "requests": {"rate_per_s": 20.0},
}
SITES = [site(gpus=H100), site(name="b", lat=48.9, lon=2.35, gpus=H100)]


def scenario(tmp_path, jobs=None, rate_per_s=20.0, **overrides):
    svc = {**CHAT, "requests": {"rate_per_s": rate_per_s}}
    return make_scenario(tmp_path, jobs, sites=SITES, services=[svc], duration_h=2.0, **overrides)


def test_it_asks_for_the_peak_rate_with_headroom_over_one_replicas_capacity(tmp_path):
    h = PolicyHarness(scenario(tmp_path))
    chat = h.state.service("chat")
    need = math.ceil(20.0 * 1.25 / chat.capacity_rps("a"))
    assert need > 1
    actions = ServeAutoscale().decide(h.state)
    assert [(a.site, a.replicas) for a in actions if isinstance(a, Scale)] == [("a", need)]


def test_more_than_a_site_holds_goes_to_the_next_site(tmp_path):
    h = PolicyHarness(scenario(tmp_path, rate_per_s=400.0))
    actions = ServeAutoscale().decide(h.state)
    assert [(a.site, a.replicas) for a in actions] == [("a", 8), ("b", 8)]


def test_it_scales_down_only_past_the_margin_and_keeps_min_replicas(tmp_path):
    h = PolicyHarness(scenario(tmp_path, rate_per_s=0.01))
    chat = h.state.service("chat")
    h.apply([Scale(chat, "a", 3)])
    h.advance(60.0)
    actions = ServeAutoscale(min_replicas=2).decide(h.state)
    assert [(a.site, a.replicas) for a in actions] == [("a", 2)]
    assert ServeAutoscale(min_replicas=3).decide(h.state) == []


def test_its_replicas_take_the_gpus_before_the_planned_starts(tmp_path):
    """Alone it amends run_now's plan: the 8-GPU job that would start on a is held back
    because the service's new replicas take GPUs there first; on b it still fits."""
    jobs = [{"job_id": "big", "submit_time": 0, "gpus": 8, "work_gpu_h": 1.0}]
    h = PolicyHarness(scenario(tmp_path, jobs))
    h.advance(0.0)
    actions = ServeAutoscale().decide(h.state)
    starts = [a for a in actions if isinstance(a, Start)]
    assert [(a.job.id, a.site) for a in starts] == [("big", "b")]
    assert isinstance(actions[0], Scale)


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="headroom must be in"):
        ServeAutoscale(headroom=-1.0)
    with pytest.raises(ValueError, match="scale_down_margin must be in"):
        ServeAutoscale(scale_down_margin=1.0)


SCHEDULERS = sorted(set(REGISTRY) - {"chain", "serve_autoscale"})
REQUIRED_PARAMS = {
    "carbon_threshold": {"percentile": 30},
    "static_cap": {"watts": 250},
    # with no reserved GPUs GAIA's cost policy waits out its bound: shorter than the run
    "gaia_cost": {"max_wait_short_h": 0.5},
}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_it_chains_after_every_training_policy(tmp_path, name):
    jobs = [
        {"job_id": f"j{i}", "submit_time": 300.0 * i, "gpus": 1 + i % 4, "work_gpu_h": 0.5}
        for i in range(12)
    ]
    members = [
        {"name": name, "params": REQUIRED_PARAMS.get(name, {})},
        {"name": "serve_autoscale"},
    ]
    sc = scenario(tmp_path, jobs, policy={"name": "chain", "params": {"policies": members}})
    r = sim.simulate(sc)
    assert r.summary["requests_served"] > 0.9 * r.summary["requests_total"]
    assert r.services["replicas"].max() > 1
    assert r.summary["jobs_completed"] > 0


class AdvancesEveryService(ServeAutoscale):
    """The reference: `serve_autoscale` as it was, every service advanced to now at each
    decision (reading a site's power does that) before it decides."""

    def amend(self, state, actions):
        for name in state.sites:
            state.site_it_power_kw(name)
        return super().amend(state, actions)


@pytest.mark.parametrize("fidelity", ["request", "fluid"])
def test_its_decisions_are_those_of_advancing_every_service_at_every_decision(tmp_path, fidelity):
    """Chained after run_now with jobs arriving between the steps, it scales the service
    up and down at the same instants to the same replicas as the reference, which advances
    every service to the job's event (the request level: the same results; the fluid
    level reads the last completed step without cutting the step in progress)."""
    jobs = [
        {"job_id": f"j{i}", "submit_time": 97.3 * i, "gpus": 1 + i % 3, "work_gpu_h": 0.4}
        for i in range(200)
    ]
    runs = {}
    for policy in (ServeAutoscale, AdvancesEveryService):
        svc = {**CHAT, "max_batch": 8, "requests": {"rate_per_s": 8.0, "daily_amplitude": 0.8}}
        sc = make_scenario(
            tmp_path,
            jobs,
            sites=SITES,
            services=[svc],
            duration_h=6.0,
            serving={"fidelity": fidelity, "step_s": 60.0},
        )
        runs[policy] = sim.simulate(sc, Chain([RunNow(), policy()]))
    new, old = runs[ServeAutoscale], runs[AdvancesEveryService]
    scaled = new.events[new.events["kind"].isin(["scale", "replica_ready", "replica_drained"])]
    assert scaled["kind"].eq("scale").sum() > 3
    pd.testing.assert_frame_equal(
        scaled, old.events[old.events["kind"].isin(["scale", "replica_ready", "replica_drained"])]
    )
    pd.testing.assert_frame_equal(new.jobs, old.jobs)
    if fidelity == "request":
        pd.testing.assert_frame_equal(new.services, old.services)
        pd.testing.assert_frame_equal(new.power, old.power)
