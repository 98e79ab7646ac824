"""What a serving run reports (issue #33, "Using it" and the idle half of "Energy accounting
of serving"): a scenario of services alone, the services' actions in the event log, latency
tails over all requests and of the worst service, and the energy of GPUs a service holds
without serving."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sim
from sim.api import Policy, Route, Scale, SetCap, SetDirective
from sim.config.loading import scenario_from_dict
from sim.engine.build import build_sources
from sim.models.hardware import GPU_CATALOG
from sim.models.llm_replica import replica_model
from sim.results import JOB_COLUMNS
from sim.serving import RequestTable, write_requests
from sim.util.percentile import weighted_percentile
from sim.util.streams import seed_sequences
from tests.conftest import BASE, run_cli
from tests.engine.test_services import CHAT, TWO_SITES

REPO = Path(__file__).resolve().parents[2]


def serving_only(tmp_path, services=None, fidelity="request", **overrides):
    """A scenario of `services` (default: CHAT) at two H100 sites and no `[workload]`."""
    raw = {k: v for k, v in copy.deepcopy(BASE).items() if k != "workload"}
    raw.update(
        sites=TWO_SITES,
        services=[CHAT] if services is None else services,
        serving={"fidelity": fidelity, "step_s": 60.0},
        duration_h=1.0,
        **overrides,
    )
    return scenario_from_dict(raw, source=tmp_path / "test.toml")


class Script(Policy):
    """Acts at given times (multiples of its tick): {time s: actions(state)}."""

    tick_s = 60.0

    def __init__(self, steps):
        self.steps = dict(steps)

    def decide(self, state):
        act = self.steps.pop(state.now_s, None)
        return [] if act is None else act(state)


# --- serving-only scenarios ----------------------------------------------------------------------


@pytest.mark.parametrize("fidelity", ["fluid", "request"])
def test_a_scenario_of_services_alone_runs_with_an_empty_jobs_table(tmp_path, fidelity):
    r = sim.simulate(serving_only(tmp_path, fidelity=fidelity))
    assert r.summary["requests_served"] > 1000
    assert r.summary["jobs_submitted"] == 0
    columns = list(r.jobs.columns)
    assert columns[: len(JOB_COLUMNS)] == list(JOB_COLUMNS) and len(r.jobs) == 0
    r.save(tmp_path / "out")
    back = sim.Results.load(tmp_path / "out")
    assert list(back.jobs.columns) == columns and len(back.jobs) == 0


def test_a_scenario_with_neither_jobs_nor_services_is_one_line_naming_both(tmp_path, capsys):
    toml = tmp_path / "empty.toml"
    toml.write_text(
        'name = "x"\nstart = 2020-06-01T00:00:00Z\nduration_h = 1\n[[sites]]\nname = "a"\n'
        "lat = 0\nlon = 0\ncarbon = { constant_g_per_kwh = 1 }\n"
        'gpus = [{ model = "H100-SXM", count = 1 }]\n'
    )
    code, out = run_cli(["run", str(toml), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert "workload: give [workload.synthetic] or workload.file, or [[services]]" in out.err
    assert len(out.err.strip().splitlines()) == 1


def test_the_shipped_serving_only_scenario_runs_in_a_few_seconds(tmp_path):
    scenario = sim.load_scenario(REPO / "scenarios" / "serving_only.toml")
    assert not scenario.workload.has_jobs
    r = sim.simulate(scenario)
    assert r.summary["requests_served"] > 100_000
    assert r.summary["sim_wall_s"] < 10.0


# --- service actions in the event log ------------------------------------------------------------


def service_events(r: sim.Results) -> pd.DataFrame:
    kinds = ["scale", "replica_ready", "replica_drained", "route", "directive", "setcap"]
    e = r.events
    return e[e["kind"].isin(kinds)].reset_index(drop=True)


def test_every_action_on_a_service_is_an_event_row(tmp_path):
    """Scale, Route, SetDirective and SetCap(service) are rows of events.parquet, and so are
    the replicas that finish their cold start or their drain: a policy can be audited."""
    svc = {**CHAT, "directives": "default"}
    script = Script(
        {
            60.0: lambda st: [Scale(st.service("chat"), "b", 1)],  # cold start: 8 s
            120.0: lambda st: [
                Route(st.service("chat"), {"a": 1.0, "b": 3.0}),
                SetCap(st.service("chat"), 500.0),
                SetDirective(st.service("chat"), "brief"),
            ],
            180.0: lambda st: [Scale(st.service("chat"), "b", 0), SetCap(st.service("chat"), None)],
        }
    )
    r = sim.simulate(serving_only(tmp_path, services=[svc]), script)
    e = service_events(r)
    site = [x if isinstance(x, str) else "-" for x in e["site"]]
    rows = list(zip(e["time_s"], e["kind"].astype(str), site, e["detail"], strict=True))
    variant = "chat/Llama-3.1-8B-Instruct"
    assert (60.0, "scale", "b", variant) in rows
    assert (68.0, "replica_ready", "b", variant) in rows
    assert (120.0, "route", "a", "chat") in rows and (120.0, "route", "b", "chat") in rows
    assert (120.0, "setcap", "-", "chat") in rows
    assert (120.0, "directive", "-", "chat/brief") in rows
    assert (180.0, "scale", "b", variant) in rows
    assert any(k == "replica_drained" and s == "b" and t >= 180.0 for t, k, s, _ in rows)
    keys = zip(e["time_s"], e["kind"].astype(str), site, strict=True)
    value = dict(zip(keys, e["value"], strict=True))
    assert value[60.0, "scale", "b"] == 1 and value[180.0, "scale", "b"] == 0
    assert value[68.0, "replica_ready", "b"] == 1
    assert value[120.0, "route", "a"] == pytest.approx(0.25)
    assert value[120.0, "route", "b"] == pytest.approx(0.75)
    caps = e[e["kind"] == "setcap"]["value"].to_numpy()
    assert caps[0] == 500.0 and np.isnan(caps[1])  # removed
    brief = [d for d in r.scenario.services[0].directive_specs() if d.name == "brief"]
    assert e[e["kind"] == "directive"]["value"].iloc[0] == brief[0].output_factor


def test_the_old_event_kinds_keep_their_codes():
    """New kinds are appended: a saved log's codes mean what they meant."""
    from sim.util.records import EVENT_KINDS

    assert EVENT_KINDS[:20] == (
        "submit",
        "start",
        "finish",
        "defer",
        "ready",
        "suspend",
        "resume",
        "migrate",
        "setcap",
        "reject",
        "unfinished",
        "dr_notice",
        "dr_start",
        "dr_end",
        "wake",
        "power_off",
        "checkpoint",
        "transfer",
        "fail",
        "evict",
    )


