"""The standard benchmark (benchmarks/run.py) runs, at a tiny size, for both its policies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("policy", ["run_now", "carbon_aware"])
def test_one_benchmark_run_prints_the_json_line_the_ratio_is_made_of(policy):
    out = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--jobs", "300", "--policy", policy, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["jobs"] == 300 and result["policy"] == policy
    assert 0.0 < result["sim_wall_s"] <= result["total_wall_s"]
    assert result["peak_rss_mb"] > 0.0
    # A week after the last arrival nearly all have finished (durations are heavy-tailed).
    assert result["jobs_completed"] >= 0.95 * 300
