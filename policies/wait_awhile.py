"""`wait_awhile`: shift each flexible job to the cleanest time before its deadline.

Wiesner, Behnke, Scheinert, Gontarska, Thamsen, "Let's Wait Awhile: How Temporal Workload
Shifting Can Reduce Carbon Emissions in the Cloud", Middleware 2021
(artifact: github.com/dos-group/lets-wait-awhile, `strategy.py`, `AdHocStrategy`).

- A job with a deadline starts at the time t in [now, deadline - runtime - margin_s] whose
  window [t, t + runtime] has the lowest mean forecast intensity at its origin site
  (runtime: `state.estimate` there). The mean over a sliding window of a step function is
  piecewise linear in t, so the minimum is found exactly among the starts where t or
  t + runtime meets a forecast breakpoint (`policies.kit.best_window_start`); the paper's
  artifact takes the argmin of a rolling mean on its 30-minute grid. Planned once, when the
  job arrives; the job is deferred to t and started when the deferral expires.
- With `interruptible = true`, an interruptible job with a deadline runs in the cheapest
  forecast steps before its deadline and is suspended in between (the paper's
  interruptible case: the `duration` lowest-intensity steps of the window). Its plan is
  the cheapest steps of [now, deadline] whose length covers the remaining runtime +
  `margin_s`; it runs now iff the current step is in the plan (Start/Resume it if it is
  not running; Suspend it if it runs and the current step is not planned; Defer a pending
  job to the next planned step; of the dearest planned step only the part needed is used,
  at its end, by a pending job). The policy decides at every step of any site's signal
  (`signal_steps`). The artifact fixes the schedule at submission; here the plan is
  checked at every decision against the work actually left (`state.estimate`, which
  includes loading a suspended job's checkpoint) and made afresh when it no longer covers
  it (`replan = "when_behind"`, the default), or at every decision (`replan = "always"`).
  Since only steps before the deadline are ever planned and their length always covers
  the remaining work, a forecast error changes which steps are used, never whether the
  job can finish: it does unless GPUs are missing when it must run. `margin_s` covers a
  suspension's checkpoint write and read, and rounding.
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
    best_window_start,
    cheapest_slots,
    forecast_from_now,
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
        """Interruptible job -> (starts, ends) of the forecast steps planned for it, s."""
        self._suspended: set[str] = set()
        """Ids of the jobs this policy suspended (and resumes); others' are left alone."""

    # --- contiguous: one window per job ---------------------------------------------------

    def choose_start(
        self, job: JobView, times: np.ndarray, values: np.ndarray, latest: float, runtime: float
    ) -> float:
        return best_window_start(times, values, float(times[0]), latest, runtime)[0]

    # --- interruptible: the cheapest steps, re-planned when behind -----------------------

    def _slots(self, job: JobView) -> bool:
        return self.interruptible and job.interruptible and job.deadline_s is not None

    def _plan(self, state: SystemState, job: JobView, site: str) -> tuple[bool, float]:
        """(run now?, when a pending job should start, s) for an interruptible `job`.

        Its plan is the cheapest forecast steps at `site` in [now, deadline] whose length
        covers its remaining runtime + `margin_s` (all of them if that is not enough). A plan
        is kept while the time it has left covers that need (`replan = "when_behind"`), or
        made afresh at every decision (`replan = "always"`). The job runs now if the current
        step is in the plan; a pending one starts at the plan's next step, or, if only part
        of that step is needed, at the moment that leaves just that part before its end."""
        now = state.now_s
        deadline = job.deadline_s
        assert deadline is not None
        need = runtime_s(state, job) + self.margin_s
        if deadline - now <= need:
            self._slot_plans.pop(job, None)
            return True, now
        plan = self._slot_plans.get(job)
        if plan is not None and self.replan == "when_behind":
            starts, ends = plan
            left = np.maximum(ends - np.maximum(starts, now), 0.0)
            ahead = ends - now >= SLIVER_S
            if left.sum() >= need and ahead.any():
                first = float(starts[ahead][0])
                return first - now < MIN_DEFER_S, first
        times, values = forecast_from_now(state, site, deadline - now)
        starts, lengths, used = cheapest_slots(times, values, deadline, need)
        if starts.size == 0:
            return True, now
        self._slot_plans[job] = (starts, starts + lengths)
        first = float(starts[0])
        return first == now, first + float(lengths[0] - used[0])

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        if self._slots(job):
            return self._plan(state, job, job.origin_site)[1]
        return super().defer_until(state, job)

    def preempt(self, state: SystemState, free: FreeGpus) -> list[Action]:
        if not self.interruptible:
            return []
        actions: list[Action] = []
        # GPUs of a suspended job are not offered to others in the same decision: they
        # stay held while its checkpoint is written.
        for job in state.running:
            site = job.site
            if self._slots(job) and site is not None and not self._plan(state, job, site)[0]:
                actions.append(Suspend(job))
                self._suspended.add(job.id)
        for job in state.suspended:
            if job.id not in self._suspended:
                continue
            if self._plan(state, job, job.origin_site)[0]:
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
