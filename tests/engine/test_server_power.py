"""Whole-server power: a pool of servers draws each server's host power at its host
utilisation (its GPUs held / its GPUs), and with `power_off` whole servers switch off and
boot before use (docs/servers.md, "Host power in a run")."""

from __future__ import annotations

import pytest

import sim
from sim.api import Action, Policy, SystemState
from sim.models.hardware import GPU_CATALOG, estimate, speed
from sim.models.servers import SERVER_CATALOG, host_power_w
from tests.conftest import make_scenario, server_site

DGX = SERVER_CATALOG["DGX-A100"]
IDLE_W = GPU_CATALOG["A100-80GB"].idle_w
ACTIVE_W = estimate("A100-80GB", "compute-bound").power_w
RUNTIME_S = 3600.0 / speed("A100-80GB", "compute-bound")  # one GPU-hour on one GPU
OFF_W = 10.0


def dgx_site(servers: int, **keys) -> dict:
    return server_site(
        gpus=[{"model": "A100-80GB", "servers": {"model": "DGX-A100", "count": servers}}],
        pue=1.0,
        **keys,
    )


def power_off(**keys) -> dict:
    return {"power_off": {"idle_s": 600.0, "wake_s": 300.0, "off_w": OFF_W, **keys}}


def job(job_id: str, submit_time: float, work_gpu_h: float = 1.0) -> dict:
    return {
        "job_id": job_id,
        "submit_time": submit_time,
        "gpus": 1,
        "work_gpu_h": work_gpu_h,
        "profile": "compute-bound",
    }


def run(tmp_path, jobs, site_keys, duration_h=4.0):
    scenario = make_scenario(tmp_path, jobs, sites=[site_keys], duration_h=duration_h)
    return sim.simulate(scenario, "run_now")


def test_server_energy_is_its_host_at_the_held_share_plus_its_gpus_exactly(tmp_path):
    r = run(tmp_path, [job("a", 0.0)], dgx_site(1))
    horizon_s = 4 * 3600.0
    host_ws = host_power_w(DGX, 1 / 8) * RUNTIME_S + DGX.host_idle_w * (horizon_s - RUNTIME_S)
    gpus_ws = ACTIVE_W * RUNTIME_S + IDLE_W * (8 * horizon_s - RUNTIME_S)
    s = r.summary
    assert s["energy_facility_kwh"] == pytest.approx((host_ws + gpus_ws) / 3.6e6, rel=1e-12)
    # the job pays its GPU and a full host's share per GPU; idle energy is the rest
    job_kwh = (ACTIVE_W + DGX.host_peak_w / 8) * RUNTIME_S / 3.6e6
    assert r.jobs["energy_kwh"].iloc[0] == pytest.approx(job_kwh, rel=1e-12)
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )
    levels = dict(zip(r.power["time_s"], r.power["it_w"], strict=True))
    assert levels[0.0] == pytest.approx(host_power_w(DGX, 1 / 8) + ACTIVE_W + 7 * IDLE_W)
    assert levels[RUNTIME_S] == pytest.approx(DGX.host_idle_w + 8 * IDLE_W)


def test_a_server_off_draws_exactly_off_w_and_a_job_on_it_starts_after_wake_s(tmp_path):
    r = run(tmp_path, [job("a", 0.0), job("b", 5000.0)], dgx_site(2, **power_off()))
    ev = r.events[r.events["kind"].isin(["start", "finish", "power_off", "wake"])]
    assert list(zip(ev["kind"], ev["time_s"], ev["value"].fillna(0), strict=True)) == [
        ("start", 0.0, 0),
        ("power_off", 600.0, 1),  # the server "a" is not on, idle since 0
        ("finish", RUNTIME_S, 0),
        ("power_off", RUNTIME_S + 600.0, 1),  # "a"'s server, idle since it finished
        ("start", 5000.0, 0),
        ("wake", 5000.0, 1),  # no server on: "b" waits for one to boot
        ("finish", 5000.0 + 300.0 + RUNTIME_S, 0),
        ("power_off", 5000.0 + 300.0 + RUNTIME_S + 600.0, 1),
    ]
    levels = dict(zip(r.power["time_s"], r.power["it_w"], strict=True))
    busy_server_w = host_power_w(DGX, 1 / 8) + ACTIVE_W + 7 * IDLE_W
    assert levels[600.0] == pytest.approx(busy_server_w + OFF_W)
    assert levels[RUNTIME_S + 600.0] == pytest.approx(2 * OFF_W)
    booting_w = host_power_w(DGX, 1 / 8) + 8 * IDLE_W  # "b"'s GPU held at idle
    assert levels[5000.0] == pytest.approx(booting_w + OFF_W)
    assert levels[5300.0] == pytest.approx(busy_server_w + OFF_W)
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )


