"""Inference services in the engine: replicas take the sites' GPUs, cold starts, drains,
caps and routing, their power in the sites' books, and their results."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sim
from policies import RunNow
from sim.api import PolicyError, Route, Scale, SetCap
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, run_cli, site

H100 = [{"model": "H100-SXM", "count": 4}]
CHAT = {
    "name": "chat",
    "model": "Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "gpus_per_replica": 2,
    "max_batch": 64,
    "sites": ["a", "b"],
    "replicas": {"a": 1},
    "slo": {"ttft_ms": 1000, "tpot_ms": 100},
    "requests": {"rate_per_s": 2.0},
}
TWO_SITES = [
    site(gpus=H100),
    site(name="b", lat=48.9, lon=2.35, pue=1.2, gpus=H100, carbon={"constant_g_per_kwh": 50.0}),
]


def serving_scenario(tmp_path, fidelity="fluid", jobs=None, services=None, **overrides):
    raw = {
        "sites": TWO_SITES,
        "services": [CHAT] if services is None else services,
        "serving": {"fidelity": fidelity, "step_s": 60.0},
        "duration_h": 2.0,
        **overrides,
    }
    if jobs is None:
        raw["workload"] = {
            "synthetic": {
                "arrival_rate_per_h": 0.0001,
                "duration": {"dist": "exponential", "mean_h": 1.0},
            }
        }
    return make_scenario(tmp_path, jobs, **raw)


@pytest.mark.parametrize("fidelity", ["fluid", "request", "iteration"])
def test_a_replica_holds_its_gpus_so_a_job_that_needs_them_waits(tmp_path, fidelity):
    """Site a has 4 H100s; the service's two replicas of 2 GPUs take all of them, so a job
    of 2 GPUs that may only run at a cannot start until one replica is scaled away."""
    jobs = [
        {"job_id": "j", "submit_time": 0, "gpus": 2, "work_gpu_h": 0.5, "allowed_sites": "a"},
    ]
    svc = {**CHAT, "replicas": {"a": 2}}
    h = PolicyHarness(serving_scenario(tmp_path, fidelity, jobs=jobs, services=[svc]))
    h.advance(0.0)
    assert h.state.free_gpus("a") == {"H100-SXM": 0}
    with pytest.raises(
        PolicyError, match="4 GPUs of one model, a has H100-SXM=0 free|needs 2 GPUs"
    ):
        h.apply([sim.api.Start(h.job("j"), "a")])
    chat = h.state.service("chat")
    h.apply([Scale(chat, "a", 1)])  # its requests drain, then the GPUs are free
    h.advance(1800.0)
    assert h.state.free_gpus("a") == {"H100-SXM": 2}
    h.apply([sim.api.Start(h.job("j"), "a")])
    assert h.job("j").state == "running"


def test_a_new_replica_serves_after_its_weights_are_read(tmp_path):
    """Cold start: the GPUs are taken at once; the replica serves after weights_gb / the
    site's checkpoint_read_gbps (8B parameters in BF16 = 16 GB at 2 GB/s: 8 s)."""
    h = PolicyHarness(serving_scenario(tmp_path))
    chat = h.state.service("chat")
    h.advance(600.0)
    h.apply([Scale(chat, "b", 1)])
    assert (chat.replicas("b"), chat.starting("b")) == (0, 1)
    assert h.state.free_gpus("b") == {"H100-SXM": 2}
    h.advance(607.9)
    assert chat.replicas("b") == 0
    h.advance(608.0)
    assert (chat.replicas("b"), chat.starting("b")) == (1, 0)


def test_scaling_down_cancels_the_latest_cold_start_first(tmp_path):
    """Two scale-ups of one replica each, a second apart, then one replica fewer: the later
    cold start is cancelled (its GPUs freed at once), the earlier one serves on time."""
    h = PolicyHarness(serving_scenario(tmp_path))
    chat = h.state.service("chat")
    h.advance(600.0)
    h.apply([Scale(chat, "b", 1)])
    h.advance(601.0)
    h.apply([Scale(chat, "b", 2)])
    assert (chat.starting("b"), h.state.free_gpus("b")) == (2, {"H100-SXM": 0})
    h.advance(602.0)
    h.apply([Scale(chat, "b", 1)])
    assert (chat.starting("b"), h.state.free_gpus("b")) == (1, {"H100-SXM": 2})
    h.advance(608.0)
    assert (chat.replicas("b"), chat.starting("b")) == (1, 0)
    h.advance(700.0)
    assert (chat.replicas("b"), chat.starting("b")) == (1, 0)


