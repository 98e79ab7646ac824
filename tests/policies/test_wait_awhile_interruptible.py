"""Specification of interruptible `wait_awhile` plans (policies/wait_awhile.py) and of the
plan search behind them, `cheapest_slots` (policies/kit/windows.py).

A job can be stopped and resumed only where forecast steps meet (the policy decides at
signal steps), a job not yet started at any moment (a deferral); so a plan is whole steps,
the last used in part from its start, or, for a job not yet started, the first up to its
end. The forecasts are hand-made, so every expected plan, run and carbon is worked out on
paper; `margin_s` is kept free before the deadline, never added to the work.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from policies.kit import cheapest_slots
from policies.wait_awhile import WaitAwhile
from sim.api import Defer
from sim.engine.build import simulate
from tests.conftest import make_scenario
from tests.policies.test_time_shifting import HOURLY, H, harness, job, trace_site


def forecast_carbon(times, values, starts, ends) -> float:
    """Integral of the step function (times, values) over the windows, g/kWh x s."""
    total = 0.0
    for s, e in zip(starts, ends, strict=True):
        edges = np.append(times, np.inf)
        for k, v in enumerate(values):
            total += v * max(0.0, min(e, edges[k + 1]) - max(s, edges[k]))
    return total


def run_alone(tmp_path, work_gpu_h: float, deadline_h: float, margin_s: float, **cols):
    """One interruptible job on the hand-made grid `HOURLY`, scheduled by interruptible
    wait_awhile: (its mean intensity while it ran, g/kWh; completion, s; suspensions)."""
    jobs = [job("j", work_gpu_h, deadline_h=deadline_h, interruptible=True, **cols)]
    scenario = make_scenario(tmp_path, jobs=jobs, sites=[trace_site(tmp_path)])
    results = simulate(scenario, WaitAwhile(interruptible=True, margin_s=margin_s))
    row = results.jobs.iloc[0]
    assert row["state"] == "completed"
    suspensions = int((results.events["kind"] == "suspend").sum())
    return 1000.0 * row["carbon_kg"] / row["energy_kwh"], row["end_s"], suspensions


# --- the plan search, on a forecast with steps of 10 s -------------------------------------

T = np.array([0.0, 10.0, 20.0, 30.0])
V = np.array([300.0, 100.0, 200.0, 50.0])  # the last step is cut to 5 s by end_s = 35


def test_a_job_not_yet_started_uses_only_the_needed_part_of_the_dearest_step_at_its_end():
    # 12 s: all 5 s of the 50 step, and 7 s of the 100 step, up to its end (greedy optimum).
    starts, ends = cheapest_slots(T, V, 35.0, 12.0, start_late=True)
    assert starts.tolist() == [13.0, 30.0] and ends.tolist() == [20.0, 35.0]
    assert forecast_carbon(T, V, starts, ends) == 7 * 100 + 5 * 50


def test_a_started_job_uses_the_last_step_in_part_as_it_cannot_stop_mid_step():
    # Started, it could not stop 7 s into the 100 step: all of it, then 2 s of the 50 step
    # (1,100), rather than 2 s of the 200 step (1,400) or 7 s of it (1,400 + 250).
    starts, ends = cheapest_slots(T, V, 35.0, 12.0)
    assert starts.tolist() == [10.0, 30.0] and ends.tolist() == [20.0, 32.0]
    assert forecast_carbon(T, V, starts, ends) == 10 * 100 + 2 * 50


def test_when_the_steps_are_too_short_together_all_of_them_are_planned():
    starts, ends = cheapest_slots(T, V, 35.0, 99.0, start_late=True)
    assert starts.tolist() == [0.0, 10.0, 20.0, 30.0] and ends.tolist() == [10.0, 20.0, 30.0, 35.0]


def best_by_enumeration(times, values, end_s, need_s, start_late) -> float:
    """The least forecast carbon of all plans a job can carry out, by trying every set of
    steps: run from the first chosen step (or, with `start_late`, from as late in it as the
    rest allows) through the chosen ones in time order until `need_s` is done."""
    starts = times[times < end_s]
    ends = np.append(starts[1:], end_s)
    best = np.inf
    for k in range(1, starts.size + 1):
        for chosen in combinations(range(starts.size), k):
            lengths = ends[list(chosen)] - starts[list(chosen)]
            if lengths.sum() < need_s - 1e-9:
                continue
            cost, left = 0.0, need_s
            for i, length in zip(chosen, lengths, strict=True):
                cost += values[i] * min(left, length)
                left -= min(left, length)
            best = min(best, cost)
            rest_s = lengths[1:].sum()
            if start_late and 0.0 < need_s - rest_s <= lengths[0]:
                rest = np.dot(values[list(chosen[1:])], lengths[1:])
                best = min(best, values[chosen[0]] * (need_s - rest_s) + rest)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_plans_cost_the_least_of_all_plans_a_job_can_carry_out(seed):
    # Hourly steps (the first cut by "now", the last by the end), random intensities with
    # ties, random needs: the plan found equals the best of every set of steps.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    times = np.concatenate(([0.0], rng.uniform(0.1, 1.0) * H + H * np.arange(n - 1)))
    values = rng.integers(1, 6, size=n).astype(float) * 50.0
    end_s = times[-1] + rng.uniform(0.2, 1.0) * H
    need_s = rng.uniform(0.05, 0.95) * end_s
    for start_late in (False, True):
        starts, ends = cheapest_slots(times, values, end_s, need_s, start_late)
        assert (ends - starts).sum() == pytest.approx(need_s)
        assert starts[0] >= 0.0 and ends[-1] <= end_s and np.all(starts[1:] >= ends[:-1])
        got = forecast_carbon(times, values, starts, ends)
        want = best_by_enumeration(times, values, end_s, need_s, start_late)
        assert got == pytest.approx(want, rel=1e-9)


# --- wait_awhile with interruptible jobs, end to end ---------------------------------------
# HOURLY: 300 g/kWh but 200 at 02:00, 100 at 06:00-09:00, 250 at 11:00 and 20 at 12:00.


def test_the_margin_does_not_make_a_job_run_a_dear_hour_whole_and_skip_a_cheaper_later_one(
    tmp_path,
):
    # Two hours of work and 60 s of margin: 06:00 (100) and 12:00 (20), a mean of 60 g/kWh.
    # Planning the margin on top of the work would add a minute of 07:00, where the job,
    # running, would go on for the whole hour and be done before 12:00 (a mean of 100).
    mean, end_s, suspensions = run_alone(tmp_path, 2.0, deadline_h=24, margin_s=60.0)
    assert mean == pytest.approx((100 + 20) / 2)
    assert end_s == pytest.approx(13 * H) and suspensions == 1


def test_a_job_not_yet_started_takes_the_needed_part_of_the_dearest_hour_at_its_end(tmp_path):
    # 2.5 h of work: 12:00 (20) and 1.5 h at 100, from 06:30 to 08:00, then 12:00. Starting
    # at 06:00, as the plan's first whole hour, it would run on to 08:30 (a mean of 100).
    h = harness(tmp_path, [job("j", 2.5, deadline_h=24, interruptible=True)])
    assert WaitAwhile(interruptible=True).decide(h.state) == [Defer(h.job("j"), 6.5 * H)]
    mean, end_s, _ = run_alone(tmp_path, 2.5, deadline_h=24, margin_s=60.0)
    assert mean == pytest.approx((1.5 * 100 + 20) / 2.5)
    assert end_s == pytest.approx(13 * H)


def test_the_margin_is_kept_free_before_the_deadline(tmp_path):
    # One hour of work due at 13:00 with 300 s of margin: the plan ends by 12:55, so the
    # cheapest is 12:00-12:55 (20) and the last 300 s of 06:00 (100); the job meets its
    # deadline with the margin to spare.
    h = harness(tmp_path, [job("j", 1.0, deadline_h=13, interruptible=True)])
    actions = WaitAwhile(interruptible=True, margin_s=300.0).decide(h.state)
    assert actions == [Defer(h.job("j"), 7 * H - 300.0)]
    mean, end_s, _ = run_alone(tmp_path, 1.0, deadline_h=13, margin_s=300.0)
    assert mean == pytest.approx((300 * 100 + 3300 * 20) / H)
    assert end_s == pytest.approx(13 * H - 300.0)


def test_a_plan_behind_by_less_than_the_margin_is_kept_and_the_job_runs_on(tmp_path):
    # With a 20 GB checkpoint, resuming at 12:00 takes a 10 s read (2 GB/s): the job ends
    # 10 s after its plan, at 13:00:10, without being suspended again or re-planned.
    mean, end_s, suspensions = run_alone(
        tmp_path, 2.0, deadline_h=24, margin_s=60.0, checkpoint_gb=20.0
    )
    assert end_s == pytest.approx(13 * H + 10.0) and suspensions == 1
    assert HOURLY[12] < mean < HOURLY[6]
