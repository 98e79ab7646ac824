"""The inference levers in the engine: model variants (deployments per site and variant),
generation directives, the quality of what was served, replicas on MIG slices, and the
price of the GPU-hours (docs/inference-levers.md, docs/prices.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import sim
from sim.api import PolicyError, Scale, SetDirective
from sim.config.market import PriceConfig
from sim.errors import ScenarioError
from sim.testing import PolicyHarness
from tests.conftest import run_cli, site
from tests.engine.test_services import CHAT, serving_scenario

SMALL = "Llama-3.1-8B-Instruct"
LARGE = "Llama-3.1-70B-Instruct"
LEVELS = [
    {"name": "normal", "output_factor": 1.0, "quality_penalty": 0.0},
    {"name": "brief", "output_factor": 0.5, "quality_penalty": 4.0},
]
# the 70B model on 4 GPUs is the service's own; the 8B on 1 GPU its variant "small"
TWO_VARIANTS = {
    **CHAT,
    "model": LARGE,
    "gpus_per_replica": 4,
    "quality": 66.0,
    "variants": [{"name": "small", "model": SMALL, "gpus_per_replica": 1, "quality": 48.0}],
    "directives": LEVELS,
}
H100 = [{"model": "H100-SXM", "count": 8}]


@dataclass
class At:
    """A policy that applies `actions(state)` once, at its first decision at or after `t_s`."""

    t_s: float
    actions: object
    tick_s: float = 60.0
    done: bool = False

    def decide(self, state):
        if self.done or state.now_s < self.t_s:
            return []
        self.done = True
        return self.actions(state)


def _two_site_scenario(tmp_path, fidelity="request", service=TWO_VARIANTS, **overrides):
    """Sites a (300 g/kWh) and b (50 g/kWh), 8 H100s each; `service` on both."""
    two = [
        site(gpus=H100),
        site(name="b", lat=48.9, lon=2.35, gpus=H100, carbon={"constant_g_per_kwh": 50.0}),
    ]
    return serving_scenario(tmp_path, fidelity, services=[service], sites=two, **overrides)


@pytest.mark.parametrize("fidelity", ["request", "fluid"])
def test_a_directive_scales_the_outputs_of_the_requests_arriving_after_it(tmp_path, fidelity):
    """From the SetDirective at 1 h on, every request's output tokens are its own times
    the level's factor (rounded, at least one): the request level exactly, request by
    request; the fluid level's tokens per step by the factor."""
    scenario = _two_site_scenario(tmp_path, fidelity)
    plain = sim.simulate(scenario, "run_now")
    brief = sim.simulate(scenario, At(3600.0, lambda s: [SetDirective(s.service("chat"), "brief")]))
    if fidelity == "request":
        a, b = plain.requests, brief.requests
        assert np.array_equal(a["arrival_s"], b["arrival_s"])
        after = a["arrival_s"].to_numpy() >= 3600.0
        want = np.maximum(1, np.rint(a["output_tokens"].to_numpy() * 0.5)).astype(np.int64)
        got = b["output_tokens"].to_numpy()
        assert np.array_equal(got[after], want[after])
        assert np.array_equal(got[~after], a["output_tokens"].to_numpy()[~after])
    else:
        steps = (plain.services["start_s"] >= 3600.0).to_numpy()
        tokens_plain = plain.services["tokens"].to_numpy()[steps]
        tokens_brief = brief.services["tokens"].to_numpy()[steps]
        # the last step's requests still in service at the horizon are unfinished, and
        # shorter answers finish more of them: every other step is exactly half
        assert tokens_brief[:-1] / tokens_plain[:-1] == pytest.approx(0.5, rel=1e-9)


