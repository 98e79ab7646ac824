"""Demand-response policies (policies/demand_response/), as specifications.

Unit tests drive a real engine by hand (`PolicyHarness`): a site of eight A100-80GB
(PUE 1.5, host 40 W/GPU) runs a compute-bound and a memory-bound 2-GPU job; an event from
1 h to 3 h asks it to stay under a known limit; a third job arrives during the event.
Every action a policy returns is applied with `harness.apply`, which raises `PolicyError`
on an invalid one. End-to-end tests run `sim.simulate` on a busy A100 + H100 site.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import sim
from policies.chain import Chain
from policies.demand_response import DrComplementary, DrFairSlowdown, DrPause, DrUniformCap
from policies.kit import FreeGpus
from sim.api import Migrate, Reject, Resume, SetCap, Start, Suspend
from sim.errors import ScenarioError
from sim.models.hardware import GPU_CATALOG, estimate
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import REPO, make_scenario, run_cli, site

EVENT_START_S, EVENT_END_S = 3600.0, 3 * 3600.0
LATE_S = 5000.0  # the third job arrives during the event
A100 = "A100-80GB"
JOBS = [
    {"job_id": "cb", "submit_time": 0, "gpus": 2, "work_gpu_h": 100.0, "profile": "compute-bound"},
    {
        "job_id": "mb",
        "submit_time": 0,
        "gpus": 2,
        "work_gpu_h": 100.0,
        "profile": "memory-bound",
        "interruptible": True,
        "deadline": 400_000,
    },
    {"job_id": "late", "submit_time": LATE_S, "gpus": 2, "work_gpu_h": 10.0, "profile": "mixed"},
]
# Both jobs running, uncapped: 8 x 40 W host + 4 idle x 50 W + 2 x 380 W + 2 x 280 W = 1840 W
# IT, 2.76 kW facility. The limit asks for 13% less.
LIMIT_KW = 2.4
TARGET_KW = LIMIT_KW * 0.99  # the default 1% margin
POLICIES = [DrUniformCap, DrFairSlowdown, DrComplementary, DrPause]


def dr_scenario(tmp_path, limit_kw, jobs=JOBS, gpus=None, more_sites=()):
    return make_scenario(
        tmp_path,
        jobs,
        sites=[site(gpus=gpus or [{"model": A100, "count": 8}]), *more_sites],
        demand_response=[
            {
                "site": "a",
                "start": "2020-06-01T01:00:00Z",
                "duration_h": 2.0,
                "limit_kw": limit_kw,
                "notice_h": 1.0,
            }
        ],
    )


def started(tmp_path, policy, limit_kw=LIMIT_KW, **kw) -> PolicyHarness:
    """A harness where `policy` started the jobs submitted at 0 (the event is announced, not
    on yet: the plan of run_now passes unchanged)."""
    h = PolicyHarness(dr_scenario(tmp_path, limit_kw, **kw))
    h.advance(1.0)
    actions = policy.decide(h.state)
    assert actions == [Start(h.job("cb"), "a", None, A100), Start(h.job("mb"), "a", None, A100)]
    h.apply(actions)
    return h


def decide(h: PolicyHarness, policy, at_s: float) -> list:
    h.advance(at_s)
    actions = policy.decide(h.state)
    h.apply(actions)  # PolicyError if any action is invalid
    return actions


def fraction(h, job) -> float:
    return h.state.operating_point(job.gpu_model, job.profile, job.cap_w).throughput_fraction


def it_w_with_caps(h, caps: dict) -> float:
    """The site's IT power now if the running jobs had `caps` (job id -> W), W."""
    st = h.state
    return st.site_it_power_kw("a") * 1000.0 + sum(
        st.power_delta_w(h.job(jid), cap) for jid, cap in caps.items()
    )


# --- dr_uniform_cap ----------------------------------------------------------------------


