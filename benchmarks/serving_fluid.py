"""Speed of the fluid fidelity of LLM serving (`sim.serving.fluid.Fluid`): a year of one-minute
steps (525,600) for 20 services (Llama-3.1-8B on 1 to 4 H100 replicas, the azure-conv and
azure-code token presets in turn), each advanced in 12 calls as a policy would, power
reports to a no-op. The load follows the synthetic source's daily and weekly cycles
(amplitudes 0.5 and 0.2) around `--load` of the replicas' capacity: at the default 0.5 the
daily peaks reach about 90%, where the batch moves slowly and some steps run one after
another; at 0.6 the peaks overload the replicas every day (a backlog at each peak).

    python benchmarks/serving_fluid.py [--services N] [--days D] [--load L]

Prints steps per second (all services' steps over the wall time); no assertion.

    python benchmarks/serving_fluid.py --traces [--hours H] [--repeat N]

The fluid fidelity of a bursty source (`sim.serving.fluid.fluid`: the request level's
engine, after measuring the source's burstiness) against the request level on the same
replay: each Azure LLM inference trace (2023, read from ../shared/data) at its own pace,
repeated for H hours (default 24), on Llama-3.1-70B-Instruct replicas of four H100s
(max_batch 128, scenarios/serving.toml's `code` service), two replicas then one from the
middle of the run (a drain), advanced in 60 s steps with `live()` read at each (the
engine's busiest use), then closed. Each level runs N times (default 3), interleaved,
the first alternating; prints each level's CPU times (building the fidelity included),
their median and the fluid's median over the request level's.

    python benchmarks/serving_fluid.py --chain [--jobs J] [--services N] [--days D]

A run of `benchmarks/run.py`'s standard scenario (8 sites, the Philly-like job trace,
default 20,000 jobs over 14 days) with N fluid services (default 4) under the chain
`run_now` + `serve_autoscale`: prints the policy's decisions, how many `advance_to` calls
moved each service's time forward (in all and per decision), the simulation's wall and
CPU times (the process's, system time included) and those of building the results.

    python benchmarks/serving_fluid.py --results [--jobs J] [--services N] [--days D]

The same scenario under `run_now` (which never reads the services) with a year of N
fluid services (default 20, 1,000 jobs): the simulation's wall and CPU times and, apart,
those of building the results (`sim.engine.results.build_results`: the 10.5 million rows
of the `services` table and the services' power in the power table), with the rows of
both. On a machine shared with other work the wall times follow the load; the CPU times
less so (the system time of the memory's first touch still varies with the kernel).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from sim.config.services import SloConfig
from sim.models.llm_replica import replica_model
from sim.serving.fluid import Fluid, fluid
from sim.serving.importers import import_azure_llm
from sim.serving.request_level import RequestLevel
from sim.serving.service_sim import ServiceContext, ServiceSim
from sim.serving.sources import FileSource, SyntheticSource

TRACES = Path(__file__).resolve().parents[2] / "shared/data/azure-llm-inference-2023"


def in_a_run(jobs: int, services: int, days: float, policy: str) -> None:
    """The `--chain` and `--results` benchmarks (module docstring): `benchmarks/run.py`'s
    standard scenario over `days` under `policy`, counting the fluid level's advances."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run import standard_scenario

    from policies.serve_autoscale import ServeAutoscale
    from sim.engine.build import build_engine
    from sim.engine.results import build_results

    moved: dict[str, int] = {}
    advance_to, amend = Fluid.advance_to, ServeAutoscale.amend
    decisions = 0

    def counted_advance(sim: Fluid, t_s: float) -> None:
        if min(t_s, sim.horizon_s) > sim._t:
            moved[sim.name] = moved.get(sim.name, 0) + 1
        advance_to(sim, t_s)

    def counted_amend(policy, state, actions):  # type: ignore[no-untyped-def]
        nonlocal decisions
        decisions += 1
        return amend(policy, state, actions)

    Fluid.advance_to = counted_advance  # type: ignore[method-assign]
    ServeAutoscale.amend = counted_amend  # type: ignore[method-assign]
    engine = build_engine(standard_scenario(jobs, policy, services, duration_h=days * 24.0))
    t0, cpu0 = time.perf_counter(), time.process_time()
    engine.run()
    run_s, run_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    t0, cpu0 = time.perf_counter(), time.process_time()
    results = build_results(engine, run_s)
    results_s, results_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    total = sum(moved.values())
    print(
        f"{policy}, {results.summary['jobs_submitted']:,} jobs, {services} fluid services, "
        f"{days:g} days: {decisions:,} decisions of serve_autoscale; {total:,} advances that "
        f"moved a service ({total / max(1, services):,.0f} per service"
        + (f", {total / services / decisions:.2f} per service and decision)" if decisions else ")")
    )
    rows = len(results.services) if results.services is not None else 0
    print(
        f"simulation {run_s:.2f} s (CPU {run_cpu_s:.2f} s); building the results "
        f"{results_s:.2f} s (CPU {results_cpu_s:.2f} s; services {rows:,} rows, "
        f"power {len(results.power):,} rows)"
    )


