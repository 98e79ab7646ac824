"""Specification of the time-shifting policies: wait_awhile, carbon_threshold, lowest_window,
carbon_time (policies/wait_awhile.py, carbon_threshold.py, gaia.py; shared pieces in
policies/kit: time_shifting.py and windows.py).

Unit tests drive a real engine by hand (`PolicyHarness`) on one site whose grid follows a
hand-made hourly trace, so every expected action can be worked out on paper; end-to-end
tests run the policies on California's real 2020 grid. Interruptible plans in detail:
test_wait_awhile_interruptible.py.
"""

from __future__ import annotations

import copy
import json
from functools import cache

import numpy as np
import pandas as pd
import pytest

from policies.carbon_threshold import CarbonThreshold
from policies.gaia import CarbonTime, LowestWindow
from policies.kit import (
    MIN_DEFER_S,
    Planning,
    WindowMean,
    best_window_plan,
    best_window_start,
    prefix_integrals,
    runtime_s,
    start_now_until,
    time_weighted_percentile,
    window_candidates,
    window_means,
)
from policies.kit.time_shifting import _FLEXIBLE
from policies.run_now import RunNow
from policies.wait_awhile import WaitAwhile
from sim.api import Defer, Resume, SetCap, Start, Suspend
from sim.config.loading import load_scenario
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import REPO, make_scenario, run_cli, site
from tests.grid.archives import issued_archive

H = 3600.0

# The grid of the unit tests, g/kWh, hour by hour from the scenario start: a one-hour dip at
# 02:00, a three-hour valley at 06:00-09:00, a very clean hour at 12:00, 300 otherwise.
HOURLY = [300, 300, 200, 300, 300, 300, 100, 100, 100, 300, 300, 250, 20] + [300] * 35


def trace_site(tmp_path) -> dict:
    rows = [f"2020-06-01T{h:02d}:00:00Z,{v}" for h, v in enumerate(HOURLY[:24])]
    rows += [f"2020-06-02T{h:02d}:00:00Z,{v}" for h, v in enumerate(HOURLY[24:])]
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,carbon_intensity\n" + "\n".join(rows) + "\n")
    return site(name="a", carbon={"file": str(path)})


def job(job_id: str, work_gpu_h: float, deadline_h: float | None = None, **cols) -> dict:
    """A one-GPU job submitted at 0 (runtime = work_gpu_h on the site's A100-80GB)."""
    row = {"job_id": job_id, "submit_time": 0.0, "gpus": 1, "work_gpu_h": work_gpu_h}
    row["deadline"] = "" if deadline_h is None else deadline_h * H
    return row | cols


def harness(tmp_path, jobs: list[dict], **overrides) -> PolicyHarness:
    """A paused run of `jobs` on the trace site, at time 0 (jobs submitted then pending)."""
    scenario = make_scenario(tmp_path, jobs=jobs, sites=[trace_site(tmp_path)], **overrides)
    return PolicyHarness(scenario).advance(0.0)


def start(h: PolicyHarness, job_id: str) -> Start:
    return Start(h.job(job_id), "a", gpu_model="A100-80GB")


# --- the window arithmetic ---------------------------------------------------------------


def test_window_means_are_exact_integrals_of_the_step_function():
    t = np.array([0.0, 10.0, 20.0])
    v = np.array([300.0, 100.0, 50.0])  # the last value holds on
    assert window_means(t, v, np.array([0.0, 5.0, 15.0, 30.0]), 10.0).tolist() == [
        300.0,
        200.0,
        75.0,
        50.0,
    ]


@pytest.mark.parametrize("seed", range(5))
def test_one_window_at_a_time_gives_what_window_means_gives_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    t = np.concatenate(([0.0], np.cumsum(rng.uniform(0.2, 3.0, 15))))
    v = rng.uniform(0.0, 500.0, t.size)
    mean = WindowMean(t, v)
    for start_s, length_s in zip(
        rng.uniform(0.0, 50.0, 30), rng.uniform(0.0, 20.0, 30), strict=True
    ):
        expected = window_means(t, v, np.array([start_s]), length_s)[0]
        assert mean(float(start_s), float(length_s)) == expected
    assert mean(3.0, 0.0) == window_means(t, v, np.array([3.0]), 0.0)[0]


@pytest.mark.parametrize("seed", range(20))
def test_the_best_window_is_at_least_as_good_as_any_start_on_a_fine_grid(seed):
    rng = np.random.default_rng(seed)
    t = np.concatenate(([0.0], np.cumsum(rng.uniform(0.2, 3.0, 15))))
    v = rng.uniform(0.0, 500.0, t.size)
    length, latest = rng.uniform(0.1, 8.0), rng.uniform(0.0, 30.0)
    best, mean = best_window_start(t, v, 0.0, latest, length)
    assert 0.0 <= best <= latest
    assert mean == pytest.approx(window_means(t, v, np.array([best]), length)[0])
    grid = np.linspace(0.0, latest, 4001)
    assert mean <= window_means(t, v, grid, length).min() + 1e-9


