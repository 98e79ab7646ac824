"""`price_options`, the compiled pricing of a job's options on every site, gives the same
bits as its Python reference (`.py_func`) and as the window arithmetic of
`policies.kit.windows` it replaces (`WindowMean`, `best_window_start`); the batched state
queries (`state.forecasts`, `state.carbon_intensities`) and `ForecastBlock` give what the
per-site queries give, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sim
from policies.kit import MIN_DEFER_S, WindowMean, best_window_start, forecast_from_now
from policies.kit.objective import CARBON
from policies.kit.option_kernels import price_options
from policies.kit.time_shifting import ForecastBlock
from sim.testing import PolicyHarness
from tests.golden.cases import SCENARIOS


def random_block(
    rng: np.random.Generator, sites: int
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(now, times, values, offsets): each site's forecast from an odd `now`, its later
    breakpoints hourly (half the sites) or at random gaps, and noisy values."""
    now_s = float(rng.uniform(0.0, 1e7))
    parts_t, parts_v = [], []
    for k in range(sites):
        steps = int(rng.integers(1, 80))
        if k % 2:
            later = 3600.0 * (math.floor(now_s / 3600.0) + np.arange(1, steps))
        else:
            later = now_s + np.cumsum(rng.uniform(1.0, 7200.0, steps - 1))
        parts_t.append(np.concatenate(([now_s], later)))
        parts_v.append(rng.uniform(0.0, 900.0, steps))
    offsets = np.zeros(sites + 1, dtype=np.int64)
    np.cumsum([t.size for t in parts_t], out=offsets[1:])
    return now_s, np.concatenate(parts_t), np.concatenate(parts_v), offsets


def random_options(rng: np.random.Generator, sites: int, count: int) -> tuple[np.ndarray, ...]:
    """(site, move s, runtime s, run kWh, fixed score) of `count` options: moves of 0 (the
    origin) or up to 2 h, runtimes of 0 to 30 h."""
    site = np.sort(rng.integers(0, sites, count))
    move_s = np.where(rng.random(count) < 0.3, 0.0, rng.uniform(0.0, 7200.0, count))
    runtime_s = np.where(rng.random(count) < 0.05, 0.0, rng.uniform(0.0, 30 * 3600.0, count))
    return site, move_s, runtime_s, rng.uniform(0.0, 500.0, count), rng.uniform(0.0, 50.0, count)


def priced(rng: np.random.Generator, compiled: bool) -> tuple[np.ndarray, ...]:
    """The inputs of one random call, and its answer (compiled or the reference)."""
    now_s, times, values, offsets = random_block(rng, 8)
    options = random_options(rng, 8, int(rng.integers(1, 24)))
    shift_until_s = math.nan if rng.random() < 0.3 else now_s + rng.uniform(0.0, 40 * 3600.0)
    run = price_options if compiled else price_options.py_func
    out = run(times, values, offsets, *options, now_s, shift_until_s, MIN_DEFER_S, 1000.0)
    return (np.array([now_s, shift_until_s]), times, values, offsets, *options, out)


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_kernel_gives_the_bits_of_its_python_reference(seed: int) -> None:
    compiled = priced(np.random.default_rng(seed), compiled=True)
    reference = priced(np.random.default_rng(seed), compiled=False)
    assert all(
        np.array_equal(a, b, equal_nan=True) for a, b in zip(compiled, reference, strict=True)
    )


def check_against_windows(seed: int) -> tuple[int, int]:
    """Assert that each option of a random call is priced as `windows` prices it: (how
    many were shifted to a best start, how many start now)."""
    (now_s, shift_until_s), times, values, offsets, site, move, runtime, kwh, fixed, out = priced(
        np.random.default_rng(seed), compiled=True
    )
    shifted = 0
    for k, s in enumerate(site.tolist()):
        t, v = times[offsets[s] : offsets[s + 1]], values[offsets[s] : offsets[s + 1]]
        run_s = now_s + move[k]
        latest_run_s = shift_until_s - runtime[k]
        if latest_run_s - run_s >= MIN_DEFER_S:  # False without a shift (NaN)
            run_s, mean = best_window_start(t, v, run_s, latest_run_s, float(runtime[k]))
            shifted += 1
        else:
            mean = WindowMean(t, v)(run_s, float(runtime[k]))
        score = kwh[k] * mean / 1000.0 + fixed[k]
        assert out[k].tolist() == [run_s - move[k], run_s + runtime[k], score]
    return shifted, site.size - shifted


@pytest.mark.parametrize("seed", range(40))
def test_each_option_is_priced_with_the_bits_of_the_window_arithmetic(seed: int) -> None:
    check_against_windows(seed)


def test_the_random_calls_price_both_shifted_runs_and_runs_started_now() -> None:
    shifted, now = np.sum([check_against_windows(seed) for seed in range(40)], axis=0)
    assert shifted > 50 and now > 50


# --- the batched state queries -------------------------------------------------------


@pytest.fixture(scope="module")
def harness() -> PolicyHarness:
    """The space_time study's sites (noisy forecasts), paused at an odd time."""
    scenario = sim.load_scenario(SCENARIOS / "space_time_study.toml", ["duration_h=48"])
    return PolicyHarness(scenario).advance(12345.678)


def test_forecasts_of_all_sites_are_each_sites_forecast(harness: PolicyHarness) -> None:
    state = harness.state
    sites = list(state.sites)[::-1]
    times, values, offsets = state.forecasts(sites, 2 * 86400.0)
    assert offsets[0] == 0 and offsets[-1] == times.size == values.size
    for k, site in enumerate(sites):
        t, v = state.forecast(site, 2 * 86400.0)
        assert np.array_equal(times[offsets[k] : offsets[k + 1]], t)
        assert np.array_equal(values[offsets[k] : offsets[k + 1]], v)
    intensities = state.carbon_intensities(sites)
    assert intensities.tolist() == [state.carbon_intensity(s) for s in sites]


def test_a_forecast_block_holds_each_sites_forecast_from_now(harness: PolicyHarness) -> None:
    state = harness.state
    block = ForecastBlock(state, state.sites, 86400.0, CARBON)
    for k, site in enumerate(state.sites):
        t, v = forecast_from_now(state, site, 86400.0)
        assert np.array_equal(block.times[block.offsets[k] : block.offsets[k + 1]], t)
        assert np.array_equal(block.values[block.offsets[k] : block.offsets[k + 1]], v)
