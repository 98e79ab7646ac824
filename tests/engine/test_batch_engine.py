"""The batch engine (`sim.engine.batch`) against the event engine, the reference: on runs
where both apply, every result table and summary key is the same, bit for bit (the issue
asks for 1e-9 relative); where capacity binds, "auto" runs the event engine and says
why, and asking for "batch" is a one-line ScenarioError."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.config.loading import scenario_from_dict
from sim.engine.batch.eligibility import peak_gpus
from sim.errors import ScenarioError

WALL_CLOCK = {"sim_wall_s"}


def scenario(policy: str, gpus: int, engine: str = "auto", **extra):
    return scenario_from_dict(
        {
            "name": f"batch-{policy}",
            "seed": 3,
            "start": "2020-06-01T00:00:00Z",
            "duration_h": 96,
            "sites": [
                {
                    "name": "paris",
                    "lat": 48.86,
                    "lon": 2.35,
                    "carbon": {"zone": "FR", "year": 2020},
                    "gpus": [{"model": "A100-80GB", "count": gpus}],
                }
            ],
            "workload": {
                "synthetic": {
                    "arrival_rate_per_h": 6,
                    "gpus": {"1": 0.6, "2": 0.2, "8": 0.2},
                    "profile": "mixed",
                    "deferrable_fraction": 0.7,
                    "slack_h": [2, 30],
                    "duration": {"dist": "lognormal", "median_h": 3.0, "sigma": 1.0},
                }
            },
            "forecast": {"model": "perfect"},
            "policy": {"name": policy},
            "engine": {"kind": engine},
            **extra,
        }
    )


def assert_same_results(event: sim.Results, batch: sim.Results) -> None:
    """Every summary key but the wall time and every table, bit for bit (the issue asks for
    1e-9 relative; the batch engine does the event engine's operations in its order)."""
    for key, want in event.summary.items():
        if key not in WALL_CLOCK:
            assert batch.summary[key] == want or want != want == batch.summary[key], key
    for name in ("jobs", "power", "events", "sites", "dr_events"):
        pd.testing.assert_frame_equal(
            getattr(batch, name), getattr(event, name), check_exact=True, obj=name
        )


@pytest.mark.parametrize("policy", ["run_now", "lowest_window", "carbon_time"])
def test_batch_engine_gives_the_event_engines_results_where_capacity_never_binds(policy):
    event = sim.simulate(scenario(policy, 512, "event"))
    batch = sim.simulate(scenario(policy, 512, "auto"))
    assert event.meta["engine"] == {"kind": "event", "batch_refused": 'engine.kind = "event"'}
    assert batch.meta["engine"] == {"kind": "batch", "batch_refused": None}
    assert (batch.events["kind"] == "defer").any() == (policy != "run_now")
    assert_same_results(event, batch)
    # the policy's batch plan picks the very floats its decisions pick
    np.testing.assert_array_equal(batch.jobs["start_s"], event.jobs["start_s"])


def test_auto_runs_the_event_engine_where_capacity_binds_and_says_why():
    results = sim.simulate(scenario("carbon_time", 8))
    assert results.meta["engine"]["kind"] == "event"
    assert results.meta["engine"]["batch_refused"].startswith(
        "capacity binds: the planned runs hold up to"
    )


def test_asking_for_the_batch_engine_where_it_does_not_apply_is_a_scenario_error():
    with pytest.raises(ScenarioError, match=r'engine.kind = "batch": .*capacity binds'):
        sim.simulate(scenario("carbon_time", 8, "batch"))
    with pytest.raises(ScenarioError, match=r"the policy \(WaitAwhile\) has no plan_batch hook"):
        sim.simulate(scenario("wait_awhile", 512, "batch"))


def test_a_subclass_that_may_decide_differently_is_not_planned_in_batch():
    """A plan mirrors one class's decisions: a subclass inherits no `plan_batch`, so its own
    `decide` runs on the event engine."""
    from policies.gaia import CarbonTime

    decided = []

    class Logging(CarbonTime):
        def decide(self, state):
            decided.append(state.now_s)
            return super().decide(state)

    results = sim.simulate(scenario("carbon_time", 512), Logging())
    assert results.meta["engine"] == {
        "kind": "event",
        "batch_refused": "the policy's class Logging inherits plan_batch "
        "(a subclass must define its own)",
    }
    assert len(decided) >= results.summary["jobs_submitted"]


def test_peak_counts_a_run_ending_when_another_starts_with_it():
    start = np.array([0.0, 10.0, 10.0, np.nan])
    end = np.array([10.0, 20.0, 15.0, np.nan])
    assert peak_gpus(start, end, np.array([4, 2, 1, 99])) == 7
