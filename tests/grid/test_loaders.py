"""Trace loaders (`sim.grid.loaders`): one per format users already have, on small hand-written
files in the exact format, and on malformed ones (each error: one line, file, line or JSON
path, and the bad value)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from sim.errors import TraceError
from sim.grid.factors import FACTORS_G_PER_KWH
from sim.grid.loaders import (
    TRACE_FORMATS,
    load_electricitymaps,
    load_entsoe_generation,
    load_trace,
    load_trace_csv,
    load_uk_api,
    load_watttime,
)
from tests.conftest import SHARED_DATA

LB_PER_MWH = 0.45359237  # g/kWh per lb/MWh


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def write(tmp_path, text: str, name: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def assert_trace(s: pd.Series) -> None:
    """The contract every loader keeps."""
    assert s.name == "carbon_intensity_g_per_kwh"
    assert s.dtype == np.float64
    assert isinstance(s.index, pd.DatetimeIndex) and str(s.index.tz) == "UTC"
    assert s.index.name == "timestamp"
    assert s.index.is_monotonic_increasing and s.index.is_unique


def raises_one_line(fn, *fragments: str) -> str:
    with pytest.raises(TraceError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


# --- dispatch ------------------------------------------------------------------------------


def test_load_trace_dispatches_every_format_by_name(tmp_path):
    assert TRACE_FORMATS == ("csv", "electricitymaps", "watttime", "entsoe", "uk-api")
    p = write(tmp_path, "time,ci\n2020-01-01 00:00,2\n2020-01-01 01:00,1\n", "t.csv")
    a = load_trace(p, column="ci", time_column="time", unit="kg/kWh", timezone="Europe/Paris")
    b = load_trace_csv(p, column="ci", time_column="time", unit="kg/kWh", timezone="Europe/Paris")
    pd.testing.assert_series_equal(a, b)
    assert a.tolist() == [2000.0, 1000.0]
    assert a.index[0] == utc(2019, 12, 31, 23)


def test_unknown_format_and_variant_name_the_file(tmp_path):
    p = write(tmp_path, "timestamp,carbon_intensity\n", "t.csv")
    raises_one_line(
        lambda: load_trace(p, format="electricity-maps"),
        "t.csv: unknown trace format 'electricity-maps'; known: csv, electricitymaps",
    )
    raises_one_line(
        lambda: load_trace(p, format="entsoe", variant="LCA"),
        "t.csv: unknown emission-factor variant 'LCA'; known: lifecycle, direct",
    )


# --- Electricity Maps ----------------------------------------------------------------------

EM_HEADER_2023 = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)
EM_HEADER_2024 = (
    "Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
    "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),"
    "Renewable energy percentage (RE%),Data source,Data estimated,Data estimation method"
)


def em_file(tmp_path, rows: list[str], header: str = EM_HEADER_2023, name="DE_2021_hourly.csv"):
    return write(tmp_path, header + "\n" + "\n".join(rows) + "\n", name)


EM_ROWS = [
    "2021-03-28 00:00:00,Germany,Germany,DE,301.5,351.25,55.1,45.2,entsoe.eu,false,",
    "2021-03-28 01:00:00,Germany,Germany,DE,290,340,55.1,45.2,entsoe.eu,false,",
    "2021-03-28 02:00:00,Germany,Germany,DE,280,330,55.1,45.2,entsoe.eu,true,TIME_SLICER_AVERAGE",
]


@pytest.mark.parametrize("header", [EM_HEADER_2023, EM_HEADER_2024], ids=["2023", "2024"])
def test_electricitymaps_export_lifecycle_by_default_direct_on_request(tmp_path, header):
    p = em_file(tmp_path, EM_ROWS, header)
    s = load_electricitymaps(p)
    assert_trace(s)
    assert s.tolist() == [351.25, 340.0, 330.0]
    # "Datetime (UTC)" is UTC: no shift on the night clocks went forward in Germany
    assert s.index.tolist() == [utc(2021, 3, 28, h) for h in range(3)]
    assert load_trace(p, format="electricitymaps", variant="direct").tolist() == [301.5, 290, 280]


def test_electricitymaps_ascii_column_names_and_iso_times_with_zone(tmp_path):
    p = write(
        tmp_path,
        "Datetime (UTC),Carbon Intensity gCO2eq/kWh (LCA)\n"
        "2024-07-01T00:00:00.000Z,300\n2024-07-01T01:00:00.000Z,320\n",
        "em.csv",
    )
    s = load_electricitymaps(p)
    assert_trace(s)
    assert s.tolist() == [300.0, 320.0]
    assert s.index[1] == utc(2024, 7, 1, 1)


def test_electricitymaps_daily_export_is_a_daily_step_function(tmp_path):
    rows = [
        "2021-01-01 00:00:00,Germany,Germany,DE,300,350,1,1,entsoe.eu,false,",
        "2021-01-02 00:00:00,Germany,Germany,DE,310,360,1,1,entsoe.eu,false,",
    ]
    s = load_electricitymaps(em_file(tmp_path, rows, name="DE_2021_daily.csv"))
    assert (s.index[1] - s.index[0]) == timedelta(days=1)


EM_BAD = [
    (
        "no LCA column",
        "Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct)\n"
        "2021-01-01 00:00:00,DE,300\n2021-01-01 01:00:00,DE,300\n",
        ":1: no Electricity Maps lifecycle carbon-intensity column "
        "('Carbon Intensity gCO₂eq/kWh (LCA)' or 'Carbon intensity gCO₂eq/kWh (Life cycle)'); "
        "the columns are: 'Datetime (UTC)', 'Zone Id'",
    ),
    (
        "empty value",
        EM_HEADER_2023 + "\n" + EM_ROWS[0] + "\n" + EM_ROWS[1].replace(",340,", ",,") + "\n",
        ":3: Carbon Intensity gCO₂eq/kWh (LCA) is not a number: ''",
    ),
    (
        "negative",
        EM_HEADER_2023 + "\n" + EM_ROWS[0] + "\n" + EM_ROWS[1].replace(",340,", ",-3,") + "\n",
        ":3: Carbon Intensity gCO₂eq/kWh (LCA) must be >= 0, got -3",
    ),
    (
        "unsorted",
        EM_HEADER_2023 + "\n" + "\n".join([EM_ROWS[1], EM_ROWS[0]]) + "\n",
        ":3: Datetime (UTC) '2021-03-28 00:00:00' is earlier than the timestamp on line 2 "
        "('2021-03-28 01:00:00')",
    ),
    (
        "duplicated",
        EM_HEADER_2023 + "\n" + "\n".join([EM_ROWS[0], EM_ROWS[1], EM_ROWS[1]]) + "\n",
        ":4: Datetime (UTC) '2021-03-28 01:00:00' duplicates the timestamp on line 3",
    ),
    (
        "two zones",
        EM_HEADER_2023
        + "\n"
        + EM_ROWS[0]
        + "\n"
        + EM_ROWS[1].replace("Germany,Germany,DE", "France,France,FR")
        + "\n",
        ":3: Zone Id 'FR' differs from 'DE' on line 2; export one zone per file",
    ),
]


@pytest.mark.parametrize("case, text, fragment", EM_BAD, ids=[c[0] for c in EM_BAD])
def test_malformed_electricitymaps_exports(tmp_path, case, text, fragment):
    p = write(tmp_path, text, "bad_em.csv")
    raises_one_line(lambda: load_electricitymaps(p), f"bad_em.csv{fragment}")


# --- WattTime ------------------------------------------------------------------------------


def test_watttime_v3_csv_is_converted_from_lbs_per_mwh_and_stays_5_minute(tmp_path):
    p = write(
        tmp_path,
        "point_time,value,version\n"
        "2023-06-08T00:00:00+00:00,1000,3.2\n"
        "2023-06-08T00:05:00+00:00,900.5,3.2\n"
        "2023-06-08T00:10:00+00:00,0,3.2\n",
        "CAISO_NORTH_co2_moer_2023-06-08_2023-06-08.csv",
    )
    s = load_trace(p, format="watttime")
    assert_trace(s)
    assert s.tolist() == pytest.approx([1000 * LB_PER_MWH, 900.5 * LB_PER_MWH, 0.0], rel=1e-12)
    assert s.index.tolist() == [utc(2023, 6, 8, 0, m) for m in (0, 5, 10)]


def test_watttime_v2_csv_and_time_plus_one_column(tmp_path):
    v2 = write(
        tmp_path,
        "timestamp,MOER,frequency,market,ba\n"
        "2019-02-28 00:00:00+00:00,466,300,RTM,CAISO_NP15\n"
        "2019-02-28 00:05:00+00:00,426,300,RTM,CAISO_NP15\n",
        "v2.csv",
    )
    assert load_watttime(v2).tolist() == pytest.approx([466 * LB_PER_MWH, 426 * LB_PER_MWH])
    vessim = write(
        tmp_path, "time,Caiso_North\n2023-06-08 00:00:00,500\n2023-06-08 00:05:00,400\n", "ve.csv"
    )
    s = load_watttime(vessim)
    assert s.index[0] == utc(2023, 6, 8)  # naive times are UTC
    assert s.tolist() == pytest.approx([500 * LB_PER_MWH, 400 * LB_PER_MWH])


def test_watttime_v3_json_response(tmp_path):
    doc = {
        "data": [
            {"point_time": "2023-06-08T00:00:00+00:00", "value": 1000.0, "version": "3.2"},
            {"point_time": "2023-06-08T00:05:00+00:00", "value": 800.0, "version": "3.2"},
        ],
        "meta": {"region": "CAISO_NORTH", "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"},
    }
    p = write(tmp_path, json.dumps(doc), "wt.json")
    s = load_watttime(p)
    assert_trace(s)
    assert s.tolist() == pytest.approx([1000 * LB_PER_MWH, 800 * LB_PER_MWH])

    doc["meta"]["units"] = "usd_per_mwh"
    p = write(tmp_path, json.dumps(doc), "wt_health.json")
    raises_one_line(lambda: load_watttime(p), "wt_health.json: meta.units is 'usd_per_mwh'")
    doc["meta"]["units"] = "lbs_co2_per_mwh"
    doc["data"][1]["value"] = None
    p = write(tmp_path, json.dumps(doc), "wt_null.json")
    raises_one_line(lambda: load_watttime(p), "wt_null.json: data[1].value is not a number: null")


@pytest.mark.skipif(
    not (SHARED_DATA / "watttime-caiso-north").is_dir(), reason="shared data not present"
)
def test_the_real_watttime_caiso_north_file_loads_at_5_minutes():
    path = SHARED_DATA / "watttime-caiso-north" / "watttime2023_caiso-north_actual.csv"
    s = load_trace(path, format="watttime")
    assert_trace(s)
    raw = pd.read_csv(path)
    assert len(s) == len(raw)
    assert s.iloc[0] == pytest.approx(raw.iloc[0, 1] * LB_PER_MWH)
    assert (s.index.to_series().diff().dropna() == timedelta(minutes=5)).all()


WT_BAD = [
    (
        "unknown layout",
        "request_time,forecast_time,Caiso_North\n2023-06-08 00:00,2023-06-08 00:05,1\n",
        ":1: not a WattTime MOER file: expected the columns 'point_time,value'",
    ),
    (
        "non-numeric",
        "point_time,value\n2023-06-08T00:00Z,1\n2023-06-08T00:05Z,abc\n",
        ":3: value is not a number: 'abc'",
    ),
    (
        "negative",
        "timestamp,MOER\n2023-06-08T00:00Z,-1\n2023-06-08T00:05Z,2\n",
        ":2: MOER must be >= 0, got -1",
    ),
    (
        "duplicated",
        "point_time,value\n2023-06-08T00:00Z,1\n2023-06-08T00:05Z,2\n2023-06-08T00:05Z,3\n",
        ":4: point_time '2023-06-08T00:05Z' duplicates the timestamp on line 3",
    ),
    (
        "unsorted",
        "point_time,value\n2023-06-08T00:05Z,1\n2023-06-08T00:00Z,2\n",
        ":3: point_time '2023-06-08T00:00Z' is earlier than the timestamp on line 2",
    ),
]


@pytest.mark.parametrize("case, text, fragment", WT_BAD, ids=[c[0] for c in WT_BAD])
def test_malformed_watttime_files(tmp_path, case, text, fragment):
    p = write(tmp_path, text, "bad_wt.csv")
    raises_one_line(lambda: load_watttime(p), f"bad_wt.csv{fragment}")


# --- ENTSO-E -------------------------------------------------------------------------------

LC = FACTORS_G_PER_KWH["lifecycle"]
DIRECT = FACTORS_G_PER_KWH["direct"]
ENTSOE_HEADER = (
    '"Area","MTU","Biomass  - Actual Aggregated [MW]","Biomass  - Actual Consumption [MW]",'
    '"Fossil Brown coal/Lignite  - Actual Aggregated [MW]",'
    '"Fossil Brown coal/Lignite  - Actual Consumption [MW]",'
    '"Fossil Gas  - Actual Aggregated [MW]","Fossil Gas  - Actual Consumption [MW]",'
    '"Hydro Pumped Storage  - Actual Aggregated [MW]",'
    '"Hydro Pumped Storage  - Actual Consumption [MW]",'
    '"Nuclear  - Actual Aggregated [MW]","Nuclear  - Actual Consumption [MW]",'
    '"Wind Onshore  - Actual Aggregated [MW]","Wind Onshore  - Actual Consumption [MW]"'
)


def entsoe_row(mtu: str, biomass="100", lignite="200", gas="300", storage="50", nuclear="400",
               wind="1000", area="BZN|DE-LU") -> str:  # fmt: skip
    cells = [area, mtu, biomass, "n/e", lignite, "n/e", gas, "n/e", storage, "80", nuclear, "n/e"]
    return ",".join(f'"{c}"' for c in [*cells, wind, "n/e"])


def mix(factors, biomass=100, lignite=200, gas=300, nuclear=400, wind=1000) -> float:
    """The expected intensity: storage discharge and consumption are not in the mix."""
    gen = {"biomass": biomass, "lignite": lignite, "gas": gas, "nuclear": nuclear, "wind": wind}
    return sum(factors[f] * mw for f, mw in gen.items()) / sum(gen.values())


def entsoe_file(tmp_path, rows: list[str], header: str = ENTSOE_HEADER, name="agpt.csv"):
    return write(tmp_path, header + "\n" + "\n".join(rows) + "\n", name)


def test_entsoe_mix_to_intensity_through_the_factor_table(tmp_path):
    p = entsoe_file(
        tmp_path,
        [
            entsoe_row("15.01.2020 00:00 - 15.01.2020 01:00"),
            entsoe_row("15.01.2020 01:00 - 15.01.2020 02:00", lignite="0", wind="3000"),
        ],
    )
    s = load_trace(p, format="entsoe")
    assert_trace(s)
    assert s.tolist() == pytest.approx([mix(LC), mix(LC, lignite=0, wind=3000)], rel=1e-12)
    assert s.index.tolist() == [utc(2020, 1, 14, 23), utc(2020, 1, 15, 0)]  # CET = UTC+1
    direct = load_entsoe_generation(p, variant="direct")
    assert direct.tolist() == pytest.approx([mix(DIRECT), mix(DIRECT, lignite=0, wind=3000)])
    assert s.attrs["mtu_time_zone_assumed"] is True


def test_entsoe_autumn_dst_the_repeated_hour_is_cest_then_cet(tmp_path):
    # 2020-10-25: 03:00 CEST -> 02:00 CET; the export lists 02:00-03:00 twice.
    mtus = [
        "25.10.2020 00:00 - 25.10.2020 01:00",
        "25.10.2020 01:00 - 25.10.2020 02:00",
        "25.10.2020 02:00 - 25.10.2020 03:00",
        "25.10.2020 02:00 - 25.10.2020 03:00",
        "25.10.2020 03:00 - 25.10.2020 04:00",
    ]
    p = entsoe_file(
        tmp_path, [entsoe_row(m, gas=str(g)) for m, g in zip(mtus, range(5), strict=True)]
    )
    s = load_entsoe_generation(p)
    assert s.index.tolist() == [utc(2020, 10, 24, 22) + timedelta(hours=h) for h in range(5)]
    assert s.tolist() == pytest.approx([mix(LC, gas=g) for g in range(5)])


def test_entsoe_spring_dst_and_a_utc_export(tmp_path):
    # 2020-03-29: 02:00 CET -> 03:00 CEST; the export has no 02:00.
    local = [
        "29.03.2020 00:00 - 29.03.2020 01:00",
        "29.03.2020 01:00 - 29.03.2020 03:00",
        "29.03.2020 03:00 - 29.03.2020 04:00",
    ]
    s = load_entsoe_generation(entsoe_file(tmp_path, [entsoe_row(m) for m in local]))
    assert s.index.tolist() == [utc(2020, 3, 28, 23), utc(2020, 3, 29, 0), utc(2020, 3, 29, 1)]

    header = ENTSOE_HEADER.replace('"MTU"', '"MTU (UTC)"')
    in_utc = [
        "29.03.2020 00:00 - 29.03.2020 01:00",
        "29.03.2020 01:00 - 29.03.2020 02:00",
        "29.03.2020 02:00 - 29.03.2020 03:00",
    ]
    s = load_entsoe_generation(entsoe_file(tmp_path, [entsoe_row(m) for m in in_utc], header))
    assert s.index.tolist() == [utc(2020, 3, 29, h) for h in range(3)]
    assert s.attrs["mtu_time_zone_assumed"] is False


def test_entsoe_time_zone_labels_in_the_cells_and_the_new_platform_layout(tmp_path):
    # labels in the cells win; the new platform writes dd/mm/yyyy hh:mm:ss
    header = ENTSOE_HEADER.replace('"MTU"', '"MTU (CET/CEST)"')
    mtus = [
        "25/10/2020 01:45:00 - 25/10/2020 02:00:00",
        "25/10/2020 02:00:00 (CEST) - 25/10/2020 02:15:00 (CEST)",
        "25/10/2020 02:00:00 (CET) - 25/10/2020 02:15:00 (CET)",
    ]
    s = load_entsoe_generation(entsoe_file(tmp_path, [entsoe_row(m) for m in mtus], header))
    assert s.index.tolist() == [
        utc(2020, 10, 24, 23, 45),
        utc(2020, 10, 25, 0),
        utc(2020, 10, 25, 1),
    ]
    p = entsoe_file(
        tmp_path,
        [
            entsoe_row("01.07.2020 00:00 - 01.07.2020 01:00 (CET/CEST)"),
            entsoe_row("01.07.2020 01:00 - 01.07.2020 02:00 (CET/CEST)"),
        ],
        name="cell_zone.csv",
    )
    assert load_entsoe_generation(p).index[0] == utc(2020, 6, 30, 22)


def test_entsoe_not_expected_is_zero_no_data_is_filled_or_dropped_and_counted(tmp_path, caplog):
    p = entsoe_file(
        tmp_path,
        [
            entsoe_row("15.01.2020 00:00 - 15.01.2020 01:00", lignite="n/e"),
            entsoe_row("15.01.2020 01:00 - 15.01.2020 02:00", lignite="n/e", gas="N/A"),
            entsoe_row(
                "15.01.2020 02:00 - 15.01.2020 03:00",
                biomass="N/A",
                lignite="N/A",
                gas="",
                storage="-",
                nuclear="N/A",
                wind="N/A",
            ),  # fmt: skip
            entsoe_row("15.01.2020 03:00 - 15.01.2020 04:00", lignite="n/e", gas="500"),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="sim.grid.loaders"):
        s = load_entsoe_generation(p)
    # row 2: gas takes the previous value (300); row 3 has no data and is dropped
    assert s.tolist() == pytest.approx(
        [mix(LC, lignite=0), mix(LC, lignite=0), mix(LC, lignite=0, gas=500)]
    )
    assert s.index.tolist() == [utc(2020, 1, 14, 23), utc(2020, 1, 15, 0), utc(2020, 1, 15, 2)]
    assert s.attrs["repairs"] == {"mtus_dropped": 1, "cells_filled": 1, "negatives_clipped": 0}
    assert "1 of 4 MTUs have no generation data" in caplog.text
    assert "1 missing generation cells (N/A) filled" in caplog.text


JAN = "15.01.2020 00:00 - 15.01.2020 01:00"
JAN2 = "15.01.2020 01:00 - 15.01.2020 02:00"
ENTSOE_BAD = [
    (
        "unknown production type",
        ENTSOE_HEADER.replace("Biomass  - Actual Aggregated", "Hydrogen  - Actual Aggregated"),
        [entsoe_row(JAN), entsoe_row(JAN2)],
        ":1: column 'Hydrogen  - Actual Aggregated [MW]': unknown production type 'Hydrogen'",
    ),
    (
        "no MTU column",
        ENTSOE_HEADER.replace('"MTU"', '"Time"'),
        [entsoe_row(JAN), entsoe_row(JAN2)],
        ":1: expected one MTU column (e.g. 'MTU' or 'MTU (CET/CEST)'), found 0",
    ),
    (
        "negative beyond 5 % of the row's generation",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row(JAN2, gas="-120")],
        ":3: Fossil Gas  - Actual Aggregated [MW] is -120 MW, more negative than 5% of the "
        "row's generation (",
    ),
    (
        "infinite",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row(JAN2, wind="inf")],
        ":3: Wind Onshore  - Actual Aggregated [MW] is not a number: 'inf'",
    ),
    (
        "beyond any grid",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row(JAN2, nuclear="2e6")],
        ":3: Nuclear  - Actual Aggregated [MW] must be at most 1,000,000 MW, got 2e6",
    ),
    (
        "non-numeric",
        ENTSOE_HEADER,
        [entsoe_row(JAN, nuclear="4OO"), entsoe_row(JAN2)],
        ":2: Nuclear  - Actual Aggregated [MW] is not a number: '4OO'",
    ),
    (
        "bad MTU",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row("2020-01-15 01:00")],
        ":3: MTU is not an MTU interval like '01.01.2020 00:00 - 01.01.2020 01:00': "
        "'2020-01-15 01:00'",
    ),
    (
        "impossible date",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row("32.01.2020 01:00 - 32.01.2020 02:00")],
        ":3: MTU has an invalid date or time: '32.01.2020 01:00 - 32.01.2020 02:00'",
    ),
    (
        "unknown zone label",
        ENTSOE_HEADER.replace('"MTU"', '"MTU (MSK)"'),
        [entsoe_row(JAN), entsoe_row(JAN2)],
        ":2: MTU (MSK) '15.01.2020 00:00 - 15.01.2020 01:00': unknown time zone 'MSK'",
    ),
    (
        "unsorted",
        ENTSOE_HEADER,
        [entsoe_row(JAN2), entsoe_row(JAN)],
        ":3: MTU '15.01.2020 00:00 - 15.01.2020 01:00' is earlier than the timestamp on line 2"
        " ('15.01.2020 01:00 - 15.01.2020 02:00') (in UTC: 2020-01-14T23:00Z and "
        "2020-01-15T00:00Z)",
    ),
    (
        "an hour three times",
        ENTSOE_HEADER,
        [entsoe_row("25.10.2020 02:00 - 25.10.2020 03:00")] * 3,
        ":4: MTU '25.10.2020 02:00 - 25.10.2020 03:00' duplicates the timestamp on line 3",
    ),
    (
        "two areas",
        ENTSOE_HEADER,
        [entsoe_row(JAN), entsoe_row(JAN2, area="BZN|FR")],
        ":3: Area 'BZN|FR' differs from 'BZN|DE-LU' on line 2; export one area per file",
    ),
    (
        "no generation",
        ENTSOE_HEADER,
        [
            entsoe_row(JAN),
            entsoe_row(JAN2, biomass="0", lignite="0", gas="0", nuclear="0", wind="0"),
        ],
        ":3: MTU '15.01.2020 01:00 - 15.01.2020 02:00': the generation mix is 0 MW",
    ),
]


@pytest.mark.parametrize("case, header, rows, fragment", ENTSOE_BAD, ids=[c[0] for c in ENTSOE_BAD])
def test_malformed_entsoe_exports(tmp_path, case, header, rows, fragment):
    p = entsoe_file(tmp_path, rows, header, name="bad_agpt.csv")
    raises_one_line(lambda: load_entsoe_generation(p), f"bad_agpt.csv{fragment}")


# Without gas, the rows' mix is 100 + 200 + 400 + 1000 = 1700 MW: 5 % of it is 85 MW.


def test_entsoe_negative_cells_up_to_5_percent_of_the_row_are_clipped_and_counted(tmp_path, caplog):
    p = entsoe_file(tmp_path, [entsoe_row(JAN, gas="-85"), entsoe_row(JAN2, gas="-0.4")])
    with caplog.at_level(logging.WARNING, logger="sim.grid.loaders"):
        s = load_entsoe_generation(p)
    assert s.tolist() == pytest.approx([mix(LC, gas=0), mix(LC, gas=0)])
    assert s.attrs["repairs"]["negatives_clipped"] == 2
    assert "2 negative generation cells clipped to 0 MW" in caplog.text


def test_entsoe_a_negative_cell_just_beyond_5_percent_of_the_row_is_an_error(tmp_path):
    p = entsoe_file(tmp_path, [entsoe_row(JAN), entsoe_row(JAN2, gas="-86")])
    raises_one_line(
        lambda: load_entsoe_generation(p),
        "agpt.csv:3: Fossil Gas  - Actual Aggregated [MW] is -86 MW, "
        "more negative than 5% of the row's generation (1,700 MW)",
    )


def test_entsoe_negative_storage_cells_are_pumping_and_clipped_whatever_their_size(tmp_path):
    p = entsoe_file(tmp_path, [entsoe_row(JAN, storage="-900"), entsoe_row(JAN2)])
    s = load_entsoe_generation(p)
    assert s.tolist() == pytest.approx([mix(LC), mix(LC)])
    assert s.attrs["repairs"]["negatives_clipped"] == 1


# --- UK Carbon Intensity API ---------------------------------------------------------------


def uk_entry(start: str, end: str, forecast, actual="absent", index="moderate", mix=False):
    intensity = {"forecast": forecast, "index": index}
    if actual != "absent":
        intensity = {"forecast": forecast, "actual": actual, "index": index}
    entry = {"from": start, "to": end, "intensity": intensity}
    if mix:
        entry["generationmix"] = [{"fuel": "gas", "perc": 40.1}, {"fuel": "wind", "perc": 30.2}]
    return entry


NATIONAL = {
    "data": [
        uk_entry("2020-01-01T00:00Z", "2020-01-01T00:30Z", 186, 190),
        uk_entry("2020-01-01T00:30Z", "2020-01-01T01:00Z", 180, None),
        uk_entry("2020-01-01T01:00Z", "2020-01-01T01:30Z", 170, 175.5),
    ]
}


def test_uk_api_national_actual_with_counted_forecast_fallback(tmp_path, caplog):
    p = write(tmp_path, json.dumps(NATIONAL), "uk.json")
    with caplog.at_level(logging.WARNING, logger="sim.grid.loaders"):
        s = load_trace(p, format="uk-api")
    assert_trace(s)
    assert s.tolist() == [190.0, 180.0, 175.5]
    assert s.index.tolist() == [utc(2020, 1, 1, 0, 0), utc(2020, 1, 1, 0, 30), utc(2020, 1, 1, 1)]
    assert s.attrs["repairs"]["forecast_fallbacks"] == 1
    assert "uk.json: 1 of 3 entries have no actual intensity; used intensity.forecast" in (
        caplog.text
    )
    assert load_uk_api(p, value="forecast").tolist() == [186.0, 180.0, 170.0]


def test_uk_api_summer_times_are_utc(tmp_path):
    doc = {"data": [uk_entry(f"2020-07-01T0{h}:00Z", "", 100 + h, 100 + h) for h in (0, 1)]}
    s = load_uk_api(write(tmp_path, json.dumps(doc), "uk_summer.json"))
    assert s.index.tolist() == [utc(2020, 7, 1, 0), utc(2020, 7, 1, 1)]  # not BST
    assert s.attrs["repairs"]["forecast_fallbacks"] == 0


REGION = {
    "regionid": 13,
    "dnoregion": "UKPN London",
    "shortname": "London",
    "data": [
        uk_entry("2020-05-10T23:00Z", "2020-05-10T23:30Z", 120, mix=True),
        uk_entry("2020-05-10T23:30Z", "2020-05-11T00:00Z", 110, mix=True),
    ],
}


@pytest.mark.parametrize("doc", [{"data": REGION}, {"data": [REGION]}], ids=["object", "list"])
def test_uk_api_regional_forms_have_forecasts_only(tmp_path, doc):
    s = load_uk_api(write(tmp_path, json.dumps(doc), "london.json"))
    assert s.tolist() == [120.0, 110.0]
    assert s.index[0] == utc(2020, 5, 10, 23)
    assert (
        s.attrs["repairs"]["forecast_fallbacks"] == 2
    )  # every entry: the regional API has no actual


def bad_national(k: int, **intensity) -> dict:
    doc = json.loads(json.dumps(NATIONAL))
    doc["data"][k]["intensity"].update(intensity)
    return doc


UK_BAD = [
    (
        "non-numeric",
        bad_national(2, actual="high"),
        "data[2].intensity.actual is not a number: 'high'",
    ),  # noqa: E501
    ("boolean", bad_national(0, actual=True), "data[0].intensity.actual is not a number"),
    ("negative", bad_national(1, forecast=-4), "data[1].intensity.forecast must be >= 0, got -4"),
    (
        "neither value",
        bad_national(1, forecast=None),
        "data[1].intensity has neither an actual nor a forecast value",
    ),
    (
        "duplicated",
        {"data": [*NATIONAL["data"], NATIONAL["data"][-1]]},
        "data[3].from '2020-01-01T01:00Z' duplicates the timestamp on data[2].from",
    ),
    (
        "unsorted",
        {"data": NATIONAL["data"][::-1]},
        "data[1].from '2020-01-01T00:30Z' is earlier than the timestamp on data[0].from",
    ),
    (
        "bad time",
        {"data": [NATIONAL["data"][0], {**NATIONAL["data"][1], "from": "yesterday"}]},
        "data[1].from is not an ISO 8601 timestamp: 'yesterday'",
    ),
    (
        "no intensity",
        {"data": [NATIONAL["data"][0], {"from": "2020-01-01T00:30Z"}]},
        "data[1] has no 'intensity'",
    ),
    (
        "regional path",
        {"data": {**REGION, "data": [REGION["data"][0], uk_entry("2020-05-10T23:30Z", "", "x")]}},
        "data.data[1].intensity.forecast is not a number: 'x'",
    ),
    (
        "all regions",
        {"data": [{"from": "2020-05-10T23:00Z", "to": "", "regions": [REGION, REGION]}]},
        "data[0].regions holds 2 regions; save the response for one region",
    ),
    ("one entry", {"data": NATIONAL["data"][:1]}, "data: a trace needs at least 2 entries, got 1"),
    ("not the API", {"results": []}, 'not a Carbon Intensity API response: expected {"data"'),
]


@pytest.mark.parametrize("case, doc, fragment", UK_BAD, ids=[c[0] for c in UK_BAD])
def test_malformed_uk_api_json(tmp_path, case, doc, fragment):
    p = write(tmp_path, json.dumps(doc), "bad_uk.json")
    raises_one_line(lambda: load_uk_api(p), f"bad_uk.json: {fragment}")


def test_invalid_json_names_the_line(tmp_path):
    p = write(tmp_path, '{"data": [\n  {"from": "2020-01-01T00:00Z",}\n]}', "broken.json")
    raises_one_line(lambda: load_uk_api(p), "broken.json:2: not valid JSON")