# --- latency tails --------------------------------------------------------------------------------


@pytest.mark.parametrize("fidelity", ["fluid", "request"])
def test_tails_are_over_every_request_and_the_worst_service_apart(tmp_path, fidelity):
    """A busy service of many requests and a slow one of few: the p99 over all requests
    weighs each request once; the worst service's p99 is the highest of the services'."""
    big = {**CHAT, "requests": {"rate_per_s": 8.0}}
    slow = {
        **CHAT,
        "name": "slow",
        "model": "Llama-3.1-70B-Instruct",
        "gpus_per_replica": 2,
        "replicas": {"b": 1},
        "requests": {"rate_per_s": 0.2},
    }
    r = sim.simulate(serving_only(tmp_path, services=[big, slow], fidelity=fidelity))
    s = r.summary
    assert "ttft_p99_ms" not in s and "tpot_p99_ms" not in s
    per_service = {
        name: (sub["tpot_p99_ms"].max(), sub["served"].sum())
        for name, sub in r.services.groupby("service", observed=True)
    }
    assert per_service["slow"][1] < per_service["chat"][1] / 20
    assert s["tpot_p99_worst_service_ms"] > s["tpot_p99_requests_ms"]
    if fidelity == "request":
        served = r.requests[r.requests["state"] == "served"]
        for key in ("ttft", "tpot"):
            values = served[f"{key}_ms"].to_numpy()
            assert s[f"{key}_p99_requests_ms"] == weighted_percentile(
                values, np.ones(len(values)), 99.0
            )
            worst = max(
                np.percentile(g[f"{key}_ms"], 99)
                for _, g in served.groupby("service", observed=True)
            )
            assert s[f"{key}_p99_worst_service_ms"] == pytest.approx(worst, rel=1e-12)


# --- energy of GPUs held without serving ----------------------------------------------------------


@pytest.mark.parametrize("fidelity", ["fluid", "request"])
def test_idle_gpus_held_by_a_service_are_its_energy_and_reported_as_idle(tmp_path, fidelity):
    """Two runs that differ only in a replica held with no request to serve: the services'
    energy differs by exactly that replica's idle energy (its GPUs' idle and host share x
    PUE over the run), all of it in `energy_serving_idle_kwh`; the sites' energy is the
    same (the GPUs draw idle power whether the service holds them or not)."""
    spare = {**CHAT, "name": "spare", "replicas": {"b": 1}, "requests": {"rate_per_s": 0.0}}
    lean = sim.simulate(serving_only(tmp_path, fidelity=fidelity)).summary
    held = sim.simulate(serving_only(tmp_path, services=[CHAT, spare], fidelity=fidelity)).summary
    b = serving_only(tmp_path).sites[1]
    floor_w = GPU_CATALOG["H100-SXM"].idle_w + b.host_w_per_gpu
    idle_kwh = 2 * floor_w * TWO_SITES[1]["pue"] * 3600.0 / 3.6e6
    assert held["energy_serving_kwh"] - lean["energy_serving_kwh"] == pytest.approx(
        idle_kwh, rel=1e-9
    )
    assert held["energy_serving_idle_kwh"] - lean["energy_serving_idle_kwh"] == pytest.approx(
        idle_kwh, rel=1e-9
    )
    assert held["energy_facility_kwh"] == pytest.approx(lean["energy_facility_kwh"], rel=1e-12)


