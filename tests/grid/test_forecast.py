"""Forecasts (`sim.grid.forecast`): the models, their determinism, and the calibration of the
`calibrated` model against real issued forecasts at short leads (WattTime MOER, CAISO North,
2023); test_forecast_day_ahead.py checks it against the GB 48-h forecasts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pandas as pd
import pytest

import sim
from sim.api import Start
from sim.config.runtime import ForecastConfig
from sim.errors import ScenarioError
from sim.grid import CarbonSignal, Forecaster
from sim.grid.forecast import DAY_S, shipped_calibration
from sim.grid.issued_forecasts import Replay, load_issued_forecasts
from tests.conftest import make_scenario, site
from tests.grid.archives import issued_archive, watttime_archive

HOUR = 3600.0


def hourly(values, start_s: float = 0.0) -> CarbonSignal:
    values = np.asarray(values, dtype=float)
    times = start_s + np.arange(values.size) * HOUR
    return CarbonSignal(times, values, end_s=times[-1] + HOUR)


def noisy_signal(n_hours: int = 24 * 60, seed: int = 3) -> CarbonSignal:
    rng = np.random.default_rng(seed)
    day = 300 + 100 * np.sin(np.arange(n_hours) * 2 * np.pi / 24)
    return hourly(day + rng.normal(0, 20, n_hours))


def forecaster(model: str = "calibrated", seed: int = 0, **cfg) -> Forecaster:
    return Forecaster(ForecastConfig(model=model, **cfg), np.random.default_rng(seed))


# --- the four models -------------------------------------------------------------------------


def test_a_perfect_forecast_is_the_truth():
    sig = noisy_signal()
    now = 5 * HOUR + 600.0
    times, values = forecaster("perfect").forecast(sig, now, 24 * HOUR)
    assert times.tolist() == [now, *(HOUR * np.arange(6, 30)).tolist()]
    assert values.tolist() == [sig.value_at(t) for t in times]


def test_persistence_is_the_value_24_h_earlier_and_the_first_value_before_the_signal():
    sig = noisy_signal()
    f = forecaster("persistence")
    now = 3 * 24 * HOUR + 1800.0
    times, values = f.forecast(sig, now, 30 * HOUR)
    assert values.tolist() == [sig.value_at(t - DAY_S) for t in times]
    # in the signal's first day there is no yesterday: the earliest value stands in
    times, values = f.forecast(sig, 2 * HOUR, 30 * HOUR)
    first = float(sig.values_g_per_kwh[0])
    assert values[times < DAY_S].tolist() == [first] * int(np.sum(times < DAY_S))
    assert values[-1] == sig.value_at(times[-1] - DAY_S)


def test_a_gaussian_forecast_has_sigma_frac_times_the_signal_mean():
    sig = hourly(np.full(2000, 300.0))
    f = forecaster("gaussian", sigma_frac=0.1)
    err = np.concatenate([f.forecast(sig, k * HOUR, 100 * HOUR)[1] - 300.0 for k in range(20)])
    assert err.std() == pytest.approx(30.0, rel=0.05)


def test_calibrated_keeps_the_current_step_and_adds_error_after_it():
    sig = noisy_signal()
    now = 10 * HOUR + 1234.0
    times, values = forecaster().forecast(sig, now, 12 * HOUR)
    assert values[0] == sig.value_at(now)  # the policy already sees the current intensity
    truth = np.array([sig.value_at(t) for t in times])
    assert np.all(values[1:] != truth[1:]) and np.all(values >= 0)


def test_scale_sizes_the_calibrated_error_and_zero_is_the_truth():
    sig = noisy_signal()
    truth = forecaster("perfect").forecast(sig, 7 * HOUR, 24 * HOUR)[1]
    _, v1 = forecaster().forecast(sig, 7 * HOUR, 24 * HOUR)
    _, half = forecaster(scale=0.5).forecast(sig, 7 * HOUR, 24 * HOUR)
    _, v0 = forecaster(scale=0.0).forecast(sig, 7 * HOUR, 24 * HOUR)
    assert v0.tolist() == truth.tolist()
    unclipped = v1 > 0
    np.testing.assert_allclose((half - truth)[unclipped], 0.5 * (v1 - truth)[unclipped])


# --- determinism: seeded, counter-based ------------------------------------------------------


@pytest.mark.parametrize("cfg", [{"model": "gaussian", "sigma_frac": 0.1}, {"model": "calibrated"}])
def test_same_seed_same_forecast_other_seed_other_forecast(cfg):
    sig = noisy_signal()
    a = Forecaster(ForecastConfig(**cfg), np.random.default_rng(7)).forecast(sig, HOUR, DAY_S)
    b = Forecaster(ForecastConfig(**cfg), np.random.default_rng(7)).forecast(sig, HOUR, DAY_S)
    c = Forecaster(ForecastConfig(**cfg), np.random.default_rng(8)).forecast(sig, HOUR, DAY_S)
    assert a[1].tolist() == b[1].tolist()
    assert not np.array_equal(a[1], c[1])


@pytest.mark.parametrize("cfg", [{"model": "gaussian", "sigma_frac": 0.1}, {"model": "calibrated"}])
def test_different_issue_times_draw_different_noise(cfg):
    sig = hourly(np.full(100, 300.0))
    f = Forecaster(ForecastConfig(**cfg), np.random.default_rng(0))
    _, a = f.forecast(sig, 3600.0, DAY_S - 1800.0)
    _, b = f.forecast(sig, 3600.5, DAY_S - 1800.0)  # same steps, half a second later
    assert a.size == b.size and not np.array_equal(a[1:], b[1:])


def test_a_forecast_depends_on_its_issue_time_only_not_on_earlier_calls():
    sig = noisy_signal()
    f, g = forecaster(seed=5), forecaster(seed=5)
    for t in np.arange(0, 40) * 977.0:  # f is asked often, g only at the end
        f.forecast(sig, t, DAY_S)
    assert (
        f.forecast(sig, 40 * 977.0, DAY_S)[1].tolist()
        == g.forecast(sig, 40 * 977.0, DAY_S)[1].tolist()
    )
    # asking again returns the same forecast, and a longer horizon extends a shorter one
    short = g.forecast(sig, 40 * 977.0, 6 * HOUR)[1]
    assert short.tolist() == g.forecast(sig, 40 * 977.0, DAY_S)[1][: short.size].tolist()


def test_the_forecaster_takes_one_draw_from_its_stream_and_no_more():
    rng = np.random.default_rng(11)
    f = Forecaster(ForecastConfig(model="calibrated"), rng)
    state = rng.bit_generator.state
    for t in range(50):
        f.forecast(noisy_signal(), t * 1000.0, DAY_S)
    assert rng.bit_generator.state == state


def test_the_forecast_a_policy_sees_does_not_depend_on_how_often_it_asks(tmp_path):
    @dataclass
    class Probe:
        asks: int
        seen: dict = field(default_factory=dict)

        def decide(self, state):
            for _ in range(self.asks):
                fc = state.forecast("a", 6 * HOUR)
            self.seen.setdefault(state.now_s, fc[1].tolist())
            return [Start(j, "a") for j in state.pending]

    jobs = [
        {"job_id": f"j{i}", "submit_time": 1000.0 * i, "gpus": 1, "work_gpu_h": 0.5}
        for i in range(5)
    ]
    trace = pd.DataFrame(
        {
            "timestamp": pd.date_range("2020-05-31", periods=96, freq="h"),
            "carbon_intensity": 300.0,
        }
    )
    trace.to_csv(tmp_path / "trace.csv", index=False)
    a = site(carbon={"file": str(tmp_path / "trace.csv")})
    runs = []
    for asks in (1, 3):
        scen = make_scenario(tmp_path, jobs, sites=[a], forecast={"model": "calibrated"})
        probe = Probe(asks)
        sim.simulate(scen, probe)
        runs.append(probe.seen)
    assert runs[0] == runs[1] and len(runs[0]) >= 5
    now, values = next(iter(runs[0].items()))
    assert values[0] == 300.0 and values[1:] != [300.0] * (len(values) - 1)


# --- shape of the calibrated error -----------------------------------------------------------


@cache
def model_errors_on(signal: CarbonSignal, leads: int, every: int = 1, seed: int = 0):
    """Relative errors (forecast - truth) / mean of forecasts issued at every `every`-th
    breakpoint of `signal`, by lead in steps 1..leads: an array (issues, leads)."""
    f = forecaster(seed=seed)
    t, v = signal.times_s, signal.values_g_per_kwh
    mean = signal.mean(float(t[0]), signal.end_s)
    horizon = float(t[leads + 1] - t[0]) - 1.0  # regular steps: exactly `leads` steps ahead
    rows = [
        (f.forecast(signal, float(t[k]), horizon)[1][1:] - v[k + 1 : k + 1 + leads]) / mean
        for k in range(0, len(t) - leads - 1, every)
    ]
    return np.array(rows)


def test_calibrated_error_grows_with_horizon_as_fitted():
    sig = hourly(np.full(24 * 400, 300.0))
    err = model_errors_on(sig, 24, every=5)
    mae = np.abs(err).mean(axis=0)
    cal = shipped_calibration()
    assert mae[0] < mae[5] < mae[23]  # 1 h < 6 h < 24 h
    np.testing.assert_allclose(mae[[0, 5, 23]], cal.mae(np.array([1.0, 6.0, 24.0])), rtol=0.1)
    assert abs(err.mean()) < 0.02  # unbiased


def test_forecasts_of_one_target_issued_apart_share_most_of_their_error():
    sig = hourly(np.full(24 * 400, 300.0))
    err = model_errors_on(sig, 24, every=1)
    # the issue at k (lead 2 h) and at k + 1 (lead 1 h) forecast the same target
    r = np.corrcoef(err[:-1, 1], err[1:, 0])[0, 1]
    assert r == pytest.approx(shipped_calibration().target_share, abs=0.05)


# --- calibration against the real issued forecasts -------------------------------------------


@pytest.fixture(scope="module")
def watttime():
    actual, fc = watttime_archive()
    fc["lead_min"] = ((fc["target"] - fc["issue"]).dt.total_seconds() / 60).round().astype(int)
    fc["actual"] = actual.reindex(fc["target"]).to_numpy()
    longest_by_issue = fc.groupby("issue")["lead_min"].max()
    fc = fc.dropna(subset=["actual"])  # the last hour's targets are past the actuals' end
    fc["e"] = (fc["value"] - fc["actual"]) / actual.mean()
    t = (actual.index - actual.index[0]).total_seconds().to_numpy(dtype=float)
    signal = CarbonSignal(t, actual.to_numpy(dtype=float), end_s=t[-1] + 300.0)
    return fc, signal, longest_by_issue


def test_the_real_forecasts_reach_65_min_only(watttime):
    """These real forecasts stop at 65 min (a handful of the ~8,900 issued forecasts reach
    70-85 min); longer leads are checked on the GB archive (test_forecast_day_ahead.py). If
    this fails, the data changed: extend the calibration test to the new horizons."""
    longest_by_issue = watttime[2]
    assert longest_by_issue.min() == 65
    assert (longest_by_issue > 65).sum() < 10 and longest_by_issue.max() < 6 * 60


@pytest.mark.parametrize("lead_min", [5, 30, 60, 65])  # 60: the 1 h of the issue; 65: longest
def test_calibrated_mae_by_horizon_is_within_20_percent_of_the_real_forecasts(watttime, lead_min):
    fc, signal, _ = watttime
    real = fc.loc[fc["lead_min"] == lead_min, "e"].abs().mean()
    model = np.abs(model_errors_on(signal, 13)[:, lead_min // 5 - 1]).mean()
    assert model == pytest.approx(real, rel=0.20), f"lead {lead_min} min"


def test_calibrated_errors_correlate_across_adjacent_leads_like_the_real_ones(watttime):
    fc, signal, _ = watttime
    real = fc[fc["lead_min"] <= 65].pivot(index="issue", columns="lead_min", values="e").dropna()
    model = pd.DataFrame(model_errors_on(signal, 13), columns=real.columns)
    for a, b in [(5, 10), (30, 35), (60, 65)]:
        r_real = real[a].corr(real[b], method="spearman")
        r_model = model[a].corr(model[b], method="spearman")
        assert r_model > 0.7 and r_model == pytest.approx(r_real, abs=0.07), (a, b)


def test_the_shipped_calibration_names_its_data_and_extent():
    cal = shipped_calibration()
    assert cal.max_lead_h == 47.5  # the GB archive's longest lead
    assert 0 < cal.sigma_exponent < 1 and 0.5 < cal.target_share < 1
    assert cal.mae(1.0) == pytest.approx(
        cal.sigma_inf
        * -math.expm1(-((1 / cal.lead_sat_h) ** cal.sigma_exponent))
        * math.sqrt(2 / math.pi)
    )


# --- configuration and speed -----------------------------------------------------------------


@pytest.mark.parametrize(
    "forecast, match",
    [
        ({"model": "perfect", "sigma_frac": 0.1}, r"forecast: sigma_frac is only meaningful"),
        ({"model": "calibrated", "sigma_frac": 0.1}, r"sigma_frac is only meaningful"),
        ({"model": "gaussian"}, r"forecast: sigma_frac is required"),
        ({"model": "gaussian", "sigma_frac": -1}, r"forecast\.sigma_frac: .*greater than"),
        ({"model": "gaussian", "sigma_frac": 0.1, "scale": 2}, r"scale is only meaningful"),
        ({"model": "calibrated", "scale": -0.5}, r"forecast\.scale: .*greater than"),
        ({"model": "oracle"}, r"forecast\.model"),
        ({"model": "perfect", "horizon": 3}, r"forecast\.horizon: unknown key"),
    ],
)
def test_bad_forecast_config_is_an_error_naming_the_key(tmp_path, forecast, match):
    with pytest.raises(ScenarioError, match=match):
        make_scenario(tmp_path, forecast=forecast)


def test_good_forecast_configs():
    assert ForecastConfig().model == "perfect"
    assert ForecastConfig(model="calibrated").scale is None  # means 1
    assert ForecastConfig(model="calibrated", scale=0).scale == 0
    assert ForecastConfig(model="persistence").model == "persistence"


# --- the forecast version ------------------------------------------------------------------


def _versions_and_forecasts(f: Forecaster, signal: CarbonSignal, end_s: float):
    """(issue time, version, forecast to end_s) at times between and on the breakpoints."""
    times = np.arange(0.0, 30 * HOUR, 0.3 * HOUR)  # every 18 min: on each hour every 3 h
    return [(t, f.version(signal, t), f.forecast(signal, t, end_s - t)) for t in times]


@pytest.mark.parametrize(
    "model, cfg, replayed",
    [
        ("perfect", {}, False),
        ("persistence", {}, False),
        ("gaussian", {"sigma_frac": 0.2}, False),
        ("calibrated", {}, False),
        ("perfect", {}, True),
        ("persistence", {}, True),
    ],
)
def test_while_the_version_holds_the_later_steps_of_a_forecast_are_those_issued_earlier(
    model, cfg, replayed, tmp_path
):
    """`Forecaster.version`: two forecasts issued at times with the same version have the
    same breakpoints and values after the later one's first step (to a common end); it never
    changes for perfect and persistence forecasts, at each issue of a replayed archive with
    the perfect model, and at every issue time otherwise (where forecasts do differ)."""
    f, signal = forecaster(model, **cfg), noisy_signal()
    if replayed:
        issued_archive(tmp_path / "issued.csv")
        archive = load_issued_forecasts(tmp_path / "issued.csv")
        start = pd.Timestamp("2020-06-01T00:00Z")
        f.replay(Replay(archive, signal, "a", start, "model", "sites[0].forecast"))
    seen = _versions_and_forecasts(f, signal, end_s=40 * HOUR)
    for a, (t0, v0, (times0, values0)) in enumerate(seen):
        for t1, v1, (times1, values1) in seen[a + 1 :]:
            k = np.searchsorted(times0, t1, side="right")  # times0[k:] are after t1
            same = times1[1:].tolist() == times0[k:].tolist() and np.array_equal(
                values1[1:], values0[k:]
            )
            if v1 == v0:
                assert same, (t0, t1)
            elif not replayed:
                assert not same  # a bump only where forecasts differ
    versions = [v for _, v, _ in seen]
    if model in ("perfect", "persistence") and not replayed:
        assert set(versions) == {0}
    elif model == "perfect":
        assert len(set(versions)) == 16  # one per issue, and one before the first
    else:
        assert len(set(versions)) == len(seen)