def test_served_quality_is_the_variants_minus_the_directives_penalty(tmp_path):
    """Each served request carries its variant's quality minus its directive's penalty;
    the summary's mean is theirs, and with a floor the share below it is counted."""
    service = {**TWO_VARIANTS, "quality_floor": 60.0, "replicas": {"a": 1}}
    scenario = _two_site_scenario(tmp_path, service=service)

    def switch(state):
        chat = state.service("chat")
        return [Scale(chat, "b", 2, variant="small"), SetDirective(chat, "brief")]

    r = sim.simulate(scenario, At(3600.0, switch))
    req = r.requests
    served = req[req["state"] == "served"]
    variant_q = np.where(served["variant"].to_numpy() == 0, 66.0, 48.0)
    penalty = np.where(served["arrival_s"].to_numpy() >= 3600.0, 4.0, 0.0)
    assert np.allclose(served["quality"].to_numpy(), variant_q - penalty)
    assert set(np.unique(served["variant"])) == {0, 1}  # both served
    assert r.summary["served_quality_mean"] == pytest.approx(float(np.mean(variant_q - penalty)))
    below = np.mean(variant_q - penalty < 60.0)
    assert r.summary["served_below_floor_share"] == pytest.approx(float(below))
    assert req.loc[req["state"] != "served", "quality"].isna().all()


def test_the_fluid_level_serves_the_same_quality_as_the_request_level(tmp_path):
    """Directives changed on a step boundary: the fluid level's arrival-weighted split is
    exact, so both fidelities agree to their usual tolerance."""

    def switch(state):
        chat = state.service("chat")
        return [Scale(chat, "a", 2, variant="small"), SetDirective(chat, "brief")]

    means = [
        sim.simulate(_two_site_scenario(tmp_path, f), At(3600.0, switch)).summary[
            "served_quality_mean"
        ]
        for f in ("request", "fluid")
    ]
    assert means[1] == pytest.approx(means[0], rel=0.01)


def test_requests_at_a_site_are_split_over_its_variants_by_ready_capacity(tmp_path):
    """Two deployments at one site: each gets its ready capacity's share of the requests."""
    service = {**TWO_VARIANTS, "replicas": {"a": 1}, "requests": {"rate_per_s": 4.0}}
    h_state = {}

    def both(state):
        chat = state.service("chat")
        h_state["cap"] = (chat.capacity_rps("a"), chat.capacity_rps("a", "small"))
        return [Scale(chat, "a", 1, variant="small")]

    r = sim.simulate(_two_site_scenario(tmp_path, service=service), At(60.0, both))
    req = r.requests
    later = req[req["arrival_s"] >= 600.0]
    large, small = h_state["cap"]
    share_small = float(np.mean(later["variant"] == 1))
    assert share_small == pytest.approx(small / (large + small), abs=0.01)


def test_variant_scaling_is_checked_against_its_own_gpus(tmp_path):
    """A variant's replicas take its own GPU count: 8 H100s hold two 70B replicas (4 GPUs
    each) or eight 8B ones; an unknown variant or directive is refused by name."""
    h = PolicyHarness(_two_site_scenario(tmp_path, service={**TWO_VARIANTS, "replicas": {}}))
    chat = h.state.service("chat")
    assert chat.deployments == (("a", LARGE), ("a", "small"), ("b", LARGE), ("b", "small"))
    h.apply([Scale(chat, "a", 1), Scale(chat, "a", 4, variant="small")])
    assert h.state.free_gpus("a") == {"H100-SXM": 0}
    with pytest.raises(
        PolicyError, match="1 more replicas of small need 1 H100-SXM GPUs, a has 0 free"
    ):
        h.apply([Scale(chat, "a", 5, variant="small")])
    with pytest.raises(PolicyError, match="has no variant 'tiny'"):
        h.apply([Scale(chat, "b", 1, variant="tiny")])
    with pytest.raises(PolicyError, match="has no directive 'terse'"):
        h.apply([SetDirective(chat, "terse")])


