"""Properties that hold for every scenario: hypothesis draws small random ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.api import Defer, Migrate, Reject, Resume, SetCap, Start, Suspend
from sim.config.loading import scenario_from_dict
from sim.models.hardware import GPU_CATALOG

MODELS = sorted(GPU_CATALOG)
POWER_OFF = {"gpus_per_node": 1, "power_off": {"idle_s": 900.0, "wake_s": 120.0, "off_w": 5.0}}


@dataclass
class Chaos:
    """Random but valid actions of every kind, to stress the engine's bookkeeping."""

    seed: int = 0
    tick_s: float = 1800.0
    rng: np.random.Generator = field(init=False)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def decide(self, state):
        rng, acts = self.rng, []
        free = {s: state.free_gpus(s) for s in state.sites}

        def cap_fits(job, model):
            spec = state.gpu_spec(model)
            return job.cap_w is None or spec.min_cap_w <= job.cap_w <= spec.max_cap_w

        def take(job, exclude=None):
            options = [
                (s, m)
                for s in state.sites
                for m, n in free[s].items()
                if n >= job.gpus and (s, m) != exclude and cap_fits(job, m)
            ]
            if not options:
                return None
            s, m = options[rng.integers(len(options))]
            free[s][m] -= job.gpus
            return s, m

        for job in list(state.running):
            u = rng.random()
            if u < 0.1 and job.interruptible:
                acts.append(Suspend(job))
                if job.checkpoint_gb == 0:  # else held while it writes its checkpoint
                    free[job.site][job.gpu_model] += job.gpus
            elif u < 0.2:
                spec = state.gpu_spec(job.gpu_model)
                acts.append(SetCap(job, float(rng.uniform(spec.min_cap_w, spec.max_cap_w))))
            elif u < 0.3 and job.interruptible:
                dest = take(job, exclude=(job.site, job.gpu_model))
                if dest:
                    acts.append(Migrate(job, dest[0], gpu_model=dest[1]))
        for job in list(state.suspended):
            if rng.random() < 0.5 and (dest := take(job)):
                acts.append(Resume(job, dest[0], gpu_model=dest[1]))
        for job in list(state.pending):
            u = rng.random()
            if u < 0.15:
                acts.append(Defer(job, state.now_s + float(rng.uniform(60, 7200))))
            elif u < 0.2:
                acts.append(Reject(job, "chaos"))
            elif dest := take(job):
                spec = state.gpu_spec(dest[1])
                cap = float(rng.uniform(spec.min_cap_w, spec.max_cap_w)) if u < 0.5 else None
                acts.append(Start(job, dest[0], gpu_cap_w=cap, gpu_model=dest[1]))
        if rng.random() < 0.05:
            site = state.sites[rng.integers(len(state.sites))]
            specs = [state.gpu_spec(m) for m in state.gpu_models(site)]
            lo, hi = max(s.min_cap_w for s in specs), min(s.max_cap_w for s in specs)
            if lo <= hi:
                acts.append(SetCap(site, float(rng.uniform(lo, hi))))
        return acts


