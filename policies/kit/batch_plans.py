"""Every job's planned start at once (`sim.api.BatchPlan`): the batch form of `PlannedStart`'s
plan on a perfect forecast, compiled (`sim.api.kernel`), for `lowest_window` and
`carbon_time`.

Each job is planned as `PlannedStart.defer_until` plans it at its arrival decision, with the
same operations in the same order, so the deferrals are the same floats: the forecast from
now is the signal's steps after now, cut where `DecisionForecast.cut` cuts it (before
now + (latest + runtime - now) and before the signal's end), its first value the signal's
now; its `prefix_integrals` are one sequential sum; the candidate starts are
`window_candidates`, their means `window_means`; the choice is `_first_within` of the
least mean (lowest_window) or `CarbonTime.choose_start`'s (carbon_time, `weight` >= 0).
`tests/policies/test_batch_plans.py` checks this against the policies, job by job.
"""

from __future__ import annotations

import numpy as np

from policies.kit.windows import _REL_TIE
from sim.api import BatchPlan, kernel

__all__ = ["LOWEST_WINDOW", "planned_deferrals"]

LOWEST_WINDOW = -1.0
"""`weight` that asks for the lowest window mean (lowest_window's rule), not carbon_time's."""

_MIN_DEFER_S = 1.0  # policies.kit.time_shifting.MIN_DEFER_S (which imports this module's users)


def planned_deferrals(plan: BatchPlan, latest_s: np.ndarray, weight: float) -> np.ndarray:
    """Per job, the time its arrival decision defers it to, NaN for a start now: planned in
    [now, `latest_s`] (per job, s) by the lowest window mean (`weight` = `LOWEST_WINDOW`) or
    by carbon_time's saved carbon per unit of completion time with `weight` on waiting."""
    return _plan_all(
        np.asarray(plan.now_s, dtype=float),
        np.asarray(plan.submit_s, dtype=float),
        np.asarray(latest_s, dtype=float),
        np.asarray(plan.runtime_s, dtype=float),
        np.asarray(plan.signal_times_s, dtype=float),
        np.asarray(plan.signal_values, dtype=float),
        float(plan.signal_end_s),
        float(weight),
        _REL_TIE,
        _MIN_DEFER_S,
    )


@kernel
def _plan_all(
    now_s: np.ndarray,
    submit_s: np.ndarray,
    latest_s: np.ndarray,
    runtime_s: np.ndarray,
    sig_t: np.ndarray,
    sig_v: np.ndarray,
    sig_end_s: float,
    weight: float,
    rel_tie: float,
    min_defer_s: float,
) -> np.ndarray:
    """`planned_deferrals`' loop over the jobs (compiled)."""
    n = now_s.size
    out = np.full(n, np.nan)
    for j in range(n):
        now, latest, runtime = now_s[j], latest_s[j], runtime_s[j]
        if latest - now < min_defer_s or now >= sig_end_s or not runtime > 0.0:
            continue
        # The forecast from now, cut as DecisionForecast.cut cuts it.
        cut_s = now + max(latest + runtime - now, 0.0)
        first = np.searchsorted(sig_t, now, side="right") - 1
        last = first + 1
        while last < sig_t.size and sig_t[last] < sig_end_s and sig_t[last] < cut_s:
            last += 1
        m = last - first
        times = np.empty(m)
        values = np.empty(m)
        times[0] = now
        values[0] = sig_v[first]
        times[1:] = sig_t[first + 1 : last]
        values[1:] = sig_v[first + 1 : last]
        cum = np.empty(m)
        cum[0] = 0.0
        acc = 0.0
        for k in range(1, m):
            acc += values[k - 1] * (times[k] - times[k - 1])
            cum[k] = acc
        # window_candidates(times, now, latest, runtime)
        cand = np.empty(2 * m + 2)
        c = 0
        cand[c] = now
        cand[c + 1] = max(now, latest)
        c += 2
        for k in range(m):
            for x in (times[k], times[k] - runtime):
                if x > now and x < latest:
                    cand[c] = x
                    c += 1
        starts = np.unique(cand[:c])
        # window_means(times, values, starts, runtime, cum)
        means = np.empty(starts.size)
        for k in range(starts.size):
            s = starts[k]
            e = s + runtime
            ie = np.searchsorted(times, e, side="right") - 1
            i0 = np.searchsorted(times, s, side="right") - 1
            at_end = cum[ie] + values[ie] * (e - times[ie])
            at_start = cum[i0] + values[i0] * (s - times[i0])
            means[k] = (at_end - at_start) / runtime
        if weight < 0.0:  # lowest_window: the first within the tie tolerance of the least
            best = means.min()
            k = int(np.argmax(means <= best + rel_tie * max(1.0, abs(best))))
        else:  # carbon_time: the most carbon saved per unit of completion time
            score = np.empty(starts.size)
            for k in range(starts.size):
                saved = (means[0] - means[k]) * runtime
                score[k] = -(-saved / max(runtime + weight * (starts[k] - submit_s[j]), 1e-9))
            best = score.max()
            if best <= 0.0:
                continue
            k = int(np.argmax(score >= best - 1e-9 * abs(best)))
        if starts[k] - now >= min_defer_s:
            out[j] = starts[k]
    return out
