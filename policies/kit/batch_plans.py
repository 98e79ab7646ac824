"""Every job's planned start at once (`sim.api.BatchPlan`): the batch form of `PlannedStart`'s
plan on a perfect forecast, for `lowest_window` and `carbon_time`, in numpy passes over
blocks of jobs.

Each job is planned as `PlannedStart.defer_until` plans it at its arrival decision, with the
same operations on the same numbers, so the deferrals are the same floats: the forecast from
now is the signal's steps after now, cut where `DecisionForecast.cut` cuts it (before
now + (latest + runtime - now) and before the signal's end), its first value the signal's
now; its `prefix_integrals` are one sequential sum (a row's `np.cumsum`); the candidate
starts are `window_candidates`', their means `window_means`'; the choice is `_first_within`
of the least mean (lowest_window) or `CarbonTime.choose_start`'s (carbon_time, `weight` >=
0). The jobs' forecasts differ in length: a block holds jobs of similar lengths (sorted by
it), each row padded to the block's longest. A row's candidates are in no order and may
repeat (the padding repeats now): a repeated start has the same mean and score, and the
choice is the least start within the tolerance of the best, the first in start order, as
among the unique ascending candidates. `tests/policies/test_batch_plans.py` checks this
against the policies' own functions, job by job.
"""

from __future__ import annotations

import numpy as np

from policies.kit.windows import MIN_DEFER_S, REL_TIE
from sim.api import BatchPlan

__all__ = ["LOWEST_WINDOW", "planned_deferrals"]

LOWEST_WINDOW = -1.0
"""`weight` that asks for the lowest window mean (lowest_window's rule), not carbon_time's."""

BLOCK_ROWS = 1024
"""Jobs planned together: a block's arrays hold rows x (2 x its longest forecast + 2)
candidates (under 2 MB each on GAIA's PAI trace, whose forecasts have < 100 steps; blocks
of 8192 jobs took 20% longer there, in fresh memory)."""


def planned_deferrals(plan: BatchPlan, latest_s: np.ndarray, weight: float) -> np.ndarray:
    """Per job, the time its arrival decision defers it to, NaN for a start now: planned in
    [now, `latest_s`] (per job, s) by the lowest window mean (`weight` = `LOWEST_WINDOW`) or
    by carbon_time's saved carbon per unit of completion time with `weight` on waiting."""
    now = np.asarray(plan.now_s, dtype=float)
    latest = np.asarray(latest_s, dtype=float)
    runtime = np.asarray(plan.runtime_s, dtype=float)
    sig_t = np.asarray(plan.signal_times_s, dtype=float)
    sig_end = float(plan.signal_end_s)
    out = np.full(now.size, np.nan)
    # The jobs that may wait; each one's forecast is the signal's steps [first, last).
    jobs = np.flatnonzero((latest - now >= MIN_DEFER_S) & (now < sig_end) & (runtime > 0.0))
    first = np.searchsorted(sig_t, now[jobs], side="right") - 1
    cut = now[jobs] + np.maximum(latest[jobs] + runtime[jobs] - now[jobs], 0.0)
    last = np.maximum(first + 1, np.searchsorted(sig_t, np.minimum(cut, sig_end), side="left"))
    order = np.argsort(last - first, kind="stable")  # blocks of similar lengths
    for at in range(0, order.size, BLOCK_ROWS):
        rows = order[at : at + BLOCK_ROWS]
        block = jobs[rows]
        forecast = _Forecasts(now[block], first[rows], last[rows], sig_t, plan.signal_values)
        starts, means = forecast.window_means(latest[block], runtime[block])
        out[block] = _choice(
            starts, means, now[block], plan.submit_s[block], runtime[block], weight
        )
    return out


