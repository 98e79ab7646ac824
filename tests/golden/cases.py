"""The golden cases: scenarios and policies whose results must not change under refactors.

Each case is (name, scenario file, policy, overrides): `policy` None runs the scenario's
own `[policy]`; a name runs that policy with its defaults, as `dcsim run --policy` does.
`python -m tests.golden.record` writes each case's `summary.json` and result tables
(`TABLES`) into `tests/golden/<name>/`; `tests/test_golden.py` runs each case and
compares. Record again only for a change that is meant to change results, and say so in
the commit.
"""

from __future__ import annotations

from pathlib import Path

GOLDEN_DIR = Path(__file__).parent
SCENARIOS = GOLDEN_DIR.parent.parent / "scenarios"

ADVERSARY = "tests.golden.adversary:Adversary"
"""A policy that drives the rare paths: held jobs capped and migrated, suspensions and
rejections during events, resumes elsewhere."""

CASES: list[tuple[str, str, str | None, list[str]]] = [
    ("quickstart", "quickstart.toml", None, []),
    ("quickstart_wait_awhile", "quickstart.toml", "wait_awhile", []),
    ("demand_response", "demand_response.toml", None, []),
    ("demand_response_uniform_cap", "demand_response.toml", "dr_uniform_cap", []),
    ("demand_response_fair_slowdown", "demand_response.toml", "dr_fair_slowdown", []),
    ("demand_response_pause", "demand_response.toml", "dr_pause", []),
    ("power_capping", "power_capping.toml", None, []),
    ("power_capping_energy_optimal", "power_capping.toml", "energy_optimal_cap", []),
    ("space_time", "space_time_study.toml", None, []),
    (
        "space_time_migrate",
        "space_time_study.toml",
        None,
        ['policy={name="chain", params={policies=[{name="forecast_site"}, {name="migrate"}]}}'],
    ),
    ("gpu_generations", "gpu_generations.toml", None, []),
    ("time_shifting", "time_shifting.toml", None, []),
    ("time_shifting_carbon_time", "time_shifting.toml", "carbon_time", []),
    ("periodic_checkpoints", "time_shifting.toml", None, ["workload.checkpoint_interval_h=1"]),
    (
        "power_off",
        "quickstart.toml",
        "wait_awhile",
        [f"sites[{i}].power_off={{idle_s=900, wake_s=300, off_w=10}}" for i in (0, 1)],
    ),
    (
        "adversary_demand_response",
        "demand_response.toml",
        ADVERSARY,
        [
            *[f"sites[{i}].power_off={{idle_s=600, wake_s=300, off_w=10}}" for i in (0, 1)],
            "workload.checkpoint_interval_h=1",
        ],
    ),
    (
        "adversary_space_time",
        "space_time_study.toml",
        ADVERSARY,
        [
            *[f"sites[{i}].power_off={{idle_s=600, wake_s=300, off_w=10}}" for i in range(5)],
            "duration_h=48",
        ],
    ),
    *[
        (
            f"serving_{fidelity}",
            "serving.toml",
            None,
            [
                "duration_h=2",
                f"serving.fidelity='{fidelity}'",
                "services[0].requests={rate_per_s=3.0, daily_amplitude=0.5}",
                "services[1].requests={rate_per_s=1.0, tokens='azure-code'}",
            ],
        )
        for fidelity in ("request", "fluid")
    ],
]
"""The study scenarios, each policy family, a chain with migrations, periodic checkpoints,
powered-off nodes, the adversary on two of them, and services at both fidelities (with
synthetic requests, so the cases need no shared data)."""

TABLES = ("jobs", "sites", "power", "events", "dr_events")
"""The result tables each case records and compares, besides the summary."""
SERVING_TABLES = ("services", "requests")
"""Recorded and compared for the cases that have them (services; requests at the request
level)."""


def recorded_tables(results) -> tuple[str, ...]:
    """The tables a case's results have: `TABLES`, and the serving ones that are there."""
    serving = [
        t for t in SERVING_TABLES if (table := getattr(results, t)) is not None and len(table)
    ]
    return (*TABLES, *serving)


SKIPPED_SUMMARY_KEYS = ("sim_wall_s",)
"""Summary values that measure the machine, not the simulation."""

ADDED_SUMMARY_KEYS = {"fragmentation_wait_h": None}
"""Summary keys added since the recordings, with the value every golden case must give
(no golden scenario has servers): a case recorded without one must give exactly this."""
