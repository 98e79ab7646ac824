"""Carbon-intensity signals (`sim.grid`): exact integrals, real traces, loud loaders, forecasts."""

from __future__ import annotations

import bisect
import gzip
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.config.loading import scenario_from_dict
from sim.config.runtime import ForecastConfig
from sim.errors import ScenarioError, TraceError
from sim.grid import (
    CarbonSignal,
    Forecaster,
    available_zones,
    load_trace_csv,
    load_zone,
)
from tests.conftest import site_signal

# --- helpers -------------------------------------------------------------------------------


def random_signal(seed: int, n: int = 300) -> CarbonSignal:
    """Steps of random length (0.5 s .. 2 h) and value (0 .. 800 g/kWh), starting before 0."""
    rng = np.random.default_rng(seed)
    lengths = rng.uniform(0.5, 7200.0, size=n)
    times = -1000.0 + np.concatenate(([0.0], np.cumsum(lengths[:-1])))
    values = rng.uniform(0.0, 800.0, size=n)
    values[rng.integers(0, n, size=5)] = 0.0  # some carbon-free steps
    return CarbonSignal(times, values, end_s=times[-1] + lengths[-1])


def brute_integral(sig: CarbonSignal, t0: float, t1: float) -> float:
    """Independent loop: sum of value x overlap of [t0, t1] with every step."""
    edges = list(sig.times_s) + [sig.end_s]
    parts = []
    for k, v in enumerate(sig.values_g_per_kwh):
        lo, hi = max(t0, edges[k]), min(t1, edges[k + 1])
        if hi > lo:
            parts.append(float(v) * (hi - lo))
    return math.fsum(parts)


def scenario(
    carbon: dict,
    start: str = "2020-06-01T00:00:00Z",
    duration_h: float = 168.0,
    forecast: dict | None = None,
    years: str | None = None,
):
    raw = {
        "name": "grid-test",
        "start": start,
        "duration_h": duration_h,
        "sites": [
            {
                "name": "a",
                "lat": 50.1,
                "lon": 8.7,
                "carbon": carbon,
                "gpus": [{"model": "V100", "count": 8}],
            }
        ],
        "workload": {
            "synthetic": {
                "arrival_rate_per_h": 1.0,
                "duration": {"dist": "exponential", "mean_h": 1.0},
            }
        },
    }
    if forecast:
        raw["forecast"] = forecast
    if years:
        raw["years"] = years
    return scenario_from_dict(raw)


def utc(*args) -> pd.Timestamp:
    return pd.Timestamp(datetime(*args, tzinfo=UTC))


