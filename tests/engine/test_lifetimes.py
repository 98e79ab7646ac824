"""Hardware lifetimes (docs/servers.md, "Lifetimes"): a pool's `purchase_year` and
`lifetime_years`. Its embodied carbon is amortised straight-line over the lifetime and
charged only while the simulated time lies within [purchase, purchase + lifetime); a pool
used past its lifetime is fully amortised and charges nothing; `lifetime_years` replaces
the catalog's lifetimes for all the pool's parts; a run before the purchase is refused."""

from __future__ import annotations

import math

import pytest

from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.models.servers import SERVER_CATALOG, embodied_kg_by_component
from tests.conftest import make_scenario, server_site, site

A100_KG = 150.0 + 312.5
"""One A100-80GB's embodied carbon with its host share (gpus.toml), kgCO2e."""
COLUMNS = [f"embodied_{g}_kg" for g in ("cpu", "dram", "storage", "gpu", "other")]
JULIAN_YEAR_H = 365.25 * 24.0
DGX_PARTS = embodied_kg_by_component(SERVER_CATALOG["DGX-A100"])
DGX_HOST_KG = sum(kg for c, kg in DGX_PARTS.items() if c != "gpu")


def run(tmp_path, pool, start="2022-06-01T00:00:00Z", duration_h=24.0, embodied="installed"):
    jobs = [{"job_id": "a", "submit_time": 0, "gpus": 4, "work_gpu_h": 4 * duration_h}]
    keys = {"gpus": [pool], "pue": 1.0}
    sites = [server_site(**keys) if "servers" in pool else site(**keys, host_w_per_gpu=0.0)]
    scenario = make_scenario(
        tmp_path, jobs, start=start, duration_h=duration_h, sites=sites, embodied=embodied
    )
    return simulate(scenario, "run_now")


def a100s(**keys):
    return {"model": "A100-80GB", "count": 4, **keys}


def dgx(**keys):
    return {"model": "A100-80GB", "servers": {"model": "DGX-A100", "count": 1}, **keys}


def test_a_pool_past_its_lifetime_charges_no_embodied_carbon(tmp_path):
    # bought 2016, 5 years: fully amortised by 2021; a 2022 run charges nothing
    results = run(tmp_path, a100s(purchase_year=2016, lifetime_years=5))
    assert results.summary["carbon_embodied_kg"] == 0.0
    assert results.summary["energy_it_kwh"] > 0  # it still runs and draws power


def test_a_pool_within_its_lifetime_charges_its_amortised_share(tmp_path):
    # bought 2020, 4 years: 2022 is within; 4 GPUs x 24 h of 462.5 kg over 4 x 8760 h
    results = run(tmp_path, a100s(purchase_year=2020, lifetime_years=4))
    by_hand = 4 * 24 * A100_KG / (4 * 8760)
    assert by_hand == pytest.approx(1.267123, abs=1e-6)
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("embodied", ["installed", "allocated"])
def test_a_lifetime_ending_within_the_run_charges_only_the_hours_before_its_end(tmp_path, embodied):
    # bought 2018, 4 years of 8760 h = 1460 days: ends 2021-12-31T00:00Z, the run's middle
    results = run(
        tmp_path,
        a100s(purchase_year=2018, lifetime_years=4),
        start="2021-12-30T00:00:00Z",
        duration_h=48.0,
        embodied=embodied,
    )
    # the job holds the 4 GPUs for the whole 48 h: both modes charge 24 h of 4 GPUs
    by_hand = 4 * 24 * A100_KG / (4 * 8760)
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-9)


def test_without_the_keys_every_hour_charges_the_catalog_rate(tmp_path):
    results = run(tmp_path, a100s())
    by_hand = 4 * 24 * A100_KG / (6 * 8760)  # the catalog's 6-year service life
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-12)


def test_lifetime_years_overrides_the_catalog_lifetime_of_a_pool_of_gpus(tmp_path):
    results = run(tmp_path, a100s(lifetime_years=3))
    by_hand = 4 * 24 * A100_KG / (3 * 8760)  # twice the catalog's 6-year rate
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-12)


def test_lifetime_years_overrides_every_component_lifetime_of_a_pool_of_servers(tmp_path):
    results = run(tmp_path, dgx(lifetime_years=2))
    row = results.sites.iloc[0]
    assert row["embodied_gpu_kg"] == pytest.approx(1200.0 * 24 / (2 * JULIAN_YEAR_H))
    assert row["embodied_cpu_kg"] == pytest.approx(DGX_PARTS["cpu"] * 24 / (2 * JULIAN_YEAR_H))
    total = (1200.0 + DGX_HOST_KG) * 24 / (2 * JULIAN_YEAR_H)
    assert results.summary["carbon_embodied_kg"] == pytest.approx(total, rel=1e-12)


def test_servers_past_their_host_lifetime_charge_their_gpus_alone(tmp_path):
    # bought 2018: the host parts (4 Julian years) are amortised by 2022-01-01, the GPUs
    # (6 years) are not; the columns by component still sum to the total
    results = run(tmp_path, dgx(purchase_year=2018))
    row = results.sites.iloc[0]
    assert row["embodied_gpu_kg"] == pytest.approx(1200.0 * 24 / (6 * JULIAN_YEAR_H))
    for column in ("embodied_cpu_kg", "embodied_dram_kg", "embodied_storage_kg"):
        assert row[column] == 0.0
    assert row["embodied_other_kg"] == 0.0
    cells = results.sites[COLUMNS].to_numpy().ravel()
    assert results.summary["carbon_embodied_kg"] == math.fsum(cells)


def test_allocated_servers_past_their_host_lifetime_charge_their_gpus_alone(tmp_path):
    results = run(tmp_path, dgx(purchase_year=2018), embodied="allocated")
    # the job holds 4 of the 8 GPUs for 24 h: half the server's GPU part
    by_hand = 1200.0 * 24 / (6 * JULIAN_YEAR_H) / 2
    assert results.summary["carbon_embodied_kg"] == pytest.approx(by_hand, rel=1e-9)


def test_a_run_before_the_purchase_year_is_refused(tmp_path):
    with pytest.raises(ScenarioError) as e:
        run(tmp_path, a100s(purchase_year=2023))
    message = str(e.value)
    assert "\n" not in message
    assert "sites[0].gpus[0].purchase_year" in message
    assert "'a'" in message and "A100-80GB" in message and "2023" in message
    assert "2022-06-01" in message


@pytest.mark.parametrize(
    ("keys", "words"),
    [
        ({"purchase_year": 1989}, ["purchase_year", "1990"]),
        ({"purchase_year": 2101}, ["purchase_year", "2100"]),
        ({"purchase_year": 2020.5}, ["purchase_year", "integer"]),
        ({"lifetime_years": 0}, ["lifetime_years", "greater than 0"]),
        ({"lifetime_years": 80}, ["lifetime_years", "50"]),
    ],
)
def test_out_of_range_keys_are_refused_naming_key_and_limit(tmp_path, keys, words):
    with pytest.raises(ScenarioError) as e:
        run(tmp_path, a100s(**keys))
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value)
