"""`Adjuster`: the base of policies that adjust a scheduler's actions (power caps, demand
response, migrations), and `job_of`, the job an action concerns.

An adjuster implements `amend(state, actions) -> actions` (the `sim.api.Policy` hook):
given the actions a scheduler planned for this decision, it returns the actions to apply
(caps added to `Start`s, starts held back, `SetCap`s and `Suspend`s added, ...). Used
alone, it adjusts what `run_now` would do (`first_come_first_served`); in a `chain` it
adjusts the members before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.kit.gpus import first_come_first_served
from sim.api import (
    Action,
    JobView,
    Policy,
    Repartition,
    Route,
    Scale,
    SetBattery,
    SetCap,
    SetDirective,
    SystemState,
)

__all__ = ["Adjuster", "job_of"]


@dataclass
class Adjuster(Policy):
    backfill: bool = False
    """Alone, adjust `run_now` with this `backfill` setting."""

    def decide(self, state: SystemState) -> list[Action]:
        return self.amend(state, first_come_first_served(state, self.backfill))

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """The actions to apply instead of `actions`, the plan of the policies before this
        one (alone: of `run_now`)."""
        raise NotImplementedError


def job_of(action: Action) -> JobView | None:
    """The job an action concerns (None for a site's or a service's SetCap, and for the
    service actions `Scale`, `Route` and `SetDirective`, and for `Repartition` and
    `SetBattery`)."""
    if isinstance(action, SetCap):
        return action.target if isinstance(action.target, JobView) else None
    if isinstance(action, Scale | Route | SetDirective | Repartition | SetBattery):
        return None
    return action.job
