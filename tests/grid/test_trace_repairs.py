"""What the trace loaders repaired travels with the trace: `series.attrs["repairs"]` ->
`CarbonSignal.repairs` -> a run's meta.json (`trace_repairs`, per site)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from sim.engine.build import simulate
from sim.grid import CarbonSignal
from sim.grid.catalog import catalog
from sim.grid.loaders import REPAIR_KEYS
from tests.conftest import make_scenario, site, site_signal
from tests.grid.test_loaders import ENTSOE_HEADER, entsoe_row

START = datetime(2020, 6, 1, tzinfo=UTC)


def entsoe_day(tmp_path):
    """25 hourly MTUs (UTC) from the scenario start: one small negative gas cell (clipped),
    one gas cell without data (filled), one MTU without any data (dropped)."""
    rows = []
    for h in range(25):
        t0, t1 = START + timedelta(hours=h), START + timedelta(hours=h + 1)
        mtu = f"{t0:%d.%m.%Y %H:%M} - {t1:%d.%m.%Y %H:%M}"
        if h == 3:
            rows.append(entsoe_row(mtu, gas="-20"))
        elif h == 5:
            rows.append(entsoe_row(mtu, gas="N/A"))
        elif h == 7:
            cells = dict.fromkeys(("biomass", "lignite", "gas", "storage", "nuclear", "wind"), "")
            rows.append(entsoe_row(mtu, **cells))
        else:
            rows.append(entsoe_row(mtu))
    path = tmp_path / "agpt.csv"
    header = ENTSOE_HEADER.replace('"MTU"', '"MTU (UTC)"')
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


ENTSOE_REPAIRS = {"mtus_dropped": 1, "cells_filled": 1, "negatives_clipped": 1}


def entsoe_scenario(tmp_path, **carbon):
    trace = {"file": str(entsoe_day(tmp_path)), "format": "entsoe", **carbon}
    return make_scenario(tmp_path, sites=[site(name="de", carbon=trace)])


def test_a_site_signal_carries_its_loaders_repair_counts(tmp_path):
    signal = site_signal(entsoe_scenario(tmp_path), 0)
    assert dict(signal.repairs) == ENTSOE_REPAIRS


def test_a_what_if_scale_keeps_the_repair_counts(tmp_path):
    signal = site_signal(entsoe_scenario(tmp_path, scale=0.5), 0)
    assert dict(signal.repairs) == ENTSOE_REPAIRS


def test_repair_counts_are_read_only():
    signal = CarbonSignal([0.0], [100.0], 10.0, repairs={"cells_filled": 2})
    with pytest.raises(TypeError):
        signal.repairs["cells_filled"] = 0  # type: ignore[index]


def test_a_constant_signal_has_no_repairs():
    assert dict(CarbonSignal.constant(300.0, 3600.0).repairs) == {}


def test_a_zone_signal_carries_the_catalogs_cleaning_counts_of_the_years_read():
    row = catalog().query("zone == 'DE' and year == 2020").iloc[0]
    scenario = make_scenario(sites=[site(name="de", carbon={"zone": "DE"})])
    assert dict(site_signal(scenario, 0).repairs) == {
        "gaps_filled_h": int(row["gaps_filled"]),
        "negatives_clipped": int(row["negative_clipped"]),
    }


def test_meta_json_lists_the_trace_repairs_of_every_site(tmp_path):
    scenario = entsoe_scenario(tmp_path)
    results = simulate(scenario)
    assert results.meta["trace_repairs"] == {"de": ENTSOE_REPAIRS}
    results.save(tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["trace_repairs"] == {"de": ENTSOE_REPAIRS}


def test_every_repair_count_is_a_documented_key(tmp_path):
    zone = make_scenario(sites=[site(name="de", carbon={"zone": "DE"})])
    reported = set(site_signal(entsoe_scenario(tmp_path), 0).repairs)
    reported |= set(site_signal(zone, 0).repairs)
    assert reported <= set(REPAIR_KEYS)
