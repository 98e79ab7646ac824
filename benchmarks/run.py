"""dcsim's standard benchmark: a year-scale, multi-site run, measured against bare SimPy.

    python benchmarks/run.py --jobs 500000 [--policy run_now] --json
        one run; prints one JSON line: jobs, sim_wall_s (the simulation), total_wall_s
        (trace generation + simulation + writing the result files), peak_rss_mb.

    python benchmarks/run.py --jobs 500000 --services 20 --json
        the same run with 20 LLM inference services (fluid, 60 s steps) on the 8 sites,
        over at least a year (the horizon grows to 8,760 h if the jobs' is shorter).

    python benchmarks/run.py --services-ratio 500000 --services 20 [--rounds 3]
        interleaved pairs of fresh processes, without and with the services: prints the
        medians and their ratio (the serving target: at most 2).

    python benchmarks/run.py --contention-ratio 100000 --policy carbon_aware [--rounds 3]
        interleaved pairs of fresh processes, with `wan.contention` false and true (moves
        share link capacity, max-min fair): the medians and their ratio, the WAN data moved
        and the mean completion time of both (`--contention` runs one with it).

    python benchmarks/run.py --ratio 100000 500000 1000000 [--rounds 3]
        for each size, `rounds` interleaved pairs of fresh processes: this benchmark, then
        ../shared/bench/simpy_baseline.py N (the bare SimPy job lifecycle). Prints the
        medians and R = median sim_wall_s / median baseline wall_s as a Markdown table.

The standard workload: 8 sites on real 2019-2020 zone traces, each with its own PUE;
5,000 GPUs in 8-GPU nodes split unevenly across the sites; the synthetic generator's
Philly preset (GPU-count mix and heavy-tailed durations) with daily and weekly arrival
cycles at an offered load of 0.75 of the fleet, stopping at N jobs; 40% of the jobs
deferrable with 6-24 h of slack. The horizon is the time N jobs take to arrive plus a
week. Absolute times on shared machines are not stable; the ratio R is.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO.parent / "shared" / "bench" / "simpy_baseline.py"

SITES = [  # zone, city, lat, lon, PUE, GPU model, GPUs (multiples of 8; 5,000 in all)
    ("DE", "frankfurt", 50.11, 8.68, 1.35, "A100-80GB", 1200),
    ("FR", "paris", 48.86, 2.35, 1.25, "A100-80GB", 1000),
    ("GB", "london", 51.51, -0.13, 1.30, "H100-SXM", 800),
    ("ES", "madrid", 40.42, -3.70, 1.40, "A100-40GB", 600),
    ("PL", "warsaw", 52.23, 21.01, 1.50, "V100", 520),
    ("FI", "helsinki", 60.17, 24.94, 1.15, "H100-SXM", 400),
    ("IT", "milan", 45.46, 9.19, 1.45, "A100-40GB", 280),
    ("NL", "amsterdam", 52.37, 4.90, 1.20, "V100", 200),
]
TOTAL_GPUS = sum(site[-1] for site in SITES)
OFFERED_LOAD = 0.75
DATA_GB = 50.0
"""Input data per job, GB: what a job moves over the WAN when it runs away from its origin."""

POLICIES = {
    "run_now": {"name": "run_now"},
    # time-shifting + space-shifting (space_time: the site and start time of lowest expected
    # carbon before the deadline, WAN transfer included) + power caps (carbon_aware_cap)
    "carbon_aware": {
        "name": "chain",
        "params": {"policies": [{"name": "space_time"}, {"name": "carbon_aware_cap"}]},
    },
    # the training jobs as they come, the services' replicas sized at every decision
    "autoscale": {
        "name": "chain",
        "params": {"policies": [{"name": "run_now"}, {"name": "serve_autoscale"}]},
    },
}


SERVICE_MODELS = ("Llama-3.1-8B-Instruct", "Qwen3-8B", "gemma-3-12b-it", "Qwen3-14B")
"""The services' models, in turn (on a V100's 32 GB, the 8B model)."""


def standard_services(n: int) -> list[dict]:
    """`n` LLM services spread over the 8 sites in turn: each on replicas of one GPU of its
    site's model, provisioned for its peak rate with 25% headroom, a synthetic source of
    1-4 requests/s with daily (0.5) and weekly (0.2) cycles, allowed on its own site and
    the next with the same GPUs."""
    from sim.models.llm_replica import replica_model
    from sim.serving import request_presets

    services = []
    for i in range(n):
        site = SITES[i % len(SITES)]
        other = SITES[(i + 1) % len(SITES)]
        gpu = site[5]
        sites = [site[1]] + ([other[1]] if other[5] == gpu else [])
        model = SERVICE_MODELS[i % len(SERVICE_MODELS)] if gpu != "V100" else SERVICE_MODELS[0]
        tokens = "azure-conv" if i % 2 else "azure-code"
        preset = request_presets()[tokens]
        mean_in = float(np.exp(preset.input_tokens.mu + preset.input_tokens.sigma**2 / 2))
        mean_out = float(np.exp(preset.output_tokens.mu + preset.output_tokens.sigma**2 / 2))
        m = replica_model(model, gpu, 1, 128, mean_in, mean_out)
        capacity_rps = m.slots / (mean_out * float(m.iter_s[m.slots]))
        rate = 1.0 + i % 4
        replicas = math.ceil(rate * 1.5 * 1.2 * 1.25 / capacity_rps)  # peak x headroom
        services.append(
            {
                "name": f"svc{i}",
                "model": model,
                "gpu": gpu,
                "max_batch": 128,
                "sites": sites,
                "replicas": {site[1]: replicas},
                "slo": {"ttft_ms": 2000, "tpot_ms": 150},
                "requests": {
                    "rate_per_s": rate,
                    "daily_amplitude": 0.5,
                    "weekly_amplitude": 0.2,
                    "tokens": tokens,
                },
            }
        )
    return services


def standard_scenario(
    jobs: int,
    policy: str = "run_now",
    services: int = 0,
    contention: bool = False,
    duration_h: float | None = None,
):
    """The standard scenario (module docstring) of `jobs` jobs under `policy` with
    `services` services; `duration_h` (None: the jobs' arrival time plus a week, at least a
    year with services) sets the horizon."""
    from sim.config.loading import scenario_from_dict
    from sim.config.workload import SyntheticWorkload

    synthetic = {
        "preset": "philly",
        "offered_load": OFFERED_LOAD,
        "offered_load_gpus": TOTAL_GPUS,
        "max_jobs": jobs,
        "diurnal_amplitude": 0.3,
        "weekly_amplitude": 0.3,
        "deferrable_fraction": 0.4,
        "slack_h": [6, 24],
        "data_gb": DATA_GB,
    }
    rate_per_h = SyntheticWorkload.model_validate(synthetic).mean_arrival_rate_per_h()
    return scenario_from_dict(
        {
            "name": f"benchmark-{jobs}",
            "seed": 1,
            "start": "2019-01-01T00:00:00Z",
            # with services: at least a year of them (the serving target's setting)
            "duration_h": duration_h
            or max(jobs / rate_per_h + 7 * 24, 8760.0 if services else 0.0),
            # a year of services runs into 2020, which some WAN zones lack: read them aligned
            "years": "align",
            "sites": [
                {
                    "name": city,
                    "lat": lat,
                    "lon": lon,
                    "pue": pue,
                    "carbon": {"zone": zone},
                    "gpus": [{"model": model, "count": count}],
                }
                for zone, city, lat, lon, pue, model, count in SITES
            ],
            "wan": {"topology": "europe", "energy_model": "path", "contention": contention},
            "workload": {"synthetic": synthetic},
            "policy": POLICIES[policy],
            "services": standard_services(services),
            "serving": {"fidelity": "fluid", "step_s": 60.0},
        }
    )


def run_once(jobs: int, policy: str, services: int = 0, contention: bool = False) -> dict:
    import sim

    t0 = time.perf_counter()
    scenario = standard_scenario(jobs, policy, services, contention)
    results = sim.simulate(scenario)
    with tempfile.TemporaryDirectory() as out:
        results.save(out)
    total = time.perf_counter() - t0
    return {
        "jobs": int(results.summary["jobs_submitted"]),
        "policy": policy,
        "sim_wall_s": round(results.summary["sim_wall_s"], 3),
        "total_wall_s": round(total, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "horizon_h": round(scenario.duration_h, 1),
        "jobs_completed": results.summary["jobs_completed"],
        "gpu_utilization": round(results.summary["gpu_utilization"], 3),
        "services": services,
        "requests_total": results.summary["requests_total"],
        "contention": contention,
        "wan_data_gb": results.summary["wan_data_gb"],
        "jct_mean_h": results.summary["jct_mean_h"],
    }


def _subprocess_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout
    return json.loads(out.strip().splitlines()[-1])


def ratio_table(sizes: list[int], rounds: int, policy: str) -> str:
    if not BASELINE.is_file():
        sys.exit(f"baseline not found at {BASELINE}: run from a checkout beside ../shared")
    rows = [
        "| jobs | dcsim sim_wall_s | dcsim total_wall_s | SimPy baseline wall_s | R | "
        "peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        ours, base = [], []
        for _ in range(rounds):  # interleaved, so that machine load hits both alike
            ours.append(
                _subprocess_json(
                    [sys.executable, __file__, "--jobs", str(n), "--policy", policy, "--json"]
                )
            )
            base.append(_subprocess_json([sys.executable, str(BASELINE), str(n)]))
        sim_s = statistics.median(r["sim_wall_s"] for r in ours)
        total_s = statistics.median(r["total_wall_s"] for r in ours)
        base_s = statistics.median(r["wall_s"] for r in base)
        rss = max(r["peak_rss_mb"] for r in ours)
        rows.append(
            f"| {n:,} | {sim_s:.2f} | {total_s:.2f} | {base_s:.2f} | "
            f"{sim_s / base_s:.2f} | {rss:.0f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


def paired_runs(
    jobs: int, policy: str, rounds: int, extra: list[str]
) -> tuple[list[dict], list[dict], float, float]:
    """Interleaved rounds of fresh processes without and with the arguments `extra`: both
    lists of results and the median sim_wall_s of each."""
    alone, together = [], []
    for _ in range(rounds):
        cmd = [sys.executable, __file__, "--jobs", str(jobs), "--policy", policy, "--json"]
        alone.append(_subprocess_json(cmd))
        together.append(_subprocess_json([*cmd, *extra]))
    a = statistics.median(r["sim_wall_s"] for r in alone)
    b = statistics.median(r["sim_wall_s"] for r in together)
    return alone, together, a, b


def services_ratio(jobs: int, services: int, rounds: int, policy: str) -> str:
    """Interleaved rounds without and with `services` services; medians and their ratio."""
    _, together, a, b = paired_runs(jobs, policy, rounds, ["--services", str(services)])
    horizon_h = together[0]["horizon_h"]
    return (
        "| jobs | services | horizon h | requests | training alone sim_wall_s | "
        "with services sim_wall_s | ratio |\n|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {jobs:,} | {services} | {horizon_h:,.0f} | {together[0]['requests_total']:,.0f} "
        f"| {a:.2f} | {b:.2f} | {b / a:.2f} |"
    )


def contention_ratio(jobs: int, rounds: int, policy: str) -> str:
    """Interleaved rounds with `wan.contention` false and true; medians and their ratio."""
    free, shared, a, b = paired_runs(jobs, policy, rounds, ["--contention"])
    return (
        "| jobs | policy | WAN TB moved | contention false sim_wall_s | true sim_wall_s | "
        "ratio | jct_mean_h false | true |\n|---:|---|---:|---:|---:|---:|---:|---:|\n"
        f"| {jobs:,} | {policy} | {shared[0]['wan_data_gb'] / 1000:,.1f} | {a:.2f} | {b:.2f} "
        f"| {b / a:.2f} | {free[0]['jct_mean_h']:.3f} | {shared[0]['jct_mean_h']:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--policy", default="run_now", choices=sorted(POLICIES))
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--ratio",
        type=int,
        nargs="+",
        metavar="N",
        help="measure R against the SimPy baseline at these sizes",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--services", type=int, default=0, help="LLM services (fluid)")
    parser.add_argument(
        "--services-ratio", type=int, metavar="N", help="time N jobs without and with services"
    )
    parser.add_argument(
        "--contention", action="store_true", help="wan.contention = true (shared links)"
    )
    parser.add_argument(
        "--contention-ratio",
        type=int,
        metavar="N",
        help="time N jobs with wan.contention false and true",
    )
    args = parser.parse_args()
    if args.ratio:
        print(ratio_table(args.ratio, args.rounds, args.policy))
        return
    if args.services_ratio:
        print(services_ratio(args.services_ratio, args.services, args.rounds, args.policy))
        return
    if args.contention_ratio:
        print(contention_ratio(args.contention_ratio, args.rounds, args.policy))
        return
    result = run_once(args.jobs, args.policy, args.services, args.contention)
    print(json.dumps(result) if args.json else result)


if __name__ == "__main__":
    main()
