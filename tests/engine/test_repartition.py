"""Repartitioning MIG GPUs during a run: the `Repartition` action (issue 18 part 3).

Specification: docs/mig.md ("Repartitioning"). Every GPU of a partitioned pool has a layout
of its own, the scenario's at the start; `Repartition(site, gpu_model, layout, gpus)` gives
free GPUs a new one, and they offer no slice for `sim.models.mig.reconfiguration_s`, drawing idle
power, then the new layout's slices.
"""

from __future__ import annotations

import pandas as pd
import pytest

import sim
from sim.api import MigGpuState, Repartition, Start, SystemState
from sim.engine.ledger import MigSlices
from sim.errors import PolicyError
from sim.models import mig
from sim.testing import PolicyHarness
from tests.conftest import make_scenario
from tests.engine.test_mig_jobs import (
    A100,
    HOST_W,
    MIXED_LAYOUT,
    SEVEN_1G,
    StartOnSlices,
    job,
    partitioned,
    slice_runtime_s,
)

RECONFIGURE_S = mig.reconfiguration_s(A100)
SEVEN = tuple(SEVEN_1G)
MIXED = ("2g.20gb", "2g.20gb", "3g.40gb")  # MIXED_LAYOUT by start slot (validate_layout)


def harness(tmp_path, jobs: list[dict] | None = None, count: int = 1) -> PolicyHarness:
    """At time 0 on the base site with `count` A100-80GB of seven 1g.10gb slices each
    (`jobs`: by default one that arrives after an hour)."""
    jobs = jobs or [job("later", "1g.10gb", 0.1, submit_s=3600.0)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G, count)])
    return PolicyHarness(scenario).advance(0.0)


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        (
            ("4g.40gb", "4g.40gb"),
            "A100-80GB: 4g.40gb + 4g.40gb does not fit: 4g.40gb allows at most 1 instance(s) "
            "per GPU, got 2",
        ),
        (("9g.90gb",), "unknown MIG profile"),
        ((), "a layout lists at least one profile"),
    ],
)
def test_an_invalid_layout_is_refused_with_one_line(tmp_path, layout, reason):
    h = harness(tmp_path)
    with pytest.raises(PolicyError) as e:
        h.apply([Repartition("a", A100, layout)])
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("Repartition(site='a', gpu_model='A100-80GB'")
    assert reason in message
    assert h.state.mig_layouts("a", A100) == [MigGpuState(SEVEN, 0, 0.0)]


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (Repartition("a", "H100-SXM", MIXED), "site a has no MIG-partitioned H100-SXM GPUs"),
        (Repartition("b", A100, MIXED), "unknown site 'b'"),
        (Repartition("a", A100, MIXED, gpus=0), "gpus must be a positive integer, got 0"),
        (Repartition("a", A100, MIXED, gpus=2), "needs 2 free A100-80GB GPU(s)"),
    ],
)
def test_a_repartition_of_gpus_the_pool_lacks_is_refused(tmp_path, action, reason):
    h = harness(tmp_path)
    with pytest.raises(PolicyError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        h.apply([action])


def test_a_gpu_with_a_held_slice_cannot_be_repartitioned(tmp_path):
    h = harness(tmp_path, [job("a", "1g.10gb", 1.0)])
    h.apply([Start(h.job("a"), "a")])
    with pytest.raises(
        PolicyError,
        match=r"0 of 1 are \(1 hold a slice and must be drained first, 0 are being "
        r"reconfigured, 0 free ones already have it\)",
    ):
        h.apply([Repartition("a", A100, MIXED)])
    assert h.state.mig_layouts("a", A100) == [MigGpuState(SEVEN, 1, 0.0)]


def test_a_gpu_already_in_the_layout_is_not_repartitioned(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(PolicyError, match="1 free ones already have it"):
        h.apply([Repartition("a", A100, SEVEN)])


# --- reconfiguration -------------------------------------------------------------------------


def test_a_reconfigured_gpu_offers_no_slice_for_the_reconfiguration_time(tmp_path):
    h = harness(tmp_path, [job("big", "3g.40gb", 0.5, submit_s=1.0)], count=2)
    h.apply([Repartition("a", A100, MIXED_LAYOUT)])
    assert RECONFIGURE_S == 10.0  # sim/data/mig_profiles.toml, an estimate
    assert h.state.mig_layouts("a", A100) == [
        MigGpuState(MIXED, 0, RECONFIGURE_S),
        MigGpuState(SEVEN, 0, 0.0),
    ]
    # the other GPU keeps its slices; the reconfigured one offers none yet
    assert h.state.free_mig_slices("a") == {A100: {"1g.10gb": 7, "3g.40gb": 0, "2g.20gb": 0}}
    h.advance(RECONFIGURE_S - 1e-6)
    with pytest.raises(PolicyError, match="needs a 3g.40gb MIG slice"):
        h.apply([Start(h.job("big"), "a")])
    h.advance(RECONFIGURE_S)
    assert h.state.free_mig_slices("a") == {A100: {"1g.10gb": 7, "3g.40gb": 1, "2g.20gb": 2}}
    h.apply([Start(h.job("big"), "a")])
    assert h.times("big")[0] == RECONFIGURE_S


class RepartitionThenStart(StartOnSlices):
    """Repartitions the first GPU to the mixed layout at time 0, then starts what fits."""

    def decide(self, state: SystemState) -> list:
        if state.now_s == 0.0:
            return [Repartition("a", A100, MIXED)]
        return super().decide(state)


def test_a_job_needing_the_new_profile_starts_when_the_gpu_is_reconfigured(tmp_path):
    # "whole" (on an H100) makes time 0 a decision; "big" arrives once the new layout is
    # on its way (at arrival a job whose profile no GPU's layout has is rejected)
    jobs = [job("whole", "", 0.1), job("big", "3g.40gb", 0.5, submit_s=1.0)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])
    r = sim.simulate(scenario, RepartitionThenStart(SEVEN_1G, 1))
    row = r.jobs.set_index("job_id").loc["big"]
    assert row["start_s"] == RECONFIGURE_S  # the end of the reconfiguration is a decision
    assert row["end_s"] == pytest.approx(RECONFIGURE_S + slice_runtime_s(0.5, "3g.40gb"), rel=1e-12)
    assert r.summary["mig_repartitions"] == 1


def test_a_gpu_being_reconfigured_is_busy_at_idle_power(tmp_path):
    h = harness(tmp_path, count=2)
    site = h.engine.fleet.sites[0]
    idle_it_w = site.it_w
    h.apply([Repartition("a", A100, MIXED)])
    assert (site.it_w, site.busy_gpus, h.state.free_gpus("a")[A100]) == (idle_it_w, 1, 0)
    h.advance(RECONFIGURE_S)
    assert (site.it_w, site.busy_gpus) == (idle_it_w, 0)
    # the pool's idle energy covers the reconfigured GPU: 2 GPUs at idle + host throughout
    pool = site.pools[0]
    expected_kwh = 2 * (pool.idle_w + HOST_W) * 1.5 * RECONFIGURE_S / 3.6e6
    assert pool.idle_energy_kwh(RECONFIGURE_S) == pytest.approx(expected_kwh, rel=1e-12)


# --- results without repartitioning ----------------------------------------------------------


class RepartitionAnIdleGpu(StartOnSlices):
    """At time 0, repartitions one GPU (the first: nothing holds it yet) to seven 1g slices,
    which no job needs, then starts what fits (on the other GPU)."""

    def decide(self, state: SystemState) -> list:
        repartition = [Repartition("a", A100, SEVEN)] if state.now_s == 0.0 else []
        return repartition + super().decide(state)


def test_repartitioning_a_gpu_no_job_needs_changes_nothing_but_the_books(tmp_path):
    jobs = [job(f"j{i}", p, 0.1 * (i + 1)) for i, p in enumerate(MIXED_LAYOUT)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT, count=2)])
    static = sim.simulate(scenario, StartOnSlices(MIXED_LAYOUT, 2))
    changed = sim.simulate(scenario, RepartitionAnIdleGpu(MIXED_LAYOUT, 2))
    pd.testing.assert_frame_equal(static.jobs, changed.jobs)
    assert (static.summary["mig_repartitions"], changed.summary["mig_repartitions"]) == (0, 1)
    # the GPU being reconfigured counts as busy (unavailable) for 10 s, at idle power
    busy_gpu_s = RECONFIGURE_S / (4 * scenario.horizon_s)  # of 2 A100 and 2 H100
    assert changed.summary["gpu_utilization"] == pytest.approx(
        static.summary["gpu_utilization"] + busy_gpu_s, rel=1e-9
    )
    differ = {"mig_repartitions", "gpu_utilization", "sim_wall_s"}
    same = {k: v for k, v in static.summary.items() if k not in differ}
    assert same == {k: changed.summary[k] for k in same}


