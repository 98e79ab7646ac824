"""Exactness: energy and carbon are exact integrals, checked against brute force."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sim
from sim.models.hardware import estimate, speed
from tests.conftest import make_scenario, site

HOURLY_G_PER_KWH = [420.0, 380.5, 97.25, 150.0, 612.0, 333.3, 250.0, 180.0, 505.5, 275.0] * 3


def hourly_trace(tmp_path) -> dict:
    times = pd.date_range("2020-06-01", periods=len(HOURLY_G_PER_KWH), freq="h", tz="UTC")
    pd.DataFrame(
        {"timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "carbon_intensity": HOURLY_G_PER_KWH}
    ).to_csv(tmp_path / "ci.csv", index=False)
    return {"file": str(tmp_path / "ci.csv")}


def brute_force_ci_integral(t0_s: float, t1_s: float) -> float:
    """Sum of intensity x overlap over one-second cells: (g/kWh) x s."""
    total = 0.0
    for k in range(math.floor(t0_s), math.ceil(t1_s)):
        overlap = min(k + 1, t1_s) - max(k, t0_s)
        total += HOURLY_G_PER_KWH[k // 3600] * overlap
    return total


def test_carbon_of_a_job_straddling_several_steps_equals_brute_force(tmp_path):
    traced = site(carbon=hourly_trace(tmp_path))
    job = {
        "job_id": "j",
        "submit_time": 1234.5,
        "gpus": 2,
        "work_gpu_h": 9.3,
        "profile": "memory-bound",
    }
    r = sim.simulate(make_scenario(tmp_path, [job], sites=[traced], duration_h=20), "run_now")
    row = r.jobs.iloc[0]
    runtime_s = 9.3 * 3600 / (2 * speed("A100-80GB", "memory-bound"))
    assert row["end_s"] == pytest.approx(1234.5 + runtime_s, rel=1e-12)
    assert row["end_s"] > 4 * 3600  # straddles five hourly steps
    facility_w = 2 * (estimate("A100-80GB", "memory-bound").power_w + 40.0) * 1.5
    expected_kg = facility_w * brute_force_ci_integral(1234.5, row["end_s"]) / 3.6e9
    assert row["carbon_kg"] == pytest.approx(expected_kg, rel=1e-9)


def test_site_carbon_equals_the_brute_force_integral_of_its_power(tmp_path):
    traced = site(carbon=hourly_trace(tmp_path))
    jobs = [
        {
            "job_id": f"j{i}",
            "submit_time": 777.7 * i,
            "gpus": 1 + i % 3,
            "work_gpu_h": 1.1 + i,
            "profile": "mixed",
        }
        for i in range(6)
    ]
    r = sim.simulate(make_scenario(tmp_path, jobs, sites=[traced], duration_h=20), "run_now")
    p = r.power
    t_next = np.append(p["time_s"].to_numpy()[1:], 20 * 3600.0)
    expected_kg = sum(
        w * brute_force_ci_integral(t0, t1) / 3.6e9
        for w, t0, t1 in zip(p["facility_w"], p["time_s"], t_next, strict=True)
    )
    assert r.summary["carbon_operational_kg"] == pytest.approx(expected_kg, rel=1e-9)
    assert r.summary["energy_facility_kwh"] == pytest.approx(
        float(np.sum(p["facility_w"] * (t_next - p["time_s"]))) / 3.6e6, rel=1e-12
    )


def test_an_hourly_pue_profile_is_integrated_exactly(tmp_path):
    pue = [1.1 + 0.02 * h for h in range(24)]  # by UTC hour of day
    start_s, work_h = 1800.0, 5.0  # runs 00:30 .. 05:30 UTC on one A100
    traced = site(carbon=hourly_trace(tmp_path), pue=pue)
    job = {
        "job_id": "j",
        "submit_time": start_s,
        "gpus": 1,
        "work_gpu_h": work_h,
        "profile": "mixed",
    }
    r = sim.simulate(make_scenario(tmp_path, [job], sites=[traced], duration_h=20), "run_now")
    row = r.jobs.iloc[0]
    end_s = start_s + work_h * 3600 / speed("A100-80GB", "mixed")
    it_w = estimate("A100-80GB", "mixed").power_w + 40.0

    def pue_at(t):
        return pue[int(t // 3600) % 24]

    energy = sum(it_w * pue_at(k) for k in range(int(start_s), math.ceil(end_s))) / 3.6e6
    carbon = (
        sum(
            it_w * pue_at(k) * HOURLY_G_PER_KWH[k // 3600]
            for k in range(int(start_s), math.ceil(end_s))
        )
        / 3.6e9
    )
    # one-second cells: the job's end is not on a whole second, correct the last cell
    last = math.ceil(end_s) - 1
    excess = (math.ceil(end_s) - end_s) * it_w * pue_at(last)
    assert row["energy_kwh"] == pytest.approx(energy - excess / 3.6e6, rel=1e-9)
    assert row["carbon_kg"] == pytest.approx(
        carbon - excess * HOURLY_G_PER_KWH[last // 3600] / 3.6e9, rel=1e-9
    )
    # the power log steps at every PUE change: facility power = IT power x PUE of the hour
    p = r.power
    expected = [w * pue_at(t) for w, t in zip(p["it_w"], p["time_s"], strict=True)]
    assert p["facility_w"].tolist() == pytest.approx(expected, rel=1e-12)
    assert len(p) >= 20  # a row per hour of the 20-hour horizon, at least


def test_the_pue_profile_follows_utc_hours_whatever_offset_the_start_is_written_with():
    from datetime import datetime, timedelta, timezone

    from sim.grid.pue import PueProfile

    pue = [1.0 + h / 100 for h in range(24)]
    start = datetime(2020, 6, 1, 3, 0, tzinfo=timezone(timedelta(hours=2)))  # 01:00 UTC
    assert PueProfile(pue, start).value_at(0.0) == pue[1]
