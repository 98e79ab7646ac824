"""Measured throughput tables (`[throughput]`) and prediction error (`[prediction_error]`).

A throughput table overrides the roofline speed of the pairs it lists, in the run itself.
A prediction error changes only what a policy is told (`state.estimate`, `state.runtime_s`,
`state.expected_ends`): the truth is unchanged, and the error is reproducible by seed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sim
from sim.api import Start
from sim.config.workload import HABITAT_AVERAGE_ERROR, PredictionErrorConfig
from sim.engine.prediction import draw_factors
from sim.errors import ScenarioError
from sim.testing import PolicyHarness
from sim.util.streams import STREAMS, seed_sequences
from tests.conftest import make_scenario, one_line_cli_error, site

H = 3600.0
TWO_MODELS = site(gpus=[{"model": "A100-80GB", "count": 4}, {"model": "H100-SXM", "count": 4}])


def jobs_of(n: int, work_gpu_h: float = 2.0, profile: str = "compute-bound") -> list[dict]:
    """`n` one-GPU jobs submitted an hour apart."""
    return [
        {"job_id": f"j{i}", "submit_time": i * H, "gpus": 1, "work_gpu_h": work_gpu_h}
        | {"profile": profile}
        for i in range(n)
    ]


def pending(scenario) -> PolicyHarness:
    """A harness of `scenario` at its first submission, no policy deciding."""
    return PolicyHarness(scenario).advance(0.0)


def told_runtimes_s(harness: PolicyHarness, model: str) -> list[float]:
    """Job j0's runtime on `model` at site a, as `runtime_s` and as `estimate` tell it."""
    job, state = harness.job("j0"), harness.state
    return [
        state.runtime_s(job, "a", gpu_model=model),
        state.estimate(job, "a", gpu_model=model)[0],
    ]


# --- prediction error ------------------------------------------------------------------------


def test_prediction_error_leaves_the_truth_unchanged(tmp_path):
    oracle = sim.simulate(make_scenario(tmp_path, jobs=jobs_of(12)))
    told = sim.simulate(
        make_scenario(tmp_path, jobs=jobs_of(12), prediction_error={"sigma_frac": 0.3})
    )
    columns = ["start_s", "end_s", "energy_kwh", "carbon_kg"]
    pd.testing.assert_frame_equal(told.jobs[columns], oracle.jobs[columns])
    for key in ("carbon_total_kg", "energy_it_kwh", "jobs_completed"):
        assert told.summary[key] == oracle.summary[key]


def test_a_policy_is_told_the_true_runtime_times_the_drawn_factor(tmp_path):
    kwargs = {"jobs": jobs_of(3), "sites": [TWO_MODELS]}
    oracle = pending(make_scenario(tmp_path, **kwargs))
    told = pending(make_scenario(tmp_path, prediction_error={"sigma_frac": 0.3}, **kwargs))
    prediction = told.engine.queries.prediction
    assert prediction is not None
    for model in ("A100-80GB", "H100-SXM"):
        factor = prediction.factor(0, model)
        assert factor != 1.0
        np.testing.assert_allclose(
            told_runtimes_s(told, model),
            np.array(told_runtimes_s(oracle, model)) * factor,
            rtol=1e-12,
        )
        # Energy of the told runtime at the true power: constant PUE, no hold.
        job = told.job("j0")
        told_kwh = told.state.estimate(job, "a", gpu_model=model)[1]
        true_kwh = oracle.state.estimate(oracle.job("j0"), "a", gpu_model=model)[1]
        assert told_kwh == pytest.approx(true_kwh * factor, rel=1e-12)


def test_expected_ends_carry_the_factor_of_the_running_model(tmp_path):
    scenario = make_scenario(tmp_path, jobs=jobs_of(1), prediction_error={"sigma_frac": 0.3})
    harness = pending(scenario)
    harness.apply([Start(harness.job("j0"), "a")])
    ends, gpus = harness.state.expected_ends("a", "A100-80GB")
    prediction = harness.engine.queries.prediction
    assert prediction is not None
    assert gpus == [1]
    assert ends == [pytest.approx(2.0 * H * prediction.factor(0, "A100-80GB"), rel=1e-12)]
    harness.advance(2.0 * H)
    assert harness.times("j0")[1] == pytest.approx(2.0 * H)  # the truth


