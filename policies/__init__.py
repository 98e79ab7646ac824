"""Scheduling policies. `REGISTRY` maps the names a scenario may use to policy classes.

Policies import only `sim.api` (and numpy): see `sim/api.py` for the contract, and
docs/policies.md for each policy's parameters and source.
"""

from policies.chain import Chain
from policies.run_now import RunNow

REGISTRY: dict[str, type] = {
    "run_now": RunNow,
    "chain": Chain,
}

__all__ = ["REGISTRY", "Chain", "RunNow"]
