"""The forecast noise's building blocks against their plain definitions: the counter-based
Philox generator of each (signal, use, issue time) and the Ornstein-Uhlenbeck path of the
`calibrated` model's shared error (`sim.grid.forecast`)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from sim.config.runtime import ForecastConfig
from sim.grid.forecast import Forecaster, ou_path


def _philox_by_hand(run_key: int, signal_key: int, use: int, now_s: float) -> np.ndarray:
    """The route the forecaster took before it used Philox's documented constructor: a
    Philox whose state dictionary is written by hand (counter, key, an empty buffer)."""
    bits = np.random.Philox(key=0)
    bits.state = {
        "bit_generator": "Philox",
        "state": {
            "counter": np.array(
                [0, 0, use, struct.unpack("<Q", struct.pack("<d", now_s + 0.0))[0]],
                dtype=np.uint64,
            ),
            "key": np.array([run_key, signal_key], dtype=np.uint64),
        },
        "buffer": np.zeros(4, dtype=np.uint64),
        "buffer_pos": 4,
        "has_uint32": 0,
        "uinteger": 0,
    }
    return np.random.Generator(bits).standard_normal(257)


@pytest.mark.parametrize(
    ("seed", "signal_key", "use", "now_s"),
    [
        (0, 0, 1, 0.0),
        (1, 1, 2, -0.0),
        (2, 2**64 - 1, 3, 0.5),
        (3, 0x9E3779B97F4A7C15, 1, 3600.0),
        (12345, 2**63, 2, 31_535_999.75),
        (2**32, 42, 3, 1e-300),
    ],
)
def test_each_forecast_generator_draws_bit_for_bit_what_the_hand_written_state_drew(
    seed, signal_key, use, now_s
):
    f = Forecaster(ForecastConfig(model="gaussian", sigma_frac=0.1), np.random.default_rng(seed))
    drawn = f._generator(signal_key, use, now_s).standard_normal(257)
    assert drawn.tobytes() == _philox_by_hand(f._key, signal_key, use, now_s).tobytes()


def test_a_generator_keeps_its_own_draws_when_another_is_made():
    f = Forecaster(ForecastConfig(model="gaussian", sigma_frac=0.1), np.random.default_rng(0))
    first = f._generator(7, 1, 0.0)
    f._generator(7, 2, 0.0).standard_normal(4)
    assert first.standard_normal(4).tolist() == _philox_by_hand(f._key, 7, 1, 0.0)[:4].tolist()


def _ou_recursion(t: np.ndarray, eps: np.ndarray, tau: float) -> np.ndarray:
    """The definition: x[0] = eps[0]; x[k] = phi x[k-1] + sqrt(1 - phi^2) eps[k], phi =
    exp(-(t[k] - t[k-1]) / tau), one step at a time."""
    x = np.empty(t.size)
    x[0] = eps[0]
    for k in range(1, t.size):
        phi = math.exp(-(t[k] - t[k - 1]) / tau)
        x[k] = phi * x[k - 1] + math.sqrt(1.0 - phi * phi) * eps[k]
    return x


@pytest.mark.parametrize(
    ("n", "step_s", "tau_s"),
    [
        (105_120, 300.0, 7.254054 * 3600.0),  # a year of 5-min steps, the shipped tau: blocks
        (8_760, 3600.0, 7.254054 * 3600.0),  # a year of hourly steps: blocks
        (2_000, 3600.0, 1e7),  # tau far beyond the span: one block, phi near 1
        (3_000, 3600.0, 100.0),  # tau far below a step: nearly independent values
    ],
)
def test_the_ou_path_is_the_ar1_recursion_on_the_same_draws(n, step_s, tau_s):
    rng = np.random.default_rng(n)
    t = np.cumsum(rng.uniform(0.5, 1.5, n) * step_s)  # irregular steps
    t[n // 2] = t[n // 2 - 1]  # and a repeated time: the value holds
    eps = rng.standard_normal(n)
    # relative to the process's standard deviation (1): to 1e-12 where |x| is near 1
    np.testing.assert_allclose(ou_path(t, eps, tau_s), _ou_recursion(t, eps, tau_s), 1e-12, 1e-12)


def test_the_ou_path_is_stationary_with_unit_variance_and_exponential_correlation():
    tau_s, paths = 3600.0, 20_000
    t = np.array([0.0, 600.0, 1800.0, 3600.0, 7200.0, 14_400.0])
    rng = np.random.default_rng(5)
    x = np.array([ou_path(t, rng.standard_normal(t.size), tau_s) for _ in range(paths)])
    se = 1.0 / math.sqrt(paths)
    assert np.abs(x.var(axis=0) - 1.0).max() < 4 * math.sqrt(2) * se
    corr = np.corrcoef(x, rowvar=False)
    np.testing.assert_allclose(corr, np.exp(-np.abs(t[:, None] - t) / tau_s), atol=4 * se)
