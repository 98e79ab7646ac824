"""Space-shifting: jobs run only where they may (data residency), the space-shifting
policies pick sites by carbon with the WAN's cost included, and `migrate` moves a running
job only when the predicted saving exceeds the migration's cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from policies import REGISTRY
from policies.space_shifting import ForecastSite, LowestCarbonSite, MigrateWhenWorth, SpaceTime
from sim.api import Defer, Migrate, Start
from sim.errors import PolicyError, ScenarioError, TraceError
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, scenario_jobs, site, write_jobs

# Constant grids make expected carbon exact: a dirty origin, a clean site far away.
DIRTY, CLEAN, MIDDLE = 700.0, 50.0, 300.0
SITES = [
    site(name="warsaw", lat=52.23, lon=21.01, carbon={"constant_g_per_kwh": DIRTY}),
    site(name="stockholm", lat=59.33, lon=18.07, carbon={"constant_g_per_kwh": CLEAN}),
    site(name="frankfurt", lat=50.11, lon=8.68, carbon={"constant_g_per_kwh": MIDDLE}),
]
WAN = {"topology": "europe", "energy_model": "path"}


def job(job_id="j", **changes) -> dict:
    return {
        "job_id": job_id,
        "submit_time": 0,
        "gpus": 1,
        "work_gpu_h": 4.0,
        "profile": "compute-bound",
        "origin_site": "warsaw",
        **changes,
    }


def scenario(tmp_path, jobs, wan=WAN, **overrides):
    return make_scenario(tmp_path, jobs, sites=SITES, wan=wan, **overrides)


# --- data residency: input ----------------------------------------------------------------


def test_a_job_file_lists_the_sites_a_job_may_use(tmp_path):
    sc = scenario(tmp_path, [job("a", allowed_sites="warsaw; frankfurt"), job("b")])
    jobs = scenario_jobs(sc.workload.file, sc)
    h = PolicyHarness(sc).advance(0.0)
    assert h.job("a").allowed_sites == ("warsaw", "frankfurt")
    assert h.job("b").allowed_sites == ("warsaw", "stockholm", "frankfurt")
    frame = jobs.to_frame(sc.site_names())
    assert frame["allowed_sites"].tolist() == ["warsaw;frankfurt", ""]


def test_an_unknown_allowed_site_is_an_error_naming_the_line(tmp_path):
    sc = scenario(tmp_path, [job("a"), job("b", allowed_sites="warsaw;oslo")])
    with pytest.raises(TraceError, match=r"jobs.csv:3.*allowed_sites.*'warsaw;oslo'"):
        scenario_jobs(sc.workload.file, sc)


def test_workload_residency_narrows_the_sites_of_jobs_by_origin(tmp_path):
    jobs = [job("w"), job("f", origin_site="frankfurt"), job("x", allowed_sites="warsaw")]
    workload = {
        "file": str(write_jobs(tmp_path / "jobs.csv", jobs)),
        "residency": {"warsaw": ["warsaw", "frankfurt"]},
    }
    h = PolicyHarness(scenario(tmp_path, None, workload=workload)).advance(0.0)
    assert h.job("w").allowed_sites == ("warsaw", "frankfurt")
    assert h.job("f").allowed_sites == ("warsaw", "stockholm", "frankfurt")
    assert h.job("x").allowed_sites == ("warsaw",)


@pytest.mark.parametrize(
    ("residency", "message"),
    [
        ({"oslo": ["warsaw"]}, r"workload.residency.oslo: unknown site 'oslo'"),
        ({"warsaw": ["oslo"]}, r"workload.residency.warsaw must list sites"),
        ({"warsaw": []}, r"workload.residency.warsaw must list sites"),
    ],
)
def test_a_bad_residency_rule_is_an_error_naming_the_key(tmp_path, residency, message):
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", [job()])), "residency": residency}
    with pytest.raises(ScenarioError, match=message):
        scenario(tmp_path, None, workload=workload)


def test_a_job_left_with_no_site_is_an_error(tmp_path):
    workload = {
        "file": str(write_jobs(tmp_path / "jobs.csv", [job("x", allowed_sites="stockholm")])),
        "residency": {"warsaw": ["warsaw"]},
    }
    with pytest.raises(ScenarioError, match=r"job x: .*\['stockholm'\].*no site in common"):
        sim.simulate(scenario(tmp_path, None, workload=workload))


# --- data residency: the engine refuses other sites ----------------------------------------


def test_the_engine_refuses_to_start_resume_or_migrate_a_job_where_it_may_not_run(tmp_path):
    sc = scenario(tmp_path, [job(allowed_sites="warsaw;frankfurt", interruptible=True)])
    h = PolicyHarness(sc).advance(0.0)
    j = h.job("j")
    with pytest.raises(PolicyError, match=r"may not run on stockholm \(allowed sites: warsaw"):
        h.apply([Start(j, "stockholm")])
    h.apply([Start(j, "warsaw")])
    with pytest.raises(PolicyError, match="may not run on stockholm"):
        h.apply([Migrate(j, "stockholm")])
    h.apply([Migrate(j, "frankfurt")])


RESIDENT = "warsaw;frankfurt"


def residency_workload(tmp_path) -> dict:
    """Jobs from the dirty site that may not go to the cleanest one, mixed with free ones."""
    rng = np.random.default_rng(5)
    jobs = [
        job(
            f"j{i}",
            submit_time=float(i * 600),
            gpus=int(rng.choice([1, 2, 4])),
            work_gpu_h=float(rng.uniform(0.5, 6.0)),
            deadline=float(i * 600 + 12 * 3600) if i % 2 else "",
            interruptible=bool(i % 3 == 0),
            checkpoint_gb=5.0,
            data_gb=50.0,
            origin_site=["warsaw", "frankfurt"][i % 2],
            allowed_sites=RESIDENT if i % 4 < 3 else "",
        )
        for i in range(60)
    ]
    return {"file": str(write_jobs(tmp_path / "jobs.csv", jobs)), "checkpoint_interval_h": 1.0}


REQUIRED_PARAMS = {"carbon_threshold": {"percentile": 30}, "static_cap": {"watts": 250}}


@pytest.mark.parametrize("name", sorted(set(REGISTRY) - {"chain"}))
def test_no_policy_places_a_job_on_a_site_it_may_not_use(tmp_path, name):
    sc = scenario(tmp_path, None, workload=residency_workload(tmp_path), duration_h=48)
    policy = REGISTRY[name](**REQUIRED_PARAMS.get(name, {}))
    r = sim.simulate(sc, policy)  # the engine raises PolicyError on a violation
    ev = r.events
    placed = ev[ev["kind"].isin(["start", "resume", "migrate"])]
    allowed = pd.read_csv(sc.workload.file, keep_default_na=False).set_index("job_id")
    for job_id, site_name in zip(placed["job"], placed["site"], strict=True):
        sites = allowed.loc[job_id, "allowed_sites"]
        assert not sites or site_name in sites.split(";"), (name, job_id, site_name)
    assert r.summary["jobs_completed"] > 0


# --- site choice --------------------------------------------------------------------------


def test_lowest_carbon_site_takes_the_cleanest_allowed_site_with_room(tmp_path):
    jobs = [job("free"), job("resident", allowed_sites="warsaw;frankfurt")]
    jobs += [job(f"big{i}", gpus=4) for i in range(2)]
    h = PolicyHarness(scenario(tmp_path, jobs)).advance(0.0)
    starts = {a.job.id: a.site for a in LowestCarbonSite(backfill=True).decide(h.state)}
    # 4 GPUs per site; "free" takes one at stockholm, "resident" one at frankfurt: a 4-GPU
    # job fits only at the dirtiest site, and the second nowhere
    assert starts == {"free": "stockholm", "resident": "frankfurt", "big0": "warsaw"}


def test_forecast_site_weighs_the_data_transfer(tmp_path):
    """A small job with little data moves to the clean grid; the same job with so much data
    that moving it emits more than the cleaner grid saves stays at its origin."""
    jobs = [job("light", work_gpu_h=1.0, data_gb=10.0), job("heavy", work_gpu_h=1.0, data_gb=5e4)]
    h = PolicyHarness(scenario(tmp_path, jobs)).advance(0.0)
    state = h.state
    starts = {a.job.id: a.site for a in ForecastSite(backfill=True).decide(state)}
    assert starts == {"light": "stockholm", "heavy": "warsaw"}
    # the reason: the heavy job's transfer costs more than the run saves
    _, kwh = state.estimate(h.job("heavy"), "warsaw")
    saving_kg = kwh * (DIRTY - CLEAN) / 1000.0
    assert state.transfer_cost("warsaw", "stockholm", 5e4)[2] > saving_kg
    assert state.transfer_cost("warsaw", "stockholm", 10.0)[2] < saving_kg


def clean_later(tmp_path, jobs):
    """Frankfurt's grid is dirty for 6 h, then the cleanest; stockholm may not be used."""
    path = tmp_path / "fra.csv"
    times = pd.date_range("2020-06-01", periods=6, freq="6h", tz="UTC")
    pd.DataFrame({"timestamp": times, "ci": [600, 20, 20, 20, 20, 20]}).to_csv(path, index=False)
    profile = {"file": str(path), "column": "ci", "time_column": "timestamp", "unit": "g/kWh"}
    sites = [SITES[0], SITES[1], {**SITES[2], "carbon": profile}]
    return make_scenario(tmp_path, jobs, sites=sites, wan=WAN, duration_h=24)