def test_a_replica_point_prices_and_rates_one_replica(tmp_path):
    """`replica_point` under another directive: answers half as long, more requests per
    second (not twice as many: the prompts' prefill and the fixed step time stay); under a
    cap: less power, fewer requests per second; the price is the GPUs' at the scenario's
    override."""
    scenario = _two_site_scenario(tmp_path, prices={"per_gpu_h": {"H100-SXM": 2.0}}, currency="USD")
    h = PolicyHarness(scenario)
    chat = h.state.service("chat")
    normal, brief = chat.replica_point("a"), chat.replica_point("a", directive="brief")
    assert normal.gpus == 4 and normal.price_per_h == pytest.approx(8.0)
    assert normal.quality == 66.0 and brief.quality == 62.0
    assert brief.mean_output_tokens == pytest.approx(0.5 * normal.mean_output_tokens)
    assert normal.capacity_rps < brief.capacity_rps < 2.0 * normal.capacity_rps
    assert chat.rtt_s("a") == 0.0 and chat.rtt_s("b") > 0.0
    capped = chat.replica_point("a", cap_w=400.0)  # H100-SXM: 700 W at the most
    assert capped.busy_w <= 4 * 400.0 + 1e-9 and capped.capacity_rps < normal.capacity_rps
    with pytest.raises(PolicyError, match="replica_point: service chat: .*cap"):
        chat.replica_point("a", cap_w=10.0)


def test_a_replica_point_gives_its_power_at_a_lighter_load_where_a_cap_saves_only_above_it(
    tmp_path,
):
    """`power_at_w(rate)`: idle with no requests, `busy_w` at its capacity and above, rising
    in between; a cap lowers the clock only where the replica would draw more than it, so
    at one request in flight (below the cap) the capped replica draws what the uncapped
    one does, and with its batch full less."""
    chat = PolicyHarness(_two_site_scenario(tmp_path)).state.service("chat")
    normal = chat.replica_point("a")
    assert normal.power_at_w(0.0) == normal.idle_w
    assert normal.power_at_w(normal.capacity_rps) == normal.busy_w
    assert normal.power_at_w(2.0 * normal.capacity_rps) == normal.busy_w
    loads = [normal.power_at_w(f * normal.capacity_rps) for f in (0.1, 0.5, 0.9)]
    assert normal.idle_w < loads[0] < loads[1] < loads[2] < normal.busy_w
    one = normal.batch_rps[1]  # one request in flight
    cap_w = 600.0  # H100-SXM: 700 W at the most
    assert normal.power_at_w(one) < 4 * cap_w < normal.busy_w
    capped = chat.replica_point("a", cap_w=cap_w)
    assert capped.power_at_w(one) == pytest.approx(normal.power_at_w(one), rel=1e-12)
    assert capped.busy_w == pytest.approx(4 * cap_w)


def test_compute_cost_is_the_price_of_every_gpu_hour_held(tmp_path):
    """cost_compute = (the jobs' GPU-hours + the services' GPU-hours) x the price, exactly;
    the services' cost per step adds up to theirs."""
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 2, "work_gpu_h": 1.0}]
    scenario = serving_scenario(
        tmp_path, jobs=jobs, prices={"per_gpu_h": {"H100-SXM": 3.0, "A100-80GB": 2.0}}
    )
    r = sim.simulate(scenario, "run_now")
    jobs_cost = float((r.jobs["gpu_h"] * 3.0).sum())  # the job ran on H100s
    assert r.jobs["cost"].sum() == pytest.approx(jobs_cost, rel=1e-12)
    services_cost = r.summary["serving_gpu_h"] * 3.0
    assert r.services["cost"].sum() == pytest.approx(services_cost, rel=1e-9)
    assert r.summary["cost_compute"] == pytest.approx(jobs_cost + services_cost, rel=1e-9)
    assert r.meta["prices"]["currency"] == "EUR" and r.meta["prices"]["missing"] == []


def test_a_gpu_without_a_price_leaves_the_cost_unknown_and_says_which(tmp_path):
    """Nothing is substituted: a GPU-hour without a price makes cost_compute None and is
    listed in meta.json; a GPU nothing held costs nothing."""
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 0.5}]
    scenario = serving_scenario(
        tmp_path, jobs=jobs, sites=[_site_with("V100")], services=[{**CHAT, "sites": ["a"]}]
    )
    r = sim.simulate(scenario, "run_now")
    assert r.summary["cost_compute"] is None
    assert r.meta["prices"]["missing"] == ["V100"]
    assert math.isnan(r.jobs["cost"].iloc[0])
    asked = sim.simulate(  # a price only asked for is not missing
        serving_scenario(tmp_path, sites=[_site_with("V100")], services=[{**CHAT, "sites": ["a"]}]),
        At(0.0, lambda s: [] if math.isnan(s.price_per_gpu_h("V100")) else [None]),
    )
    assert asked.meta["prices"]["missing"] == [] and asked.summary["cost_compute"] > 0


