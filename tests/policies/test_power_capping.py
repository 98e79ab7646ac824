"""Power-capping policies: static_cap, energy_optimal_cap, carbon_aware_cap.

Unit tests drive each policy on a hand-built state (`PolicyHarness`) and check the exact
actions it returns, computed independently from the hardware model, then apply them (an
invalid action raises PolicyError). End-to-end tests compare whole runs with uncapped
`run_now`. docs/policies-power-capping.md quotes the numbers these tests measure.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policies import REGISTRY
from policies.power_capping import CarbonAwareCap, EnergyOptimalCap, StaticCap
from policies.run_now import RunNow
from sim.api import PolicyError, Resume, SetCap, Start, Suspend
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.models.hardware import POWER_MODEL, estimate, speed
from sim.models.training import TRAINING_WORKLOADS
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import REPO, make_scenario, run_cli, site

ZEUS_PROFILES = sorted(TRAINING_WORKLOADS)  # the six workloads Zeus measured
MEASURED_GPUS = sorted({gpu for gpu, _ in POWER_MODEL.pairs})
HOST_W = 40.0  # the base site's host power per GPU (tests/conftest.py)


def harness(
    tmp_path: Path, jobs: list[dict], gpus: dict[str, int], **site_changes
) -> PolicyHarness:
    """A harness on one site `a` with `gpus` (model -> count), advanced to t = 1 s."""
    scenario = make_scenario(
        tmp_path,
        jobs=jobs,
        sites=[site(gpus=[{"model": m, "count": n} for m, n in gpus.items()], **site_changes)],
    )
    return PolicyHarness(scenario).advance(1.0)


def job(job_id: str, profile: str = "resnet50", gpus: int = 1, work_gpu_h: float = 2.0, **extra):
    return {
        "job_id": job_id,
        "submit_time": 0,
        "gpus": gpus,
        "work_gpu_h": work_gpu_h,
        "profile": profile,
        **extra,
    }


def brute_force_cap(state, model: str, profile: str, cost) -> float | None:
    """Scan every whole watt of `model`'s settable range with state.operating_point; the cap
    of least cost(power_w, throughput_fraction, max_cap_w), the higher on ties; None if
    that is the maximum limit."""
    spec = state.gpu_spec(model)
    best = None
    for c in np.arange(spec.min_cap_w, spec.max_cap_w + 1.0, 1.0):
        op = state.operating_point(model, profile, float(c))
        key = (cost(op.power_w, op.throughput_fraction, spec.max_cap_w), -c)
        if best is None or key < best[0]:
            best = (key, float(c))
    return None if best[1] == spec.max_cap_w else best[1]


def lowest_cap_meeting(state, job, model: str, left_s: float) -> float:
    """Brute force: the lowest whole-watt cap under which `job` finishes within `left_s`."""
    spec = state.gpu_spec(model)
    for c in np.arange(spec.min_cap_w, spec.max_cap_w + 1.0, 1.0):
        if state.estimate(job, "a", float(c), model)[0] <= left_s:
            return float(c)
    raise AssertionError("no cap meets the deadline")


def write_trace(path: Path, hourly_g_per_kwh: list[float]) -> Path:
    """An hourly carbon-intensity CSV from the base scenario start."""
    times = pd.date_range("2020-06-01T00:00:00Z", periods=len(hourly_g_per_kwh), freq="h")
    pd.DataFrame(
        {"timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "carbon_intensity": hourly_g_per_kwh}
    ).to_csv(path, index=False)
    return path


def job_intensity_g_per_kwh(results) -> float:
    """Energy-weighted carbon intensity of the jobs' energy."""
    return float(results.jobs["carbon_kg"].sum() * 1000.0 / results.jobs["energy_kwh"].sum())


# --- registry and parameters ---------------------------------------------------------------


def test_registry_names():
    assert REGISTRY["static_cap"] is StaticCap
    assert REGISTRY["energy_optimal_cap"] is EnergyOptimalCap
    assert REGISTRY["carbon_aware_cap"] is CarbonAwareCap
    assert CarbonAwareCap().signal_steps is True
    assert not getattr(EnergyOptimalCap(), "signal_steps", False)


