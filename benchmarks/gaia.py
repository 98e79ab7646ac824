"""GAIA's PAI trace (100k jobs, a year) with GAIA's start-time policies, against GAIA's own
simulator (Hanafy et al., ASPLOS 2024; github.com/umassos/GAIA).

    python benchmarks/gaia.py [--policy carbon_time lowest_window run_now] [--rounds 1] [--json]
    python benchmarks/gaia.py --compare [--policy ...]   # batch vs event engine, bit for bit

Reads `../shared/data/gaia-traces/pai-100k.csv` (imported by the `gaia` importer: one GPU
per job, lengths in hours), gives every job a deadline 24 h after submission + its length
(GAIA's 24 h waiting bound) and runs it on one site on California's 2020 grid (US-CAL, a
perfect forecast: GAIA's oracle variants) with enough GPUs that no job queues, as GAIA's
cloud has no capacity limit. Exits 0 with a message saying so when the trace is absent.

The trace is converted to dcsim's native format once (timed apart: "conversion"), and a
scenario file naming it is written. Each round of each policy is then a fresh process
running `dcsim run SCENARIO --out DIR` (import, load the trace, simulate, build the
results, print the summary, write the result files), timed from outside ("process"); its
`sim_wall_s` (the simulation alone) and the engine that ran are read from the files it
wrote; the process's CPU time (user + system) is printed too, as the wall time follows
the machine's load. Prints their medians beside the 1019 s GAIA's simulator took for this trace on a
machine like ours. The child imports `sim` as this process does (`PYTHONPATH`), so the
same harness times another checkout.

`--compare` runs each policy in this process with `engine.kind = "event"` and `"batch"`
and checks that every column of the jobs, power, events and sites tables and every summary
key but the wall time are the same, bit for bit (exit status 1 if not).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "gaia-traces" / "pai-100k.csv"
GAIA_WALL_S = 1019.0
"""GAIA's simulator on this trace, s (issue 22)."""
SLACK_H = 24.0
"""Waiting bound after submission, h: deadline = submit + length + this."""
GPUS = 2048
"""GPUs of the one site: more than the trace ever runs at once when shifted (no queueing)."""
HORIZON_H = 8783.0
"""The run: the year 2020 of the carbon trace (the trace's arrivals span 0-8760 h); the
few jobs shifted past its end are reported as not completed."""


def gaia_jobs(out_dir: Path) -> Path:
    """The PAI trace in dcsim's native format, with deadlines, written under `out_dir`."""
    from datetime import UTC, datetime

    from sim.workload.flexibility import apply_flexibility
    from sim.workload.importers import import_trace, write_native

    frame, _ = import_trace("gaia", TRACE)
    frame = apply_flexibility(
        frame,
        start=datetime(2020, 1, 1, tzinfo=UTC),
        rng=np.random.default_rng(0),
        slack_h=(SLACK_H, SLACK_H),
    )
    return write_native(frame, out_dir / "pai-100k.parquet")


def gaia_scenario(jobs_file: Path, policy: str) -> dict:
    """The scenario of one policy's run, as the dict a scenario file holds."""
    return {
        "name": f"gaia-pai-100k-{policy}",
        "seed": 1,
        "start": "2020-01-01T00:00:00Z",
        "duration_h": HORIZON_H,
        "sites": [
            {
                "name": "california",
                "lat": 37.35,
                "lon": -121.96,
                "carbon": {"zone": "US-CAL", "year": 2020},
                "gpus": [{"model": "A100-80GB", "count": GPUS}],
            }
        ],
        "workload": {"file": str(jobs_file)},
        "forecast": {"model": "perfect"},
        "policy": {"name": policy},
    }


