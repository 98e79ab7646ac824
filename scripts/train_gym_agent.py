"""Train a small agent on `sim.gym.DcsimEnv` and compare it with run_now and wait_awhile
on held-out weeks (docs/gym.md, "Example").

The scenario is the quickstart (three European sites, 2020 grids) without its
demand-response event. The agent takes the "jobs" lever: for every pending job, start now
at the cleanest site with room, defer by an hour, or start at one site. It is a linear
policy (the action of largest W @ [observation, 1]), trained by the cross-entropy method
(a few lines of numpy, no extra dependency) on `--train-weeks` weeks from June 2020, and
evaluated on the `--eval-weeks` weeks that follow, against the scenario run with `run_now`
and with `wait_awhile` (`sim.simulate`), and against the environment's own action 0 taken
always (`cleanest_site`: every job starts at once at the site of lowest carbon intensity
with room). With `--sb3`, a PPO agent of Stable-Baselines3 (the `rl` extra) is trained
instead. `--quick` (the test suite's) shrinks everything to seconds.

    python scripts/train_gym_agent.py            # the table in docs/gym.md
    python scripts/train_gym_agent.py --quick
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

import sim
from sim.gym import DcsimEnv

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.toml"
FIRST_WEEK = datetime(2020, 6, 1)


def week(k: int, hours: float) -> sim.Scenario:
    """The quickstart scenario over `hours` from week `k` after June 1st 2020."""
    start = (FIRST_WEEK + timedelta(weeks=k)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return sim.load_scenario(
        SCENARIO, [f"start={start}", f"duration_h={hours}", "demand_response=[]"]
    )


class LinearAgent:
    """A policy linear in the observation: the action of largest W @ [obs, 1]."""

    def __init__(self, weights: np.ndarray):
        self.weights = weights

    def __call__(self, obs: np.ndarray) -> int:
        return int(np.argmax(self.weights @ np.append(obs, 1.0)))


def episode_return(env: DcsimEnv, agent, seed: int) -> tuple[float, dict]:
    obs, _ = env.reset(seed=seed)
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(agent(obs))
        total += reward
        if terminated or truncated:
            return total, info["results"].summary


def train_cem(envs: list[DcsimEnv], iterations: int, population: int, seed: int) -> LinearAgent:
    """The cross-entropy method: sample weight matrices from a Gaussian, keep the best fifth
    by return summed over the training weeks, refit the Gaussian to them."""
    rng = np.random.default_rng(seed)
    n_actions = int(envs[0].action_space.n)  # type: ignore[attr-defined]
    shape = (n_actions, envs[0].observation_space.shape[0] + 1)  # type: ignore[index]
    mean, std = np.zeros(shape), np.ones(shape)
    elite = max(2, population // 5)
    for it in range(iterations):
        samples = mean + std * rng.standard_normal((population, *shape))
        scores = [
            sum(episode_return(env, LinearAgent(w), seed=k)[0] for k, env in enumerate(envs))
            for w in samples
        ]
        best = samples[np.argsort(scores)[-elite:]]
        mean, std = best.mean(axis=0), best.std(axis=0) + 0.05
        print(f"iteration {it + 1}: best return {max(scores):.1f}, mean {np.mean(scores):.1f}")
    return LinearAgent(mean)


def train_sb3(envs: list[DcsimEnv], steps: int, seed: int):
    from stable_baselines3 import PPO  # the `rl` extra

    model = PPO("MlpPolicy", envs[0], seed=seed, verbose=0)
    model.learn(total_timesteps=steps)
    return lambda obs: int(model.predict(obs, deterministic=True)[0])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds, for the test suite")
    parser.add_argument("--sb3", action="store_true", help="train PPO (Stable-Baselines3)")
    parser.add_argument("--train-weeks", type=int, default=2)
    parser.add_argument("--eval-weeks", type=int, default=2)
    args = parser.parse_args(argv)
    hours = 24.0 if args.quick else 168.0
    train_weeks, eval_weeks = (1, 1) if args.quick else (args.train_weeks, args.eval_weeks)
    train = [DcsimEnv(week(k, hours)) for k in range(train_weeks)]
    if args.sb3:
        agent = train_sb3(train, 2_000 if args.quick else 100_000, seed=0)
    else:
        agent = train_cem(train, 2 if args.quick else 8, 6 if args.quick else 12, seed=0)
    rows = []
    for k in range(train_weeks, train_weeks + eval_weeks):
        scenario = week(k, hours)
        runs = {
            name: episode_return(DcsimEnv(scenario), policy, seed=scenario.seed)[1]
            for name, policy in (("agent", agent), ("cleanest_site", lambda obs: 0))
        }
        for name in ("run_now", "wait_awhile"):
            runs[name] = sim.simulate(scenario, name).summary
        for name, s in runs.items():
            rows.append(
                {
                    "week": k,
                    "policy": name,
                    "carbon_operational_kg": s["carbon_operational_kg"],
                    "deadline_misses": s["deadline_misses"],
                    "wait_mean_h": s["wait_mean_h"],
                }
            )
    print(f"{'week':>4} {'policy':<13} {'carbon_operational_kg':>22} {'misses':>7} {'wait_h':>7}")
    for r in rows:
        print(
            f"{r['week']:>4} {r['policy']:<13} {r['carbon_operational_kg']:>22.1f} "
            f"{r['deadline_misses']:>7} {r['wait_mean_h']:>7.2f}"
        )
    return rows


if __name__ == "__main__":
    main()
