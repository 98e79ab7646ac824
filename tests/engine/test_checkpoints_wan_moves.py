"""Jobs moving between sites pay for the WAN: a start away from the origin moves the job's
data, a resume or migration elsewhere moves its checkpoint; time, energy and carbon come
from the WAN model (sim.network) and land in the job's and the run's results."""

from __future__ import annotations

import pytest

import sim
from sim.api import Migrate, Start
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, scenario_wan, site, write_jobs

SITES = [
    site(name="frankfurt", lat=50.11, lon=8.68, carbon={"zone": "DE", "year": 2020}),
    site(name="madrid", lat=40.42, lon=-3.70, carbon={"zone": "ES", "year": 2020}),
]
WAN = {"topology": "world", "energy_model": "path"}


def scenario(tmp_path, data_gb=0.0, checkpoint_gb=0.0, sites=SITES, **wan):
    job = {
        "job_id": "j",
        "submit_time": 0,
        "gpus": 1,
        "work_gpu_h": 2.0,
        "profile": "compute-bound",
        "interruptible": True,
        "data_gb": data_gb,
        "checkpoint_gb": checkpoint_gb,
        "origin_site": "frankfurt",
    }
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", [job]))}
    return make_scenario(tmp_path, workload=workload, sites=sites, wan={**WAN, **wan})


class StartAt:
    """Starts every pending job at `site`; at `migrate_at_s`, migrates running ones to `to`."""

    def __init__(self, site, migrate_at_s=None, to=None):
        self.site, self.migrate_at_s, self.to = site, migrate_at_s, to
        self.tick_s = migrate_at_s

    def decide(self, state):
        acts = [Start(j, self.site, gpu_model="A100-80GB") for j in state.pending]
        if self.migrate_at_s is not None and state.now_s == self.migrate_at_s:
            acts += [Migrate(j, self.to) for j in state.running]
        return acts


def test_starting_away_from_the_origin_moves_the_data_first_and_charges_the_wan(tmp_path):
    sc = scenario(tmp_path, data_gb=1000.0)
    cost = scenario_wan(sc).cost("frankfurt", "madrid", 1000.0, 0.0)
    r = sim.simulate(sc, StartAt("madrid"))
    (job,) = r.jobs.to_dict("records")
    assert job["end_s"] == pytest.approx(cost.duration_s + 2 * 3600.0)
    assert (job["wan_gb"], job["wan_energy_kwh"], job["wan_carbon_kg"]) == pytest.approx(
        (1000.0, cost.energy_kwh, cost.carbon_kg)
    )
    s = r.summary
    assert s["carbon_wan_kg"] == pytest.approx(cost.carbon_kg) and cost.carbon_kg > 0
    assert s["carbon_total_kg"] == pytest.approx(
        s["carbon_operational_kg"] + s["carbon_embodied_kg"] + cost.carbon_kg
    )
    assert (s["wan_data_gb"], s["jobs_away_share"]) == (1000.0, 1.0)
    assert r.meta["wan_model"] == "path" and r.meta["wan_contention"] is False


def test_starting_at_the_origin_moves_nothing(tmp_path):
    r = sim.simulate(scenario(tmp_path, data_gb=1000.0), StartAt("frankfurt"))
    s = r.summary
    assert (s["carbon_wan_kg"], s["energy_wan_kwh"], s["wan_data_gb"]) == (0.0, 0.0, 0.0)
    assert s["jobs_away_share"] == 0.0
    assert r.jobs["end_s"].tolist() == [pytest.approx(2 * 3600.0)]


def test_a_migration_moves_the_checkpoint_after_writing_it(tmp_path):
    sc = scenario(tmp_path, checkpoint_gb=200.0)  # 100 s to write and to read at 2 GB/s
    r = sim.simulate(sc, StartAt("frankfurt", migrate_at_s=3600.0, to="madrid"))
    cost = scenario_wan(sc).cost("frankfurt", "madrid", 200.0, 3600.0 + 100.0)
    (job,) = r.jobs.to_dict("records")
    assert job["wan_gb"] == 200.0
    assert job["wan_carbon_kg"] == pytest.approx(cost.carbon_kg)
    assert job["end_s"] == pytest.approx(3600.0 + 100.0 + cost.duration_s + 100.0 + 3600.0)


def test_policies_see_the_cost_of_a_transfer_before_deciding(tmp_path):
    sc = scenario(tmp_path)
    h = PolicyHarness(sc).advance(0.0)
    cost = scenario_wan(sc).cost("frankfurt", "madrid", 50.0, 0.0)
    assert h.state.transfer_cost("frankfurt", "madrid", 50.0) == pytest.approx(
        (cost.duration_s, cost.energy_kwh, cost.carbon_kg)
    )
    assert h.state.transfer_cost("madrid", "madrid", 50.0) == (0.0, 0.0, 0.0)


class MigrateAt:
    """Starts every pending job at `site`; at each time of `plan` {t: site}, migrates the
    running jobs there (held or not)."""

    tick_s = 4.0

    def __init__(self, site, plan):
        self.site, self.plan = site, plan

    def decide(self, state):
        acts = [Start(j, self.site, gpu_model="A100-80GB") for j in state.pending]
        to = self.plan.get(state.now_s)
        return acts + [Migrate(j, to) for j in state.running if j.site != to] if to else acts


PARIS = site(name="paris", lat=48.86, lon=2.35, carbon={"zone": "FR", "year": 2020})


