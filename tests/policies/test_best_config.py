"""`best_config` and `oracle_config`: the energy- or carbon-optimal configuration per job.

Specifications: the chosen (GPU model, batch size, cap) meets every deadline some
configuration meets; it is the argmin of the objective over the expectation
(`best_config`) or the truth (`oracle_config`), priced independently here from
`state.operating_point` and `state.reference_speed`; whole runs use no more energy than
the default configuration and than every fixed (batch size, cap), within the error the
expectation allows; it chains after a time-shifter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from policies import REGISTRY
from policies.best_config import BestConfig, OracleConfig
from policies.chain import Chain
from policies.kit import FreeGpus
from policies.run_now import RunNow
from policies.wait_awhile import WaitAwhile
from sim.api import Defer, Policy, Start, SystemState
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.plugins import build_policy
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

HOST_W, PUE = 40.0, 1.5  # the base site's (tests/conftest.py)


def target_job(job_id: str, profile: str = "resnet50", target: float = 0.65, **extra) -> dict:
    return {
        "job_id": job_id,
        "submit_time": 0,
        "gpus": 1,
        "profile": profile,
        "target_metric": target,
        **extra,
    }


def DS2(job_id: str, **extra) -> dict:
    """A DeepSpeech2 job to Zeus's target (40% WER): its default batch size (192) is far
    slower to the target than the fastest (32), so deadlines between the two bind."""
    return target_job(job_id, "deepspeech2", 40.0, **extra)


def scenario(tmp_path: Path, jobs: list[dict], models=("V100",), seed: int = 1, **site_changes):
    """200 h on one site `a` (PUE 1.5, host 40 W/GPU, 300 g/kWh unless `site_changes` say
    otherwise) with 4 GPUs of each of `models`."""
    gpus = [{"model": m, "count": 4} for m in models]
    sites = [site(gpus=gpus, **site_changes)]
    return make_scenario(tmp_path, jobs=jobs, sites=sites, seed=seed, duration_h=200.0)


def harness(tmp_path: Path, jobs: list[dict], **kw) -> PolicyHarness:
    return PolicyHarness(scenario(tmp_path, jobs, **kw)).advance(0.0)


def priced(state: SystemState, job, model: str, truth: bool, step_w: float = 10.0):
    """{(batch size, cap W): (time s, facility kWh)} of `job` on one `model` GPU at site a."""
    spec = state.gpu_spec(model)
    caps = [*np.arange(spec.min_cap_w, spec.max_cap_w, step_w), spec.max_cap_w]
    workload = job.profile.split("@")[0]
    out = {}
    for b, work_gpu_h in state.training_options(job, truth=truth).items():
        profile = f"{workload}@{b}"
        for c in caps:
            point = state.operating_point(model, profile, float(c))
            time_s = (
                work_gpu_h
                * 3600.0
                / (state.reference_speed(model, profile) * point.throughput_fraction)
            )
            out[(b, float(c))] = (time_s, time_s * (point.power_w + HOST_W) * PUE / 3.6e6)
    return out


def only_start(actions) -> Start:
    (start,) = actions
    assert isinstance(start, Start)
    return start


# --- the choice --------------------------------------------------------------------------


def test_best_config_is_the_least_expected_energy_and_the_oracle_the_least_true(tmp_path):
    h = harness(tmp_path, [target_job("r")])
    (job,) = h.state.pending
    for policy, truth in ((BestConfig(), False), (OracleConfig(), True)):
        table = priced(h.state, job, "V100", truth)
        start = only_start(policy.decide(h.state))
        best_b, best_c = min(table, key=lambda k: (table[k][1], table[k][0]))
        assert (start.gpu_model, start.batch_size, start.gpu_cap_w) == ("V100", best_b, best_c)
    h.apply([start])


def test_best_config_sees_only_the_expectation_the_oracle_the_truth(tmp_path):
    jobs = [target_job(f"r{i}") for i in range(4)] + [target_job("d", "deepspeech2", 40.0)]
    choices = {}
    truths = {}
    for seed in (1, 2):
        h = harness(tmp_path, jobs, seed=seed)
        truths[seed] = [h.state.training_options(j, truth=True) for j in h.state.pending]
        for policy in (BestConfig(), OracleConfig()):
            starts = policy.decide(h.state)
            choices[type(policy).__name__, seed] = [(s.batch_size, s.gpu_cap_w) for s in starts]
    assert truths[1] != truths[2]  # the two seeds draw other training runs
    assert choices["BestConfig", 1] == choices["BestConfig", 2]
    assert choices["OracleConfig", 1] != choices["OracleConfig", 2]


def test_it_picks_the_gpu_model_of_least_energy_among_those_free(tmp_path):
    h = harness(tmp_path, [target_job("r")], models=("V100", "H100-SXM"))
    (job,) = h.state.pending
    least = {
        m: min(e for _, e in priced(h.state, job, m, False).values()) for m in ("V100", "H100-SXM")
    }
    start = only_start(BestConfig().decide(h.state))
    assert start.gpu_model == min(least, key=least.get)


def test_carbon_objective_prefers_the_cleaner_site(tmp_path):
    sites = [
        site(
            name="dirty",
            carbon={"constant_g_per_kwh": 700.0},
            gpus=[{"model": "H100-SXM", "count": 4}],
        ),
        site(
            name="clean", carbon={"constant_g_per_kwh": 50.0}, gpus=[{"model": "V100", "count": 4}]
        ),
    ]
    h = PolicyHarness(make_scenario(tmp_path, jobs=[target_job("r")], sites=sites)).advance(0.0)
    assert only_start(BestConfig(objective="energy").decide(h.state)).site == "dirty"
    assert only_start(BestConfig(objective="carbon").decide(h.state)).site == "clean"


def test_jobs_without_a_target_start_as_run_now_would(tmp_path):
    fixed = {"job_id": "f", "submit_time": 0, "gpus": 2, "work_gpu_h": 1.0, "profile": "mixed"}
    h = harness(tmp_path, [fixed, target_job("r")])
    f, r = BestConfig().decide(h.state)
    assert (f.job.id, f.site, f.gpu_cap_w, f.batch_size) == ("f", "a", None, None)
    assert r.job.id == "r" and r.batch_size is not None


# --- deadlines and time-to-accuracy targets ----------------------------------------------


def test_never_misses_a_feasible_deadline_and_runs_infeasible_jobs_fastest(tmp_path):
    h0 = harness(tmp_path, [DS2("probe")])
    (probe,) = h0.state.pending
    table = priced(h0.state, probe, "V100", truth=False)
    default_s = table[(192, 250.0)][0]
    fastest_s = min(t for t, _ in table.values())
    assert fastest_s < 0.8 * default_s  # a faster configuration than the default exists
    margin_s = 300.0
    deadlines = {
        "tight": fastest_s + margin_s + 0.02 * (default_s - fastest_s),  # only the fastest few
        "loose": fastest_s + margin_s + 0.5 * (default_s - fastest_s),  # default misses it
        "infeasible": 0.9 * fastest_s,
    }
    jobs = [DS2(k, deadline=round(d)) for k, d in deadlines.items()]
    h = harness(tmp_path, jobs)
    starts = {s.job.id: s for s in BestConfig(objective="energy").decide(h.state)}
    for job_id, deadline_s in deadlines.items():
        s = starts[job_id]
        time_s = table[(s.batch_size, s.gpu_cap_w)][0]
        if job_id == "infeasible":
            assert time_s == fastest_s  # documented: the fastest configuration
        else:
            assert time_s <= round(deadline_s) - margin_s
    least_energy = min(table, key=lambda k: table[k][1])
    assert table[least_energy][0] > deadlines["tight"]  # the deadline binds
    h.apply(list(starts.values()))


def test_oracle_meets_every_deadline_the_truth_allows_where_run_now_misses(tmp_path):
    h0 = harness(tmp_path, [DS2("probe")])
    (probe,) = h0.state.pending
    truth = priced(h0.state, probe, "V100", truth=True)
    default_s, fastest_s = truth[(192, 250.0)][0], min(t for t, _ in truth.values())
    deadline_s = round(fastest_s + 0.5 * (default_s - fastest_s))
    sc = scenario(tmp_path, [DS2("probe", deadline=deadline_s)])
    assert simulate(sc, "run_now").summary["deadline_misses"] == 1
    assert simulate(sc, OracleConfig()).summary["deadline_misses"] == 0


def test_max_slowdown_bounds_time_against_the_default_at_the_maximum_limit(tmp_path):
    h = harness(tmp_path, [target_job("r")])
    (job,) = h.state.pending
    table = priced(h.state, job, "V100", truth=False)
    default_s = table[(256, 250.0)][0]
    free = table[tuple(_choice(BestConfig(), h.state))][0]
    bounded = table[tuple(_choice(BestConfig(max_slowdown=1.0), h.state))][0]
    assert free > default_s  # unbounded, the least energy is slower than the default
    assert bounded <= default_s


def _choice(policy: Policy, state: SystemState) -> tuple[int, float]:
    s = only_start(policy.decide(state))
    return s.batch_size, s.gpu_cap_w


# --- whole runs: energy against fixed configurations and the oracle ----------------------


class Recorded(Policy):
    """`policy`, keeping every `Start` it returns (the configuration each job ran)."""

    def __init__(self, policy: Policy):
        self.policy, self.starts = policy, {}

    def decide(self, state):
        actions = self.policy.decide(state)
        self.starts.update((a.job.id, a) for a in actions if isinstance(a, Start))
        return actions


class FixedConfig(Policy):
    """Every target job on V100 at one batch size and cap (the configuration under test)."""

    def __init__(self, batch_size: int, cap_w: float):
        self.batch_size, self.cap_w = batch_size, cap_w

    def decide(self, state):
        return [
            Start(j, "a", gpu_cap_w=self.cap_w, gpu_model="V100", batch_size=self.batch_size)
            for j in state.pending
        ]


def test_energy_is_no_worse_than_any_fixed_config_or_the_oracle_beyond_the_error(tmp_path):
    """The bound: with err(x) = |true - expected work at x's batch size| x x's facility
    energy per unit of work, best_config's true energy exceeds that of any configuration y
    by at most err(best's) + err(y) per job (it is least in expectation), and the oracle's
    exceeds none."""
    sc = scenario(tmp_path, [target_job(f"r{i}") for i in range(3)])
    h = PolicyHarness(sc).advance(0.0)
    jobs = list(h.state.pending)
    exp = {j.id: priced(h.state, j, "V100", truth=False) for j in jobs}
    tru = {j.id: priced(h.state, j, "V100", truth=True) for j in jobs}

    def err(job_id: str, key) -> float:
        return abs(tru[job_id][key][1] - exp[job_id][key][1])

    def run(policy: Policy) -> tuple[float, dict]:
        recorded = Recorded(policy)
        r = simulate(sc, recorded)
        assert r.summary["targets_reached"] == 3
        rows = r.jobs.set_index("job_id")
        configs = {
            j: (int(rows.profile[j].split("@")[1]), s.gpu_cap_w or 250.0)
            for j, s in recorded.starts.items()
        }
        for j, key in configs.items():  # the engine charges what the pieces predict
            assert rows.energy_kwh[j] == pytest.approx(tru[j][key][1], rel=1e-6)
        return float(rows.energy_kwh.sum()), configs

    best_kwh, best = run(BestConfig())
    oracle_kwh, oracle = run(OracleConfig())
    bound_kwh = sum(err(j, best[j]) + err(j, oracle[j]) for j in best)
    assert oracle_kwh <= best_kwh <= oracle_kwh + bound_kwh
    default_kwh, _ = run(RunNow())
    assert best_kwh < default_kwh
    for key in exp["r0"]:
        fixed_kwh, _ = run(FixedConfig(*key))
        assert oracle_kwh <= fixed_kwh * (1 + 1e-9)
        assert best_kwh <= fixed_kwh + sum(err(j, best[j]) + err(j, key) for j in best)


# --- chains and parameters ----------------------------------------------------------------


def test_chains_after_a_time_shifter_and_configures_its_starts(tmp_path):
    jobs = [
        target_job("now"),
        target_job("later", deadline=150 * 3600),
        target_job("d", "ncf", 0.41),
    ]
    grid = {"carbon": {"zone": "DE", "year": 2020}}  # sunny afternoons: worth waiting for
    h = PolicyHarness(scenario(tmp_path, jobs, **grid)).advance(0.0)
    chain = Chain([WaitAwhile(), BestConfig()])
    actions = chain.decide(h.state)
    starts = {a.job.id: a for a in actions if isinstance(a, Start)}
    assert set(starts) == {"now", "d"}
    assert all(s.batch_size is not None and s.gpu_cap_w is not None for s in starts.values())
    assert [a.job.id for a in actions if isinstance(a, Defer)] == ["later"]
    h.apply(actions)
    r = simulate(scenario(tmp_path, jobs, **grid), chain)
    assert r.summary["targets_reached"] == 3 and r.summary["deadline_misses"] == 0


def test_registered():
    assert REGISTRY["best_config"] is BestConfig
    assert REGISTRY["oracle_config"] is OracleConfig
    assert build_policy("oracle_config", {"objective": "carbon"}).objective == "carbon"


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"objective": "time"}, "objective"),
        ({"cap_step_w": 0}, "cap_step_w"),
        ({"cap_step_w": "ten"}, "cap_step_w"),
        ({"max_slowdown": 0.5}, "max_slowdown"),
        ({"deadline_margin_s": -1}, "deadline_margin_s"),
        ({"truth": True}, "truth"),
    ],
)
def test_bad_parameters_are_one_line_errors_naming_the_parameter(params, names):
    with pytest.raises(ScenarioError, match=names) as e:
        build_policy("best_config", params)
    assert "\n" not in str(e.value)


# --- the GPU count ------------------------------------------------------------------------


def scaled_run(tmp_path: Path, jobs: list[dict], params: dict):
    """A run on one site of 8 A100-80GB with the scaling model, `best_config` with `params`."""
    sites = [site(gpus=[{"model": "A100-80GB", "count": 8}])]
    sc = make_scenario(tmp_path, jobs=jobs, sites=sites, duration_h=200.0, scaling={})
    return simulate(sc, BestConfig(**params)).jobs.set_index("job_id")


def test_more_gpus_never_save_energy_so_without_a_deadline_one_gpu_is_chosen(tmp_path):
    jobs = scaled_run(tmp_path, [target_job("a", "bert-squad", 84.0)], {"gpu_counts": [1, 2, 4, 8]})
    assert jobs.loc["a", "gpus"] == 1
    assert jobs.loc["a", "target_reached"]


def test_a_deadline_one_gpu_cannot_meet_gets_the_fewest_gpus_that_meet_it(tmp_path):
    solo = scaled_run(tmp_path, [target_job("a", "bert-squad", 84.0)], {})
    fastest_alone_s = solo.loc["a", "end_s"]  # its energy-optimal batch and cap on 1 GPU
    deadline_s = 0.4 * fastest_alone_s
    job = target_job("a", "bert-squad", 84.0, deadline=deadline_s)
    jobs = scaled_run(tmp_path, [job], {"gpu_counts": [1, 2, 4, 8], "deadline_margin_s": 0})
    n = jobs.loc["a", "gpus"]
    assert n > 1 and jobs.loc["a", "end_s"] <= deadline_s
    # and no smaller count of the list would have met it: each is priced by the engine's scaling
    h = PolicyHarness(
        make_scenario(
            tmp_path,
            jobs=[job],
            sites=[site(gpus=[{"model": "A100-80GB", "count": 8}])],
            duration_h=200.0,
            scaling={},
        )
    ).advance(0.0)
    policy = BestConfig(gpu_counts=[1, 2, 4, 8], deadline_margin_s=0)
    candidates = policy.candidates(h.state, h.job("a"), [("a", "A100-80GB")], FreeGpus(h.state))
    for smaller in (m for m in (1, 2, 4, 8) if m < n):
        assert min(c.time_s for c in candidates if c.gpus == smaller) > deadline_s


def test_gpu_counts_must_be_whole_numbers():
    with pytest.raises(ValueError, match="gpu_counts must be a list of integers >= 1"):
        BestConfig(gpu_counts=[0, 2])
    with pytest.raises(ValueError, match="gpu_counts must be a list of integers >= 1"):
        BestConfig(gpu_counts=[])
