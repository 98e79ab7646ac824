"""`mig_partitioner`: MIG partitions for the services and MIG jobs on partitioned pools, in the
spirit of MISO (Li et al., SoCC 2022; docs/policies-mig-partitioner.md).

At every decision (at least every `tick_s`), for each MIG-partitioned pool (site, GPU model):

1. Demand. Each service whose first MIG deployment is this pool (its *home* pool) needs, for
   each profile p of its MIG variants there, `n[s, p] = ceil(R_s / capacity'[s, p])` slices,
   where `R_s` is its forecast peak rate over `lookahead_s` times `1 + headroom`, less what
   its other replicas (whole GPUs, other pools) serve, and `capacity'` is the slice replica's
   `replica_point(...).capacity_rps` times a prediction error drawn once per (service,
   profile): lognormal, median 1, `sigma = prediction_error`, seeded by `seed`. Each queued
   MIG job needs one slice of its profile at its home pool (its origin first), and each
   running one keeps its slice.
2. Value of a partition (MISO maximises the sum of the jobs' predicted speedups): a slice
   given to a job is worth 1, a slice given to a service `1 / n[s, p]` (a service with all
   its slices is worth 1). Each service takes one profile (its choice is enumerated); a
   profile's slices go to the running jobs, then the queued ones, then the services needing
   the fewest.
3. Search: for each choice of the services' profiles, an exact dynamic programme over the
   pool's GPUs. Each GPU keeps its layout or takes one of `state.maximal_mig_layouts` (every
   maximal valid layout); the state is the vector of slices per demanded profile, capped at the
   demand (more is worth nothing), so it has at most prod(demand_p + 1) values; per state
   the fewest GPUs to drain, then to reconfigure. The best partition maximises the value,
   then drains the fewest GPUs, then reconfigures the fewest.
4. If it beats the current layouts (by `min_gain` when a GPU holding slices must change):
   the pool drains (each service first bridged by replicas on its whole-GPU variants for
   its whole rate, then, once they serve, all its replicas on the pool's slices scaled to
   0), free GPUs are repartitioned (`Repartition`), and the services' MIG variants are
   scaled onto the slices as they become usable; the bridge then follows the rate the
   slices do not cover.

It is an adjuster: the planned starts of the scheduler before it (alone: `run_now`'s) that
still fit after its own actions follow them; MIG jobs are held back from a pool while it
drains.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from policies.kit import Adjuster, FreeGpus
from policies.kit.inference import forecast_peak_rps
from sim.api import (
    Action,
    JobView,
    MigGpuState,
    Repartition,
    Resume,
    Scale,
    ServiceView,
    Start,
    SystemState,
)

__all__ = ["Demand", "MigPartitioner", "Partition", "allocation", "best_partition"]

Layout = tuple[str, ...]
Pool = tuple[str, str]
"""(site, GPU model) of a MIG-partitioned pool."""


@dataclass(frozen=True)
class Demand:
    """What one pool must hold: per profile, the slices of running and queued MIG jobs, and
    for each service its options, (profile, slices needed) pairs, one of which it takes."""

    jobs: dict[str, int]
    services: tuple[tuple[tuple[str, int], ...], ...]


@dataclass(frozen=True)
class Partition:
    """A layout per GPU, what it is worth (`Demand`'s value) and what it costs."""

    layouts: tuple[Layout, ...]
    choice: tuple[str, ...]
    """The profile each service of the demand takes."""
    value: float
    drains: int
    """GPUs holding slices that must be drained first."""
    changes: int
    """GPUs reconfigured (drained ones included)."""


def best_partition(
    maximal: Sequence[Layout], gpus: Sequence[tuple[Layout, int | None]], demand: Demand
) -> Partition:
    """The partition of the pool's GPUs of the highest value, then the fewest drains, then
    the fewest changes (step 3). `maximal`: the layouts a GPU that changes may take (its GPU
    model's `state.maximal_mig_layouts`); `gpus`: per GPU its layout and the drain cost of
    changing it (0: free, 1: holds slices, None: it may not change)."""
    choices = product(*(tuple(p for p, _ in options) for options in demand.services))
    best: Partition | None = None
    for choice in choices:  # one empty choice without services
        candidate = _best_for_choice(maximal, gpus, demand, choice)
        if best is None or _rank(candidate) > _rank(best):
            best = candidate
    assert best is not None
    return best


def _rank(p: Partition) -> tuple[float, int, int]:
    return (round(p.value, 9), -p.drains, -p.changes)


def _best_for_choice(
    maximal: Sequence[Layout],
    gpus: Sequence[tuple[Layout, int | None]],
    demand: Demand,
    choice: tuple[str, ...],
) -> Partition:
    """The dynamic programme of step 3 for one choice of the services' profiles."""
    need: Counter[str] = Counter(demand.jobs)
    for options, profile in zip(demand.services, choice, strict=True):
        need[profile] += dict(options)[profile]
    wanted = sorted(p for p, n in need.items() if n > 0)
    cap = tuple(need[p] for p in wanted)

    def vector(layout: Layout) -> tuple[int, ...]:
        counts = Counter(layout)
        return tuple(counts[p] for p in wanted)

    # state (capped slices per wanted profile) -> (drains, changes, layouts so far)
    states: dict[tuple[int, ...], tuple[int, int, tuple[Layout, ...]]] = {
        tuple(0 for _ in wanted): (0, 0, ())
    }
    for layout, drain in gpus:
        moves: dict[tuple[int, ...], tuple[int, int, Layout]] = {vector(layout): (0, 0, layout)}
        if drain is not None:
            for other in maximal:  # one layout per capped vector: the first, the cheapest
                moves.setdefault(vector(other), (drain, 1, other))
        after: dict[tuple[int, ...], tuple[int, int, tuple[Layout, ...]]] = {}
        for state, (d0, c0, chosen) in states.items():
            for vec, (d1, c1, new) in moves.items():
                key = tuple(min(a + b, m) for a, b, m in zip(state, vec, cap, strict=True))
                cost = (d0 + d1, c0 + c1, (*chosen, new))
                if key not in after or cost[:2] < after[key][:2]:
                    after[key] = cost
        states = after
    best: Partition | None = None
    for state, (drains, changes, layouts) in states.items():
        slices = dict(zip(wanted, state, strict=True))
        value = _value(slices, demand, choice)
        p = Partition(layouts, choice, value, drains, changes)
        if best is None or _rank(p) > _rank(best):
            best = p
    assert best is not None
    return best


def _value(slices: dict[str, int], demand: Demand, choice: tuple[str, ...]) -> float:
    """What `slices` (per profile) are worth to the demand (step 2)."""
    jobs, services = allocation(slices, demand, choice)
    return sum(jobs.values()) + sum(
        got / dict(options)[p]
        for got, options, p in zip(services, demand.services, choice, strict=True)
    )


def allocation(
    slices: dict[str, int], demand: Demand, choice: tuple[str, ...]
) -> tuple[dict[str, int], list[int]]:
    """The slices per profile the jobs get, and the slices each service gets, of `slices`
    (per profile) when the services take the profiles `choice`: a profile's slices go to
    the jobs first, then to the services needing the fewest."""
    left = Counter(slices)
    jobs: dict[str, int] = {}
    for profile, n in demand.jobs.items():
        jobs[profile] = min(n, left[profile])
        left[profile] -= jobs[profile]
    needs = [dict(options)[p] for options, p in zip(demand.services, choice, strict=True)]
    services = [0] * len(choice)
    for s in sorted(range(len(choice)), key=lambda s: (needs[s], s)):
        services[s] = min(needs[s], left[choice[s]])
        left[choice[s]] -= services[s]
    return jobs, services


@dataclass
class _ServiceDemand:
    """A service on its home pool: its MIG variants there by profile, with their predicted
    capacity (requests/s per replica, the error applied) and the slices needed."""

    svc: ServiceView
    variant: dict[str, str]
    """Profile -> the variant (the highest predicted capacity of those on the profile)."""
    capacity_rps: dict[str, float]
    """Profile -> that variant's predicted requests/s per replica."""
    rate_rps: float
    """The rate its slices must serve (with headroom, less its other replicas'), requests/s."""
    needed: dict[str, int]


@dataclass
class MigPartitioner(Adjuster):
    headroom: float = 0.25
    """Spare capacity over the forecast peak rate (0.25: slices for 125 % of it)."""
    lookahead_s: float = 900.0
    """How far ahead the forecast peak is taken, s."""
    tick_s: float = 60.0
    """Decide at least this often, s (a drained slice frees no decision point)."""
    prediction_error: float = 0.0
    """Sigma of the lognormal error (median 1) of the predicted capacity of a service's
    replica on each profile, drawn once per (service, profile); 0: the model's own."""
    seed: int = 0
    """Seed of the prediction errors."""
    min_gain: float = 0.25
    """Value (consumers served, step 2) a partition must gain to drain GPUs for it (inf:
    never drain; free GPUs are still repartitioned)."""
    _draining: set[Pool] = field(default_factory=set, init=False, repr=False)
    _bridges: dict[tuple[str, str, str], int] = field(default_factory=dict, init=False, repr=False)
    _errors: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        checks = (
            ("headroom", 0 <= self.headroom <= 10, "in [0, 10]"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
            ("prediction_error", 0 <= self.prediction_error <= 3, "in [0, 3]"),
            ("seed", self.seed >= 0, ">= 0"),
            ("min_gain", self.min_gain >= 0, ">= 0"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")

    # --- the decision ----------------------------------------------------------------------

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """Drain, repartition and scale every partitioned pool, then the planned `actions`
        that still fit (MIG starts on the slices left, none on a pool that drains)."""
        free = FreeGpus(state)
        slices: dict[Pool, Counter[str]] = {}
        plan: list[Action] = []
        pools = [(s, m) for s in state.sites for m in state.free_mig_slices(s)]
        homes = self._home_pools(state)
        queued, running = _mig_jobs(state, pools)
        for pool in pools:
            slices[pool] = Counter(state.free_mig_slices(pool[0])[pool[1]])
            services = [self._service_demand(state, svc, pool) for svc in homes.get(pool, [])]
            jobs = queued.get(pool, Counter()) + running.get(pool, Counter())
            running_here = running.get(pool, Counter())
            plan += self._pool(state, pool, services, jobs, running_here, free, slices[pool])
        return plan + [a for a in actions if self._fits(a, free, slices)]

    def _pool(
        self,
        state: SystemState,
        pool: Pool,
        services: list[_ServiceDemand],
        jobs: Counter[str],
        running: Counter[str],
        free: FreeGpus,
        left: Counter[str],
    ) -> list[Action]:
        """Steps 1-4 on one pool; `left` its free slices, less those the actions take."""
        site, model = pool
        gpus = state.mig_layouts(site, model)
        now = state.now_s
        ours = sum(
            d.svc.replicas(site, v) + d.svc.starting(site, v)
            for d in services
            for v in d.variant.values()
        )
        held = sum(g.held for g in gpus)
        only_jobs = held <= sum(running.values())  # no replica of ours holds or drains a slice
        if pool in self._draining and ours == 0 and only_jobs:
            self._draining.discard(pool)
        drain_cost = None if only_jobs else 1
        costs = [_change_cost(g, now, drain_cost) for g in gpus]
        demand = Demand(
            dict(jobs), tuple(tuple(sorted(d.needed.items())) for d in services if d.needed)
        )
        served = [d for d in services if d.needed]
        maximal = state.maximal_mig_layouts(model)
        keep = best_partition(maximal, [(g.layout, None) for g in gpus], demand)
        layouts = [g.layout for g in gpus]
        best = best_partition(maximal, list(zip(layouts, costs, strict=True)), demand)
        gain = best.value - keep.value
        if gain <= 1e-9 or (best.drains and gain < self.min_gain):
            best = keep
        actions: list[Action] = []
        if best.drains:
            self._draining.add(pool)
        if pool in self._draining:  # bridge first; drain once the bridge serves
            for d in services:
                actions += self._bridge(d, site, 0.0, free)
            if not actions and self._bridge_ready(services):
                actions += [
                    Scale(d.svc, site, 0, v)
                    for d in services
                    for v in d.variant.values()
                    if d.svc.replicas(site, v) + d.svc.starting(site, v)
                ]
        repartitions, taken = _repartitions(pool, gpus, best.layouts, now)
        for layout in taken:  # a free GPU reconfigured offers none of its slices
            left.subtract(layout)
        actions += repartitions
        reconfiguring = bool(repartitions) or any(g.ready_s > now for g in gpus)
        if pool not in self._draining:
            actions += _scale_to(best, demand, served, site, left, not reconfiguring)
            if not reconfiguring:  # no demand left for the others' slices
                actions += [
                    Scale(d.svc, site, 0, v)
                    for d in services
                    if not d.needed
                    for v in d.variant.values()
                    if d.svc.replicas(site, v) + d.svc.starting(site, v)
                ]
            for d in services:
                actions += self._bridge(d, site, self._serving_rps(d, site, actions), free)
        return actions

    def _bridge_ready(self, services: list[_ServiceDemand]) -> bool:
        """Whether the bridge replicas of `services` all serve (none in a cold start)."""
        names = {d.svc.config.name: d.svc for d in services}
        return all(names[n].starting(s, v) == 0 for n, s, v in self._bridges if n in names)

    def _serving_rps(self, d: _ServiceDemand, site: str, actions: list[Action]) -> float:
        """What `d`'s replicas on slices serve now (ready ones, at most as many as the
        `actions` keep), requests/s as the policy predicts it."""
        kept = {
            a.variant: a.replicas for a in actions if isinstance(a, Scale) and a.service == d.svc
        }
        return sum(
            min(d.svc.replicas(site, v), kept.get(v, math.inf)) * d.capacity_rps[p]
            for p, v in d.variant.items()
        )

    # --- demand ----------------------------------------------------------------------------

    def _home_pools(self, state: SystemState) -> dict[Pool, list[ServiceView]]:
        """Services by their home pool: the first of their sites, in order, with a MIG
        variant deployed (the variant's GPU model there)."""
        homes: dict[Pool, list[ServiceView]] = {}
        for name in state.services:
            svc = state.service(name)
            deployed = set(svc.deployments)
            home = next(
                (
                    (site, v.gpu)
                    for site in svc.sites
                    for v in svc.variants
                    if v.mig_profile is not None and (site, v.name) in deployed
                ),
                None,
            )
            if home is not None:
                homes.setdefault(home, []).append(svc)
        return homes

    def _service_demand(self, state: SystemState, svc: ServiceView, pool: Pool) -> _ServiceDemand:
        """Step 1 for one service on its home pool."""
        site, model = pool
        name = svc.config.name
        mine = [
            v
            for v in svc.variants
            if v.mig_profile is not None and v.gpu == model and (site, v.name) in svc.deployments
        ]
        others = sum(
            (svc.replicas(s, v) + svc.starting(s, v) - self._bridges.get((name, s, v), 0))
            * svc.capacity_rps(s, v)
            for s, v in svc.deployments
            if not (s == site and v in {m.name for m in mine})
        )
        peak = forecast_peak_rps(svc, self.lookahead_s) * (1.0 + self.headroom)
        rate = max(0.0, peak - others)
        variant: dict[str, str] = {}
        capacity: dict[str, float] = {}
        for v in mine:
            profile = str(v.mig_profile)
            rps = svc.replica_point(site, v.name).capacity_rps * self._error(svc, profile)
            if rps > capacity.get(profile, 0.0):
                variant[profile], capacity[profile] = v.name, rps
        needed = {p: math.ceil(rate / c) for p, c in capacity.items()} if rate > 0 else {}
        return _ServiceDemand(svc, variant, capacity, rate, needed)

    def _error(self, svc: ServiceView, profile: str) -> float:
        """The prediction error of `svc`'s capacity on `profile` (drawn once, seeded)."""
        key = (svc.config.name, profile)
        got = self._errors.get(key)
        if got is None:
            if self.prediction_error == 0:
                got = 1.0
            else:
                rng = np.random.default_rng([self.seed, zlib.crc32("/".join(key).encode())])
                got = float(np.exp(self.prediction_error * rng.standard_normal()))
            self._errors[key] = got
        return got

    # --- draining and the bridge -------------------------------------------------------------

    def _bridge(self, d: _ServiceDemand, site: str, mig_rps: float, free: FreeGpus) -> list[Action]:
        """Replicas on whole GPUs (of `d`'s whole-GPU variants, its deployments in order, as
        far as free GPUs allow) for the rate its slices do not cover: all of it while its
        pool drains; the bridge replicas go as the slices' replicas serve."""
        svc, name = d.svc, d.svc.config.name
        short = d.rate_rps - mig_rps
        actions: list[Action] = []
        for s, v in svc.deployments:
            spec = next(x for x in svc.variants if x.name == v)
            if spec.mig_profile is not None:
                continue
            per = svc.capacity_rps(s, v)
            was = self._bridges.get((name, s, v), 0)
            want = max(0, math.ceil(short / per - 1e-9))
            now = min(want, was)
            while now < want and free.take(s, spec.gpu, spec.gpus_per_replica):
                now += 1
            short -= now * per
            if now != was:
                have = svc.replicas(s, v) + svc.starting(s, v)
                actions.append(Scale(svc, s, have - was + now, v))
                self._bridges[name, s, v] = now
        return actions

    # --- the planned starts ------------------------------------------------------------------

    def _fits(self, action: Action, free: FreeGpus, slices: dict[Pool, Counter[str]]) -> bool:
        """Whether a planned action still fits: a MIG job's start or resume on the slices
        left (never on a draining pool), any other through `free`."""
        if isinstance(action, Start | Resume) and action.job.mig_profile:
            profile = action.job.mig_profile
            for (site, model), left in slices.items():
                if site != action.site or action.gpu_model not in (None, model):
                    continue
                if (site, model) not in self._draining and left[profile] >= 1:
                    left[profile] -= 1
                    return True
            return False
        return free.book(action)


def _mig_jobs(
    state: SystemState, pools: Sequence[Pool]
) -> tuple[dict[Pool, Counter[str]], dict[Pool, Counter[str]]]:
    """Per pool, the slices per profile of the queued MIG jobs whose home it is (the first
    pool with their profile of a GPU model they may use, their origin first, then the
    sites in order), and of the running ones."""
    queued: dict[Pool, Counter[str]] = {}
    for job in state.pending:
        home = _home_of(state, job, pools)
        if home is not None:
            queued.setdefault(home, Counter())[job.mig_profile] += 1
    running: dict[Pool, Counter[str]] = {}
    for job in state.running:
        if job.mig_profile and job.site is not None and job.gpu_model is not None:
            running.setdefault((job.site, job.gpu_model), Counter())[job.mig_profile] += 1
    return queued, running


def _home_of(state: SystemState, job: JobView, pools: Sequence[Pool]) -> Pool | None:
    """The pool a queued MIG job is counted at (None: not a MIG job, or no pool fits)."""
    profile = job.mig_profile
    if not profile:
        return None
    models = job.allowed_gpu_models
    fitting = [
        (s, m)
        for s, m in pools
        if s in job.allowed_sites
        and (not models or m in models)
        and profile in state.mig_profiles(m)
    ]
    return next((p for p in fitting if p[0] == job.origin_site), next(iter(fitting), None))


def _change_cost(g: MigGpuState, now_s: float, drain_cost: int | None) -> int | None:
    """What changing GPU `g`'s layout costs in drains: 0 free, `drain_cost` holding slices
    (None: a job's, it may not change), None while it is reconfigured."""
    if g.ready_s > now_s:
        return None
    return 0 if g.held == 0 else drain_cost


def _repartitions(
    pool: Pool, gpus: Sequence[MigGpuState], target: Sequence[Layout], now_s: float
) -> tuple[list[Action], list[Layout]]:
    """`Repartition`s that give the pool's free GPUs the target layouts as a multiset, and
    the layouts of the GPUs they take. The target layouts are the GPUs' own or maximal ones,
    so already keyed as the engine keys them (profiles by start slot). The engine
    reconfigures the lowest-index free GPUs with another layout, so a kept free GPU may be
    the one taken; its layout is then made again on the next one."""
    site, model = pool
    cur = {i: g.layout for i, g in enumerate(gpus) if g.held == 0 and g.ready_s <= now_s}
    want = Counter(target[i] for i in cur)
    have = Counter(cur.values())
    to_make = sorted((want - have).elements())
    done: set[int] = set()
    actions: list[Action] = []
    taken: list[Layout] = []
    while to_make:
        layout = to_make.pop(0)
        pick = next((i for i in sorted(cur) if i not in done and cur[i] != layout), None)
        if pick is None:
            break
        old, cur[pick] = cur[pick], layout
        taken.append(old)
        done.add(pick)
        actions.append(Repartition(site, model, layout))
        if Counter(cur.values())[old] < want[old]:
            to_make.append(old)
    return actions, taken


def _scale_to(
    partition: Partition,
    demand: Demand,
    services: list[_ServiceDemand],
    site: str,
    left: Counter[str],
    allow_down: bool,
) -> list[Action]:
    """Scale each service's MIG variants to the slices the partition gives it: up as far as
    the free slices `left` allow (taking them), down only when `allow_down`."""
    counts = Counter(p for layout in partition.layouts for p in layout)
    _, got = allocation(counts, demand, partition.choice)
    actions: list[Action] = []
    for d, profile, slices in zip(services, partition.choice, got, strict=True):
        svc = d.svc
        for p, v in d.variant.items():
            want = slices if p == profile else 0
            have = svc.replicas(site, v) + svc.starting(site, v)
            more = min(want - have, left[p])
            if more > 0:
                left[p] -= more
                actions.append(Scale(svc, site, have + more, v))
            elif want < have and allow_down:
                actions.append(Scale(svc, site, want, v))
    return actions
