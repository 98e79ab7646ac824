"""The one construction path: `build_world` (the jobs and the sites' carbon signals),
`build_sources` (the services' request sources), `build_engine` (the engine with its policy,
forecaster, WAN and inputs), `checked_engine` (built, and refused where the run would refuse
it before its first event: `dcsim validate`'s check) and `simulate`, one call that builds
the world from a scenario, runs it (to a fixed point with user rebound) and returns
`Results`."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.api import Policy
from sim.config.scenario import Scenario
from sim.config.services import MAX_RUN_REQUESTS
from sim.engine import Engine
from sim.engine.batch import run_batch
from sim.engine.batch.eligibility import refusal
from sim.engine.results import build_results
from sim.engine.run_placement import check_servers
from sim.errors import ScenarioError, TraceError
from sim.grid import CarbonSignal, Forecaster, signal_for_site
from sim.grid.issued_forecasts import site_replays
from sim.network import Wan
from sim.plugins import build_policy
from sim.results import Results
from sim.serving.sources import RequestSource, build_source
from sim.util.streams import random_streams, seed_sequences
from sim.workload import JobTable, build_jobs, rebound


def build_world(
    scenario: Scenario, streams: dict[str, np.random.Generator], jobs: JobTable | None = None
) -> tuple[JobTable, list[CarbonSignal]]:
    """Read or generate everything the scenario names: the jobs (unless given), each site's
    carbon signal and the throughput table. Raises ScenarioError/TraceError for bad files
    (and for jobs a pool of servers cannot hold yet, `check_servers`)."""
    if scenario.throughput is not None:
        scenario.throughput.speeds()  # a bad table fails here, before the run
    if jobs is None:
        jobs = workload_jobs(scenario, streams["workload"])
    check_servers(jobs, scenario)
    signals = [
        signal_for_site(site, i, scenario.start, scenario.horizon_s, scenario.years)
        for i, site in enumerate(scenario.sites)
    ]
    return jobs, signals


def workload_jobs(scenario: Scenario, rng: np.random.Generator) -> JobTable:
    """The jobs of the scenario's `[workload]` (`sim.workload.build_jobs`), from the run's
    workload stream `rng`."""
    return build_jobs(
        scenario.workload,
        scenario.sites,
        scenario.start,
        scenario.duration_h,
        scenario.seed,
        rng,
    )


def decision_signals(scenario: Scenario) -> list[CarbonSignal | None]:
    """Each site's separate decision signal (`sites.decision_carbon`, covering [0,
    horizon_s]), None where decisions see the signal the site is charged on."""
    return [
        None
        if site.decision_carbon is None
        else signal_for_site(
            site, i, scenario.start, scenario.horizon_s, scenario.years, "decision_carbon"
        )
        for i, site in enumerate(scenario.sites)
    ]


def build_sources(scenario: Scenario, seed: np.random.SeedSequence) -> list[RequestSource]:
    """Each service's request source; a child of `seed` per service (in scenario order).
    Raises ScenarioError naming the service for a bad request file."""
    seeds = seed.spawn(len(scenario.services))
    sources = []
    for i, (svc, child) in enumerate(zip(scenario.services, seeds, strict=True)):
        try:
            origin = next(s for s in scenario.sites if s.name == svc.origin)
            sources.append(
                build_source(
                    svc.requests, scenario.horizon_s, child, scenario.start, origin.timezone
                )
            )
        except (TraceError, ValueError) as e:
            raise ScenarioError(f"services[{i}].requests: {e}") from None
    _check_run_requests(scenario, sources)
    return sources


def _check_run_requests(scenario: Scenario, sources: list[RequestSource]) -> None:
    """ScenarioError, before the run, if the request and iteration fidelities (which hold
    every request) would hold more than `MAX_RUN_REQUESTS`: the sources' expected arrivals,
    hour by hour (a request file tiled by `repeat` counted exactly)."""
    if scenario.serving.fidelity == "fluid" or not sources:
        return
    edges_s = np.append(np.arange(0.0, scenario.horizon_s, 3600.0), scenario.horizon_s)
    counts = [float(source.step_sums(edges_s)[0].sum()) for source in sources]
    if sum(counts) > MAX_RUN_REQUESTS:
        raise ScenarioError(
            f"services: about {sum(counts):.3g} requests over {scenario.duration_h:g} h "
            f"({' + '.join(f'{n:.3g}' for n in counts)} by service); the "
            f"{scenario.serving.fidelity} fidelity holds every request and a run at most "
            f"{MAX_RUN_REQUESTS:,} (about 10 GB): lower the rates, shorten the run or use "
            '[serving] fidelity = "fluid"'
        )


def build_engine(
    scenario: Scenario, policy: Policy | str | None = None, jobs: JobTable | None = None
) -> Engine:
    """The world of `scenario` with `policy` in charge, ready to run: the one construction
    path of `simulate` and `sim.testing.PolicyHarness`. `policy` as in `simulate`; `jobs`:
    the jobs to run instead of the scenario's workload (the closed loop of `[rebound]`)."""
    streams = random_streams(scenario.seed)
    jobs, signals = build_world(scenario, streams, jobs)
    sources = build_sources(scenario, seed_sequences(scenario.seed)["services"])
    if policy is None:
        policy = build_policy(scenario.policy.name, scenario.policy.params)
    elif isinstance(policy, str):
        params = scenario.policy.params if policy == scenario.policy.name else {}
        policy = build_policy(policy, params)
    forecaster = Forecaster(scenario.forecast, streams["forecast"])
    decided = decision_signals(scenario)
    # A replayed archive is the forecast of the signal the site's policies see.
    seen = [d if d is not None else s for d, s in zip(decided, signals, strict=True)]
    for replay in site_replays(scenario.sites, scenario.start, seen):
        forecaster.replay(replay)
    wan = (
        None
        if scenario.wan is None
        else Wan(scenario.wan, scenario.sites, scenario.start, scenario.horizon_s, scenario.years)
    )
    inputs: dict[str, dict[str, Any]] = {
        "fleet": {"signals": signals, "decision_signals": decided},
        "checkpoints": {"wan": wan},
        "services": {"sources": sources, "wan": wan},
        "queries": {"forecaster": forecaster},
    }
    return Engine(scenario, jobs, policy, streams, inputs)


