"""The engine's semantics, as a specification: one small scenario per rule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

import sim
from sim.api import Defer, Migrate, Reject, Resume, SetCap, Start, Suspend
from sim.engine.build import build_engine
from sim.models.hardware import GPU_CATALOG, PROFILES, estimate, speed
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

A100 = GPU_CATALOG["A100-80GB"]
HOST_W, PUE = 40.0, 1.5


def job(job_id="j1", submit_time=0.0, gpus=1, work_gpu_h=1.0, **kw):
    return {
        "job_id": job_id,
        "submit_time": submit_time,
        "gpus": gpus,
        "work_gpu_h": work_gpu_h,
        "profile": "compute-bound",
        **kw,
    }


def log_of(
    results,
    kinds=(
        "submit",
        "start",
        "finish",
        "suspend",
        "resume",
        "defer",
        "ready",
        "reject",
        "migrate",
        "unfinished",
    ),
):
    ev = results.events
    ev = ev[ev["kind"].isin(kinds)]
    return [(k, j, t) for k, j, t in zip(ev["kind"], ev["job"], ev["time_s"], strict=True)]


@dataclass
class Scripted:
    """Runs jobs as they come (run_now), and applies `script[t]` actions at tick times."""

    script: dict[float, object] = field(default_factory=dict)
    tick_s: float = 600.0
    auto_start: bool = True

    def decide(self, state):
        actions = list(self.script.pop(state.now_s, lambda s: [])(state))
        if self.auto_start:
            started = {a.job for a in actions if isinstance(a, (Start, Reject, Defer))}
            for j in state.pending:
                if j not in started and state.free_gpus("a")["A100-80GB"] >= j.gpus:
                    actions.append(Start(j, "a"))
        return actions


def test_a_job_runs_for_its_work_divided_by_its_speed(tmp_path):
    r = sim.simulate(make_scenario(tmp_path, [job(work_gpu_h=2.0, gpus=2)]), "run_now")
    runtime_s = 2.0 * 3600 / (2 * speed("A100-80GB", "compute-bound"))
    assert log_of(r) == [("submit", "j1", 0.0), ("start", "j1", 0.0), ("finish", "j1", runtime_s)]


def test_jobs_queue_when_gpus_are_busy_and_start_when_freed(tmp_path):
    jobs = [job("big", gpus=4, work_gpu_h=4.0), job("small", submit_time=60.0)]
    r = sim.simulate(make_scenario(tmp_path, jobs), "run_now")
    assert log_of(r) == [
        ("submit", "big", 0.0),
        ("start", "big", 0.0),
        ("submit", "small", 60.0),
        ("finish", "big", 3600.0),
        ("start", "small", 3600.0),
        ("finish", "small", 7200.0),
    ]
    assert r.jobs.set_index("job_id").loc["small", "wait_h"] == pytest.approx(59 / 60)


def test_job_energy_with_a_cap_change_mid_run_matches_the_hand_computed_value(tmp_path):
    cap_w = 200.0
    script = {1800.0: lambda s: [SetCap(s.running[0], cap_w)]}
    r = sim.simulate(make_scenario(tmp_path, [job(work_gpu_h=1.0)]), Scripted(script))
    full = estimate("A100-80GB", "compute-bound", None)
    capped = estimate("A100-80GB", "compute-bound", cap_w)
    # Half an hour uncapped does half the work; the other half runs at the capped speed.
    rest_s = 0.5 * 3600 / capped.throughput_fraction
    energy_kwh = (full.power_w + HOST_W) * PUE * 1800 / 3.6e6 + (
        capped.power_w + HOST_W
    ) * PUE * rest_s / 3.6e6
    row = r.jobs.iloc[0]
    assert row["end_s"] == pytest.approx(1800 + rest_s, rel=1e-12)
    assert row["energy_kwh"] == pytest.approx(energy_kwh, rel=1e-12)
    assert row["carbon_kg"] == pytest.approx(energy_kwh * 300 / 1000, rel=1e-12)
    assert row["slowdown"] == pytest.approx((1800 + rest_s) / 3600)


def test_a_site_cap_applies_to_running_jobs_and_later_starts(tmp_path):
    script = {0.0: lambda s: [SetCap("a", 150.0)]}
    r = sim.simulate(
        make_scenario(tmp_path, [job("x"), job("y", submit_time=10.0)]), Scripted(script)
    )
    tf = estimate("A100-80GB", "compute-bound", 150.0).throughput_fraction
    ends = r.jobs.set_index("job_id")["end_s"]
    assert ends["x"] == pytest.approx(3600 / tf)
    assert ends["y"] == pytest.approx(10 + 3600 / tf)


def test_suspend_keeps_progress_and_resume_finishes_the_rest(tmp_path):
    script = {
        1200.0: lambda s: [Suspend(s.running[0])],
        3000.0: lambda s: [Resume(s.suspended[0], "a")],
    }
    jobs = [job(interruptible=True)]
    r = sim.simulate(make_scenario(tmp_path, jobs), Scripted(script))
    assert log_of(r) == [
        ("submit", "j1", 0.0),
        ("start", "j1", 0.0),
        ("suspend", "j1", 1200.0),
        ("resume", "j1", 3000.0),
        ("finish", "j1", 3000.0 + 2400.0),
    ]
    assert r.jobs.iloc[0]["gpu_h"] == pytest.approx(1.0)


def test_defer_hides_a_job_until_its_time(tmp_path):
    script = {0.0: lambda s: [Defer(s.pending[0], 5000.0)]}
    r = sim.simulate(make_scenario(tmp_path, [job()]), Scripted(script))
    assert log_of(r) == [
        ("submit", "j1", 0.0),
        ("defer", "j1", 0.0),
        ("ready", "j1", 5000.0),
        ("start", "j1", 5000.0),
        ("finish", "j1", 8600.0),
    ]


def test_a_rejected_job_ends_rejected_with_its_reason(tmp_path):
    script = {0.0: lambda s: [Reject(s.pending[0], "too dirty")]}
    r = sim.simulate(make_scenario(tmp_path, [job()]), Scripted(script))
    row = r.jobs.iloc[0]
    assert (row["state"], row["reason"]) == ("rejected", "too dirty")
    assert r.summary["jobs_rejected"] == 1


def test_jobs_still_running_at_the_horizon_are_unfinished_and_charged_until_then(tmp_path):
    r = sim.simulate(make_scenario(tmp_path, [job(work_gpu_h=48.0)]), "run_now")
    row = r.jobs.iloc[0]
    assert row["state"] == "unfinished" and math.isnan(row["end_s"])
    assert row["gpu_h"] == pytest.approx(24.0)
    assert r.summary["jobs_unfinished"] == 1


def test_only_running_jobs_keep_run_state(tmp_path):
    """Memory at millions of jobs: a job's site, pool, speed, draw and segment are kept
    while it runs, not after."""
    jobs = [job("done", work_gpu_h=1.0), job("suspended", interruptible=True)]
    jobs.append(job("running", work_gpu_h=48.0))
    policy = Scripted({600.0: lambda s: [Suspend(s.running[1])]})
    engine = build_engine(make_scenario(tmp_path, jobs), policy)
    engine.run()
    assert [engine.jobs.job_id[j] for j in engine.runs.live] == ["running"]


def test_migrate_moves_a_job_with_its_progress(tmp_path):
    sites = [site(), site(name="b", gpus=[{"model": "H100-SXM", "count": 2}])]
    script = {600.0: lambda s: [Migrate(s.running[0], "b")]}
    r = sim.simulate(
        make_scenario(tmp_path, [job(interruptible=True)], sites=sites), Scripted(script)
    )
    h100 = speed("H100-SXM", "compute-bound")
    row = r.jobs.iloc[0]
    assert (row["site"], row["gpu_model"]) == ("b", "H100-SXM")
    assert row["end_s"] == pytest.approx(600 + 3000 / h100)


@pytest.mark.parametrize(
    "action, message",
    [
        (lambda s: [Start(s.pending[0], "nowhere")], "unknown site 'nowhere'"),
        (
            lambda s: [Start(s.pending[0], "a", gpu_cap_w=50.0)],
            "outside A100-80GB's settable range",
        ),
        (lambda s: [Start(s.pending[0], "a", gpu_model="V100")], "has no V100 GPUs"),
        (lambda s: [Suspend(s.pending[0])], "is pending, not running"),
        (lambda s: [Defer(s.pending[0], 0.0)], "until_s must be after now"),
        (lambda s: [Start(s.pending[0], "a"), Start(s.pending[0], "a")], "is running, not pending"),
        (lambda s: ["start everything"], "not an action"),
    ],
)
def test_invalid_actions_raise_policy_error_naming_the_action(tmp_path, action, message):
    policy = Scripted({0.0: action}, auto_start=False)
    with pytest.raises(sim.PolicyError, match=message):
        sim.simulate(make_scenario(tmp_path, [job()]), policy)


@dataclass(frozen=True, slots=True)
class LabelledStart(Start):
    """A policy's own kind of Start, carrying a label for its log."""

    label: str = ""