def test_scaling_beyond_the_free_gpus_is_refused_and_changes_nothing(tmp_path):
    h = PolicyHarness(serving_scenario(tmp_path))
    chat = h.state.service("chat")
    with pytest.raises(
        PolicyError,
        match="2 more replicas of Llama-3.1-8B-Instruct need 4 H100-SXM GPUs, a has 2 free",
    ):
        h.apply([Scale(chat, "a", 3)])
    assert (chat.replicas("a"), chat.starting("a")) == (1, 0)
    with pytest.raises(PolicyError, match="may not run on 'c'"):
        h.apply([Scale(chat, "c", 1)])
    with pytest.raises(PolicyError, match="shares must not all be 0"):
        h.apply([Route(chat, {"a": 0.0})])


@pytest.mark.parametrize("fidelity", ["fluid", "request", "iteration"])
def test_site_energy_is_jobs_plus_services_plus_idle(tmp_path, fidelity):
    """Conservation: every kWh of the sites' facility energy is a job's, a service's (its
    GPUs' idle and host share, and what they draw above idle) or idle."""
    jobs = [
        {"job_id": f"j{i}", "submit_time": 600.0 * i, "gpus": 1 + i % 2, "work_gpu_h": 0.7}
        for i in range(6)
    ]
    sc = serving_scenario(tmp_path, fidelity, jobs=jobs, policy={"name": "serve_autoscale"})
    r = sim.simulate(sc)
    s = r.summary
    assert s["requests_total"] > 10_000
    assert s["energy_serving_kwh"] > 0
    assert s["energy_jobs_kwh"] + s["energy_checkpoint_kwh"] + s["energy_serving_kwh"] + s[
        "energy_idle_kwh"
    ] == pytest.approx(s["energy_facility_kwh"], rel=1e-9)
    assert r.services["energy_kwh"].sum() == pytest.approx(s["energy_serving_kwh"], rel=1e-12)
    assert r.services["carbon_kg"].sum() == pytest.approx(s["carbon_serving_kg"], rel=1e-12)
    assert s["requests_served"] + s["requests_dropped"] <= s["requests_total"]
    assert len(r.services) == math.ceil(sc.horizon_s / 60.0)


def test_a_cap_on_the_service_lowers_its_power_and_slows_its_tokens(tmp_path):
    runs = {}
    for cap in (None, 350.0):
        h = PolicyHarness(serving_scenario(tmp_path))
        chat = h.state.service("chat")
        if cap is not None:
            h.apply([SetCap(chat, cap)])
        h.advance(3600.0)
        runs[cap] = (h.state.site_it_power_kw("a"), chat.capacity_rps("a"))
    assert runs[350.0][0] < runs[None][0]
    assert runs[350.0][1] < runs[None][1]


