"""The batch engine: a run whose jobs never interact, planned and accounted in vectorised
passes instead of events (docs/performance.md, "Issue 34, part 2").

`run_batch(engine)` runs a built engine's world this way when it can: the world passes
`refusal` (one site, one pool of whole GPUs, nothing that makes jobs or time interact,
a policy with a `plan_batch` hook), the policy plans every job (`schedule`), and the
planned runs never hold more GPUs than the pool has (`capacity_refusal`), so that every
start finds room at once, as the event engine would find it. It returns None when it ran,
else the one-line reason it did not (and the engine is untouched: the event engine runs).
The event engine is the reference: the same results, bit for bit (the issue asks for 1e-9
relative; `tests/engine/test_batch_engine.py`, `benchmarks/gaia.py --compare`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.engine.batch.accounting import account
from sim.engine.batch.eligibility import capacity_refusal, refusal
from sim.engine.batch.plan import schedule

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["run_batch"]


def run_batch(engine: Engine) -> str | None:
    """Run `engine` (built, not started) to its horizon by the batch engine; None if it
    ran, else why it cannot (then nothing was changed)."""
    why = refusal(engine)
    if why is not None:
        return why
    plan = schedule(engine)
    if isinstance(plan, str):
        return plan
    why = capacity_refusal(engine, plan.start_s, plan.end_s)
    if why is not None:
        return why
    account(engine, plan)
    for component in engine.components:
        component.close(engine.horizon_s)
    return None