def three_sites(tmp_path, **wan):
    """Frankfurt, Madrid, Paris; a 200 GB checkpoint: written and read in 100 s, sent in 16 s."""
    return scenario(tmp_path, checkpoint_gb=200.0, sites=[*SITES, PARIS], **wan)


def test_a_held_job_that_migrates_before_its_checkpoint_left_pays_for_one_move(tmp_path):
    sc = three_sites(tmp_path)
    # 3600 s: to madrid (the write ends at 3700 s, then the checkpoint would leave);
    # 3652 s: still held, on to paris: the checkpoint goes from frankfurt, once.
    r = sim.simulate(sc, MigrateAt("frankfurt", {3600.0: "madrid", 3652.0: "paris"}))
    cost = scenario_wan(sc).cost("frankfurt", "paris", 200.0, 3700.0)
    (job,) = r.jobs.to_dict("records")
    assert job["wan_gb"] == 200.0
    assert (job["wan_energy_kwh"], job["wan_carbon_kg"]) == pytest.approx(
        (cost.energy_kwh, cost.carbon_kg), rel=1e-12
    )
    assert job["end_s"] == pytest.approx(3700.0 + cost.duration_s + 100.0 + 3600.0)


def test_a_held_job_that_leaves_mid_transfer_pays_for_the_bits_sent_and_one_full_move(tmp_path):
    sc = three_sites(tmp_path)
    # The checkpoint sends 3700-3716 s toward madrid; at 3708 s half of it has left.
    r = sim.simulate(sc, MigrateAt("frankfurt", {3600.0: "madrid", 3708.0: "paris"}))
    wan = scenario_wan(sc)
    half = wan.cost("frankfurt", "madrid", 100.0, 3700.0)
    whole = wan.cost("frankfurt", "paris", 200.0, 3708.0)
    assert half.duration_s - half.propagation_s == pytest.approx(8.0)
    (job,) = r.jobs.to_dict("records")
    assert (job["wan_gb"], job["wan_energy_kwh"], job["wan_carbon_kg"]) == pytest.approx(
        (300.0, half.energy_kwh + whole.energy_kwh, half.carbon_kg + whole.carbon_kg)
    )


def test_a_held_job_sent_back_before_its_checkpoint_left_moves_nothing(tmp_path):
    sc = scenario(tmp_path, checkpoint_gb=200.0)
    r = sim.simulate(sc, MigrateAt("frankfurt", {3600.0: "madrid", 3652.0: "frankfurt"}))
    (job,) = r.jobs.to_dict("records")
    assert (job["wan_gb"], job["wan_energy_kwh"], job["wan_carbon_kg"]) == (0.0, 0.0, 0.0)
    assert job["end_s"] == pytest.approx(3700.0 + 100.0 + 3600.0)  # write, read, the rest


def test_migration_cost_includes_the_boot_of_powered_off_nodes_at_the_destination(tmp_path):
    asleep = {"idle_s": 600.0, "wake_s": 300.0, "off_w": 10.0}
    sites = [SITES[0], {**SITES[1], "gpus_per_node": 4, "power_off": asleep}]
    sc = scenario(tmp_path, checkpoint_gb=200.0, sites=sites)
    h = PolicyHarness(sc).advance(0.0)
    h.apply([Start(h.job("j"), "frankfurt", gpu_model="A100-80GB")]).advance(1200.0)
    job = h.job("j")
    # Madrid's nodes are off since 600 s: the 216 s of write, send and read end before its
    # node is up, 300 s after the migration; the job holds the GPU at idle until then.
    cost = h.state.migration_cost(job, "madrid")
    move = scenario_wan(sc).cost("frankfurt", "madrid", 200.0, 1200.0)
    assert 100.0 + move.duration_s + 100.0 < 300.0
    assert cost.stall_s == pytest.approx(300.0)
    pool = h.engine.fleet.sites[1].pools[0]
    held_kwh = (pool.idle_w + pool.host_w) * 300.0 * 1.5 / 3.6e6
    write_kwh = (pool.idle_w + pool.host_w) * 100.0 * 1.5 / 3.6e6  # the same GPU model
    assert cost.energy_kwh == pytest.approx(held_kwh + write_kwh + move.energy_kwh)
    h.apply([Migrate(job, "madrid")]).advance(8000.0)
    assert h.times("j")[1] == pytest.approx(1200.0 + cost.stall_s + 2 * 3600.0 - 1200.0)


def test_migration_cost_of_a_held_job_prices_the_move_from_where_its_checkpoint_lies(tmp_path):
    sc = three_sites(tmp_path)
    h = PolicyHarness(sc).advance(0.0)
    h.apply([Start(h.job("j"), "frankfurt", gpu_model="A100-80GB")]).advance(3600.0)
    h.apply([Migrate(h.job("j"), "madrid")]).advance(3652.0)
    job = h.job("j")
    assert job.held
    # Still writing at frankfurt until 3700 s: no new write, the rest of this one, then
    # frankfurt -> paris (priced now), and the read.
    cost = h.state.migration_cost(job, "paris")
    move = scenario_wan(sc).cost("frankfurt", "paris", 200.0, 3652.0)
    assert cost.stall_s == pytest.approx(48.0 + move.duration_s + 100.0)
    assert cost.carbon_kg > move.carbon_kg
    h.apply([Migrate(job, "paris")]).advance(3652.0 + cost.stall_s - 1.0)
    assert job.held and job.site == "paris"
    h.advance(3652.0 + cost.stall_s + 1.0)
    assert not job.held