@pytest.mark.parametrize(
    ("name", "params", "names"),
    [
        ("static_cap", {}, "watts, per_model, per_site"),
        ("static_cap", {"watts": -5}, "watts"),
        ("static_cap", {"watts": "high"}, "watts"),
        ("static_cap", {"per_model": {"V100": 0}}, "per_model.V100"),
        ("static_cap", {"per_site": {"a": -1}}, "per_site.a"),
        ("static_cap", {"wats": 200}, "wats"),
        ("energy_optimal_cap", {"eta": 1.5}, "eta"),
        ("energy_optimal_cap", {"eta": -0.1}, "eta"),
        ("energy_optimal_cap", {"eta": "half"}, "eta"),
        ("energy_optimal_cap", {"resolution_w": 0}, "resolution_w"),
        ("energy_optimal_cap", {"deadline_margin_s": -1}, "deadline_margin_s"),
        ("carbon_aware_cap", {"low_g_per_kwh": 100}, "high_g_per_kwh"),
        ("carbon_aware_cap", {"low_g_per_kwh": 300, "high_g_per_kwh": 200}, "low_g_per_kwh"),
        ("carbon_aware_cap", {"low_quantile": 0.8, "high_quantile": 0.5}, "low_quantile"),
        ("carbon_aware_cap", {"high_quantile": 1.5}, "high_quantile"),
        ("carbon_aware_cap", {"window_h": 0}, "window_h"),
        ("carbon_aware_cap", {"min_cap_frac": 0}, "min_cap_frac"),
        ("carbon_aware_cap", {"min_cap_frac": 1.2}, "min_cap_frac"),
        ("carbon_aware_cap", {"signal_steps": False}, "signal_steps"),
    ],
)
def test_bad_parameters_are_scenario_errors_naming_the_parameter(name, params, names):
    with pytest.raises(ScenarioError, match=names.replace(".", r"\.")):
        build_policy(name, params)


def test_good_parameters_build():
    assert build_policy("static_cap", {"watts": 200, "per_model": {"V100": 150}}).per_model == {
        "V100": 150.0
    }
    assert build_policy("energy_optimal_cap", {"eta": 1}).eta == 1.0
    assert build_policy("carbon_aware_cap", {"low_g_per_kwh": 0, "high_g_per_kwh": 400})


# --- static_cap ----------------------------------------------------------------------------


def test_static_cap_start_carries_the_per_model_cap(tmp_path):
    h = harness(tmp_path, [job("j1", gpus=2), job("j2", gpus=2)], {"V100": 2, "A100-80GB": 4})
    actions = StaticCap(watts=300, per_model={"V100": 150}).decide(h.state)
    assert actions == [
        Start(h.job("j1"), "a", 150.0, "V100"),
        Start(h.job("j2"), "a", 300.0, "A100-80GB"),
    ]
    h.apply(actions)
    assert (h.job("j1").cap_w, h.job("j2").cap_w) == (150.0, 300.0)
    # A capped GPU draws what the hardware model says under its cap.
    assert h.job("j1").gpu_power_w == h.state.operating_point("V100", "resnet50", 150.0).power_w


def test_static_cap_precedence_is_site_then_model_then_watts(tmp_path):
    scenario = make_scenario(
        tmp_path,
        jobs=[job("j1")],
        sites=[
            site(
                name="a", gpus=[{"model": "V100", "count": 2}, {"model": "A100-80GB", "count": 2}]
            ),
            site(name="b", gpus=[{"model": "V100", "count": 2}]),
        ],
    )
    state = PolicyHarness(scenario).state
    policy = StaticCap(watts=300, per_model={"V100": 150}, per_site={"b": 200})
    assert policy.cap_for(state, "b", "V100") == 200.0  # per_site beats per_model
    assert policy.cap_for(state, "a", "V100") == 150.0  # per_model beats watts
    assert policy.cap_for(state, "a", "A100-80GB") == 300.0  # watts otherwise
    assert StaticCap(per_model={"V100": 150}).cap_for(state, "a", "A100-80GB") is None


