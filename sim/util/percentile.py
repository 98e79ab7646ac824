"""The time-weighted percentile: one definition for every floor (`sim.api` exports it to
policies)."""

from __future__ import annotations

import numpy as np


def weighted_percentile(values: np.ndarray, weights: np.ndarray, percentile: float) -> float:
    """The smallest of `values` such that the values at or below it carry at least
    `percentile` % of the total weight (each value weighted by its entry of `weights`, e.g.
    how long it holds, s): the inverse of the weighted empirical distribution function,
    Hyndman and Fan's definition 1 (The American Statistician 50(4), 1996), computed by
    ``np.percentile(values, percentile, weights=weights, method="inverted_cdf")`` (numpy
    >= 2.0). 0 gives the smallest value of positive weight, 100 the largest.

    Ties: where the weight at or below a value is exactly `percentile` % of the total, that
    value (the lower one) is the answer. The shares are the running sums of the weights
    divided by their total in float64, compared with `percentile` / 100 without tolerance:
    exact for weights that are whole numbers (steps of whole seconds); for others a share a
    rounding away from the percentile falls on the side its rounded weights put it.

    Values of zero weight are left out before numpy sees them: numpy 2.0's
    `inverted_cdf` can return one of them at percentile 0 (later releases do not).

    Raises ValueError for no values, weights of another shape, a negative, NaN or infinite
    weight, weights that are all zero, or `percentile` outside [0, 100] (numpy's check)."""
    values, weights = np.asarray(values), np.asarray(weights)
    if values.size == 0 or weights.shape != values.shape:
        raise ValueError(
            f"weighted_percentile: one weight per value needed, got {values.shape} values "
            f"and {weights.shape} weights"
        )
    bad = ~(np.isfinite(weights) & (weights >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"weighted_percentile: weight {i} is {weights[i]}; weights are >= 0")
    if not weights.any():
        raise ValueError("weighted_percentile: the weights are all zero")
    weighed = weights > 0
    values, weights = values[weighed], weights[weighed]
    return float(np.percentile(values, percentile, weights=weights, method="inverted_cdf"))