def _site_with(model: str) -> dict:
    return site(gpus=[{"model": model, "count": 2}, {"model": "H100-SXM", "count": 4}])


MIG_SITE = {
    "gpus": [
        {"model": "A100-80GB", "count": 2, "mig": ["3g.40gb", "2g.20gb", "2g.20gb"]},
        {"model": "H100-SXM", "count": 2},
    ]
}
ON_SLICES = {
    **CHAT,
    "gpus_per_replica": 1,
    "sites": ["a"],
    "variants": [{"name": "mig", "model": SMALL, "gpu": "A100-80GB", "mig_profile": "3g.40gb"}],
}


def test_replicas_of_a_mig_variant_each_hold_one_slice(tmp_path):
    """Two 3g.40gb replicas take the two GPUs' 3g slices (a third does not fit); they are
    charged the slice's SM share of a GPU-hour, and free their slices when scaled away."""
    scenario = serving_scenario(
        tmp_path,
        services=[ON_SLICES],
        sites=[site(**MIG_SITE)],
        prices={"per_gpu_h": {"A100-80GB": 7.0}},
    )
    h = PolicyHarness(scenario)
    chat = h.state.service("chat")
    h.apply([Scale(chat, "a", 2, variant="mig")])
    assert h.state.free_mig_slices("a")["A100-80GB"]["3g.40gb"] == 0
    with pytest.raises(PolicyError, match="need 1 3g.40gb slices of A100-80GB, a has 0 free"):
        h.apply([Scale(chat, "a", 3, variant="mig")])
    point = chat.replica_point("a", "mig")
    share = sim.models.mig.sm_share("A100-80GB", "3g.40gb")
    assert point.gpus == pytest.approx(share) and point.price_per_h == pytest.approx(7.0 * share)
    h.advance(600.0)
    assert chat.replicas("a", "mig") == 2
    h.apply([Scale(chat, "a", 0, variant="mig")])
    h.advance(1200.0)
    assert h.state.free_mig_slices("a")["A100-80GB"]["3g.40gb"] == 2


def test_a_mig_variant_needs_a_partitioned_pool(tmp_path):
    """A MIG variant on a site whose GPUs are whole (or a whole-GPU variant on a partitioned
    pool only) is refused before the run, naming the variant."""
    with pytest.raises(ScenarioError, match=r"variants\[0\].gpu: .* partitioned into MIG"):
        serving_scenario(tmp_path, services=[{**ON_SLICES, "sites": ["a", "b"]}])
    big = {**ON_SLICES, "variants": [{**ON_SLICES["variants"][0], "model": LARGE}]}
    with pytest.raises(ScenarioError, match=r"variants\[0\]: .*do not fit"):
        serving_scenario(tmp_path, services=[big], sites=[site(**MIG_SITE)])


def test_a_drained_mig_replica_frees_its_own_slice(tmp_path):
    """Scale a MIG replica away (it drains) and another up at once: when the drain ends,
    the drained replica's slice is freed, not the new one's."""
    service = {**ON_SLICES, "replicas": {}, "requests": {"rate_per_s": 20.0}}
    scenario = serving_scenario(tmp_path, "request", services=[service], sites=[site(**MIG_SITE)])
    h = PolicyHarness(scenario)
    chat = h.state.service("chat")
    h.apply([Scale(chat, "a", 1, variant="mig")]).advance(600.0)
    h.apply([Scale(chat, "a", 0, variant="mig"), Scale(chat, "a", 1, variant="mig")])
    assert [g.held for g in h.state.mig_layouts("a", "A100-80GB")] == [1, 1]
    h.advance(1200.0)
    assert [g.held for g in h.state.mig_layouts("a", "A100-80GB")] == [0, 1]


