"""`wait_awhile`: shift each flexible job to the cleanest time before its deadline.

Wiesner, Behnke, Scheinert, Gontarska, Thamsen, "Let's Wait Awhile: How Temporal Workload
Shifting Can Reduce Carbon Emissions in the Cloud", Middleware 2021
(artifact: github.com/dos-group/lets-wait-awhile, `strategy.py`, `AdHocStrategy`).

- A job with a deadline starts at the time t in [now, deadline - runtime - margin_s] whose
  window [t, t + runtime] has the lowest mean forecast intensity at its origin site
  (runtime: `state.estimate` there). The mean over a sliding window of a step function is
  piecewise linear in t, so the minimum is found exactly among the starts where t or
  t + runtime meets a forecast breakpoint (`policies.kit.best_window_plan`); the paper's
  artifact takes the argmin of a rolling mean on its 30-minute grid. Planned once, when the
  job arrives; the job is deferred to t and started when the deferral expires. With
  `capacity_aware = true`, t is the best start whose run fits the origin site's GPUs
  (`PlannedStart`, `policies.kit.Bookings`).
- With `interruptible = true`, an interruptible job with a deadline runs in the cheapest
  forecast steps before its deadline and is suspended in between (the paper's
  interruptible case: the `duration` lowest-intensity steps of the window). Its plan is
  the run windows in [now, deadline - margin_s] of least forecast carbon that hold its
  remaining runtime and that it can carry out (`policies.kit.cheapest_slots`): the policy
  decides at every step of any site's signal (`signal_steps`), so a started job stops and
  resumes only where steps meet; its plan is whole steps, the last used in part from its
  start (the job completes there), and a job not yet started may instead begin partway
  into its first step (a deferral). So only the needed part of the dearest step is used
  when that step is the plan's last, or a pending job's first; a dearest step between
  others is never run whole at the expense of a cheaper later one. The job runs now iff
  now is in a window (Start/Resume it if it is not running; Suspend it if it runs and now
  is not in one; Defer a pending job to its next window). The artifact fixes the schedule
  at submission; here the plan is checked at every decision against the work actually
  left (`state.estimate`, which includes loading a suspended job's checkpoint) and made
  afresh when its windows fall short of it by more than `margin_s` (`replan =
  "when_behind"`, the default), or at every decision (`replan = "always"`). `margin_s`
  is kept free before the deadline, not added to the work: it absorbs what a plan does
  not foresee (a suspension's checkpoint write and read, rounding), the job running on
  past its last window by at most that much. A job with no room left to choose
  (deadline - margin_s - now <= runtime) runs now. Since only time before the deadline is
  ever planned and the windows hold the remaining work, a forecast error changes which
  steps are used, never whether the job can finish: it does unless GPUs are missing when
  it must run.
- Jobs without a deadline run as `run_now` would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from policies.kit import (
    MIN_DEFER_S,
    SLIVER_S,
    FreeGpus,
    PlannedStart,
    cheapest_slots,
    objective_forecast,
    runtime_s,
)
from sim.api import Action, JobView, Resume, Suspend, SystemState

__all__ = ["WaitAwhile"]


@dataclass
class WaitAwhile(PlannedStart):
    interruptible: bool = False
    """Run interruptible jobs in the cheapest forecast steps before their deadline,
    suspending them in between (decides at every signal step)."""
    replan: Literal["when_behind", "always"] = "when_behind"
    """With `interruptible`: keep an interruptible job's plan while it still covers the
    work left ("when_behind": re-plan only then), or re-plan at every decision ("always")."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.signal_steps = self.interruptible
        self._slot_plans: dict[JobView, tuple[np.ndarray, np.ndarray]] = {}
        """Interruptible job -> (starts, ends) of the run windows planned for it, s."""
        self._suspended: set[str] = set()
        """Ids of the jobs this policy suspended (and resumes); others' are left alone."""

    # --- interruptible: the cheapest steps, re-planned when behind -----------------------

    def _slots(self, job: JobView) -> bool:
        return self.interruptible and job.interruptible and job.deadline_s is not None

    def _plan(
        self, state: SystemState, job: JobView, site: str, pending: bool
    ) -> tuple[bool, float]:
        """(run now?, when a pending job should start, s) for an interruptible `job`.

        Its plan is the run windows of least forecast carbon at `site` in [now, deadline -
        `margin_s`] that hold its remaining runtime and that it can carry out
        (`cheapest_slots`; a `pending` job may start partway into its first step). A plan
        is kept while its windows still hold that runtime (`replan = "when_behind"`), or
        made afresh at every decision (`replan = "always"`). The job runs now if now is in
        one of its windows, else a pending one starts when the next window opens. With no
        room left to choose (deadline - `margin_s` - now <= runtime), it runs now."""
        now = state.now_s
        assert job.deadline_s is not None
        end = job.deadline_s - self.margin_s
        need = runtime_s(state, job)
        if end - now <= need:
            self._slot_plans.pop(job, None)
            return True, now
        plan = self._slot_plans.get(job) if self.replan == "when_behind" else None
        if plan is not None:
            starts, ends = plan
            left = np.maximum(ends - np.maximum(starts, now), 0.0).sum()
            if left + self.margin_s + SLIVER_S < need:
                plan = None
        if plan is None:
            times, values = objective_forecast(state, site, end - now, self.goal)
            if times.size == 0:
                return True, now
            plan = cheapest_slots(times, values, end, need, start_late=pending)
            self._slot_plans[job] = plan
        starts, ends = plan
        ahead = ends - now >= SLIVER_S
        if not ahead.any():
            return True, now
        first = max(float(starts[ahead][0]), now)
        return first - now < MIN_DEFER_S, first

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        if self._slots(job):
            return self._plan(state, job, job.origin_site, pending=True)[1]
        return super().defer_until(state, job)

    def preempt(self, state: SystemState, free: FreeGpus) -> list[Action]:
        if not self.interruptible:
            return []
        actions: list[Action] = []
        # GPUs of a suspended job are not offered to others in the same decision: they
        # stay held while its checkpoint is written.
        for job in state.running:
            site = job.site
            if not self._slots(job) or site is None:
                continue
            if not self._plan(state, job, site, pending=False)[0]:
                actions.append(Suspend(job))
                self._suspended.add(job.id)
        for job in state.suspended:
            if job.id not in self._suspended:
                continue
            if self._plan(state, job, job.origin_site, pending=False)[0]:
                placed = free.place(job)
                if placed is not None:
                    actions.append(Resume(job, placed.site, gpu_model=placed.gpu_model))
                    self._suspended.discard(job.id)
        if len(self._slot_plans) > 64 and len(self._slot_plans) > 2 * (
            len(state.running) + len(state.suspended) + len(state.pending)
        ):  # forget the plans of jobs that are done
            live = ("pending", "deferred", "running", "suspended")
            self._slot_plans = {j: p for j, p in self._slot_plans.items() if j.state in live}
        return actions
