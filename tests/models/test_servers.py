"""The server catalog, the host power curve and embodied carbon by component
(sim/models/servers.py, docs/servers.md)."""

from __future__ import annotations

import math

import pytest

from sim.engine.servers import server_embodied_kg_by_group
from sim.models.hardware import GPU_CATALOG
from sim.models.servers import (
    COMPONENTS,
    HOST_LOAD_STEPS,
    SERVER_CATALOG,
    embodied_kg,
    embodied_kg_by_component,
    host_curve_w,
    host_power_w,
    server_model_from_dict,
)

DGX_A100 = SERVER_CATALOG["DGX-A100"]
SECONDS_PER_YEAR = 365.25 * 86400.0


def test_catalog_has_the_dgx_and_pcie_servers_of_the_issue():
    gpus = {m.gpu_model for m in SERVER_CATALOG.values()}
    assert {"A100-80GB", "H100-SXM", "V100", "A40", "L4"} <= gpus


@pytest.mark.parametrize("model", SERVER_CATALOG.values(), ids=lambda m: m.id)
def test_every_entry_is_valid(model):
    assert model.gpu_model in GPU_CATALOG
    assert model.gpus > 0 and model.cpu_sockets > 0 and model.dimms > 0
    assert 0 < model.host_idle_w < model.host_peak_w
    assert model.rest_w >= 0


@pytest.mark.parametrize("model", SERVER_CATALOG.values(), ids=lambda m: m.id)
def test_host_curve_is_monotone_with_eleven_specpower_levels(model):
    curve = host_curve_w(model)
    assert len(curve) == len(HOST_LOAD_STEPS) == 11
    assert all(a < b for a, b in zip(curve, curve[1:], strict=False))


def test_dgx_a100_host_peak_is_the_datasheet_balance_without_its_gpus():
    # 6.5 kW system maximum less 8 x 400 W A100s
    assert DGX_A100.host_peak_w == pytest.approx(6500 - 8 * 400)


def test_host_power_at_the_cited_cpu_points():
    # Boavizta: a CPU package draws 0.12, 0.32, 0.75, 1.02 x TDP at 0, 10, 50, 100 % load;
    # a 64 GB DIMM 3.0 + 0.055 x 64 = 6.52 W at full load, 0.7 of it idle.
    m = DGX_A100
    rest = m.rest_w
    for util, ratio in ((0.0, 0.12), (0.1, 0.32), (0.5, 0.75), (1.0, 1.02)):
        dimms = 32 * 6.52 * (0.7 + 0.3 * util)
        assert host_power_w(m, util) == pytest.approx(2 * 225 * ratio + dimms + rest)


def test_host_power_is_linear_between_levels():
    m = SERVER_CATALOG["PCIe-L4x4"]
    assert host_power_w(m, 0.25) == pytest.approx((host_power_w(m, 0.2) + host_power_w(m, 0.3)) / 2)


@pytest.mark.parametrize("util", [-0.1, 1.5, math.nan])
def test_utilisation_outside_zero_one_is_refused_naming_it(util):
    with pytest.raises(ValueError, match=r"cpu_util = "):
        host_power_w(DGX_A100, util)


@pytest.mark.parametrize("model", SERVER_CATALOG.values(), ids=lambda m: m.id)
def test_components_sum_exactly_to_the_total(model):
    parts = embodied_kg_by_component(model)
    assert tuple(parts) == COMPONENTS
    assert sum(parts.values()) == embodied_kg(model)
    assert all(v >= 0 for v in parts.values())


def test_hand_checked_boavizta_figures_of_the_dgx_a100():
    parts = embodied_kg_by_component(DGX_A100)
    # CPU: 2 x (1600 mm2 x 0.0197 kg/mm2 + 9.14 kg) = 81.32 kg
    assert parts["cpu"] == pytest.approx(81.32)
    # DRAM: 32 modules of 64 GB at 1.2444 GB/cm2: 32 x (64 / 1.24436 x 2.20 + 5.22) kg
    assert parts["dram"] == pytest.approx(32 * (64 / 1.2443636 * 2.20 + 5.22), rel=1e-6)
    # PSU: 6 x 2.99 kg x 24.30 kg/kg; GPUs: 8 x 150 kg (BLOOM, gpus.toml)
    assert parts["psu"] == pytest.approx(6 * 2.99 * 24.30)
    assert parts["gpu"] == pytest.approx(1200.0)


def test_amortisation_is_linear_in_time_and_inverse_in_lifetime():
    """Each component carries kg x duration / its own lifetime (`server_embodied_kg_by_group`)."""
    parts = embodied_kg_by_component(DGX_A100)
    life = dict.fromkeys(parts, 4.0) | {"gpu": 6.0}
    year = server_embodied_kg_by_group("DGX-A100", 1, SECONDS_PER_YEAR, life)
    two = server_embodied_kg_by_group("DGX-A100", 1, 2 * SECONDS_PER_YEAR, life)
    assert year["gpu"] == pytest.approx(parts["gpu"] / 6)
    assert year["cpu"] == pytest.approx(parts["cpu"] / 4)
    assert all(two[k] == pytest.approx(2 * year[k]) for k in year)
    longer = server_embodied_kg_by_group("DGX-A100", 1, SECONDS_PER_YEAR, dict.fromkeys(parts, 8.0))
    assert longer["cpu"] == pytest.approx(year["cpu"] / 2)


def _fields(**over):
    base = {
        "name": "x",
        "gpu_model": "L4",
        "gpus": 4,
        "cpu_model": "c",
        "cpu_sockets": 2,
        "cpu_cores": 8,
        "cpu_tdp_w": 100,
        "cpu_die_mm2": 500,
        "memory_gb": 256,
        "dimms": 8,
        "ssd_tb": [1.0],
        "hdd_units": 0,
        "nic_count": 1,
        "nic_gbps": 25,
        "psu_units": 2,
    }
    return base | over


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"gpu_model": "Z9"}, "gpu_model"),
        ({"gpus": 0}, "gpus"),
        ({"cpu_tdp_w": -1}, "cpu_tdp_w"),
        ({"ssd_tb": [0]}, "ssd_tb"),
        ({"colour": "red"}, "colour"),
        ({"system_max_w": 100}, "system_max_w"),
    ],
)
def test_a_bad_entry_is_one_line_naming_key_and_value(over, key):
    with pytest.raises(ValueError, match=rf"server 'x': {key} = ") as e:
        server_model_from_dict("x", _fields(**over))
    assert "\n" not in str(e.value)