def _reference_candidates(t, earliest, latest, length):
    """`window_candidates` as first written (the specification of its bits)."""
    inner = np.concatenate((t, t - length))
    inner = inner[(inner > earliest) & (inner < latest)]
    return np.unique(np.concatenate(([earliest, max(earliest, latest)], inner)))


def _reference_means(t, v, starts, length):
    """`window_means` as first written: one cumulative sum per integral asked."""

    def integral_at(x):
        cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
        i = np.searchsorted(t, x, side="right") - 1
        return cum[i] + v[i] * (x - t[i])

    return (integral_at(starts + length) - integral_at(starts)) / length


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_window_arithmetic_gives_the_reference_bits(seed):
    """Same candidates and same means, bit for bit, as the first (slower) formulation, on
    forecasts whose breakpoints the windows' ends meet exactly and whose values tie; and the
    prefix sums of a forecast cut short are the first ones of the whole."""
    rng = np.random.default_rng(seed)
    hourly = seed % 2 == 0  # windows of whole hours meet breakpoints exactly
    steps = np.full(30, H) if hourly else rng.uniform(0.2, 3.0, 30) * H
    t = rng.uniform(0.0, H) + np.concatenate(([0.0], np.cumsum(steps)))
    v = rng.choice([100.0, 250.0, 300.0], t.size) if seed % 4 < 2 else rng.uniform(0, 500, t.size)
    length = float(rng.integers(1, 6)) * H if hourly else rng.uniform(0.0, 8.0) * H
    earliest = float(t[0]) + rng.choice([0.0, rng.uniform(0.0, H)])
    latest = earliest + rng.uniform(-H, 20 * H)
    starts = window_candidates(t, earliest, latest, length)
    assert starts.tolist() == _reference_candidates(t, earliest, latest, length).tolist()
    means = window_means(t, v, starts, length)
    assert means.tolist() == _reference_means(t, v, starts, length).tolist()
    cum = prefix_integrals(t, v)
    assert window_means(t, v, starts, length, cum).tolist() == means.tolist()
    cut = int(rng.integers(1, t.size))
    assert prefix_integrals(t[:cut], v[:cut]).tolist() == cum[:cut].tolist()


@pytest.mark.parametrize("seed", range(30))
def test_a_start_now_answer_holds_from_every_later_time_until_the_promised_one(seed):
    """`best_window_plan`: from any t before `holds_until_s`, the best window over [t,
    latest] of the same forecast (cut at the same end) starts at t; a later start promises
    nothing."""
    rng = np.random.default_rng(seed)
    t = np.concatenate(
        ([0.0], np.cumsum(np.full(30, H) if seed % 2 else rng.uniform(0.3, 2, 30) * H))
    )
    v = rng.choice([100.0, 200.0, 300.0], t.size) if seed % 3 == 0 else rng.uniform(0, 500, t.size)
    v[: seed % 4] = 50.0  # a clean start: starting now is best, for a while
    length, latest = rng.uniform(0.2, 6.0) * H, rng.uniform(2.0, 20.0) * H
    end = latest + length
    times, values = t[t < end], v[t < end]
    start, until = best_window_plan(times, values, 0.0, latest, length)
    assert start == best_window_start(times, values, 0.0, latest, length)[0]
    if start > 0.0:
        assert until == 0.0
    spread = np.linspace(0.0, until, 50, endpoint=False)[1:]
    for now in np.append(spread, until * (1.0 - 1e-12)) if until > 0.0 else []:
        k = np.searchsorted(times, now, side="right") - 1
        later_t = np.concatenate(([now], times[k + 1 :]))
        assert best_window_start(later_t, values[k:], now, latest, length)[0] == now


class _Submitted:
    """The one job attribute `CarbonTime.choose_start` reads."""

    submit_s = -2 * H


def _carbon_time_start(times, values, latest, length) -> tuple[float, float]:
    """`CarbonTime().choose_start` on the forecast (times, values), from times[0]."""
    plan = Planning(times, values, prefix_integrals(times, values), latest, length)
    return CarbonTime().choose_start(_Submitted(), plan)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(40))
