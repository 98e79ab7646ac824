"""The lever families an agent of `sim.gym.DcsimEnv` acts through, each a declared action
space and its translation into the engine's actions (docs/gym.md, "Levers").

- `JobsLever` ("jobs"): one decision per pending job, in queue order: start it now at the
  cleanest site with room, defer it by `defer_s`, or start it at site i; optionally under one
  of `cap_levels_w` (GPU power caps, W). A start the engine refuses (no room, the job's
  allowed sites or GPU models, a quota) leaves the job pending until the next decision point.
- `ServicesLever` ("services"): per (service, site): remove a replica, keep, or add one.
- `BatteryLever` ("battery"): per site with a battery: self-consumption (the default), or
  run it at a fraction of its rated power (negative: discharge).

A lever owns its action types: the base policy's actions of those types are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from gymnasium import spaces

from sim.api import (
    Action,
    Defer,
    JobView,
    Reject,
    Route,
    Scale,
    SetBattery,
    SetDirective,
    Start,
    SystemState,
)
from sim.errors import DcsimError, PolicyError

BATTERY_FRACTIONS = (-1.0, -0.5, 0.0, 0.5, 1.0)
"""`BatteryLever`'s power levels, fractions of each battery's rated power (after level 0,
self-consumption): full and half discharge, idle, half and full charge."""

Apply = Callable[[Action], None]
"""Carries an action out now (the engine's `apply`); PolicyError if it cannot."""


class Lever:
    """A family of decisions the agent takes, the rest going to the base policy."""

    name: str
    owns: tuple[type, ...]
    """Action types the agent decides: the base policy's actions of these types are dropped."""

    action_space: spaces.Space

    def offers(self, state: SystemState) -> list[JobView | None]:
        """The decisions to ask the agent for at this decision point, in order (a job for
        "jobs"; None, one decision of the whole lever, for the others)."""
        raise NotImplementedError

    def act(self, state: SystemState, target: JobView | None, action: object, apply: Apply) -> None:
        """Carry the agent's `action` about `target` out through `apply`."""
        raise NotImplementedError


class JobsLever(Lever):
    name = "jobs"
    owns = (Start, Defer, Reject)

    def __init__(self, sites: Sequence[str], defer_s: float, cap_levels_w: Sequence[float | None]):
        self.sites = tuple(sites)
        self.defer_s = defer_s
        self.cap_levels_w = tuple(cap_levels_w)
        self.choices = 2 + len(self.sites)
        """0: start at the cleanest site with room, 1: defer, 2 + i: start at site i."""
        self.action_space = spaces.Discrete(self.choices * len(self.cap_levels_w))

    def offers(self, state: SystemState) -> list[JobView | None]:
        return list(state.pending)

    def act(self, state: SystemState, target: JobView | None, action: object, apply: Apply) -> None:
        assert target is not None
        if target.state != "pending":
            return
        choice, level = divmod(int(action), len(self.cap_levels_w))  # type: ignore[call-overload]
        cap_w = self.cap_levels_w[level]
        if choice == 1:
            apply(Defer(target, state.now_s + self.defer_s))
            return
        if choice == 0:
            intensity = state.carbon_intensities(self.sites)
            order = [self.sites[i] for i in np.argsort(intensity, kind="stable")]
        else:
            order = [self.sites[choice - 2]]
        for site in order:
            try:
                apply(Start(target, site, gpu_cap_w=cap_w))
                return
            except PolicyError:
                continue


class ServicesLever(Lever):
    name = "services"
    owns = (Scale, Route, SetDirective)

    def __init__(self, deployments: Sequence[tuple[str, str]]):
        self.deployments = tuple(deployments)
        """(service, site) pairs, the order of the action's entries."""
        self.action_space = spaces.MultiDiscrete([3] * len(self.deployments))

    def offers(self, state: SystemState) -> list[JobView | None]:
        return [None]

    def act(self, state: SystemState, target: JobView | None, action: object, apply: Apply) -> None:
        for (name, site), step in zip(self.deployments, np.asarray(action), strict=True):
            if step == 1:
                continue
            service = state.service(name)
            replicas = service.replicas(site) + service.starting(site)
            try:
                apply(Scale(service, site, max(0, replicas + int(step) - 1)))
            except PolicyError:  # no free GPUs for one more: the service keeps its replicas
                continue


class BatteryLever(Lever):
    name = "battery"
    owns = (SetBattery,)

    def __init__(self, rated_kw: dict[str, float]):
        self.rated_kw = dict(rated_kw)
        """Per site with a battery, its rated power, kW."""
        self.action_space = spaces.MultiDiscrete([1 + len(BATTERY_FRACTIONS)] * len(self.rated_kw))

    def offers(self, state: SystemState) -> list[JobView | None]:
        return [None]

    def act(self, state: SystemState, target: JobView | None, action: object, apply: Apply) -> None:
        for (site, rated_kw), level in zip(self.rated_kw.items(), np.asarray(action), strict=True):
            if level == 0:
                apply(SetBattery(site))
            else:
                apply(SetBattery(site, power_kw=BATTERY_FRACTIONS[int(level) - 1] * rated_kw))


def make_lever(
    family: str,
    state: SystemState,
    n_jobs: int,
    defer_s: float,
    cap_levels_w: Sequence[float | None],
) -> Lever:
    """The lever `family` over the scenario `state` shows (`n_jobs` jobs in its workload);
    DcsimError naming what the scenario lacks if it cannot use it."""
    sites = state.sites
    if family == "jobs":
        if not n_jobs:
            raise DcsimError("sim.gym: levers='jobs' needs a scenario with jobs; it has none")
        return JobsLever(sites, defer_s, cap_levels_w)
    if family == "services":
        pairs = [(n, s) for n in state.services for s in state.service(n).sites]
        if not pairs:
            raise DcsimError("sim.gym: levers='services' needs a scenario with [[services]]")
        return ServicesLever(pairs)
    if family == "battery":
        rated = {}
        for site in sites:
            reading = state.onsite(site)
            if reading is not None and reading.battery_power_kw is not None:
                rated[site] = reading.battery_power_kw
        if not rated:
            raise DcsimError("sim.gym: levers='battery' needs a site with an on-site battery")
        return BatteryLever(rated)
    raise DcsimError(
        f"sim.gym: levers must be one of 'jobs', 'services', 'battery', got {family!r}"
    )