def test_static_cap_clips_watts_and_per_site_into_the_settable_range(tmp_path):
    h = harness(tmp_path, [job("j1"), job("j2")], {"V100": 1, "A100-80GB": 1})
    state = h.state  # V100: 100-250 W, A100-80GB: 100-400 W
    assert StaticCap(watts=50).cap_for(state, "a", "V100") == 100.0
    assert StaticCap(watts=300).cap_for(state, "a", "V100") == 250.0
    assert StaticCap(watts=300).cap_for(state, "a", "A100-80GB") == 300.0
    assert StaticCap(per_site={"a": 1000}).cap_for(state, "a", "A100-80GB") == 400.0
    h.apply(StaticCap(watts=300).decide(state))  # valid on both models


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"per_model": {"V100": 300}},
            r"per_model\.V100 = 300 W is outside V100's settable range 100-250 W",
        ),
        ({"per_model": {"A100": 200}}, "per_model names unknown GPU model 'A100'"),
        ({"per_site": {"b": 200}}, "per_site names unknown site 'b'"),
    ],
)
def test_static_cap_rejects_per_model_caps_out_of_range_and_unknown_names(
    tmp_path, params, message
):
    h = harness(tmp_path, [job("j1")], {"V100": 1})
    with pytest.raises(PolicyError, match=message):
        StaticCap(**params).decide(h.state)


def test_static_cap_keeps_a_schedulers_own_cap_and_resolves_a_missing_gpu_model(tmp_path):
    h = harness(tmp_path, [job("j1"), job("j2", gpus=2)], {"V100": 1, "A100-80GB": 4})
    j1, j2 = h.job("j1"), h.job("j2")
    planned = [Start(j1, "a", 200.0, "V100"), Start(j2, "a")]  # j2: the engine picks the A100s
    actions = StaticCap(per_model={"V100": 150, "A100-80GB": 250}).amend(h.state, planned)
    assert actions == [Start(j1, "a", 200.0, "V100"), Start(j2, "a", 250.0, None)]
    h.apply(actions)
    assert (j2.gpu_model, j2.cap_w) == ("A100-80GB", 250.0)


# --- energy_optimal_cap --------------------------------------------------------------------


def zeus_jobs() -> list[dict]:
    return [job(f"j{i}", profile=p) for i, p in enumerate(ZEUS_PROFILES)]


@pytest.mark.parametrize("count_host_power", [False, True])
def test_energy_optimal_cap_with_eta_1_minimises_energy_per_unit_work(tmp_path, count_host_power):
    h = harness(tmp_path, zeus_jobs(), {"V100": 8})
    policy = EnergyOptimalCap(eta=1.0, count_host_power=count_host_power)
    actions = policy.decide(h.state)
    host_w = HOST_W if count_host_power else 0.0
    expected = [
        Start(
            h.job(f"j{i}"),
            "a",
            brute_force_cap(h.state, "V100", p, lambda pw, r, _m: (pw + host_w) / r),
            "V100",
        )
        for i, p in enumerate(ZEUS_PROFILES)
    ]
    assert actions == expected
    assert sum(a.gpu_cap_w is not None for a in actions) >= 5  # NCF may be the exception
    h.apply(actions)


def test_energy_optimal_cap_counting_host_power_caps_higher(tmp_path):
    h = harness(tmp_path, [job("j1", profile="resnet50")], {"V100": 1})
    gpu_only = EnergyOptimalCap(eta=1.0, count_host_power=False).cap_for(
        h.state, h.job("j1"), "a", "V100"
    )
    with_host = EnergyOptimalCap(eta=1.0).cap_for(h.state, h.job("j1"), "a", "V100")
    assert (gpu_only, with_host) == (124.0, 146.0)  # quoted in the docs


def test_energy_optimal_cap_with_eta_one_half_minimises_the_zeus_cost(tmp_path):
    h = harness(tmp_path, zeus_jobs(), {"A40": 8})
    actions = EnergyOptimalCap(eta=0.5).decide(h.state)

    def zeus(pw, r, max_cap_w):
        return (0.5 * (pw + HOST_W) + 0.5 * (max_cap_w + HOST_W)) / r

    assert [a.gpu_cap_w for a in actions] == [
        brute_force_cap(h.state, "A40", p, zeus) for p in ZEUS_PROFILES
    ]
    h.apply(actions)


