"""Serverless functions in a run (`[functions]`, docs/functions.md "In a run"): at the end
of the run, the functions' invocations over the run's horizon, drawn from the run's
`functions` random stream (`sim.functions.generate_invocations`), are run with keep-alive
(`sim.functions.simulate_keep_alive`) on the site `functions.site`.

They do not interact with the GPU jobs or services (no shared servers, no power in the
site's power log): their results are `functions.parquet` and their own summary keys.

Energy and carbon. The keep-alive simulation's energy is what the servers draw (EcoLife's
RAPL measurements of CPU and memory): IT energy, reported as `function_energy_kwh`. Its
operational carbon is charged at the site's PUE x carbon intensity (`Site.facility_ci`,
the step function the site's own operational carbon is integrated on): the carbon of the
facility energy the functions cause, as a job's is; the carbon-aware policy decides on
the same signal. `function_carbon_kg` is that plus the embodied carbon of the functions'
servers as EcoLife counts it (`function_embodied_kg`, docs/functions.md). It is reported
apart: it is not added to `carbon_operational_kg`, `carbon_embodied_kg` or
`carbon_total_kg`, which stay the GPU fleet's.

Executions that end past the horizon count in full (as in `simulate_keep_alive`), at the
signal's last value (the value the carbon-aware policy reads beyond the signal's end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.config.functions import FunctionsConfig, KeepAliveConfig
from sim.engine.component import Component
from sim.errors import ScenarioError
from sim.functions import (
    ECOLIFE_GENERATIONS,
    CarbonAwareKeepAlive,
    FixedKeepAlive,
    KeepAlivePolicy,
    KeepAliveResult,
    generate_invocations,
    simulate_keep_alive,
)
from sim.grid import CarbonSignal
from sim.results import SUMMARY_KEYS, ResultParts

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet

__all__ = [
    "Functions",
    "check_functions",
    "function_invocations",
    "keep_alive_policy",
    "run_functions",
]

FUNCTION_KEYS = tuple(k for k in SUMMARY_KEYS if k.startswith("function_"))
"""The summary keys the functions write (None in a run without `[functions]`)."""


def check_functions(config: FunctionsConfig) -> None:
    """ScenarioError naming the key if `functions.keep_alive` names a generation
    `sim.functions` does not know (checked when the run is built, and by `dcsim validate`)."""
    generation = config.keep_alive.generation
    if generation not in ECOLIFE_GENERATIONS:
        raise ScenarioError(
            f"functions.keep_alive.generation: unknown generation {generation!r}; known: "
            f"{', '.join(ECOLIFE_GENERATIONS)}"
        )


def keep_alive_policy(config: KeepAliveConfig, signal: CarbonSignal) -> KeepAlivePolicy:
    """The keep-alive policy of `functions.keep_alive` (checked, `check_functions`),
    deciding on `signal` (g per IT kWh)."""
    if config.name == "fixed":
        return FixedKeepAlive(config.window_s, config.generation)
    return CarbonAwareKeepAlive(
        ECOLIFE_GENERATIONS,
        signal,
        windows_s=config.windows_s(),
        default_window_s=config.window_s,
        default_generation=config.generation,
    )


def function_invocations(
    config: FunctionsConfig, horizon_s: float, rng: np.random.Generator
) -> pd.DataFrame:
    """The invocations of `config`'s functions over [0, horizon_s) (`generate_invocations`
    from `rng`), without the functions above `max_rate_per_day` (their gaps not drawn)."""
    return generate_invocations(
        config.functions, horizon_s, rng, max_rate_per_day=config.max_rate_per_day
    )[1]


def run_functions(
    config: FunctionsConfig,
    facility_ci: CarbonSignal,
    horizon_s: float,
    rng: np.random.Generator,
) -> KeepAliveResult:
    """`config`'s functions run with keep-alive over [0, horizon_s), charged and decided on
    `facility_ci` (PUE x carbon intensity, g per IT kWh; the module docstring), held at its
    last value past its end for executions that outlast the horizon."""
    invocations = function_invocations(config, horizon_s, rng)
    signal = _covering(facility_ci, _latest_end_s(invocations))
    policy = keep_alive_policy(config.keep_alive, signal)
    return simulate_keep_alive(
        invocations, policy, ECOLIFE_GENERATIONS, signal, horizon_s, history=config.history
    )


def _latest_end_s(invocations: pd.DataFrame) -> float:
    """The latest an execution of `invocations` can end, s: a cold start then the
    execution on the slowest generation."""
    if invocations.empty:
        return 0.0
    slowest = max(ECOLIFE_GENERATIONS.values(), key=lambda g: g.exec_time_factor)
    cold_s = max(g.cold_start_s for g in ECOLIFE_GENERATIONS.values())
    ends = invocations["arrival_s"] + cold_s + invocations["exec_s"] * slowest.exec_time_factor
    return float(ends.max())


def _covering(signal: CarbonSignal, end_s: float) -> CarbonSignal:
    """`signal` itself if it reaches `end_s`, else the same steps with its last value held
    to `end_s`."""
    if end_s <= signal.end_s:
        return signal
    return CarbonSignal(signal.times_s, signal.values_g_per_kwh, end_s, kind=signal.kind)


class Functions(Component):
    """Serverless functions on one site, run at the end of the run (module docstring)."""

    name = "functions"
    uses = ("fleet",)
    stream = "functions"

    __slots__ = ("_core", "_fleet", "_rng")

    def __init__(self, core: Core, *, fleet: Fleet, rng: np.random.Generator):
        self._core, self._fleet, self._rng = core, fleet, rng
        if core.scenario.functions is not None:
            check_functions(core.scenario.functions)

    def write_results(self, out: ResultParts) -> None:
        """The summary's function keys (None without `[functions]`) and the table
        `functions`: one row per invocation (`KeepAliveResult.invocations`)."""
        config = self._core.scenario.functions
        if config is None:
            out.summary.update(dict.fromkeys(FUNCTION_KEYS))
            return
        site = self._fleet.by_name[config.site]
        result = run_functions(config, site.facility_ci, self._core.horizon_s, self._rng)
        out.summary.update(result.summary)
        out.tables["functions"] = result.invocations