@st.composite
def scenarios(draw):
    n_sites = draw(st.integers(1, 3))
    sites = []
    for i in range(n_sites):
        models = draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True))
        carbon = draw(
            st.one_of(
                st.builds(lambda v: {"constant_g_per_kwh": v}, st.floats(0, 900)),
                st.sampled_from([{"zone": "DE", "year": 2020}, {"zone": "FR", "year": 2020}]),
            )
        )
        sites.append(
            {
                "name": f"s{i}",
                "lat": 50.0,
                "lon": 8.0,
                "carbon": carbon,
                "pue": draw(
                    st.one_of(
                        st.floats(1.0, 2.0), st.lists(st.floats(1.0, 2.0), min_size=24, max_size=24)
                    )
                ),
                "host_w_per_gpu": draw(st.floats(0, 100)),
                "gpus": [{"model": m, "count": draw(st.integers(1, 8))} for m in models],
                **draw(st.sampled_from([{}, POWER_OFF])),
            }
        )
    largest = max(p["count"] for s in sites for p in s["gpus"])
    sizes = [n for n in (1, 2, 4, 8) if n <= largest]
    weights = draw(st.lists(st.integers(1, 5), min_size=len(sizes), max_size=len(sizes)))
    duration = draw(
        st.one_of(
            st.builds(lambda m: {"dist": "exponential", "mean_h": m}, st.floats(0.1, 4)),
            st.builds(
                lambda m, s: {"dist": "lognormal", "median_h": m, "sigma": s},
                st.floats(0.1, 3),
                st.floats(0.2, 2),
            ),
        )
    )
    return scenario_from_dict(
        {
            "name": "property",
            "seed": draw(st.integers(0, 2**32 - 1)),
            "start": "2020-03-28T00:00:00Z",
            "duration_h": draw(st.floats(6, 48)),
            "sites": sites,
            "workload": {
                "synthetic": {
                    "arrival_rate_per_h": draw(st.floats(0.5, 6)),
                    "duration": duration,
                    "gpus": {n: w / sum(weights) for n, w in zip(sizes, weights, strict=True)},
                    "deferrable_fraction": draw(st.floats(0, 1)),
                    "interruptible_fraction": draw(st.floats(0, 1)),
                    "checkpoint_gb": draw(st.sampled_from([0.0, 5.0, 500.0])),
                },
                "checkpoint_interval_h": draw(st.sampled_from([None, 0.5])),
            },
            "demand_response": draw(
                st.sampled_from(
                    [
                        [],
                        [  # two overlapping evening events at the first site
                            {**DAILY, "site": "s0", "hour": 17, "duration_h": 2},
                            {**DAILY, "site": "s0", "hour": 18, "duration_h": 2},
                        ],
                    ]
                )
            ),
        }
    )


DAILY = {"generator": "daily_peak", "reduction_pct": 30, "notice_h": 1}

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(scenarios(), st.integers(0, 1000), st.booleans())
def test_books_balance_whatever_the_policy_does(scenario, policy_seed, chaos):
    policy = Chaos(seed=policy_seed) if chaos else "run_now"
    r = sim.simulate(scenario, policy)
    s, jobs = r.summary, r.jobs

    # Every job ends in exactly one terminal state, and the counts add up.
    assert set(jobs["state"]) <= {"completed", "rejected", "unfinished"}
    assert s["jobs_completed"] + s["jobs_rejected"] + s["jobs_unfinished"] == s["jobs_submitted"]
    assert s["jobs_submitted"] == len(jobs)

    # GPUs are never oversubscribed.
    total = {site.name: sum(p.count for p in site.gpus) for site in scenario.sites}
    assert (r.power["busy_gpus"] >= 0).all()
    assert (r.power["busy_gpus"] <= r.power["site"].map(total).astype(int)).all()

    # Energy is conserved: jobs + idle = site energy; job carbon is part of site carbon.
    assert np.isclose(
        s["energy_jobs_kwh"] + s["energy_idle_kwh"], s["energy_facility_kwh"], rtol=1e-9, atol=1e-12
    )
    assert jobs["carbon_kg"].sum() <= s["carbon_operational_kg"] * (1 + 1e-9) + 1e-12

    # Jobs never do more work in an event than uncapped; the losses are not negative.
    assert (jobs["dr_slowdown"].dropna() >= 1 - 1e-9).all()
    assert s["dr_throughput_loss_gpu_h"] >= -1e-9
    assert s["dr_jobs_affected"] <= s["jobs_submitted"]

    # A completed job that stayed on one GPU model took at least its ideal runtime.
    runs = r.events[r.events["kind"].isin(["start", "resume", "migrate"])]
    one_model = runs.groupby("job")["detail"].nunique() == 1
    done = jobs[(jobs["state"] == "completed") & jobs["job_id"].map(one_model).fillna(False)]
    assert (done["slowdown"] >= 1 - 1e-9).all()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(0, 1000))
def test_same_seed_same_results_and_the_policy_never_changes_the_workload(scenario, seed):
    a = sim.simulate(scenario, Chaos(seed=seed))
    b = sim.simulate(scenario, Chaos(seed=seed))
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.events, b.events)

    workload = ["job_id", "submit_s", "gpus", "work_gpu_h", "profile", "deadline_s"]
    c = sim.simulate(scenario, "run_now")
    pd.testing.assert_frame_equal(a.jobs[workload], c.jobs[workload])
