"""Market-based carbon (GHG Protocol Scope 2, annual and hourly matching) and the 24/7 CFE
score (`sim.energy.market`) against cases computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from sim.energy.market import hourly_cfe_kwh, market_based_kg

# Two hours: 100 kWh imported at 0.5 kg/kWh, then 100 kWh at 0.1 kg/kWh; a solar PPA
# delivers 150 kWh in the first hour and nothing in the second.
IMPORT_KWH = np.array([100.0, 100.0])
IMPORT_KG = np.array([50.0, 10.0])
PPA_KWH = np.array([150.0, 0.0])


def test_annual_matching_subtracts_the_contracted_energy_at_the_average_factor():
    # 200 kWh imported, 60 kg (0.3 kg/kWh on average); 150 kWh contracted: 50 kWh left
    assert market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 0.0, "annual") == pytest.approx(15.0)


def test_hourly_matching_covers_each_hour_and_loses_the_surplus():
    # hour 1 covered (50 kWh of surplus lost), hour 2 uncovered: 100 kWh x 0.1 kg/kWh
    assert market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 0.0, "hourly") == pytest.approx(10.0)


def test_certificates_cover_what_is_left_annually_in_either_matching():
    # annual: 200 - (150 + 30) = 20 kWh at 0.3 kg/kWh
    assert market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 30.0, "annual") == pytest.approx(6.0)
    # hourly: 100 kWh left at 0.1 kg/kWh, 30 kWh of it covered: 70 kWh x 0.1
    assert market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 30.0, "hourly") == pytest.approx(7.0)
    # more certificates than import: nothing left, never negative
    assert market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 500.0, "hourly") == 0.0


def test_without_contracts_market_based_is_the_location_based_import_carbon():
    none = np.zeros(2)
    for matching in ("annual", "hourly"):
        assert market_based_kg(IMPORT_KWH, IMPORT_KG, none, 0.0, matching) == pytest.approx(60.0)


def test_an_unknown_matching_is_refused():
    with pytest.raises(ValueError, match="matching must be one of"):
        market_based_kg(IMPORT_KWH, IMPORT_KG, PPA_KWH, 0.0, "monthly")  # type: ignore[arg-type]


def test_hourly_cfe_adds_on_site_supply_ppa_cover_and_the_grid_share_of_the_rest():
    # hour 1: load 120 = 20 on-site + 100 grid; the PPA's 150 covers all 100: CFE 120
    # hour 2: load 120 = 20 on-site + 100 grid; no PPA, the grid is 40 % carbon-free: 60
    cfe = hourly_cfe_kwh(
        clean_to_load_kwh=np.array([20.0, 20.0]),
        grid_to_load_kwh=np.array([100.0, 100.0]),
        ppa_kwh=PPA_KWH,
        grid_carbon_free_share=np.array([0.9, 0.4]),
    )
    np.testing.assert_allclose(cfe, [120.0, 60.0])
    # the score: load-weighted over the hours, (120 + 60) / 240
    assert cfe.sum() / 240.0 == pytest.approx(0.75)


def test_a_partly_covered_hour_takes_the_grid_share_of_the_uncovered_draw_only():
    # 100 kWh from the grid, 30 covered by the PPA, the grid's 50 % of the other 70
    cfe = hourly_cfe_kwh(np.array([0.0]), np.array([100.0]), np.array([30.0]), np.array([0.5]))
    assert cfe[0] == pytest.approx(30.0 + 35.0)
