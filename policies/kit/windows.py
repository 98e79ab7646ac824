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

import math
import operator
from bisect import bisect_left, bisect_right
from itertools import accumulate, islice
from typing import NamedTuple

import numpy as np

from sim.api import weighted_percentile

__all__ = [
    "MIN_DEFER_S",
    "REL_TIE",
    "SLIVER_S",
    "WindowMean",
    "best_window_plan",
    "best_window_start",
    "cheapest_slots",
    "forecast_slots",
    "prefix_integrals",
    "start_now_until",
    "time_weighted_percentile",
    "window_candidates",
    "window_means",
]

SLIVER_S = 1e-3
"""Steps shorter than this (s) at the start of a forecast are floating-point slivers of the
previous step (a decision a hair before a breakpoint); they are merged into the next step."""

MIN_DEFER_S = 1.0
"""A deferral shorter than this (s) is not worth an extra decision: the job starts now."""

REL_TIE = 1e-9
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
    starts, means, k = _best_candidate(times, values, earliest_s, latest_s, length_s, cum)
    return float(starts[k]), float(means[k])


def _best_candidate(
    times: np.ndarray,
    values: np.ndarray,
    earliest_s: float,
    latest_s: float,
    length_s: float,
    cum: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(candidate starts, their window means, the index of the best: the first within the
    tie tolerance of the least mean)."""
    starts = window_candidates(times, earliest_s, latest_s, length_s)
    means = window_means(times, values, starts, length_s, cum)
    return starts, means, _first_within(means, float(means.min()))


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
    end]) over [t, latest_s] answers t (`start_now_until` with its tie tolerance, taken at
    its least: `REL_TIE` x max(1, the least mean here less the rounding guard)).
    `earliest_s` when the start is later (no promise)."""
    starts, means, k = _best_candidate(times, values, earliest_s, latest_s, length_s, cum)
    if k != 0:
        return float(starts[k]), earliest_s
    return float(starts[0]), start_now_until(times, values, starts, means, length_s, 0.0, REL_TIE)


def start_now_until(
    times: np.ndarray,
    values: np.ndarray,
    starts: np.ndarray,
    means: np.ndarray,
    length_s: float,
    near_s: float,
    rel_tie: float = 0.0,
) -> float:
    """Until when, from `starts[0]` (now) on, no later start `near_s` or more away has a
    window mean lower than starting at once by more than a tie tolerance: for every t in
    [starts[0], until), the window means of `length_s` computed from t (`window_means` on
    the same step function from t, cut at the same end) of the candidate starts from t at
    least `near_s` after t are all at least t's own less `rel_tie` x max(1, the least mean
    less the rounding guard). `starts`: `window_candidates` from now to the latest start,
    `means` their `window_means` computed from now. starts[0] when nothing is certain.

    The mean f is linear between consecutive candidates c_k < c_k+1, and the candidates
    from t in [c_k, c_k+1) are t and those after c_k. It is enough that f(t) plus the
    rounding guard (`_rounding_guard`: its bound on the means from t, and on the
    interpolation here, with a factor of ten to spare) stays within the tolerance of
    f(c_j) for every c_j that may be `near_s` or more after t: all those after c_k while
    t <= c_k+1 - near_s / 2, those after c_k+1 beyond. The first part ends where f reaches
    the least later mean (in time: a guard's width before, where f rises to it)."""
    c, f = starts.tolist(), means.tolist()
    if len(c) < 2 or length_s <= 0.0:
        return c[0]
    guard = _rounding_guard(times, values, c[-1] + length_s, length_s)
    tie = rel_tie * max(1.0, min(f) - guard)
    # The least mean from c_j on, plus the tolerance.
    low = [*(np.minimum.accumulate(means[::-1])[::-1] + tie).tolist(), math.inf]
    for k in range(len(c) - 1):
        a, b, fa, fb = c[k], c[k + 1], f[k], f[k + 1]
        p = max(a, b - 0.5 * near_s)  # until p, c_k+1 may be near_s after t or more
        fp = fa + (fb - fa) * ((p - a) / (b - a))
        if fa + guard > low[k + 1]:
            return a
        if fp + guard > low[k + 1]:  # f rises to the least later mean in [a, p]: until then
            return max(a, a + (low[k + 1] - 2.0 * guard - fa) / (fp - fa) * (p - a))
        if max(fp, fb) + guard > low[k + 2]:
            return p
    return c[-1]


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
    return int(np.argmax(x <= best + REL_TIE * max(1.0, abs(best))))


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


class _CheapestFirst:
    """The steps before a last step, cheapest first (their order in `rest`), with the running
    sums over the first p of them: length (s) and forecast carbon (g/kWh x s), each added one
    step at a time in that order, and their earliest start (s). Sums are made as far as they
    are asked for, and dropped from where a step is inserted, so each is the same float as
    the one made from scratch over the same steps."""

    __slots__ = ("_carbon", "_earliest_s", "_len_s", "_ranks", "_rest", "_step_carbon", "_t", "_l")

    def __init__(
        self, rest: list[int], starts_s: list[float], lengths_s: list[float], carbon: list[float]
    ):
        self._rest, self._t, self._l, self._step_carbon = rest, starts_s, lengths_s, carbon
        self._ranks: list[int] = []
        self._len_s, self._carbon, self._earliest_s = [0.0], [0.0], [math.inf]

    def insert(self, rank: int) -> None:
        """Add the step at `rank` in `rest`."""
        at = bisect_left(self._ranks, rank)
        self._ranks.insert(at, rank)
        del self._len_s[at + 1 :], self._carbon[at + 1 :], self._earliest_s[at + 1 :]

    def lengths_to(self, need_s: float) -> list[float]:
        """The running lengths (s) over the first 0, 1, ... steps, made at least until one
        reaches `need_s` or all steps are in."""
        while self._len_s[-1] < need_s and len(self._len_s) <= len(self._ranks):
            self._extend(max(8, len(self._len_s)))
        return self._len_s

    def _extend(self, count: int) -> None:
        """Make the running sums over up to `count` more steps."""
        done = len(self._len_s) - 1
        steps = [self._rest[r] for r in self._ranks[done : done + count]]
        for sums, terms, add in (
            (self._len_s, self._l, operator.add),
            (self._carbon, self._step_carbon, operator.add),
            (self._earliest_s, self._t, min),
        ):
            sums += islice(
                accumulate(map(terms.__getitem__, steps), add, initial=sums[-1]), 1, None
            )

    def sums(self, p: int) -> tuple[float, float, float]:
        """(length, s; carbon, g/kWh x s; earliest start, s, inf if none) of the first p steps,
        p less than the size of `lengths_to`'s answer."""
        return self._len_s[p], self._carbon[p], self._earliest_s[p]


class _Candidate(NamedTuple):
    """A plan of `_last_in_part`: the first p cheapest steps before step `last`, step 0 whole
    if `with_first`, and `last` in part."""

    cost: float
    """Its forecast carbon, g/kWh x s."""
    end_s: float
    """When it ends, s."""
    first_start_s: float
    """When its first step starts, s."""
    with_first: bool
    last: int
    p: int


def _ending_in(
    taken: _CheapestFirst,
    last: int,
    with_first: bool,
    need_s: float,
    t: list[float],
    lengths: list[float],
    vals: list[float],
) -> list[_Candidate]:
    """The plans ending in step `last`, used in part (more than 0, at most its length and
    `SLIVER_S`), after the p cheapest steps before it (and step 0 whole if `with_first`), for
    every p that leaves such a part: the parts shrink as p grows, so these p are a range."""
    base_s, base_carbon = (lengths[0], vals[0] * lengths[0]) if with_first else (0.0, 0.0)
    room_s = lengths[last] + SLIVER_S
    # The first p that leaves no part: base + taken >= need (the part's sign, exactly).
    p = bisect_left(taken.lengths_to(need_s), need_s, key=base_s.__add__) - 1
    found = []
    while p >= 0:
        taken_s, taken_carbon, earliest_s = taken.sums(p)
        part_s = need_s - (base_s + taken_s)
        if part_s > room_s:
            break
        used_s = min(part_s, lengths[last])
        first_s = t[0] if with_first else min(earliest_s, t[last])
        cost = base_carbon + taken_carbon + used_s * vals[last]
        found.append(_Candidate(cost, t[last] + used_s, first_s, with_first, last, p))
        p -= 1
    return found


def _last_in_part(
    starts: np.ndarray, lengths: np.ndarray, vals: np.ndarray, need_s: float, early_end: bool
) -> _Plan:
    """The plan of least cost of whole steps and the last step used in part from its start,
    `need_s` (> 0) in all. Ties: the earliest end, then the earliest start if `early_end`;
    else the latest start, then the latest end (the same rule on a time-reversed forecast).
    For each last step f, the steps before it are the cheapest, as many as leave
    0 < part <= length of f, with and without step 0 (which may be short)."""
    n = lengths.size
    # Steps 1.., cheapest first; equal ones the earliest first (on a reversed forecast, the
    # latest: the earliest in time).
    rest = 1 + np.lexsort((starts[1:] if early_end else -starts[1:], vals[1:]))
    rank = np.empty(n, dtype=int)
    rank[rest] = np.arange(n - 1)
    t, lens, v = starts.tolist(), lengths.tolist(), vals.tolist()
    taken = _CheapestFirst(rest.tolist(), t, lens, (vals * lengths).tolist())
    found: list[_Candidate] = []
    for last in range(n):
        if last >= 2:
            taken.insert(int(rank[last - 1]))
        found += _ending_in(taken, last, False, need_s, t, lens, v)
        if last >= 1:
            found += _ending_in(taken, last, True, need_s, t, lens, v)
    best = min(c.cost for c in found)
    cut = best + REL_TIE * max(1.0, abs(best))
    ties = [c for c in found if c.cost <= cut]
    if early_end:
        pick = min(ties, key=lambda c: (c.end_s, c.first_start_s, c.with_first, c.last, c.p))
    else:
        pick = min(ties, key=lambda c: (-c.first_start_s, -c.end_s, c.with_first, c.last, c.p))
    whole = rest[rest < pick.last][: pick.p]
    if pick.with_first:
        whole = np.append(0, whole)
    part_s = min(need_s - float(lengths[whole].sum()), float(lengths[pick.last]))
    return _Plan(
        best,
        np.sort(whole),
        pick.last,
        part_s,
        pick.first_start_s,
        float(starts[pick.last] + part_s),
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
    the plan is valid, and may cost more than the best by part of a step. No windows if
    `need_s` <= 0. O(n log n) for n steps, plus the running sums of the cheapest steps
    before each step, redone from where each step joins them and as far as `need_s` reaches
    (so that they add up in one fixed order): at most n x m for plans of m steps, when
    every step is cheaper than all before it."""
    starts, lengths, vals = forecast_slots(times, values, end_s)
    ends = starts + lengths
    if lengths.sum() <= need_s:
        return starts, ends
    if need_s <= 0.0:
        return np.empty(0), np.empty(0)
    plan = _last_in_part(starts, lengths, vals, need_s, early_end=True)
    win_starts = np.append(starts[plan.whole], starts[plan.part])
    win_ends = np.append(ends[plan.whole], plan.end_s)
    if start_late:  # the same search on the time-reversed forecast: the first step in part
        back = _last_in_part(end_s - ends[::-1], lengths[::-1], vals[::-1], need_s, False)
        tol = REL_TIE * max(1.0, abs(plan.cost))
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
    """The `percentile` of the forecast over [times[0], end_s], each step weighted by its
    length there (`forecast_slots`): the smallest forecast value v such that the forecast
    is at or below v for at least `percentile` % of the window, ties to the lower value
    (`sim.api.weighted_percentile`, the one definition, which the demand-response events'
    high-carbon stretches use too); 0 gives the minimum, 100 the maximum. An empty window
    gives the current value."""
    _, lengths, vals = forecast_slots(times, values, end_s)
    if vals.size == 0 or lengths.sum() <= 0.0:
        return float(values[0])
    return weighted_percentile(vals, lengths, percentile)
