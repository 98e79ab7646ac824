"""`cheapest_slots` (policies/kit/windows.py) against its first implementation, kept here
verbatim as the specification: an O(n^2) search over every last step and every count of
cheapest steps before it. The fast search must return the same windows, bit for bit, on
random forecasts (ties in values, steps of any length, grids where sums are exact), with
and without `start_late`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from policies.kit import windows
from policies.kit.windows import REL_TIE, SLIVER_S, forecast_slots

# --- the reference: the first implementation, verbatim -------------------------------------


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
    ties = np.flatnonzero(costs <= best + REL_TIE * max(1.0, abs(best)))
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


# --- the fast search against it -------------------------------------------------------------


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(times, values, end_s, need_s): a forecast of 1 to 30 steps from a random "now", on an
    hourly grid (sums of lengths exact, so needs of whole steps hit parts of exactly 0) or of
    random lengths (sums rounded, in an order that depends on the plan); values from a few
    levels (many ties) or continuous; an end inside a step or on a breakpoint; a need from a
    hair to more than everything."""
    n = int(rng.integers(1, 31))
    if rng.random() < 0.5:
        grid = 3600.0 * np.arange(1, n)
        times = np.concatenate(([grid[0] - rng.uniform(0.0, 3600.0)] if n > 1 else [0.0], grid))
    else:
        times = np.cumsum(np.concatenate(([rng.uniform(-1e5, 1e5)], rng.uniform(1.0, 5e3, n - 1))))
    levels = int(rng.choice([1, 2, 3, 1000]))
    values = rng.integers(0, levels, size=n).astype(float) * 50.0 + (levels == 1000) * rng.random(n)
    last_s = times[-1] + rng.uniform(1.0, 5e3)
    end_s = float(rng.choice([last_s, *times[1:]])) if rng.random() < 0.2 else last_s
    span_s = end_s - times[0]
    kind = rng.integers(0, 5)
    if kind == 0:
        need_s = float(rng.choice([1e-9, 1e-3, 1.0, span_s, 2.0 * span_s]))
    elif kind == 1:  # whole hours: plans that fill their last step exactly
        need_s = 3600.0 * int(rng.integers(1, n + 1))
    else:
        need_s = rng.uniform(0.0, 1.1) * span_s
    return times, values, end_s, need_s


@pytest.mark.parametrize("seed", range(10))
def test_the_fast_search_returns_the_reference_windows_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        times, values, end_s, need_s = random_case(rng)
        for start_late in (False, True):
            want = cheapest_slots(times, values, end_s, need_s, start_late)
            got = windows.cheapest_slots(times, values, end_s, need_s, start_late)
            assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_a_forecast_that_falls_at_every_step_gives_the_reference_windows():
    # Every step cheaper than all before it: the running sums are redone at every step.
    times = 300.0 * np.arange(200) + 17.25
    values = 500.0 - np.arange(200.0) + np.linspace(0.0, 0.3, 200) ** 2
    for need_s in (1e-6, 3000.0, 12345.6, 30000.0, 59000.0):
        for start_late in (False, True):
            want = cheapest_slots(times, values, 60000.0, need_s, start_late)
            got = windows.cheapest_slots(times, values, 60000.0, need_s, start_late)
            assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_no_windows_for_no_need():
    # The reference answered a window that ends before it starts.
    starts, ends = windows.cheapest_slots(np.array([0.0, 10.0]), np.array([1.0, 2.0]), 20.0, 0.0)
    assert starts.size == 0 and ends.size == 0