def test_a_subclass_of_an_action_type_is_carried_out_as_that_action(tmp_path):
    policy = Scripted({0.0: lambda s: [LabelledStart(s.pending[0], "a", label="now")]})
    r = sim.simulate(make_scenario(tmp_path, [job()]), policy)
    runtime_s = 3600 / speed("A100-80GB", "compute-bound")
    assert log_of(r) == [("submit", "j1", 0.0), ("start", "j1", 0.0), ("finish", "j1", runtime_s)]


def test_suspending_a_job_that_is_not_interruptible_is_an_error(tmp_path):
    policy = Scripted({600.0: lambda s: [Suspend(s.running[0])]})
    with pytest.raises(sim.PolicyError, match="not interruptible"):
        sim.simulate(make_scenario(tmp_path, [job()]), policy)


def test_more_gpus_than_free_is_an_error(tmp_path):
    policy = Scripted({0.0: lambda s: [Start(j, "a") for j in s.pending]}, auto_start=False)
    with pytest.raises(sim.PolicyError, match="needs 4 GPUs"):
        sim.simulate(make_scenario(tmp_path, [job("x", gpus=2), job("y", gpus=4)]), policy)


def test_state_estimate_matches_the_run(tmp_path):
    seen = {}

    @dataclass
    class Probe:
        def decide(self, state):
            for j in state.pending:
                seen[j.id] = state.estimate(j, "a")
                return [Start(j, "a")]
            return []

    r = sim.simulate(make_scenario(tmp_path, [job(work_gpu_h=3.0)]), Probe())
    runtime_s, energy_kwh = seen["j1"]
    row = r.jobs.iloc[0]
    assert runtime_s == pytest.approx(row["end_s"])
    assert energy_kwh == pytest.approx(row["energy_kwh"])


