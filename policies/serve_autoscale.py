"""`serve_autoscale`: replicas for each inference service to keep its latency targets.

Every `tick_s` (and at every other decision point), for each service:

1. The replicas needed: the highest arrival rate over the next `lookahead_s` (the
   service's rate forecast, and the rate of the last step if higher), times
   `1 + headroom`, over what one replica serves with its batch full (`capacity_rps` at the
   service's origin). At least `min_replicas`.
2. Feedback: when the last step met the SLO for fewer than `percentile` % of its requests,
   or dropped one or more (the fluid level's expected drops are fractional), one replica
   more than it has now (if more are needed than that, those).
3. Scale up at the service's sites in order (its first site, the requests' origin by
   default, first), as far as free GPUs allow; scale down from the last site first, and
   only when the replicas needed are at most `1 - scale_down_margin` of the replicas
   running, so the count does not flap.

A baseline: it moves no requests (`Route`) and caps no GPUs. It is an adjuster: after
any training-job scheduler in a `chain` (alone: after `run_now`), it books the GPUs its
new replicas take first and holds back the planned starts that no longer fit, so the
services keep their targets and the jobs get the GPUs left.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.kit import Adjuster, FreeGpus
from policies.kit.inference import forecast_peak_rps, missed_slo
from sim.api import Action, Scale, ServiceView, SystemState

__all__ = ["ServeAutoscale"]


@dataclass
class ServeAutoscale(Adjuster):
    headroom: float = 0.25
    """Spare capacity over the forecast peak rate (0.25: replicas for 125 % of it)."""
    lookahead_s: float = 900.0
    """How far ahead the forecast peak is taken, s (at least a cold start)."""
    tick_s: float = 300.0
    """Decide at least this often, s."""
    min_replicas: int = 1
    """Replicas each service keeps, however low its rate."""
    scale_down_margin: float = 0.2
    """Scale down only when the replicas needed are at most (1 - margin) x those running."""

    def __post_init__(self) -> None:
        checks = (
            ("headroom", 0 <= self.headroom <= 10, "in [0, 10]"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
            ("min_replicas", self.min_replicas >= 0, ">= 0"),
            ("scale_down_margin", 0 <= self.scale_down_margin < 1, "in [0, 1)"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """Scale the services (their new GPUs booked first), then the planned `actions` that
        still fit in the GPUs left."""
        free = FreeGpus(state)
        plan: list[Action] = []
        for name in state.services:
            plan += self._scale(state.service(name), free)
        return plan + [a for a in actions if free.book(a)]

    def needed(self, svc: ServiceView) -> int:
        """Replicas `svc` needs for its forecast peak rate with headroom (step 1)."""
        peak = forecast_peak_rps(svc, self.lookahead_s)
        per_replica = svc.capacity_rps(svc.sites[0])
        return max(self.min_replicas, math.ceil(peak * (1.0 + self.headroom) / per_replica))

    def _scale(self, svc: ServiceView, free: FreeGpus) -> list[Action]:
        sites = svc.sites
        have = {s: svc.replicas(s) + svc.starting(s) for s in sites}
        total = sum(have.values())
        need = self.needed(svc)
        missed = missed_slo(svc)
        if missed:
            need = max(need, total + 1)
        want = dict(have)
        if need > total:
            more = need - total
            per = svc.config.gpus_per_replica
            for s in sites:
                while more and free.take(s, svc.config.gpu, per) is not None:
                    want[s] += 1
                    more -= 1
        elif not missed and need <= (1.0 - self.scale_down_margin) * total:
            fewer = total - need
            for s in reversed(sites):
                cut = min(fewer, want[s])
                want[s] -= cut
                fewer -= cut
        return [Scale(svc, s, want[s]) for s in sites if want[s] != have[s]]
