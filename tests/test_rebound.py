"""User rebound: follow-up jobs of slowed jobs, as a closed loop found by fixed point."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.util.streams import id_draws
from sim.workload import rebound
from tests.conftest import make_scenario, site

WORKLOAD = {
    "synthetic": {"arrival_rate_per_h": 3.0, "duration": {"dist": "exponential", "mean_h": 2.0}}
}


def scenario(**extra):
    return make_scenario(duration_h=72, workload=WORKLOAD, **extra)


def comparable(results) -> tuple[dict, pd.DataFrame]:
    summary = {k: v for k, v in results.summary.items() if k != "sim_wall_s"}
    return summary, results.jobs


def test_no_reaction_reproduces_the_run_without_rebound():
    without = simulate(scenario())
    still = simulate(scenario(rebound={"resubmit_elasticity": 0.0}))
    assert still.meta["rebound"] == {"runs": 1, "followups": 0}
    s0, j0 = comparable(without)
    s1, j1 = comparable(still)
    assert s0 == s1
    pd.testing.assert_frame_equal(j0, j1)
    assert (j0["rebound_of"] == "").all()
    assert s0["rebound_jobs"] == 0 and s0["rebound_work_gpu_h"] == 0.0


def test_the_follow_ups_of_the_final_run_are_exactly_those_it_triggers():
    config = {"resubmit_elasticity": 1.5, "gpus_elasticity": 0.5, "work_elasticity": 0.3}
    sc = scenario(rebound={**config, "think_time_s": 600.0, "max_generations": 2})
    results = simulate(sc)
    jobs = results.jobs
    followup = jobs["rebound_of"] != ""
    assert followup.any() and results.summary["rebound_jobs"] == int(followup.sum())
    by_id = jobs.set_index("job_id")
    d = pd.Series(rebound.perceived_delay(jobs), index=jobs["job_id"])
    u = pd.Series(id_draws(sc.seed, "rebound", jobs["job_id"].to_numpy()), index=jobs["job_id"])
    children = dict(
        zip(jobs.loc[followup, "rebound_of"], jobs.loc[followup, "job_id"], strict=True)
    )
    for job_id, row in by_id.iterrows():
        p = min(1.0, 1.5 * max(0.0, d[job_id] - 1.0)) if np.isfinite(d[job_id]) else 0.0
        may = rebound.generation_of(job_id) < 2 and row.end_s + 600.0 < sc.horizon_s
        assert (job_id in children) == bool(may and u[job_id] < p), job_id
        if job_id in children:
            child = by_id.loc[children[job_id]]
            x = d[job_id] - 1.0
            assert child.submit_s == pytest.approx(row.end_s + 600.0)
            assert child.gpus == min(4, int(np.ceil(row.gpus * (1 + 0.5 * x))))
            assert child.work_gpu_h == pytest.approx(row.work_gpu_h * (1 + 0.3 * x))


def test_the_loop_is_causal_jobs_started_before_the_first_follow_up_are_untouched():
    # run_now never changes a running job, so a job started before any follow-up existed
    # must run exactly as without rebound
    without = simulate(scenario()).jobs.set_index("job_id")
    jobs = simulate(scenario(rebound={"resubmit_elasticity": 1.0, "think_time_s": 6 * 3600})).jobs
    first_s = jobs.loc[jobs["rebound_of"] != "", "submit_s"].min()
    before = jobs[(jobs["rebound_of"] == "") & (jobs["start_s"] < first_s)].set_index("job_id")
    assert len(before) > 10
    cols = ["start_s", "end_s", "energy_kwh", "carbon_kg"]
    pd.testing.assert_frame_equal(before[cols], without.loc[before.index, cols])


def test_rebound_is_reproducible_by_seed():
    a = simulate(scenario(rebound={"resubmit_elasticity": 1.0}))
    b = simulate(scenario(rebound={"resubmit_elasticity": 1.0}))
    c = simulate(scenario(seed=2, rebound={"resubmit_elasticity": 1.0}))
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert not a.jobs["job_id"].equals(c.jobs["job_id"])


def test_rebound_adds_work_and_takes_back_energy_savings():
    sites = [site(gpus=[{"model": "A100-80GB", "count": 64}])]
    capped = {"name": "static_cap", "params": {"watts": 200}}
    quiet = simulate(scenario(sites=sites, policy=capped))
    loud = simulate(scenario(sites=sites, policy=capped, rebound={"resubmit_elasticity": 1.0}))
    assert loud.summary["rebound_work_gpu_h"] > 0
    assert loud.summary["energy_jobs_kwh"] > quiet.summary["energy_jobs_kwh"]


def test_a_loop_that_does_not_settle_is_an_error_and_prediction_error_is_refused():
    with pytest.raises(ScenarioError, match="did not settle in 1 runs"):
        simulate(scenario(rebound={"resubmit_elasticity": 5.0, "max_iterations": 1}))
    with pytest.raises(ScenarioError, match="rebound and prediction_error cannot be combined"):
        scenario(rebound={"resubmit_elasticity": 1.0}, prediction_error={"sigma_frac": 0.1})


def test_follow_ups_of_jobs_on_a_share_of_one_gpu_keep_their_one_gpu(tmp_path):
    jobs = [
        {"job_id": f"f{i}", "submit_time": 600 * i, "gpus": 1, "work_gpu_h": 1.0, "gpu_milli": 500}
        for i in range(40)
    ]
    sites = [site(gpus=[{"model": "A100-80GB", "count": 2}])]
    sc = make_scenario(
        tmp_path,
        jobs,
        sites=sites,
        duration_h=72,
        rebound={"resubmit_elasticity": 1.0, "gpus_elasticity": 1.0},
    )
    result = simulate(sc).jobs
    follow = result[result["rebound_of"] != ""]
    assert len(follow) > 0 and (follow["gpus"] == 1).all() and (follow["gpu_milli"] == 500).all()
