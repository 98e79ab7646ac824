"""`carbon_aware_directives`: per service, the generation directive level of the best
quality whose carbon per request meets a budget, never below the quality floor. In the
spirit of Sprout (Li, Jiang, Gadepally, Tiwari, "Sprout: Green Generative AI with
Carbon-Efficient LLM Inference", EMNLP 2024), docs/policies-carbon-aware-directives.md.

Every `tick_s` (and at every other decision point), for each service with more than one
directive level:

1. For each level: the carbon per request of the replicas in force (serving or starting;
   none: its first deployment), capacity-weighted, each weighted by its grid as
   `carbon_aware_variants` does (`policies.kit.inference`), and the lowest quality a
   request gets (variant quality - the level's penalty).
2. Levels whose lowest quality is below the service's `quality_floor` are out (if all are,
   the one of least penalty is kept).
3. Of the others: the least penalty (best quality) among those within the budget; if none
   is, the least carbon. A `SetDirective` when it differs from the level in force.

One level per tick for the whole service: Sprout's optimizer mixes levels over requests
(a linear program); this is the per-tick simplification. An adjuster: alone it sets
directives on top of `run_now`'s plan; in a `chain` after `serve_autoscale` or
`carbon_aware_variants` it adds its `SetDirective`s to their plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.kit import Adjuster
from policies.kit.inference import ServingCarbon
from sim.api import Action, ServiceView, SetDirective, SystemState

__all__ = ["CarbonAwareDirectives", "LevelFigures"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class LevelFigures:
    """One directive level of a service with its replicas in force."""

    name: str
    penalty: float
    """Its quality penalty, points."""
    carbon_g: float
    """Weighted carbon per request, g."""
    carbon_at_mean_g: float
    """Carbon per request at the sites' forecast mean intensity, g."""
    min_quality: float
    """Lowest quality a request gets (inf: no variant in force has a score)."""


@dataclass
class CarbonAwareDirectives(Adjuster):
    budget_g_per_request: float | None = None
    """Carbon budget per request at the forecast mean intensity, g; None: that of the
    service's first level (normal) there, so the budget binds only on a grid dirtier than
    its forecast mean."""
    tightening: float = 1.0
    """The budget is compared with carbon x (CI now / CI mean) ** tightening (0: a fixed
    budget in grams)."""
    window_s: float = 86400.0
    """Window of the forecast mean intensity, s from now."""
    tick_s: float = 300.0
    """Decide at least this often, s."""

    def __post_init__(self) -> None:
        budget = self.budget_g_per_request
        checks = (
            ("budget_g_per_request", budget is None or 0 < budget < math.inf, "> 0 or None"),
            ("tightening", 0 <= self.tightening <= 10, "in [0, 10]"),
            ("window_s", 0 < self.window_s < math.inf, "> 0"),
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """The planned `actions`, then a `SetDirective` per service whose level changes."""
        grid = ServingCarbon(state, self.window_s, self.tightening)
        plan = list(actions)
        for name in state.services:
            svc = state.service(name)
            if len(svc.directives) < 2:
                continue
            level = self.choose(svc, grid)
            if level != svc.directive:
                plan.append(SetDirective(svc, level))
        return plan

    def figures(self, svc: ServiceView, grid: ServingCarbon) -> list[LevelFigures]:
        """Each level's carbon and lowest quality with the replicas in force (step 1)."""
        in_force = [
            (site, v, svc.replicas(site, v) + svc.starting(site, v)) for site, v in svc.deployments
        ]
        in_force = [d for d in in_force if d[2] > 0] or [(*svc.deployments[0], 1)]
        out = []
        for level in svc.directives:
            cap = weighted = at_mean = 0.0
            lowest = math.inf
            for site, variant, n in in_force:
                point = svc.replica_point(site, variant, level.name)
                share = n * point.capacity_rps
                cap += share
                weighted += share * grid.weighted_g_per_request(site, point)
                at_mean += share * grid.g_per_request_at_mean(site, point)
                if point.quality is not None:
                    lowest = min(lowest, point.quality)
            out.append(
                LevelFigures(
                    level.name, level.quality_penalty, weighted / cap, at_mean / cap, lowest
                )
            )
        return out

    def choose(self, svc: ServiceView, grid: ServingCarbon) -> str:
        """The level to run (steps 2-3)."""
        levels = self.figures(svc, grid)
        floor = svc.config.quality_floor
        allowed = [lv for lv in levels if floor is None or lv.min_quality >= floor - _EPS]
        if not allowed:
            return min(levels, key=lambda lv: lv.penalty).name
        budget = self.budget_g_per_request
        if budget is None:
            budget = levels[0].carbon_at_mean_g
        within = [lv for lv in allowed if lv.carbon_g <= budget + _EPS]
        if within:
            return min(within, key=lambda lv: (lv.penalty, lv.carbon_g)).name
        return min(allowed, key=lambda lv: (lv.carbon_g, lv.penalty)).name