def test_energy_optimal_cap_with_eta_0_leaves_jobs_uncapped(tmp_path):
    h = harness(tmp_path, zeus_jobs(), {"V100": 8})
    assert EnergyOptimalCap(eta=0.0).decide(h.state) == RunNow().decide(h.state)


def test_energy_optimal_cap_raises_the_cap_to_keep_a_deadline(tmp_path):
    work_gpu_h = 2.0
    uncapped_s = work_gpu_h * 3600.0 / speed("V100", "resnet50")
    left_s = 1.1 * uncapped_s  # the energy-optimal cap (146 W) would run 1.2x longer
    deadline_s = 1.0 + 300.0 + left_s  # now + margin + time left
    h = harness(tmp_path, [job("j1", work_gpu_h=work_gpu_h, deadline=deadline_s)], {"V100": 1})
    j1 = h.job("j1")
    policy = EnergyOptimalCap(eta=1.0)
    assert policy.cap_for(h.state, j1, "a", "V100") == 146.0
    expected = lowest_cap_meeting(h.state, j1, "V100", left_s)
    assert 146.0 < expected < 250.0
    assert policy.decide(h.state) == [Start(j1, "a", expected, "V100")]


def test_energy_optimal_cap_caps_resumed_jobs(tmp_path):
    h = harness(tmp_path, [job("j1", interruptible=True)], {"V100": 1})
    j1 = h.job("j1")
    h.apply([Start(j1, "a", gpu_model="V100")]).advance(600.0).apply([Suspend(j1)])
    actions = EnergyOptimalCap(eta=1.0).decide(h.state)
    assert actions == []  # run_now does not resume; in a chain the scheduler would
    actions = EnergyOptimalCap(eta=1.0).amend(h.state, [Resume(j1, "a", gpu_model="V100")])
    assert actions == [Resume(j1, "a", 146.0, "V100")]
    h.apply(actions)
    assert j1.cap_w == 146.0


# --- carbon_aware_cap ----------------------------------------------------------------------


def carbon_harness(tmp_path, jobs, hourly, gpus=None) -> PolicyHarness:
    trace = write_trace(tmp_path / "ci.csv", hourly)
    return harness(tmp_path, jobs, gpus or {"A100-80GB": 4}, carbon={"file": str(trace)})


# Hours 0-1 clean (100), hours 2-3 dirty (500), then in between (300).
STEPS = [100.0] * 2 + [500.0] * 2 + [300.0] * 44


def test_carbon_aware_cap_follows_the_carbon_intensity(tmp_path):
    h = carbon_harness(tmp_path, [job("j1", work_gpu_h=40.0)], STEPS)
    j1 = h.job("j1")
    policy = CarbonAwareCap(low_g_per_kwh=200, high_g_per_kwh=400, min_cap_frac=0.5)
    # Clean: uncapped; no SetCap while nothing runs.
    assert policy.decide(h.state) == [Start(j1, "a", None, "A100-80GB")]
    h.apply([Start(j1, "a", None, "A100-80GB")])
    assert policy.decide(h.state) == []
    # Dirty: level 1, the deepest cap, 0.5 x 400 W.
    h.advance(2 * 3600.0 + 1.0)
    actions = policy.decide(h.state)
    assert actions == [SetCap(j1, 200.0)]
    h.apply(actions)
    assert policy.decide(h.state) == []  # same level: no churn
    # In between: level (300 - 200) / (400 - 200) = 0.5, cap 400 - 0.5 x 200 = 300 W.
    h.advance(4 * 3600.0 + 1.0)
    assert policy.decide(h.state) == [SetCap(j1, 300.0)]


def test_carbon_aware_cap_deepest_cap_is_the_energy_optimal_cap_by_default(tmp_path):
    h = carbon_harness(
        tmp_path,
        [job(f"j{i}", profile=p) for i, p in enumerate(ZEUS_PROFILES)],
        [500.0] * 48,
        gpus={"RTX6000": 8},
    )
    actions = CarbonAwareCap(low_g_per_kwh=200, high_g_per_kwh=400).decide(h.state)
    assert [a.gpu_cap_w for a in actions] == [
        brute_force_cap(h.state, "RTX6000", p, lambda pw, r, _m: (pw + HOST_W) / r)
        for p in ZEUS_PROFILES
    ]
    h.apply(actions)


