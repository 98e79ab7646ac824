"""`scripts/study_fragmentation.py` on the real Alibaba 2023 trace (../shared/data): the
scenario loads and runs, and the study's claim holds where it can fail: on the same pods
and servers, spreading one-GPU pods leaves no server whole for the eight-GPU pods, packing
(`best_fit`) does, so `spread` has far more fragmentation wait; without a server limit
fragmentation never holds a job."""

from __future__ import annotations

import sys

import pytest

import sim
from tests.conftest import REPO

sys.path.insert(0, str(REPO))
from scripts.study_fragmentation import (  # noqa: E402
    SCENARIO,
    TRACE,
    check,
    import_jobs,
    run,
    study,
)

pytestmark = pytest.mark.skipif(
    not TRACE.is_file(), reason=f"Alibaba 2023 trace not found at {TRACE} (no ../shared/data)"
)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return import_jobs(tmp_path_factory.mktemp("frag") / "jobs.parquet")


def test_the_scenario_loads_the_trace_on_servers(jobs):
    scenario = sim.load_scenario(SCENARIO, [f"workload.file={jobs}"])
    pool = scenario.sites[0].gpus[0]
    assert pool.model == "V100" and pool.servers is not None
    assert pool.servers.model == "PCIe-V100x8"
    assert scenario.policy.name == "run_now"


def test_spread_holds_eight_gpu_pods_that_best_fit_places(jobs):
    waits = {
        rule: run(jobs, 7, "backfill", rule, "strict").summary["fragmentation_wait_h"]
        for rule in ("best_fit", "spread")
    }
    assert waits["spread"] > 100 * max(waits["best_fit"], 1.0)


def test_the_claims_hold_on_the_smaller_cluster_and_fail_when_reversed(jobs):
    table, free = study(jobs, servers=(7,), queues=("backfill",))
    assert len(table) == 8 and set(free) == {"fewest_servers", "first_fit", "best_fit", "spread"}
    assert len(check(table)) == 2
    strict = (table["max_servers"] == "strict") & table["rule"].isin(["best_fit", "spread"])
    swapped = table.copy()
    waits = table.loc[strict, "fragmentation_wait_h"].to_numpy()
    swapped.loc[strict, "fragmentation_wait_h"] = waits[::-1]
    with pytest.raises(AssertionError, match="spread not above best_fit"):
        check(swapped)
