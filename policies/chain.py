"""`chain`: several policies applied in order (wait_awhile -> energy_optimal_cap -> dr_pause).

Rules for combining their actions (one decision, members in the order given):

1. The first member decides: its `decide(state)` actions are the plan.
2. A later member that can adjust others' actions (it has `amend(state, actions)`, like
   every power-capping and demand-response policy) receives the plan and returns the new
   plan: it may change caps of `Start`s, drop starts (hold jobs back), or add actions.
   Its word is final for what it changes.
3. A later member without `amend` adds its `decide(state)` actions, except those about a
   job an earlier action already concerns, `SetCap`s of a site an earlier action already
   capped, and starts (resumes, migrations) that no longer fit in the GPUs the plan left
   free: the earlier member wins a conflict.

All members see the same state, as it was before any of this decision's actions. The
chain asks for a decision at every signal step if any member does, and ticks at the
shortest `tick_s` of its members.

Scenario::

    [policy]
    name = "chain"
    [[policy.params.policies]]
    name = "wait_awhile"
    [[policy.params.policies]]
    name = "energy_optimal_cap"
    params = { eta = 0.5 }
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from policies.kit import FreeGpus, job_of
from sim.api import Action, Policy, PolicyError, PolicyHooks, SetCap, SystemState

__all__ = ["Chain"]


class Chain(Policy):
    def __init__(self, members: Sequence[Policy]):
        if not members:
            raise ValueError("a chain needs at least one policy")
        self.members = list(members)
        self._hooks = [PolicyHooks.of(m) for m in self.members]
        self.signal_steps = any(h.signal_steps for h in self._hooks)
        ticks = [h.tick_s for h in self._hooks if h.tick_s]
        self.tick_s = min(ticks) if ticks else None

    @classmethod
    def from_params(
        cls, params: dict[str, Any], build: Callable[[str, dict[str, Any], str], Policy]
    ) -> Chain:
        """Build from `[policy.params]`: `policies = [{name, params}, ...]` (only that key);
        `build(name, params, key)` builds one member, naming `key` in its errors."""
        unknown = sorted(set(params) - {"policies"})
        if unknown:
            raise ValueError(f"policy.params.{unknown[0]}: chain takes only 'policies'")
        specs = params.get("policies")
        if not isinstance(specs, list) or not specs:
            raise ValueError(
                "policy.params.policies: chain needs a non-empty list of {name, params} tables, "
                f"got {specs!r}"
            )
        members = []
        for i, spec in enumerate(specs):
            key = f"policy.params.policies[{i}]"
            if not isinstance(spec, dict) or "name" not in spec or set(spec) - {"name", "params"}:
                raise ValueError(
                    f"{key}: expected a table with name and optional params, got {spec!r}"
                )
            members.append(build(spec["name"], spec.get("params", {}), key))
        return cls(members)

    def decide(self, state: SystemState) -> list[Action]:
        first, *rest = self.members
        actions = _actions_of(first, state)
        for member, hooks in zip(rest, self._hooks[1:], strict=True):
            amend = hooks.amend
            if amend is not None:
                actions = list(amend(state, actions))
                continue
            jobs = {job_of(a) for a in actions} - {None}
            capped = {
                a.target for a in actions if isinstance(a, SetCap) and isinstance(a.target, str)
            }
            free = FreeGpus(state)
            for a in actions:
                free.book(a)
            for a in _actions_of(member, state):
                job = job_of(a)
                if job in jobs or (isinstance(a, SetCap) and a.target in capped):
                    continue
                if free.book(a):
                    actions.append(a)
        return actions


def _actions_of(member: Policy, state: SystemState) -> list[Action]:
    """`member.decide(state)` as a list; PolicyError naming the member if what it returns
    is not a sequence (each action is checked when the engine applies it)."""
    actions = member.decide(state)
    try:
        return list(actions)
    except TypeError:
        raise PolicyError(
            f"chain member {type(member).__qualname__}: decide(state) returned "
            f"{actions!r:.60} ({type(actions).__name__}), not a list of actions"
        ) from None
