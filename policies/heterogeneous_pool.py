"""`heterogeneous_pool`: per service, the number of replicas of each GPU type that serves the
most of its forecast load within its latency target and its cost budget.

In the spirit of Kairos (Li, Samsi, Gadepally and Tiwari, "Kairos: Building Cost-Efficient
Machine Learning Inference Systems with Heterogeneous Cloud Resources", HPDC 2023): a
service declares variants of its model on other GPU types, and a mix of GPU types can serve
more within a budget than the best single type (docs/policies-heterogeneous-pool.md). Every
`tick_s` (and at every other decision point), for each service:

1. Deployments it may use: each (site, variant) the site has GPUs for, except those whose
   round trip from the requests' origin is not under the time-to-first-token target, those
   whose quality (under the directive in force) is under the service's `quality_floor`,
   variants on MIG slices (left alone: `mig_partitioner`'s business), and, under a
   `budget_per_h`, those without a price. One replica of a deployment serves
   `replica_point(...).capacity_rps` (its batch full: the most it serves within its
   latency) and costs `replica_point(...).price_per_h`.
2. The demand: the highest arrival rate over the next `lookahead_s` (the rate forecast, and
   the last step's rate if higher) times `1 + headroom`; after a step that missed the SLO
   or dropped requests, at least the capacity it has now plus its smallest replica's.
3. The mix: the current one while it covers the demand, fits the budget and is not
   oversized (its capacity x (1 - `scale_down_margin`) under the demand); else the best
   mix, found exactly (`best_mix`: by enumeration, by integer programs above
   `MAX_ENUMERATED_MIXES` mixes): the most served load min(capacity, demand) within the
   budget and the free GPUs, then the lowest price, then the fewest GPUs, then the fewest
   replicas changed, then the fewest replicas of the first deployment, of the second, ...
   With a mix that covers the demand, that is the cheapest such mix; without one, the
   most throughput the budget buys.
4. The change: when the budget has room for the new replicas next to the old ones (the
   removed ones counted as held for `drain_s`, as while draining their requests they still
   cost), the new ones start first and the old ones go once the ready replicas left cover
   the load; else the old ones go first and the new ones start as the budget frees.

An adjuster, like `serve_autoscale` (which it replaces): after any training-job scheduler in
a `chain` (alone: after `run_now`), it books its new replicas' GPUs first and holds back the
planned starts that no longer fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policies.kit import Adjuster, FreeGpus
from policies.kit.inference import forecast_peak_rps, missed_slo
from sim.api import Action, Scale, ServiceView, SystemState

__all__ = ["Deployment", "HeterogeneousPool", "best_mix"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Deployment:
    """One (site, variant) of a service as the mix sees it."""

    site: str
    variant: str | None
    """The variant's name (None: the service's own model, as `Scale` names it)."""
    gpu: str
    gpus: int
    """GPUs one replica holds."""
    capacity_rps: float
    """Requests/s one replica serves with its batch full."""
    price_per_h: float
    """Price of one replica per hour, the scenario's currency (NaN: no price)."""
    have: int
    """Replicas now, serving or in their cold start."""
    ready: int
    """Replicas serving now."""


