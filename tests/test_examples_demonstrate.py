"""Each example scenario shows what its header says it demonstrates.

Every scenarios/*.toml opens with a comment whose "Demonstrates" sentence makes a claim
about its own runs; the test named after the file checks that claim. The runs are the
file's own (the seed and jobs of the scenario, its policy or the one the header compares
it with), at full length unless a test says which shortened run it checks (`duration_h`,
for the request-level and year-long scenarios). Scenarios that read ../shared/data are
skipped where it is absent. The numbers quoted in the headers are the full runs'; the
tests check directions and sizes with margins, so that a model's refinement does not fail
them while a lost effect does.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

import sim
from sim.study.fleet_renewal import fleet_renewal
from tests.conftest import SHARED_DATA, run_cli

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))


@functools.cache
def run(name: str, policy: str | None = None, *overrides: str) -> sim.Results:
    """The run of scenarios/NAME.toml, under `policy` with its default parameters if given
    (as `dcsim run --policy`), with `overrides` (as `--set`)."""
    chosen = [f'policy.name="{policy}"', "policy.params={}"] if policy else []
    return sim.simulate(
        sim.load_scenario(REPO / "scenarios" / f"{name}.toml", [*chosen, *overrides])
    )


def summary(name: str, policy: str | None = None, *overrides: str) -> dict:
    return run(name, policy, *overrides).summary


def header(path: Path) -> str:
    lines = path.read_text().splitlines()
    return "\n".join(
        line for line in lines[: next(i for i, t in enumerate(lines) if not t.startswith("#"))]
    )


needs_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"reads {SHARED_DATA}, absent here"
)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_example_says_what_it_demonstrates_and_has_a_test_of_it(path):
    assert re.search(r"\bdemonstrates\b", header(path), re.I), (
        f"{path.name}: no 'Demonstrates' claim"
    )
    assert f"test_{path.stem}_" in Path(__file__).read_text(), f"{path.name}: no test of its claim"


@needs_shared_data
def test_carbon_aware_inference_variants_cut_serving_carbon_for_quality():
    """Shortened to the first 2 hours (the week is the notebook's)."""
    short = "duration_h=2"
    base = summary("carbon_aware_inference", None, short)
    variants = summary("carbon_aware_inference", "carbon_aware_variants", short)
    assert variants["carbon_serving_kg"] < 0.7 * base["carbon_serving_kg"]
    assert variants["served_quality_mean"] < base["served_quality_mean"]


def test_demand_response_policy_keeps_the_limit_that_run_now_breaks():
    assert summary("demand_response")["dr_compliance"] >= 0.99
    assert summary("demand_response", "run_now")["dr_compliance"] < 0.5


def test_disaggregation_moves_kv_caches_between_the_pools():
    """Shortened to the first hour."""
    s = summary("disaggregation", None, "duration_h=1")
    assert s["kv_transfer_gb"] > 1000 and s["kv_transfer_energy_kwh"] > 0
    assert s["requests_served"] > 0


def test_electricity_costs_weighted_policy_pays_less_per_kwh_and_more_demand_charge():
    weighted, base = summary("electricity_costs"), summary("electricity_costs", "run_now")
    assert weighted["cost_demand_charge"] > 0
    per_kwh = [s["cost_energy"] / s["energy_facility_kwh"] for s in (weighted, base)]
    assert per_kwh[0] < per_kwh[1]
    assert weighted["cost_demand_charge"] > base["cost_demand_charge"]  # jobs bunch up


def test_energy_efficient_config_best_config_needs_less_energy_to_the_target():
    best = summary("energy_efficient_config")["energy_to_accuracy_mean_kwh"]
    default = summary("energy_efficient_config", "run_now")["energy_to_accuracy_mean_kwh"]
    assert best < 0.5 * default


def test_fleet_renewal_replacing_saves_operational_carbon_and_pays_back_its_embodied():
    scenario = sim.load_scenario(REPO / "scenarios" / "fleet_renewal.toml")
    _, s = fleet_renewal(scenario, "DGX-H100", 5, count=4)
    assert s["replace"]["operational_kg"] < 0.95 * s["extend"]["operational_kg"]
    assert s["replace"]["embodied_upfront_kg"] > 0 == s["extend"]["embodied_upfront_kg"]
    assert s["break_even_year_upfront"] is not None
    assert s["replace"]["total_upfront_kg"] < s["extend"]["total_upfront_kg"]


@needs_shared_data
def test_fragmentation_where_gpus_go_decides_how_long_multi_gpu_jobs_wait(tmp_path, capsys):
    jobs = tmp_path / "alibaba2023_jobs.parquet"
    trace = SHARED_DATA / "alibaba-gpu-2023" / "openb_pod_list_default.csv"
    code, out = run_cli(
        ["workload", "import", "alibaba2023", str(trace), "--out", str(jobs)], capsys
    )
    assert code == 0, out.err
    path, imported = REPO / "scenarios" / "fragmentation.toml", f'workload.file="{jobs}"'
    best_fit = sim.simulate(sim.load_scenario(path, [imported])).summary
    spread = sim.simulate(sim.load_scenario(path, [imported, 'sites[0].placement="spread"']))
    assert best_fit["fragmentation_wait_h"] == 0
    assert spread.summary["fragmentation_wait_h"] > 10


def test_gpu_generations_the_newer_fleet_emits_less_for_the_same_throughput():
    """Shortened to 48 hours."""
    short = "duration_h=48"
    v100 = summary("gpu_generations", None, short, 'sites[0].gpus=[{model="V100", count=192}]')
    a100 = summary("gpu_generations", None, short)  # the scenario's 72 A100-80GB
    assert a100["carbon_operational_kg"] < 0.7 * v100["carbon_operational_kg"]
    assert a100["carbon_embodied_kg"] < v100["carbon_embodied_kg"] * 2


def test_marginal_signals_deciding_on_marginal_lowers_marginal_carbon_on_the_same_placement():
    marginal, base = summary("marginal_signals"), summary("marginal_signals", "run_now")
    assert marginal["jobs_unfinished"] == base["jobs_unfinished"] == 0
    assert (
        marginal["carbon_operational_decision_kg"] < 0.97 * base["carbon_operational_decision_kg"]
    )
    average = summary("marginal_signals", None, 'sites[0].decision_carbon.kind="average"')
    assert average["carbon_operational_kg"] < min(
        marginal["carbon_operational_kg"], base["carbon_operational_kg"]
    )


def test_onsite_energy_covers_most_load_and_following_it_imports_less():
    """Shortened to the first two weeks (the year is the study's)."""
    short = "duration_h=336"
    grid_led = summary("onsite_energy", None, short)
    following = summary("onsite_energy", "follow_onsite", short)
    assert grid_led["cfe_score"] > 0.9
    assert following["grid_import_kwh"] < 0.5 * grid_led["grid_import_kwh"]


def test_onsite_following_moves_jobs_into_the_surplus_and_imports_less():
    follow, base = summary("onsite_following"), summary("onsite_following", "run_now")
    assert follow["jobs_unfinished"] == base["jobs_unfinished"] == 0
    assert follow["grid_import_kwh"] < 0.8 * base["grid_import_kwh"]
    assert follow["carbon_operational_kg"] < base["carbon_operational_kg"]


def test_power_capping_saves_job_energy_and_keeps_every_deadline():
    capped, base = summary("power_capping"), summary("power_capping", "run_now")
    assert capped["energy_jobs_kwh"] < 0.97 * base["energy_jobs_kwh"]
    assert capped["deadline_misses"] == 0


def test_prefix_caching_cuts_time_to_first_token_and_serving_energy():
    """Shortened to the first 2 hours."""
    short = "duration_h=2"
    cached = summary("prefix_caching", None, short)
    uncached = summary("prefix_caching", None, short, "services[0].prefix_cache_hit_rate=0")
    assert cached["ttft_p99_requests_ms"] < 0.7 * uncached["ttft_p99_requests_ms"]
    assert cached["energy_serving_kwh"] < uncached["energy_serving_kwh"]


def test_quickstart_frankfurt_emits_five_times_paris_per_gpu_hour_and_run_now_ignores_dr():
    results = run("quickstart")
    jobs = results.jobs.groupby("site", observed=True)[["carbon_kg", "gpu_h"]].sum()
    kg_per_gpu_h = jobs["carbon_kg"] / jobs["gpu_h"]
    assert kg_per_gpu_h["frankfurt"] > 5 * kg_per_gpu_h["paris"]
    assert results.summary["dr_compliance"] == 0


def test_serverless_keepalive_carbon_aware_trades_cold_starts_for_carbon_and_memory():
    fixed = summary("serverless_keepalive")
    aware = summary("serverless_keepalive", None, 'functions.keep_alive={name="carbon_aware"}')
    assert aware["function_carbon_kg"] < 0.95 * fixed["function_carbon_kg"]
    assert aware["function_warm_gb_h"] < 0.5 * fixed["function_warm_gb_h"]
    assert aware["function_cold_starts"] > 1.5 * fixed["function_cold_starts"]


@needs_shared_data
def test_serving_services_and_training_jobs_share_the_h100s():
    """Shortened to the first hour."""
    s = summary("serving", None, "duration_h=1")
    assert s["requests_served"] > 0 and s["carbon_per_1k_tokens_g"] > 0
    assert s["energy_serving_kwh"] > 0 and s["energy_jobs_kwh"] > 0


def test_serving_only_counts_the_energy_of_gpus_holding_no_request():
    """Shortened to the first 2 hours."""
    s = summary("serving_only", None, "duration_h=2")
    assert 0 < s["energy_serving_idle_kwh"] < s["energy_serving_kwh"]
    assert s["jobs_submitted"] == 0


def test_space_time_study_shifting_in_space_and_time_beats_run_now_with_the_wan_counted():
    shifted, base = summary("space_time_study"), summary("space_time_study", "run_now")
    assert shifted["jobs_unfinished"] == base["jobs_unfinished"] == 0
    assert shifted["carbon_wan_kg"] > base["carbon_wan_kg"]
    assert shifted["carbon_total_kg"] < 0.85 * base["carbon_total_kg"]


def test_spot_capacity_spot_gpus_cut_cost_and_the_stress_run_has_evictions():
    spot, no_spot = summary("spot_capacity"), summary("spot_capacity", "gaia_carbon_cost")
    assert spot["cost_compute"] < 0.95 * no_spot["cost_compute"] and spot["spot_gpu_h"] > 0
    stressed = summary("spot_capacity", None, "spot.eviction_rate_per_node_h=0.05")
    assert stressed["spot_evictions"] > 0 and stressed["jobs_completed"] == 300


def test_time_shifting_wait_awhile_emits_less_and_every_job_finishes():
    shifted, base = summary("time_shifting"), summary("time_shifting", "run_now")
    assert shifted["jobs_unfinished"] == base["jobs_unfinished"] == 0
    assert shifted["carbon_operational_kg"] < 0.99 * base["carbon_operational_kg"]


@needs_shared_data
def test_uk_issued_forecasts_are_replayed_and_decide_the_shifts():
    results = run("uk_issued_forecasts")
    assert results.meta["forecast_replay"]
    base = summary("uk_issued_forecasts", "run_now")
    assert results.summary["wait_mean_h"] > 1
    assert results.summary["carbon_operational_kg"] < base["carbon_operational_kg"]


def test_user_policy_greedy_cleanest_site_placement_emits_less_than_run_now():
    greedy, base = summary("user_policy"), summary("user_policy", "run_now")
    assert greedy["carbon_operational_kg"] < 0.85 * base["carbon_operational_kg"]
