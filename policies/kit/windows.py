"""Exact arithmetic on carbon-intensity forecasts: window means, best windows, cheapest slots.

A forecast is a step function `(times_s, values_g_per_kwh)` as `state.forecast` returns it:
value i holds from `times_s[i]` to `times_s[i + 1]`, and the last value holds on (forecasts
are cut at the end of the site's signal; beyond it, the last forecast value is the best
guess there is). Everything here is exact: no sampling of start times, no grid.

- `window_means`: the mean intensity over [s, s + length] for many starts s;
  `WindowMean` the same for one start at a time, from prefix sums built once (for a
  policy that asks one forecast many times in one decision).
- `best_window_start`: the start in an interval with the lowest window mean. The mean of a
  step function over a sliding window is piecewise linear in the start, with kinks only
  where the window's start or end crosses a breakpoint, so the minimum is at one of those
  candidates or at an end of the interval (`window_candidates`).
- `cheapest_slots`: the cheapest forecast steps whose total length covers a run time
  (Wiesner et al.'s interruptible "Let's Wait Awhile" schedule).
- `time_weighted_percentile`: a percentile of the forecast over a window, each value
  weighted by how long it holds.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

__all__ = [
    "SLIVER_S",
    "WindowMean",
    "best_window_start",
    "cheapest_slots",
    "forecast_slots",
    "time_weighted_percentile",
    "window_candidates",
    "window_means",
]

SLIVER_S = 1e-3
"""Steps shorter than this (s) at the start of a forecast are floating-point slivers of the
previous step (a decision a hair before a breakpoint); they are merged into the next step."""

_REL_TIE = 1e-9
"""Window means within this relative distance of the best count as ties (earliest wins)."""


def _integral_at(times: np.ndarray, values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral of the step function from times[0] to each x (>= times[0]), g/kWh x s."""
    cum = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    i = np.searchsorted(times, x, side="right") - 1
    return cum[i] + values[i] * (x - times[i])


def window_means(
    times: np.ndarray, values: np.ndarray, starts: np.ndarray, length_s: float
) -> np.ndarray:
    """Mean intensity (g/kWh) over [s, s + length_s] for each start s (>= times[0])."""
    starts = np.asarray(starts, dtype=float)
    if length_s <= 0.0:
        i = np.searchsorted(times, starts, side="right") - 1
        return values[i].astype(float)
    return (
        _integral_at(times, values, starts + length_s) - _integral_at(times, values, starts)
    ) / length_s


class WindowMean:
    """Mean intensity of one forecast over single windows, O(log n) each: the integral's
    prefix sums are built once, in the order `window_means` adds them (same results)."""

    __slots__ = ("_cum", "_t", "_v")

    def __init__(self, times: np.ndarray, values: np.ndarray):
        self._t = times.tolist()
        self._v = values.tolist()
        cum = [0.0]
        for k in range(len(self._t) - 1):
            cum.append(cum[-1] + self._v[k] * (self._t[k + 1] - self._t[k]))
        self._cum = cum

    def _integral_to(self, x: float) -> float:
        i = bisect_right(self._t, x) - 1
        return self._cum[i] + self._v[i] * (x - self._t[i])

    def __call__(self, start_s: float, length_s: float) -> float:
        """Mean intensity over [start_s, start_s + length_s] (start_s >= times[0]), g/kWh."""
        if length_s <= 0.0:
            return self._v[bisect_right(self._t, start_s) - 1]
        return (self._integral_to(start_s + length_s) - self._integral_to(start_s)) / length_s


def window_candidates(
    times: np.ndarray, earliest_s: float, latest_s: float, length_s: float
) -> np.ndarray:
    """Ascending starts in [earliest_s, latest_s] at which a window of `length_s` may be
    best: the interval's ends, and the starts where the window's start or end meets a
    breakpoint. Between two consecutive candidates the window mean is linear in the start."""
    inner = np.concatenate((times, times - length_s))
    inner = inner[(inner > earliest_s) & (inner < latest_s)]
    return np.unique(np.concatenate(([earliest_s, max(earliest_s, latest_s)], inner)))


def best_window_start(
    times: np.ndarray, values: np.ndarray, earliest_s: float, latest_s: float, length_s: float
) -> tuple[float, float]:
    """(start, mean): the start in [earliest_s, latest_s] whose window of `length_s` has the
    lowest mean intensity, the earliest of (numerical) ties. `latest_s < earliest_s` means
    no room to wait: the answer is `earliest_s`."""
    starts = window_candidates(times, earliest_s, latest_s, length_s)
    means = window_means(times, values, starts, length_s)
    k = _first_within(means, float(means.min()))
    return float(starts[k]), float(means[k])


def _first_within(x: np.ndarray, best: float) -> int:
    """Index of the first element within the tie tolerance of `best` (x >= best)."""
    return int(np.argmax(x <= best + _REL_TIE * max(1.0, abs(best))))


def forecast_slots(
    times: np.ndarray, values: np.ndarray, end_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forecast steps cut to [times[0], end_s]: (starts, lengths, values); a leading
    sliver (shorter than `SLIVER_S`) is merged into the step after it."""
    if times.size > 1 and times[1] - times[0] < SLIVER_S:
        now_s = times[0]
        times, values = times[1:].copy(), values[1:]
        times[0] = now_s
    keep = times < end_s
    starts, vals = times[keep], values[keep]
    ends = np.append(starts[1:], end_s)
    return starts, ends - starts, vals


def cheapest_slots(
    times: np.ndarray, values: np.ndarray, end_s: float, need_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forecast steps in [times[0], end_s] with the lowest values whose total length
    first reaches `need_s` (ties: earlier steps first), as ascending (starts, lengths, used):
    `used` is the time needed in each, the full length except in the dearest chosen step,
    which is only partly needed. All steps, fully used, if they are not long enough
    together. The first step is the current one (starting at times[0])."""
    starts, lengths, vals = forecast_slots(times, values, end_s)
    order = np.lexsort((starts, vals))
    covered = np.cumsum(lengths[order])
    k = int(np.searchsorted(covered, need_s, side="left"))
    chosen = order[: k + 1]
    used = lengths[chosen].copy()
    if k < order.size:
        used[-1] -= covered[k] - need_s
    by_start = np.argsort(starts[chosen])
    return starts[chosen][by_start], lengths[chosen][by_start], used[by_start]


def time_weighted_percentile(
    times: np.ndarray, values: np.ndarray, end_s: float, percentile: float
) -> float:
    """The smallest forecast value v such that the forecast is at or below v for at least
    `percentile` % of [times[0], end_s] (each step weighted by its length there; 0 gives
    the minimum, 100 the maximum). An empty window gives the current value."""
    _, lengths, vals = forecast_slots(times, values, end_s)
    if vals.size == 0 or lengths.sum() <= 0.0:
        return float(values[0])
    order = np.argsort(vals, kind="stable")
    share = np.cumsum(lengths[order]) / lengths.sum()
    k = int(np.searchsorted(share, percentile / 100.0 - 1e-12, side="left"))
    return float(vals[order[min(k, vals.size - 1)]])
