"""dcsim: a discrete-event simulator of GPU datacenters for carbon-aware scheduling research.

import sim
scenario = sim.load_scenario("scenarios/quickstart.toml")
results = sim.simulate(scenario)
results.summary["carbon_total_kg"]; results.jobs; results.save("out/")
summary = sim.sweep("scenarios/quickstart.toml", grid={"policy": ["run_now", "wait_awhile"]},
                    seeds=range(5), out="out/sweep")   # one row per run
"""

from sim.errors import DcsimError, PolicyError, ScenarioError, TraceError
from sim.experiments import load_run, load_sweep, sweep
from sim.results import Results
from sim.run import simulate
from sim.scenario import Scenario, load_scenario

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