def test_uniform_cap_gives_every_running_gpu_the_highest_equal_cap_that_meets_the_target(
    tmp_path,
):
    policy = DrUniformCap()
    h = started(tmp_path, policy)
    actions = decide(h, policy, EVENT_START_S)
    cb, mb = h.job("cb"), h.job("mb")
    assert [type(a) for a in actions] == [SetCap, SetCap]
    assert [a.target for a in actions] == [cb, mb]
    c = actions[0].watts
    assert actions[1].watts == c and c % 5 == 0 and 100 <= c < 400  # on the 5 W grid
    assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9
    # one grid step more for every GPU would break the target
    assert it_w_with_caps(h, {"cb": c + 5, "mb": c + 5}) * 1.5 / 1000 > TARGET_KW


def test_uniform_cap_to_the_watt(tmp_path):
    policy = DrUniformCap(cap_step_w=1.0)
    h = started(tmp_path, policy)
    c = decide(h, policy, EVENT_START_S)[0].watts
    assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9
    assert it_w_with_caps(h, {"cb": c + 1, "mb": c + 1}) * 1.5 / 1000 > TARGET_KW


def test_uniform_cap_clips_into_each_gpu_models_range(tmp_path):
    # An H100 job and an A100 job, deep limit: the common cap falls below the H100's 200 W
    # minimum, so the H100 job sits at 200 W and the A100 job at the common cap.
    jobs = [
        {
            "job_id": "h",
            "submit_time": 0,
            "gpus": 2,
            "work_gpu_h": 100.0,
            "profile": "compute-bound",
        },
        {
            "job_id": "a",
            "submit_time": 0,
            "gpus": 2,
            "work_gpu_h": 100.0,
            "profile": "compute-bound",
        },
    ]
    gpus = [{"model": "H100-SXM", "count": 2}, {"model": A100, "count": 2}]
    policy = DrUniformCap(margin_pct=0.0)
    h = PolicyHarness(dr_scenario(tmp_path, 1.3, jobs=jobs, gpus=gpus))
    h.advance(1.0)
    h.apply(policy.decide(h.state))
    assert (h.job("h").gpu_model, h.job("a").gpu_model) == ("H100-SXM", A100)
    actions = decide(h, policy, EVENT_START_S)
    caps = {a.target.id: a.watts for a in actions}
    assert caps["h"] == 200.0
    assert 100.0 <= caps["a"] < 200.0
    assert h.state.site_power_kw("a") <= 1.3 + 1e-9


def test_a_job_is_never_capped_above_the_cap_it_had_before_the_event(tmp_path):
    policy = DrUniformCap()
    h = started(tmp_path, policy, limit_kw=2.3)
    h.apply([SetCap(h.job("cb"), 250.0)])  # e.g. an energy-optimal cap set earlier
    assert h.state.site_power_kw("a") > 2.3
    actions = decide(h, policy, EVENT_START_S)
    # cb already sits below the common cap the memory-bound job needs: left alone
    assert [a.target.id for a in actions] == ["mb"]
    assert actions[0].watts > 250.0
    assert h.job("cb").cap_w == 250.0


# --- dr_fair_slowdown ----------------------------------------------------------------------


def test_fair_slowdown_gives_every_job_the_same_throughput_fraction(tmp_path):
    policy = DrFairSlowdown()
    h = started(tmp_path, policy)
    actions = decide(h, policy, EVENT_START_S)
    cb, mb = h.job("cb"), h.job("mb")
    assert [a.target for a in actions] == [cb, mb]
    assert fraction(h, cb) == pytest.approx(fraction(h, mb), abs=0.003)
    assert fraction(h, cb) < 1.0
    # equal slowdowns need unequal watts: the memory-bound job gets the lower cap
    assert mb.cap_w < cb.cap_w
    assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9


# --- dr_complementary ----------------------------------------------------------------------


def test_complementary_caps_the_memory_bound_job_first(tmp_path):
    # A limit 4 W of IT power under the site's draw: the cheapest watts are the
    # memory-bound job's (its draw sits below the top of the cap range).
    full_kw = 1.840 * 1.5
    policy = DrComplementary(margin_pct=0.0)
    h = started(tmp_path, policy, limit_kw=full_kw - 0.004 * 1.5)
    actions = decide(h, policy, EVENT_START_S)
    assert [a.target.id for a in actions] == ["mb"]
    assert h.job("cb").cap_w is None
    assert h.state.site_power_kw("a") <= full_kw - 0.006 + 1e-9


