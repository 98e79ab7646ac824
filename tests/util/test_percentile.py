"""One time-weighted percentile (`sim.util.percentile.weighted_percentile`, exported as
`sim.api.weighted_percentile`): its two users, the policies' forecast percentile
(`policies.kit.time_weighted_percentile`) and the high-carbon demand-response events
(`sim.market.dr_events.high_carbon_windows`), agree with the percentile of the values
repeated by their weights, and take one side of a near-tie."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from policies.kit import time_weighted_percentile
from sim.api import weighted_percentile
from sim.grid import CarbonSignal
from sim.market.dr_events import high_carbon_windows

PERCENTILES = [0.0, 0.5, 10.0, 25.0, 33.3, 50.0, 62.5, 90.0, 99.9, 100.0]


def _expanded(values: np.ndarray, weights: np.ndarray, percentile: float) -> float:
    """The definition by brute force: each value repeated `weight` times (whole numbers),
    sorted, and the element at rank ceil(percentile / 100 x n) (the first for 0), in exact
    rational arithmetic."""
    sample = sorted(np.repeat(values, weights.astype(int)).tolist())
    rank = -(-Fraction(percentile) * len(sample) // 100)  # ceil
    return sample[max(int(rank), 1) - 1]


def _stretches_above(t: np.ndarray, values: np.ndarray, horizon_s: float, threshold: float):
    """[start, end) of each run of consecutive steps above `threshold`."""
    ends = np.append(t[1:], horizon_s)
    out = []
    steps = zip(t, ends, values > threshold, strict=True)
    for above, run in itertools.groupby(steps, lambda step: step[2]):
        if above:
            rows = list(run)
            out.append((float(rows[0][0]), float(rows[-1][1])))
    return out


def test_the_weighted_percentile_is_that_of_the_values_repeated_by_their_weights():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        values = rng.integers(0, 6, n).astype(float)  # repeated values: ties
        weights = rng.integers(0, 5, n).astype(float)
        weights[rng.integers(n)] += 1.0  # not all zero
        for p in PERCENTILES:
            assert weighted_percentile(values, weights, p) == _expanded(values, weights, p)


def test_a_value_of_zero_weight_is_never_the_answer():
    # numpy 2.0 (the declared minimum) returns the 0.0 of zero weight at percentile 0
    values, weights = np.array([4.0, 0.0, 2.0]), np.array([3.0, 0.0, 4.0])
    assert weighted_percentile(values, weights, 0.0) == 2.0
    assert weighted_percentile(values, weights, 100.0) == 4.0


@pytest.mark.parametrize("weights", [[-1.0, 2.0], [np.nan, 1.0], [np.inf, 1.0], [0.0, 0.0]])
def test_negative_nan_infinite_or_all_zero_weights_are_refused(weights):
    with pytest.raises(ValueError, match="weight"):
        weighted_percentile(np.array([1.0, 2.0]), np.array(weights), 50.0)


def test_both_users_agree_with_the_expansion_on_random_step_functions():
    rng = np.random.default_rng(12)
    for _ in range(200):
        n = int(rng.integers(1, 10))
        t = 60.0 * np.concatenate([[0], np.cumsum(rng.integers(1, 120, n - 1))])
        values = rng.integers(100, 400, n).astype(float) // 50 * 50  # g/kWh, with ties
        signal = CarbonSignal(t, values, end_s=t[-1] + 3600.0)
        horizon_s = 60.0 * float(rng.integers(t[-1] / 60 + 1, signal.end_s / 60 + 1))
        minutes = (np.append(t[1:], horizon_s) - t) / 60.0  # whole minutes each value holds
        for p in PERCENTILES:
            expected = _expanded(values, minutes, p)
            assert time_weighted_percentile(t, values, horizon_s, p) == expected
            if 0.0 < p < 100.0:  # the events' percentile is strictly inside
                windows = high_carbon_windows(signal, horizon_s, p, 0.0)
                assert windows == _stretches_above(t, values, horizon_s, expected)


def test_a_share_a_rounding_below_the_percentile_takes_the_next_value_at_both_users():
    # 1 g/kWh holds 0.01 s and 3 g/kWh 0.17 s of 0.45 s: in decimals exactly 40%. On these
    # doubles the share is 0.18 / 0.45 = 0.4 - 2.5e-17 (every difference of the times is
    # exact), so at 40% the percentile is the next value, 4. The policies' version used to
    # call shares within 1e-12 of the percentile ties (giving 3); the events' gave 4.
    t, values, horizon_s = np.array([0.0, 0.17, 0.18]), np.array([3.0, 1.0, 4.0]), 0.45
    share = Fraction(0.18) / Fraction(0.45)
    assert share < Fraction(2, 5)
    assert time_weighted_percentile(t, values, horizon_s, 40.0) == 4.0
    signal = CarbonSignal(t, values, end_s=horizon_s)
    assert high_carbon_windows(signal, horizon_s, 40.0, 0.0) == []  # nothing above 4


def test_weights_must_match_the_values():
    with pytest.raises(ValueError, match="one weight per value"):
        weighted_percentile(np.array([1.0, 2.0]), np.array([1.0]), 50.0)
    with pytest.raises(ValueError, match="one weight per value"):
        weighted_percentile(np.array([]), np.array([]), 50.0)
