"""Every trace loader refuses NaN, +-inf and intensities no grid can have, with one line naming
the file, the line (or JSON path), the field and the value; a directory is refused alike."""

# ruff: noqa: E501  (real column names and rows are long)

from __future__ import annotations

import json

import pytest

from sim.errors import TraceError
from sim.grid.loaders import MAX_INTENSITY_G_PER_KWH, TRACE_FORMATS, load_trace

T0, T1 = "2020-06-01T00:00:00Z", "2020-06-01T01:00:00Z"


def csv_trace(value: str) -> tuple[str, dict]:
    return f"timestamp,carbon_intensity\n{T0},300\n{T1},{value}\n", {"format": "csv"}


def electricitymaps(value: str) -> tuple[str, dict]:
    header = "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA)"
    rows = [
        "2020-06-01 00:00:00,Germany,Germany,DE,250,300",
        f"2020-06-01 01:00:00,Germany,Germany,DE,250,{value}",
    ]
    return "\n".join([header, *rows]) + "\n", {"format": "electricitymaps"}


def watttime_csv(value: str) -> tuple[str, dict]:
    return f"point_time,value\n{T0},900\n{T1},{value}\n", {"format": "watttime"}


def watttime_json(value: str) -> tuple[str, dict]:
    data = f'[{{"point_time": "{T0}", "value": 900}}, {{"point_time": "{T1}", "value": {value}}}]'
    return f'{{"data": {data}, "meta": {{"units": "lbs_co2_per_mwh"}}}}', {"format": "watttime"}


def uk_api(value: str) -> tuple[str, dict]:
    entries = [
        {"from": "2020-01-01T00:00Z", "to": "2020-01-01T00:30Z", "intensity": {"forecast": 180, "actual": 190}},
        {"from": "2020-01-01T00:30Z", "to": "2020-01-01T01:00Z", "intensity": {"forecast": 180, "actual": "@"}},
    ]  # fmt: skip
    return json.dumps({"data": entries}).replace('"@"', value), {"format": "uk-api"}


WHERE = {
    csv_trace: ":3: carbon_intensity",
    electricitymaps: ":3: Carbon Intensity gCO₂eq/kWh (LCA)",
    watttime_csv: ":3: value",
    watttime_json: ": data[1].value",
    uk_api: ": data[1].intensity.actual",
}


NON_FINITE = [
    *((form, v) for form in (csv_trace, electricitymaps, watttime_csv) for v in ("nan", "NaN", "inf", "-inf", "Infinity")),
    *((form, v) for form in (watttime_json, uk_api) for v in ("NaN", "Infinity", "-Infinity")),
]  # fmt: skip


@pytest.mark.parametrize(
    "form, value", NON_FINITE, ids=[f"{f.__name__}-{v}" for f, v in NON_FINITE]
)
def test_nan_and_infinite_intensities_are_not_numbers(tmp_path, form, value):
    text, options = form(value)
    path = tmp_path / "trace.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as e:
        load_trace(path, **options)
    message = str(e.value)
    assert message.startswith(f"{path}{WHERE[form]} is not a number: ") and "\n" not in message


@pytest.mark.parametrize("form", list(WHERE), ids=lambda f: f.__name__)
def test_an_intensity_beyond_any_grid_names_the_value_and_the_unit(tmp_path, form):
    text, options = form("1e300")
    path = tmp_path / "trace.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as e:
        load_trace(path, **options)
    message = str(e.value)
    assert message.startswith(f"{path}{WHERE[form]} must be at most 5,000 g/kWh, got 1e")
    assert message.endswith("; check the unit") and "\n" not in message


def test_the_intensity_bound_applies_after_unit_conversion(tmp_path):
    path = tmp_path / "kg.csv"
    path.write_text(f"timestamp,carbon_intensity\n{T0},0.4\n{T1},400\n")
    # 400 kg/kWh is 400,000 g/kWh: a g/kWh trace declared in kg/kWh
    with pytest.raises(
        TraceError,
        match=r"kg.csv:3: carbon_intensity must be at most 5,000 g/kWh, got 400 = 4e\+05 g/kWh; check the unit$",
    ):
        load_trace(path, format="csv", unit="kg/kWh")
    path.write_text(
        f"timestamp,carbon_intensity\n{T0},0.4\n{T1},{MAX_INTENSITY_G_PER_KWH / 1000}\n"
    )
    assert load_trace(path, format="csv", unit="kg/kWh").max() == MAX_INTENSITY_G_PER_KWH


@pytest.mark.parametrize("fmt", TRACE_FORMATS)
def test_a_directory_given_as_a_trace_is_a_one_line_error(tmp_path, fmt):
    with pytest.raises(TraceError, match=r": cannot read trace file \(Is a directory\)$"):
        load_trace(tmp_path, format=fmt)


CORRUPT_GZIP = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"not deflate data"
"""A complete gzip header, then a body zlib cannot inflate."""


@pytest.mark.parametrize("fmt", TRACE_FORMATS)
def test_a_gzip_trace_whose_body_is_corrupt_is_a_one_line_error(tmp_path, fmt):
    path = tmp_path / "trace.csv.gz"
    path.write_bytes(CORRUPT_GZIP)
    with pytest.raises(TraceError, match=r"trace\.csv\.gz: cannot decompress gzip trace file"):
        load_trace(path, format=fmt)
