"""`sim.gym.DcsimEnv`: the Gymnasium contract on three kinds of scenario, determinism, the
reward's terms adding up to the run's summary, vectorised environments, and one-line
errors for bad arguments."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from sim.api import Action, Policy, SystemState  # noqa: E402
from sim.config import load_scenario  # noqa: E402
from sim.errors import DcsimError  # noqa: E402
from sim.gym import TERMS, DcsimEnv  # noqa: E402
from tests.conftest import REPO  # noqa: E402

SCENARIOS = REPO / "scenarios"
QUICKSTART = SCENARIOS / "quickstart.toml"


def short(path: Path, hours: float):
    """The scenario at `path`, cut to its first `hours` (the quickstart without its
    demand-response event, which comes on day three)."""
    drop = ["demand_response=[]"] if path == QUICKSTART else []
    return load_scenario(path, [f"duration_h={hours}", *drop])


def run_episode(env: DcsimEnv, seed: int, policy) -> tuple[list, list, dict]:
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(env))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info


@pytest.mark.parametrize(
    ("path", "levers", "hours"),
    [
        ("quickstart.toml", "jobs", 24),  # jobs only
        ("serving_only.toml", "services", 6),  # an LLM service
        ("demand_response.toml", "jobs", 72),  # demand-response events
        ("onsite_energy.toml", "battery", 48),  # an on-site battery
    ],
)
def test_check_env_passes(path: str, levers: str, hours: float) -> None:
    env = DcsimEnv(short(SCENARIOS / path, hours), levers=levers)
    check_env(env, skip_render_check=True)


def test_the_default_is_the_jobs_lever_on_the_scenario_file() -> None:
    env = DcsimEnv(QUICKSTART)
    assert env.lever.name == "jobs"
    assert env.action_space == gym.spaces.Discrete(2 + 3)  # best site, defer, three sites
    assert env.observation_space.shape == (36,)


def test_the_same_seed_gives_the_same_episode() -> None:
    scenario = short(QUICKSTART, 48)

    def random_agent():
        rng = np.random.default_rng(0)
        return lambda env: int(rng.integers(env.action_space.n))

    a = run_episode(DcsimEnv(scenario), 3, random_agent())
    b = run_episode(DcsimEnv(scenario), 3, random_agent())
    c = run_episode(DcsimEnv(scenario), 4, random_agent())
    np.testing.assert_array_equal(np.array(a[0]), np.array(b[0]))
    assert a[1] == b[1]
    assert a[2]["results"].summary["carbon_total_kg"] == b[2]["results"].summary["carbon_total_kg"]
    assert len(a[0]) != len(c[0]) or not np.array_equal(np.array(a[0]), np.array(c[0]))


def test_a_random_agent_runs_1000_steps() -> None:
    env = DcsimEnv(short(QUICKSTART, 48), cap_levels_w=(None, 300.0))
    env.action_space.seed(1)
    obs, _ = env.reset(seed=1)
    for _ in range(1000):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert np.isfinite(reward)
        if terminated or truncated:
            obs, _ = env.reset()


@pytest.mark.parametrize(
    ("path", "levers", "hours"),
    [
        ("quickstart.toml", "jobs", 48),
        ("electricity_costs.toml", "jobs", 48),  # tariffs: the energy cost term
        ("serving_only.toml", "services", 6),
    ],
)
def test_the_episode_terms_add_up_to_the_summary(path: str, levers: str, hours: float) -> None:
    env = DcsimEnv(short(SCENARIOS / path, hours), levers=levers, reward={"energy_cost": 2})
    env.reset(seed=5)
    totals, rewards = dict.fromkeys(TERMS, 0.0), 0.0
    while True:
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        rewards += reward
        for term, value in info["terms"].items():
            totals[term] += value
        if terminated:
            break
    summary = info["results"].summary
    assert totals["carbon_kg"] == pytest.approx(summary["carbon_operational_kg"], rel=1e-9)
    assert totals["energy_cost"] == pytest.approx(summary["cost_energy"] or 0.0, abs=1e-9)
    assert totals["deadline_misses"] == pytest.approx(summary["deadline_misses"], abs=1e-9)
    served = (summary.get("requests_total") or 0) * (1 - (summary.get("slo_attainment") or 1))
    assert totals["slo_misses"] == pytest.approx(served, abs=1e-6)
    weights = env.weights
    assert rewards == pytest.approx(-float(np.dot(weights, [totals[t] for t in TERMS])))


def test_a_vectorised_environment_runs() -> None:
    scenario = short(QUICKSTART, 24)
    envs = gym.vector.SyncVectorEnv([lambda: DcsimEnv(scenario) for _ in range(2)])
    obs, _ = envs.reset(seed=[1, 2])
    for _ in range(50):
        obs, rewards, *_ = envs.step(envs.action_space.sample())
    assert obs.shape == (2, 36) and rewards.shape == (2,)
    envs.close()


def test_an_async_vectorised_environment_runs() -> None:
    scenario = short(QUICKSTART, 12)
    envs = gym.vector.AsyncVectorEnv([lambda: DcsimEnv(scenario) for _ in range(2)])
    obs, _ = envs.reset(seed=1)
    obs, rewards, *_ = envs.step(envs.action_space.sample())
    assert obs.shape == (2, 36)
    envs.close()


def test_reset_and_close_leave_no_thread_behind() -> None:
    before = threading.active_count()
    env = DcsimEnv(short(QUICKSTART, 24))
    for seed in range(3):
        env.reset(seed=seed)
        env.step(0)
    env.close()
    assert threading.active_count() == before


def test_the_dict_observation_names_its_parts() -> None:
    env = DcsimEnv(short(QUICKSTART, 12), observation="dict")
    obs, _ = env.reset()
    assert list(obs) == [
        "time",
        "carbon",
        "price",
        "free_gpus",
        "dr",
        "queue",
        "job",
        "services",
        "battery",
    ]
    assert obs["carbon"].shape == (3 * 4,)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"levers": "trains"}, "levers must be one of 'jobs', 'services', 'battery', got 'trains'"),
        ({"levers": "services"}, "levers='services' needs a scenario with [[services]]"),
        ({"levers": "battery"}, "levers='battery' needs a site with an on-site battery"),
        ({"reward": {"carbon": 1}}, "reward: unknown term 'carbon'"),
        ({"observation": "image"}, "observation must be 'flat' or 'dict', got 'image'"),
        ({"tick_s": 0}, "tick_s must be > 0, got 0"),
        ({"cap_levels_w": (None, -5)}, "cap_levels_w must be None or > 0 W, got -5"),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(DcsimError) as e:
        DcsimEnv(QUICKSTART, **kwargs)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_step_outside_an_episode_is_a_one_line_error() -> None:
    env = DcsimEnv(short(QUICKSTART, 12))
    with pytest.raises(DcsimError, match=r"step\(\) before reset\(\) or after the episode ended"):
        env.step(0)
    run_episode(env, 1, lambda env: 0)
    with pytest.raises(DcsimError, match="after the episode ended"):
        env.step(0)


def test_jobs_lever_refuses_a_scenario_without_jobs() -> None:
    with pytest.raises(DcsimError, match="levers='jobs' needs a scenario with jobs"):
        DcsimEnv(SCENARIOS / "serving_only.toml")


def test_the_training_example_runs_in_quick_mode() -> None:
    import sys

    sys.path.insert(0, str(REPO))
    from scripts.train_gym_agent import main

    rows = main(["--quick"])
    assert {r["policy"] for r in rows} == {"agent", "cleanest_site", "run_now", "wait_awhile"}
    assert all(np.isfinite(r["carbon_operational_kg"]) for r in rows)


def test_the_sb3_variant_of_the_example_runs_when_installed() -> None:
    pytest.importorskip("stable_baselines3")
    import sys

    sys.path.insert(0, str(REPO))
    from scripts.train_gym_agent import main

    assert main(["--quick", "--sb3"])


def test_the_live_carbon_term_is_the_exact_integral_so_far() -> None:
    """Before the last step settles on the summary, the steps' carbon adds up to the
    operational carbon from the start to each step, exactly (the results' own integral)."""
    from sim.results.metrics import operational_carbon_over_time_kg

    env = DcsimEnv(short(QUICKSTART, 48))
    _, info = env.reset(seed=2)
    times, so_far, carbon = [], [], 0.0
    while True:
        defer = info["time_s"] < 12 * 3600  # defer through the first half-day, then start
        _, _, terminated, _, info = env.step(1 if defer else 0)
        if terminated:
            break
        carbon += info["terms"]["carbon_kg"]
        times.append(info["time_s"])
        so_far.append(carbon)
    exact = operational_carbon_over_time_kg(info["results"], np.array(times))
    np.testing.assert_allclose(so_far, exact, rtol=1e-9, atol=1e-9)


class CountingPolicy(Policy):
    """Decides nothing, counting its calls: memory of its own."""

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, state: SystemState) -> list[Action]:
        self.calls += 1
        return []


def test_a_base_policy_object_is_copied_for_each_episode() -> None:
    """The caller's policy object keeps no memory of an episode (each gets a fresh copy)."""
    base = CountingPolicy()
    env = DcsimEnv(short(QUICKSTART, 12), base_policy=base)
    run_episode(env, 1, lambda env: 0)
    assert env.results is not None and base.calls == 0