def test_complementary_loses_less_work_than_equal_caps_or_equal_slowdowns(tmp_path):
    lost = {}
    for policy in (DrUniformCap(), DrFairSlowdown(), DrComplementary()):
        h = started(tmp_path, policy)
        decide(h, policy, EVENT_START_S)
        assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9
        lost[type(policy)] = sum(j.gpus * (1.0 - fraction(h, j)) for j in h.state.running)
    assert lost[DrComplementary] < lost[DrUniformCap]
    assert lost[DrComplementary] < lost[DrFairSlowdown]


# --- dr_pause ------------------------------------------------------------------------------


def test_pause_suspends_the_interruptible_job_and_resumes_it_after_the_event(tmp_path):
    policy = DrPause()
    h = started(tmp_path, policy)
    assert decide(h, policy, EVENT_START_S) == [Suspend(h.job("mb"))]
    assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9
    assert decide(h, policy, LATE_S + 1.0) == []  # the late job waits for the paused one
    actions = decide(h, policy, EVENT_END_S + 1.0)
    assert actions == [
        Resume(h.job("mb"), "a", None, A100),  # the paused job first
        Start(h.job("late"), "a", None, A100),
    ]


def test_pause_counts_a_resumed_jobs_full_draw_not_only_the_boot_of_its_node(tmp_path):
    # Four A100s in nodes of two; idle nodes switch off after 60 s. Pausing mb empties a
    # node, which switches off: the site then draws 170 W less. Resuming mb would cost only
    # that node's boot power at first (power_delta_w), but its full draw once the node is
    # up (30 s later, without a decision): it must stay paused.
    power_off = {"idle_s": 60.0, "wake_s": 30.0, "off_w": 10.0}
    scenario = make_scenario(
        tmp_path,
        JOBS[:2],
        sites=[site(gpus=[{"model": A100, "count": 4}], gpus_per_node=2, power_off=power_off)],
        demand_response=[
            {"site": "a", "start": "2020-06-01T01:00:00Z", "duration_h": 2.0, "limit_kw": 2.0}
        ],
    )
    policy = DrPause()
    h = PolicyHarness(scenario)
    h.advance(1.0)
    h.apply(policy.decide(h.state))
    assert decide(h, policy, EVENT_START_S + 1.0) == [Suspend(h.job("mb"))]
    h.advance(EVENT_START_S + 600.0)
    assert h.state.powered_off_gpus("a") == {A100: 2}
    assert decide(h, policy, EVENT_START_S + 601.0) == []
    assert decide(h, policy, EVENT_END_S + 1.0) == [Resume(h.job("mb"), "a", None, A100)]


def test_pause_takes_the_job_with_most_slack_first(tmp_path):
    jobs = [dict(j) for j in JOBS]
    jobs[0].update(interruptible=True, deadline=200_000)  # cb: more slack than mb
    jobs[1].update(deadline=400_000 - 240_000)
    policy = DrPause()
    h = started(tmp_path, policy, jobs=jobs)
    assert decide(h, policy, EVENT_START_S) == [Suspend(h.job("cb"))]


def test_pause_caps_the_rest_uniformly_when_pausing_is_not_enough(tmp_path):
    policy = DrPause()
    h = started(tmp_path, policy, limit_kw=1.8)
    actions = decide(h, policy, EVENT_START_S)
    assert [type(a) for a in actions] == [SetCap, Suspend]
    assert actions[0].target == h.job("cb") and actions[1].job == h.job("mb")
    assert h.state.site_power_kw("a") <= 1.8 * 0.99 + 1e-9

    no_fallback = DrPause(fallback_uniform_cap=False)
    h = started(tmp_path, no_fallback, limit_kw=1.8)
    assert decide(h, no_fallback, EVENT_START_S) == [Suspend(h.job("mb"))]
    assert h.state.site_power_kw("a") > 1.8  # documented: the limit is broken


# --- rules shared by the four policies -------------------------------------------------------


