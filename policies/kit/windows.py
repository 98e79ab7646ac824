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
- `cheapest_slots`: the run windows of least forecast carbon that hold a run time and that
  a job stopped and resumed only where steps meet can carry out (Wiesner et al.'s
  interruptible "Let's Wait Awhile" schedule, the dearest step used only in part).
- `time_weighted_percentile`: a percentile of the forecast over a window, each value
  weighted by how long it holds.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

import numpy as np

__all__ = [
    "SLIVER_S",
    "WindowMean",
    "best_window_plan",
    "best_window_start",
    "cheapest_slots",
    "forecast_slots",
    "prefix_integrals",
    "time_weighted_percentile",
    "window_candidates",
    "window_means",
]

SLIVER_S = 1e-3
"""Steps shorter than this (s) at the start of a forecast are floating-point slivers of the
previous step (a decision a hair before a breakpoint); they are merged into the next step."""

_REL_TIE = 1e-9
"""Window means within this relative distance of the best count as ties (earliest wins)."""


def prefix_integrals(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """cum[i]: the integral of the step function from times[0] to times[i], g/kWh x s, as
    one sequential cumulative sum: the order of addition of every window mean here, so the
    prefix sums of a forecast cut short are the first ones of the whole."""
    cum = np.empty(times.size)
    cum[:1] = 0.0
    np.cumsum(values[:-1] * (times[1:] - times[:-1]), out=cum[1:])
    return cum


def window_means(
    times: np.ndarray,
    values: np.ndarray,
    starts: np.ndarray,
    length_s: float,
    cum: np.ndarray | None = None,
) -> np.ndarray:
    """Mean intensity (g/kWh) over [s, s + length_s] for each start s (>= times[0]);
    `cum`: the forecast's `prefix_integrals`, if already built."""
    starts = np.asarray(starts, dtype=float)
    if length_s <= 0.0:
        i = np.searchsorted(times, starts, side="right") - 1
        return values[i].astype(float)
    if cum is None:
        cum = prefix_integrals(times, values)
    x = np.concatenate((starts + length_s, starts))
    i = np.searchsorted(times, x, side="right") - 1
    integral = cum[i] + values[i] * (x - times[i])
    return (integral[: starts.size] - integral[starts.size :]) / length_s


class WindowMean:
    """Mean intensity of one forecast over single windows, O(log n) each: the integral's
    prefix sums are built once, in the order `window_means` adds them (same results)."""

    __slots__ = ("_cum", "_t", "_v")

    def __init__(self, times: np.ndarray, values: np.ndarray):
        self._t = times.tolist()
        self._v = values.tolist()
        self._cum = prefix_integrals(times, values).tolist()

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
    times: np.ndarray,
    values: np.ndarray,
    earliest_s: float,
    latest_s: float,
    length_s: float,
    cum: np.ndarray | None = None,
) -> tuple[float, float]:
    """(start, mean): the start in [earliest_s, latest_s] whose window of `length_s` has the
    lowest mean intensity, the earliest of (numerical) ties. `latest_s < earliest_s` means
    no room to wait: the answer is `earliest_s`. `cum`: as in `window_means`."""
    starts = window_candidates(times, earliest_s, latest_s, length_s)
    means = window_means(times, values, starts, length_s, cum)
    k = _first_within(means, float(means.min()))
    return float(starts[k]), float(means[k])