def test_site_power_counts_host_overhead_idle_gpus_and_running_jobs(tmp_path):
    r = sim.simulate(make_scenario(tmp_path, [job(gpus=1)]), "run_now")
    it_w = r.power["it_w"].tolist()
    idle, host = A100.idle_w, HOST_W
    active = estimate("A100-80GB", "compute-bound").power_w
    assert it_w == pytest.approx([3 * idle + active + 4 * host, 4 * idle + 4 * host])
    assert PROFILES["compute-bound"].power_frac * A100.max_cap_w == active


def test_migrating_a_job_whose_cap_the_destination_gpu_cannot_take_is_an_error(tmp_path):
    sites = [site(), site(name="b", gpus=[{"model": "H100-SXM", "count": 2}])]
    script = {
        0.0: lambda s: [Start(s.pending[0], "a", gpu_cap_w=150.0)],
        600.0: lambda s: [Migrate(s.running[0], "b")],
    }
    with pytest.raises(sim.PolicyError, match="cap 150.0 W is outside H100-SXM's settable range"):
        sim.simulate(
            make_scenario(tmp_path, [job(interruptible=True)], sites=sites),
            Scripted(script, auto_start=False),
        )


def test_a_job_no_site_can_ever_hold_is_rejected_with_a_reason_when_asked(tmp_path):
    scenario = make_scenario(tmp_path, [job("huge", gpus=16), job("ok", submit_time=5.0)])
    raw = scenario.model_dump(mode="json", exclude_none=True)
    raw["workload"]["oversized"] = "reject"
    r = sim.simulate(sim.config.scenario_from_dict(raw), "run_now")
    states = r.jobs.set_index("job_id")[["state", "reason"]]
    assert states.loc["huge"].tolist() == ["rejected", "needs 16 GPUs; the largest pool has 4"]
    assert states.loc["ok", "state"] == "completed"