@pytest.mark.parametrize("policy_class", POLICIES, ids=lambda c: c.__name__)
def test_a_start_that_would_break_the_limit_is_held(tmp_path, policy_class):
    policy = policy_class()
    h = started(tmp_path, policy)
    decide(h, policy, EVENT_START_S)
    assert decide(h, policy, LATE_S + 1.0) == []
    assert h.job("late").state == "pending"
    assert h.state.site_power_kw("a") <= TARGET_KW + 1e-9


@pytest.mark.parametrize("policy_class", POLICIES, ids=lambda c: c.__name__)
def test_a_start_that_fits_runs_during_the_event(tmp_path, policy_class):
    policy = policy_class()
    h = started(tmp_path, policy, limit_kw=4.0)  # room for the late job uncapped
    assert decide(h, policy, EVENT_START_S) == []
    assert decide(h, policy, LATE_S + 1.0) == [Start(h.job("late"), "a", None, A100)]
    assert h.state.site_power_kw("a") <= 4.0 * 0.99


def lowest_cap_w(model: str, profile: str, f: float) -> int:
    spec = GPU_CATALOG[model]
    caps = range(int(spec.min_cap_w), int(spec.max_cap_w) + 1)
    return next(c for c in caps if estimate(model, profile, c).throughput_fraction >= f)


def test_a_start_runs_if_everyone_can_still_run_at_the_admission_floor(tmp_path):
    # The limit fits the three jobs exactly with each at 85% of its uncapped throughput
    # (8 x 40 W host, 2 idle GPUs x 50 W, three 2-GPU jobs): above the default floor of
    # 80%, so the late job starts and all three share the power at one common fraction;
    # with a floor of 90% it waits.
    profiles = ("compute-bound", "memory-bound", "mixed")
    it_w = (
        8 * 40
        + 2 * 50
        + sum(2 * estimate(A100, p, lowest_cap_w(A100, p, 0.85)).power_w for p in profiles)
    )
    limit_kw = it_w * 1.5 / 0.99 / 1000
    policy = DrFairSlowdown()
    h = started(tmp_path, policy, limit_kw=limit_kw)
    decide(h, policy, EVENT_START_S)
    actions = decide(h, policy, LATE_S + 1.0)
    late = h.job("late")
    assert actions[0] == Start(late, "a", late.cap_w, A100) and late.cap_w is not None
    assert [a.target.id for a in actions[1:]] == ["cb", "mb"]
    fractions = [fraction(h, j) for j in h.state.running]
    assert max(fractions) - min(fractions) < 0.003
    assert min(fractions) >= 0.85 - 0.003
    assert h.state.site_power_kw("a") <= limit_kw * 0.99 + 1e-9

    strict = DrFairSlowdown(admit_min_fraction=0.9)
    h = started(tmp_path, strict, limit_kw=limit_kw)
    decide(h, strict, EVENT_START_S)
    assert decide(h, strict, LATE_S + 1.0) == []


def test_a_held_start_goes_to_a_site_without_an_event(tmp_path):
    other = site(name="b", lat=48.9, lon=2.3, gpus=[{"model": "V100", "count": 4}])
    policy = DrFairSlowdown()
    h = started(tmp_path, policy, more_sites=[other])
    decide(h, policy, EVENT_START_S)
    assert decide(h, policy, LATE_S + 1.0) == [Start(h.job("late"), "b", None, "V100")]

    stay = DrFairSlowdown(redirect=False)
    h = started(tmp_path, stay, more_sites=[other])
    decide(h, stay, EVENT_START_S)
    assert decide(h, stay, LATE_S + 1.0) == []


@pytest.mark.parametrize("policy_class", [DrUniformCap, DrFairSlowdown, DrComplementary])
def test_caps_are_restored_after_the_event_and_held_jobs_start(tmp_path, policy_class):
    policy = policy_class()
    h = started(tmp_path, policy)
    h.apply([SetCap(h.job("cb"), 350.0)])  # e.g. an energy-optimal cap set before the event
    decide(h, policy, EVENT_START_S)
    assert h.job("cb").cap_w < 350.0 and h.job("mb").cap_w is not None
    decide(h, policy, LATE_S + 1.0)
    actions = decide(h, policy, EVENT_END_S + 1.0)
    assert actions == [
        Start(h.job("late"), "a", None, A100),
        SetCap(h.job("cb"), 350.0),
        SetCap(h.job("mb"), None),
    ]
    assert decide(h, policy, EVENT_END_S + 60.0) == []  # nothing left to restore


