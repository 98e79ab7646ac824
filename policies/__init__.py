"""Scheduling policies. `REGISTRY` maps the names a scenario may use to policy classes.

Policies import only `sim.api` (and numpy): see `sim/api.py` for the contract.
"""

from policies.run_now import RunNow

REGISTRY: dict[str, type] = {
    "run_now": RunNow,
}

__all__ = ["REGISTRY", "RunNow"]