def test_carbon_time_start_now_holds_from_every_later_time_until_the_promised_one(seed):
    """From any t before `holds_until_s`, carbon_time planning on the same forecast (cut
    at the same end) starts the job now: at t, or less than `MIN_DEFER_S` later. Rising
    forecasts, with a dip later, keep the answer for a while."""
    rng = np.random.default_rng(seed)
    t = np.concatenate(
        ([0.0], np.cumsum(np.full(30, H) if seed % 2 else rng.uniform(0.3, 2, 30) * H))
    )
    v = np.sort(rng.uniform(50, 500, t.size)) + rng.uniform(0, 60 * (seed % 3), t.size)
    v[rng.integers(4, 30)] = rng.uniform(0, 300)  # a dip somewhere later
    if seed % 5 == 0:
        v[1:3] = v[0] + 1e-12  # a rise within the rounding guard: nothing is certain
    length, latest = rng.uniform(0.2, 6.0) * H, rng.uniform(2.0, 20.0) * H
    end = latest + length
    times, values = t[t < end], v[t < end]
    start, until = _carbon_time_start(times, values, latest, length)
    if start > 0.0:
        assert until == 0.0
    # Times spread over the promise, and a quarter of a second before each later
    # candidate (which may then be near enough to count as now).
    candidates = window_candidates(times, 0.0, latest, length)
    spread = np.linspace(0.0, until, 200, endpoint=False)[1:]
    for now in np.concatenate((spread, candidates - 0.25)) if until > 0.0 else []:
        if not 0.0 < now < until:
            continue
        k = np.searchsorted(times, now, side="right") - 1
        later_t = np.concatenate(([now], times[k + 1 :]))
        assert _carbon_time_start(later_t, values[k:], latest, length)[0] - now < MIN_DEFER_S


def test_carbon_time_promises_start_now_until_a_later_start_may_save_carbon():
    # Hourly 100, 200, 300, 150: a 1-hour window's mean rises from 100 (now) to 300
    # (starting at 2 h) and falls to 150 at 3 h, which starting now beats until its own
    # mean reaches 150, half an hour in.
    times, values = np.array([0.0, H, 2 * H, 3 * H]), np.array([100.0, 200.0, 300.0, 150.0])
    starts = window_candidates(times, 0.0, 3 * H, H)
    means = window_means(times, values, starts, H)
    until = start_now_until(times, values, starts, means, H, MIN_DEFER_S)
    assert 0.5 * H - 1e-3 < until < 0.5 * H
    assert _carbon_time_start(times, values, 3 * H, H) == (0.0, until)
    # A flat start (equal means) or a later start as good as now promises nothing.
    flat = np.array([100.0, 100.0, 300.0, 150.0])
    assert _carbon_time_start(times, flat, 3 * H, H) == (0.0, 0.0)
    # The mean rises to 200 at 1 h, and the window at 3 h is a hair cleaner (199.99): from
    # a quarter of a second before 1 h, it saves carbon (starting at 1 h does not, and is
    # near enough to count as now anyway), so the promise ends before.
    times = np.array([0.0, H, 2 * H, 3 * H, 4 * H])
    values = np.array([100.0, 200.0, 300.0, 199.99, 300.0])
    start, until = _carbon_time_start(times, values, 3 * H, H)
    assert start == 0.0 and H - MIN_DEFER_S < until < H - 0.25
    later = H - 0.25
    assert _carbon_time_start(np.array([later, *times[1:]]), values, 3 * H, H)[0] == 3 * H


def test_percentiles_are_weighted_by_how_long_each_value_holds():
    t = np.array([0.0, 1.0, 4.0])
    v = np.array([20.0, 100.0, 300.0])  # 1 s at 20, 3 s at 100, 6 s at 300 up to 10 s
    assert [time_weighted_percentile(t, v, 10.0, p) for p in (0, 10, 11, 40, 41, 100)] == [
        20.0,
        20.0,
        100.0,
        100.0,
        300.0,
        300.0,
    ]


# --- wait_awhile ---------------------------------------------------------------------------


def test_wait_awhile_defers_a_job_to_the_cleanest_window_and_starts_it_then(tmp_path):
    h = harness(tmp_path, [job("j", 3.0, deadline_h=24)])
    policy = WaitAwhile()
    actions = policy.decide(h.state)
    assert actions == [Defer(h.job("j"), 6 * H)]  # [06:00, 09:00) averages 100 g/kWh
    h.apply(actions)
    assert policy.decide(h.advance(3 * H).state) == []  # deferred: not even seen
    h.advance(6 * H)
    actions = policy.decide(h.state)
    assert actions == [start(h, "j")]  # back from its deferral: started, not planned again
    h.apply(actions).advance(9 * H + 1)
    assert h.job("j").state == "completed"
    assert h.times("j")[1] == pytest.approx(9 * H)


def test_wait_awhile_finds_the_exact_best_start_between_breakpoints(tmp_path):
    # A 1.5-hour job: [11:30, 13:00) = half an hour at 250 and the hour at 20, mean 96.7,
    # beats the valley (100). Its window ends on a breakpoint, its start is on none.
    h = harness(tmp_path, [job("j", 1.5, deadline_h=24)])
    actions = WaitAwhile().decide(h.state)
    assert actions == [Defer(h.job("j"), 11.5 * H)]
    h.apply(actions)