def test_a_schedulers_cap_during_an_event_is_held_down_then_restored(tmp_path):
    # In a chain, a member before the DR policy re-caps cb during the event: the DR cap
    # wins while the event lasts, the member's cap is what cb gets back after it.
    policy = DrFairSlowdown()
    h = started(tmp_path, policy)
    h.advance(EVENT_START_S)
    actions = policy.amend(h.state, [SetCap(h.job("cb"), 380.0)])
    h.apply(actions)
    assert SetCap(h.job("cb"), 380.0) not in actions
    assert h.job("cb").cap_w < 380.0
    h.advance(EVENT_END_S + 1.0)
    actions = policy.amend(h.state, [])
    assert SetCap(h.job("cb"), 380.0) in actions


def test_a_job_the_scheduler_suspends_as_the_event_ends_is_not_re_capped(tmp_path):
    policy = DrUniformCap()
    h = started(tmp_path, policy)
    decide(h, policy, EVENT_START_S)
    h.advance(EVENT_END_S + 1.0)
    actions = policy.amend(h.state, [Suspend(h.job("mb"))])
    h.apply(actions)  # no SetCap on the job the plan suspended
    assert actions == [Suspend(h.job("mb")), SetCap(h.job("cb"), None)]


@pytest.mark.parametrize("takes_over", ["resume", "reject"])
def test_a_paused_job_the_scheduler_resumes_or_rejects_is_left_to_it(tmp_path, takes_over):
    policy = DrPause()
    h = started(tmp_path, policy)
    decide(h, policy, EVENT_START_S)
    h.advance(EVENT_END_S + 1.0)
    mb = h.job("mb")
    mine = Resume(mb, "a", None, A100) if takes_over == "resume" else Reject(mb, "over budget")
    actions = policy.amend(h.state, [mine])
    h.apply(actions)
    assert actions == [mine]  # no second Resume of the job


