"""`simulate`: one call builds the world from a scenario, runs it and returns `Results`."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from sim.api import Policy
from sim.engine import Engine
from sim.engine.prediction import build_prediction
from sim.errors import ScenarioError, TraceError
from sim.grid import CarbonSignal, Forecaster, signal_for_site
from sim.network import Wan
from sim.plugins import build_policy
from sim.results import Results, build_results
from sim.scenario import Scenario
from sim.serving.sources import RequestSource, build_source
from sim.streams import random_streams, seed_sequences
from sim.workload import JobTable, build_jobs


def build_world(
    scenario: Scenario, streams: dict[str, np.random.Generator]
) -> tuple[JobTable, list[CarbonSignal]]:
    """Read or generate everything the scenario names: the jobs, each site's carbon signal
    and the throughput table. Raises ScenarioError/TraceError for bad files."""
    if scenario.throughput is not None:
        scenario.throughput.speeds()  # a bad table fails here, before the run
    jobs = build_jobs(scenario, streams["workload"])
    signals = [signal_for_site(scenario, i) for i in range(len(scenario.sites))]
    return jobs, signals


def build_sources(scenario: Scenario, seed: np.random.SeedSequence) -> list[RequestSource]:
    """Each service's request source; a child of `seed` per service (in scenario order).
    Raises ScenarioError naming the service for a bad request file."""
    seeds = seed.spawn(len(scenario.services))
    sources = []
    for i, (svc, child) in enumerate(zip(scenario.services, seeds, strict=True)):
        try:
            sources.append(build_source(svc.requests, scenario.horizon_s, child))
        except (TraceError, ValueError) as e:
            raise ScenarioError(f"services[{i}].requests: {e}") from None
    return sources


def build_engine(scenario: Scenario, policy: Policy | str | None = None) -> Engine:
    """The world of `scenario` with `policy` in charge, ready to run: the one construction
    path of `simulate` and `sim.testing.PolicyHarness`. `policy` as in `simulate`."""
    streams = random_streams(scenario.seed)
    jobs, signals = build_world(scenario, streams)
    sources = build_sources(scenario, seed_sequences(scenario.seed)["services"])
    if policy is None:
        policy = build_policy(scenario.policy.name, scenario.policy.params)
    elif isinstance(policy, str):
        params = scenario.policy.params if policy == scenario.policy.name else {}
        policy = build_policy(policy, params)
    engine = Engine(
        scenario,
        jobs,
        signals,
        policy,
        Forecaster(scenario.forecast, streams["forecast"]),
        Wan.from_scenario(scenario),
        sources,
        streams["failures"],
    )
    engine.queries.prediction = build_prediction(scenario, len(jobs), streams["prediction"])
    return engine


def simulate(
    scenario: Scenario,
    policy: Policy | str | None = None,
    *,
    progress: Callable[[float], None] | None = None,
) -> Results:
    """Run `scenario` to its horizon and return its results.

    `policy`: None for the scenario's own `[policy]`, a registry name or `module:Class`
    (built with the scenario's policy params), or a ready policy object (a `sim.api.Policy`,
    or any object with `decide(state)`).
    `progress(fraction)` is called as the simulation advances.
    """
    engine = build_engine(scenario, policy)
    t0 = time.perf_counter()
    engine.run(progress)
    return build_results(engine, time.perf_counter() - t0)