def test_carbon_aware_cap_never_caps_a_job_below_the_speed_its_deadline_needs(tmp_path):
    work_gpu_h = 8.0
    left_s = 1.15 * work_gpu_h * 3600.0  # A100-80GB is the reference GPU: 8 h uncapped
    deadline_s = 1.0 + 300.0 + left_s
    h = carbon_harness(
        tmp_path,
        [
            job("j1", profile="mixed", work_gpu_h=work_gpu_h, deadline=deadline_s),
            job("j2", profile="mixed", work_gpu_h=work_gpu_h),
        ],
        [500.0] * 48,
    )
    j1, j2 = h.job("j1"), h.job("j2")
    policy = CarbonAwareCap(low_g_per_kwh=200, high_g_per_kwh=400, min_cap_frac=0.25)
    expected = lowest_cap_meeting(h.state, j1, "A100-80GB", left_s)
    assert 100.0 < expected < 400.0
    actions = policy.decide(h.state)
    assert actions == [Start(j1, "a", expected, "A100-80GB"), Start(j2, "a", 100.0, "A100-80GB")]
    h.apply(actions)
    # Without a deadline and with cap_jobs_without_deadline = false: uncapped.
    assert (
        CarbonAwareCap(
            low_g_per_kwh=200, high_g_per_kwh=400, cap_jobs_without_deadline=False
        ).cap_for(h.state, j2, "a", "A100-80GB")
        is None
    )


def test_carbon_aware_cap_recaps_only_the_jobs_it_capped(tmp_path):
    h = carbon_harness(
        tmp_path,
        [
            job("mine", work_gpu_h=40.0),
            job("theirs", work_gpu_h=40.0),
            job("moving", work_gpu_h=40.0, interruptible=True),
        ],
        STEPS,
    )
    mine, theirs, moving = h.job("mine"), h.job("theirs"), h.job("moving")
    policy = CarbonAwareCap(low_g_per_kwh=200, high_g_per_kwh=400, min_cap_frac=0.5)
    planned = [
        Start(mine, "a", gpu_model="A100-80GB"),
        Start(theirs, "a", 350.0, "A100-80GB"),
        Start(moving, "a", gpu_model="A100-80GB"),
    ]
    h.apply(policy.amend(h.state, planned))
    h.advance(2 * 3600.0 + 1.0)
    # The scheduler suspends `moving` in this decision: no SetCap for it; `theirs` keeps
    # the scheduler's cap.
    actions = policy.amend(h.state, [Suspend(moving)])
    assert actions == [Suspend(moving), SetCap(mine, 200.0)]
    h.apply(actions)


def test_carbon_aware_cap_quantile_thresholds_come_from_the_forecast(tmp_path):
    hourly = [10.0 * k for k in range(72)]
    hourly[1] = 120.0
    trace = write_trace(tmp_path / "ci.csv", hourly)
    scenario = make_scenario(
        tmp_path, jobs=[job("j1")], duration_h=48, sites=[site(carbon={"file": str(trace)})]
    )
    h = PolicyHarness(scenario).advance(3600.0)
    policy = CarbonAwareCap()  # quartiles of the next 24 h
    # Window: hours 1..24, one hour each: 120 now, then 20, 30, ..., 240 g/kWh.
    assert policy.thresholds(h.state, "a") == (70.0, 180.0)
    assert policy.level(h.state, "a") == pytest.approx((120.0 - 70.0) / (180.0 - 70.0))
    h.advance(40 * 3600.0)  # window cut at the 48 h horizon: 400, 410, ..., 470 g/kWh
    assert policy.thresholds(h.state, "a") == (410.0, 450.0)
    assert policy.level(h.state, "a") == 0.0  # 400 g/kWh: the cleanest of the 8 hours left
    flat = carbon_harness(tmp_path, [job("j1")], [300.0] * 48)
    assert CarbonAwareCap().level(flat.state, "a") == 0.0  # a flat grid: nothing to gain