def traces(hours: float, repeat: int) -> None:
    """The `--traces` benchmark (module docstring), each level `repeat` times, interleaved
    (the first level alternating)."""
    slo = SloConfig(ttft_ms=2000.0, tpot_ms=200.0)
    horizon_s, step_s = hours * 3600.0, 60.0
    for name in ("conv", "code"):
        table, _ = import_azure_llm(TRACES / f"AzureLLMInferenceTrace_{name}.csv.gz")
        model = replica_model(
            "Llama-3.1-70B-Instruct",
            "H100",
            4,
            128,
            float(table.input_tokens.mean()),
            float(table.output_tokens.mean()),
        )
        source = FileSource(table, horizon_s, 1.0, True)
        cpu: dict[str, list[float]] = {"request": [], "fluid": []}
        levels = [("request", RequestLevel), ("fluid", fluid)]
        for k in range(repeat):
            for label, build in levels[:: 1 if k % 2 == 0 else -1]:
                cpu0 = time.process_time()
                sim: ServiceSim = build(
                    "s", source, np.zeros(1), slo, 60.0, step_s, horizon_s, lambda *a: None
                )
                sim.configure(0.0, 0, 2, model)
                for t in np.arange(step_s, horizon_s, step_s):
                    if t == horizon_s // 2:
                        sim.configure(float(t), 0, 1, model)
                    sim.advance_to(float(t))
                    sim.live()
                sim.close(horizon_s)
                cpu[label].append(time.process_time() - cpu0)
        for label, runs in cpu.items():
            print(
                f"{name} {hours:g} h, {label}: median {np.median(runs):.2f} s CPU "
                f"({', '.join(f'{c:.2f}' for c in runs)})"
            )
        ratio = np.median(cpu["fluid"]) / np.median(cpu["request"])
        print(f"{name}: fluid / request median CPU time {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--days", type=float, default=365.0)
    parser.add_argument("--calls", type=int, default=12, help="advance_to calls per service")
    parser.add_argument("--load", type=float, default=0.5, help="mean load / capacity")
    parser.add_argument("--traces", action="store_true", help="both levels on the traces")
    parser.add_argument("--hours", type=float, default=24.0, help="with --traces")
    parser.add_argument("--repeat", type=int, default=3, help="with --traces")
    parser.add_argument("--chain", action="store_true", help="run_now + serve_autoscale")
    parser.add_argument("--results", action="store_true", help="a year under run_now")
    parser.add_argument("--jobs", type=int, help="with --chain (20,000) or --results (1,000)")
    args = parser.parse_args()
    if args.chain or args.results:
        services = args.services if args.results or "--services" in sys.argv else 4
        days = args.days if args.results or "--days" in sys.argv else 14.0
        jobs = args.jobs or (20_000 if args.chain else 1_000)
        in_a_run(jobs, services, days, "autoscale" if args.chain else "run_now")
        return
    if args.traces:
        traces(args.hours, args.repeat)
        return
    horizon_s, step_s = args.days * 86400.0, 60.0
    slo = SloConfig(ttft_ms=2000.0, tpot_ms=100.0)
    services = []
    for k in range(args.services):
        seed = np.random.SeedSequence(k)
        preset = ("azure-conv", "azure-code")[k % 2]
        probe = SyntheticSource(1.0, horizon_s, seed, 0.5, 0.2, preset)
        model = replica_model(
            "Llama-3.1-8B-Instruct",
            "H100",
            1,
            256,
            probe.tokens.mean_input,
            probe.tokens.mean_output,
        )
        replicas = 1 + k % 4
        capacity_per_s = replicas * model.slots / (probe.tokens.mean_output * model.iter_s[-1])
        source = SyntheticSource(args.load * capacity_per_s, horizon_s, seed, 0.5, 0.2, preset)
        ctx = ServiceContext(
            f"s{k}", source, np.zeros(2), slo, 60.0, step_s, horizon_s, lambda *a: None
        )
        sim = Fluid(ctx)
        sim.configure(0.0, 0, replicas, model)
        services.append(sim)
    t0 = time.perf_counter()
    for sim in services:
        for t in np.linspace(0.0, horizon_s, args.calls + 1)[1:]:
            sim.advance_to(float(t))
        sim.close(horizon_s)
    wall_s = time.perf_counter() - t0
    steps = args.services * int(np.ceil(horizon_s / step_s))
    print(
        f"{args.services} services x {steps // args.services:,} steps: {wall_s:.2f} s, "
        f"{steps / wall_s:,.0f} steps/s"
    )


if __name__ == "__main__":
    main()
