"""Specification of GAIA's cost-aware policies (policies/gaia_cost.py): a job waits at most
its queue's bound; a carbon-aware one starts at the cleanest window within it; a cost-aware
one starts earlier on free reserved GPUs; a spot-aware one runs short jobs on spot GPUs and
never long ones. One site whose grid follows a hand-made hourly trace (perfect forecast),
so every start can be worked out on paper."""

from __future__ import annotations

import pytest

import sim
from policies import REGISTRY
from policies.gaia_cost import (
    GAIA_SHORT_H,
    GaiaCarbon,
    GaiaCarbonCost,
    GaiaCarbonCostSpot,
    GaiaCarbonSpot,
    GaiaCost,
)
from tests.conftest import make_scenario, site

H = 3600.0
OD, SPOT, RESERVED = 3.0, 0.6, 1.2
PRICES = {
    "per_gpu_h": {"A100-80GB": OD},
    "spot_per_gpu_h": {"A100-80GB": SPOT},
    "reserved_per_gpu_h": {"A100-80GB": RESERVED},
}
# g/kWh hour by hour from the start: a clean valley 03:00-05:00, 300 otherwise.
HOURLY = [300, 300, 300, 50, 50, 300] + [300] * 42


def trace_site(tmp_path, reserved: int, spot: int, count: int) -> dict:
    rows = [f"2020-06-0{1 + h // 24}T{h % 24:02d}:00:00Z,{v}" for h, v in enumerate(HOURLY)]
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,carbon_intensity\n" + "\n".join(rows) + "\n")
    gpus = {"model": "A100-80GB", "count": count, "reserved": reserved, "spot": spot}
    return site(name="a", carbon={"file": str(path)}, gpus=[gpus])


def job(job_id: str, work_gpu_h: float, submit_h: float = 0.0) -> dict:
    """A one-GPU job (runtime = work_gpu_h on the site's A100-80GB)."""
    return {"job_id": job_id, "submit_time": submit_h * H, "gpus": 1, "work_gpu_h": work_gpu_h}


def run(tmp_path, policy, jobs, reserved=0, spot=0, count=2):
    scenario = make_scenario(
        tmp_path,
        jobs=jobs,
        sites=[trace_site(tmp_path, reserved, spot, count)],
        forecast={"model": "perfect"},
        prices=PRICES,
        duration_h=48.0,
    )
    r = sim.simulate(scenario, policy)
    return r.jobs.set_index("job_id")


def test_gaia_cost_starts_a_job_on_free_reserved_gpus_at_once(tmp_path):
    jobs = run(tmp_path, GaiaCost(), [job("a", 3.0)], reserved=1, count=2)
    assert jobs.loc["a", "start_s"] == 0.0 and jobs.loc["a", "cost"] == 0.0


def test_gaia_cost_waits_for_reserved_gpus_within_the_bound(tmp_path):
    # b waits for a's reserved GPU (3 h < its 24 h bound) although an on-demand one is free.
    jobs = run(tmp_path, GaiaCost(), [job("a", 3.0), job("b", 3.0)], reserved=1, count=2)
    assert jobs.loc["b", "start_s"] == 3 * H and jobs.loc["b", "cost"] == 0.0


def test_gaia_cost_takes_on_demand_gpus_when_the_bound_is_reached(tmp_path):
    policy = GaiaCost(max_wait_long_h=1.0)
    jobs = run(tmp_path, policy, [job("a", 3.0), job("b", 3.0)], reserved=1, count=2)
    assert jobs.loc["b", "start_s"] == 1 * H  # a tick of 300 s falls on it
    assert jobs.loc["b", "cost"] == pytest.approx(3 * OD)


def test_gaia_carbon_starts_at_the_cleanest_window_within_the_bound(tmp_path):
    # A 2 h job with a 6 h bound (short): the window 03:00-05:00 is the cleanest.
    jobs = run(tmp_path, GaiaCarbon(), [job("a", 2.0)], reserved=1, count=2)
    assert jobs.loc["a", "start_s"] == 3 * H
    # With a 2 h bound it cannot reach the valley's start: the cleanest is 02:00-04:00.
    jobs = run(tmp_path, GaiaCarbon(max_wait_short_h=2.0), [job("a", 2.0)], reserved=1, count=2)
    assert jobs.loc["a", "start_s"] == 2 * H


