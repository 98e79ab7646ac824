"""One public face (httpx's tests/test_exported_members.py): `sim` and `sim.api` export exactly
the documented names, everything else they hold is private or a submodule; and importing
`sim` and simulating stays light (no SciPy, no Dask)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from types import ModuleType

import pytest

import sim
import sim.api
from tests.conftest import REPO

# What README's "From Python" and docs/experiments.md use: load a scenario, simulate it, its
# results, sweeps and their runs, and the errors the CLI prints as one line (exit status 2).
SIM_NAMES = [
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
# Documented submodules, reached as `sim.stats`, `sim.plots` after importing them, not names
# of `sim.__all__`.
SIM_SUBMODULES = ["sim.stats", "sim.plots"]

# The policy contract (docs/writing-a-policy.md): the actions, the policy protocol and its
# hooks, the read-only views of the state and the interface they ask, the error a bad
# action raises, the time-weighted percentile the simulator's own events use, and the
# decorators of compiled numeric kernels (numba, the Python function kept as the reference).
API_NAMES = [
    "Action",
    "BatchPlan",
    "Defer",
    "DemandResponseView",
    "Estimate",
    "GpuSpec",
    "JobView",
    "MigGpuState",
    "Migrate",
    "MigrationCost",
    "OnsiteReading",
    "ParallelScaling",
    "Policy",
    "PolicyError",
    "PolicyHooks",
    "PoolPlacer",
    "Reject",
    "Repartition",
    "ReplicaPoint",
    "Resume",
    "Route",
    "Scale",
    "ServiceView",
    "SetBattery",
    "SetCap",
    "SetDirective",
    "Start",
    "StateQueries",
    "Suspend",
    "SystemState",
    "helper",
    "kernel",
    "weighted_percentile",
]


def public_members(module: ModuleType, *, defined_here: bool) -> list[str]:
    """Names of `module` not starting with "_", submodules left out; with `defined_here`,
    only what the module defines itself (not what it imports for its own use)."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and (not defined_here or getattr(value, "__module__", None) == module.__name__)
    )


@pytest.mark.parametrize(("module", "documented"), [(sim, SIM_NAMES), (sim.api, API_NAMES)])
def test_all_is_exactly_the_documented_names(module, documented):
    assert sorted(module.__all__) == list(module.__all__), "keep __all__ sorted"
    assert list(module.__all__) == documented


@pytest.mark.parametrize("module", [sim, sim.api])
def test_every_name_in_all_exists(module):
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_every_public_attribute_of_sim_is_in_all():
    # sim/__init__.py only imports its public names from the implementation modules.
    assert public_members(sim, defined_here=False) == sorted(sim.__all__)


def test_every_public_class_or_function_sim_api_defines_is_in_all():
    # sim.api also imports helpers for its own use (numpy, the hardware model): not exported.
    assert set(public_members(sim.api, defined_here=True)) <= set(sim.api.__all__)


@pytest.mark.parametrize("name", SIM_SUBMODULES)
def test_documented_submodules_import(name):
    module = importlib.import_module(name)
    assert getattr(sim, name.rpartition(".")[2]) is module
    assert name.rpartition(".")[2] not in sim.__all__


def test_importing_sim_and_simulating_imports_neither_scipy_nor_dask():
    # Only sim.stats needs SciPy (when it computes an interval) and only the dask sweep
    # backend needs Dask (the `dask` extra): a fresh interpreter shows what a run imports.
    code = (
        "import sys, sim\n"
        "scenario = sim.load_scenario('scenarios/quickstart.toml', ['duration_h=72'])\n"
        "results = sim.simulate(scenario)\n"
        "assert results.summary['jobs_completed'] > 0\n"
        "top = {m.split('.')[0] for m in sys.modules}\n"
        "print(','.join(sorted(top & {'scipy', 'dask', 'distributed'})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
