"""`carbon_aware_variants`: per service, the replicas of each model variant at each site
(its deployments) of the best served quality within the latency target, a carbon budget
that tightens on a dirty grid, the quality floor and the free GPUs. In the spirit of Clover
(Li, Samsi, Gadepally, Tiwari, "Clover: Toward Sustainable AI with Carbon-Aware Machine
Learning Inference Service", SC 2023), docs/policies-carbon-aware-variants.md.

Every `tick_s` (and at every other decision point), for each service:

1. Need: the forecast peak rate over `lookahead_s` times `1 + headroom` (requests/s), one
   more replica's worth after a step that missed the SLO or dropped requests; at least
   `min_replicas` replicas.
2. Options: its deployments on whole GPUs, each with one replica's capacity, quality (the
   directive in force included) and carbon per request weighted by its grid
   (`policies.kit.inference`). Those below the service's `quality_floor` are left out
   while a mix of the others is feasible.
3. Search (`best_mix`, exact): over replica counts that cover the need with no replica to
   spare, whose new replicas fit the free GPUs, the mix of the highest capacity-weighted
   quality whose capacity-weighted carbon per request is within the budget; if none is,
   the one of least carbon per request. Ties: less carbon, fewer new GPUs, fewer changes.
4. Switch make-before-break: scale up first; scale down only when no replica of the service
   is in its cold start, so the old variant serves until the new one is ready. The mix in
   force stays while it is as good and not oversized by more than `scale_down_margin`.

An adjuster like `serve_autoscale`: its new replicas' GPUs are booked first, then the
planned job starts that still fit. It replaces `serve_autoscale`, not follows it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.kit import Adjuster, FreeGpus
from policies.kit.inference import ServingCarbon, forecast_peak_rps, missed_slo
from sim.api import Action, Scale, ServiceView, SystemState

__all__ = ["CarbonAwareVariants", "Mix", "Option", "best_mix"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Option:
    """One deployment of a service as the search sees it."""

    site: str
    variant: str
    gpu: str
    gpus: int
    """GPUs per replica."""
    capacity_rps: float
    """Requests/s of one replica with its batch full."""
    quality: float
    """Its requests' quality (0 for a variant without a score)."""
    carbon_g: float
    """Weighted carbon per request of one replica, g (`ServingCarbon`)."""
    have: int
    """Replicas it has now (serving or starting)."""


@dataclass(frozen=True, slots=True)
class Mix:
    """Replica counts, one per option, with their figures."""

    counts: tuple[int, ...]
    capacity_rps: float
    quality: float
    """Capacity-weighted mean quality (what requests split by ready capacity get)."""
    carbon_g: float
    """Capacity-weighted mean weighted carbon per request, g."""
    new_gpus: int
    changes: int

    def rank(self, budget_g: float) -> tuple[bool, float, float, int, int]:
        """Larger is better: within the budget, then quality (else less carbon), then less
        carbon, fewer new GPUs, fewer replica changes."""
        meets = self.carbon_g <= budget_g + _EPS
        first = round(self.quality, 9) if meets else -round(self.carbon_g, 12)
        return meets, first, -round(self.carbon_g, 12), -self.new_gpus, -self.changes


def _mix(options: Sequence[Option], counts: Sequence[int]) -> Mix:
    """The figures of `counts` replicas of `options`."""
    cap = sum(n * o.capacity_rps for n, o in zip(counts, options, strict=True))
    q = sum(n * o.capacity_rps * o.quality for n, o in zip(counts, options, strict=True))
    g = sum(n * o.capacity_rps * o.carbon_g for n, o in zip(counts, options, strict=True))
    return Mix(
        tuple(counts),
        cap,
        q / cap if cap > 0 else 0.0,
        g / cap if cap > 0 else 0.0,
        sum(max(0, n - o.have) * o.gpus for n, o in zip(counts, options, strict=True)),
        sum(abs(n - o.have) for n, o in zip(counts, options, strict=True)),
    )