def test_wait_awhile_never_plans_a_start_after_deadline_minus_runtime_minus_margin(tmp_path):
    # Deadline 08:00, 3 hours of work: the latest start is 05:00 - 60 s; the later, the more
    # of the valley the window covers, so that is where the job goes.
    h = harness(tmp_path, [job("j", 3.0, deadline_h=8)])
    actions = WaitAwhile().decide(h.state)
    assert actions == [Defer(h.job("j"), 5 * H - 60.0)]
    h.apply(actions)
    actions = WaitAwhile(margin_s=0.0).decide(
        harness(tmp_path, [job("k", 3.0, deadline_h=8)]).state
    )
    assert [a.until_s for a in actions] == [5 * H]


def test_wait_awhile_starts_now_when_waiting_gains_nothing(tmp_path):
    # Deadline 05:00: every window of [0, 02:00) holds the dip at 02:00 whole: a tie, and
    # the earliest start, now, wins.
    h = harness(tmp_path, [job("j", 3.0, deadline_h=5)])
    actions = WaitAwhile().decide(h.state)
    assert actions == [start(h, "j")]
    h.apply(actions)


@pytest.mark.parametrize(
    "policy",
    [
        WaitAwhile(),
        WaitAwhile(interruptible=True),
        CarbonThreshold(threshold_g_per_kwh=50.0),
        CarbonThreshold(percentile=10.0),
        LowestWindow(),
        CarbonTime(),
    ],
    ids=repr,
)
def test_a_job_without_a_deadline_starts_now_like_run_now(tmp_path, policy):
    h = harness(tmp_path, [job("j", 3.0, interruptible=True)])
    actions = policy.decide(h.state)
    assert actions == RunNow().decide(h.state) == [start(h, "j")]
    h.apply(actions)


def test_like_run_now_a_job_that_does_not_fit_holds_later_ones_back_unless_backfill(tmp_path):
    jobs = [
        job("first", 9.0, gpus=3),
        job("big", 16.0, gpus=4),
        job("small", 1.0),
        job("flex", 1.0, deadline_h=24),
    ]
    h = harness(tmp_path, jobs)
    h.apply([start(h, "first")])  # 1 of the 4 GPUs left
    held = WaitAwhile().decide(h.state)
    assert held == [Defer(h.job("flex"), 12 * H)]  # "small" waits behind "big"
    assert WaitAwhile(backfill=True).decide(h.state) == [start(h, "small"), held[0]]
    h.apply(held)


# --- wait_awhile with interruptible jobs --------------------------------------------------


def test_interruptible_jobs_run_in_the_cheapest_hours_and_are_suspended_in_between(tmp_path):
    # Two hours of work: the cleanest hours before the deadline are 12:00 (20) and 06:00
    # (100, the earliest of three equal ones).
    h = harness(tmp_path, [job("j", 2.0, deadline_h=24, interruptible=True)])
    policy = WaitAwhile(interruptible=True, margin_s=0.0)
    assert policy.signal_steps is True and WaitAwhile().signal_steps is False
    j = h.job("j")
    steps = []
    for t in (0, 6, 7, 12):
        actions = policy.decide(h.advance(t * H).state)
        h.apply(actions)
        steps.append((t, actions))
    assert steps == [
        (0, [Defer(j, 6 * H)]),
        (6, [Start(j, "a", gpu_model="A100-80GB")]),
        (7, [Suspend(j)]),
        (12, [Resume(j, "a", gpu_model="A100-80GB")]),
    ]
    h.advance(13 * H + 1)
    assert j.state == "completed" and h.times(j.id)[1] == pytest.approx(13 * H)


def test_only_the_needed_part_of_the_dearest_chosen_hour_is_used_at_its_end(tmp_path):
    # 1.5 hours of work: all of 12:00, and half an hour of 06:00, taken at 06:30.
    h = harness(tmp_path, [job("j", 1.5, deadline_h=24, interruptible=True)])
    actions = WaitAwhile(interruptible=True, margin_s=0.0).decide(h.state)
    assert actions == [Defer(h.job("j"), 6.5 * H)]
    h.apply(actions)


@pytest.mark.parametrize("replan", ["when_behind", "always"])
def test_a_job_behind_its_plan_is_planned_again_and_still_meets_its_deadline(tmp_path, replan):
    # Planned for 06:00 and 12:00, but nobody started it at 06:00 (no GPUs, say). At 11:00
    # two hours of work are left and [11:00, 14:00) holds 250, 20, 300: it must run now.
    h = harness(tmp_path, [job("j", 2.0, deadline_h=14, interruptible=True)])
    policy = WaitAwhile(interruptible=True, margin_s=0.0, replan=replan)
    first = policy.decide(h.state)
    assert first == [Defer(h.job("j"), 6 * H)]
    h.apply(first).advance(11 * H)
    actions = policy.decide(h.state)
    assert actions == [start(h, "j")]
    h.apply(actions).advance(14 * H)
    assert h.job("j").state == "completed"
    assert h.times("j")[1] <= 14 * H


