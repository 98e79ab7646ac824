"""`planned_deferrals` (the batch engine's plan for lowest_window and carbon_time) gives
every job the deferral the policy's own `choose_start` gives it alone, to the bit: on the
forecast from the job's arrival, cut at latest start + runtime and at the signal's end, the
first value the signal's now; no deferral when the start is less than `MIN_DEFER_S` away or
there is no room to wait."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from policies.gaia import CarbonTime, LowestWindow
from policies.kit import MIN_DEFER_S, Planning, prefix_integrals, window_means
from policies.kit.batch_plans import LOWEST_WINDOW, _Forecasts, planned_deferrals
from sim.api import BatchPlan


def one_job_at_a_time(plan: BatchPlan, latest_s: np.ndarray, policy: LowestWindow) -> np.ndarray:
    """The deferrals `policy.choose_start` gives job by job (NaN: start now)."""
    t, v, end = plan.signal_times_s, plan.signal_values, plan.signal_end_s
    out = np.full(plan.now_s.size, np.nan)
    for j, (now, latest, runtime) in enumerate(
        zip(plan.now_s, latest_s, plan.runtime_s, strict=True)
    ):
        if latest - now < MIN_DEFER_S or now >= end or not runtime > 0.0:
            continue
        cut = now + max(latest + runtime - now, 0.0)
        first = np.searchsorted(t, now, side="right") - 1
        later = t[first + 1 :]
        later = later[(later < end) & (later < cut)]
        times = np.concatenate(([now], later))
        values = v[first : first + times.size].astype(float)
        planning = Planning(times, values, prefix_integrals(times, values), latest, runtime)
        start, _ = policy.choose_start(SimpleNamespace(submit_s=plan.submit_s[j]), planning)
        if start - now >= MIN_DEFER_S:
            out[j] = start
    return out


def random_plan(seed: int, jobs: int = 400) -> tuple[BatchPlan, np.ndarray]:
    """Irregular steps (some a hair apart), values from a few levels (many ties), jobs
    arriving at any time with runtimes and slacks from seconds to days."""
    rng = np.random.default_rng(seed)
    steps = rng.choice([1e-4, 0.5, 900.0, 3600.0, 3600.0, 7200.0], size=300)
    times = np.concatenate(([0.0], np.cumsum(steps)))
    values = rng.choice([100.0, 100.0 + 1e-7, 180.5, 250.0, 400.0], size=times.size)
    end = float(times[-1]) + 3600.0
    submit = np.sort(rng.uniform(0.0, end * 1.05, jobs))
    submit[::7] = times[rng.integers(0, times.size, submit[::7].size)]  # on a breakpoint
    submit.sort()
    runtime = rng.choice([0.0, 0.3, 1800.0, 3600.0, 5400.7, 86400.0 * 2], size=jobs)
    runtime[::3] *= rng.uniform(0.5, 1.5, runtime[::3].size)  # (t - r) + r may miss t
    deadline = submit + runtime + rng.choice([0.0, 0.5, 3600.0, 43200.0, 86400.0], size=jobs)
    deadline[::11] = np.nan
    plan = BatchPlan(submit, submit, deadline, runtime, times, values, end)
    latest = np.where(np.isnan(deadline), -np.inf, deadline - runtime)
    return plan, latest


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "policy", [LowestWindow(), CarbonTime(), CarbonTime(weight=0.0), CarbonTime(weight=3.0)]
)
def test_each_job_gets_the_deferral_its_policy_chooses_for_it_alone(seed, policy):
    plan, latest = random_plan(seed)
    weight = policy.weight if isinstance(policy, CarbonTime) else LOWEST_WINDOW
    want = one_job_at_a_time(plan, latest, policy)
    assert (~np.isnan(want)).sum() > 50  # the case is not trivial
    np.testing.assert_array_equal(planned_deferrals(plan, latest, weight), want)


@pytest.mark.parametrize("seed", range(4))
def test_every_candidates_window_mean_is_window_means_to_the_bit(seed):
    """Including windows that end a rounding short of a breakpoint ((t - r) + r < t)."""
    plan, latest = random_plan(seed)
    t, v, end = plan.signal_times_s, plan.signal_values, plan.signal_end_s
    jobs = np.flatnonzero((latest - plan.now_s >= MIN_DEFER_S) & (plan.runtime_s > 0.0))
    jobs = jobs[plan.now_s[jobs] < end]
    now, runtime = plan.now_s[jobs], plan.runtime_s[jobs]
    first = np.searchsorted(t, now, side="right") - 1
    cut = np.minimum(now + np.maximum(latest[jobs] + runtime - now, 0.0), end)
    last = np.maximum(first + 1, np.searchsorted(t, cut, side="left"))
    starts, means = _Forecasts(now, first, last, t, v).window_means(latest[jobs], runtime)
    short = 0
    for row in range(jobs.size):
        times = np.concatenate(([now[row]], t[first[row] + 1 : last[row]]))
        values = v[first[row] : last[row]]
        want = window_means(times, values, starts[row], runtime[row])
        np.testing.assert_array_equal(means[row], want)
        short += int(np.sum((times - runtime[row]) + runtime[row] < times))
    assert short > 0  # the case is covered