def best_mix(
    options: Sequence[Option],
    need_rps: float,
    min_replicas: int,
    budget_g: float,
    free: dict[tuple[str, str], int],
) -> Mix | None:
    """The best mix (`Mix.rank`) among the minimal covers: replica counts whose capacity is
    at least `need_rps` with at least `min_replicas` replicas, none of which could be taken
    away keeping both, and whose new replicas (above `have`) fit the `free` GPUs per (site,
    GPU model). None if no such mix exists. Exact: a depth-first enumeration, options by
    descending quality, pruned by capacity, GPUs and (once a mix within the budget is
    known) an upper bound on the quality still reachable."""
    order = sorted(range(len(options)), key=lambda k: (-options[k].quality, options[k].carbon_g))
    opts = [options[k] for k in order]
    c_max = max((o.capacity_rps for o in opts), default=0.0)
    counts = [0] * len(opts)
    left = dict(free)
    best: Mix | None = None
    best_rank: tuple | None = None

    def bound(i: int, cap: float, qsum: float) -> float:
        """Highest mean quality a completion from option `i` on can reach."""
        if i >= len(opts):
            return qsum / cap if cap > 0 else 0.0
        q_top = opts[i].quality
        lo = max(need_rps - cap, 0.0)
        ends = (lo, lo + c_max)
        return max((qsum + x * q_top) / (cap + x) if cap + x > 0 else q_top for x in ends)

    def visit(i: int, cap: float, qsum: float, n_total: int) -> None:
        nonlocal best, best_rank
        covered = cap >= need_rps - _EPS and n_total >= min_replicas
        if covered or i == len(opts):
            if covered and _minimal(opts, counts, cap, n_total, need_rps, min_replicas):
                mix = _mix(opts, counts)
                rank = mix.rank(budget_g)
                if best_rank is None or rank > best_rank:
                    best, best_rank = mix, rank
            return
        if best is not None and best_rank is not None and best_rank[0]:
            if bound(i, cap, qsum) < best.quality - _EPS:
                return
        o = opts[i]
        pool = (o.site, o.gpu)
        by_need = math.ceil(max(need_rps - cap, 0.0) / o.capacity_rps - _EPS)
        most = max(by_need, min_replicas - n_total, 0)
        most = min(most, o.have + left.get(pool, 0) // o.gpus)
        for n in range(most, -1, -1):
            taken = max(0, n - o.have) * o.gpus
            counts[i] = n
            left[pool] = left.get(pool, 0) - taken
            more = n * o.capacity_rps
            visit(i + 1, cap + more, qsum + more * o.quality, n_total + n)
            left[pool] += taken
        counts[i] = 0

    visit(0, 0.0, 0.0, 0)
    if best is None:
        return None
    back = [0] * len(options)
    for pos, k in enumerate(order):
        back[k] = best.counts[pos]
    return _mix(options, back)


def _minimal(
    opts: Sequence[Option],
    counts: Sequence[int],
    cap: float,
    n_total: int,
    need_rps: float,
    min_replicas: int,
) -> bool:
    """No replica of `counts` can be taken away keeping the need and `min_replicas`."""
    if n_total - 1 < min_replicas:
        return True
    smallest = min(o.capacity_rps for n, o in zip(counts, opts, strict=True) if n > 0)
    return cap - smallest < need_rps - _EPS


@dataclass
class CarbonAwareVariants(Adjuster):
    headroom: float = 0.25
    """Spare capacity over the forecast peak rate (0.25: replicas for 125 % of it)."""
    lookahead_s: float = 900.0
    """How far ahead the forecast peak is taken, s (at least a cold start)."""
    tick_s: float = 300.0
    """Decide at least this often, s."""
    min_replicas: int = 1
    """Replicas each service keeps (all its deployments together), however low its rate."""
    scale_down_margin: float = 0.2
    """Keep the mix in force while it is as good and its capacity is at most
    need / (1 - margin)."""
    budget_g_per_request: float | None = None
    """Carbon budget per request at the forecast mean intensity, g; None: that of the
    service's best-quality deployment (its budget binds only on a grid dirtier than usual)."""
    tightening: float = 1.0
    """The budget is compared with carbon x (CI now / CI mean) ** tightening (0: a fixed
    budget in grams)."""
    window_s: float = 86400.0
    """Window of the forecast mean intensity, s from now."""

    def __post_init__(self) -> None:
        budget = self.budget_g_per_request
        checks = (
            ("headroom", 0 <= self.headroom <= 10, "in [0, 10]"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
            ("min_replicas", self.min_replicas >= 0, ">= 0"),
            ("scale_down_margin", 0 <= self.scale_down_margin < 1, "in [0, 1)"),
            ("budget_g_per_request", budget is None or 0 < budget < math.inf, "> 0 or None"),
            ("tightening", 0 <= self.tightening <= 10, "in [0, 10]"),
            ("window_s", 0 < self.window_s < math.inf, "> 0"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """Set each service's mix (its new GPUs booked first), then the planned `actions`
        that still fit in the GPUs left."""
        free = FreeGpus(state)
        grid = ServingCarbon(state, self.window_s, self.tightening)
        plan: list[Action] = []
        for name in state.services:
            plan += self._switch(state.service(name), grid, free)
        return plan + [a for a in actions if free.book(a)]

    def options(self, svc: ServiceView, grid: ServingCarbon) -> list[Option]:
        """The service's deployments on whole GPUs as search options (step 2)."""
        spec = {v.name: v for v in svc.variants}
        out = []
        for site, name in svc.deployments:
            v = spec[name]
            if v.mig_profile is not None:
                continue
            point = svc.replica_point(site, name)
            have = svc.replicas(site, name) + svc.starting(site, name)
            quality = 0.0 if point.quality is None else point.quality
            carbon = grid.weighted_g_per_request(site, point)
            out.append(
                Option(
                    site, name, v.gpu, v.gpus_per_replica, point.capacity_rps, quality, carbon, have
                )
            )
        return out

    def budget_g(self, svc: ServiceView, grid: ServingCarbon, options: Sequence[Option]) -> float:
        """The budget per request at the forecast mean intensity, g (the parameter, else the
        carbon of the best-quality option there, the least carbon of equal ones)."""
        if self.budget_g_per_request is not None:
            return self.budget_g_per_request
        top = max(options, key=lambda o: (o.quality, -o.carbon_g))
        return grid.g_per_request_at_mean(top.site, svc.replica_point(top.site, top.variant))

    def need_rps(self, svc: ServiceView, options: Sequence[Option]) -> float:
        """Capacity needed, requests/s (step 1)."""
        need = forecast_peak_rps(svc, self.lookahead_s) * (1.0 + self.headroom)
        if missed_slo(svc):
            have = sum(o.have * o.capacity_rps for o in options)
            need = max(need, have + min(o.capacity_rps for o in options))
        return need

    def choose(
        self, svc: ServiceView, grid: ServingCarbon, free: FreeGpus, options: Sequence[Option]
    ) -> Mix:
        """The mix to run (steps 1-3); when no mix covers the need, the mix in force with
        as many replicas more as the free GPUs hold (`_best_effort`)."""
        need = self.need_rps(svc, options)
        budget = self.budget_g(svc, grid, options)
        pools = {(o.site, o.gpu): free.at(o.site).get(o.gpu, 0) for o in options}
        floor = svc.config.quality_floor
        above = [o for o in options if floor is None or o.quality >= floor - _EPS]
        chosen = None
        if above and len(above) < len(options):
            found = best_mix(above, need, self.min_replicas, budget, pools)
            if found is not None:
                chosen = _mix(options, _spread(options, above, found.counts))
        if chosen is None:
            chosen = best_mix(options, need, self.min_replicas, budget, pools)
        current = _mix(options, [o.have for o in options])
        if chosen is None:
            return _best_effort(options, above or options, pools, need)
        return current if self._keeps(current, chosen, need, budget, options, floor) else chosen

    def _keeps(
        self,
        current: Mix,
        chosen: Mix,
        need: float,
        budget: float,
        options: Sequence[Option],
        floor: float | None,
    ) -> bool:
        """The mix in force stays: it covers the need, is not oversized, keeps the floor
        where the chosen mix does, and ranks as high as the chosen one but for its size."""
        if current.capacity_rps < need - _EPS or sum(current.counts) < self.min_replicas:
            return False
        if need < (1.0 - self.scale_down_margin) * current.capacity_rps:
            return False
        if floor is not None and _min_quality(current, options) < floor - _EPS:
            if _min_quality(chosen, options) >= floor - _EPS:
                return False
        return current.rank(budget)[:3] >= chosen.rank(budget)[:3]

    def _switch(self, svc: ServiceView, grid: ServingCarbon, free: FreeGpus) -> list[Action]:
        """Scale the service to its chosen mix, make-before-break (step 4)."""
        options = self.options(svc, grid)
        if not options:
            return []
        mix = self.choose(svc, grid, free, options)
        starting = any(svc.starting(o.site, o.variant) for o in options)
        ups = [(o, n) for o, n in zip(options, mix.counts, strict=True) if n > o.have]
        downs = [(o, n) for o, n in zip(options, mix.counts, strict=True) if n < o.have]
        actions: list[Action] = []
        for o, n in ups:
            if free.take(o.site, o.gpu, (n - o.have) * o.gpus) is not None:
                actions.append(Scale(svc, o.site, n, o.variant))
        if not starting and len(actions) == len(ups) == 0:
            actions += [Scale(svc, o.site, n, o.variant) for o, n in downs]
        return actions


def _min_quality(mix: Mix, options: Sequence[Option]) -> float:
    """The lowest quality among the options `mix` runs (inf: none)."""
    used = [o.quality for o, n in zip(options, mix.counts, strict=True) if n > 0]
    return min(used, default=math.inf)


def _spread(
    options: Sequence[Option], subset: Sequence[Option], counts: Sequence[int]
) -> list[int]:
    """`counts` of the options in `subset`, as counts over all `options` (0 elsewhere)."""
    by_key = {(o.site, o.variant): n for o, n in zip(subset, counts, strict=True)}
    return [by_key.get((o.site, o.variant), 0) for o in options]


def _best_effort(
    options: Sequence[Option],
    preferred: Sequence[Option],
    free: dict[tuple[str, str], int],
    need_rps: float,
) -> Mix:
    """No mix covers the need: the replicas in force, plus replicas of the `preferred`
    options (the most requests/s per GPU first) while GPUs are free and the need is not
    covered."""
    counts = {(o.site, o.variant): o.have for o in options}
    left = dict(free)
    cap = sum(o.have * o.capacity_rps for o in options)
    for o in sorted(preferred, key=lambda o: -o.capacity_rps / o.gpus):
        pool = (o.site, o.gpu)
        while cap < need_rps and left.get(pool, 0) >= o.gpus:
            left[pool] -= o.gpus
            counts[(o.site, o.variant)] += 1
            cap += o.capacity_rps
    return _mix(options, [counts[(o.site, o.variant)] for o in options])
