"""Specification of `capacity_aware` time-shifting (wait_awhile, lowest_window, carbon_time;
`PlannedStart` in policies/kit/time_shifting.py, `Bookings` in policies/kit/bookings.py).

Twelve one-GPU jobs of 2 h arrive at once on a site of 4 GPUs whose grid has one clean
valley, 10:00-12:00, and must finish by 15:00. Planned from the forecast alone, all twelve
pick the valley and queue for the GPUs there: the last four start at 14:00 and finish
late. Planned with capacity, four take the valley and the others the best windows that
still fit, so every job runs when planned and none is late. With `capacity_aware = false`
(the default) nothing changes: the golden tests cover it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from policies.gaia import CarbonTime, LowestWindow
from policies.kit import Bookings, PlannedStart, Run, ranked_starts
from policies.wait_awhile import WaitAwhile
from sim.config.loading import load_scenario
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import REPO, make_scenario, site

H = 3600.0
GPUS = 4
RUNTIME_H = 2.0
DEADLINE_H = 15.0
POLICIES = {"wait_awhile": WaitAwhile, "lowest_window": LowestWindow, "carbon_time": CarbonTime}


def valley_site(tmp_path) -> dict:
    """4 A100-80GB on a grid at 300 g/kWh but for 100 g/kWh at 10:00-12:00."""
    rows = [f"2020-06-01T{h:02d}:00:00Z,{100 if h in (10, 11) else 300}" for h in range(24)]
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,carbon_intensity\n" + "\n".join(rows) + "\n")
    return site(name="a", carbon={"file": str(path)}, gpus=[{"model": "A100-80GB", "count": GPUS}])


def flood(tmp_path):
    """Three times the site's GPUs in 2-h one-GPU jobs, all due at 15:00."""
    jobs = [
        {
            "job_id": f"j{i:02d}",
            "submit_time": 0.0,
            "gpus": 1,
            "work_gpu_h": RUNTIME_H,
            "deadline": DEADLINE_H * H,
        }
        for i in range(3 * GPUS)
    ]
    return make_scenario(tmp_path, jobs=jobs, sites=[valley_site(tmp_path)])


def planned_runs(results) -> pd.DataFrame:
    """Per job: its planned start (its deferral's end, else its start), s, and its run."""
    jobs = results.jobs.set_index("job_id")
    events = results.events
    defers = events[events["kind"] == "defer"].groupby("job")["value"].last()
    planned = defers.reindex(jobs.index).fillna(jobs["start_s"])
    return pd.DataFrame({"planned_s": planned, "start_s": jobs["start_s"], "end_s": jobs["end_s"]})


def most_at_once(starts_s: np.ndarray, ends_s: np.ndarray) -> int:
    """The largest number of the runs [start, end) that overlap at any time."""
    steps = sorted([(e, -1) for e in ends_s] + [(s, 1) for s in starts_s])
    return int(np.max(np.cumsum([n for _, n in steps])))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_without_capacity_the_jobs_herd_into_the_valley_and_miss_deadlines(tmp_path, name):
    results = simulate(flood(tmp_path), POLICIES[name]())
    runs = planned_runs(results)
    assert (runs["planned_s"] == 10 * H).all()
    assert results.summary["deadline_misses"] == GPUS


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_with_capacity_plans_never_book_more_gpus_than_installed_and_no_deadline_is_missed(
    tmp_path, name
):
    results = simulate(flood(tmp_path), POLICIES[name](capacity_aware=True))
    runs = planned_runs(results)
    planned_ends = runs["planned_s"] + RUNTIME_H * H
    assert most_at_once(runs["planned_s"].to_numpy(), planned_ends.to_numpy()) <= GPUS
    assert (runs["start_s"] == runs["planned_s"]).all()  # no job queues after its deferral
    assert (runs["planned_s"] == 10 * H).sum() == GPUS  # the valley is full
    assert results.summary["deadline_misses"] == 0
    assert results.summary["jobs_completed"] == 3 * GPUS


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_jobs_that_miss_the_valley_take_the_best_windows_that_still_fit(tmp_path, name):
    """After the valley, the windows that overlap it (09:00, 11:00) come next in every
    policy's order, but it is full; then those at 300 g/kWh, the earliest first: now while
    GPUs are free (four jobs), then 02:00, when these end."""
    results = simulate(flood(tmp_path), POLICIES[name](capacity_aware=True))
    planned = planned_runs(results)["planned_s"].sort_values().tolist()
    assert planned == [0.0] * GPUS + [2 * H] * GPUS + [10 * H] * GPUS


def test_a_run_is_booked_once_whether_planned_started_or_running(tmp_path):
    """Each decision's bookings, read before its actions apply: the runs started and
    planned at 0, then the same runs at 01:00 (the started ones now running), then at
    02:00 the planned ones started (their plans replaced, not doubled)."""
    h = PolicyHarness(flood(tmp_path)).advance(0.0)
    policy = WaitAwhile(capacity_aware=True)

    def booked_full(start_h: float, end_h: float) -> bool:
        """Whether the bookings hold exactly the site's GPUs throughout [start_h, end_h), h."""
        run, booked = Run("a", "A100-80GB", start_h * H, end_h * H), policy.bookings(h.state)
        return booked.fits(run, 0) and not booked.fits(run, 1)

    actions = policy.decide(h.state)
    assert booked_full(0, 2) and booked_full(2, 4) and booked_full(10, 12)
    assert policy.bookings(h.state).fits(Run("a", "A100-80GB", 4 * H, 10 * H), GPUS)
    h.apply(actions).advance(1 * H)
    assert policy.decide(h.state) == []
    assert booked_full(1, 2) and booked_full(2, 4) and booked_full(10, 12)
    h.advance(2 * H)
    actions = policy.decide(h.state)
    assert len(actions) == GPUS
    assert booked_full(2, 4) and booked_full(10, 12)


def test_candidates_are_ranked_by_cost_after_the_policys_choice():
    starts = np.array([0.0, 1.0, 2.0, 3.0])
    costs = np.array([5.0, 1.0, 5.0, 1.0])
    assert ranked_starts(starts, costs, 3.0).tolist() == [3.0, 1.0, 0.0, 2.0]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_planned_start_policy_takes_the_option_off_by_default(name):
    cls = POLICIES[name]
    assert issubclass(cls, PlannedStart)
    assert cls().capacity_aware is False
    assert build_policy(name, {"capacity_aware": True}) == cls(capacity_aware=True)


def test_the_option_is_set_from_the_command_line_and_checked(tmp_path):
    path = REPO / "scenarios" / "time_shifting.toml"
    scenario = load_scenario(path, ["policy.params.capacity_aware=true"])
    policy = build_policy(scenario.policy.name, scenario.policy.params)
    assert policy == WaitAwhile(interruptible=True, capacity_aware=True)  # the file's policy
    bad = load_scenario(path, ["policy.params.capacity_aware='sometimes'"])
    with pytest.raises(ScenarioError, match="capacity_aware"):
        build_policy(bad.policy.name, bad.policy.params)


def test_bookings_are_the_policy_kits():
    from policies import space_shifting

    assert space_shifting.Bookings is Bookings
