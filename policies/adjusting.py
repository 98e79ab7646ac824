"""`Adjuster`: the base of policies that adjust a scheduler's actions (power caps, demand response).

An adjuster implements `amend(state, actions) -> actions`: given the actions a scheduler
planned for this decision, it returns the actions to apply (caps added to `Start`s,
starts held back, `SetCap`s and `Suspend`s added, ...). Used alone, it adjusts what
`run_now` would do; in a `chain` it adjusts the members before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.run_now import RunNow
from sim.api import Action, SystemState


@dataclass
class Adjuster:
    backfill: bool = False
    """Alone, adjust `run_now` with this `backfill` setting."""

    def decide(self, state: SystemState) -> list[Action]:
        return self.amend(state, RunNow(self.backfill).decide(state))

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        raise NotImplementedError
