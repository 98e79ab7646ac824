"""On-site energy in a run (`sim.engine.onsite`): the site's balance adds up in the
results, carbon is charged on grid import only, the jobs keep their gross figures, the
battery stays within its bounds, and bad input is one line naming the key."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from sim.config.loading import load_scenario
from sim.engine.build import simulate
from sim.errors import ScenarioError
from tests.conftest import REPO, run_cli

SCENARIO = """
name = "onsite"
seed = 3
start = 2019-06-01T00:00:00Z
duration_h = 72

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
pue = 1.3
carbon = { zone = "DE", year = 2019 }
gpus = [{ model = "A100-80GB", count = 16 }]
{onsite}

[[sites]]
name = "b"
lat = 48.9
lon = 2.4
carbon = { zone = "FR", year = 2019 }
gpus = [{ model = "A100-80GB", count = 8 }]

[workload.synthetic]
arrival_rate_per_h = 2
duration = { dist = "exponential", mean_h = 3 }
"""

ASSETS = """
onsite = { pv_kwp = 20 }
battery = { capacity_kwh = 30, power_kw = 8, soc_min = 0.1, soc_max = 0.95 }
grid_connection = { export_limit_kw = 2, mode = "curtail", export_price_per_kwh = 0.04 }
"""


def run(tmp_path, onsite: str, name: str = "s.toml"):
    path = tmp_path / name
    path.write_text(SCENARIO.replace("{onsite}", textwrap.dedent(onsite)))
    return simulate(load_scenario(path))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("onsite")
    return run(tmp, ASSETS, "with.toml"), run(tmp, "", "without.toml")


def test_the_hourly_balance_adds_up_to_the_summary_and_the_facility_energy(runs):
    with_, _ = runs
    s, onsite, sites = with_.summary, with_.onsite, with_.sites.set_index("site")
    a = onsite[onsite["site"] == "a"]
    assert np.allclose(a["load_kwh"].sum(), sites.loc["a", "energy_facility_kwh"], rtol=1e-12)
    assert np.allclose(
        a["load_kwh"],
        a["on_site_used_kwh"] + a["battery_to_load_kwh"] + a["grid_to_load_kwh"],
        rtol=1e-12,
    )
    generation = a["on_site_used_kwh"] + a["generation_to_battery_kwh"]
    generation += a["generation_export_kwh"] + a["curtailed_kwh"]
    assert np.allclose(a["generation_kwh"], generation, rtol=1e-12)
    assert s["onsite_generation_kwh"] == pytest.approx(a["generation_kwh"].sum(), rel=1e-12)
    assert s["curtailed_kwh"] > 0 and s["exported_kwh"] > 0
    assert (a["export_kwh"] <= 2.0 * (a["end_s"] - a["start_s"]) / 3600 * (1 + 1e-12)).all()
    # site b has no equipment: it imports its whole load
    assert s["grid_import_kwh"] == pytest.approx(
        a["grid_import_kwh"].sum() + sites.loc["b", "energy_facility_kwh"], rel=1e-12
    )
    assert sites.loc["a", "export_credit"] == pytest.approx(0.04 * a["export_kwh"].sum())
    assert np.isnan(sites.loc["b", "export_credit"])


def test_carbon_is_charged_on_grid_import_and_the_jobs_keep_their_gross_figures(runs):
    with_, without = runs
    sites, plain = with_.sites.set_index("site"), without.sites.set_index("site")
    a = with_.onsite[with_.onsite["site"] == "a"]
    # the same jobs ran: the load and its gross carbon are those of the run without
    assert sites.loc["a", "carbon_load_kg"] == pytest.approx(
        plain.loc["a", "carbon_operational_kg"], rel=1e-9
    )
    assert with_.jobs["carbon_kg"].sum() == pytest.approx(without.jobs["carbon_kg"].sum())
    assert sites.loc["a", "carbon_operational_kg"] == pytest.approx(a["carbon_import_kg"].sum())
    assert sites.loc["a", "carbon_operational_kg"] < 0.9 * sites.loc["a", "carbon_load_kg"]
    assert sites.loc["b", "carbon_operational_kg"] == plain.loc["b", "carbon_operational_kg"]
    s = with_.summary
    assert s["carbon_operational_kg"] == pytest.approx(sites["carbon_operational_kg"].sum())
    assert s["carbon_market_based_kg"] == s["carbon_operational_kg"]
    assert s["carbon_total_kg"] == pytest.approx(
        s["carbon_operational_kg"] + s["carbon_embodied_kg"] + s["carbon_wan_kg"]
    )


def test_the_equipment_adds_its_amortised_embodied_carbon(runs):
    with_, without = runs
    # 20 kWp x 1836 kg over 30 years, 30 kWh x 83.5 kg over 15 years; 72 h of each
    year_h = 365.25 * 24
    expected = 20 * 1836 * 72 / (30 * year_h) + 30 * 83.5 * 72 / (15 * year_h)
    added = with_.summary["carbon_embodied_kg"] - without.summary["carbon_embodied_kg"]
    assert added == pytest.approx(expected, rel=1e-9)


def test_wind_without_a_figure_carries_the_cited_default(tmp_path, runs):
    # Dolan and Heath (2012): 11 gCO2e/kWh x (0.30 x 8760 h x 20 years) = 578.16 kg per
    # kW, spread over those 20 years; 10 kW for the 72 h run
    _, without = runs
    wind = run(tmp_path, "onsite = { wind_kw = 10 }")
    added = wind.summary["carbon_embodied_kg"] - without.summary["carbon_embodied_kg"]
    assert added == pytest.approx(10 * 578.16 * 72 / (20 * 365.25 * 24), rel=1e-9)


def test_battery_keys_cycles_and_soc_within_bounds(runs):
    with_, without = runs
    s = with_.summary
    assert s["battery_cycles"] == pytest.approx(s["battery_discharge_kwh"] / 30)
    assert s["battery_charge_kwh"] > 0 and s["battery_discharge_kwh"] > 0
    soc = with_.onsite["soc"]
    assert soc.max() <= 0.95 + 1e-12 and soc.min() >= 0.1 * (1 - 1e-3)
    assert 0 < s["cfe_score"] < 1
    assert all(without.summary[k] is None for k in ("cfe_score", "battery_cycles", "curtailed_kwh"))
    assert without.onsite is None


def test_only_a_grid_connection_changes_no_carbon(tmp_path, runs):
    _, without = runs
    limited = run(tmp_path, "grid_connection = { import_limit_kw = 1000 }")
    assert limited.summary["carbon_operational_kg"] == pytest.approx(
        without.summary["carbon_operational_kg"], rel=1e-12
    )
    assert limited.summary["onsite_generation_kwh"] is None
    assert limited.summary["carbon_market_based_kg"] == limited.summary["carbon_operational_kg"]


def grid_share(zone: str, onsite) -> np.ndarray:
    """The zone's 2019 carbon-free share at each hour of the onsite table (the run starts
    on a whole hour, so its rows are whole hours)."""
    frame = pd.read_parquet(REPO / "grid_data" / "carbon_free" / f"{zone}_2019.parquet")
    share = frame.set_index("timestamp")["carbon_free_share"].astype(float)
    at = pd.Timestamp("2019-06-01", tz="UTC") + pd.to_timedelta(onsite["start_s"], unit="s")
    return share.reindex(at).to_numpy()


def test_the_cfe_score_counts_the_grid_carbon_free_share_load_weighted(tmp_path):
    limited = run(tmp_path, "grid_connection = { import_limit_kw = 1000 }")
    sites = limited.sites.set_index("site")
    a = limited.onsite[limited.onsite["site"] == "a"]
    # site a draws all its load from the grid: each hour's load x DE's carbon-free share
    expected_a = (a["load_kwh"] * grid_share("DE", a)).sum() / a["load_kwh"].sum()
    assert sites.loc["a", "cfe_score"] == pytest.approx(expected_a, rel=1e-6)
    # site b has no equipment: its hours take FR's share (~0.9 in June 2019)
    assert 0.8 < sites.loc["b", "cfe_score"] < 1.0
    energy = sites["energy_facility_kwh"]
    assert limited.summary["cfe_score"] == pytest.approx(
        (sites["cfe_score"] * energy).sum() / energy.sum(), rel=1e-12
    )


PPA = (
    'contracts = {{ matching = "{matching}", ppa = [{{ technology = "solar", kw = 3 }}], '
    "certificates_mwh = 1 }}"
)


@pytest.fixture(scope="module")
def contracted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contracts")
    return {m: run(tmp, PPA.format(matching=m), f"{m}.toml") for m in ("annual", "hourly")}


def test_contracts_lower_market_based_carbon_by_hand_in_either_matching(contracted, runs):
    _, without = runs
    for matching, result in contracted.items():
        a = result.onsite[result.onsite["site"] == "a"]
        sites = result.sites.set_index("site")
        # 3 kW of DE 2019 solar, hour by hour; 1 MWh of certificates a year, 72 h of it
        hours_h = (a["end_s"] - a["start_s"]) / 3600
        solar = pd.read_parquet(REPO / "grid_data" / "renewables" / "DE_2019.parquet")
        cf = solar.set_index("timestamp")["solar_cf"].astype(float)
        at = pd.Timestamp("2019-06-01", tz="UTC") + pd.to_timedelta(a["start_s"], unit="s")
        ppa = 3 * cf.reindex(at).to_numpy() * hours_h.to_numpy()
        np.testing.assert_allclose(a["ppa_kwh"], ppa, rtol=1e-12)
        certificates = 1000 * 72 / (365.25 * 24)
        imp, kg = a["grid_import_kwh"].to_numpy(), a["carbon_import_kg"].to_numpy()
        if matching == "annual":
            expected = kg.sum() * (1 - (ppa.sum() + certificates) / imp.sum())
        else:
            left = np.maximum(imp - ppa, 0)
            left_kg = (kg * left / imp).sum()
            expected = left_kg * (1 - certificates / left.sum())
        assert sites.loc["a", "carbon_market_based_kg"] == pytest.approx(expected, rel=1e-9)
        # location-based carbon is untouched; b (no contracts) is market = location
        assert sites.loc["a", "carbon_operational_kg"] == pytest.approx(
            without.sites.set_index("site").loc["a", "carbon_operational_kg"], rel=1e-12
        )
        assert sites.loc["b", "carbon_market_based_kg"] == sites.loc["b", "carbon_operational_kg"]
        # the contracts cover part of a's import: market-based below location-based
        assert sites.loc["a", "carbon_market_based_kg"] < sites.loc["a", "carbon_operational_kg"]
        assert result.summary["carbon_market_based_kg"] == pytest.approx(
            sites["carbon_market_based_kg"].sum()
        )
    # the midday PPA surplus is lost hour by hour, kept in the annual sum
    assert (
        contracted["hourly"].summary["carbon_market_based_kg"]
        > contracted["annual"].summary["carbon_market_based_kg"]
    )
    # the PPA's hourly supply counts in each hour's CFE in full (the grid's share only
    # adds to it), whatever the matching
    scores = {m: r.summary["cfe_score"] for m, r in contracted.items()}
    assert scores["annual"] == scores["hourly"]
    a = contracted["hourly"].onsite
    covered = np.minimum(a["grid_to_load_kwh"], a["ppa_kwh"])
    assert (covered > 0).any()
    assert (a["carbon_free_kwh"] - a["carbon_free_to_load_kwh"] >= covered * (1 - 1e-12)).all()


def test_a_load_over_the_import_limit_names_the_key(tmp_path):
    with pytest.raises(
        ScenarioError, match=r"sites\[0\]\.grid_connection\.import_limit_kw: site a"
    ):
        run(tmp_path, "grid_connection = { import_limit_kw = 0.5 }")


BAD = {
    "profile without data": (
        'onsite = { pv_kwp = 10, profile = { zone = "NL", year = 2019 } }',
        ["sites[0].onsite.profile", "no solar profile for zone NL in 2019", "partial feed"],
    ),
    "soc bounds": (
        "battery = { capacity_kwh = 10, power_kw = 5, soc_min = 0.6, soc_max = 0.5 }",
        ["sites[0].battery", "soc_min 0.6 must be below soc_max 0.5"],
    ),
    "mode": (
        'grid_connection = { mode = "shed" }',
        ["sites[0].grid_connection.mode", "shed"],
    ),
    "ppa with both kinds": (
        'contracts = { ppa = [{ technology = "solar", kw = 5, mwh_per_year = 10 }] }',
        ["sites[0].contracts.ppa[0]", "give either technology and kw, or mwh_per_year"],
    ),
    "ppa without data": (
        'contracts = { ppa = [{ technology = "solar", kw = 5, '
        'profile = { zone = "NL", year = 2019 } }] }',
        ["sites[0].contracts.ppa[0]", "no solar profile for zone NL in 2019"],
    ),
    "matching": (
        'contracts = { matching = "monthly" }',
        ["sites[0].contracts.matching", "monthly"],
    ),
    "negative wind embodied carbon": (
        "onsite = { wind_kw = 10, wind_embodied_kg_per_kw = -1 }",
        ["sites[0].onsite.wind_embodied_kg_per_kw", "-1"],
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_onsite_input_is_one_line_naming_the_key(tmp_path, capsys, case):
    text, fragments = BAD[case]
    path = tmp_path / "bad.toml"
    path.write_text(SCENARIO.replace("{onsite}", text))
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    for fragment in fragments:
        assert fragment in line