@pytest.mark.parametrize("policy_class", POLICIES, ids=lambda c: c.__name__)
def test_an_infeasible_limit_puts_every_job_at_its_minimum_cap_and_holds_starts(
    tmp_path, policy_class
):
    # 1.0 kW facility is below the site's host and idle power with every GPU at 100 W.
    policy = policy_class()
    h = started(tmp_path, policy, limit_kw=1.0)
    decide(h, policy, EVENT_START_S)
    for job in h.state.running:
        assert job.cap_w == 100.0
    assert decide(h, policy, LATE_S + 1.0) == []


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: DrUniformCap(margin_pct=50.0), "margin_pct"),
        (lambda: DrPause(margin_pct=-1.0), "margin_pct"),
        (lambda: DrFairSlowdown(fraction_step=0.0), "fraction_step"),
        (lambda: DrUniformCap(cap_step_w=0.5), "cap_step_w"),
        (lambda: DrComplementary(step_w=0.5), "step_w"),
        (lambda: DrUniformCap(admit_min_fraction=0.0), "admit_min_fraction"),
        (lambda: DrComplementary(admit_min_fraction=1.5), "admit_min_fraction"),
    ],
)
def test_bad_parameters_are_errors_naming_them(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_registered_names_build_the_policies_and_check_their_parameters():
    assert isinstance(build_policy("dr_uniform_cap", {}), DrUniformCap)
    assert isinstance(build_policy("dr_fair_slowdown", {"margin_pct": 2.0}), DrFairSlowdown)
    assert isinstance(build_policy("dr_complementary", {"step_w": 5.0}), DrComplementary)
    assert isinstance(build_policy("dr_pause", {"fallback_uniform_cap": False}), DrPause)
    with pytest.raises(ScenarioError, match="policy.params.margin"):
        build_policy("dr_pause", {"margin": 1.0})


class Chaos:
    """A scheduler that plans valid but arbitrary actions: run_now's starts (some with a
    cap), suspensions, resumptions, migrations, job and site caps."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def decide(self, state):
        rng, free, out = self.rng, FreeGpus(state), []
        for job in list(state.pending):
            a = free.place(job)
            if a is not None and rng.random() < 0.3:
                spec = state.gpu_spec(a.gpu_model)
                a = Start(
                    job,
                    a.site,
                    float(rng.integers(spec.min_cap_w, spec.max_cap_w + 1)),
                    a.gpu_model,
                )
            if a is not None:
                out.append(a)
        for job in list(state.running):
            r = rng.random()
            if job.interruptible and r < 0.1:
                out.append(Suspend(job))
            elif job.interruptible and r < 0.15:
                other = next(s for s in state.sites if s != job.site)
                if job.cap_w is None and free.place(job, (other,)) is not None:
                    out.append(Migrate(job, other, None))
            elif r < 0.25:
                spec = state.gpu_spec(job.gpu_model)
                out.append(SetCap(job, float(rng.integers(spec.min_cap_w, spec.max_cap_w + 1))))
        for job in list(state.suspended):
            a = free.place(job) if rng.random() < 0.5 else None
            if a is not None:
                out.append(Resume(job, a.site, None, a.gpu_model))
        if rng.random() < 0.05:
            out.append(SetCap(state.sites[0], None if rng.random() < 0.5 else 200.0))
        return out


@pytest.mark.parametrize("seed", range(4))
def test_whatever_a_scheduler_before_it_plans_the_amended_plan_is_valid(tmp_path, seed):
    # Two sites (one powering idle nodes off), events at both, jobs that write checkpoints.
    rng = np.random.default_rng(seed)
    jobs = [
        {
            "job_id": f"j{i}",
            "submit_time": float(rng.uniform(0, 8 * 3600)),
            "gpus": int(rng.choice([1, 2, 4])),
            "work_gpu_h": float(rng.uniform(1, 20)),
            "profile": PROFILES[i % 4],
            "interruptible": bool(rng.random() < 0.6),
            "checkpoint_gb": float(rng.choice([0.0, 20.0])),
            "origin_site": "ab"[i % 2],
        }
        for i in range(30)
    ]
    power_off = {"idle_s": 60.0, "wake_s": 30.0, "off_w": 10.0}
    events = [
        {"site": s, "start": f"2020-06-01T0{h}:00:00Z", "duration_h": 3.0, "reduction_pct": 30.0}
        for s, h in (("a", 2), ("b", 4))
    ]
    scenario = make_scenario(
        tmp_path,
        jobs,
        duration_h=12.0,
        sites=[
            site(gpus=[{"model": A100, "count": 8}, {"model": "V100", "count": 4}]),
            site(
                name="b", gpus=[{"model": A100, "count": 8}], gpus_per_node=4, power_off=power_off
            ),
        ],
        demand_response=events,
    )
    for policy_class in POLICIES:
        s = sim.simulate(scenario, Chain([Chaos(seed), policy_class()])).summary  # no PolicyError
        assert s["jobs_submitted"] == len(jobs)


# --- end to end ----------------------------------------------------------------------------

# A busy A100 + H100 site: eight 2-GPU jobs (the four generic profiles, half interruptible)
# fill 16 of its 20 GPUs for 6-8 h; an event from 2 h to 4 h asks for 30% less than the mean
# power of the hour before its notice; three jobs arrive during it. Everything completes.
PROFILES = ["compute-bound", "memory-bound", "mixed", "inference"]
BUSY_JOBS = [
    {
        "job_id": f"r{i}",
        "submit_time": 0,
        "gpus": 2,
        "work_gpu_h": 16.0 - i,
        "profile": PROFILES[i % 4],
        "interruptible": i % 2 == 0,
        "deadline": (40 + i) * 3600,
    }
    for i in range(8)
] + [
    {
        "job_id": f"e{i}",
        "submit_time": 2.5 * 3600 + i * 600,
        "gpus": 2,
        "work_gpu_h": 4.0,
        "profile": PROFILES[i],
    }
    for i in range(3)
]
DR_NAMES = ["dr_uniform_cap", "dr_fair_slowdown", "dr_complementary", "dr_pause"]


def busy_scenario(tmp_path, **overrides):
    return make_scenario(
        tmp_path,
        BUSY_JOBS,
        duration_h=16.0,
        sites=[site(gpus=[{"model": A100, "count": 10}, {"model": "H100-SXM", "count": 10}])],
        demand_response=[
            {
                "site": "a",
                "start": "2020-06-01T02:00:00Z",
                "duration_h": 2.0,
                "reduction_pct": 30.0,
                "notice_h": 1.0,
            }
        ],
        **overrides,
    )


@pytest.fixture(scope="module")
def busy_runs(tmp_path_factory):
    scenario = busy_scenario(tmp_path_factory.mktemp("busy"))
    return {name: sim.simulate(scenario, name).summary for name in ["run_now", *DR_NAMES]}


@pytest.mark.parametrize("name", DR_NAMES)
def test_each_policy_keeps_a_busy_site_under_a_feasible_limit(busy_runs, name):
    s = busy_runs[name]
    assert s["dr_compliance"] >= 0.99
    assert s["dr_overshoot_kwh"] == pytest.approx(0.0, abs=1e-6)
    assert s["dr_energy_shed_kwh"] > 0 and s["dr_peak_reduction_kw"] > 0
    assert s["jobs_completed"] == s["jobs_submitted"] == len(BUSY_JOBS)


def test_without_demand_response_the_site_breaks_the_limit(busy_runs):
    assert busy_runs["run_now"]["dr_compliance"] < 0.5
    assert busy_runs["run_now"]["dr_overshoot_kwh"] > 1.0


def test_fair_slowdown_spreads_the_slowdown_more_evenly_than_equal_caps(busy_runs):
    fair = busy_runs["dr_fair_slowdown"]["slowdown_jain_index"]
    uniform = busy_runs["dr_uniform_cap"]["slowdown_jain_index"]
    assert fair >= uniform
    assert fair > 0.99


def test_complementary_loses_less_work_than_equal_caps_for_the_same_limit(busy_runs):
    comp = busy_runs["dr_complementary"]["dr_throughput_loss_gpu_h"]
    uniform = busy_runs["dr_uniform_cap"]["dr_throughput_loss_gpu_h"]
    assert 0 < comp < uniform


def test_pause_sheds_by_suspending_jobs_and_loses_more_work_than_capping(busy_runs):
    pause = busy_runs["dr_pause"]
    for name in ("dr_uniform_cap", "dr_fair_slowdown", "dr_complementary"):
        assert pause["dr_throughput_loss_gpu_h"] > busy_runs[name]["dr_throughput_loss_gpu_h"]
    assert pause["dr_jobs_paused"] > 0


def test_in_a_chain_after_run_now_fair_slowdown_acts_as_alone(tmp_path, busy_runs):
    chain = {
        "name": "chain",
        "params": {"policies": [{"name": "run_now"}, {"name": "dr_fair_slowdown"}]},
    }
    s = sim.simulate(busy_scenario(tmp_path, policy=chain)).summary
    alone = busy_runs["dr_fair_slowdown"]
    assert s["dr_compliance"] >= 0.99
    for key in ("dr_compliance", "dr_throughput_loss_gpu_h", "slowdown_jain_index", "jct_mean_h"):
        assert s[key] == alone[key], key


def test_the_demand_response_scenario_runs_with_each_policy_from_the_cli(tmp_path, capsys):
    scenario = REPO / "scenarios/demand_response.toml"
    summaries = {}
    for name in ["run_now", "dr_uniform_cap", "dr_complementary"]:
        out = tmp_path / name
        code, captured = run_cli(
            ["run", str(scenario), "--policy", name, "--out", str(out)], capsys
        )
        assert code == 0, captured.err
        summaries[name] = json.loads((out / "summary.json").read_text())
    assert summaries["dr_complementary"]["dr_compliance"] >= 0.99
    assert summaries["dr_uniform_cap"]["dr_compliance"] >= 0.99
    assert summaries["run_now"]["dr_compliance"] < 0.9
    assert (
        summaries["dr_complementary"]["dr_throughput_loss_gpu_h"]
        < summaries["dr_uniform_cap"]["dr_throughput_loss_gpu_h"]
    )