def checked_engine(scenario: Scenario, policy: Policy | str | None = None) -> Engine:
    """`build_engine`, and what the run refuses of the world before its first event: the
    batch engine asked for (`engine.kind = "batch"`) on a world it does not take (`refusal`;
    a `[rebound]` run is run by the event engine). The one check path of `dcsim validate`
    and `dcsim run` (`simulate`)."""
    engine = build_engine(scenario, policy)
    if scenario.engine.kind == "batch" and scenario.rebound is None:
        why = refusal(engine)
        if why is not None:
            raise _batch_refused(why)
    return engine


def _batch_refused(why: str) -> ScenarioError:
    return ScenarioError(f'engine.kind = "batch": the batch engine does not apply: {why}')


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

    With a `[rebound]` table the users' follow-up jobs close a loop: the run is repeated
    with the follow-ups the last one triggered until they no longer change (`sim.workload.rebound`);
    `meta.json`'s `rebound` says how many runs it took.
    """
    if scenario.rebound is not None:
        return _closed_loop(scenario, policy, progress)
    engine = checked_engine(scenario, policy)
    t0 = time.perf_counter()
    kind = scenario.engine.kind
    why = 'engine.kind = "event"' if kind == "event" else run_batch(engine)
    if why is not None and kind == "batch":
        raise _batch_refused(why)
    if why is not None:
        engine.run(progress)
    elif progress is not None:
        progress(1.0)
    results = build_results(engine, time.perf_counter() - t0)
    results.meta["engine"] = {"kind": "event" if why else "batch", "batch_refused": why}
    return results


def _closed_loop(
    scenario: Scenario,
    policy: Policy | str | None,
    progress: Callable[[float], None] | None,
) -> Results:
    """`simulate` with `[rebound]`: runs until the follow-ups a run triggers are those it ran
    with (at most `max_iterations`; ScenarioError if they never settle)."""
    config = scenario.rebound
    assert config is not None
    workload = workload_jobs(scenario, random_streams(scenario.seed)["workload"])
    extra = rebound.followups_none(workload)
    largest = max(s.max_pool_gpus for s in scenario.sites)
    wall_s = 0.0
    for run in range(1, config.max_iterations + 1):
        jobs = rebound.merged(workload, extra)
        fresh = copy.deepcopy(policy) if not isinstance(policy, str | None) else policy
        engine = build_engine(scenario, fresh, jobs)
        t0 = time.perf_counter()
        engine.run(progress)
        wall_s += time.perf_counter() - t0
        results = build_results(engine, wall_s)
        triggered = rebound.followups(
            results.jobs, jobs, config, scenario.seed, scenario.horizon_s, largest
        )
        if triggered.equals(extra):
            results.meta["rebound"] = {"runs": run, "followups": len(extra)}
            return results
        extra = triggered
    raise ScenarioError(
        f"rebound: the follow-up jobs did not settle in {config.max_iterations} runs "
        "(raise rebound.max_iterations, or lower the elasticities)"
    )
