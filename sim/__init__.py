"""dcsim: a discrete-event simulator of GPU datacenters for carbon-aware scheduling research.

    import sim
    scenario = sim.load_scenario("scenarios/quickstart.toml")
    results = sim.simulate(scenario)
    results.summary["carbon_total_kg"]; results.jobs; results.save("out/")
    summary = sim.sweep("scenarios/quickstart.toml", grid={"policy": ["run_now", "wait_awhile"]},
                        seeds=range(5), out="out/sweep")   # one row per run

The package is a house of floors (docs/architecture.md): `util`, `models`, `config`, the
domain builders (`grid`, `network`, `workload`, `serving`, `market`), `engine`, `study`, and
the public faces beside them (this module, `api`, `errors`, `plugins`, `testing`, `cli`,
`results`). The modules' former paths keep working as aliases of the same module objects:
`sim.stats` and `sim.plots` (documented: `sim.study.stats`, `sim.study.plots`), and,
deprecated with a DeprecationWarning, `sim.scenario` (now `sim.config`), `sim.run`
(`sim.engine.build`) and the other modules that moved (`_MOVED`).
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

import sim.util.native  # noqa: F401  first: DCSIM_PURE=1 imports the compiled modules' sources
from sim.config import Scenario, load_scenario
from sim.engine.build import simulate
from sim.errors import DcsimError, PolicyError, ScenarioError, TraceError
from sim.results import Results
from sim.results import package_version as _package_version
from sim.study.experiments import load_run, load_sweep, sweep

__all__ = [
    "DcsimError",
    "PolicyError",
    "Results",
    "Scenario",
    "ScenarioError",
    "TraceError",
    "load_run",
    "load_scenario",
    "load_sweep",
    "simulate",
    "sweep",
]

__version__ = _package_version()
"""The installed dcsim's version (its distribution metadata); "unknown" if not installed."""

_DOCUMENTED = {"sim.stats": "sim.study.stats", "sim.plots": "sim.study.plots"}
_MOVED = {
    "sim.scenario": "sim.config",
    "sim.run": "sim.engine.build",
    "sim.experiments": "sim.study.experiments",
    "sim.figure_sets": "sim.study.figure_sets",
    "sim.cluster": "sim.engine.ledger",
    "sim.hardware": "sim.models.hardware",
    "sim.mig": "sim.models.mig",
    "sim.sharing": "sim.models.sharing",
    "sim.scaling": "sim.models.scaling",
    "sim.training": "sim.models.training",
    "sim.pricing": "sim.models.pricing",
    "sim.billing": "sim.market.billing",
    "sim.dr_events": "sim.market.dr_events",
    "sim.dr_programs": "sim.market.dr_programs",
    "sim.rebound": "sim.workload.rebound",
    "sim.atomic": "sim.util.atomic",
    "sim.csv_rows": "sim.util.csv_rows",
    "sim.columns": "sim.util.columns",
    "sim.streams": "sim.util.streams",
    "sim.records": "sim.util.records",
    "sim.config_model": "sim.config.base",
    "sim.serving.config": "sim.config.services",
    "sim.serving.models": "sim.models.llm",
    "sim.serving.roofline": "sim.models.llm_roofline",
    "sim.serving.replica": "sim.models.llm_replica",
    "sim.serving.quality": "sim.models.llm_quality",
}
"""Former module paths (before `sim/` was laid out in floors) and where each module lives now.
Modules, not names: a class that moved between modules (`sim.billing.TouPeriod` is now
`sim.config.market.TouPeriod`) is imported from its new module. `sim.serving.performance` is
not among them: it is the function `sim.serving` exports (the module is
`sim.models.llm_performance`)."""


class _FormerPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a former path as the module at its new one (the same object, not a copy)."""

    def find_spec(self, name, path, target=None):
        if name in _DOCUMENTED or name in _MOVED:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name in _MOVED:
            warnings.warn(
                f"{spec.name} is deprecated: import {_MOVED[spec.name]}",
                DeprecationWarning,
                stacklevel=2,
            )
        module = importlib.import_module(_DOCUMENTED.get(spec.name) or _MOVED[spec.name])
        # the import system sets the alias's spec on the module: exec_module puts its own back
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        alias = module.__spec__
        assert alias is not None
        module.__spec__ = alias.loader_state


sys.meta_path.append(_FormerPaths())
