"""`run_now`: first come, first served, onto the first site with enough free GPUs.

The baseline every carbon-aware policy is compared with: no deferral, no caps. Sites are
tried in order, the job's origin site first; a job takes all its GPUs from one pool.
With `backfill = true`, jobs behind a blocked head of the queue may start if they fit
now (greedy backfilling without reservations: small jobs can delay a large head job).
The placement is the kit's `first_come_first_served`, which adjusters used alone share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.kit import first_come_first_served
from sim.api import Action, BatchPlan, Policy, SystemState

__all__ = ["RunNow"]


@dataclass
class RunNow(Policy):
    backfill: bool = False
    """Let later jobs that fit start while the head of the queue waits."""

    pending_only = True  # class attribute, not a parameter: it only starts queued jobs

    def decide(self, state: SystemState) -> list[Action]:
        return first_come_first_served(state, self.backfill)

    def plan_batch(self, plan: BatchPlan) -> np.ndarray:
        """Every job starts at its arrival (`sim.api.BatchPlan`): no deferrals."""
        return np.full(len(plan.now_s), np.nan)
