"""How much of a power cap's energy saving user rebound takes back (docs/rebound.md).

One site of 64 A100-80GB, a week of synthetic jobs (3 per hour, exponential durations of
mean 2 h): `run_now` against `static_cap` at 200 W, without rebound and with
`resubmit_elasticity` 0.5 and 1.0; the mean over three seeds of the jobs' energy.

    python scripts/study_rebound.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.config.loading import scenario_from_dict  # noqa: E402
from sim.engine.build import simulate  # noqa: E402

SEEDS = (1, 2, 3)
POLICIES = ({"name": "run_now"}, {"name": "static_cap", "params": {"watts": 200}})
ELASTICITIES = (None, 0.5, 1.0)


def scenario(policy: dict, elasticity: float | None, seed: int):
    raw = {
        "name": "rebound",
        "seed": seed,
        "start": "2020-06-01T00:00:00Z",
        "duration_h": 168,
        "sites": [
            {
                "name": "a",
                "lat": 50.1,
                "lon": 8.7,
                "carbon": {"constant_g_per_kwh": 300.0},
                "gpus": [{"model": "A100-80GB", "count": 64}],
            }
        ],
        "workload": {
            "synthetic": {
                "arrival_rate_per_h": 3.0,
                "duration": {"dist": "exponential", "mean_h": 2.0},
            }
        },
        "policy": policy,
    }
    if elasticity is not None:
        raw["rebound"] = {"resubmit_elasticity": elasticity}
    return scenario_from_dict(raw, source=REPO / "scenarios" / "rebound.toml")


def main() -> int:
    print("policy      elasticity  energy_jobs_kwh  follow-ups per seed")
    for policy in POLICIES:
        for e in ELASTICITIES:
            runs = [simulate(scenario(policy, e, seed)).summary for seed in SEEDS]
            energy = np.mean([s["energy_jobs_kwh"] for s in runs])
            followups = [s["rebound_jobs"] for s in runs]
            print(f"{policy['name']:<11} {e!s:<11} {energy:15.1f}  {followups}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