# --- end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", MEASURED_GPUS)
def test_energy_optimal_cap_saves_energy_on_every_zeus_profile(tmp_path, gpu):
    """One job per calibrated Zeus workload on a GPU with measured cap curves; every job
    completes in both runs, and each uses less energy under energy_optimal_cap."""
    jobs = [job(p, profile=p, work_gpu_h=1.0) for p in ZEUS_PROFILES]
    scenario = make_scenario(
        tmp_path, jobs=jobs, sites=[site(gpus=[{"model": gpu, "count": len(jobs)}])], duration_h=48
    )
    base = simulate(scenario, "run_now").jobs.set_index("job_id")
    capped = simulate(scenario, "energy_optimal_cap").jobs.set_index("job_id")
    assert (base["state"] == "completed").all() and (capped["state"] == "completed").all()
    saving = 1.0 - capped["energy_kwh"] / base["energy_kwh"]
    assert (saving > 0).all(), saving
    assert (saving.drop("ncf") > 0.01).all(), saving  # NCF never reaches a cap (docs)
    assert (capped["slowdown"] >= 1.0).all()


def test_static_cap_lowers_peak_power(tmp_path):
    jobs = [job(f"j{i}", profile="bert-squad", work_gpu_h=2.0) for i in range(4)]
    scenario = make_scenario(tmp_path, jobs=jobs)  # four A100-80GB, all busy at once
    base = simulate(scenario, "run_now")
    capped = simulate(scenario, StaticCap(watts=250))
    uncapped_w = base.power["it_w"].max()
    capped_w = capped.power["it_w"].max()
    # Peak IT power: four busy GPUs plus their host share.
    assert uncapped_w == pytest.approx(4 * (estimate("A100-80GB", "bert-squad").power_w + HOST_W))
    assert capped_w == pytest.approx(
        4 * (estimate("A100-80GB", "bert-squad", 250.0).power_w + HOST_W)
    )
    assert capped_w < uncapped_w - 4 * 90.0
    assert capped.summary["jobs_completed"] == base.summary["jobs_completed"] == 4


def de_jobs() -> list[dict]:
    """Four days of jobs on the DE grid, one every 3 h; every other one has a tight deadline,
    1.15x its uncapped runtime."""
    profiles = ["resnet50", "bert-squad", "shufflenetv2", "deepspeech2", "mixed", "compute-bound"]
    jobs = []
    for i in range(16):
        submit_s = i * 3 * 3600.0
        work, gpus = [4.0, 8.0, 2.0, 6.0][i % 4], [1, 2, 4][i % 3]
        runtime_s = work / gpus * 3600.0  # A100-80GB is the reference GPU
        deadline = submit_s + 1.15 * runtime_s if i % 2 == 0 else None
        jobs.append(
            job(
                f"j{i}",
                profile=profiles[i % 6],
                gpus=gpus,
                work_gpu_h=work,
                submit_time=submit_s,
                deadline=deadline,
            )
        )
    return jobs


def test_carbon_aware_cap_on_a_real_grid_lowers_carbon_and_keeps_deadlines(tmp_path, monkeypatch):
    scenario = make_scenario(
        tmp_path,
        jobs=de_jobs(),
        sites=[
            site(gpus=[{"model": "A100-80GB", "count": 8}], carbon={"zone": "DE", "year": 2020})
        ],
        duration_h=96,
    )
    base = simulate(scenario, "run_now")
    aware = simulate(scenario, "carbon_aware_cap")
    assert base.summary["jobs_completed"] == aware.summary["jobs_completed"] == 16
    assert aware.summary["deadline_misses"] == 0
    assert (aware.events["kind"] == "setcap").sum() > 0  # caps followed the grid
    assert job_intensity_g_per_kwh(aware) < job_intensity_g_per_kwh(base)
    assert aware.jobs["carbon_kg"].sum() < base.jobs["carbon_kg"].sum()
    assert aware.summary["carbon_operational_kg"] < base.summary["carbon_operational_kg"]
    # Jobs with a deadline were slowed at most to what it allows, the others more.
    slow = aware.jobs.set_index("job_id")["slowdown"]
    with_deadline = [f"j{i}" for i in range(0, 16, 2)]
    assert slow[with_deadline].max() <= 1.15
    assert slow.drop(with_deadline).max() > 1.15
    # Without the deadline check, the same caps would make jobs late.
    monkeypatch.setattr(
        "policies.power_capping._deadline_guard", lambda state, job, site, model, cap, caps, m: cap
    )
    assert simulate(scenario, "carbon_aware_cap").summary["deadline_misses"] > 0