def test_space_time_plans_site_and_time_together_and_keeps_the_plan(tmp_path):
    sc = clean_later(tmp_path, [job(deadline=20 * 3600, allowed_sites="warsaw;frankfurt")])
    r = sim.simulate(sc, SpaceTime())
    (row,) = r.jobs.to_dict("records")
    assert row["site"] == "frankfurt"
    assert 6 * 3600 - 60 <= row["start_s"] <= 6 * 3600  # less the data transfer's time
    assert row["state"] == "completed" and row["end_s"] <= 20 * 3600


def test_space_time_does_not_book_more_gpus_than_a_site_has(tmp_path):
    jobs = [
        job(f"j{i}", gpus=2, deadline=20 * 3600, allowed_sites="warsaw;frankfurt") for i in range(3)
    ]
    h = PolicyHarness(clean_later(tmp_path, jobs)).advance(0.0)
    actions = SpaceTime().decide(h.state)
    deferred = [a for a in actions if isinstance(a, Defer)]
    assert [a.job.id for a in deferred] == ["j0", "j1"]  # frankfurt's 4 GPUs after 6 h
    assert [(a.job.id, a.site) for a in actions if isinstance(a, Start)] == [("j2", "frankfurt")]


# --- migrate ------------------------------------------------------------------------------


