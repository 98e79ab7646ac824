"""The calibrated synthetic generator: its statistics match its parameters within sampling
error (cycles, presets, heavy-tailed durations, offered load). The basic generator tests
(Poisson rate, exponential/lognormal, mix, fractions, determinism) are in test_workload.py."""

from __future__ import annotations

import math
import tracemalloc
from datetime import UTC, datetime

import numpy as np
import pytest
from pydantic import ValidationError

from sim.config.workload import SyntheticWorkload
from sim.workload import generate_synthetic
from sim.workload.synthetic import hourly_rate_factors

START = datetime(2020, 6, 1, tzinfo=UTC)  # a Monday
SITES = ["a"]


def cfg(**kw) -> SyntheticWorkload:
    base = {"arrival_rate_per_h": 40.0, "duration": {"dist": "exponential", "mean_h": 1.0}}
    return SyntheticWorkload.model_validate(base | kw)


def gen(c: SyntheticWorkload, horizon_h: float, seed: int = 1, start=START):
    return generate_synthetic(
        c, SITES, horizon_h * 3600.0, np.random.default_rng(seed), start=start
    )


def test_hourly_arrival_counts_follow_the_modulated_rate():
    c = cfg(diurnal_amplitude=0.8, peak_hour=14, weekly_amplitude=0.5)
    weeks = 20
    jobs = gen(c, weeks * 168)
    factors = hourly_rate_factors(c, START, weeks * 168 * 3600.0)
    counts = np.bincount((jobs.submit_s // 3600).astype(int), minlength=len(factors))
    expected = 40.0 * factors
    # hour of the week: pool the 20 weeks, a chi-square-like check per hour
    obs_w = counts.reshape(weeks, 168).sum(0)
    exp_w = expected.reshape(weeks, 168).sum(0)
    z = (obs_w - exp_w) / np.sqrt(exp_w)
    assert np.all(np.abs(z) < 5)
    assert abs(np.mean(z**2) - 1) < 5 * math.sqrt(2 / 168)
    # shape: peak at 14:00, trough at 02:00, weekend lower, weekly mean = configured rate
    daily = counts.reshape(-1, 24).sum(0)
    assert daily.argmax() in (13, 14) and daily.argmin() in (1, 2)
    by_day = counts.reshape(weeks, 7, 24).sum((0, 2))
    ratio = by_day[5:].mean() / by_day[:5].mean()
    assert abs(ratio - 0.5) < 0.03
    assert abs(len(jobs) - 40 * weeks * 168) < 5 * math.sqrt(40 * weeks * 168)


def test_rate_factors_average_one_and_follow_local_time():
    c = cfg(diurnal_amplitude=0.6, peak_hour=10, weekly_amplitude=0.3, timezone="Asia/Shanghai")
    f = hourly_rate_factors(c, START, 7 * 86400.0)
    assert f.mean() == pytest.approx(1.0, rel=1e-12)
    # 10:00 Shanghai = 02:00 UTC on the Monday
    assert f[:24].argmax() == 1  # UTC hours 1 and 2 (09:30, 10:30 local) tie around 10:00
    with pytest.raises(ValidationError, match="time zone"):
        cfg(timezone="Mars/Olympus")


def test_cycles_need_the_start_and_keep_attributes_when_whole_weeks():
    with pytest.raises(ValueError, match="scenario start"):
        gen(cfg(diurnal_amplitude=0.5), 24, start=None)
    flat = gen(cfg(), 2 * 168, seed=3)
    cyc = gen(cfg(diurnal_amplitude=0.9, weekly_amplitude=0.4), 2 * 168, seed=3)
    assert len(flat) == len(cyc)  # Lambda(horizon) = horizon: same draws
    assert np.array_equal(flat.work_gpu_h, cyc.work_gpu_h)
    assert not np.array_equal(flat.submit_s, cyc.submit_s)
    assert np.all(np.diff(cyc.submit_s) >= 0) and cyc.submit_s[-1] < 2 * 168 * 3600


PHILLY_GPUS = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}
"""The Philly GPU-count mix: Gavel (Narayanan et al., OSDI'20), scheduler/utils.py
`_generate_scale_factor`."""


def test_philly_preset_gpu_mix_and_duration_percentiles():
    c = SyntheticWorkload.model_validate({"preset": "philly", "arrival_rate_per_h": 100.0})
    assert c.gpus == PHILLY_GPUS
    jobs = gen(c, 500)
    n = len(jobs)
    for count, p in PHILLY_GPUS.items():
        share = np.mean(jobs.gpus == count)
        assert abs(share - p) < 5 * math.sqrt(p * (1 - p) / n)
    d_min = jobs.work_gpu_h / jobs.gpus * 60.0
    # 80% log-uniform on [10^1.5, 10^3] min, 20% on [10^3, 10^4] min
    assert d_min.min() >= 10**1.5 * (1 - 1e-9) and d_min.max() <= 1e4 * (1 + 1e-9)
    for q, want in ((0.5, 10**2.4375), (0.8, 1e3), (0.9, 10**3.5), (0.4, 10**2.25)):
        # quantile standard error ~ sqrt(q(1-q)/n) / density; compare in CDF space
        cdf = np.mean(d_min <= want)
        assert abs(cdf - q) < 5 * math.sqrt(q * (1 - q) / n), q
    assert np.mean(d_min) / 60 == pytest.approx(c.duration.expected_h(), rel=0.05)


def test_every_job_refers_to_one_profile_text():
    """Memory at millions of jobs: the profile column holds one shared text, not a copy
    per job."""
    jobs = gen(cfg(profile="resnet50"), 24.0)
    assert len(jobs) > 100
    assert set(jobs.profile) == {"resnet50"}
    assert len({id(p) for p in jobs.profile}) == 1


def test_explicit_keys_override_the_preset():
    c = SyntheticWorkload.model_validate(
        {"preset": "philly", "arrival_rate_per_h": 1.0, "gpus": {1: 1.0}}
    )
    assert c.gpus == {1: 1.0} and c.duration.dist == "loguniform_mixture"


@pytest.mark.parametrize(
    "duration",
    [
        {"dist": "exponential", "mean_h": 2.0},
        {"dist": "lognormal", "median_h": 1.0, "sigma": 1.0},
        {"dist": "loguniform_mixture", "components": [[0.5, 0.1, 1.0], [0.5, 1.0, 20.0]]},
    ],
)
def test_offered_load_reaches_the_target_utilisation(duration):
    c = cfg(
        arrival_rate_per_h=None,
        offered_load=0.7,
        offered_load_gpus=256,
        gpus={1: 0.5, 4: 0.3, 8: 0.2},
        duration=duration,
    )
    e_gpu_h = c.mean_gpus() * c.duration.expected_h()
    assert c.mean_arrival_rate_per_h() == pytest.approx(0.7 * 256 / e_gpu_h)
    horizon_h = 3000
    jobs = gen(c, horizon_h)
    load = jobs.work_gpu_h.sum() / (256 * horizon_h)
    # sampling error of the offered GPU-hours (compound Poisson): var = rate T E[(g d)^2]
    second = np.mean(jobs.work_gpu_h**2)
    se = math.sqrt(len(jobs) * second) / (256 * horizon_h)
    assert abs(load - 0.7) < 5 * se


def test_rate_options_are_validated():
    with pytest.raises(ValidationError, match="exactly one of arrival_rate_per_h or offered_load"):
        cfg(offered_load=0.5, offered_load_gpus=8)
    with pytest.raises(ValidationError, match="go together"):
        cfg(arrival_rate_per_h=None, offered_load=0.5)
    with pytest.raises(ValidationError, match="weights must sum to 1"):
        cfg(duration={"dist": "loguniform_mixture", "components": [[0.5, 1, 2]]})
    with pytest.raises(ValidationError, match="low_h <= high_h"):
        cfg(duration={"dist": "loguniform_mixture", "components": [[1.0, 2, 1]]})
    with pytest.raises(ValidationError, match="needs components"):
        cfg(duration={"dist": "loguniform_mixture"})


def test_a_scenario_with_a_daily_cycle_generates_its_workload(tmp_path):
    import sim
    from tests.conftest import make_scenario

    scenario = make_scenario(
        workload={
            "synthetic": {
                "arrival_rate_per_h": 4.0,
                "diurnal_amplitude": 0.5,
                "duration": {"dist": "exponential", "mean_h": 0.5},
            }
        },
        duration_h=48,
    )
    assert sim.simulate(scenario).summary["jobs_submitted"] > 100


def test_a_generated_table_stores_each_value_all_jobs_share_once():
    # profile, checkpoint_gb, data_gb and the columns the generator leaves unset are one value
    # for every job: at a million jobs, 8 MB each if stored per job
    tracemalloc.start()
    jobs = gen(cfg(arrival_rate_per_h=4000.0), 25)
    held_bytes, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    per_job = ("submit_s", "gpus", "work_gpu_h", "deadline_s", "interruptible", "origin_site")
    # the ids are numpy texts (16 bytes a job), not a Python string per job (61 bytes)
    own_bytes = sum(getattr(jobs, name).nbytes for name in (*per_job, "job_id"))
    assert len(jobs) > 90_000 and jobs.job_id.nbytes == 16 * len(jobs)
    assert held_bytes < own_bytes + 8 * len(jobs)  # less than one more column of 8 bytes
    assert set(jobs.vc) == {""} and set(jobs.gpu_milli) == {1000} and set(jobs.data_gb) == {0.0}


def test_generated_job_ids_are_j0_j1_in_submit_order_and_read_as_str():
    jobs = gen(cfg(), 10)
    assert list(jobs.job_id[:3]) == ["j0", "j1", "j2"] and jobs.job_id[-1] == f"j{len(jobs) - 1}"
    assert type(jobs.job_id[5]) is str
