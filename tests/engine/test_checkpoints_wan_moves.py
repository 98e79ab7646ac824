"""Jobs moving between sites pay for the WAN: a start away from the origin moves the job's
data, a resume or migration elsewhere moves its checkpoint; time, energy and carbon come
from the WAN model (sim.network) and land in the job's and the run's results."""

from __future__ import annotations

import pytest

import sim
from sim.api import Migrate, Start
from sim.errors import ScenarioError
from sim.network import Wan
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site, write_jobs

SITES = [
    site(name="frankfurt", lat=50.11, lon=8.68, carbon={"zone": "DE", "year": 2020}),
    site(name="madrid", lat=40.42, lon=-3.70, carbon={"zone": "ES", "year": 2020}),
]
WAN = {"topology": "world", "energy_model": "path"}


def scenario(tmp_path, data_gb=0.0, checkpoint_gb=0.0, **wan):
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
    return make_scenario(tmp_path, workload=workload, sites=SITES, wan={**WAN, **wan})


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
    cost = Wan.from_scenario(sc).cost("frankfurt", "madrid", 1000.0, 0.0)
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
    assert r.meta["wan_model"] == "path"


def test_starting_at_the_origin_moves_nothing(tmp_path):
    r = sim.simulate(scenario(tmp_path, data_gb=1000.0), StartAt("frankfurt"))
    s = r.summary
    assert (s["carbon_wan_kg"], s["energy_wan_kwh"], s["wan_data_gb"]) == (0.0, 0.0, 0.0)
    assert s["jobs_away_share"] == 0.0
    assert r.jobs["end_s"].tolist() == [pytest.approx(2 * 3600.0)]


def test_a_migration_moves_the_checkpoint_after_writing_it(tmp_path):
    sc = scenario(tmp_path, checkpoint_gb=200.0)  # 100 s to write and to read at 2 GB/s
    r = sim.simulate(sc, StartAt("frankfurt", migrate_at_s=3600.0, to="madrid"))
    cost = Wan.from_scenario(sc).cost("frankfurt", "madrid", 200.0, 3600.0 + 100.0)
    (job,) = r.jobs.to_dict("records")
    assert job["wan_gb"] == 200.0
    assert job["wan_carbon_kg"] == pytest.approx(cost.carbon_kg)
    assert job["end_s"] == pytest.approx(3600.0 + 100.0 + cost.duration_s + 100.0 + 3600.0)


def test_policies_see_the_cost_of_a_transfer_before_deciding(tmp_path):
    sc = scenario(tmp_path)
    h = PolicyHarness(sc).advance(0.0)
    cost = Wan.from_scenario(sc).cost("frankfurt", "madrid", 50.0, 0.0)
    assert h.state.transfer_cost("frankfurt", "madrid", 50.0) == pytest.approx(
        (cost.duration_s, cost.energy_kwh, cost.carbon_kg)
    )
    assert h.state.transfer_cost("madrid", "madrid", 50.0) == (0.0, 0.0, 0.0)


def test_contention_is_refused_until_the_engine_drives_it(tmp_path):
    with pytest.raises(ScenarioError, match="contention"):
        sim.simulate(scenario(tmp_path, contention=True), "run_now")
