"""`DcsimEnv`: a Gymnasium environment over any dcsim scenario (docs/gym.md).

The engine is driven event by event from the environment's own thread, as
`sim.testing.PolicyHarness` drives it: the engine's policy is a stand-in that only notes
that a decision point has come; the environment then stops stepping, asks the agent for
each decision its lever offers there (at the same simulated instant: nothing else happens
in between), carries the agent's actions out, then lets the base policy decide the rest
(its actions of the lever's own types dropped), and steps on. No thread, no blocking:
`close` or a new `reset` simply drops the engine.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from sim import plugins
from sim.api import Action, JobView, Policy, PolicyHooks, SystemState
from sim.config import Scenario, load_scenario
from sim.engine.build import build_engine
from sim.engine.core import Engine
from sim.engine.results import build_results
from sim.errors import DcsimError
from sim.gym.levers import Lever, make_lever
from sim.gym.meter import DEFAULT_WEIGHTS, TERMS, Meter
from sim.gym.observe import FORECAST_HORIZONS_S, Observer
from sim.results import Results


class _StandIn(Policy):
    """The engine's policy in an episode: notes each decision point, decides nothing."""

    def __init__(self, base: Policy, tick_s: float | None):
        hooks = plugins.call_policy(base, "reading its hooks", PolicyHooks.of, base)
        self.signal_steps = hooks.signal_steps
        self.tick_s = tick_s or hooks.tick_s
        self.asked = False

    def decide(self, state: SystemState) -> Sequence[Action]:
        self.asked = True
        return []


