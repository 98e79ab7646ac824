"""Training jobs on MIG slices: a static partition of a GPU pool (issue 20 part 6).

Specification: docs/mig.md ("Jobs on slices"). A pool declared `mig = [...]` runs only jobs
with that `mig_profile`, one per slice; a MIG job progresses at the GPU's speed x
`sim.models.mig.slice_speed_frac` (no interference between slices), draws its slice's SM share of
its active power above idle, and is charged that share of its active and host power.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim
from policies.kit import first_come_first_served
from sim.api import SetCap, Start, Suspend, SystemState
from sim.engine.ledger import MigSlices
from sim.errors import PolicyError, ScenarioError, TraceError
from sim.models import mig
from sim.models.hardware import GPU_CATALOG, estimate, speed
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, scenario_jobs, site, write_jobs
from tests.engine.recording import run_recording_work

A100, H100 = "A100-80GB", "H100-SXM"
HOST_W = 40.0  # tests.conftest's base site
PUE = 1.5
SEVEN_1G = ["1g.10gb"] * 7
MIXED_LAYOUT = ["3g.40gb", "2g.20gb", "2g.20gb"]


def job(job_id: str, mig_profile: str, work_gpu_h: float, submit_s: float = 0.0, **more) -> dict:
    return {
        "job_id": job_id,
        "submit_time": submit_s,
        "gpus": 1,
        "work_gpu_h": work_gpu_h,
        "mig_profile": mig_profile,
        "profile": "mixed",
        **more,
    }


def partitioned(layout: list[str], count: int = 1, **more) -> dict:
    """The base site with `count` A100-80GB partitioned as `layout` and 2 whole H100-SXM."""
    return site(
        gpus=[{"model": A100, "count": count, "mig": layout}, {"model": H100, "count": 2}], **more
    )


def slice_runtime_s(work_gpu_h: float, mig_profile: str, profile: str = "mixed") -> float:
    """Runtime of a job alone on a slice of an A100-80GB at its maximum power limit, s."""
    frac = mig.slice_speed_frac(A100, mig_profile, profile)
    return work_gpu_h * 3600.0 / (speed(A100, profile) * frac)


class StartOnSlices:
    """Starts the pending jobs now, first come first served with backfilling (the kit's
    placement: MIG jobs on a free slice of their profile, the others on whole GPUs)."""

    tick_s = 600.0

    def __init__(self, layout: list[str], count: int) -> None:
        self.layout, self.count = layout, count

    def decide(self, state: SystemState) -> list:
        return first_come_first_served(state, backfill=True)


# --- speed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mig_profile", ["2g.20gb", "3g.40gb"])
@pytest.mark.parametrize("profile", ["compute-bound", "memory-bound"])
def test_a_mig_job_runs_at_the_slices_speed(tmp_path, mig_profile, profile):
    jobs = [job("a", mig_profile, 0.5, profile=profile)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT)])
    r = sim.simulate(scenario, StartOnSlices(MIXED_LAYOUT, 1))
    row = r.jobs.iloc[0]
    assert row["end_s"] == pytest.approx(slice_runtime_s(0.5, mig_profile, profile), rel=1e-12)
    assert (row["gpu_model"], row["mig_profile"]) == (A100, mig_profile)
    assert row["slowdown"] == pytest.approx(1.0, rel=1e-12)


def test_slices_do_not_slow_each_other_down(tmp_path):
    jobs = [job("a", "3g.40gb", 0.5), job("b", "2g.20gb", 0.5), job("c", "2g.20gb", 0.5)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT)])
    r = sim.simulate(scenario, StartOnSlices(MIXED_LAYOUT, 1))
    ends = dict(zip(r.jobs["job_id"], r.jobs["end_s"], strict=True))
    assert ends == pytest.approx(
        {
            "a": slice_runtime_s(0.5, "3g.40gb"),
            **dict.fromkeys("bc", slice_runtime_s(0.5, "2g.20gb")),
        },
        rel=1e-12,
    )
    assert r.power["busy_gpus"].max() == 1  # three jobs on one GPU


def test_a_site_cap_slows_a_slice_by_the_whole_gpus_throughput_fraction(tmp_path):
    scenario = make_scenario(
        tmp_path, [job("a", "3g.40gb", 0.5)], sites=[partitioned(MIXED_LAYOUT)]
    )
    h = PolicyHarness(scenario).advance(0.0)
    h.apply([SetCap("a", 250.0), Start(h.job("a"), "a")])
    expected_s = (
        slice_runtime_s(0.5, "3g.40gb") / estimate(A100, "mixed", 250.0).throughput_fraction
    )
    h.advance(expected_s + 1.0)
    assert h.times("a")[1] == pytest.approx(expected_s, rel=1e-12)


# --- the slice ledger ------------------------------------------------------------------------


def test_the_slice_ledger_fills_busy_gpus_first_and_frees_a_gpu_with_its_last_slice():
    slices = MigSlices(A100, MIXED_LAYOUT, count=2)
    assert slices.free_slices() == {"3g.40gb": 2, "2g.20gb": 4}
    assert slices.join(1, "2g.20gb") is True  # a GPU nothing held becomes busy
    assert slices.join(2, "3g.40gb") is False  # the free 3g of that GPU
    assert slices.join(3, "3g.40gb") is True  # the second GPU
    assert (len(slices), slices.free_slices()) == (2, {"3g.40gb": 0, "2g.20gb": 3})
    assert not slices.fits("3g.40gb") and slices.fits("2g.20gb")
    assert slices.share_of(2) == pytest.approx(42 / 108)
    # unheld SMs of the busy GPUs: GPU 1 holds 28 + 42 of 108, GPU 2 holds 42
    assert slices.spare_gpus() == pytest.approx(2 - (28 + 42 + 42) / 108)
    assert slices.leave(3) is True and slices.leave(1) is False and len(slices) == 1
    with pytest.raises(ValueError, match="no free 1g.10gb slice"):
        slices.join(4, "1g.10gb")  # not in the layout


def test_seven_1g_jobs_share_one_gpu_and_an_eighth_waits(tmp_path):
    jobs = [job(f"j{i}", "1g.10gb", 0.05 * (i + 1)) for i in range(8)]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])).advance(0.0)
    h.apply(Start(h.job(f"j{i}"), "a") for i in range(7))
    assert [h.job(f"j{i}").gpu_model for i in range(7)] == [A100] * 7
    with pytest.raises(
        PolicyError, match=r"needs a 1g.10gb MIG slice.*\(free MIG slices: A100-80GB: 0 1g.10gb\)"
    ):
        h.apply([Start(h.job("j7"), "a")])
    assert h.job("j7").state == "pending"
    first_end_s = slice_runtime_s(0.05, "1g.10gb")
    h.advance(first_end_s + 1.0)
    assert h.job("j0").state == "completed"
    h.apply([Start(h.job("j7"), "a")])  # the slice j0 left
    assert h.job("j7").state == "running"


def test_whole_gpu_and_fractional_jobs_never_use_a_partitioned_pool(tmp_path):
    jobs = [
        job("mig", "1g.10gb", 0.5),
        job("whole", "", 0.5),
        {**job("share", "", 0.5), "gpu_milli": 500},
    ]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])).advance(0.0)
    for name in ("whole", "share"):
        with pytest.raises(PolicyError, match=r"a has 0 free A100-80GB \(free MIG slices"):
            h.apply([Start(h.job(name), "a", gpu_model=A100)])
    h.apply([Start(h.job(n), "a") for n in ("mig", "whole", "share")])  # the first pool with room
    assert {n: h.job(n).gpu_model for n in ("mig", "whole", "share")} == {
        "mig": A100,
        "whole": H100,
        "share": H100,
    }
    assert h.state.free_gpus("a") == {A100: 0, H100: 0}


def test_a_mig_job_never_uses_whole_gpus(tmp_path):
    jobs = [job("a", "1g.10gb", 0.5), job("b", "2g.20gb", 0.5)]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])).advance(0.0)
    with pytest.raises(PolicyError, match=r"job needs a 1g.10gb MIG slice, a has 2 free H100-SXM"):
        h.apply([Start(h.job("a"), "a", gpu_model=H100)])
    assert h.job("b").state == "rejected"  # the layout has no 2g slice: at arrival
    assert h.state.free_gpus("a") == {A100: 0, H100: 2}


def test_a_mig_job_keeps_its_gpu_count(tmp_path):
    jobs = [
        {**job("a", "", 0.0), "work_gpu_h": "", "profile": "resnet50@256", "target_metric": 0.5}
    ]
    jobs[0]["mig_profile"] = "1g.10gb"
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])).advance(0.0)
    with pytest.raises(PolicyError, match="a job on a MIG slice keeps it"):
        h.apply([Start(h.job("a"), "a", gpus=2)])


def test_first_come_first_served_puts_mig_jobs_on_slices_and_the_others_on_whole_gpus(tmp_path):
    jobs = [job("mig", "1g.10gb", 0.5), job("w1", "", 0.5), job("w2", "", 0.5), job("w3", "", 0.5)]
    h = PolicyHarness(make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)])).advance(0.0)
    actions = first_come_first_served(h.state, backfill=True)
    h.apply(actions)  # checked by the engine: PolicyError if one did not fit
    placed = [(a.job.id, a.gpu_model) for a in actions]
    assert placed == [("mig", A100), ("w1", H100), ("w2", H100)]
    assert h.job("mig").mig_profile == "1g.10gb" and h.job("w1").mig_profile == ""


# --- power and energy ----------------------------------------------------------------------


def test_a_partitioned_gpus_draw_follows_the_mig_power_model(tmp_path):
    jobs = [job("a", "3g.40gb", 1.0, profile="compute-bound"), job("b", "2g.20gb", 1.0)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT, count=2)])
    r = sim.simulate(scenario, StartOnSlices(MIXED_LAYOUT, 2))
    spec = GPU_CATALOG[A100]

    def load(profile: str) -> float:
        return (estimate(A100, profile).power_w - spec.idle_w) / (spec.max_cap_w - spec.idle_w)

    busy_w = mig.gpu_power_w(
        A100, [("3g.40gb", load("compute-bound")), ("2g.20gb", load("mixed")), ("2g.20gb", 0.0)]
    )
    idle_rest_w = spec.idle_w + 2 * GPU_CATALOG[H100].idle_w
    at_start = r.power[r.power["time_s"] == 0.0].iloc[-1]
    assert at_start["it_w"] == pytest.approx(busy_w + idle_rest_w + 4 * HOST_W, rel=1e-12)
    assert at_start["busy_gpus"] == 1  # both slices on one GPU


def test_a_mig_job_is_charged_its_slices_sm_share_of_its_gpu_and_host(tmp_path):
    scenario = make_scenario(
        tmp_path, [job("a", "3g.40gb", 0.5)], sites=[partitioned(MIXED_LAYOUT)]
    )
    r = sim.simulate(scenario, StartOnSlices(MIXED_LAYOUT, 1))
    row = r.jobs.iloc[0]
    duration_s = row["end_s"] - row["start_s"]
    share = mig.sm_share(A100, "3g.40gb")  # 42 of 108 SMs
    assert share == pytest.approx(42 / 108)
    expected_kwh = share * (estimate(A100, "mixed").power_w + HOST_W) * PUE * duration_s / 3.6e6
    assert row["energy_kwh"] == pytest.approx(expected_kwh, rel=1e-12)
    assert row["gpu_h"] == pytest.approx(share * duration_s / 3600.0, rel=1e-12)
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )


def random_jobs(rng: np.random.Generator, n: int) -> list[dict]:
    kinds = rng.choice(["3g.40gb", "2g.20gb", "whole", "share"], size=n)
    return [
        {
            **job(f"j{i}", k if k in MIXED_LAYOUT else "", float(rng.uniform(0.05, 1.0))),
            "submit_time": float(rng.uniform(0, 6 * 3600)),
            "gpu_milli": 300 if k == "share" else 1000,
            "profile": str(rng.choice(["mixed", "compute-bound", "memory-bound"])),
        }
        for i, k in enumerate(kinds)
    ]


@pytest.mark.parametrize("power_off", [False, True])
def test_work_is_conserved_and_jobs_and_idle_energy_add_up_to_the_sites(
    tmp_path, monkeypatch, power_off
):
    more = {"gpus_per_node": 1}
    if power_off:
        more["power_off"] = {"idle_s": 600.0, "wake_s": 300.0, "off_w": 10.0}
    scenario = make_scenario(
        tmp_path,
        random_jobs(np.random.default_rng(7), 40),
        sites=[partitioned(MIXED_LAYOUT, count=2, **more)],
        duration_h=96,
    )
    r, done = run_recording_work(scenario, StartOnSlices(MIXED_LAYOUT, 2), monkeypatch)
    jobs = r.jobs
    assert (jobs["state"] == "completed").all()
    sliced = jobs["mig_profile"] != ""
    assert sliced.sum() > 10 and (jobs.loc[sliced, "gpu_model"] == A100).all()
    assert (jobs.loc[~sliced, "gpu_model"] == H100).all()
    for row in jobs.itertuples():  # every job did exactly its work
        assert done[row.job_id] == pytest.approx(row.work_gpu_h * 3600.0, rel=1e-9)
    assert r.power["busy_gpus"].max() <= 4
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-9
    )
    if power_off:
        assert (r.events["kind"] == "wake").sum() > 0


def test_a_suspended_mig_job_holds_its_slice_until_its_checkpoint_is_written(tmp_path):
    jobs = [job("a", "3g.40gb", 2.0, interruptible=True, checkpoint_gb=100.0)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(["3g.40gb"])])
    h = PolicyHarness(scenario).advance(0.0)
    h.apply([Start(h.job("a"), "a")]).advance(600.0).apply([Suspend(h.job("a"))])
    written_s = 600.0 + 100.0 / scenario.sites[0].checkpoint_write_gbps
    h.advance(written_s - 1.0)
    with pytest.raises(PolicyError, match=r"free MIG slices: A100-80GB: 0 3g.40gb"):
        h.apply([sim.api.Resume(h.job("a"), "a")])
    h.advance(written_s + 1.0).apply([sim.api.Resume(h.job("a"), "a")])
    assert h.job("a").state == "running"


# --- input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "model", "message"),
    [
        (["4g.40gb", "4g.40gb"], A100, "4g.40gb allows at most 1 instance(s) per GPU, got 2"),
        (["1g.5gb"], A100, "unknown MIG profile '1g.5gb'"),
        (["1g.10gb"], "V100", "GPU model 'V100' does not support MIG"),
        ([], A100, "list at least one profile"),
    ],
)
def test_a_bad_layout_is_one_line_naming_the_site_the_model_and_the_layout(layout, model, message):
    with pytest.raises(ScenarioError) as e:
        make_scenario(sites=[site(gpus=[{"model": model, "count": 2, "mig": layout}])])
    text = str(e.value)
    assert "\n" not in text
    assert "site 'a'" in text and model in text and f"mig layout {layout}" in text
    assert message in text


def test_a_service_on_whole_gpus_cannot_use_a_partitioned_pool(tmp_path):
    """Replicas on whole GPUs need whole GPUs; replicas on slices declare a `mig_profile`
    (tests/engine/test_service_levers.py)."""
    with pytest.raises(ScenarioError, match=r"services\[0\].gpu: .* needs whole A100-80GB GPUs"):
        make_scenario(
            tmp_path,
            [job("a", "1g.10gb", 0.5)],
            sites=[partitioned(SEVEN_1G)],
            services=[
                {
                    "name": "chat",
                    "model": "Llama-3.1-8B-Instruct",
                    "gpu": A100,
                    "gpus_per_replica": 1,
                    "sites": ["a"],
                    "replicas": {"a": 0},
                    "slo": {"ttft_ms": 1000, "tpot_ms": 100},
                    "requests": {"rate_per_s": 1.0},
                }
            ],
        )


@pytest.mark.parametrize(
    ("cell", "gpus", "milli", "message"),
    [
        ("9g.99gb", 1, 1000, "mig_profile must be a MIG profile"),
        ("3g.40gb", 2, 1000, "mig_profile needs gpus = 1 and gpu_milli 1000"),
        ("3g.40gb", 1, 500, "mig_profile needs gpus = 1 and gpu_milli 1000"),
    ],
)
def test_a_bad_mig_profile_is_one_line_naming_the_file_line_and_value(
    tmp_path, cell, gpus, milli, message
):
    path = write_jobs(
        tmp_path / "jobs.csv",
        [job("ok", "1g.10gb", 1.0), {**job("bad", cell, 1.0), "gpus": gpus, "gpu_milli": milli}],
    )
    with pytest.raises(TraceError) as e:
        scenario_jobs(path, make_scenario())
    text = str(e.value)
    assert "\n" not in text
    assert "jobs.csv:3:" in text and message in text and repr(cell) in text


# --- kit-based policies and the engine's queries place MIG jobs -----------------------------


def test_run_now_places_mig_jobs_on_free_slices_and_the_eighth_waits(tmp_path):
    jobs = [job(f"m{i}", "1g.10gb", 1.0) for i in range(8)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)], duration_h=48)
    result = sim.simulate(scenario, "run_now").jobs.set_index("job_id")
    assert (result["state"] == "completed").all()
    starts = result["start_s"].sort_values().to_numpy()
    assert (starts[:7] == 0).all() and starts[7] > 0  # seven slices, the eighth job waits
    assert (result["gpu_model"] == A100).all()
    assert result.loc["m0", "end_s"] == pytest.approx(slice_runtime_s(1.0, "1g.10gb"))


def test_a_mig_job_no_partitioned_pool_offers_is_rejected_at_arrival(tmp_path):
    jobs = [job("big", "7g.80gb", 1.0), job("ok", "1g.10gb", 1.0)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G)], duration_h=48)
    result = sim.simulate(scenario, "run_now").jobs.set_index("job_id")
    assert result.loc["big", "state"] == "rejected"
    assert "needs a 7g.80gb MIG slice" in result.loc["big", "reason"]
    assert result.loc["ok", "state"] == "completed"


def test_estimates_of_a_pending_mig_job_use_its_slice(tmp_path):
    scenario = make_scenario(
        tmp_path, [job("m", "3g.40gb", 2.0)], sites=[partitioned(MIXED_LAYOUT)], duration_h=48
    )
    h = PolicyHarness(scenario).advance(0.0)
    runtime_s, energy_kwh = h.state.estimate(h.job("m"), "a")  # no model: its sliced pool
    assert runtime_s == pytest.approx(slice_runtime_s(2.0, "3g.40gb"))
    share = mig.sm_share(A100, "3g.40gb")
    active_w = estimate(A100, "mixed").power_w
    assert energy_kwh == pytest.approx(share * (active_w + HOST_W) * PUE * runtime_s / 3.6e6)
    expected_delta_w = share * (active_w - GPU_CATALOG[A100].idle_w)
    assert h.state.power_delta_w(h.job("m"), site="a") == pytest.approx(expected_delta_w)


@pytest.mark.parametrize("policy", ["forecast_site", "space_time", "lowest_carbon_site"])
def test_space_shifting_policies_put_mig_jobs_on_slices(tmp_path, policy):
    jobs = [job(f"m{i}", "3g.40gb", 0.5) for i in range(3)]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT)], duration_h=48)
    result = sim.simulate(scenario, policy).jobs
    assert (result["state"] == "completed").all() and (result["gpu_model"] == A100).all()


def test_a_whole_gpu_job_larger_than_every_unpartitioned_pool_is_refused(tmp_path):
    # 8 partitioned A100s hold only MIG jobs: the largest pool for whole GPUs is the 2 H100s
    jobs = [{**job("big", "", 1.0), "gpus": 4}]
    scenario = make_scenario(tmp_path, jobs, sites=[partitioned(SEVEN_1G, count=8)])
    with pytest.raises(TraceError, match="gpus must be at most 2 .the largest GPU pool"):
        sim.simulate(scenario, "run_now")


def test_a_fleet_of_only_partitioned_gpus_runs_mig_jobs(tmp_path):
    # no pool of whole GPUs (largest 0): a MIG job's one GPU is a slice, not a whole GPU
    only_mig = site(gpus=[{"model": A100, "count": 1, "mig": MIXED_LAYOUT}])
    jobs = [job("m", "3g.40gb", 0.5), {**job("whole", "", 0.5), "gpus": 1}]
    scenario = make_scenario(tmp_path, jobs[:1], sites=[only_mig], duration_h=48)
    assert (sim.simulate(scenario, "run_now").jobs["state"] == "completed").all()
    scenario = make_scenario(tmp_path, jobs, sites=[only_mig], duration_h=48)
    with pytest.raises(TraceError, match="gpus must be at most 0 .the largest GPU pool"):
        sim.simulate(scenario, "run_now")


@pytest.mark.parametrize("policy", ["dr_uniform_cap", "dr_pause"])
def test_demand_response_strategies_run_mig_and_shared_jobs(tmp_path, policy):
    jobs = [job(f"m{i}", "3g.40gb", 0.5) for i in range(3)]
    jobs += [{**job(f"s{i}", "", 0.5), "gpu_milli": 500} for i in range(3)]
    event = {"site": "a", "start": "2020-06-01T00:30:00Z", "duration_h": 1, "reduction_pct": 20}
    scenario = make_scenario(
        tmp_path, jobs, sites=[partitioned(MIXED_LAYOUT)], duration_h=48, demand_response=[event]
    )
    result = sim.simulate(scenario, policy).jobs.set_index("job_id")
    assert (result["state"] == "completed").all()
    assert (result.loc[[f"m{i}" for i in range(3)], "gpu_model"] == A100).all()
