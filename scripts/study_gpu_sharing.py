"""The Alibaba 2023 trace on one site with and without GPU sharing (docs/gpu-sharing.md).

Imports `openb_pod_list_default.csv` from the project's sibling `shared/data/alibaba-gpu-2023/`
three ways: `fractional = "share"` (gpu_milli kept: fractional pods share GPUs), the same
jobs with `gpu_milli` 1000 (the same work on whole GPUs), and `fractional = "round_up"` (whole
GPUs, work = the measured runtime); runs each on one site of A100-80GB GPUs (the reference
model, so runtimes are the trace's) with `run_now` and backfilling, and prints the summary.

    python scripts/study_gpu_sharing.py --gpus 32
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import sim  # noqa: E402
from policies.run_now import RunNow  # noqa: E402
from sim.config.loading import scenario_from_dict  # noqa: E402
from sim.workload.importers import import_trace  # noqa: E402

TRACE = REPO.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_pod_list_default.csv"


def scenario(jobs_csv: Path, gpus: int) -> sim.Scenario:
    return scenario_from_dict(
        {
            "name": "alibaba-sharing",
            "seed": 1,
            "start": "2023-01-01T00:00:00Z",
            "duration_h": 4000.0,
            "sites": [
                {
                    "name": "a",
                    "lat": 30.3,
                    "lon": 120.2,
                    "pue": 1.2,
                    "host_w_per_gpu": 40.0,
                    "carbon": {"constant_g_per_kwh": 500.0},
                    "gpus": [{"model": "A100-80GB", "count": gpus}],
                }
            ],
            "workload": {"file": str(jobs_csv), "oversized": "reject"},
        },
        source=jobs_csv.parent / "scenario.toml",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=32, help="A100-80GB GPUs of the site")
    ap.add_argument("--trace", type=Path, default=TRACE)
    args = ap.parse_args(argv)
    share, _ = import_trace("alibaba2023", args.trace, fractional="share", keep_gpu_spec=False)
    whole, _ = import_trace("alibaba2023", args.trace, fractional="round_up", keep_gpu_spec=False)
    variants = {
        "sharing": share,
        "same work, whole GPUs": share.assign(gpu_milli=1000),
        "round_up": whole,
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, frame) in enumerate(variants.items()):
            path = Path(tmp) / f"jobs_{k}.csv"
            frame.to_csv(path, index=False)
            s = sim.simulate(scenario(path, args.gpus), RunNow(backfill=True)).summary
            rows.append(
                {
                    "jobs": name,
                    "completed": s["jobs_completed"],
                    "wait_mean_h": s["wait_mean_h"],
                    "jct_mean_h": s["jct_mean_h"],
                    "energy_facility_kwh": s["energy_facility_kwh"],
                    "energy_jobs_kwh": s["energy_jobs_kwh"],
                }
            )
    pd.set_option("display.width", 200)
    print(f"{args.gpus} A100-80GB GPUs")
    print(pd.DataFrame(rows).round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