def test_the_factors_are_reproducible_by_seed(tmp_path):
    def factors(seed: int) -> np.ndarray:
        scenario = make_scenario(
            tmp_path, jobs=jobs_of(5), seed=seed, prediction_error={"sigma_frac": 0.2}
        )
        return PolicyHarness(scenario).engine.queries.prediction.factors

    np.testing.assert_array_equal(factors(1), factors(1))
    assert not np.allclose(factors(1), factors(2))


def test_the_prediction_stream_comes_after_the_older_ones_and_moves_no_other_draw(tmp_path):
    older = STREAMS[: STREAMS.index("prediction")]
    before = np.random.SeedSequence(1).spawn(len(older))
    now = seed_sequences(1)
    for name, old in zip(older, before, strict=True):
        assert now[name].generate_state(4).tolist() == old.generate_state(4).tolist()
    synthetic = sim.simulate(make_scenario(tmp_path))
    with_error = sim.simulate(make_scenario(tmp_path, prediction_error={"sigma_frac": 0.3}))
    pd.testing.assert_frame_equal(synthetic.jobs, with_error.jobs)


@pytest.mark.parametrize("sigma", [0.05, HABITAT_AVERAGE_ERROR, 0.5])
def test_the_factors_are_lognormal_with_median_one_and_log_std_sigma(sigma: float):
    config = PredictionErrorConfig(sigma_frac=sigma)
    log_f = np.log(draw_factors(config, ["A100-80GB"], 40_000, np.random.default_rng(7)))
    assert np.std(log_f) == pytest.approx(sigma, rel=0.02)
    assert abs(np.median(log_f)) < 0.02 * sigma + 1e-3


def test_a_table_of_sigmas_per_model_leaves_unlisted_models_exact():
    config = PredictionErrorConfig(sigma_frac={"H100-SXM": 0.2})
    f = draw_factors(config, ["A100-80GB", "H100-SXM"], 100, np.random.default_rng(0))
    assert (f[:, 0] == 1.0).all()
    assert (f[:, 1] != 1.0).all()


def test_habitat_is_the_default_sigma():
    assert PredictionErrorConfig().sigma("A100-80GB") == HABITAT_AVERAGE_ERROR == 0.118


def test_sigma_zero_tells_the_truth_exactly(tmp_path):
    oracle = pending(make_scenario(tmp_path, jobs=jobs_of(2)))
    zero = pending(make_scenario(tmp_path, jobs=jobs_of(2), prediction_error={"sigma_frac": 0}))
    job = zero.job("j0")
    assert zero.state.estimate(job, "a") == oracle.state.estimate(oracle.job("j0"), "a")


def test_meta_records_the_settings(tmp_path):
    results = sim.simulate(
        make_scenario(tmp_path, jobs=jobs_of(1), prediction_error={"sigma_frac": "habitat"})
    )
    assert results.meta["prediction_error"]["sigma_by_model"] == {"A100-80GB": 0.118}
    assert results.meta["throughput_table"] is None
    assert sim.simulate(make_scenario(tmp_path, jobs=jobs_of(1))).meta["prediction_error"] is None


@pytest.mark.parametrize(
    ("sigma", "message"),
    [(-0.1, "greater than or equal to 0"), (3.0, "less than or equal to 2"), ({"X": 0.1}, "X")],
)
def test_a_bad_sigma_is_a_scenario_error(tmp_path, sigma, message):
    with pytest.raises(ScenarioError, match=message) as e:
        make_scenario(tmp_path, prediction_error={"sigma_frac": sigma})
    assert "\n" not in str(e.value)


# --- throughput tables -----------------------------------------------------------------------


def table_scenario(tmp_path, rows: str, jobs: list[dict]):
    path = tmp_path / "speeds.csv"
    path.write_text("profile,gpu_model,speed\n" + rows)
    return make_scenario(tmp_path, jobs=jobs, throughput={"file": str(path)})


