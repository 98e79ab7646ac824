"""Virtual clusters: a trace's team shares (job column `vc`) with GPU quotas
(`[virtual_clusters] quota_gpus`): a virtual cluster's running jobs never hold more GPUs
than its quota; the engine refuses a start beyond it, the kit's placement waits instead."""

from __future__ import annotations

import pandas as pd
import pytest

from policies import REGISTRY
from sim.api import Start
from sim.engine.build import simulate
from sim.errors import PolicyError
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site


def jobs(vc: str, n: int, gpus: int = 1) -> list[dict]:
    return [
        {"job_id": f"{vc}{i}", "submit_time": 0, "gpus": gpus, "work_gpu_h": gpus, "vc": vc}
        for i in range(n)
    ]


def scenario(tmp_path, job_list, quota=None, **extra):
    if quota is not None:
        extra["virtual_clusters"] = {"quota_gpus": quota}
    sites = [site(gpus=[{"model": "A100-80GB", "count": 8}])]
    return make_scenario(tmp_path, job_list, sites=sites, duration_h=48, **extra)


def most_held(result_jobs: pd.DataFrame, vc: str) -> int:
    """The most GPUs the virtual cluster's jobs held at once over the run."""
    mine = result_jobs[result_jobs["job_id"].str.startswith(vc)]
    times = sorted(set(mine["start_s"]) | set(mine["end_s"]))
    return max(
        int(mine.loc[(mine["start_s"] <= t) & (mine["end_s"] > t), "gpus"].sum()) for t in times
    )


def test_a_quota_caps_what_the_virtual_clusters_running_jobs_hold(tmp_path):
    work = jobs("vcA", 6) + jobs("vcB", 2)
    free = simulate(scenario(tmp_path, work), "run_now").jobs
    capped = simulate(scenario(tmp_path, work, quota={"vcA": 2}), "run_now").jobs
    assert most_held(free, "vcA") == 6
    assert most_held(capped, "vcA") == 2
    assert (capped["state"] == "completed").all()
    # the other virtual cluster is not limited, and starts at once
    assert (capped.loc[capped["job_id"].str.startswith("vcB"), "start_s"] == 0).all()


def test_no_quota_table_runs_exactly_as_before(tmp_path):
    work = jobs("vcA", 6)
    with_column = simulate(scenario(tmp_path, work), "run_now")
    without = simulate(
        scenario(tmp_path, [{k: v for k, v in j.items() if k != "vc"} for j in work]), "run_now"
    )
    pd.testing.assert_frame_equal(with_column.jobs, without.jobs)


def test_a_start_beyond_the_quota_is_refused_and_leaves_the_run_as_it_was(tmp_path):
    h = PolicyHarness(scenario(tmp_path, jobs("vcA", 2, gpus=2), quota={"vcA": 3})).advance(0.0)
    h.apply([Start(h.job("vcA0"), "a")])
    with pytest.raises(PolicyError, match="virtual cluster vcA holds 2 of its 3 GPUs; job vcA1"):
        h.apply([Start(h.job("vcA1"), "a")])
    assert h.job("vcA1").state == "pending" and h.job("vcA1").vc_room == 1
    assert h.state.free_gpus("a") == {"A100-80GB": 6}


PARAMS = {
    "chain": {"policies": [{"name": "run_now"}]},
    "carbon_threshold": {"threshold_g_per_kwh": 400.0},
    "static_cap": {"watts": 300.0},
}
"""The parameters of the registered policies that cannot run without any (a flat 300 g/kWh
grid: a threshold above it, a cap that only slows jobs)."""


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_every_policy_keeps_to_the_quota_and_lets_other_virtual_clusters_pass(tmp_path, policy):
    """vcA's quota of 2 GPUs holds vcA2 until vcA1 ends (at 7,200 s on 2 GPUs); the jobs of
    vcB behind vcA2 in the queue start when they would without vcA2 (with backfill off, every
    policy's default): a virtual cluster's quota holds back its own jobs only."""
    work = [
        {"job_id": "vcA1", "submit_time": 0, "gpus": 2, "work_gpu_h": 4, "vc": "vcA"},
        {"job_id": "vcA2", "submit_time": 0, "gpus": 2, "work_gpu_h": 4, "vc": "vcA"},
        {"job_id": "vcB1", "submit_time": 60, "gpus": 1, "work_gpu_h": 1, "vc": "vcB"},
        {"job_id": "vcB2", "submit_time": 60, "gpus": 1, "work_gpu_h": 1, "vc": "vcB"},
    ]
    for j in work:
        j["deadline"] = 72_000  # every time shifter may defer; on a flat grid none gains
        if policy in ("best_config", "oracle_config"):
            j.update(profile="resnet50", target_metric=0.65, work_gpu_h="")
    params = {"name": policy, "params": PARAMS.get(policy, {})}

    def run(job_list):
        return simulate(scenario(tmp_path, job_list, quota={"vcA": 2}, policy=params)).jobs

    result = run(work)
    alone = run([j for j in work if j["job_id"] != "vcA2"]).set_index("job_id")
    assert (result["state"] == "completed").all()
    assert most_held(result, "vcA") <= 2
    started = result.set_index("job_id").loc[["vcB1", "vcB2"], "start_s"]
    assert list(started) == list(alone.loc[["vcB1", "vcB2"], "start_s"])