def test_jobs_suspended_by_others_are_left_to_them(tmp_path):
    h = harness(tmp_path, [job("j", 2.0, deadline_h=24, interruptible=True)])
    h.apply([start(h, "j")]).advance(H).apply([Suspend(h.job("j"))])
    assert WaitAwhile(interruptible=True).decide(h.advance(12 * H).state) == []


# --- carbon_threshold ----------------------------------------------------------------------


def test_carbon_threshold_waits_step_by_step_for_a_clean_enough_hour(tmp_path):
    h = harness(tmp_path, [job("j", 1.0, deadline_h=24)])
    policy = CarbonThreshold(threshold_g_per_kwh=250.0)
    j = h.job("j")
    log = []
    for t in (0, 1, 2):
        actions = policy.decide(h.advance(t * H).state)
        h.apply(actions)
        log.append(actions)
    assert log == [[Defer(j, 1 * H)], [Defer(j, 2 * H)], [start(h, "j")]]  # 300, 300, 200


def test_carbon_threshold_starts_at_the_latest_start_whatever_the_intensity(tmp_path):
    # Nothing is at or below 10 g/kWh. Deadline 04:30, one hour of work, no margin: the
    # latest start 03:30 comes before the next step (04:00), and there the job starts.
    h = harness(tmp_path, [job("j", 1.0, deadline_h=4.5)])
    policy = CarbonThreshold(threshold_g_per_kwh=10.0, margin_s=0.0)
    j = h.job("j")
    log = []
    for t in (0, 1, 2, 3, 3.5):
        actions = policy.decide(h.advance(t * H).state)
        h.apply(actions)
        log.append(actions)
    assert log == [
        [Defer(j, 1 * H)],
        [Defer(j, 2 * H)],
        [Defer(j, 3 * H)],
        [Defer(j, 3.5 * H)],
        [start(h, "j")],
    ]
    h.advance(4.5 * H)
    assert j.state == "completed"


def test_a_percentile_threshold_is_taken_over_the_jobs_window_weighted_by_time(tmp_path):
    # Over [0, 24:00): 20 for 1 h (4 %), 100 for 3 h (to 17 %), then 200, 250 and 300.
    h = harness(tmp_path, [job("j", 1.0, deadline_h=24)])
    j = h.job("j")
    assert CarbonThreshold(percentile=10.0).threshold(h.state, j) == 100.0
    assert CarbonThreshold(percentile=0.0).threshold(h.state, j) == 20.0
    assert CarbonThreshold(percentile=100.0).threshold(h.state, j) == 300.0
    policy = CarbonThreshold(percentile=10.0)
    h.apply(policy.decide(h.state))  # 300 > 100: deferred
    for t in (1, 2, 3, 4, 5, 6):  # step by step
        h.advance(t * H)
        h.apply(policy.decide(h.state))
    assert j.state == "running"  # 06:00: 100 is at or below the 10th percentile
    assert h.times(j.id)[0] == 6 * H


# --- lowest_window and carbon_time (GAIA) -------------------------------------------------


def two_jobs() -> list[dict]:
    return [job("early", 3.0, deadline_h=24), job("late", 3.0, deadline_h=24, submit_time=H)]


def test_lowest_window_waits_at_most_max_wait_h_after_submission(tmp_path):
    # At 01:00: "early" may start until 04:00 ([04:00, 07:00) averages 233), "late" until
    # 05:00 ([05:00, 08:00) averages 167); without the bound both would wait for 06:00.
    h = harness(tmp_path, two_jobs()).advance(H)
    actions = LowestWindow(max_wait_h=4.0).decide(h.state)
    assert actions == [Defer(h.job("early"), 4 * H), Defer(h.job("late"), 5 * H)]
    h.apply(actions)


def test_lowest_window_without_a_bound_is_wait_awhile(tmp_path):
    h = harness(tmp_path, two_jobs()).advance(H)
    actions = LowestWindow().decide(h.state)
    assert (
        actions
        == WaitAwhile().decide(h.state)
        == [
            Defer(h.job("early"), 6 * H),
            Defer(h.job("late"), 6 * H),
        ]
    )
    h.apply(actions)


