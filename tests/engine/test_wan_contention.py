"""With `wan.contention = true` the engine's moves share link capacity max-min fairly
(`sim.network.Transfers`): a job is held until its bytes arrive, however the others slow
them, and is charged exactly for the rates it actually got (docs/wan.md)."""

from __future__ import annotations

import pytest

import sim
from sim.api import Migrate, Start
from tests.conftest import make_scenario, scenario_wan, site, write_jobs

SITES = [
    site(name="frankfurt", lat=50.11, lon=8.68, carbon={"zone": "DE", "year": 2020}),
    site(name="madrid", lat=40.42, lon=-3.70, carbon={"zone": "ES", "year": 2020}),
    site(name="paris", lat=48.86, lon=2.35, carbon={"zone": "FR", "year": 2020}),
]
WORK_S = 2 * 3600.0  # 2 reference GPU-h on one A100-80GB, compute-bound
GB = 1000.0  # 80 s alone at the 100 Gbit/s of a site's leg


def scenario(tmp_path, jobs, contention=True, checkpoint_gb=0.0, sites=SITES):
    """Jobs (id, submit s, origin site) of 2 GPU-h with `GB` of data each."""
    rows = [
        {
            "job_id": job_id,
            "submit_time": submit_s,
            "gpus": 1,
            "work_gpu_h": 2.0,
            "profile": "compute-bound",
            "interruptible": True,
            "data_gb": GB,
            "checkpoint_gb": checkpoint_gb,
            "origin_site": origin,
        }
        for job_id, submit_s, origin in jobs
    ]
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", rows))}
    wan = {"topology": "world", "contention": contention}
    return make_scenario(tmp_path, workload=workload, sites=sites, wan=wan)


class StartAt:
    """Starts every pending job at `where[job id]`; at `migrate` = (t, job id, site), moves
    that job (held or not)."""

    tick_s = 4.0

    def __init__(self, where, migrate=None):
        self.where, self.migrate = where, migrate

    def decide(self, state):
        acts = [Start(j, self.where[j.id], gpu_model="A100-80GB") for j in state.pending]
        if self.migrate and state.now_s == self.migrate[0]:
            acts += [Migrate(j, self.migrate[2]) for j in state.running if j.id == self.migrate[1]]
        return acts


def by_id(results):
    return results.jobs.set_index("job_id")


def test_two_moves_on_one_bottleneck_each_take_twice_as_long_and_cost_the_same_energy(tmp_path):
    sc = scenario(tmp_path, [("a", 0.0, "frankfurt"), ("b", 0.0, "frankfurt")])
    wan = scenario_wan(sc)
    alone = wan.cost("frankfurt", "madrid", GB, 0.0)
    route = wan.route("frankfurt", "madrid")
    assert alone.duration_s - alone.propagation_s == pytest.approx(80.0)
    # Max-min fair: both cross frankfurt's 100 Gbit/s leg, so each gets 50 Gbit/s for 160 s.
    shared = wan.priced(route, GB, 0.0, 50.0)
    results = sim.simulate(sc, StartAt({"a": "madrid", "b": "madrid"}))
    assert results.meta["wan_contention"] is True
    jobs = by_id(results)
    for job_id in "ab":
        job = jobs.loc[job_id]
        assert job["end_s"] == pytest.approx(160.0 + alone.propagation_s + WORK_S)
        assert job["wan_energy_kwh"] == pytest.approx(alone.energy_kwh, rel=1e-12)
        assert job["wan_carbon_kg"] == pytest.approx(shared.carbon_kg, rel=1e-9)
        assert job["wan_gb"] == GB


def test_rates_change_when_a_move_joins_or_ends_as_max_min_fairness_says(tmp_path):
    sc = scenario(tmp_path, [("a", 0.0, "frankfurt"), ("b", 40.0, "frankfurt")])
    prop = scenario_wan(sc).route("frankfurt", "madrid").propagation_s
    jobs = by_id(sim.simulate(sc, StartAt({"a": "madrid", "b": "madrid"})))
    # a: 500 GB alone by 40 s, the other 500 at 50 Gbit/s -> sent at 120 s;
    # b: 500 GB at 50 Gbit/s by 120 s, the rest alone at 100 Gbit/s -> sent at 160 s.
    assert jobs.loc["a", "end_s"] == pytest.approx(120.0 + prop + WORK_S)
    assert jobs.loc["b", "end_s"] == pytest.approx(160.0 + prop + WORK_S)


def test_moves_in_opposite_directions_do_not_slow_each_other(tmp_path):
    sc = scenario(tmp_path, [("a", 0.0, "frankfurt"), ("b", 0.0, "madrid")])
    cost = scenario_wan(sc).cost("frankfurt", "madrid", GB, 0.0)
    jobs = by_id(sim.simulate(sc, StartAt({"a": "madrid", "b": "frankfurt"})))
    assert jobs["end_s"].tolist() == pytest.approx([cost.duration_s + WORK_S] * 2)


