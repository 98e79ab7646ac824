"""Idle nodes switch off after a while; a job that needs one waits for it to boot."""

from __future__ import annotations

import pytest

import sim
from sim.models.hardware import GPU_CATALOG, estimate, speed
from tests.conftest import make_scenario, site

IDLE_W = GPU_CATALOG["A100-80GB"].idle_w
HOST_W, PUE, OFF_W = 40.0, 1.5, 10.0
NODE_W = 4 * (IDLE_W + HOST_W) - OFF_W  # IT power saved by one node switched off


def power_off_site(**kw):
    return site(
        gpus=[{"model": "A100-80GB", "count": 8}],
        gpus_per_node=4,
        power_off={"idle_s": 600.0, "wake_s": 300.0, "off_w": OFF_W},
        **kw,
    )


def job(job_id, submit_time, work_gpu_h=1.0, gpus=1):
    return {
        "job_id": job_id,
        "submit_time": submit_time,
        "gpus": gpus,
        "work_gpu_h": work_gpu_h,
        "profile": "compute-bound",
    }


def test_idle_nodes_switch_off_and_a_later_job_waits_for_one_to_boot(tmp_path):
    jobs = [job("a", 0.0), job("b", 5000.0)]
    r = sim.simulate(
        make_scenario(tmp_path, jobs, sites=[power_off_site()], duration_h=4), "run_now"
    )
    runtime_s = 3600.0 / speed("A100-80GB", "compute-bound")
    ev = r.events[r.events["kind"].isin(["start", "finish", "power_off", "wake"])]
    assert list(zip(ev["kind"], ev["time_s"], ev["value"].fillna(0), strict=True)) == [
        ("start", 0.0, 0),
        ("power_off", 600.0, 1),  # the node "a" does not use, idle since 0
        ("finish", runtime_s, 0),
        ("power_off", runtime_s + 600.0, 1),  # "a"'s node, idle since it finished
        ("start", 5000.0, 0),
        ("wake", 5000.0, 1),  # no node on: "b" waits for one to boot
        ("finish", 5000.0 + 300.0 + runtime_s, 0),
        ("power_off", 5000.0 + 300.0 + runtime_s + 600.0, 1),
    ]
    active_w = estimate("A100-80GB", "compute-bound").power_w
    b = r.jobs.set_index("job_id").loc["b"]
    assert b["energy_kwh"] == pytest.approx(
        ((IDLE_W + HOST_W) * 300.0 + (active_w + HOST_W) * runtime_s) * PUE / 3.6e6
    )
    all_on_w = 8 * (IDLE_W + HOST_W)
    levels = dict(zip(r.power["time_s"], r.power["it_w"], strict=True))
    assert levels[600.0] == pytest.approx(all_on_w - NODE_W + active_w - IDLE_W)
    assert levels[runtime_s + 600.0] == pytest.approx(all_on_w - 2 * NODE_W)


def test_energy_is_conserved_with_nodes_switching_on_and_off(tmp_path):
    jobs = [job(f"j{i}", 700.0 * i, work_gpu_h=0.5 + i % 3, gpus=1 + i % 5) for i in range(12)]
    s = sim.simulate(
        make_scenario(
            tmp_path, jobs, sites=[power_off_site(pue=[1.2] * 12 + [1.4] * 12)], duration_h=10
        ),
        "run_now",
    ).summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-9
    )


def test_power_off_needs_whole_nodes():
    with pytest.raises(sim.ScenarioError, match="not a multiple of gpus_per_node 3"):
        make_scenario(sites=[site(gpus_per_node=3, power_off={})])


def test_the_state_shows_powered_off_gpus_and_estimates_include_the_boot(tmp_path):
    seen = {}

    class Probe:
        def decide(self, state):
            for j in state.pending:
                seen[state.now_s] = (state.powered_off_gpus("a"), state.estimate(j, "a")[0])
                return [sim.api.Start(j, "a")]
            return []

    jobs = [job("a", 0.0, work_gpu_h=0.1), job("b", 5000.0)]
    sim.simulate(make_scenario(tmp_path, jobs, sites=[power_off_site()], duration_h=4), Probe())
    runtime_s = 3600.0 / speed("A100-80GB", "compute-bound")
    assert seen[0.0] == ({"A100-80GB": 0}, pytest.approx(0.1 * runtime_s))
    assert seen[5000.0] == ({"A100-80GB": 8}, pytest.approx(300.0 + runtime_s))