def test_carbon_time_maximises_carbon_saved_per_hour_of_completion_time(tmp_path):
    # A 1.5-hour job, 300 g/kWh now. Starting at 06:00 saves 200 g/kWh x 1.5 h over a
    # completion time of 7.5 h (40 per h); 11:30, the lowest window (96.7), saves 203.3 x
    # 1.5 h over 13 h (23.5 per h). GAIA's Carbon-Time takes 06:00; weight 0 counts carbon
    # alone and is lowest_window.
    h = harness(tmp_path, [job("j", 1.5, deadline_h=24)])
    j = h.job("j")
    assert CarbonTime().decide(h.state) == [Defer(j, 6 * H)]
    assert CarbonTime(weight=0.0).decide(h.state) == [Defer(j, 11.5 * H)]
    assert LowestWindow().decide(h.state) == [Defer(j, 11.5 * H)]
    h.apply(CarbonTime().decide(h.state))


def test_carbon_time_starts_now_when_no_later_start_saves_carbon(tmp_path):
    h = harness(tmp_path, [job("j", 1.5, deadline_h=24, submit_time=12 * H)]).advance(12 * H)
    actions = CarbonTime().decide(h.state)
    assert actions == [start(h, "j")]  # 20 g/kWh now
    h.apply(actions)


# --- parameters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "named"),
    [
        ("carbon_threshold", {}, "threshold_g_per_kwh or percentile"),
        ("carbon_threshold", {"threshold_g_per_kwh": 100, "percentile": 30}, "exactly one"),
        ("carbon_threshold", {"percentile": 101}, "percentile"),
        ("carbon_threshold", {"threshold_g_per_kwh": -1}, "threshold_g_per_kwh"),
        ("wait_awhile", {"margin_s": -5}, "margin_s"),
        ("wait_awhile", {"replan": "sometimes"}, "replan"),
        ("wait_awhile", {"interruptable": True}, "interruptable"),
        ("lowest_window", {"max_wait_h": -1}, "max_wait_h"),
        ("carbon_time", {"weight": -0.5}, "weight"),
        ("carbon_time", {"weight": "heavy"}, "weight"),
    ],
)
def test_bad_parameters_are_scenario_errors_naming_the_parameter(name, params, named):
    with pytest.raises(ScenarioError, match=named):
        build_policy(name, params)


def test_good_parameters_build_the_policies():
    assert build_policy("wait_awhile", {"interruptible": True}) == WaitAwhile(interruptible=True)
    assert build_policy("carbon_threshold", {"percentile": 30}) == CarbonThreshold(percentile=30)
    assert build_policy("lowest_window", {"max_wait_h": 6}) == LowestWindow(max_wait_h=6)
    assert build_policy("carbon_time", {"weight": 0.5}) == CarbonTime(weight=0.5)


# --- every action valid, in whole runs -----------------------------------------------------


class Recording:
    """Passes a policy's actions through, keeping them."""

    def __init__(self, policy):
        self.policy = policy
        self.signal_steps = getattr(policy, "signal_steps", False)
        self.actions: list = []

    def decide(self, state):
        actions = list(self.policy.decide(state))
        self.actions += actions
        return actions


ALL = [
    WaitAwhile(),
    WaitAwhile(interruptible=True),
    WaitAwhile(interruptible=True, replan="always", backfill=True),
    CarbonThreshold(percentile=30.0),
    CarbonThreshold(threshold_g_per_kwh=250.0, backfill=True),
    LowestWindow(max_wait_h=6.0),
    CarbonTime(),
]


@pytest.mark.parametrize("policy", ALL, ids=repr)
def test_on_a_crowded_two_site_cluster_every_action_is_valid(policy):
    # Few GPUs (jobs queue), half the jobs flexible, half of those interruptible, two grids
    # with different step lengths (15 min, 1 h), noisy forecasts: the engine raises
    # PolicyError on any invalid action.
    scenario = make_scenario(
        seed=3,
        duration_h=48.0,
        sites=[
            site(
                name="de",
                carbon={"zone": "DE", "year": 2020},
                gpus=[{"model": "A100-80GB", "count": 8}],
            ),
            site(
                name="fr", carbon={"zone": "FR", "year": 2020}, gpus=[{"model": "V100", "count": 8}]
            ),
        ],
        forecast={"model": "gaussian", "sigma_frac": 0.2},
        workload={
            "synthetic": {
                "arrival_rate_per_h": 3.0,
                "gpus": {1: 0.5, 2: 0.3, 8: 0.2},
                "duration": {"dist": "exponential", "mean_h": 2.0},
                "deferrable_fraction": 0.5,
                "slack_h": [2.0, 12.0],
                "interruptible_fraction": 0.5,
                "checkpoint_gb": 10.0,
            }
        },
    )
    recording = Recording(copy.deepcopy(policy))
    summary = simulate(scenario, recording).summary
    assert summary["jobs_completed"] > 50
    kinds = {type(a).__name__ for a in recording.actions}
    assert {"Start", "Defer"} <= kinds
    assert all(a.gpu_model for a in recording.actions if isinstance(a, Start | Resume))
    if getattr(policy, "interruptible", False):
        assert {"Suspend", "Resume"} <= kinds


