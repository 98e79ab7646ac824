"""Replayed issued forecasts (`sim.grid.issued_forecasts`): the archive loader on good and
malformed files, what a policy sees at each decision, the fallback rules, and the example
scenario on the GB archive."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

import sim
from sim.api import Start
from sim.config.runtime import ForecastConfig
from sim.errors import ScenarioError, TraceError
from sim.grid import CarbonSignal, Forecaster
from sim.grid.issued_forecasts import Replay, load_issued_forecasts
from tests.conftest import REPO, SHARED_DATA, make_scenario, run_cli, site

HOUR = 3600.0
START = pd.Timestamp("2020-06-01T00:00Z")

# Two issues, hourly targets: 00:00 forecasts 00:00..03:00, 02:00 forecasts 02:00..05:00.
GOOD = """issued_at,target_start,value
2020-06-01T00:00Z,2020-06-01T00:00Z,100
2020-06-01T00:00Z,2020-06-01T01:00Z,110
2020-06-01T00:00Z,2020-06-01T02:00Z,120
2020-06-01T00:00Z,2020-06-01T03:00Z,130
2020-06-01T02:00Z,2020-06-01T02:00Z,200
2020-06-01T02:00Z,2020-06-01T03:00Z,210
2020-06-01T02:00Z,2020-06-01T04:00Z,220
2020-06-01T02:00Z,2020-06-01T05:00Z,230
"""


def archive_file(tmp_path, text: str = GOOD, name: str = "issued.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def signal(hours: int = 8, value: float = 50.0) -> CarbonSignal:
    times = np.arange(hours) * HOUR
    return CarbonSignal(times, np.full(hours, value), end_s=hours * HOUR)


def replay(tmp_path, fallback: str = "error", text: str = GOOD) -> Replay:
    archive = load_issued_forecasts(archive_file(tmp_path, text))
    return Replay(archive, signal(), "a", START, fallback, "sites[0].forecast")


def truth_model(sig, now_s, horizon_s):
    return Forecaster(ForecastConfig(), np.random.default_rng(0)).model_forecast(
        sig, now_s, horizon_s
    )


def test_a_good_archive_loads_as_issues_of_targets(tmp_path):
    a = load_issued_forecasts(archive_file(tmp_path))
    assert a.issued_ns.size == 2 and a.offsets.tolist() == [0, 4, 8]
    assert a.values_g_per_kwh.tolist() == [100, 110, 120, 130, 200, 210, 220, 230]
    assert a.target_step_ns == 3600 * 10**9


def test_units_convert_to_g_per_kwh(tmp_path):
    text = "\n".join(
        f"{line.rsplit(',', 1)[0]},{float(line.rsplit(',', 1)[1]) / 1000}" if i else line
        for i, line in enumerate(GOOD.strip().splitlines())
    )
    kg = load_issued_forecasts(archive_file(tmp_path, text, "kg.csv"), unit="kg/kWh")
    assert kg.values_g_per_kwh[0] == pytest.approx(100.0)
    lbs = load_issued_forecasts(archive_file(tmp_path), unit="lbs/MWh")
    assert lbs.values_g_per_kwh[0] == pytest.approx(45.359237)


def test_the_policy_sees_the_latest_issue_at_or_before_now(tmp_path):
    r = replay(tmp_path)
    # 01:30: the 00:00 issue; now is the truth (50), then its targets 02:00, 03:00
    times, values = r.forecast(1.5 * HOUR, 2.5 * HOUR, truth_model)
    assert times.tolist() == [1.5 * HOUR, 2 * HOUR, 3 * HOUR]
    assert values.tolist() == [50.0, 120.0, 130.0]
    # 02:00 exactly: the 02:00 issue is in force
    times, values = r.forecast(2 * HOUR, 3.5 * HOUR, truth_model)
    assert times.tolist() == [2 * HOUR, 3 * HOUR, 4 * HOUR, 5 * HOUR]
    assert values.tolist() == [50.0, 210.0, 220.0, 230.0]
    assert r.record()["forecasts"] == 2 and r.record()["forecasts_with_fallback"] == 0


def test_an_uncovered_window_is_an_error_naming_the_file_and_times(tmp_path):
    r = replay(tmp_path)
    with pytest.raises(
        ScenarioError,
        match=r"issued\.csv: a forecast asked at 2020-06-01T01:00Z up to 2020-06-01T05:00Z, but "
        r"the latest forecast, issued 2020-06-01T00:00Z, covers only up to 2020-06-01T04:00Z"
        r".*fallback = \"model\"",
    ):
        r.forecast(1 * HOUR, 4 * HOUR, truth_model)


def test_the_model_fallback_fills_the_uncovered_part_and_is_counted(tmp_path):
    r = replay(tmp_path, fallback="model")
    times, values = r.forecast(3 * HOUR, 4 * HOUR, truth_model)  # covered to 06:00
    assert times.tolist() == [3 * HOUR, 4 * HOUR, 5 * HOUR, 6 * HOUR]
    assert values.tolist() == [50.0, 220.0, 230.0, 50.0]
    rec = r.record()
    assert rec["forecasts_with_fallback"] == 1 and rec["first_fallback_at"] == "2020-06-01T03:00Z"


def test_before_the_first_issue_the_model_fallback_forecasts_it_all(tmp_path):
    late = GOOD.replace("2020-06-01T00:00Z,2020-06-01T0", "2020-06-01T01:00Z,2020-06-01T0")
    late = late.replace("2020-06-01T01:00Z,2020-06-01T00:00Z,100\n", "")
    r = replay(tmp_path, fallback="model", text=late)
    times, values = r.forecast(0.5 * HOUR, 2 * HOUR, truth_model)
    assert times.tolist() == [0.5 * HOUR, HOUR, 2 * HOUR] and values.tolist() == [50.0] * 3


def test_after_the_latest_issues_targets_the_model_fallback_forecasts_it_all(tmp_path):
    r = replay(tmp_path, fallback="model")  # the archive's targets end at 06:00
    times, values = r.forecast(7 * HOUR, 4 * HOUR, truth_model)
    assert times.tolist() == [7 * HOUR] and values.tolist() == [50.0]  # nothing from before now


@pytest.mark.parametrize(
    "text, message",
    [
        ("issued_at,value\n", r"issued\.csv:1: no column 'target_start'"),
        (GOOD.replace("value", "forecast"), r"issued\.csv:1: no column 'value'"),
        (GOOD.replace(",110\n", ",110,7\n"), r"issued\.csv:3: expected 3 fields"),
        (GOOD.replace(",110\n", ",abc\n"), r"issued\.csv:3: value is not a number: 'abc'"),
        (GOOD.replace(",110\n", ",NaN\n"), r"issued\.csv:3: value is not a number"),
        (GOOD.replace(",110\n", ",-5\n"), r"issued\.csv:3: value must be >= 0, got -5"),
        (GOOD.replace(",110\n", ",9000\n"), r"issued\.csv:3: value must be at most 5,000"),
        (
            GOOD.replace("2020-06-01T00:00Z,2020-06-01T01:00Z", "2020-06-01T00:00Z,June 1"),
            r"issued\.csv:3: target_start is not an ISO 8601 timestamp: 'June 1'",
        ),
        (
            GOOD.replace(
                "2020-06-01T00:00Z,2020-06-01T02:00Z,120", "2020-06-01T00:00Z,2020-06-01T01:00Z,120"
            ),  # noqa: E501
            r"issued\.csv:4: duplicate \(issued_at, target_start\) pair \(2020-06-01T00:00Z, 2020-06-01T01:00Z\), also on line 3",  # noqa: E501
        ),
        (
            GOOD.replace(
                "2020-06-01T00:00Z,2020-06-01T02:00Z,120", "2020-06-01T00:00Z,2020-06-01T00:30Z,120"
            ),  # noqa: E501
            r"issued\.csv:4: target_start 2020-06-01T00:30Z is earlier than on line 3 \(2020-06-01T01:00Z\); rows must be sorted",  # noqa: E501
        ),
        (
            GOOD.replace(
                "2020-06-01T02:00Z,2020-06-01T05:00Z", "2020-05-31T02:00Z,2020-06-01T05:00Z"
            ),  # noqa: E501
            r"issued\.csv:9: issued_at 2020-05-31T02:00Z is earlier than on line 8",
        ),
        (
            GOOD.replace(
                "2020-06-01T02:00Z,2020-06-01T02:00Z", "2020-06-01T02:00Z,2020-06-01T01:00Z"
            ),  # noqa: E501
            r"issued\.csv:6: target_start 2020-06-01T01:00Z is before its issued_at 2020-06-01T02:00Z",  # noqa: E501
        ),
    ],
)
def test_a_malformed_archive_is_one_error_naming_file_and_line(tmp_path, text, message):
    with pytest.raises(TraceError, match=message) as e:
        load_issued_forecasts(archive_file(tmp_path, text))
    assert "\n" not in str(e.value)


def test_an_unknown_unit_is_an_error(tmp_path):
    with pytest.raises(TraceError, match=r"issued\.csv: unknown unit 'g/MWh'"):
        load_issued_forecasts(archive_file(tmp_path), unit="g/MWh")


# --- in a run ------------------------------------------------------------------------------


@dataclass
class Probe:
    seen: dict = field(default_factory=dict)

    def decide(self, state):
        self.seen[state.now_s] = state.forecast("a", 3 * HOUR)
        return [Start(j, "a") for j in state.pending]


def test_a_policy_sees_the_replayed_forecast_and_meta_records_it(tmp_path):
    archive_file(tmp_path)
    jobs = [{"job_id": "j0", "submit_time": 1.5 * HOUR, "gpus": 1, "work_gpu_h": 0.5}]
    a = site(forecast={"file": "issued.csv", "fallback": "model"})
    scen = make_scenario(tmp_path, jobs, sites=[a], duration_h=6)
    probe = Probe()
    results = sim.simulate(scen, probe)
    times, values = probe.seen[1.5 * HOUR]
    # now: the site's true 300 g/kWh; then the 00:00 issue; from 04:00 the model (perfect)
    assert times.tolist() == [1.5 * HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert values.tolist() == [300.0, 120.0, 130.0, 300.0]
    rec = results.meta["forecast_replay"]["a"]
    assert rec["issues"] == 2 and rec["fallback"] == "model"
    assert rec["forecasts"] >= 1 and rec["forecasts_with_fallback"] >= 1


def test_with_a_decision_signal_the_archive_is_the_forecast_policies_see(tmp_path):
    archive_file(tmp_path)
    jobs = [{"job_id": "j0", "submit_time": 1.5 * HOUR, "gpus": 1, "work_gpu_h": 0.5}]
    a = site(
        forecast={"file": "issued.csv", "fallback": "model"},
        decision_carbon={"constant_g_per_kwh": 100.0},
    )
    probe = Probe()
    results = sim.simulate(make_scenario(tmp_path, jobs, sites=[a], duration_h=6), probe)
    times, values = probe.seen[1.5 * HOUR]
    assert times.tolist() == [1.5 * HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert values.tolist() == [100.0, 120.0, 130.0, 100.0]  # the decision signal around it
    assert results.meta["forecast_replay"]["a"]["forecasts"] >= 1


def test_without_an_archive_meta_records_no_replay(tmp_path):
    jobs = [{"job_id": "j0", "submit_time": 0.0, "gpus": 1, "work_gpu_h": 0.5}]
    results = sim.simulate(make_scenario(tmp_path, jobs, duration_h=2))
    assert results.meta["forecast_replay"] is None


def test_a_run_starting_before_the_archive_is_an_error_unless_the_model_may_fill(tmp_path):
    archive_file(tmp_path)
    a = site(forecast={"file": "issued.csv"})
    with pytest.raises(
        ScenarioError,
        match=r"sites\[0\]\.forecast: .*issued\.csv: the run starts 2020-05-31T00:00Z, before "
        r"the first forecast \(2020-06-01T00:00Z\)",
    ):
        sim.simulate(make_scenario(tmp_path, start="2020-05-31T00:00:00Z", sites=[a]))


@pytest.mark.parametrize(
    "forecast, match",
    [
        ({"file": "x.csv", "format": "json"}, r"sites\[0\]\.forecast\.format"),
        ({"file": "x.csv", "fallback": "perfect"}, r"sites\[0\]\.forecast\.fallback"),
        ({"file": "x.csv", "unit": "g/MWh"}, r"sites\[0\]\.forecast\.unit"),
        ({"fallback": "model"}, r"sites\[0\]\.forecast\.file"),
    ],
)
def test_bad_site_forecast_keys_are_errors_naming_the_key(tmp_path, forecast, match):
    with pytest.raises(ScenarioError, match=match):
        make_scenario(tmp_path, sites=[site(forecast=forecast)])


def test_the_uk_example_replays_the_archive_without_fallback(tmp_path, capsys):
    if not (SHARED_DATA / "uk-ci-forecasts").is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (checkout without ../shared)")
    code, out = run_cli(
        ["run", str(REPO / "scenarios/uk_issued_forecasts.toml"), "--out", str(tmp_path)], capsys
    )
    assert code == 0, out.err
    rec = json.loads((tmp_path / "meta.json").read_text())["forecast_replay"]["great_britain"]
    assert rec["issues"] == 655 and rec["forecasts"] > 0 and rec["forecasts_with_fallback"] == 0