def test_gaia_carbon_cost_starts_before_its_window_on_free_reserved_gpus(tmp_path):
    jobs = run(tmp_path, GaiaCarbonCost(), [job("a", 2.0)], reserved=1, count=2)
    assert jobs.loc["a", "start_s"] == 0.0 and jobs.loc["a", "cost"] == 0.0
    # Without a free reserved GPU it waits for the window, then takes an on-demand one.
    jobs = run(tmp_path, GaiaCarbonCost(), [job("a", 2.0)], reserved=0, count=2)
    assert jobs.loc["a", "start_s"] == 3 * H
    assert jobs.loc["a", "cost"] == pytest.approx(2 * OD)


def test_spot_aware_policies_run_short_jobs_on_spot_and_never_long_ones(tmp_path):
    jobs = [job("short", 1.0), job("long1", 3.0), job("long2", 3.0)]
    # One on-demand and two spot GPUs; a flat grid after 06:00 (both longs are due by then).
    out = run(tmp_path, GaiaCarbonSpot(max_wait_long_h=0.0), jobs, spot=2, count=3)
    assert out.loc["short", "cost"] == pytest.approx(SPOT) and out.loc["short", "spot_gpu_h"] == 1
    assert out.loc["long1", "cost"] == pytest.approx(3 * OD)
    # long2 waits for the on-demand GPU rather than take the free spot one.
    assert out.loc["long2", "start_s"] == 3 * H and out.loc["long2", "spot_gpu_h"] == 0


def test_carbon_cost_spot_starts_long_jobs_early_on_reserved_but_short_ones_at_their_window(
    tmp_path,
):
    jobs = [job("short", 2.0), job("long", 3.0)]
    out = run(tmp_path, GaiaCarbonCostSpot(), jobs, reserved=1, spot=1, count=3)
    assert out.loc["long", "start_s"] == 0.0 and out.loc["long", "cost"] == 0.0
    assert out.loc["short", "start_s"] == 3 * H
    assert out.loc["short", "cost"] == pytest.approx(2 * SPOT)


GAIA = ["gaia_cost", "gaia_carbon", "gaia_carbon_cost", "gaia_carbon_spot", "gaia_carbon_cost_spot"]


@pytest.mark.parametrize("policy", GAIA)
def test_every_gaia_policy_places_mig_and_shared_jobs_through_the_kit(tmp_path, policy):
    # A MIG job takes a slice of the partitioned A100 (not a whole H100); two half-GPU jobs
    # share one whole H100, so the third whole-GPU job still finds the other free.
    partitioned = {"model": "A100-80GB", "count": 1, "mig": ["3g.40gb", "2g.20gb", "2g.20gb"]}
    gpus = [partitioned, {"model": "H100-SXM", "count": 2}]
    jobs = [
        {**job("mig", 0.5), "mig_profile": "3g.40gb"},
        {**job("half1", 0.5), "gpu_milli": 500},
        {**job("half2", 0.5), "gpu_milli": 500},
        job("whole", 0.5),
    ]
    scenario = make_scenario(
        tmp_path, jobs=jobs, sites=[site(gpus=gpus)], duration_h=48.0, policy={"name": policy}
    )
    out = sim.simulate(scenario).jobs.set_index("job_id")
    assert (out["state"] == "completed").all()
    assert out.loc["mig", "gpu_model"] == "A100-80GB"
    assert out.loc["half1", "start_s"] == out.loc["half2", "start_s"] == out.loc["whole", "start_s"]


def test_the_short_class_is_gaias_two_hours():
    assert GAIA_SHORT_H == 2.0


def test_the_five_combinations_are_registered_with_gaias_flags():
    flags = {
        name: (REGISTRY[name].carbon_aware, REGISTRY[name].cost_aware, REGISTRY[name].spot_aware)
        for name in (
            "gaia_cost",
            "gaia_carbon",
            "gaia_carbon_cost",
            "gaia_carbon_spot",
            "gaia_carbon_cost_spot",
        )
    }
    # (carbon_aware, cost_aware, spot_aware) as umassos/GAIA src/scheduling/__init__.py.
    assert flags == {
        "gaia_cost": (False, True, False),
        "gaia_carbon": (True, False, False),
        "gaia_carbon_cost": (True, True, False),
        "gaia_carbon_spot": (True, False, True),
        "gaia_carbon_cost_spot": (True, True, True),
    }


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"max_wait_short_h": -1.0}, "max_wait_short_h must be >= 0 h, got -1.0"),
        ({"short_h": float("nan")}, "short_h must be >= 0 h"),
        ({"tick_s": 0.0}, "tick_s must be > 0 s, got 0.0"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, fragment):
    with pytest.raises(ValueError, match=fragment):
        GaiaCost(**params)
