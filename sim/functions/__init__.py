"""Serverless functions with keep-alive, engine-free: invocations from a generator
calibrated on the Azure Functions 2019 trace's published statistics (`arrivals`), the
hardware generations a function runs on, from EcoLife's measurements (`generations`), the
exact keep-alive simulation (`keepalive`: warm or cold, memory held warm, energy,
carbon) and its policies (`policies`: fixed window, EcoLife-like carbon-aware choice).
docs/functions.md describes the model and its sources. A scenario's `[functions]` runs
them in a run (`sim.engine.functions`).
"""

from sim.functions.arrivals import AzureFunctions2019, generate_invocations
from sim.functions.generations import ECOLIFE_GENERATIONS, Generation
from sim.functions.keepalive import (
    FunctionState,
    KeepAlivePolicy,
    KeepAliveResult,
    simulate_keep_alive,
)
from sim.functions.policies import CarbonAwareKeepAlive, FixedKeepAlive

__all__ = [
    "ECOLIFE_GENERATIONS",
    "AzureFunctions2019",
    "CarbonAwareKeepAlive",
    "FixedKeepAlive",
    "FunctionState",
    "Generation",
    "KeepAlivePolicy",
    "KeepAliveResult",
    "generate_invocations",
    "simulate_keep_alive",
]