# --- CarbonSignal: exact integrals ---------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_integral_equals_an_independent_sum_over_steps(seed):
    sig = random_signal(seed)
    rng = np.random.default_rng(100 + seed)
    lo, hi = sig.times_s[0], sig.end_s
    t = sig.times_s
    intervals = [
        (lo, hi),  # the whole domain
        (0.0, hi),
        (t[10], t[200]),  # exactly on breakpoints, many steps
        (t[10] + 0.25, t[200] - 0.25),  # mid-step at both ends
        (t[50] + 1.0, t[50] + 2.0),  # inside one step
        (t[50] - 0.125, t[51] + 0.125),  # straddling two breakpoints
        (t[-1] + 0.1, hi),  # the last, open-ended step
        (t[7], t[7]),  # empty
    ]
    for _ in range(200):
        a, b = np.sort(rng.uniform(lo, hi, size=2))
        intervals.append((float(a), float(b)))
    for a, b in intervals:
        expected = brute_integral(sig, a, b)
        got = sig.integral(a, b)
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-9), (a, b)
        assert sig.cumulative(b) - sig.cumulative(a) == pytest.approx(expected, rel=1e-9, abs=1e-6)
        if b > a:
            assert sig.mean(a, b) == pytest.approx(expected / (b - a), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_vectorised_integrals_give_the_scalar_integrals_bits(seed):
    sig = random_signal(seed)
    rng = np.random.default_rng(200 + seed)
    t = sig.times_s
    ends = np.sort(rng.uniform(t[0], sig.end_s, size=(500, 2)), axis=1)
    on_breakpoints = np.array([[t[10], t[200]], [t[7], t[7]], [t[-1], sig.end_s], [t[0], t[1]]])
    t0, t1 = np.concatenate((ends, on_breakpoints)).T
    want = [sig.integral(float(a), float(b)) for a, b in zip(t0, t1, strict=True)]
    assert sig.integrals(t0, t1).tolist() == want
    with pytest.raises(ValueError, match="outside the signal's domain"):
        sig.integrals(np.array([t[0]]), np.array([sig.end_s + 1.0]))


def test_short_integrals_late_in_a_long_signal_keep_full_precision():
    # A year of hourly steps: cumulative sums reach ~1e10 (g/kWh)*s, yet one second near the
    # end must still integrate to the step's value to 1e-12.
    rng = np.random.default_rng(7)
    n = 8784
    sig = CarbonSignal(np.arange(n) * 3600.0, rng.uniform(50, 500, n), end_s=n * 3600.0)
    t0 = (n - 3) * 3600.0 + 1234.5
    assert sig.integral(t0, t0 + 1.0) == pytest.approx(sig.values_g_per_kwh[n - 3], rel=1e-12)
    assert sig.integral(t0, t0 + 3600.0) == pytest.approx(
        brute_integral(sig, t0, t0 + 3600.0), rel=1e-12
    )


def test_vectorised_cumulative_equals_scalar():
    sig = random_signal(11)
    ts = np.concatenate(
        (
            np.random.default_rng(1).uniform(sig.times_s[0], sig.end_s, 1000),
            sig.times_s,
            [sig.end_s],
        )
    )
    vec = sig.cumulative(ts)
    scalar = np.array([sig.cumulative(float(t)) for t in ts])
    assert isinstance(vec, np.ndarray) and vec.shape == ts.shape
    np.testing.assert_allclose(vec, scalar, rtol=1e-12, atol=1e-6)
    assert sig.cumulative(float(sig.times_s[0])) == 0.0


def test_steps_are_closed_on_the_left_and_the_last_holds_until_the_end():
    sig = CarbonSignal([0.0, 10.0, 20.0], [1.0, 2.0, 3.0], end_s=30.0)
    assert [sig.value_at(t) for t in (0.0, 9.999, 10.0, 19.0, 20.0, 29.0, 30.0)] == [
        1.0,
        1.0,
        2.0,
        2.0,
        3.0,
        3.0,
        3.0,
    ]
    assert sig.cumulative(30.0) == 60.0
    assert sig.integral(5.0, 25.0) == 5.0 + 20.0 + 15.0
    assert sig.mean(5.0, 25.0) == 2.0
    assert sig.mean(12.0, 12.0) == 2.0
    assert sig.breakpoints_between(0.0, 20.0).tolist() == [10.0]
    assert sig.breakpoints_between(-5.0, 30.0).tolist() == [0.0, 10.0, 20.0]
    assert sig.breakpoints_between(10.0, 10.5).tolist() == []


def test_queries_outside_the_domain_are_errors():
    sig = CarbonSignal.constant(100.0, horizon_s=3600.0)
    assert (sig.times_s.tolist(), sig.end_s, sig.kind) == ([0.0], 3600.0, "average")
    assert sig.integral(0.0, 3600.0) == 360000.0
    for bad in (-1.0, 3600.5):
        with pytest.raises(ValueError, match="outside the signal's domain"):
            sig.value_at(bad)
        with pytest.raises(ValueError, match="outside the signal's domain"):
            sig.cumulative(np.array([0.0, bad]))
    with pytest.raises(ValueError, match="t0_s <= t1_s"):
        sig.integral(10.0, 5.0)


def test_signal_arrays_are_read_only():
    sig = random_signal(3, n=10)
    with pytest.raises(ValueError):
        sig.values_g_per_kwh[0] = 1.0


@pytest.mark.parametrize(
    "times, values, end, match",
    [
        ([0.0, 0.0], [1.0, 2.0], 10.0, "strictly ascending"),
        ([0.0, 5.0], [1.0, -2.0], 10.0, ">= 0"),
        ([0.0, 5.0], [1.0, 2.0], 5.0, "after the last breakpoint"),
        ([], [], 5.0, "non-zero length"),
    ],
)
def test_malformed_signals_are_rejected(times, values, end, match):
    with pytest.raises(ValueError, match=match):
        CarbonSignal(times, values, end)


# --- CarbonSignal.from_series --------------------------------------------------------------


def hourly_series(start: pd.Timestamp, hours: int, values=None) -> pd.Series:
    idx = pd.date_range(start, periods=hours, freq="h")
    vals = np.arange(hours, dtype=float) + 100.0 if values is None else values
    return pd.Series(vals, index=idx)


def test_from_series_aligns_to_the_scenario_start_and_keeps_only_the_horizon():
    s = hourly_series(utc(2020, 6, 1), 48)
    sig = CarbonSignal.from_series(
        s, datetime(2020, 6, 1, 10, 30, tzinfo=UTC), 3 * 3600.0, what="t"
    )
    # the step that began at 10:00 (-1800 s) holds at the start; the 13:00 step is not needed
    assert sig.times_s.tolist() == [-1800.0, 1800.0, 5400.0, 9000.0]
    assert sig.values_g_per_kwh.tolist() == [110.0, 111.0, 112.0, 113.0]
    assert sig.end_s == 3 * 3600.0
    assert sig.value_at(0.0) == 110.0


def test_from_series_accepts_a_start_in_another_time_zone():
    s = hourly_series(utc(2020, 6, 1), 48)
    cest = datetime(
        2020, 6, 1, 12, 0, tzinfo=pytest.importorskip("zoneinfo").ZoneInfo("Europe/Berlin")
    )  # = 10:00 UTC
    sig = CarbonSignal.from_series(s, cest, 3600.0, what="t")
    assert sig.value_at(0.0) == 110.0


def test_from_series_last_sample_holds_for_the_median_step():
    s = hourly_series(utc(2020, 6, 1), 24)  # last sample 23:00 covers until 24:00
    CarbonSignal.from_series(s, utc(2020, 6, 1).to_pydatetime(), 24 * 3600.0, what="t")
    with pytest.raises(
        ScenarioError, match="ends 2020-06-02T00:00Z, before the scenario end 2020-06-02T00:00:01Z"
    ):
        CarbonSignal.from_series(s, utc(2020, 6, 1).to_pydatetime(), 24 * 3600.0 + 1, what="t")


def test_from_series_errors_when_the_trace_starts_after_the_scenario():
    s = hourly_series(utc(2020, 6, 2), 72)
    with pytest.raises(ScenarioError) as e:
        CarbonSignal.from_series(s, utc(2020, 6, 1).to_pydatetime(), 3600.0, what="sites[0].carbon")
    assert str(e.value) == (
        "sites[0].carbon: trace starts 2020-06-02T00:00Z, after the scenario "
        "start 2020-06-01T00:00Z"
    )


def test_from_series_errors_when_the_trace_ends_before_the_scenario():
    s = hourly_series(utc(2020, 6, 1), 24)
    with pytest.raises(ScenarioError) as e:
        CarbonSignal.from_series(s, utc(2020, 6, 1, 12).to_pydatetime(), 48 * 3600.0, what="x")
    assert str(e.value) == (
        "x: trace ends 2020-06-02T00:00Z, before the scenario end 2020-06-03T12:00Z"
    )


# --- real zone traces ----------------------------------------------------------------


def test_the_catalog_has_de_gb_fr_2020():
    assert {("DE", 2020), ("GB", 2020), ("FR", 2020)} <= set(available_zones())
    de = load_zone("DE", 2020)
    assert len(de) == 8784 and de.name == "carbon_intensity_g_per_kwh"
    assert de.index[0] == utc(2020, 1, 1) and de.index[-1] == utc(2020, 12, 31, 23)
    assert (de.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    assert 100 < de.mean() < 600


@pytest.mark.parametrize("zone", ["DE", "GB", "FR"])
def test_a_zone_signal_covers_a_2020_week_within_the_data_range(zone):
    sc = scenario({"zone": zone}, start="2020-06-01T00:00:00Z", duration_h=168)
    sig = site_signal(sc, 0)
    week = load_zone(zone, 2020).loc["2020-06-01":"2020-06-07"]
    assert len(week) == 168
    assert sig.times_s[0] == 0.0 and sig.end_s == 168 * 3600.0 and len(sig) == 168
    np.testing.assert_array_equal(sig.values_g_per_kwh, week.to_numpy())
    mean = sig.mean(0.0, sig.end_s)
    assert week.min() <= mean <= week.max()
    assert mean == pytest.approx(week.mean(), rel=1e-12)


def test_zone_year_defaults_to_the_start_year_else_the_latest_and_unknown_zones_fail():
    sig_2019 = site_signal(scenario({"zone": "DE"}, start="2019-06-01T00:00:00Z"), 0)
    assert sig_2019.value_at(0.0) == load_zone("DE", 2019)[pd.Timestamp("2019-06-01", tz="UTC")]
    # 2023 is not in the catalog: with years = "align", the latest year, 2020, aligned to the
    # same weekday (day 156 of 2020 is Thursday 4 June; the nearest Monday is 1 June).
    sc_2023 = scenario({"zone": "DE"}, start="2023-06-05T00:00:00Z", years="align")
    sig_2023 = site_signal(sc_2023, 0)
    assert sig_2023.value_at(0.0) == load_zone("DE", 2020)[pd.Timestamp("2020-06-01", tz="UTC")]
    with pytest.raises(ScenarioError, match=r"^sites\[0\]\.carbon\.zone: unknown zone 'XX'"):
        site_signal(scenario({"zone": "XX"}), 0)
    assert site_signal(scenario({"zone": "DE", "year": 2020}), 0).kind == "average"


def test_a_scenario_running_past_the_catalog_years_names_the_missing_year():
    sc = scenario({"zone": "FR"}, start="2020-12-31T00:00:00Z", duration_h=48)
    with pytest.raises(
        ScenarioError, match=r"zone FR: the scenario needs .* has 2017-2020, not 2021"
    ):
        site_signal(sc, 0)


def test_constant_and_file_sources(tmp_path):
    sig = site_signal(scenario({"constant_g_per_kwh": 250.0, "kind": "marginal"}), 0)
    assert (sig.value_at(1000.0), sig.end_s, sig.kind) == (250.0, 168 * 3600.0, "marginal")

    p = tmp_path / "trace.csv"
    p.write_text("time,ci\n2020-06-01 02:00,0.2\n2020-06-01 03:00,0.3\n2020-06-01 04:00,0.4\n")
    sc = scenario(
        {
            "file": str(p),
            "time_column": "time",
            "column": "ci",
            "unit": "kg/kWh",
            "timezone": "Europe/Berlin",
        },
        start="2020-06-01T00:00:00Z",
        duration_h=3,
    )
    sig = site_signal(sc, 0)
    assert sig.times_s.tolist() == [0.0, 3600.0, 7200.0]
    assert sig.values_g_per_kwh.tolist() == pytest.approx([200.0, 300.0, 400.0])

    sc = scenario(
        {"file": str(p), "time_column": "time", "column": "ci"},
        start="2020-06-01T00:00:00Z",
        duration_h=3,
    )  # read as UTC: starts at 02:00
    with pytest.raises(
        ScenarioError,
        match=r"^sites\[0\]\.carbon \(file .*trace\.csv\): "
        r"trace starts 2020-06-01T02:00Z",
    ):
        site_signal(sc, 0)


# --- load_trace_csv ------------------------------------------------------------------------


def write(tmp_path, text: str, name: str = "trace.csv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "unit, raw, expected",
    [("g/kWh", "250", 250.0), ("kg/kWh", "0.25", 250.0), ("lbs/MWh", "1000", 453.59237)],
)
def test_units_are_converted_to_g_per_kwh(tmp_path, unit, raw, expected):
    p = write(
        tmp_path, f"timestamp,carbon_intensity\n2020-01-01 00:00,{raw}\n2020-01-01 01:00,{raw}\n"
    )
    s = load_trace_csv(p, unit=unit)
    assert s.name == "carbon_intensity_g_per_kwh"
    assert s.tolist() == pytest.approx([expected, expected], rel=1e-12)


def test_naive_utc_and_offset_timestamps(tmp_path):
    p = write(tmp_path, "timestamp,carbon_intensity\n2020-01-01 00:00:00,1\n2020-01-01T00:30,2\n")
    s = load_trace_csv(p)
    assert s.index.tolist() == [utc(2020, 1, 1), utc(2020, 1, 1, 0, 30)]
    assert str(s.index.tz) == "UTC"

    p = write(
        tmp_path,
        "timestamp,carbon_intensity\n2020-06-01T02:00:00+02:00,1\n"
        "2020-06-01T01:00Z,2\n2020-06-01T03:30:00+02:00,3\n",
    )
    # offsets win over the `timezone` argument
    assert load_trace_csv(p, timezone="America/New_York").index.tolist() == [
        utc(2020, 6, 1, 0),
        utc(2020, 6, 1, 1),
        utc(2020, 6, 1, 1, 30),
    ]


def test_naive_local_timestamps_in_summer_and_winter(tmp_path):
    p = write(tmp_path, "timestamp,carbon_intensity\n2020-01-15 12:00,1\n2020-07-15 12:00,2\n")
    assert load_trace_csv(p, timezone="Europe/Berlin").index.tolist() == [
        utc(2020, 1, 15, 11),
        utc(2020, 7, 15, 10),
    ]
    assert load_trace_csv(p, timezone="America/Los_Angeles").index.tolist() == [
        utc(2020, 1, 15, 20),
        utc(2020, 7, 15, 19),
    ]


def test_repeated_wall_times_when_clocks_go_back_are_first_summer_then_winter(tmp_path):
    # Europe/Berlin, 2020-10-25: 03:00 CEST -> 02:00 CET; 02:00..02:59 happen twice.
    p = write(
        tmp_path,
        "timestamp,carbon_intensity\n"
        "2020-10-25 01:30,1\n2020-10-25 02:00,2\n2020-10-25 02:30,3\n"
        "2020-10-25 02:00,4\n2020-10-25 02:30,5\n2020-10-25 03:00,6\n",
    )
    s = load_trace_csv(p, timezone="Europe/Berlin")
    start = utc(2020, 10, 24, 23, 30)
    assert s.index.tolist() == [start + timedelta(minutes=30 * k) for k in range(6)]
    assert s.tolist() == [1, 2, 3, 4, 5, 6]


def test_skipped_wall_times_when_clocks_go_forward_use_the_offset_before(tmp_path):
    # Europe/Berlin, 2020-03-29: 02:00 CET -> 03:00 CEST; 02:30 does not exist.
    p = write(
        tmp_path,
        "timestamp,carbon_intensity\n2020-03-29 01:30,1\n2020-03-29 02:30,2\n2020-03-29 04:00,3\n",
    )
    assert load_trace_csv(p, timezone="Europe/Berlin").index.tolist() == [
        utc(2020, 3, 29, 0, 30),
        utc(2020, 3, 29, 1, 30),
        utc(2020, 3, 29, 2, 0),
    ]


def test_other_columns_gzip_bom_and_blank_lines_are_fine(tmp_path):
    text = (
        "\ufeffzone,Time,Carbon Intensity\n\nDE,2020-01-01 00:00,300\nDE,2020-01-01 01:00,310\n\n"
    )
    p = tmp_path / "t.csv.gz"
    p.write_bytes(gzip.compress(text.encode("utf-8")))
    s = load_trace_csv(p, column="Carbon Intensity", time_column="Time")
    assert s.tolist() == [300.0, 310.0]


MALFORMED = [
    # (case, file text, kwargs, expected "file:line" suffix and message fragment)
    (
        "missing column",
        "time,value\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n",
        {},
        ":1:",
        "no column 'timestamp'; the columns are: 'time', 'value'",
    ),
    (
        "non-numeric",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 01:00,n/a\n",
        {},
        ":3:",
        "carbon_intensity is not a number: 'n/a'",
    ),
    (
        "empty value",
        "timestamp,carbon_intensity\n2020-01-01 00:00,\n2020-01-01 01:00,1\n",
        {},
        ":2:",
        "is not a number: ''",
    ),
    (
        "negative",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n2020-01-01 02:00,-5\n",
        {},
        ":4:",
        "carbon_intensity must be >= 0, got -5",
    ),
    (
        "bad timestamp",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-13-01 01:00,2\n",
        {},
        ":3:",
        "timestamp is not an ISO 8601 timestamp: '2020-13-01 01:00'",
    ),
    (
        "unsorted",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 02:00,2\n2020-01-01 01:00,3\n",
        {},
        ":4:",
        "'2020-01-01 01:00' is earlier than the timestamp on line 3",
    ),
    (
        "duplicated",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 00:00,2\n",
        {},
        ":3:",
        "duplicates the timestamp on line 2",
    ),
    (
        "duplicated in UTC",
        "timestamp,carbon_intensity\n2020-01-01T01:00+01:00,1\n2020-01-01T00:00Z,2\n",
        {},
        ":3:",
        "duplicates the timestamp on line 2",
    ),
    (
        "one row",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n",
        {},
        ":2:",
        "at least 2 data rows, got 1",
    ),
    ("no rows", "timestamp,carbon_intensity\n", {}, ":1:", "at least 2 data rows, got 0"),
    (
        "unknown time zone",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n",
        {"timezone": "Europe/Berlinn"},
        ":2:",
        "unknown time zone 'Europe/Berlinn'",
    ),
    (
        "mixed offsets",
        "timestamp,carbon_intensity\n2020-01-01T00:00Z,1\n2020-01-01 01:00,2\n",
        {},
        ":3:",
        "lacks a UTC offset, unlike line 2",
    ),
    (
        "ragged row",
        "timestamp,carbon_intensity\n2020-01-01 00:00,1\n2020-01-01 01:00,2,3\n",
        {},
        ":3:",
        "expected 2 fields like the header, got 3",
    ),
]


@pytest.mark.parametrize(
    "case, text, kwargs, where, fragment", MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_traces_name_file_line_and_value(tmp_path, case, text, kwargs, where, fragment):
    p = write(tmp_path, text, name="bad_trace.csv")
    with pytest.raises(TraceError) as e:
        load_trace_csv(p, **kwargs)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"bad_trace.csv{where}" in msg
    assert fragment in msg


def test_a_missing_file_is_a_trace_error_naming_it(tmp_path):
    with pytest.raises(TraceError, match=r"nope\.csv: cannot read trace file"):
        load_trace_csv(tmp_path / "nope.csv")


def test_trace_errors_from_a_scenario_file_propagate_unchanged(tmp_path):
    p = write(tmp_path, "timestamp,carbon_intensity\n2020-06-01 00:00,x\n2020-06-01 01:00,1\n")
    with pytest.raises(TraceError, match=r"trace\.csv:2: carbon_intensity is not a number"):
        site_signal(scenario({"file": str(p)}), 0)


# --- Forecaster ----------------------------------------------------------------------------


def test_a_perfect_forecast_is_the_truth_over_the_window():
    sig = random_signal(5)
    f = Forecaster(ForecastConfig(model="perfect"), np.random.default_rng(0))
    now = float(sig.times_s[20]) + 10.0
    horizon = 24 * 3600.0
    times, values = f.forecast(sig, now, horizon)
    inside = sig.breakpoints_between(now, now + horizon)
    assert times.tolist() == [now, *inside.tolist()]
    assert values.tolist() == [sig.value_at(t) for t in times]
    values[0] = -1.0  # a fresh array: the policy cannot alter the signal
    assert sig.value_at(now) >= 0


def test_a_forecast_stops_at_the_end_of_the_signal():
    sig = CarbonSignal([0.0, 10.0, 20.0], [1.0, 2.0, 3.0], end_s=30.0)
    f = Forecaster(ForecastConfig(), np.random.default_rng(0))
    times, values = f.forecast(sig, 15.0, 1000.0)
    assert (times.tolist(), values.tolist()) == ([15.0, 20.0], [2.0, 3.0])
    times, values = f.forecast(sig, 30.0, 1000.0)
    assert times.size == 0 and values.size == 0


def test_a_gaussian_forecast_is_reproducible_noisy_and_sized_by_sigma_frac():
    rng = np.random.default_rng(9)
    n = 20000
    sig = CarbonSignal(np.arange(n) * 3600.0, rng.uniform(200, 400, n), end_s=n * 3600.0)
    cfg = ForecastConfig(model="gaussian", sigma_frac=0.1)
    horizon = n * 3600.0

    t1, v1 = Forecaster(cfg, np.random.default_rng(42)).forecast(sig, 0.0, horizon)
    t2, v2 = Forecaster(cfg, np.random.default_rng(42)).forecast(sig, 0.0, horizon)
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(t1, sig.times_s)

    truth = sig.values_g_per_kwh
    assert not np.allclose(v1, truth)
    err = v1 - truth
    expected_sigma = 0.1 * sig.mean(0.0, horizon)
    assert err.std() == pytest.approx(expected_sigma, rel=0.03)
    assert abs(err.mean()) < 3 * expected_sigma / math.sqrt(n) + 1e-9

    # a forecast is a function of its issue time: asking again at the same instant gives the
    # same forecast (noise cannot be averaged away); a later issue time draws new noise
    f = Forecaster(cfg, np.random.default_rng(42))
    _, v3 = f.forecast(sig, 0.0, 3600.0 * 10)
    assert np.array_equal(f.forecast(sig, 0.0, 3600.0 * 10)[1], v3)
    assert not np.array_equal(f.forecast(sig, 1.0, 3600.0 * 10)[1], v3)


def test_gaussian_forecasts_never_go_negative():
    sig = CarbonSignal(np.arange(1000) * 60.0, np.full(1000, 10.0), end_s=60000.0)
    f = Forecaster(ForecastConfig(model="gaussian", sigma_frac=3.0), np.random.default_rng(1))
    _, values = f.forecast(sig, 0.0, 60000.0)
    assert values.min() == 0.0 and values.max() > 10.0


@given(
    st.lists(st.floats(0, 900), min_size=3, max_size=40),
    st.floats(-3600, 0),
    st.floats(1, 7200),
    st.lists(st.floats(0, 1), min_size=2, max_size=2),
)
def test_a_regular_grid_finds_steps_in_constant_time_and_integrates_exactly(
    values, t0, step, fractions
):
    """The O(1) lookup on a regular grid finds the same steps as bisect, and integrals
    equal the sum of value x overlap over the steps."""
    times = [t0 + k * step for k in range(len(values))]
    end = times[-1] + step
    regular = CarbonSignal(times, values, end)
    assert regular._step_s
    a, b = sorted(min(end, times[0] + f * (end - times[0])) for f in fractions)  # rounding
    for t in (a, b, *times):
        assert regular.step_index(t) == bisect.bisect_right(times, t) - 1
    knots = [*times, end]
    overlap_sum = sum(
        v * max(0.0, min(b, knots[k + 1]) - max(a, knots[k])) for k, v in enumerate(values)
    )
    assert regular.integral(a, b) == pytest.approx(overlap_sum, rel=1e-9, abs=1e-6)
