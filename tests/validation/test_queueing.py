"""Validation against queueing theory: run_now on c identical GPUs with Poisson arrivals and
exponential 1-GPU jobs is an M/M/c FCFS queue, whose mean wait is given by Erlang C."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import sim
from tests.conftest import make_scenario, site

GPUS = 8
MEAN_H = 1.0
JOBS = 20_000
SEEDS = range(8)


def erlang_c_wait_h(c: int, arrival_per_h: float, mean_h: float) -> float:
    """Mean wait in queue of M/M/c (Erlang C formula), hours."""
    a = arrival_per_h * mean_h
    top = a**c / math.factorial(c) * c / (c - a)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c / mean_h - arrival_per_h)


def mean_wait_h(utilisation: float, seed: int) -> float:
    rate = utilisation * GPUS / MEAN_H
    scenario = make_scenario(
        seed=seed,
        duration_h=JOBS / rate * 1.3 + 200,
        workload={
            "synthetic": {
                "arrival_rate_per_h": rate,
                "max_jobs": JOBS,
                "duration": {"dist": "exponential", "mean_h": MEAN_H},
            }
        },
        sites=[site(gpus=[{"model": "A100-80GB", "count": GPUS}])],
    )
    jobs = sim.simulate(scenario, "run_now").jobs
    assert (jobs["state"] == "completed").all()
    return float(jobs["wait_h"].iloc[JOBS // 10 :].mean())  # drop the warm-up tenth


@pytest.mark.parametrize("utilisation", [0.5, 0.8, 0.9])
def test_mean_wait_matches_erlang_c(utilisation):
    waits = np.array([mean_wait_h(utilisation, s) for s in SEEDS])
    theory = erlang_c_wait_h(GPUS, utilisation * GPUS / MEAN_H, MEAN_H)
    half_width = stats.t.ppf(0.995, len(waits) - 1) * waits.std(ddof=1) / math.sqrt(len(waits))
    assert abs(waits.mean() - theory) <= half_width, (waits.mean(), theory, half_width)