def test_embodied_carbon_is_charged_per_allocated_or_per_installed_gpu_hour(tmp_path):
    jobs = [job(gpus=2, work_gpu_h=6.0)]  # 3 h on 2 of the 4 GPUs
    per_gpu_h = A100.embodied_kg_per_gpu_h
    allocated = sim.simulate(make_scenario(tmp_path, jobs), "run_now").summary
    installed = sim.simulate(make_scenario(tmp_path, jobs, embodied="installed"), "run_now")
    assert allocated["carbon_embodied_kg"] == pytest.approx(2 * 3 * per_gpu_h)
    assert installed.summary["carbon_embodied_kg"] == pytest.approx(4 * 24 * per_gpu_h)
    assert installed.jobs["embodied_kg"].sum() == pytest.approx(2 * 3 * per_gpu_h)


def test_an_action_that_fails_its_checks_changes_nothing(tmp_path):
    h = PolicyHarness(make_scenario(tmp_path, [job("x"), job("y", interruptible=True)]))
    h.advance(0.0)
    x, y = h.job("x"), h.job("y")
    with pytest.raises(sim.PolicyError, match="outside A100-80GB's settable range"):
        h.apply([Start(x, "a", gpu_cap_w=10_000.0)])
    assert [j.id for j in h.state.pending] == ["x", "y"] and x.state == "pending"
    h.apply([Start(x, "a"), Start(y, "a")])
    h.advance(600.0)
    h.apply([Suspend(y)])
    with pytest.raises(sim.PolicyError, match="outside A100-80GB's settable range"):
        h.apply([Resume(y, "a", gpu_cap_w=10_000.0)])
    assert [j.id for j in h.state.suspended] == ["y"] and y.state == "suspended"


@pytest.mark.parametrize("pending_only", [False, True])
def test_a_policy_that_acts_on_pending_jobs_only_is_not_asked_with_an_empty_queue(
    tmp_path, pending_only
):
    """Two jobs arrive apart and each starts at once: a policy is asked at both arrivals,
    and at both completions unless it declares `pending_only` (the queue is empty then)."""
    calls = []

    @dataclass
    class Counting:
        def decide(self, state):
            calls.append((state.now_s, len(state.pending)))
            return [Start(j, "a") for j in state.pending]

    Counting.pending_only = pending_only  # type: ignore[attr-defined]
    jobs = [job("first"), job("second", submit_time=7200.0)]
    r = sim.simulate(make_scenario(tmp_path, jobs), Counting())
    arrivals = [(0.0, 1), (7200.0, 1)]
    runtime_s = 3600.0 / speed("A100-80GB", "compute-bound")
    completions = [(runtime_s, 0), (7200.0 + runtime_s, 0)]
    assert calls == (arrivals if pending_only else sorted(arrivals + completions))
    assert r.summary["jobs_completed"] == 2


def test_a_subclass_that_overrides_decide_does_not_inherit_pending_only(tmp_path):
    """`run_now` promises to do nothing with an empty queue; a subclass reading the state
    in its own `decide` is asked at the completion too."""
    from policies.run_now import RunNow

    calls = []

    class Reading(RunNow):
        def decide(self, state):
            calls.append(state.now_s)
            return super().decide(state)

    class Same(RunNow):
        backfill = False

    jobs = [job("only")]
    sim.simulate(make_scenario(tmp_path, jobs), Reading())
    assert calls == [0.0, 3600.0 / speed("A100-80GB", "compute-bound")]
    engine = build_engine(make_scenario(tmp_path, jobs), Same())
    assert engine.hooks.pending_only  # inherited with the `decide` it is about