def test_a_bad_services_entry_is_one_line_naming_the_key_and_value(tmp_path, capsys):
    toml = tmp_path / "bad.toml"
    toml.write_text(
        """
name = "bad"
start = 2020-06-01T00:00:00Z
duration_h = 1
[[sites]]
name = "a"
lat = 0
lon = 0
carbon = { constant_g_per_kwh = 100 }
gpus = [{ model = "H100-SXM", count = 4 }]
[workload.synthetic]
arrival_rate_per_h = 1
duration = { dist = "exponential", mean_h = 1.0 }
[[services]]
name = "chat"
model = "Llama-3.1-8B-Instruct"
gpu = "H100-SXM"
max_batch = -3
sites = ["a"]
slo = { ttft_ms = 1000, tpot_ms = 100 }
requests = { rate_per_s = 1 }
"""
    )
    code, out = run_cli(["run", str(toml)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert "services[0].max_batch" in line and "-3" in line

    text = toml.read_text().replace("max_batch = -3", "max_batch = 8")
    toml.write_text(text.replace("{ rate_per_s = 1 }", '{ file = "missing.parquet" }'))
    code, out = run_cli(["validate", str(toml)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert "services[0].requests" in line and "missing.parquet" in line


class SendAllTo(sim.api.Policy):
    """Routes every request of every service to one site, once."""

    def __init__(self, site: str):
        self.site = site
        self.done = False

    def decide(self, state):
        if self.done:
            return []
        self.done = True
        return [Route(state.service(name), {self.site: 1.0}) for name in state.services]


def test_route_sends_the_shares_and_pays_the_round_trip(tmp_path):
    """All of chat's requests sent to b, away from their origin a: every one served there,
    with the round trip a-b (Frankfurt to Paris, 480 km great circle, 4.7 ms in fibre)
    in its time to first token."""
    svc = {**CHAT, "replicas": {"a": 1, "b": 1}}
    routed = sim.simulate(serving_scenario(tmp_path, "request", services=[svc]), SendAllTo("b"))
    home = sim.simulate(serving_scenario(tmp_path, "request", services=[svc]), SendAllTo("a"))
    assert routed.requests is not None and home.requests is not None
    assert set(routed.requests["site"]) == {1} and set(home.requests["site"]) == {0}
    gap_ms = routed.requests["ttft_ms"].min() - home.requests["ttft_ms"].min()
    assert 4.0 < gap_ms < 6.0


def test_without_services_nothing_changes():
    r = sim.simulate(make_scenario(duration_h=6.0))
    assert r.services.empty and r.requests is None
    assert r.summary["requests_total"] == 0 and r.summary["slo_attainment"] is None
    assert np.isclose(r.summary["energy_serving_kwh"], 0.0)


@pytest.mark.parametrize("fidelity", ["fluid", "request", "iteration"])
def test_a_saved_serving_run_loads_back_and_plots(tmp_path, fidelity):
    """scenario.toml writes every default of [[services]]; it must load back as it was."""
    from sim.study.figure_sets import figures_for

    r = sim.simulate(serving_scenario(tmp_path, fidelity, duration_h=0.5))
    r.save(tmp_path / "out")
    back = sim.Results.load(tmp_path / "out")
    assert back.scenario == r.scenario
    assert len(back.services) == len(r.services)
    assert (back.requests is None) == (fidelity == "fluid")
    names = {p.stem for p in figures_for(tmp_path / "out")}
    assert {"latency_cdfs", "carbon_per_1k_tokens"} <= names


def test_a_key_of_the_other_request_source_is_refused(tmp_path):
    svc = {**CHAT, "requests": {"rate_per_s": 1.0, "repeat": True}}
    with pytest.raises(sim.ScenarioError, match="repeat applies to a request file"):
        serving_scenario(tmp_path, services=[svc])


@pytest.mark.parametrize("fidelity", ["fluid", "request", "iteration"])
def test_a_service_without_a_ready_replica_drops_its_requests(tmp_path, fidelity):
    """No replica at the start and none asked for: every request is dropped (the fluid
    level once failed on a step begun off its grid with no replica ready anywhere)."""
    svc = {**CHAT, "replicas": {"a": 0}}
    r = sim.simulate(serving_scenario(tmp_path, fidelity, services=[svc]), "run_now")
    assert r.summary["requests_served"] == 0
    assert r.summary["requests_dropped"] == pytest.approx(r.summary["requests_total"])


class ReadsTheServices(RunNow):
    """run_now that reads every service's statistics at each of its decisions (the last
    read kept in `stats`)."""

    def decide(self, state):
        self.stats = [state.service(name).stats for name in state.services]
        return super().decide(state)


@pytest.mark.parametrize("step_s", [60.0, 45.3])
def test_reading_a_fluid_service_between_its_steps_leaves_its_results_as_they_were(
    tmp_path, step_s
):
    """A policy that reads a service's statistics at the jobs' events, between the steps,
    gets the last completed step's and leaves the step in progress whole: the fluid level's
    results are those of a run that never reads them (a cut would change them: it serves
    the pieces of a step one by one). Also with steps that are no whole number of seconds
    (3 x 45.3 // 45.3 == 2)."""
    jobs = [
        {"job_id": f"j{i}", "submit_time": 97.3 * i, "gpus": 1, "work_gpu_h": 0.2}
        for i in range(60)
    ]
    svc = {**CHAT, "requests": {"rate_per_s": 40.0, "daily_amplitude": 0.5}}
    serving = {"fidelity": "fluid", "step_s": step_s}
    sc = serving_scenario(tmp_path, jobs=jobs, services=[svc], serving=serving)
    unread, read = (sim.simulate(sc, policy) for policy in (RunNow(), ReadsTheServices()))
    assert read.services["dropped"].sum() > 0  # the replica overloads: a backlog carries on
    pd.testing.assert_frame_equal(read.services, unread.services, check_exact=True)
    pd.testing.assert_frame_equal(read.power, unread.power, check_exact=True)