@dataclass
class HeterogeneousPool(Adjuster):
    headroom: float = 0.25
    """Spare capacity over the forecast peak rate (0.25: replicas for 125 % of it)."""
    lookahead_s: float = 900.0
    """How far ahead the forecast peak is taken, s (at least a cold start)."""
    tick_s: float = 60.0
    """Decide at least this often, s (a change the budget splits in two, old replicas out
    and then new ones in, finishes at the first tick `drain_s` after it began)."""
    min_replicas: int = 1
    """Replicas each service keeps, however low its rate (fewer if its budget buys fewer)."""
    scale_down_margin: float = 0.2
    """Re-plan a mix that covers the demand only when its capacity x (1 - margin) does too."""
    drain_s: float = 60.0
    """How long a replica taken away is counted against the budget, s (it holds its GPUs,
    and costs, until its last request ends)."""
    min_saving: float = 0.1
    """A mix that covers the demand within the budget is replaced by one that serves no
    more only if that costs less than (1 - min_saving) x as much: a switch costs cold
    starts (and, under a budget that cannot hold both, the requests dropped meanwhile)."""
    settle_s: float = 300.0
    """After a change of a service's mix, its SLO misses for this long are the change's
    (cold starts, a budget-split switch) and do not raise its demand, s."""

    def __post_init__(self) -> None:
        checks = (
            ("headroom", 0 <= self.headroom <= 10, "in [0, 10]"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
            ("min_replicas", self.min_replicas >= 0, ">= 0"),
            ("scale_down_margin", 0 <= self.scale_down_margin < 1, "in [0, 1)"),
            ("drain_s", 0 <= self.drain_s < math.inf, ">= 0"),
            ("min_saving", 0 <= self.min_saving < 1, "in [0, 1)"),
            ("settle_s", 0 <= self.settle_s < math.inf, ">= 0"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")
        self._run: object = None  # the state of the run the memory below belongs to
        self._draining: dict[str, list[tuple[float, float]]] = {}
        """Per service: (until when, price per hour) of the replicas it took away."""
        self._changed_s: dict[str, float] = {}
        """Per service: when this policy last changed its mix, s."""

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """Scale the services (their new GPUs booked first), then the planned `actions` that
        still fit in the GPUs left."""
        if self._run is not state:
            self._run, self._draining, self._changed_s = state, {}, {}
        free = FreeGpus(state)
        plan: list[Action] = []
        for name in state.services:
            plan += self._scale(state.service(name), free, state.now_s)
        return plan + [a for a in actions if free.book(a)]

    def demand_rps(
        self, svc: ServiceView, deployments: Sequence[Deployment], settled: bool = True
    ) -> float:
        """The load the mix must cover, requests/s (step 2); SLO feedback only when the
        mix is `settled` (no change within `settle_s`) and none of it is starting."""
        demand = forecast_peak_rps(svc, self.lookahead_s) * (1.0 + self.headroom)
        starting = any(d.have > d.ready for d in deployments)
        if deployments and settled and not starting and missed_slo(svc):
            now = sum(d.have * d.capacity_rps for d in deployments)
            demand = max(demand, now + min(d.capacity_rps for d in deployments))
        return demand

    def deployments(self, svc: ServiceView) -> tuple[list[Deployment], list[Deployment]]:
        """(the deployments the mix may use, those it may not: step 1), MIG ones left out."""
        cfg = svc.config
        own = svc.variants[0].name
        specs = {v.name: v for v in svc.variants}
        usable: list[Deployment] = []
        barred: list[Deployment] = []
        for site, name in svc.deployments:
            spec = specs[name]
            if spec.mig_profile is not None:
                continue
            variant = None if name == own else name
            point = svc.replica_point(site, variant)
            d = Deployment(
                site=site,
                variant=variant,
                gpu=spec.gpu,
                gpus=spec.gpus_per_replica,
                capacity_rps=point.capacity_rps,
                price_per_h=point.price_per_h,
                have=svc.replicas(site, variant) + svc.starting(site, variant),
                ready=svc.replicas(site, variant),
            )
            ok = (
                svc.rtt_s(site) * 1000.0 < cfg.slo.ttft_ms
                and not (
                    cfg.quality_floor is not None
                    and point.quality is not None
                    and point.quality < cfg.quality_floor
                )
                and not (cfg.budget_per_h is not None and math.isnan(point.price_per_h))
            )
            (usable if ok else barred).append(d)
        return usable, barred

    def _scale(self, svc: ServiceView, free: FreeGpus, now_s: float) -> list[Action]:
        """The `Scale`s of one service (steps 1-4), the GPUs of its new replicas taken."""
        usable, barred = self.deployments(svc)
        budget = math.inf if svc.config.budget_per_h is None else svc.config.budget_per_h
        changed_s = self._changed_s.get(svc.name, -math.inf)
        demand = self.demand_rps(svc, usable, now_s - changed_s >= self.settle_s)
        want = [d.have for d in usable]
        if any(d.have for d in barred) or not self._keeps(usable, demand, budget):
            want = best_mix(usable, demand, budget, _pool_rooms(usable, free), self.min_replicas)
            if not any(d.have for d in barred) and not self._worth(usable, want, demand, budget):
                want = [d.have for d in usable]
        draining = [(t, p) for t, p in self._draining.get(svc.name, []) if t > now_s]
        held = _cost([*usable, *barred], [d.have for d in (*usable, *barred)])
        new = self._change(usable, want, demand, budget - held - sum(p for _, p in draining), free)
        plan = [(d, 0) for d in barred if d.have] + list(zip(usable, new, strict=True))
        for d, n in plan:  # replicas taken out of service cost until they have drained
            gone = max(d.ready - n, 0) * d.price_per_h
            if gone > 0:
                draining.append((now_s + self.drain_s, gone))
        self._draining[svc.name] = draining
        changed = sorted(
            ((d, n) for d, n in plan if n != d.have),
            key=lambda dn: dn[1] > dn[0].have,  # the ones going first
        )
        if changed:
            self._changed_s[svc.name] = now_s
        return [Scale(svc, d.site, n, d.variant) for d, n in changed]

    @staticmethod
    def _change(
        usable: Sequence[Deployment],
        want: Sequence[int],
        demand_rps: float,
        room_per_h: float,
        free: FreeGpus,
    ) -> list[int]:
        """Replicas per deployment from now on the way to `want` (step 4): the new ones that
        the budget's room (`room_per_h`, the old and draining replicas counted) and the free
        GPUs allow; the old ones go now unless all new ones could start and the ready
        replicas left would not yet serve what `want` serves."""
        have = [d.have for d in usable]
        ups = [max(w - h, 0) for w, h in zip(want, have, strict=True)]
        started = _start(usable, ups, room_per_h, free)
        pairs = list(zip(usable, want, strict=True))
        ready_left = sum(min(d.ready, w) * d.capacity_rps for d, w in pairs)
        served = min(demand_rps, sum(w * d.capacity_rps for d, w in pairs))
        new = [h + s for h, s in zip(have, started, strict=True)]
        if started != ups or ready_left >= served - _EPS:
            new = [min(n, w) for n, w in zip(new, want, strict=True)]
        return new

    def _worth(
        self, usable: Sequence[Deployment], want: Sequence[int], demand: float, budget: float
    ) -> bool:
        """Whether `want` is worth switching to from the current mix: the current one does
        not fit the budget or has too few replicas, `want` serves more of the demand, or it
        costs less than (1 - min_saving) x the current (unpriced: always worth it)."""
        have = [d.have for d in usable]
        current = _cost(usable, have)
        if current > budget + _EPS or sum(have) < self.min_replicas:
            return True
        serves = [
            min(demand, sum(n * d.capacity_rps for d, n in zip(usable, mix, strict=True)))
            for mix in (have, want)
        ]
        if serves[1] > serves[0] + _EPS:
            return True
        return _cost(usable, want) < (1.0 - self.min_saving) * current - _EPS

    def _keeps(self, usable: Sequence[Deployment], demand: float, budget: float) -> bool:
        """Whether the current mix stays (step 3): it covers the demand, fits the budget and
        is not oversized."""
        have = [d.have for d in usable]
        capacity = sum(d.have * d.capacity_rps for d in usable)
        return (
            sum(have) >= self.min_replicas
            and _cost(usable, have) <= budget + _EPS
            and demand <= capacity
            and capacity * (1.0 - self.scale_down_margin) < demand
        )


MAX_ENUMERATED_MIXES = 200_000
"""Most mixes `best_mix` enumerates (the product of the count ranges, computed before any is
built): about 30 MB of rows for 7 deployments. Above it, the same choice by integer
programs (`scipy.optimize.milp`)."""

_TIE = 1e-6
"""Values of a criterion within _TIE x max(1, |best value|) of the best are equal: sums of
capacities or prices equal but for their rounding tie (and go to the next criterion), and
HiGHS's tolerances (1e-7 on constraints, 1e-6 on the objective) stay within it."""


def best_mix(
    deployments: Sequence[Deployment],
    demand_rps: float,
    budget_per_h: float,
    pool_rooms: dict[tuple[str, str], int],
    min_replicas: int = 0,
) -> list[int]:
    """Replicas per deployment, exactly: among the mixes within `budget_per_h` (math.inf:
    none) and the GPUs of each pool (`pool_rooms`: (site, GPU model) -> GPUs the service may
    hold there), the one with at least `min_replicas` replicas if any, then the most served
    load min(capacity, demand), the lowest price (left out when a deployment has no price),
    the fewest GPUs, the fewest replicas changed, and the fewest replicas of the first
    deployment, then of the second, and so on; each criterion keeps the mixes within
    `_TIE` of its best. The counts are bounded by the pools, the budget and ceil(demand /
    capacity) (a replica more than that never serves more); up to `MAX_ENUMERATED_MIXES`
    mixes in the product of those ranges, every one is evaluated with numpy; above, each
    criterion in turn is an integer program (`scipy.optimize.milp`), its best value then a
    constraint of the next."""
    if not deployments:
        return []
    problem = _MixProblem.of(deployments, demand_rps, budget_per_h, pool_rooms, min_replicas)
    if math.prod(b + 1 for b in problem.bounds) <= MAX_ENUMERATED_MIXES:
        mix = _enumerated(problem)
    else:
        mix = _solved(problem)
    return [int(n) for n in mix]


@dataclass(frozen=True)
class _MixProblem:
    """`best_mix`'s problem over the vectors z = (n, s, u): the counts n, the served load s
    = min(capacities @ n, demand) and the replicas changed per deployment u = |n - have|."""

    capacities_rps: np.ndarray
    prices_per_h: np.ndarray
    """Unpriced deployments count 0 (they are not used under a budget)."""
    priced: bool
    gpus: np.ndarray
    have: np.ndarray
    bounds: list[int]
    demand_rps: float
    budget_per_h: float
    members: np.ndarray
    """Pools x deployments: 1 where the deployment draws on the pool."""
    rooms: np.ndarray
    """GPUs the service may hold per pool."""
    min_replicas: int

    @classmethod
    def of(
        cls,
        deployments: Sequence[Deployment],
        demand_rps: float,
        budget_per_h: float,
        pool_rooms: dict[tuple[str, str], int],
        min_replicas: int,
    ) -> _MixProblem:
        prices = np.array([d.price_per_h for d in deployments])
        pools = sorted({(d.site, d.gpu) for d in deployments})
        return cls(
            capacities_rps=np.array([d.capacity_rps for d in deployments]),
            prices_per_h=np.nan_to_num(prices),
            priced=not np.isnan(prices).any(),
            gpus=np.array([d.gpus for d in deployments]),
            have=np.array([d.have for d in deployments]),
            bounds=[
                _bound(d, demand_rps, budget_per_h, pool_rooms, min_replicas) for d in deployments
            ],
            demand_rps=demand_rps,
            budget_per_h=budget_per_h,
            members=np.array([[(d.site, d.gpu) == p for d in deployments] for p in pools], int),
            rooms=np.array([pool_rooms[p] for p in pools]),
            min_replicas=min_replicas,
        )

    def fits(self, mixes: np.ndarray) -> np.ndarray:
        """Whether each row of `mixes` is within the budget and the pools."""
        cost = mixes @ self.prices_per_h
        in_pools = np.all((mixes * self.gpus) @ self.members.T <= self.rooms, axis=1)
        return (cost <= self.budget_per_h + _EPS) & in_pools

    def vectors(self, mixes: np.ndarray) -> np.ndarray:
        """The z = (n, s, u) of each row of `mixes`."""
        served = np.minimum(mixes @ self.capacities_rps, self.demand_rps)
        return np.column_stack([mixes, served, np.abs(mixes - self.have)])

    def criteria(self) -> np.ndarray:
        """The weights w over z of the criteria, minimised in turn (after `min_replicas`)."""
        k = len(self.bounds)
        zeros = np.zeros(k)
        rows = [np.concatenate([zeros, [-1.0], zeros])]  # the most served load
        if self.priced:
            rows.append(np.concatenate([self.prices_per_h, [0.0], zeros]))
        rows.append(np.concatenate([self.gpus, [0.0], zeros]))
        rows.append(np.concatenate([zeros, [0.0], np.ones(k)]))  # the fewest changed
        rows += [np.concatenate([np.eye(k)[i], [0.0], zeros]) for i in range(k)]
        return np.array(rows)


def _tied(best: float) -> float:
    """The largest value of a criterion that ties with its `best` (`_TIE`)."""
    return best + _TIE * max(1.0, abs(best))


def _enumerated(problem: _MixProblem) -> np.ndarray:
    """`best_mix` by evaluating every mix: the product of the count ranges, in lexicographic
    order, narrowed criterion by criterion to the one left."""
    ranges = [np.arange(b + 1) for b in problem.bounds]
    mixes = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).reshape(-1, len(ranges))
    mixes = mixes[problem.fits(mixes)]  # never empty: no replicas fit
    enough = mixes.sum(axis=1) >= problem.min_replicas
    if enough.any():
        mixes = mixes[enough]
    z = problem.vectors(mixes)
    for w in problem.criteria():
        value = z @ w
        keep = value <= _tied(float(value.min()))
        mixes, z = mixes[keep], z[keep]
    return mixes[0]


def _solved(problem: _MixProblem) -> np.ndarray:
    """`best_mix` by integer programs over z = (n, s, u): each criterion minimised within
    the budget, the pools, s <= capacities @ n, u >= |n - have| and the earlier criteria's
    ties; the value of the mix found (evaluated as `_enumerated` does) bounds the next."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # a run without one: no SciPy

    k = len(problem.bounds)
    eye, zeros = np.eye(k), np.zeros((k, 1))
    pools = problem.members * problem.gpus
    rows = [
        LinearConstraint(np.hstack([pools, np.zeros((len(pools), k + 1))]), ub=problem.rooms),
        LinearConstraint(np.concatenate([-problem.capacities_rps, [1.0], np.zeros(k)]), ub=0.0),
        LinearConstraint(np.hstack([-eye, zeros, eye]), lb=-problem.have),
        LinearConstraint(np.hstack([eye, zeros, eye]), lb=problem.have),
    ]
    if problem.budget_per_h < math.inf:
        budget = np.concatenate([problem.prices_per_h, np.zeros(k + 1)])
        rows.append(LinearConstraint(budget, ub=problem.budget_per_h + _EPS))
    enough = LinearConstraint(
        np.concatenate([np.ones(k), np.zeros(k + 1)]), lb=problem.min_replicas
    )
    bounds = Bounds(
        np.zeros(2 * k + 1),
        np.concatenate([problem.bounds, [problem.demand_rps], np.full(k, np.inf)]),
    )
    integrality = np.concatenate([np.ones(k), np.zeros(k + 1)])

    def minimised(w: np.ndarray, constraints: list[LinearConstraint]) -> np.ndarray | None:
        """The counts n of a z minimising w @ z under `constraints` (None: there is none)."""
        found = milp(
            w,
            integrality=integrality,
            bounds=bounds,
            constraints=constraints,
            options={"mip_rel_gap": 0.0},
        )
        return None if found.x is None else np.round(found.x[:k]).astype(np.int64)

    criteria = problem.criteria()
    mix = minimised(criteria[0], [*rows, enough])
    if mix is None:  # no mix of `min_replicas` replicas fits (no replicas always does)
        mix = minimised(criteria[0], rows)
    else:
        rows.append(enough)
    for done, w in zip(criteria[:-1], criteria[1:], strict=True):
        assert mix is not None
        value = float(problem.vectors(mix[None, :])[0] @ done)
        rows.append(LinearConstraint(done, ub=_tied(value)))  # its ties only from now on
        mix = minimised(w, rows)
    assert mix is not None
    return mix


def _bound(
    d: Deployment,
    demand_rps: float,
    budget_per_h: float,
    pool_rooms: dict[tuple[str, str], int],
    min_replicas: int,
) -> int:
    """Most replicas of `d` a best mix may hold: its pool's room, what the budget buys, and
    the replicas that alone cover the demand (at least `min_replicas`)."""
    n = pool_rooms[d.site, d.gpu] // d.gpus
    if budget_per_h < math.inf and d.price_per_h > 0:
        n = min(n, math.floor(budget_per_h / d.price_per_h + _EPS))
    return min(n, max(math.ceil(demand_rps / d.capacity_rps - _EPS), min_replicas))


def _pool_rooms(usable: Sequence[Deployment], free: FreeGpus) -> dict[tuple[str, str], int]:
    """GPUs the service may hold per (site, GPU model): the free ones and its own there."""
    rooms: dict[tuple[str, str], int] = {}
    for d in usable:
        key = (d.site, d.gpu)
        if key not in rooms:
            rooms[key] = free.at(d.site).get(d.gpu, 0)
        rooms[key] += d.have * d.gpus
    return rooms


def _cost(deployments: Sequence[Deployment], counts: Sequence[int]) -> float:
    """Price per hour of `counts` replicas of the `deployments` (unpriced ones count 0)."""
    return sum(
        n * d.price_per_h
        for d, n in zip(deployments, counts, strict=True)
        if n and not math.isnan(d.price_per_h)
    )


def _start(
    usable: Sequence[Deployment], ups: Sequence[int], room_per_h: float, free: FreeGpus
) -> list[int]:
    """Replicas started per deployment: of `ups`, as many as the budget's room and the free
    GPUs allow, the deployments of most requests/s per unit of price first (their GPUs
    taken from `free`)."""
    started = [0] * len(usable)
    order = sorted(range(len(usable)), key=lambda i: -_per_price(usable[i]))
    for i in order:
        d, n = usable[i], ups[i]
        if n and d.price_per_h > 0 and room_per_h < math.inf:
            n = min(n, max(math.floor(room_per_h / d.price_per_h + _EPS), 0))
        n = min(n, free.at(d.site).get(d.gpu, 0) // d.gpus)
        if n:
            free.take(d.site, d.gpu, n * d.gpus)
            room_per_h -= n * (0.0 if math.isnan(d.price_per_h) else d.price_per_h)
        started[i] = n
    return started


def _per_price(d: Deployment) -> float:
    """Requests/s of one replica per unit of its hourly price (inf: free or unpriced)."""
    return d.capacity_rps / d.price_per_h if d.price_per_h > 0 else math.inf