def running_on_the_dirty_grid(tmp_path, checkpoint_gb: float):
    jobs = [job(interruptible=True, checkpoint_gb=checkpoint_gb, allowed_sites="warsaw;stockholm")]
    h = PolicyHarness(scenario(tmp_path, jobs)).advance(0.0)
    h.apply([Start(h.job("j"), "warsaw")])
    return h.advance(600.0), h.job("j")


def predicted(state, j, dest: str) -> tuple[float, float]:
    """(operational saving of running the rest at `dest`, migration cost), kg, on these
    constant grids."""
    _, stay_kwh = state.estimate(j, "warsaw", None, "A100-80GB")
    _, there_kwh = state.estimate(j, dest, None, "A100-80GB")
    cost = state.migration_cost(j, dest, "A100-80GB")
    return stay_kwh * DIRTY / 1e3 - there_kwh * CLEAN / 1e3, cost.carbon_kg


@pytest.mark.parametrize("checkpoint_gb", [1.0, 100.0, 2_000.0, 20_000.0, 200_000.0])
def test_migrate_moves_a_job_only_when_the_predicted_saving_exceeds_the_cost(
    tmp_path, checkpoint_gb
):
    h, j = running_on_the_dirty_grid(tmp_path, checkpoint_gb)
    saving_kg, cost_kg = predicted(h.state, j, "stockholm")
    actions = MigrateWhenWorth().decide(h.state)
    moved = [a for a in actions if isinstance(a, Migrate)]
    if saving_kg > cost_kg:
        assert moved == [Migrate(j, "stockholm", "A100-80GB")]
        h.apply(moved)
    else:
        assert moved == []


def test_migrate_covers_both_outcomes_in_the_sizes_above(tmp_path):
    outcomes = set()
    for gb in (1.0, 200_000.0):
        h, j = running_on_the_dirty_grid(tmp_path, gb)
        saving_kg, cost_kg = predicted(h.state, j, "stockholm")
        outcomes.add(saving_kg > cost_kg)
    assert outcomes == {True, False}


