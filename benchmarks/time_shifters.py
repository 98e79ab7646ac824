"""The time-shifters against `run_now` on the quickstart: simulation wall time and ratio.

    python benchmarks/time_shifters.py [--rate 100] [--hours 72] [--rounds 3]
        [--policy wait_awhile wait_awhile_interruptible lowest_window carbon_time]

Runs `scenarios/quickstart.toml` for `hours` at `rate` jobs per hour without its
demand-response event (three small sites: at 100 jobs/h most jobs wait for GPUs, so the
pending queue grows to thousands), under `run_now` and each policy, in `rounds` interleaved
rounds of fresh processes. Prints each one's median `sim_wall_s` and its ratio to
`run_now`'s (issue 22's target for wait_awhile: at most 3).

    python benchmarks/time_shifters.py --one wait_awhile --rate 100
        one run in this process; prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICIES = {
    "run_now": ["policy.name='run_now'", "policy.params={}"],
    "wait_awhile": ["policy.name='wait_awhile'", "policy.params={}"],
    "wait_awhile_interruptible": [
        "policy.name='wait_awhile'",
        "policy.params={interruptible=true}",
    ],
    "lowest_window": ["policy.name='lowest_window'", "policy.params={}"],
    "carbon_time": ["policy.name='carbon_time'", "policy.params={}"],
}


def run_once(policy: str, rate: float, hours: float) -> dict:
    import sim
    from sim.config.loading import load_scenario

    scenario = load_scenario(
        REPO / "scenarios" / "quickstart.toml",
        [
            f"duration_h={hours}",
            f"workload.synthetic.arrival_rate_per_h={rate}",
            "demand_response=[]",
            *POLICIES[policy],
        ],
    )
    s = sim.simulate(scenario).summary
    return {"policy": policy, "jobs": s["jobs_submitted"], "sim_wall_s": s["sim_wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="jobs per hour")
    parser.add_argument("--hours", type=float, default=72.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", nargs="+", default=["wait_awhile"], choices=sorted(POLICIES))
    parser.add_argument("--one", choices=sorted(POLICIES), help="one run, one JSON line")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_once(args.one, args.rate, args.hours)))
        return
    walls: dict[str, list[float]] = {p: [] for p in ["run_now", *args.policy]}
    for _ in range(args.rounds):
        for policy in walls:
            cmd = [sys.executable, __file__, "--one", policy]
            cmd += ["--rate", str(args.rate), "--hours", str(args.hours)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            walls[policy].append(json.loads(out.strip().splitlines()[-1])["sim_wall_s"])
    base = statistics.median(walls["run_now"])
    print(f"quickstart, {args.hours:g} h at {args.rate:g} jobs/h, {args.rounds} rounds (medians)")
    for policy, w in walls.items():
        med = statistics.median(w)
        print(f"{policy:26s} sim_wall_s {med:8.2f}   x run_now {med / base:8.1f}")


if __name__ == "__main__":
    main()
