"""The queue reads that let a policy do work only for what changed: `pending_since`,
`runtime_s` and `runtime_version` (sim.api.SystemState)."""

from __future__ import annotations

from sim.api import Defer, SetCap, Start
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site


def harness(**site_extra) -> PolicyHarness:
    """One site of 16 A100s; 8 one-GPU jobs of 2-4 h, about 6 an hour, deferrable by 6-12 h."""
    return PolicyHarness(
        make_scenario(
            duration_h=48.0,
            sites=[site(name="a", gpus=[{"model": "A100-80GB", "count": 16}], **site_extra)],
            workload={
                "synthetic": {
                    "arrival_rate_per_h": 6.0,
                    "max_jobs": 8,
                    "gpus": {1: 1.0},
                    "deferrable_fraction": 1.0,
                    "slack_h": [6.0, 12.0],
                    "duration": {"dist": "loguniform_mixture", "components": [[1.0, 2.0, 4.0]]},
                }
            },
        )
    )


def arrival_s(h: PolicyHarness, k: int) -> float:
    """When the `k`-th job (from 0) arrives, s."""
    return float(h.engine.jobs.submit_s[k])


def ids(jobs) -> list[str]:
    return [j.id for j in jobs]


def test_pending_since_a_mark_is_the_tail_of_the_queue_that_arrived_after_it():
    h = harness()
    h.advance(arrival_s(h, 2))
    state = h.state
    mark = state.pending_mark
    assert ids(state.pending_since(0)) == ids(state.pending)
    assert state.pending_since(mark) == []
    h.advance(arrival_s(h, 6))
    newer = ids(state.pending_since(mark))
    assert newer and newer == ids(state.pending)[-len(newer) :]
    assert len(state.pending) > len(newer)


def test_a_job_back_from_a_deferral_is_pending_since_again_at_the_queue_end():
    h = harness()
    h.advance(arrival_s(h, 2))
    state = h.state
    first = state.pending[0]
    back_s = arrival_s(h, 7) + 60.0
    h.apply([Defer(first, back_s)])
    mark = state.pending_mark
    assert first.id not in ids(state.pending_since(0))
    h.advance(back_s)
    assert ids(state.pending_since(mark))[-1] == first.id == ids(state.pending)[-1]


def test_a_started_job_leaves_what_is_pending_since():
    h = harness()
    h.advance(arrival_s(h, 2))
    state = h.state
    job = state.pending[0]
    h.apply([Start(job, "a")])
    assert job.id not in ids(state.pending_since(0))


def test_runtime_s_is_the_runtime_of_estimate():
    h = harness(power_off={"idle_s": 600, "wake_s": 300, "off_w": 10})
    h.advance(arrival_s(h, 7))
    state = h.state
    for job in state.pending:
        assert state.runtime_s(job, "a") == state.estimate(job, "a")[0]
        assert state.runtime_s(job, "a", 200.0) == state.estimate(job, "a", 200.0)[0]


def test_runtime_version_changes_with_the_site_cap_and_with_power_off_allocations():
    h = harness()
    h.advance(arrival_s(h, 2))
    state = h.state
    before = state.runtime_version("a")
    h.apply([Start(state.pending[0], "a")])
    assert state.runtime_version("a") == before  # no power-off: a start changes no runtime
    h.apply([SetCap("a", 200.0)])
    assert state.runtime_version("a") != before

    h = harness(power_off={"idle_s": 600, "wake_s": 300, "off_w": 10})
    h.advance(arrival_s(h, 2))
    state = h.state
    before = state.runtime_version("a")
    h.apply([Start(state.pending[0], "a")])
    assert state.runtime_version("a") != before