def test_a_move_alone_costs_what_it_costs_without_contention(tmp_path):
    runs = [
        sim.simulate(scenario(tmp_path, [("a", 0.0, "frankfurt")], contention=c), StartAt(where))
        for c in (True, False)
        for where in [{"a": "paris"}]
    ]
    cols = ["end_s", "wan_gb", "wan_energy_kwh", "wan_carbon_kg", "energy_kwh", "carbon_kg"]
    contended, free = (by_id(r).loc["a", cols].to_numpy(dtype=float) for r in runs)
    assert contended == pytest.approx(free, rel=1e-12)


def test_a_held_job_that_leaves_frees_the_link_and_pays_for_the_bits_it_sent(tmp_path):
    sc = scenario(tmp_path, [("a", 0.0, "frankfurt"), ("b", 0.0, "frankfurt")])
    wan = scenario_wan(sc)
    route = wan.route("frankfurt", "madrid")
    # Both send at 50 Gbit/s; at 40 s "a" (250 GB sent) goes back to its data at frankfurt,
    # and "b" sends its last 750 GB alone at 100 Gbit/s: done at 100 s.
    policy = StartAt({"a": "madrid", "b": "madrid"}, migrate=(40.0, "a", "frankfurt"))
    jobs = by_id(sim.simulate(sc, policy))
    a, b = jobs.loc["a"], jobs.loc["b"]
    part = wan.priced(route, 250.0, 0.0, 50.0)
    assert (a["wan_gb"], a["wan_energy_kwh"], a["wan_carbon_kg"]) == pytest.approx(
        (250.0, part.energy_kwh, part.carbon_kg), rel=1e-9
    )
    assert a["end_s"] == pytest.approx(40.0 + WORK_S)
    assert b["end_s"] == pytest.approx(100.0 + route.propagation_s + WORK_S)


def test_a_migration_sends_its_checkpoint_after_the_write_beside_other_moves(tmp_path):
    sc = scenario(
        tmp_path, [("a", 0.0, "frankfurt"), ("b", 3600.0, "frankfurt")], checkpoint_gb=2 * GB
    )
    # 3600 s: "a" writes its 2,000 GB checkpoint at frankfurt (1,000 s at 2 GB/s), "b"
    # starts at madrid and sends its data alone (80 s); from 4600 s "a"'s checkpoint is
    # sent alone (160 s), then read at madrid (1,000 s).
    policy = StartAt({"a": "frankfurt", "b": "madrid"}, migrate=(3600.0, "a", "madrid"))
    jobs = by_id(sim.simulate(sc, policy))
    prop = scenario_wan(sc).route("frankfurt", "madrid").propagation_s
    assert jobs.loc["b", "end_s"] == pytest.approx(3600.0 + 80.0 + prop + WORK_S)
    assert jobs.loc["a", "end_s"] == pytest.approx(4600.0 + 160.0 + prop + 1000.0 + WORK_S / 2)
    assert jobs["wan_gb"].tolist() == [2 * GB, GB]


def test_moves_that_overlap_with_a_checkpoint_transfer_share_the_link(tmp_path):
    sc = scenario(
        tmp_path, [("a", 0.0, "frankfurt"), ("b", 4600.0, "frankfurt")], checkpoint_gb=2 * GB
    )
    # From 4600 s "a"'s 2,000 GB checkpoint and "b"'s 1,000 GB of data share frankfurt's leg
    # at 50 Gbit/s each: b's data is sent at 4760 s, then a's last 1,000 GB alone by 4840 s.
    policy = StartAt({"a": "frankfurt", "b": "madrid"}, migrate=(3600.0, "a", "madrid"))
    jobs = by_id(sim.simulate(sc, policy))
    prop = scenario_wan(sc).route("frankfurt", "madrid").propagation_s
    assert jobs.loc["b", "end_s"] == pytest.approx(4760.0 + prop + WORK_S)
    assert jobs.loc["a", "end_s"] == pytest.approx(4840.0 + prop + 1000.0 + WORK_S / 2)


def test_every_byte_started_is_delivered_and_charged_once(tmp_path):
    origins = ["frankfurt", "madrid", "paris"]
    jobs = [(f"j{i}", 17.0 * i, origins[i % 3]) for i in range(12)]
    where = {job_id: origins[(i + 1 + i // 3) % 3] for i, (job_id, _, _) in enumerate(jobs)}
    sc = scenario(
        tmp_path, jobs, sites=[{**s, "gpus": [{"model": "A100-80GB", "count": 8}]} for s in SITES]
    )
    r = sim.simulate(sc, StartAt(where))
    moves = r.events[r.events["kind"] == "transfer"]
    wan = scenario_wan(sc)
    per_gb = {(o, d): wan.energy_kwh(o, d, 1.0) for o in origins for d in origins}
    assert (r.jobs["state"] == "completed").all()
    away = sum(where[job_id] != origin for job_id, _, origin in jobs)
    assert r.summary["wan_data_gb"] == moves["value"].sum() == GB * away
    assert r.summary["energy_wan_kwh"] == pytest.approx(
        sum(per_gb[o, d] * GB for o, d in zip(moves["detail"], moves["site"], strict=True))
    )
