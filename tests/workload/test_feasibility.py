"""A deadline earlier than submission plus the fastest possible runtime is accepted, but
counted apart as infeasible at submission, so a miss is not blamed on the policy."""

from __future__ import annotations

import pytest

import sim
from sim.engine.build import workload_jobs
from sim.models import hardware
from sim.workload.feasibility import fastest_runtime_s, infeasible_deadlines
from tests.conftest import make_scenario, run_cli, site, write_jobs

H100_SPEEDUP = hardware.speed("H100-SXM", "mixed")
"""How much faster an H100 runs the `mixed` profile than the reference A100-80GB."""

SITES = [
    site(name="slow"),
    site(name="fast", gpus=[{"model": "H100-SXM", "count": 4}]),
]


def _job(job_id: str, deadline_h: float, **extra) -> dict:
    """A 2-GPU job of 4 reference GPU-hours (2 h on A100s) submitted at t = 0."""
    return {
        "job_id": job_id,
        "submit_time": 0,
        "gpus": 2,
        "work_gpu_h": 4.0,
        "deadline": deadline_h * 3600.0,
        **extra,
    }


@pytest.fixture
def scenario(tmp_path):
    jobs = [
        _job("feasible_anywhere", 2.5),
        _job("only_on_h100", 1.95),
        _job("only_on_h100_but_kept_on_a100", 1.95, allowed_sites="slow"),
        _job("too_early_everywhere", 0.5),
        {"job_id": "no_deadline", "submit_time": 0, "gpus": 2, "work_gpu_h": 4.0},
    ]
    return make_scenario(tmp_path, jobs, sites=SITES)


def test_the_fastest_runtime_is_the_work_on_the_fastest_allowed_gpu_at_full_power(scenario):
    jobs = workload_jobs(scenario, None)  # type: ignore[arg-type]
    fastest = dict(
        zip(jobs.job_id, fastest_runtime_s(jobs, scenario.sites, scenario.speed), strict=True)
    )
    assert H100_SPEEDUP > 1.03  # 1.95 h is then feasible on H100s only
    assert fastest["feasible_anywhere"] == pytest.approx(2 * 3600.0 / H100_SPEEDUP)
    assert fastest["only_on_h100_but_kept_on_a100"] == pytest.approx(2 * 3600.0)


def test_only_deadlines_before_the_fastest_possible_end_are_infeasible(scenario):
    jobs = workload_jobs(scenario, None)  # type: ignore[arg-type]
    flagged = set(jobs.job_id[infeasible_deadlines(jobs, scenario.sites, scenario.speed)])
    assert flagged == {"only_on_h100_but_kept_on_a100", "too_early_everywhere"}


def test_results_count_infeasible_deadlines_in_the_summary_the_jobs_table_and_meta(scenario):
    results = sim.simulate(scenario)
    assert results.summary["deadline_infeasible"] == 2
    flagged = results.jobs.loc[results.jobs["deadline_infeasible"], "job_id"]
    assert set(flagged) == {"only_on_h100_but_kept_on_a100", "too_early_everywhere"}
    meta = results.meta["deadline_infeasible_at_submission"]
    assert meta["jobs"] == 2
    assert set(meta["first_job_ids"]) == set(flagged)
    # an infeasible deadline is missed whatever the policy does
    assert results.summary["deadline_misses"] >= 2


def test_a_job_that_fits_no_pool_is_rejected_not_counted_infeasible(tmp_path):
    job_file = write_jobs(tmp_path / "jobs.csv", [_job("too_big", 0.1, gpus=8)])
    scenario = make_scenario(
        tmp_path, sites=SITES, workload={"file": str(job_file), "oversized": "reject"}
    )
    jobs = workload_jobs(scenario, None)  # type: ignore[arg-type]
    assert fastest_runtime_s(jobs, scenario.sites, scenario.speed)[0] == float("inf")
    assert not infeasible_deadlines(jobs, scenario.sites, scenario.speed).any()


def test_the_printed_summary_says_how_many_deadlines_no_policy_could_meet(
    scenario, tmp_path, capsys
):
    path = tmp_path / "study.toml"
    path.write_text(scenario.to_toml())
    code, printed = run_cli(["run", str(path)], capsys)
    assert code == 0
    assert "deadline_infeasible: 2 jobs had a deadline" in printed.out