# --- scenario files, CLI and chains ------------------------------------------------------


def test_power_capping_scenario_runs_every_policy_through_the_cli(tmp_path, capsys):
    path = REPO / "scenarios/power_capping.toml"
    assert path.read_text().startswith("#")
    summaries = {}
    for name, extra in [
        ("run_now", []),
        ("energy_optimal_cap", []),
        ("static_cap", ["--set", "policy.params.watts=250"]),
        ("carbon_aware_cap", []),
    ]:
        out = tmp_path / name
        code, captured = run_cli(
            ["run", str(path), "--policy", name, *extra, "--out", str(out)], capsys
        )
        assert code == 0, captured.err
        summaries[name] = json.loads((out / "summary.json").read_text())
    base = summaries["run_now"]
    for name in ("energy_optimal_cap", "static_cap", "carbon_aware_cap"):
        assert summaries[name]["jobs_completed"] == base["jobs_completed"]
        assert summaries[name]["energy_jobs_kwh"] < base["energy_jobs_kwh"]
        assert summaries[name]["carbon_operational_kg"] < base["carbon_operational_kg"]
    assert summaries["energy_optimal_cap"]["deadline_misses"] == 0
    assert summaries["carbon_aware_cap"]["deadline_misses"] == 0


def test_energy_optimal_cap_in_a_chain_from_a_scenario_file(tmp_path, capsys):
    jobs = [job(p, profile=p, work_gpu_h=1.0) for p in ZEUS_PROFILES]
    pd.DataFrame(jobs).to_csv(tmp_path / "jobs.csv", index=False)
    (tmp_path / "chain.toml").write_text(
        """
name = "chain"
start = 2020-06-01T00:00:00Z
duration_h = 24

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
host_w_per_gpu = 40
carbon = { constant_g_per_kwh = 300 }
gpus = [{ model = "V100", count = 6 }]

[workload]
file = "jobs.csv"

[policy]
name = "chain"
params.policies = [{ name = "run_now" }, { name = "energy_optimal_cap", params = { eta = 1.0 } }]
"""
    )
    code, captured = run_cli(
        ["run", str(tmp_path / "chain.toml"), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 0, captured.err
    ran = pd.read_parquet(tmp_path / "out" / "jobs.parquet").set_index("job_id")
    state = PolicyHarness(
        make_scenario(tmp_path, jobs=jobs, sites=[site(gpus=[{"model": "V100", "count": 6}])])
    ).state
    for p in ZEUS_PROFILES:
        cap = brute_force_cap(state, "V100", p, lambda pw, r, _m: (pw + HOST_W) / r)
        r = state.operating_point("V100", p, cap).throughput_fraction
        # The job ran under its energy-optimal cap the whole time: slowdown = 1 / r(cap).
        assert ran.loc[p, "slowdown"] == pytest.approx(1.0 / r, rel=1e-9)


def test_expected_ends_of_a_pool_are_the_estimates_of_its_running_jobs(tmp_path):
    jobs = [job("j1", work_gpu_h=2.0), job("j2", gpus=2, work_gpu_h=6.0), job("j3")]
    h = harness(tmp_path, jobs, {"A100-80GB": 4, "V100": 4})
    j1, j2, j3 = h.job("j1"), h.job("j2"), h.job("j3")
    h.apply(
        [
            Start(j1, "a", None, "A100-80GB"),
            Start(j2, "a", 250.0, "A100-80GB"),  # capped: slower, later end
            Start(j3, "a", None, "V100"),
        ]
    )
    h.advance(1800.0)
    ends, gpus = h.state.expected_ends("a", "A100-80GB")
    expected = [h.now_s + h.state.estimate(j, "a", j.cap_w, "A100-80GB")[0] for j in (j1, j2)]
    assert ends == pytest.approx(expected, rel=1e-12) and gpus == [1, 2]
    assert h.state.expected_ends("a", "V100")[1] == [1]
    with pytest.raises(PolicyError, match="no H100-SXM"):
        h.state.expected_ends("a", "H100-SXM")
