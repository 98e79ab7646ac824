"""A `Start` that chooses a target job's batch size or GPU count is checked before anything
changes: a refused one raises `PolicyError` naming why and leaves the job pending, its GPU
count and work as they were."""

from __future__ import annotations

import numpy as np
import pytest

from sim.api import Start
from sim.errors import PolicyError
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site


def target(job_id: str, **extra) -> dict:
    return {
        "job_id": job_id,
        "submit_time": 0,
        "gpus": 1,
        "profile": "resnet50",
        "target_metric": 0.65,
        **extra,
    }


FIXED = {"job_id": "fixed", "submit_time": 0, "gpus": 1, "work_gpu_h": 1.0}


def harness(tmp_path, jobs, **extra):
    sites = [site(gpus=[{"model": "A100-80GB", "count": 4}])]
    scenario = make_scenario(tmp_path, jobs, sites=sites, duration_h=500, **extra)
    return PolicyHarness(scenario).advance(0.0)


@pytest.mark.parametrize(
    ("job_id", "choice", "why"),
    [
        ("fixed", {"batch_size": 128}, "batch_size needs a job with a target_metric"),
        ("fixed", {"gpus": 2}, "gpus needs a job with a target_metric"),
        ("t", {"batch_size": 256.0}, "batch_size must be int or None, got 256.0"),  # its type
        ("t", {"batch_size": -1}, "batch_size must be a positive integer"),
        ("t", {"batch_size": True}, "batch_size must be a positive integer"),
        ("t", {"batch_size": 8}, "resnet50 was not trained at batch size 8"),
        ("t", {"gpus": 2.0}, "gpus must be int or None, got 2.0"),  # its type
        ("t", {"gpus": True}, "gpus must be an integer"),
        ("t", {"gpus": 0}, "gpus must be an integer"),
        ("t", {"gpus": 8}, "job needs 8 GPUs"),  # the pool has 4
        ("share", {"gpus": 2}, "a job holding a share of one GPU keeps it"),
    ],
)
def test_a_refused_choice_leaves_the_job_as_it_was(tmp_path, job_id, choice, why):
    h = harness(tmp_path, [FIXED, target("t"), target("share", gpu_milli=500)])
    job = h.job(job_id)
    before = (job.gpus, job.work_gpu_h, job.profile)
    with pytest.raises(PolicyError, match=why):
        h.apply([Start(job, "a", **choice)])
    assert job.state == "pending" and (job.gpus, job.work_gpu_h, job.profile) == before
    assert h.state.free_gpus("a") == {"A100-80GB": 4}


def test_a_numpy_integer_is_a_gpu_count(tmp_path):
    h = harness(tmp_path, [target("t")])
    h.apply([Start(h.job("t"), "a", gpus=np.int64(2))])
    assert h.job("t").gpus == 2 and h.state.free_gpus("a") == {"A100-80GB": 2}


def test_a_count_the_scaling_model_cannot_use_is_refused_before_the_job_leaves_the_queue(tmp_path):
    h = harness(tmp_path, [target("t", parallelism="tensor")], scaling={})
    with pytest.raises(PolicyError, match="tensor parallel needs layers"):
        h.apply([Start(h.job("t"), "a", gpus=2)])  # ResNet-50 has no transformer shapes
    assert h.job("t").state == "pending" and h.job("t").gpus == 1
    assert [j.id for j in h.state.pending] == ["t"]