class _Forecasts:
    """A block's forecasts from now (one a row, padded to the longest), their prefix
    integrals, and window means at candidate starts."""

    def __init__(
        self, now_s: np.ndarray, first: np.ndarray, last: np.ndarray, sig_t: np.ndarray,
        sig_v: np.ndarray,
    ) -> None:  # fmt: skip
        self.now_s, self.first, self.last_step = now_s[:, None], first[:, None], last - first - 1
        self.sig_t = sig_t
        self.step = np.arange(int(self.last_step.max()) + 1)
        self.valid = self.step <= self.last_step[:, None]
        at = np.minimum(first[:, None] + self.step, sig_t.size - 1)
        self.times = sig_t[at]
        self.times[:, 0] = now_s
        self.values = np.asarray(sig_v, dtype=float)[at]
        # prefix_integrals, row by row: one sequential sum each (the padding's never read)
        self.cum = np.zeros(self.times.shape)
        np.cumsum(self.values[:, :-1] * np.diff(self.times, axis=1), axis=1, out=self.cum[:, 1:])
        self._row_at = (np.arange(now_s.size) * self.step.size)[:, None]

    def window_means(
        self, latest_s: np.ndarray, runtime_s: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(candidate starts; their window means over `runtime_s`, g/kWh), per row:
        `window_candidates` (in no order; a row's padding and the candidates out of
        (now, latest) repeat its first, now) and their `window_means`. A breakpoint's step
        is known, and so is that of the end of a window ending at one."""
        now, latest, length = self.now_s, latest_s[:, None], runtime_s[:, None]
        ends = np.maximum(now, latest)
        at_bound = (self.integral(ends + length) - self.integral(ends)) / length
        at_now = (self.integral(now + length) - self.integral(now, 0)) / length
        # Windows starting at a breakpoint: its prefix integral is cum (+ its value x 0).
        at_break = (self.integral(self.times + length) - self.cum) / length
        # Windows ending at a breakpoint (up to rounding: then in the step before it).
        before = self.times - length
        after = before + length
        end = self.cum + self.values * (after - self.times)
        short = np.nonzero(after < self.times)
        k = np.maximum(short[1] - 1, 0)
        end[short] = self.cum[short[0], k] + self.values[short[0], k] * (
            after[short] - self.times[short[0], k]
        )
        to_break = (end - self.integral(before)) / length
        starts = np.concatenate((now, ends, self.times, before), axis=1)
        means = np.concatenate((at_now, at_bound, at_break, to_break), axis=1)
        inner = np.tile(self.valid, 2) & (starts[:, 2:] > now) & (starts[:, 2:] < latest)
        starts[:, 2:] = np.where(inner, starts[:, 2:], now)
        means[:, 2:] = np.where(inner, means[:, 2:], at_now)
        return starts, means

    def integral(self, x_s: np.ndarray, step: int | None = None) -> np.ndarray:
        """The integral from now to `x_s` (>= now, per row), (g/kWh) x s, as `window_means`
        takes it: the prefix integral to x's forecast step (`step` if known) plus the
        step's value over the rest."""
        if step is None:
            found = np.searchsorted(self.sig_t, x_s, side="right") - self.first - 1
            at = self._row_at + np.clip(found, 0, self.last_step[:, None])
        else:
            at = self._row_at + step
        t, v, cum = self.times.ravel()[at], self.values.ravel()[at], self.cum.ravel()[at]
        return cum + v * (x_s - t)


def _choice(
    starts: np.ndarray, means: np.ndarray, now_s: np.ndarray, submit_s: np.ndarray,
    runtime_s: np.ndarray, weight: float,
) -> np.ndarray:  # fmt: skip
    """Per row, the deferral to the chosen start (NaN: start now): the earliest within the
    tie tolerance of the least mean (`weight` < 0), or of the most carbon saved per unit of
    completion time (carbon_time's `choose_start`; none if nothing is saved)."""
    if weight < 0.0:
        best = means.min(axis=1)
        chosen = means <= (best + REL_TIE * np.maximum(1.0, np.abs(best)))[:, None]
        saves = np.ones(best.size, dtype=bool)
    else:
        length = runtime_s[:, None]
        saved = (means[:, :1] - means) * length
        score = -(-saved / np.maximum(length + weight * (starts - submit_s[:, None]), 1e-9))
        best = score.max(axis=1)
        chosen = score >= (best - 1e-9 * np.abs(best))[:, None]
        saves = best > 0.0
    start = np.where(chosen, starts, np.inf).min(axis=1)
    return np.where(saves & (start - now_s >= MIN_DEFER_S), start, np.nan)