def test_migration_cost_adds_up_the_write_the_transfer_and_the_read(tmp_path):
    h, j = running_on_the_dirty_grid(tmp_path, 200.0)
    state = h.state
    cost = state.migration_cost(j, "stockholm")
    move_s, move_kwh, move_kg = state.transfer_cost("warsaw", "stockholm", 200.0)
    write_s = read_s = 200.0 / 2.0  # GB at the sites' default 2 GB/s
    assert cost.stall_s == pytest.approx(write_s + move_s + read_s)
    idle_w = state.idle_w("warsaw", "A100-80GB") + state.host_w_per_gpu("warsaw")
    held_kwh = idle_w * (write_s + cost.stall_s) * 1.5 / 3.6e6  # PUE 1.5 at both sites
    assert cost.energy_kwh == pytest.approx(held_kwh + move_kwh)
    held_kg = idle_w * 1.5 / 3.6e6 * (write_s * DIRTY + cost.stall_s * CLEAN) / 1e3
    assert cost.carbon_kg == pytest.approx(held_kg + move_kg)
    assert cost.lost_gpu_h == 0.0


def test_migrate_keeps_deadlines(tmp_path):
    jobs = [job(interruptible=True, checkpoint_gb=10_000.0, deadline=4 * 3600 + 900)]
    h = PolicyHarness(scenario(tmp_path, jobs)).advance(0.0)
    h.apply([Start(h.job("j"), "warsaw")])
    h.advance(60.0)
    # moving would save carbon but the 10 TB checkpoint's stall would miss the deadline
    assert [a for a in MigrateWhenWorth().decide(h.state) if isinstance(a, Migrate)] == []


def test_migrate_end_to_end_moves_jobs_to_the_clean_grid_and_charges_the_wan(tmp_path):
    # stockholm is full for the first hour: the two jobs start at their origin, then move
    blocker = job("b", gpus=4, work_gpu_h=4.0, origin_site="stockholm")
    jobs = [blocker] + [
        job(f"j{i}", interruptible=True, checkpoint_gb=20.0, gpus=2) for i in (0, 1)
    ]
    sc = scenario(tmp_path, jobs)
    r = sim.simulate(sc, MigrateWhenWorth())
    assert r.jobs.set_index("job_id")["site"].to_dict() == {
        "b": "stockholm",
        "j0": "stockholm",
        "j1": "stockholm",
    }
    assert (r.events["kind"] == "migrate").sum() == 2
    assert r.summary["carbon_wan_kg"] > 0 and r.summary["wan_data_gb"] == pytest.approx(40.0)
    baseline = sim.simulate(sc, REGISTRY["run_now"]())
    assert r.summary["carbon_total_kg"] < baseline.summary["carbon_total_kg"]


def test_min_saving_must_not_be_negative():
    with pytest.raises(ValueError, match="min_saving_kg must be >= 0"):
        MigrateWhenWorth(min_saving_kg=-1.0)


def test_a_cleaner_grid_never_costs_a_deadline_that_could_be_kept(tmp_path):
    """Stockholm is cleanest but has only slow V100s: a job whose deadline they would miss
    starts on time elsewhere; the same job without a deadline goes to the clean grid."""
    sites = [SITES[0], {**SITES[1], "gpus": [{"model": "V100", "count": 4}]}, SITES[2]]
    jobs = [job("tight", deadline=5 * 3600), job("loose")]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=sites, wan=WAN)).advance(0.0)
    state = h.state
    assert state.estimate(h.job("tight"), "stockholm")[0] > 5 * 3600  # V100s would miss it
    for policy in (ForecastSite(backfill=True), SpaceTime(backfill=True)):
        starts = {a.job.id: a.site for a in policy.decide(state) if isinstance(a, Start)}
        assert starts == {"tight": "frankfurt", "loose": "stockholm"}, type(policy).__name__


def test_migrate_leaves_a_job_alone_while_its_checkpoint_is_on_the_way(tmp_path):
    jobs = [job(interruptible=True, checkpoint_gb=200.0)]
    h = PolicyHarness(scenario(tmp_path, jobs)).advance(0.0)
    h.apply([Start(h.job("j"), "warsaw")])
    h.advance(600.0).apply([Migrate(h.job("j"), "frankfurt")])
    j = h.advance(650.0).job("j")
    assert j.held and j.site == "frankfurt"  # stockholm is cleaner, but the move is under way
    assert [a for a in MigrateWhenWorth().decide(h.state) if isinstance(a, Migrate)] == []
    assert not h.advance(2 * 3600.0).job("j").held
    assert [a.site for a in MigrateWhenWorth().decide(h.state) if isinstance(a, Migrate)] == [
        "stockholm"
    ]