class Fresh:
    """Mixed into a planned-start policy: the slow, obvious way. It makes no promise with
    its plans (a job planned to start now that finds no GPUs is planned afresh at every
    decision), asks every runtime afresh, and walks the whole pending queue for flexible
    jobs once blocked, asking each one."""

    def choose_start(self, job, plan):
        return super().choose_start(job, plan)[0], plan.now_s

    def _runtime_and_latest(self, state, job, site):
        runtime = runtime_s(state, job)
        return runtime, self.latest_start(state, job, runtime)

    def _defer_flexible(self, state, asked, actions):
        for job in state.pending:
            if job.index not in asked and job.deadline_s is not None:
                if self._kind[job.index] == _FLEXIBLE:
                    until = self.defer_until(state, job)
                    if until is not None and until - state.now_s >= MIN_DEFER_S:
                        actions.append(Defer(job, until))


class FreshPlans(Fresh, WaitAwhile):
    pass


class FreshCarbonTime(Fresh, CarbonTime):
    pass


class CapsFrankfurtInEvenHours:
    """Mixed into a policy: caps every GPU in Frankfurt at 200 W during even hours, so
    that the runtimes of jobs not started yet change there."""

    def decide(self, state):
        capped = int(state.now_s // 3600) % 2 == 0
        return [*super().decide(state), SetCap("frankfurt", 200.0 if capped else None)]


class CappedKept(CapsFrankfurtInEvenHours, WaitAwhile):
    pass


class CappedFresh(CapsFrankfurtInEvenHours, FreshPlans):
    pass


class CappedKeptCarbonTime(CapsFrankfurtInEvenHours, CarbonTime):
    pass


class CappedFreshCarbonTime(CapsFrankfurtInEvenHours, FreshCarbonTime):
    pass


KEPT_AND_FRESH = {
    ("wait_awhile", False): (WaitAwhile, FreshPlans),
    ("wait_awhile", True): (CappedKept, CappedFresh),
    ("carbon_time", False): (CarbonTime, FreshCarbonTime),
    ("carbon_time", True): (CappedKeptCarbonTime, CappedFreshCarbonTime),
}


def _count_asked(policy):
    """`policy`, counting its `defer_until` calls in `policy.asked`."""
    policy.asked = 0
    ask = policy.defer_until

    def counted(state, job):
        policy.asked += 1
        return ask(state, job)

    policy.defer_until = counted
    return policy


@pytest.mark.parametrize(
    "policy, forecast, changing_sites",
    [
        ("wait_awhile", "perfect", False),
        ("wait_awhile", "persistence", False),
        ("wait_awhile", "gaussian", False),
        ("wait_awhile", "replayed", False),
        ("wait_awhile", "perfect", True),
        ("carbon_time", "perfect", False),
        ("carbon_time", "gaussian", False),
        ("carbon_time", "replayed", False),
        ("carbon_time", "perfect", True),
    ],
)
def test_plans_kept_while_they_hold_are_the_plans_made_afresh(
    policy, forecast, changing_sites, tmp_path
):
    """On three small sites flooded with jobs (most wait for GPUs, so plans to start now
    are made again and again), keeping a start-now plan while it holds, runtimes while
    their site's `runtime_version` holds, and not asking the jobs whose answer is known to
    be "start now" (`_Quiet`), gives the same run, bit for bit, as planning afresh at every
    decision, and asks fewer times. With `changing_sites`, nodes power off and on and
    Frankfurt's cap changes every hour, so runtimes of waiting jobs change. "replayed":
    every site's forecast is an archive issued every 3 h (perfect between and after the
    issues' targets), so a site's forecast changes at each issue only."""
    noise = {"sigma_frac": 0.2} if forecast == "gaussian" else {}
    power_off = [f"sites[{i}].power_off={{idle_s=600, wake_s=300, off_w=10}}" for i in range(3)]
    issued = tmp_path / "issued.csv"
    issued_archive(issued)
    replayed = [f'sites[{i}].forecast={{file="{issued}", fallback="model"}}' for i in range(3)]
    model = "perfect" if forecast == "replayed" else forecast
    scenario = load_scenario(
        REPO / "scenarios" / "quickstart.toml",
        [
            "duration_h=24",
            "workload.synthetic.arrival_rate_per_h=40",
            "demand_response=[]",
            f"forecast={json.dumps({'model': model, **noise}).replace(':', '=')}",
            *(power_off if changing_sites else []),
            *(replayed if forecast == "replayed" else []),
        ],
    )
    kept, fresh = (_count_asked(p()) for p in KEPT_AND_FRESH[policy, changing_sites])
    kept_run, fresh_run = simulate(scenario, kept), simulate(scenario, fresh)
    assert kept_run.summary["jobs_submitted"] > 800
    # Noisy forecasts hold no promise: only the jobs past their latest start are not asked.
    assert kept.asked <= (fresh.asked if forecast == "gaussian" else fresh.asked / 2)
    pd.testing.assert_frame_equal(kept_run.jobs, fresh_run.jobs)
    pd.testing.assert_frame_equal(kept_run.events, fresh_run.events)
    if changing_sites:
        assert (kept_run.events["kind"] == "wake").any()
        assert (kept_run.events["kind"] == "setcap").sum() > 10


# --- end to end on a real grid -------------------------------------------------------------


def california(seed: int, forecast: dict | None = None):
    """Five days on California's 2020 grid (a ~165 g/kWh daily swing between the midday
    solar valley and the evening), 300 jobs arriving over about three days, all deferrable
    by 12-24 h and interruptible, runtimes 0.5-6 h, so every deadline falls inside the
    horizon; 256 GPUs, so capacity is not the bottleneck."""
    extra = {} if forecast is None else {"forecast": forecast}
    return make_scenario(
        seed=seed,
        duration_h=120.0,
        sites=[
            site(
                name="cal",
                carbon={"zone": "US-CAL", "year": 2020},
                gpus=[{"model": "A100-80GB", "count": 256}],
            )
        ],
        workload={
            "synthetic": {
                "arrival_rate_per_h": 4.0,
                "max_jobs": 300,
                "gpus": {1: 0.5, 2: 0.2, 4: 0.2, 8: 0.1},
                "duration": {"dist": "loguniform_mixture", "components": [[1.0, 0.5, 6.0]]},
                "deferrable_fraction": 1.0,
                "slack_h": [12.0, 24.0],
                "interruptible_fraction": 1.0,
            }
        },
        **extra,
    )


NOISY = {"model": "gaussian", "sigma_frac": 0.3}
SEEDS = (1, 2, 3)
POLICIES = {
    "run_now": RunNow,
    "wait_awhile": WaitAwhile,
    "wait_awhile_interruptible": lambda: WaitAwhile(interruptible=True),
}


@cache
def summary(policy: str, seed: int, noisy: bool = False) -> dict:
    results = simulate(california(seed, NOISY if noisy else None), POLICIES[policy]())
    return results.summary


@pytest.mark.parametrize("seed", SEEDS)
def test_wait_awhile_emits_less_than_run_now_and_misses_no_deadline(seed):
    base, shifted = summary("run_now", seed), summary("wait_awhile", seed)
    assert shifted["carbon_operational_kg"] < base["carbon_operational_kg"] - 30.0
    for s in (base, shifted):
        assert s["deadline_misses"] == 0
        assert s["jobs_completed"] == s["jobs_submitted"] == 300


def test_interruptible_jobs_save_at_least_as_much_as_contiguous_ones():
    contiguous = [summary("wait_awhile", s)["carbon_operational_kg"] for s in SEEDS]
    interrupted = [summary("wait_awhile_interruptible", s)["carbon_operational_kg"] for s in SEEDS]
    assert np.mean(interrupted) <= np.mean(contiguous)
    assert all(summary("wait_awhile_interruptible", s)["deadline_misses"] == 0 for s in SEEDS)


@pytest.mark.parametrize("policy", ["wait_awhile", "wait_awhile_interruptible"])
def test_perfect_forecasts_save_at_least_as_much_as_noisy_ones(policy):
    perfect = [summary(policy, s)["carbon_operational_kg"] for s in SEEDS]
    noisy = [summary(policy, s, noisy=True)["carbon_operational_kg"] for s in SEEDS]
    assert np.mean(perfect) <= np.mean(noisy)
    # Forecast errors change which hours are used, never whether a deadline is met.
    assert all(summary(policy, s, noisy=True)["deadline_misses"] == 0 for s in SEEDS)


# --- the scenario file and the CLI ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("wait_awhile", ["policy.params.interruptible=true"]),
        ("carbon_threshold", ["policy.params.percentile=30"]),
        ("lowest_window", ["policy.params.max_wait_h=6"]),
        ("carbon_time", []),
    ],
)
def test_every_time_shifting_policy_runs_from_the_scenario_file(tmp_path, capsys, name, params):
    scenario = REPO / "scenarios/time_shifting.toml"
    args = ["run", str(scenario), "--out", str(tmp_path), "--policy", name]
    for p in [*params, "workload.synthetic.max_jobs=60"]:
        args += ["--set", p]
    code, out = run_cli(args, capsys)
    assert code == 0, out.err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs_completed"] == summary["jobs_submitted"] == 60
    assert summary["deadline_misses"] == 0