def run(policy: str, scenario_file: Path) -> dict:
    """One fresh process of `dcsim run scenario_file --out DIR`: its wall time (the
    process's, from outside), `sim_wall_s` and a few results."""
    with tempfile.TemporaryDirectory() as out:
        # -P: `sim` from PYTHONPATH or the installed package, never the working directory's
        cli = [sys.executable, "-P", "-c", "from sim.cli import main; main()"]
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [*cli, "run", str(scenario_file), "--out", out], check=True, stdout=subprocess.DEVNULL
        )
        process_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        s = json.loads((Path(out) / "summary.json").read_text())
        meta = json.loads((Path(out) / "meta.json").read_text())
    return {
        "policy": policy,
        "jobs": int(s["jobs_submitted"]),
        "jobs_completed": int(s["jobs_completed"]),
        "sim_wall_s": round(s["sim_wall_s"], 3),
        "process_s": round(process_s, 3),
        "process_cpu_s": round(cpu_s, 3),
        "engine": meta.get("engine", {}).get("kind", "event"),  # older dcsim: event only
        "carbon_operational_kg": round(s["carbon_operational_kg"], 3),
    }


def compare(policy: str, jobs_file: Path) -> bool:
    """Run `policy` by the event and the batch engine in this process; print and return
    whether every table column and summary key (but the wall time) is the same."""
    import pandas as pd

    import sim
    from sim.config.loading import scenario_from_dict

    event, batch = (
        sim.simulate(
            scenario_from_dict({**gaia_scenario(jobs_file, policy), "engine": {"kind": k}})
        )
        for k in ("event", "batch")
    )
    differ = [k for k, v in event.summary.items() if k != "sim_wall_s" and v != batch.summary[k]]
    for name in ("jobs", "power", "events", "sites"):
        try:
            pd.testing.assert_frame_equal(
                getattr(batch, name), getattr(event, name), check_exact=True
            )
        except AssertionError as e:
            differ.append(f"{name}: {str(e).splitlines()[0]}")
    rows = {name: len(getattr(event, name)) for name in ("jobs", "power", "events")}
    print(
        f"{policy:14s} batch vs event: {'the same' if not differ else 'DIFFERENT'} "
        f"({', '.join(f'{n:,} {k} rows' for k, n in rows.items())}, {len(event.summary)} summary "
        f"keys; simulation: event {event.summary['sim_wall_s']:.2f} s, "
        f"batch {batch.summary['sim_wall_s']:.2f} s)"
    )
    for what in differ:
        print(f"  differs: {what}")
    return not differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", nargs="+", default=["carbon_time", "lowest_window"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="one JSON line per policy")
    parser.add_argument("--compare", action="store_true", help="batch vs event engine")
    args = parser.parse_args()
    if not TRACE.is_file():
        print(f"skipped: GAIA's trace is absent ({TRACE})")
        return
    import tomli_w

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        jobs_file = gaia_jobs(Path(tmp))
        print(f"conversion of GAIA's CSV to dcsim's format: {time.perf_counter() - started:.2f} s")
        if args.compare:
            same = [compare(policy, jobs_file) for policy in args.policy]
            sys.exit(0 if all(same) else 1)
        for policy in args.policy:
            scenario_file = Path(tmp) / f"{policy}.toml"
            scenario_file.write_text(tomli_w.dumps(gaia_scenario(jobs_file, policy)))
            runs = [run(policy, scenario_file) for _ in range(args.rounds)]
            row = dict(runs[-1])
            for key in ("sim_wall_s", "process_s", "process_cpu_s"):
                row[key] = statistics.median(r[key] for r in runs)
                row[f"{key}_rounds"] = [r[key] for r in runs]
            row["gaia_wall_s"] = GAIA_WALL_S
            row["speedup"] = round(GAIA_WALL_S / row["sim_wall_s"], 1)
            if args.json:
                print(json.dumps(row))
            else:
                print(
                    f"{policy:14s} {row['jobs']:,} jobs ({row['jobs_completed']:,} completed): "
                    f"simulation {row['sim_wall_s']:.2f} s, process {row['process_s']:.2f} s "
                    f"(CPU {row['process_cpu_s']:.2f} s; `dcsim run` writing the result files), "
                    f"GAIA's simulator {GAIA_WALL_S:g} s "
                    f"({row['speedup']:g}x the simulation), operational carbon "
                    f"{row['carbon_operational_kg']:,.1f} kg ({row['engine']} engine)"
                )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
