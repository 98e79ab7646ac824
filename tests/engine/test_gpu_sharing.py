"""GPU sharing in runs: fractional jobs (`gpu_milli` < 1000) co-located on one GPU.

Specification: docs/gpu-sharing.md. A job of `m` milli alone on its GPU progresses at
m / 1000 of the GPU's speed; next to co-located jobs, times `sim.models.sharing.speed_factor`; it
draws m / 1000 of its active power and of the host's, and is charged for that.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim
from policies.kit import FreeGpus, first_come_first_served
from sim.api import Resume, Start, Suspend, SystemState
from sim.errors import PolicyError, TraceError
from sim.models.hardware import GPU_CATALOG, estimate, speed
from sim.models.sharing import gpu_power_w, speed_factor
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, scenario_jobs, site, write_jobs
from tests.engine.recording import run_recording_work

A100 = "A100-80GB"
IDLE_W = GPU_CATALOG[A100].idle_w
HOST_W = 40.0  # tests.conftest's base site
PUE = 1.5


def job(job_id: str, milli: int, work_gpu_h: float, submit_s: float = 0.0, **more) -> dict:
    return {
        "job_id": job_id,
        "submit_time": submit_s,
        "gpus": 1,
        "work_gpu_h": work_gpu_h,
        "gpu_milli": milli,
        "profile": "mixed",
        **more,
    }


def runtime_s(work_gpu_h: float, milli: int, profile: str = "mixed") -> float:
    """Runtime of a job of `milli` alone on an A100-80GB, s."""
    return work_gpu_h * 3600.0 / (milli / 1000 * speed(A100, profile))


class LedgerChecked:
    """Run-now (with backfilling) that checks the GPU ledger at every decision: no shared
    GPU holds more than 1000 milli, no pool more GPUs than it has, and the milli on shared
    GPUs is the milli of the fractional jobs running there."""

    tick_s = 600.0

    def __init__(self) -> None:
        self.decisions = 0
        self.most_held = 0
        """The most milli seen on one shared GPU (above 900: jobs were co-located)."""

    def decide(self, state: SystemState) -> list:
        for name in state.sites:
            shared, free, total = (
                state.shared_gpus(name),
                state.free_gpus(name),
                state.total_gpus(name),
            )
            for model, held in shared.items():
                assert all(0 < used <= 1000 for used in held), held
                assert 0 <= free[model] and free[model] + len(held) <= total[model]
                running = [
                    j.gpu_milli
                    for j in state.running
                    if j.site == name and j.gpu_model == model and j.gpu_milli < 1000
                ]
                assert sum(running) == sum(held)
                self.most_held = max([self.most_held, *held])
        self.decisions += 1
        return first_come_first_served(state, backfill=True)


# --- speed ---------------------------------------------------------------------------------


def test_a_job_alone_at_500_milli_runs_at_half_speed_its_trace_runtime(tmp_path):
    # work = share x runtime (the alibaba2023 importer's fractional = "share")
    r = sim.simulate(make_scenario(tmp_path, [job("a", 500, 0.5 * 3.0)]), "run_now")
    assert r.jobs.iloc[0]["end_s"] == pytest.approx(3.0 * 3600.0 / speed(A100, "mixed"))
    assert r.jobs.iloc[0]["gpu_milli"] == 500


def test_two_500_milli_jobs_share_one_gpu_each_at_the_models_speed(tmp_path):
    r = sim.simulate(make_scenario(tmp_path, [job("a", 500, 1.0), job("b", 500, 1.0)]), "run_now")
    expected_s = runtime_s(1.0, 500) / speed_factor(500, 500)
    assert r.jobs["start_s"].tolist() == [0.0, 0.0]
    assert r.jobs["end_s"].tolist() == pytest.approx([expected_s, expected_s])
    assert r.power["busy_gpus"].max() == 1  # one GPU busy, not two
    assert r.jobs["slowdown"].tolist() == pytest.approx([1.19, 1.19])


def test_a_job_speeds_up_when_its_neighbour_leaves(tmp_path):
    # b is short: a runs slowed while b is there, then alone
    r = sim.simulate(make_scenario(tmp_path, [job("a", 500, 2.0), job("b", 500, 0.5)]), "run_now")
    ends = dict(zip(r.jobs["job_id"], r.jobs["end_s"], strict=True))
    together_s = runtime_s(0.5, 500) / speed_factor(500, 500)
    assert ends["b"] == pytest.approx(together_s)
    done_gpu_s = 0.5 * 3600.0  # a did as much as b meanwhile
    assert ends["a"] == pytest.approx(together_s + runtime_s(2.0, 500) * (1 - done_gpu_s / 7200))


def test_a_fractional_job_joins_the_first_shared_gpu_with_room_else_takes_a_free_gpu(tmp_path):
    jobs = [job("a", 600, 1.0), job("b", 600, 1.0), job("c", 400, 1.0), job("d", 300, 1.0)]
    h = PolicyHarness(make_scenario(tmp_path, jobs)).advance(0.0)
    h.apply(Start(h.job(i), "a") for i in "abcd")
    assert h.state.shared_gpus("a") == {A100: [1000, 900]}
    assert h.state.free_gpus("a") == {A100: 2}


# --- work is conserved ---------------------------------------------------------------------


def random_jobs(rng: np.random.Generator, n: int) -> list[dict]:
    milli = rng.choice([100, 250, 300, 500, 700, 900, 1000], size=n)
    return [
        {
            **job(f"j{i}", int(m), float(rng.uniform(0.05, 1.5)), float(rng.uniform(0, 6 * 3600))),
            "gpus": 1 if m < 1000 else int(rng.integers(1, 3)),
            "profile": str(rng.choice(["mixed", "compute-bound", "memory-bound"])),
        }
        for i, m in enumerate(milli)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_co_location_conserves_work(tmp_path, monkeypatch, seed):
    jobs = random_jobs(np.random.default_rng(seed), 40)
    policy = LedgerChecked()
    shared = make_scenario(tmp_path, jobs, duration_h=96)
    r, done_gpu_s = run_recording_work(shared, policy, monkeypatch)
    assert policy.decisions > 40 and policy.most_held > 900
    assert (r.jobs["state"] == "completed").all()
    for _, row in r.jobs.iterrows():  # every job did exactly its work
        assert done_gpu_s[row["job_id"]] == pytest.approx(row["work_gpu_h"] * 3600.0, rel=1e-9)
    assert (r.jobs["gpu_milli"] < 1000).sum() > 20
    # GPU time adds up: the jobs' GPU-hours (a share for a fractional job) are at most the
    # busy GPUs' (the share of a shared GPU that no job holds is idle)
    p = r.power
    t_next = np.append(p["time_s"].to_numpy()[1:], 96 * 3600.0)
    busy_gpu_h = float(np.sum(p["busy_gpus"] * (t_next - p["time_s"]))) / 3600.0
    assert r.jobs["gpu_h"].sum() <= busy_gpu_h * (1 + 1e-9)
    # jobs' energies and the idle energy add up to the site's
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-9
    )
    # the same jobs on whole GPUs complete too, with the same work
    whole = make_scenario(tmp_path, [{**j, "gpu_milli": 1000} for j in jobs], duration_h=96)
    monkeypatch.undo()
    rw, done_whole = run_recording_work(whole, "run_now", monkeypatch)
    assert (rw.jobs["state"] == "completed").all()
    assert rw.jobs["work_gpu_h"].sum() == pytest.approx(r.jobs["work_gpu_h"].sum(), rel=1e-12)
    assert sum(done_whole.values()) == pytest.approx(sum(done_gpu_s.values()), rel=1e-9)


# --- power and energy ----------------------------------------------------------------------


def test_a_shared_gpus_draw_follows_the_model(tmp_path):
    jobs = [job("a", 500, 1.0, profile="compute-bound"), job("b", 250, 1.0, profile="memory-bound")]
    r = sim.simulate(make_scenario(tmp_path, jobs), "run_now")
    active = {p: estimate(A100, p).power_w for p in ("compute-bound", "memory-bound")}
    shared_w = gpu_power_w(IDLE_W, [(500, active["compute-bound"]), (250, active["memory-bound"])])
    at_start = r.power[r.power["time_s"] == 0.0].iloc[-1]
    assert at_start["it_w"] == pytest.approx(3 * IDLE_W + 4 * HOST_W + shared_w, rel=1e-12)
    assert at_start["busy_gpus"] == 1


def test_a_fractional_job_is_charged_its_share_of_its_gpu_and_host(tmp_path):
    r = sim.simulate(make_scenario(tmp_path, [job("a", 250, 0.25)]), "run_now")
    row = r.jobs.iloc[0]
    duration_s = row["end_s"] - row["start_s"]
    expected_kwh = 0.25 * (estimate(A100, "mixed").power_w + HOST_W) * PUE * duration_s / 3.6e6
    assert row["energy_kwh"] == pytest.approx(expected_kwh, rel=1e-12)
    assert row["gpu_h"] == pytest.approx(0.25 * duration_s / 3600.0, rel=1e-12)
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )


def test_suspending_a_fractional_job_keeps_its_share_until_its_checkpoint_is_written(tmp_path):
    jobs = [job("a", 500, 4.0, interruptible=True, checkpoint_gb=100.0), job("b", 500, 4.0)]
    scenario = make_scenario(tmp_path, jobs)
    h = PolicyHarness(scenario).advance(0.0)
    h.apply([Start(h.job("a"), "a"), Start(h.job("b"), "a")])
    h.advance(600.0).apply([Suspend(h.job("a"))])
    assert h.state.shared_gpus("a") == {A100: [1000]}  # a writes on its share
    written_s = 600.0 + 100.0 / scenario.sites[0].checkpoint_write_gbps
    h.advance(written_s)
    assert h.state.shared_gpus("a") == {A100: [500]}
    # b ran slowed next to a until the write ended, then alone
    alone_rate = 0.5 * speed(A100, "mixed")
    done_gpu_s = alone_rate * speed_factor(500, 500) * written_s
    end_s = written_s + (4.0 * 3600.0 - done_gpu_s) / alone_rate
    h.advance(end_s + 1.0)
    assert h.times("b")[1] == pytest.approx(end_s, rel=1e-12)


class SuspendAndResume:
    """Starts every job, suspends `victim` at `at_s`, resumes it when it fits again."""

    tick_s = 900.0

    def __init__(self, victim: str, at_s: float) -> None:
        self.victim, self.at_s, self.suspended = victim, at_s, False

    def decide(self, state: SystemState) -> list:
        actions = first_come_first_served(state, backfill=True)
        if not self.suspended and state.now_s >= self.at_s:
            self.suspended = True
            return [*actions, *(Suspend(j) for j in state.running if j.id == self.victim)]
        free = FreeGpus(state)
        for a in actions:
            free.book(a)
        resumes = [Resume(j, "a") for j in state.suspended]
        return [*actions, *(r for r in resumes if free.book(r))]


def test_jobs_energies_add_up_to_the_sites_through_suspend_and_resume(tmp_path):
    jobs = [
        job("a", 300, 2.0, interruptible=True, checkpoint_gb=200.0),
        job("b", 700, 3.0),
        job("c", 500, 1.0, submit_s=1000.0),
        job("d", 1000, 2.0, submit_s=1500.0),
    ]
    r = sim.simulate(make_scenario(tmp_path, jobs), SuspendAndResume("a", 1800.0))
    assert (r.jobs["state"] == "completed").all()
    assert (r.events["kind"] == "resume").sum() == 1
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )


def test_with_power_off_a_shared_gpu_wakes_a_node_once_and_energies_still_add_up(tmp_path):
    powered = site(
        gpus=[{"model": A100, "count": 8}],
        gpus_per_node=4,
        power_off={"idle_s": 600.0, "wake_s": 300.0, "off_w": 10.0},
    )
    jobs = [job(f"j{i}", 250, 0.2, submit_s=3600.0 + 60.0 * i) for i in range(4)]
    r = sim.simulate(make_scenario(tmp_path, jobs, sites=[powered], duration_h=6), "run_now")
    assert (r.events["kind"] == "wake").sum() == 1  # the first job wakes a node, boot 300 s
    assert r.power["busy_gpus"].max() == 1
    # the jobs that join while the node boots wait for it too: all compute from 3900 s
    together_s = runtime_s(0.2, 250) / speed_factor(250, 750)
    assert r.jobs["end_s"].tolist() == pytest.approx([3900.0 + together_s] * 4, rel=1e-12)
    s = r.summary
    assert s["energy_jobs_kwh"] + s["energy_idle_kwh"] == pytest.approx(
        s["energy_facility_kwh"], rel=1e-12
    )


# --- policies -------------------------------------------------------------------------------


def test_first_come_first_served_never_over_commits_shared_gpus(tmp_path):
    jobs = [job(f"j{i}", 600, 1.0) for i in range(5)] + [job("small", 400, 1.0)]
    h = PolicyHarness(make_scenario(tmp_path, jobs)).advance(0.0)
    actions = first_come_first_served(h.state, backfill=True)
    h.apply(actions)  # checked by the engine: PolicyError if one did not fit
    assert [a.job.id for a in actions] == ["j0", "j1", "j2", "j3", "small"]
    assert h.state.shared_gpus("a") == {A100: [1000, 600, 600, 600]}


def test_a_start_that_does_not_fit_is_refused_before_any_change(tmp_path):
    jobs = [job(f"j{i}", 700, 1.0) for i in range(5)]
    h = PolicyHarness(make_scenario(tmp_path, jobs)).advance(0.0)
    h.apply(Start(h.job(f"j{i}"), "a") for i in range(4))
    with pytest.raises(
        PolicyError,
        match=r"job needs 700 milli-GPU of one model, a has A100-80GB=0 free "
        r"\(milli held on shared GPUs: A100-80GB: 700, 700, 700, 700\)",
    ):
        h.apply([Start(h.job("j4"), "a")])
    assert h.job("j4").state == "pending"
    assert h.job("j4").gpu_milli == 700


# --- input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "gpus", "message"),
    [
        ("0", 1, "gpu_milli must be an integer in 1..1000"),
        ("1001", 1, "gpu_milli must be an integer in 1..1000"),
        ("2.5", 1, "gpu_milli must be an integer in 1..1000"),
        ("half", 1, "gpu_milli must be an integer in 1..1000"),
        ("500", 2, "gpu_milli below 1000 needs gpus = 1"),
    ],
)
def test_a_bad_gpu_milli_is_one_line_naming_the_file_line_and_value(tmp_path, milli, gpus, message):
    path = write_jobs(
        tmp_path / "jobs.csv",
        [job("ok", 500, 1.0), {**job("bad", 500, 1.0), "gpu_milli": milli, "gpus": gpus}],
    )
    with pytest.raises(TraceError) as e:
        scenario_jobs(path, make_scenario())
    text = str(e.value)
    assert "\n" not in text
    assert "jobs.csv:3:" in text and message in text and repr(milli) in text


def test_an_empty_gpu_milli_means_whole_gpus(tmp_path):
    jobs = [job("a", 500, 1.0), {**job("b", 1, 1.0), "gpu_milli": ""}]
    path = write_jobs(tmp_path / "jobs.csv", jobs)
    table = scenario_jobs(path, make_scenario())
    assert table.gpu_milli.tolist() == [500, 1000]
    again = write_jobs(tmp_path / "again.csv", table.to_frame(["a"]).to_dict("records"))
    assert scenario_jobs(again, make_scenario()).equals(table)


def test_of_the_jobs_sharing_a_gpu_only_the_last_to_end_frees_it_in_expected_ends(tmp_path):
    jobs = [job("long", 500, 2.0), job("short", 500, 0.5), job("whole", 1000, 1.0)]
    h = PolicyHarness(make_scenario(tmp_path, jobs)).advance(0.0)
    h.apply(Start(h.job(i), "a") for i in ("long", "short", "whole"))
    ends, gpus = h.state.expected_ends("a", A100)
    assert gpus == [1, 0, 1]
    assert ends[0] > ends[1]


def test_the_alibaba2023_importer_keeps_gpu_milli_with_fractional_share(tmp_path):
    from sim.workload.importers import import_trace

    trace = tmp_path / "openb_pod_list_test.csv"
    trace.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "p0,1,1,1,460,,LS,Running,0,7200,0\n"
        "p1,1,1,2,500,,LS,Running,10,3610,10\n"
        "p2,1,1,1,1000,,LS,Running,20,3620,20\n"
    )
    shared, _ = import_trace("alibaba2023", trace, fractional="share")
    jobs = shared.set_index("job_id")
    assert jobs["gpu_milli"].to_dict() == {"p0": 460, "p1": 1000, "p2": 1000}
    assert jobs.loc["p0", "work_gpu_h"] == pytest.approx(0.46 * 2.0)
    rounded, _ = import_trace("alibaba2023", trace)
    assert rounded["gpu_milli"].isna().all()  # empty: whole GPUs
    path = tmp_path / "jobs.csv"
    shared.to_csv(path, index=False)
    r = sim.simulate(make_scenario(tmp_path, duration_h=6, workload={"file": str(path)}))
    p0 = r.jobs.set_index("job_id").loc["p0"]
    assert p0["end_s"] - p0["start_s"] == pytest.approx(7200.0 / speed(A100, "mixed"))


def test_the_interference_is_a_scenario_setting(tmp_path):
    # Two 500-milli jobs share one GPU: each runs at 1 / (1 + slowdown_full) of its speed alone.
    jobs = [job("a", 500, 1.0), job("b", 500, 1.0)]
    alone_s = 1.0 * 3600 / 0.5
    for slowdown in (0.0, 0.19, 0.5):
        scenario = make_scenario(tmp_path, jobs, sharing={"slowdown_full": slowdown})
        ends = sim.simulate(scenario, "run_now").jobs["end_s"]
        assert ends.tolist() == pytest.approx([alone_s * (1 + slowdown)] * 2)