@pytest.mark.parametrize("fidelity", ["request", "iteration"])
def test_a_replica_held_idle_beside_a_serving_one_is_idle_energy_all_along(tmp_path, fidelity):
    """At the levels that follow each replica's batch: two runs that differ only in a second
    replica at site b, where requests come one at a time (one a minute, each served in
    seconds), so the least loaded replica is always the first: the services' idle energy
    differs by exactly the second replica's idle energy over the run, also while the first
    serves."""
    write_requests(
        RequestTable(np.arange(0.0, 3600.0, 60.0), np.full(60, 100), np.full(60, 50)),
        tmp_path / "requests.parquet",
    )
    runs = {}
    for n in (1, 2):
        chat = {**CHAT, "replicas": {"b": n}, "requests": {"file": "requests.parquet"}}
        scenario = serving_only(tmp_path, services=[chat], fidelity=fidelity)
        runs[n] = sim.simulate(scenario).summary
    assert runs[1]["requests_served"] == runs[2]["requests_served"] == 60
    floor_w = GPU_CATALOG["H100-SXM"].idle_w + scenario.sites[1].host_w_per_gpu
    idle_kwh = 2 * floor_w * TWO_SITES[1]["pue"] * 3600.0 / 3.6e6
    assert runs[2]["energy_serving_idle_kwh"] - runs[1]["energy_serving_idle_kwh"] == (
        pytest.approx(idle_kwh, rel=1e-9)
    )


def test_idle_and_loading_energy_are_parts_of_the_serving_energy(tmp_path):
    """At the request level a replica is idle whenever it has nothing in flight, even
    while another replica of its site serves; a cold start's energy is reported apart."""
    light = {**CHAT, "replicas": {"a": 2}, "requests": {"rate_per_s": 0.05}}
    script = Script({600.0: lambda st: [Scale(st.service("chat"), "b", 1)]})
    scenario = serving_only(tmp_path, services=[light])
    s = sim.simulate(scenario, script).summary
    floor_w = GPU_CATALOG["H100-SXM"].idle_w + scenario.sites[1].host_w_per_gpu
    tokens = build_sources(scenario, seed_sequences(scenario.seed)["services"])[0].tokens
    law = tokens.output_law  # the azure-conv preset's, at the source's mean
    assert law is not None
    out = law.scaled(tokens.mean_output / law.mean)
    model = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 2, 64, tokens.mean_input, out)
    # 8 s of cold start (test_services) of 2 GPUs at site b's PUE
    loading_w = 2 * floor_w + model.load_w - model.power_w[0]
    assert s["energy_serving_loading_kwh"] == pytest.approx(
        loading_w * 8.0 * TWO_SITES[1]["pue"] / 3.6e6, rel=1e-6
    )
    # two replicas at a, 0.05 requests/s of a few seconds each: mostly idle
    idle_or_loading = s["energy_serving_idle_kwh"] + s["energy_serving_loading_kwh"]
    assert 0.8 * s["energy_serving_kwh"] < idle_or_loading < s["energy_serving_kwh"]


def test_with_one_service_the_fluid_tail_over_requests_is_that_services_own(tmp_path):
    """One service at the fluid level: its pooled TTFT p99, read from its latency grid, is
    within 0.2% of its own interpolated p99, and its tpot p99 is its own. (At the request
    level the pooled p99 is an observed latency, the services' own interpolate between
    two: `test_tails_are_over_every_request_and_the_worst_service_apart`.)"""
    s = sim.simulate(serving_only(tmp_path, fidelity="fluid")).summary
    assert s["ttft_p99_requests_ms"] == pytest.approx(s["ttft_p99_worst_service_ms"], rel=2e-3)
    assert s["tpot_p99_requests_ms"] == s["tpot_p99_worst_service_ms"]


def test_without_a_directive_change_inside_a_step_its_arrivals_are_in_the_level_at_its_start():
    """`directive_mix` without a change inside the steps reads no arrivals: each step all in
    the level in force at its start, as the arrivals' own count gives when a change that
    changes nothing (level 0 again at 1,810.5 s) makes it read them."""
    from sim.engine.service_quality import directive_mix
    from sim.serving.sources import SyntheticSource

    source = SyntheticSource(2.0, 7200.0, np.random.SeedSequence(4), 0.5, 0.0, "azure-conv")
    edges = 60.0 * np.arange(121)
    at_edges = directive_mix(source, edges, np.array([0.0, 3600.0]), np.array([0, 2]), 3)
    counted = directive_mix(source, edges, np.array([0.0, 1810.5, 3600.0]), np.array([0, 0, 2]), 3)
    np.testing.assert_array_equal(at_edges, counted)
    assert at_edges[:60, 0].all() and at_edges[60:, 2].all()