def test_a_job_goes_on_a_powered_server_before_waking_one(tmp_path):
    # "a" runs 3 h on server 0; the other server is off by 600 s; "b" joins "a"'s server
    r = run(tmp_path, [job("a", 0.0, 3.0), job("b", 1000.0)], dgx_site(2, **power_off()))
    assert (r.events["kind"] == "wake").sum() == 0
    starts = r.events[r.events["kind"] == "start"]
    assert list(starts["time_s"]) == [0.0, 1000.0]
    finish_b = r.events[(r.events["kind"] == "finish")]["time_s"].min()
    assert finish_b == pytest.approx(1000.0 + RUNTIME_S)


def test_a_server_with_a_running_job_never_switches_off(tmp_path):
    r = run(tmp_path, [job("a", 0.0, 3.0)], dgx_site(1, **power_off()))
    offs = r.events[r.events["kind"] == "power_off"]
    assert list(offs["time_s"]) == [3 * RUNTIME_S + 600.0]  # only once "a" has finished
    levels = dict(zip(r.power["time_s"], r.power["it_w"], strict=True))
    assert levels[3 * RUNTIME_S + 600.0] == pytest.approx(OFF_W)


def test_a_site_of_servers_refuses_host_w_per_gpu_in_one_line(tmp_path):
    with pytest.raises(sim.ScenarioError, match="host_w_per_gpu = 50: pools of servers"):
        make_scenario(sites=[{**dgx_site(1), "host_w_per_gpu": 50.0}])


def test_a_site_of_servers_refuses_gpus_per_node_in_one_line():
    """The server model gives the GPUs per server: a site's gpus_per_node would be ignored."""
    with pytest.raises(sim.ScenarioError, match="gpus_per_node = 4: pools of servers"):
        make_scenario(sites=[{**dgx_site(1), "gpus_per_node": 4}])


def test_a_pool_of_gpus_beside_servers_keeps_host_w_per_gpu(tmp_path):
    pools = [
        {"model": "A100-80GB", "servers": {"model": "DGX-A100", "count": 1}},
        {"model": "H100-SXM", "count": 4},
    ]
    keys = {**server_site(gpus=pools, pue=1.0), "host_w_per_gpu": 30.0}
    r = run(tmp_path, [job("a", 1800.0)], keys, duration_h=1.0)
    h100_w = 4 * (GPU_CATALOG["H100-SXM"].idle_w + 30.0)
    assert r.power["it_w"].iloc[0] == pytest.approx(DGX.host_idle_w + 8 * IDLE_W + h100_w)


def test_the_sites_table_gives_host_energy_and_time_off_to_check_it_energy(tmp_path):
    r = run(tmp_path, [job("a", 0.0), job("b", 5000.0)], dgx_site(2, **power_off()))
    row = r.sites.iloc[0]
    horizon_s = 4 * 3600.0
    off_s = (
        (horizon_s - 600.0)  # the server "a" is not on
        + (5000.0 - (RUNTIME_S + 600.0))  # "a"'s, until "b" wakes it
        + (horizon_s - (5000.0 + 300.0 + RUNTIME_S + 600.0))  # "b"'s, after
    )
    assert row["servers_off_h"] == pytest.approx(off_s / 3600.0)
    # IT energy = hosts while powered + GPUs of powered servers + off_w while off
    powered_gpu_s = 8 * (2 * horizon_s - off_s)
    gpus_ws = 2 * ACTIVE_W * RUNTIME_S + IDLE_W * (powered_gpu_s - 2 * RUNTIME_S)
    it_kwh = row["energy_host_kwh"] + (gpus_ws + OFF_W * off_s) / 3.6e6
    assert r.summary["energy_it_kwh"] == pytest.approx(it_kwh, rel=1e-12)


class _ReadsHostPower(Policy):
    """Records what `state.host_w_per_gpu` says at the first decision."""

    def __init__(self) -> None:
        self.read_w: dict[str, float] = {}

    def decide(self, state: SystemState) -> list[Action]:
        self.read_w = {site: state.host_w_per_gpu(site) for site in state.sites}
        return []


def test_policies_read_the_host_power_a_job_pays_per_gpu_on_servers(tmp_path):
    """A DGX-A100's full-load host over its 8 GPUs, averaged by GPUs with a 4-GPU pool
    at host_w_per_gpu beside it: (8 x 3,300 / 8 + 4 x 30) / 12 W."""
    pools = [
        {"model": "A100-80GB", "servers": {"model": "DGX-A100", "count": 1}},
        {"model": "H100-SXM", "count": 4},
    ]
    keys = {**server_site(gpus=pools, pue=1.0), "host_w_per_gpu": 30.0}
    policy = _ReadsHostPower()
    sim.simulate(make_scenario(tmp_path, [job("a", 0.0)], sites=[keys], duration_h=1.0), policy)
    (read_w,) = policy.read_w.values()
    assert read_w == pytest.approx((DGX.host_peak_w + 4 * 30.0) / 12, rel=1e-15)
    assert DGX.host_peak_w == pytest.approx(3300.0)