# --- the ledger ------------------------------------------------------------------------------


def test_the_ledger_keeps_a_layout_per_gpu_and_holders_need_not_be_jobs():
    slices = MigSlices(A100, SEVEN_1G, count=2)
    assert slices.repartition(MIXED_LAYOUT, 1, ready_s=10.0) == [0]
    assert slices.free_slices() == {"1g.10gb": 7, "3g.40gb": 0, "2g.20gb": 0}
    assert not slices.fits("3g.40gb") and slices.has("3g.40gb")
    slices.reconfigured(0)
    replica = ("replica", "chat", "a", 0)  # a non-job holder
    assert slices.join(replica, "3g.40gb") is True
    assert slices.share_of(replica) == pytest.approx(42 / 108)
    assert [g.held for g in slices.gpus()] == [1, 0]
    with pytest.raises(ValueError, match="1 hold a slice"):
        slices.repartition(SEVEN_1G, 2, ready_s=20.0)
    assert slices.leave(replica) is True
    assert slices.repartitions == 1


def test_a_powered_off_gpu_boots_before_it_is_reconfigured_and_switches_off_after(tmp_path):
    power_off = {"idle_s": 600.0, "wake_s": 300.0, "off_w": 10.0}
    jobs = [job("later", "1g.10gb", 0.1, submit_s=7200.0)]
    sites = [partitioned(SEVEN_1G, gpus_per_node=1, power_off=power_off)]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=sites)).advance(700.0)
    assert h.state.powered_off_gpus("a")[A100] == 1  # idle since 0, off at 600 s
    h.apply([Repartition("a", A100, MIXED)])
    ready_s = 700.0 + 300.0 + RECONFIGURE_S
    assert h.state.mig_layouts("a", A100) == [MigGpuState(MIXED, 0, ready_s)]
    assert h.state.powered_off_gpus("a")[A100] == 0
    h.advance(ready_s + 600.0)  # free again at ready_s, idle for idle_s
    assert h.state.powered_off_gpus("a")[A100] == 1
