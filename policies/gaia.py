"""`lowest_window` and `carbon_time`: the start-time policies compared by GAIA.

Hanafy, Liang, Ali-Eldin, Shenoy, "Going Green for Less Green: Optimizing the Cost of
Reducing Cloud Carbon Emissions", ASPLOS 2024 (artifact: github.com/umassos/GAIA,
`src/scheduling/carbon_waiting_policy.py`). GAIA lets each job wait at most a fixed time W
after its submission (its queue's waiting bound, e.g. 6 h for short and 24 h for long
jobs, `-w 6x24`), and picks one start s in [submit, submit + W]:

- **Lowest Carbon Window** (`best_waiting_time`, `oracle_carbon_slot`): the start whose
  window [s, s + L] has the lowest carbon, L the job's length.
- **Carbon Savings per Waiting Time** (`average_carbon_slot_waiting`,
  `oracle_carbon_slot_waiting`; "Carbon-Time" in the paper): the start that maximises
  (C(submit) - C(s)) / (s - submit + L), the carbon saved against starting at once per
  unit of completion time (waiting + running). A start that saves nothing is never
  better than starting now.

Differences from the artifact, all documented in docs/policies-time-shifting.md:

- dcsim jobs carry their work, so L is `state.estimate` at the origin site (the
  artifact's "oracle" variants, LCW* and CST*; its default variants use the mean length of
  the job's queue instead, since it assumes lengths are unknown);
- candidate starts are exact (every start where the window's start or end meets a
  forecast breakpoint, plus the ends of the interval), not the artifact's hourly grid; both
  objectives are extremal at those candidates (the window mean is piecewise linear in s,
  and a ratio of two linear functions is monotone on each piece);
- the bound is `max_wait_h` after submission AND deadline - L - `margin_s`: a deadline is
  never given up for carbon (GAIA's jobs have no deadlines; a dcsim job without one is not
  deferred at all and runs as `run_now` would);
- `carbon_time` takes a `weight` on waiting time in the denominator; 1 is GAIA's
  objective, 0 maximises the carbon saved alone, i.e. is `lowest_window`.

As in GAIA, the start is planned once, when the job arrives; the job is deferred to it and
started when the deferral expires. With `capacity_aware = true` (not in GAIA), the start is
the best one whose run fits the origin site's GPUs (`PlannedStart`, `policies.kit.Bookings`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.kit import (
    MIN_DEFER_S,
    PlannedStart,
    Planning,
    start_now_until,
)
from policies.kit.batch_plans import LOWEST_WINDOW, planned_deferrals
from sim.api import BatchPlan, JobView, SystemState

__all__ = ["CarbonTime", "LowestWindow"]


@dataclass
class LowestWindow(PlannedStart):
    max_wait_h: float | None = None
    """Longest wait after submission, h (GAIA's waiting bound W); None: up to the latest
    start (deadline - runtime - margin_s), which is never exceeded."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_wait_h is not None and not self.max_wait_h >= 0.0:
            raise ValueError(f"max_wait_h must be >= 0 h (or absent), got {self.max_wait_h}")

    def latest_start(self, state: SystemState, job: JobView, runtime: float) -> float:
        latest = super().latest_start(state, job, runtime)
        if self.max_wait_h is not None:
            latest = min(latest, job.submit_s + self.max_wait_h * 3600.0)
        return latest

    def plan_batch(self, plan: BatchPlan) -> np.ndarray | None:
        """Every job's deferral at arrival (`sim.api.BatchPlan`), the floats `decide` gives;
        None with `capacity_aware` or an objective other than carbon."""
        if self.capacity_aware or self.objective != "carbon":
            return None
        latest = plan.deadline_s - plan.runtime_s - self.margin_s  # latest_start, per job
        if self.max_wait_h is not None:
            latest = np.minimum(latest, plan.submit_s + self.max_wait_h * 3600.0)
        latest = np.where(np.isnan(plan.deadline_s), -np.inf, latest)  # no deadline: now
        return planned_deferrals(plan, latest, self._batch_weight())

    def _batch_weight(self) -> float:
        """The rule `planned_deferrals` plans by: the lowest window mean."""
        return LOWEST_WINDOW


@dataclass
class CarbonTime(LowestWindow):
    weight: float = 1.0
    """Weight of waiting time against running time in the completion time that divides the
    carbon saved: maximise saved / (runtime + weight x wait); 1 is GAIA's Carbon-Time, 0 is
    lowest_window (dimensionless, >= 0)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.weight >= 0.0:
            raise ValueError(f"weight must be >= 0, got {self.weight}")

    plan_batch = LowestWindow.plan_batch  # the same planner, by `_batch_weight`

    def _batch_weight(self) -> float:
        return self.weight

    def start_costs(self, job: JobView, plan: Planning) -> tuple[np.ndarray, np.ndarray]:
        """(the candidate starts, s; minus their objective: the carbon saved per unit of
        completion time, g/kWh per kW drawn)."""
        starts, means = super().start_costs(job, plan)  # the window means
        return starts, self._costs(job, plan, starts, means)

    def choose_start(self, job: JobView, plan: Planning) -> tuple[float, float]:
        """The start of most carbon saved per unit of completion time; now if none saves
        any, with the promise that this holds, up to starts less than `MIN_DEFER_S` later,
        until a later start may save some (`start_now_until`)."""
        now = plan.now_s
        starts, means = super().start_costs(job, plan)
        score = -self._costs(job, plan, starts, means)
        best = float(score.max())
        if best <= 0.0:
            until = start_now_until(
                plan.times, plan.values, starts, means, plan.runtime_s, MIN_DEFER_S
            )
            return now, until
        k = int(np.argmax(score >= best - 1e-9 * abs(best)))
        return float(starts[k]), now

    def _costs(
        self, job: JobView, plan: Planning, starts: np.ndarray, means: np.ndarray
    ) -> np.ndarray:
        """Minus the carbon saved per unit of completion time of each start, against
        starting now (`means[0]`), g/kWh per kW drawn."""
        runtime = plan.runtime_s
        saved = (means[0] - means) * runtime  # g/kWh x s, per kW drawn: same for every start
        wait = starts - job.submit_s
        return -saved / np.maximum(runtime + self.weight * wait, 1e-9)