def best_window_plan(
    times: np.ndarray,
    values: np.ndarray,
    earliest_s: float,
    latest_s: float,
    length_s: float,
    cum: np.ndarray | None = None,
) -> tuple[float, float]:
    """(start, holds_until_s): `best_window_start`'s start, and, when that start is
    `earliest_s`, until when it stays so: for every t in [earliest_s, holds_until_s),
    `best_window_start` on the same step function from t (the forecast cut to [t, the same
    end]) over [t, latest_s] answers t. `earliest_s` when the start is later (no promise).

    The window mean f is linear between consecutive candidates c_k < c_k+1, and the
    candidates from t in [c_k, c_k+1) are t and those after c_k; so f(t) <= f(c_k+1) +
    max(f(c_k) - f(c_k+1), 0) and f(t) <= max(f(c_k), f(c_k+1)). t is the answer while
    these bounds stay within the tie tolerance of f at every later candidate (at least
    `_REL_TIE` g/kWh), by more than what the means, computed from t or from `earliest_s`,
    may be off by (`_rounding_guard`)."""
    starts = window_candidates(times, earliest_s, latest_s, length_s)
    means = window_means(times, values, starts, length_s, cum)
    k = _first_within(means, float(means.min()))
    if k != 0 or starts.size < 2 or length_s <= 0.0:
        return float(starts[k]), earliest_s
    guard = _rounding_guard(times, values, latest_s + length_s, length_s)
    after_next = np.append(np.minimum.accumulate(means[:1:-1])[::-1], np.inf)
    holds = (np.maximum(means[:-1] - means[1:], 0.0) + guard <= _REL_TIE) & (
        np.maximum(means[:-1], means[1:]) + guard <= after_next + _REL_TIE
    )
    broken = np.flatnonzero(~holds)
    return float(starts[0]), float(starts[broken[0] if broken.size else -1])


def _rounding_guard(times: np.ndarray, values: np.ndarray, end_s: float, length_s: float) -> float:
    """Four times a bound, with a factor of ten to spare, on how far a window mean of
    `length_s` ending by `end_s` on this forecast may be off by rounding, g/kWh: each of its
    two integrals adds up to n + 3 rounded terms below max|value| x span, and its ends
    (times since the scenario start) round by one unit in the last place (2.2e-16)."""
    span_s = end_s - float(times[0])
    scale = (times.size + 5) * span_s + 2.0 * (abs(float(times[0])) + span_s)
    return 1e-14 * float(np.abs(values).max()) * (scale / length_s + 1.0)


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


class _Plan(NamedTuple):
    """A plan of whole steps and one step used in part from its start (`_last_in_part`)."""

    cost: float
    """Its forecast carbon: the integral of the intensity over it, g/kWh x s."""
    whole: np.ndarray
    """Indices of the steps used whole, ascending."""
    part: int
    """Index of the step used in part (from its start), the last of the plan."""
    part_s: float
    """How much of that step is used, s."""
    first_start_s: float
    """When the plan's first step starts, s."""
    end_s: float
    """When it ends, s."""