def test_a_throughput_table_sets_the_speed_of_the_pairs_it_lists(tmp_path):
    jobs = jobs_of(1, work_gpu_h=3.0, profile="memory-bound") + [
        {"job_id": "c", "submit_time": 0, "gpus": 2, "work_gpu_h": 3.0, "profile": "mixed"}
    ]
    results = sim.simulate(table_scenario(tmp_path, "memory-bound,A100-80GB,0.6\n", jobs))
    runtime_s = (results.jobs.end_s - results.jobs.start_s).to_numpy()
    assert runtime_s[0] == pytest.approx(3.0 * H / (1 * 0.6))  # work / (gpus x table speed)
    assert runtime_s[1] == pytest.approx(
        3.0 * H / (2 * sim.models.hardware.speed("A100-80GB", "mixed"))
    )
    assert results.meta["throughput_table"] == str(tmp_path / "speeds.csv")


def test_every_speed_of_the_run_is_the_table_s(tmp_path):
    """The policy's reference speed, the slowdown's ideal runtime and the deadline check at
    submission all use the table's speed, as the engine does."""
    jobs = jobs_of(1, work_gpu_h=3.0, profile="memory-bound")
    jobs[0]["deadline"] = 3.0 * H / 0.6 - 60.0  # feasible at the roofline's speed, not the table's
    scenario = table_scenario(tmp_path, "memory-bound,A100-80GB,0.6\n", jobs)
    assert sim.models.hardware.speed("A100-80GB", "memory-bound") > 0.6
    assert pending(scenario).state.reference_speed("A100-80GB", "memory-bound") == 0.6
    results = sim.simulate(scenario)
    assert results.jobs.slowdown.iloc[0] == pytest.approx(1.0)
    assert results.summary["deadline_infeasible"] == 1


def test_the_cap_model_still_applies_on_top_of_the_table(tmp_path):
    harness = pending(table_scenario(tmp_path, "compute-bound,A100-80GB,0.5\n", jobs_of(1)))
    harness.apply([Start(harness.job("j0"), "a", gpu_cap_w=250.0)])
    fraction = sim.models.hardware.estimate("A100-80GB", "compute-bound", 250.0).throughput_fraction
    assert fraction < 1.0
    harness.advance(10 * H)
    assert harness.times("j0")[1] == pytest.approx(2.0 * H / (0.5 * fraction))


@pytest.mark.parametrize(
    ("rows", "where", "value"),
    [
        ("compute-bound,A100-80GB,-1\n", ":2:", "'-1'"),
        ("compute-bound,A100-80GB,0.5\nmixed,A100-80GB,fast\n", ":3:", "'fast'"),
        ("compute-bound,B200X,1\n", ":2:", "'B200X'"),
        ("warp-bound,A100-80GB,1\n", ":2:", "'warp-bound'"),
        ("compute-bound,A100-80GB\n", ":2:", "A100-80GB"),
        ("mixed,A100-80GB,1\nmixed,A100-80GB,2\n", ":3:", "twice"),
    ],
)
def test_a_bad_row_is_a_one_line_error_naming_file_line_and_value(tmp_path, rows, where, value):
    with pytest.raises(ScenarioError) as e:
        sim.simulate(table_scenario(tmp_path, rows, jobs_of(1)))
    message = str(e.value)
    assert "\n" not in message
    assert f"speeds.csv{where}" in message
    assert value in message


def test_a_bad_header_is_an_error_naming_line_one(tmp_path):
    path = tmp_path / "speeds.csv"
    path.write_text("gpu,profile,speed\n")
    scenario = make_scenario(tmp_path, jobs=jobs_of(1), throughput={"file": str(path)})
    with pytest.raises(ScenarioError, match=r"speeds.csv:1: the header must be"):
        sim.simulate(scenario)


def test_without_either_table_nothing_is_read_or_drawn(tmp_path):
    harness = PolicyHarness(make_scenario(tmp_path, jobs=jobs_of(1)))
    assert harness.engine.queries.prediction is None
    assert harness.engine.scenario.throughput is None
    assert math.isfinite(harness.state.runtime_s(harness.job("j0"), "a"))


def test_the_cli_reports_a_bad_row_in_one_line_next_to_the_scenario_file(tmp_path, capsys):
    files = {"speeds.csv": "profile,gpu_model,speed\nmixed,A100-80GB,fast\n"}
    line = one_line_cli_error(tmp_path, capsys, files, '[throughput]\nfile = "speeds.csv"')
    assert "speeds.csv:2: speed must be a number in (0, 1000], got 'fast'" in line
