"""Virtual clusters: a trace's team shares (job column `vc`) with GPU quotas
(`[virtual_clusters] quota_gpus`): a virtual cluster's running jobs never hold more GPUs
than its quota; the engine refuses a start beyond it, the kit's placement waits instead."""

from __future__ import annotations

import pandas as pd
import pytest

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


def scenario(tmp_path, job_list, quota=None):
    extra = {} if quota is None else {"virtual_clusters": {"quota_gpus": quota}}
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


@pytest.mark.parametrize(
    "policy", ["run_now", "forecast_site", "lowest_carbon_site", "space_time", "best_config"]
)
def test_every_placing_policy_keeps_to_the_quota(tmp_path, policy):
    work = [
        {**j, "profile": "resnet50", "target_metric": 0.65, "work_gpu_h": ""}
        if policy == "best_config"
        else j
        for j in jobs("vcA", 4)
    ]
    result = simulate(scenario(tmp_path, work, quota={"vcA": 1}), policy).jobs
    assert most_held(result[result["state"] == "completed"], "vcA") <= 1
    assert (result["state"] != "rejected").all()