class DcsimEnv(gym.Env):
    """A Gymnasium environment over `scenario` (a path or a loaded `Scenario`).

    - `levers`: the decisions the agent takes, "jobs", "services" or "battery"
      (`sim.gym.levers`); the rest go to `base_policy` (None: the scenario's own policy; a
      registry name or `module:Class`, built with the scenario's params if it is the
      scenario's policy, or a policy object).
    - `tick_s`: "services" and "battery" act at the first decision point at or after
      every `tick_s` seconds (default 3600 s); "jobs" at every decision point with jobs
      pending (and every `tick_s` too if given). `defer_s`: how long "jobs"' defer
      action waits, s (default 3600 s). `cap_levels_w`: "jobs"' GPU power caps, W (None:
      uncapped; default: uncapped only).
    - `reward`: the weight of each term of `sim.gym.meter.TERMS` (missing terms keep
      `DEFAULT_WEIGHTS`); reward = -sum(weight x term over the step).
    - `observation`: "flat" (a Box) or "dict" (a Dict of named Boxes; `sim.gym.observe`).
    - `seed`: the first episode's scenario seed (None: the scenario's); `reset(seed=s)`
      makes it s; later episodes without a seed take the next seeds (s + 1, ...).

    `info` holds the step's `terms` (a dict by `TERMS`) and the simulated `time_s`; after
    the last step `results` holds the run's `Results`.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        scenario: Scenario | str | Path,
        levers: str = "jobs",
        reward: Mapping[str, float] | None = None,
        base_policy: Policy | str | None = None,
        seed: int | None = None,
        *,
        tick_s: float | None = None,
        defer_s: float = 3600.0,
        cap_levels_w: Sequence[float | None] = (None,),
        observation: str = "flat",
    ):
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        if self.scenario.rebound is not None:
            raise DcsimError("sim.gym: a scenario with [rebound] repeats its run: not supported")
        if observation not in ("flat", "dict"):
            raise DcsimError(f"sim.gym: observation must be 'flat' or 'dict', got {observation!r}")
        unknown = sorted(set(reward or {}) - set(TERMS))
        if unknown:
            raise DcsimError(
                f"sim.gym: reward: unknown term {unknown[0]!r} (terms: {', '.join(TERMS)})"
            )
        for name, value in (("tick_s", tick_s), ("defer_s", defer_s)):
            if value is not None and not value > 0:
                raise DcsimError(f"sim.gym: {name} must be > 0, got {value}")
        bad_cap = next((w for w in cap_levels_w if w is not None and not w > 0), None)
        if bad_cap is not None:
            raise DcsimError(f"sim.gym: cap_levels_w must be None or > 0 W, got {bad_cap}")
        self.weights = np.array([{**DEFAULT_WEIGHTS, **(reward or {})}[t] for t in TERMS])
        self._flat = observation == "flat"
        self._base_arg = base_policy
        self._tick_s = tick_s if tick_s is not None or levers == "jobs" else 3600.0
        self._next_seed = self.scenario.seed if seed is None else seed
        self.results: Results | None = None
        self._offers: list[JobView | None] = []
        self._engine = self._build(self._next_seed)  # checks the lever on the scenario
        self.lever: Lever = make_lever(
            levers, self._engine.state_view, len(self._engine.jobs), defer_s, cap_levels_w
        )
        self.observer = Observer(self._engine.state_view, self.scenario.start, FORECAST_HORIZONS_S)
        self.action_space = self.lever.action_space
        self.observation_space = self.observer.space(self._flat)

    def _build(self, seed: int) -> Engine:
        scenario = self.scenario.model_copy(update={"seed": seed})
        base = self._base_arg
        if base is None or isinstance(base, str):
            name = scenario.policy.name if base is None else base
            params = scenario.policy.params if name == scenario.policy.name else {}
            base = plugins.build_policy(name, params)
        else:  # a fresh copy per episode: a policy's own memory does not leak into the next
            base = copy.deepcopy(base)
        self._base = base
        self._agent = _StandIn(base, self._tick_s)
        return build_engine(scenario, self._agent)

    # --- the Gymnasium API -------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[object, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._next_seed = seed
        self._engine = self._build(self._next_seed)
        self._next_seed += 1
        self.results = None
        self._engine.start_processes()
        self._wall_s = time.perf_counter()
        self._meter = Meter(self._engine)
        self._offers = []
        self._next_agent_s = 0.0
        self._seen = np.zeros(len(TERMS))
        if not self._advance():
            raise DcsimError("sim.gym: the scenario offers the agent no decision in its run")
        return self._observe(), {"time_s": self._engine.env.now}

    def step(self, action: object) -> tuple[object, float, bool, bool, dict[str, Any]]:
        if self.results is not None or not self._offers:
            raise DcsimError("sim.gym: step() before reset() or after the episode ended")
        state = self._engine.state_view
        self.lever.act(state, self._offers.pop(0), action, self._engine.apply)
        if not self._offers:
            self._run_base()
        done = not self._advance()
        now = self._engine.env.now
        observation = self._observe()  # before `_finish`, which drains the engine's logs
        if done:
            self._finish()
            assert self.results is not None
            totals = Meter.final(self.results.summary)
        else:
            totals = self._meter.totals(now, state)
        terms, self._seen = totals - self._seen, totals
        info: dict[str, Any] = {"time_s": now, "terms": dict(zip(TERMS, terms, strict=True))}
        if done:
            info["results"] = self.results
        reward = -float(np.dot(self.weights, terms))
        return observation, reward, done, False, info

    def close(self) -> None:
        """Drop the episode's engine (nothing runs between calls: there is nothing to stop)."""
        self._offers = []

    # --- driving the engine ------------------------------------------------------------

    def _advance(self) -> bool:
        """Step the engine to the next decision the lever offers the agent; False once the
        run has reached its horizon instead."""
        engine, agent = self._engine, self._agent
        env, horizon_s = engine.env, engine.horizon_s
        while True:
            if agent.asked:
                agent.asked = False
                self._offers = self._offered(engine.state_view)
                if self._offers:
                    return True
                self._run_base()
            if env.peek() >= horizon_s:
                return False
            env.step()

    def _offered(self, state: SystemState) -> list[JobView | None]:
        """The decisions the agent takes now: all its lever offers, or for a lever that acts
        every `tick_s`, nothing before the next tick is due."""
        if self.lever.name == "jobs":
            return self.lever.offers(state)
        if state.now_s < self._next_agent_s:
            return []
        assert self._tick_s is not None
        self._next_agent_s = (state.now_s // self._tick_s + 1) * self._tick_s
        return self.lever.offers(state)

    def _run_base(self) -> None:
        """The base policy's actions now, but those of the lever's own types."""
        engine = self._engine
        for action in plugins.decide(self._base, engine.state_view):
            if not isinstance(action, self.lever.owns):
                engine.apply(action)

    def _finish(self) -> None:
        """Run to the horizon and assemble the results, as `Engine.run` and `simulate` do."""
        engine = self._engine
        engine.env.run(until=engine.horizon_s)
        for component in engine.components:
            component.close(engine.horizon_s)
        self.results = build_results(engine, time.perf_counter() - self._wall_s)
        self.results.meta["engine"] = {"kind": "event", "batch_refused": "sim.gym"}

    def _observe(self) -> object:
        job = self._offers[0] if self._offers else None
        return self.observer.observe(self._engine.state_view, job, self._flat)
