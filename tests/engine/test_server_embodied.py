"""Embodied carbon of pools of servers (docs/servers.md, "In a run"): a pool declared as
servers carries its whole servers' embodied carbon, each component amortised over its own
lifetime; the sites table splits it by group of components in a run with servers."""

from __future__ import annotations

import math

import pytest

from sim.engine.build import simulate
from sim.engine.servers import server_embodied_kg_by_group
from sim.models.hardware import GPU_CATALOG
from sim.models.servers import SERVER_CATALOG, embodied_kg_by_component
from tests.conftest import make_scenario, server_site

MODEL = "A100-80GB"
COLUMNS = [f"embodied_{g}_kg" for g in ("cpu", "dram", "storage", "gpu", "other")]
HOURS_PER_JULIAN_YEAR = 365.25 * 24.0


def run(tmp_path, jobs, gpus, duration_h=24, embodied="installed"):
    sites = [server_site(gpus=gpus, pue=1.0)]
    scenario = make_scenario(tmp_path, jobs, duration_h=duration_h, sites=sites, embodied=embodied)
    return simulate(scenario, "run_now")


def one_dgx(count=1):
    return [{"model": MODEL, "servers": {"model": "DGX-A100", "count": count}}]


JOB = [{"job_id": "a", "submit_time": 0, "gpus": 8, "work_gpu_h": 80, "profile": "compute-bound"}]
"""8 GPUs for 10 h (compute-bound on A100-80GB: 1 reference GPU-h per GPU-hour)."""


def test_one_dgx_a100_over_24_h_carries_its_components_over_their_lifetimes(tmp_path):
    results = run(tmp_path, JOB, one_dgx())
    row = results.sites.iloc[0]
    parts = embodied_kg_by_component(SERVER_CATALOG["DGX-A100"])
    # by hand: the GPUs 8 x 150 kg over 6 years, every host part over 4 years
    assert parts["gpu"] == 8 * 150.0
    assert row["embodied_gpu_kg"] == pytest.approx(1200.0 * 24 / (6 * HOURS_PER_JULIAN_YEAR))
    assert row["embodied_gpu_kg"] == pytest.approx(0.547570, abs=1e-6)
    assert row["embodied_cpu_kg"] == pytest.approx(parts["cpu"] * 24 / (4 * 8766.0))
    assert row["embodied_dram_kg"] == pytest.approx(parts["dram"] * 24 / (4 * 8766.0))
    storage = parts["ssd"] + parts["hdd"]
    assert row["embodied_storage_kg"] == pytest.approx(storage * 24 / (4 * 8766.0))
    other = parts["mainboard"] + parts["chassis"] + parts["psu"] + parts["assembly"]
    assert row["embodied_other_kg"] == pytest.approx(other * 24 / (4 * 8766.0))
    host = sum(kg for c, kg in parts.items() if c != "gpu")
    by_hand = 1200.0 * 24 / (6 * 8766.0) + host * 24 / (4 * 8766.0)
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(0.5476 + 5976.6 * 24 / (4 * 8766.0), abs=1e-4)  # 4.638 kg


def test_the_columns_sum_exactly_to_the_servers_embodied_carbon(tmp_path):
    results = run(tmp_path, JOB, one_dgx(3))
    cells = results.sites[COLUMNS].to_numpy().ravel()
    assert results.summary["carbon_embodied_kg"] == math.fsum(cells)
    by_group = server_embodied_kg_by_group("DGX-A100", 3, 24 * 3600.0)
    assert list(results.sites.iloc[0][COLUMNS]) == list(by_group.values())
    # the summary's breakdown by component: the same groups, summed over the sites
    assert [results.summary[c] for c in COLUMNS] == list(by_group.values())
    assert results.summary["carbon_embodied_kg"] == math.fsum(results.summary[c] for c in COLUMNS)


def test_a_pool_without_servers_keeps_the_gpu_only_figure_and_no_columns(tmp_path):
    plain = run(tmp_path, JOB, [{"model": MODEL, "count": 8}])
    assert not set(COLUMNS) & set(plain.sites.columns)
    assert all(plain.summary[c] is None for c in COLUMNS)
    per_gpu_h = GPU_CATALOG[MODEL].embodied_kg_per_gpu_h
    assert plain.summary["carbon_embodied_kg"] == pytest.approx(8 * 24 * per_gpu_h)
    mixed = run(tmp_path, JOB, [*one_dgx(), {"model": "H100-SXM", "count": 4}])
    servers_kg = math.fsum(mixed.sites[COLUMNS].to_numpy().ravel())
    h100_kg = 4 * 24 * GPU_CATALOG["H100-SXM"].embodied_kg_per_gpu_h
    assert mixed.summary["carbon_embodied_kg"] == pytest.approx(servers_kg + h100_kg)


def test_allocated_embodied_carbon_on_servers_is_the_servers_per_gpu_hour(tmp_path):
    results = run(tmp_path, JOB, one_dgx(2), embodied="allocated")
    ten_hours_of_one_server = sum(server_embodied_kg_by_group("DGX-A100", 1, 36000.0).values())
    assert results.jobs["embodied_kg"].iloc[0] == pytest.approx(ten_hours_of_one_server)
    assert results.summary["carbon_embodied_kg"] == pytest.approx(ten_hours_of_one_server)