def test_a_drain_across_a_step_edge_charges_each_step_its_own_gpu_seconds(tmp_path):
    """Two replicas, one scaled away just before a step's end: it drains into the next
    step, and no step holds more than two replicas' GPUs (the power log stays in time
    order: the fidelity is advanced before the drained GPUs are freed)."""
    service = {**CHAT, "sites": ["a"], "replicas": {"a": 2}, "requests": {"rate_per_s": 8.0}}
    scenario = serving_scenario(tmp_path, "request", services=[service])
    r = sim.simulate(scenario, At(1858.5, lambda s: [Scale(s.service("chat"), "a", 1)], tick_s=0.5))
    assert r.services["replicas"].max() <= 2.0 + 1e-9
    step = r.services.set_index("start_s")["replicas"]
    assert step[1800.0] == pytest.approx(2.0) and 1.0 < step[1860.0] < 2.0


def test_a_directives_list_is_not_empty_and_the_own_model_runs_at_every_site(tmp_path):
    """One-line errors before the run: an empty directives list; the service's own model
    at a site whose GPUs of its model are all MIG-partitioned."""
    with pytest.raises(ScenarioError, match="directives: list at least one level"):
        serving_scenario(tmp_path, services=[{**CHAT, "directives": []}])
    partitioned_b = site(name="b", lat=48.9, lon=2.35, **MIG_SITE)
    whole = {**CHAT, "gpu": "A100-80GB", "sites": ["a", "b"], "replicas": {"a": 1}}
    a = site(gpus=[{"model": "A100-80GB", "count": 2}, {"model": "H100-SXM", "count": 2}])
    with pytest.raises(ScenarioError, match="own model needs whole A100-80GB GPUs at each"):
        serving_scenario(tmp_path, services=[whole], sites=[a, partitioned_b])


def test_a_backlog_shed_at_one_deployment_is_taken_from_its_own_served_requests(tmp_path):
    """The fluid level sheds the backlog of a deployment scaled away from its own served
    requests, so the steps' served quality stays that of the request level."""
    service = {
        **TWO_VARIANTS,
        "sites": ["a"],
        "replicas": {"a": 1},
        "requests": {"rate_per_s": 80.0},
        "directives": None,
    }

    class Plan:
        tick_s = 60.0

        def decide(self, state):
            chat = state.service("chat")
            if state.now_s == 0.0:
                return [Scale(chat, "a", 2, variant="small")]
            return [Scale(chat, "a", 0)] if state.now_s == 3000.0 else []

    quality = [
        sim.simulate(_two_site_scenario(tmp_path, f, service=service, duration_h=1.0), Plan())
        .services["quality_mean"]
        .to_numpy()
        for f in ("fluid", "request")
    ]
    # The request level's step means scatter about the fluid level's expectation by the
    # sampling of which variant serves each request: ~0.2 points over the steady steps.
    noise = np.nanstd(quality[1][1:48])
    assert np.nanmax(np.abs(quality[0] - quality[1])) < 5.0 * noise


@pytest.mark.parametrize("prices", [{"per_gpu_h": {"H100-SXM": 6.88}}, {}])
def test_the_printed_summary_says_which_gpus_had_no_price(tmp_path, capsys, prices):
    """`dcsim run` names the GPU models whose GPU-hours left cost_compute unknown when the
    scenario gives prices; a scenario without a `[prices]` table says nothing of cost."""
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 0.5}]
    scenario = serving_scenario(
        tmp_path, jobs=jobs, sites=[_site_with("V100")], services=[{**CHAT, "sites": ["a"]}]
    ).model_copy(update={"prices": PriceConfig(**prices)})
    path = tmp_path / "unpriced.toml"
    path.write_text(scenario.to_toml())
    code, out = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    if prices:
        assert "cost_compute: unknown, no price for V100 GPU-hours" in out.out
    else:
        assert "cost" not in out.out