def _last_in_part(
    starts: np.ndarray, lengths: np.ndarray, vals: np.ndarray, need_s: float, early_end: bool
) -> _Plan:
    """The plan of least cost of whole steps and the last step used in part from its start,
    `need_s` in all. Ties: the earliest end, then the earliest start if `early_end`; else
    the latest start, then the latest end (the same rule on a time-reversed forecast).
    For each last step f, the steps before it are the cheapest, as many as leave
    0 < part <= length of f, with and without step 0 (which may be short)."""
    n = lengths.size
    # Steps 1.., cheapest first; equal ones the earliest first (on a reversed forecast, the
    # latest: the earliest in time).
    rest = 1 + np.lexsort((starts[1:] if early_end else -starts[1:], vals[1:]))
    last = np.arange(n)[:, None]
    before = np.hstack((np.ones((n, 1), dtype=bool), rest[None, :] < last))
    # Column 0: no step of `rest`; column j > 0: the first j of `rest` that lie before f.
    taken_s = np.cumsum(np.where(before[:, 1:], lengths[rest], 0.0), axis=1)
    taken_cost = np.cumsum(np.where(before[:, 1:], (vals * lengths)[rest], 0.0), axis=1)
    earliest = np.minimum.accumulate(np.where(before[:, 1:], starts[rest], np.inf), axis=1)
    zero = np.zeros((n, 1))
    taken_s, taken_cost = np.hstack((zero, taken_s)), np.hstack((zero, taken_cost))
    earliest = np.minimum(np.hstack((zero + np.inf, earliest)), starts[last])
    cost, first_start, end = [], [], []
    for with_first in (False, True):
        base_s, base_cost = (lengths[0], vals[0] * lengths[0]) if with_first else (0.0, 0.0)
        part = need_s - (base_s + taken_s)
        ok = before & (part > 0.0) & (part <= lengths[last] + SLIVER_S)
        if with_first:
            ok &= last >= 1
        used = np.minimum(part, lengths[last])
        cost.append(np.where(ok, base_cost + taken_cost + used * vals[last], np.inf))
        first_start.append(np.full_like(earliest, starts[0]) if with_first else earliest)
        end.append(starts[last] + used)
    costs = np.stack(cost)
    best = float(costs.min())
    ties = np.flatnonzero(costs <= best + _REL_TIE * max(1.0, abs(best)))
    ends, firsts = np.stack(end).ravel()[ties], np.stack(first_start).ravel()[ties]
    keys = (firsts, ends) if early_end else (-ends, -firsts)  # the last key sorts first
    with_first, f, j = np.unravel_index(ties[np.lexsort(keys)[0]], costs.shape)
    whole = rest[:j][rest[:j] < f]
    if with_first:
        whole = np.append(0, whole)
    part_s = min(need_s - float(lengths[whole].sum()), float(lengths[f]))
    return _Plan(
        best,
        np.sort(whole),
        int(f),
        part_s,
        float(np.stack(first_start)[with_first, f, j]),
        float(starts[f] + part_s),
    )


def cheapest_slots(
    times: np.ndarray, values: np.ndarray, end_s: float, need_s: float, start_late: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The run windows in [times[0], end_s] of least forecast carbon (the integral of the
    intensity over them) whose total length is `need_s`, among those a job can carry out
    if it can be stopped and resumed only where forecast steps meet: ascending
    (starts, ends), s.

    Such a plan is whole forecast steps, of which the chronologically last may be used in
    part, from its start (the job completes there); with `start_late` (a job not yet
    started, which a deferral can start at any moment) the first may instead be used in
    part, up to its end. The cheapest steps with only the dearest of them in part (Wiesner
    et al.'s schedule, the least carbon of all) is such a plan when that step is the last
    or, with `start_late`, the first. When it lies between others, running it whole would
    skip part of a cheaper later step; the best plan of the kind above is taken instead.
    Ties: the plan that ends first. All steps, whole, if they are not long enough together.

    Exact when all steps but the first (cut by times[0]) and the last (cut by `end_s`)
    have the same length, as forecasts on a regular grid do; with steps of other lengths
    the plan is valid, and may cost more than the best by part of a step. O(n^2) for n
    steps."""
    starts, lengths, vals = forecast_slots(times, values, end_s)
    ends = starts + lengths
    if lengths.sum() <= need_s:
        return starts, ends
    plan = _last_in_part(starts, lengths, vals, need_s, early_end=True)
    win_starts = np.append(starts[plan.whole], starts[plan.part])
    win_ends = np.append(ends[plan.whole], plan.end_s)
    if start_late:  # the same search on the time-reversed forecast: the first step in part
        back = _last_in_part(end_s - ends[::-1], lengths[::-1], vals[::-1], need_s, False)
        tol = _REL_TIE * max(1.0, abs(plan.cost))
        if back.cost < plan.cost - tol or (
            back.cost <= plan.cost + tol and end_s - back.first_start_s < plan.end_s
        ):
            n = lengths.size
            whole, part = n - 1 - back.whole, n - 1 - back.part
            win_starts = np.append(starts[whole], ends[part] - back.part_s)
            win_ends = np.append(ends[whole], ends[part])
    order = np.argsort(win_starts)
    return win_starts[order], win_ends[order]


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
