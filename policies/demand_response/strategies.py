"""The four demand-response strategies, each a `DemandResponse` that overrides its hooks.
The common rules they follow are in docs/policies-demand-response.md ("How they work");
each class's docstring says what is its own."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from policies.demand_response.base import DemandResponse
from policies.demand_response.curves import TOL_W, Curve
from policies.demand_response.planner import Entry, SitePlan, SitePlanner, slack_s

__all__ = ["DrComplementary", "DrFairSlowdown", "DrPause", "DrUniformCap"]

_PAUSE_CAP_STEP_W = 5.0
"""Grid of dr_pause's fallback common cap, W (as dr_uniform_cap's default)."""


# --- common levels -----------------------------------------------------------------------


def uniform(running: list[Entry], budget_w: float, step_w: float) -> SitePlan:
    """The highest whole-watt per-GPU cap c (each job at min(c, its ceiling), clipped into
    its model's range) whose total draw fits `budget_w`; bisection on c."""
    if not running:
        return SitePlan([], None, 0.0, feasible=budget_w >= -TOL_W)
    plan = bisect_level(
        running,
        budget_w,
        Curve.index_at_cap,
        lo=math.floor(min(float(e.curve.caps_w[0]) for e in running)),
        hi=math.ceil(max(float(e.curve.caps_w[-1]) for e in running)),
        tolerance=1.0,
        step=step_w,
        integer=True,
    )
    if not plan.feasible:
        plan.level = -math.inf
    return plan


def bisect_level(
    running: list[Entry],
    budget_w: float,
    index_at: Callable[[Curve, float], int],
    lo: float,
    hi: float,
    tolerance: float,
    step: float,
    integer: bool = False,
) -> SitePlan:
    """The highest level in [lo, hi] on a grid of `step` at which the running jobs fit
    `budget_w`, each job at the curve index `index_at(curve, level)` (the site's power is
    non-decreasing in the level; at `lo` every job is at its lowest cap, at `hi` at its
    ceiling). Bisection to `tolerance`, then down to the grid (never below `lo`): the level,
    and so every job's cap, changes only when it crosses a grid line, not at every small
    change of the site's load. Evaluated per distinct curve with its GPUs summed, since
    jobs share few curves."""
    groups: dict[int, tuple[Curve, int]] = {}
    for e in running:
        g = groups.get(id(e.curve))
        groups[id(e.curve)] = (e.curve, e.gpus) if g is None else (g[0], g[1] + e.gpus)

    def used(level: float | None) -> float:
        return sum(
            gpus * float(c.power_w[c.top if level is None else index_at(c, level)])
            for c, gpus in groups.values()
        )

    if used(None) <= budget_w + TOL_W:
        return SitePlan([e.curve.top for e in running], None, used(None))
    lowest = sum(gpus * float(c.power_w[0]) for c, gpus in groups.values())
    if lowest > budget_w + TOL_W:
        return SitePlan([0] * len(running), lo, lowest, feasible=False)
    floor = lo
    while hi - lo > tolerance:
        mid = (lo + hi) // 2 if integer else 0.5 * (lo + hi)
        if used(mid) <= budget_w + TOL_W:
            lo = mid
        else:
            hi = mid
    lo = max(floor, math.floor(lo / step + 1e-9) * step)
    return SitePlan([index_at(e.curve, lo) for e in running], float(lo), used(lo))


# --- the capping policies ----------------------------------------------------------------


@dataclass
class _Capping(DemandResponse):
    """The three capping strategies: starts are admitted at the `admit_min_fraction` floor
    and sized with the running jobs (`admit`); those left out are held."""

    admit_min_fraction: float = 0.8
    """A start at a site under an event runs only if every job there, it included, could
    still run at this fraction of its uncapped throughput within the limit (each at the
    lowest cap giving it that much; a job whose earlier cap gives less, at that cap). The
    policy then shares the power among all of them on its own terms. 1: starts only use
    the power the running jobs leave when they run at their earlier caps (0 < x <= 1)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        x = self.admit_min_fraction
        if not (isinstance(x, int | float) and 0.0 < x <= 1.0):
            raise ValueError(f"admit_min_fraction must be in (0, 1], got {x!r}")

    def admit(self, planner: SitePlanner) -> list[tuple[int, Entry]]:
        """In plan order, each start that leaves every job at the site, it and the starts
        admitted before it included, at least `admit_min_fraction` within the budget."""
        if not planner.arriving:
            return []
        f = float(self.admit_min_fraction)
        at_floor_w = sum(e.power_w(e.curve.index_at_fraction(f)) for e in planner.running)
        out = []
        for i, a, model in planner.arriving:
            e = planner.arrival(i, a, model)
            need = e.power_w(e.curve.index_at_fraction(f)) + e.fixed_w
            if at_floor_w + need <= planner.budget_w + TOL_W:
                at_floor_w += need
                out.append((i, e))
        return out


# --- dr_uniform_cap ----------------------------------------------------------------------


@dataclass
class DrUniformCap(_Capping):
    """During a demand-response event, one equal power budget per GPU: the highest single
    per-GPU cap c (on a grid of `cap_step_w`) such that the site meets its target with every
    running GPU at min(c, its job's earlier cap), clipped into each GPU model's settable
    range. Found by bisection on c (the site's power is non-decreasing in c). Starts are
    admitted at the `admit_min_fraction` floor and then share the same c.

    Rationale: the simplest fair-share rule an operator can apply with `nvidia-smi -pl`:
    equal watts per GPU, whatever runs on it (as in facility-wide capping studies, e.g.
    Zhao et al., SoCC 2023, here tightened just enough to meet the event's limit). Equal
    watts are not equal slowdowns: a memory-bound job that draws less than c loses nothing,
    a compute-bound one loses most (docs/power-model.md).
    """

    cap_step_w: float = 5.0
    """The common cap moves on a grid of this many watts (1: to the watt): fewer cap
    changes as jobs come and go, at most one step of the limit left unused."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.cap_step_w, int | float) and 1.0 <= self.cap_step_w <= 50.0):
            raise ValueError(f"cap_step_w must be in [1, 50] W, got {self.cap_step_w!r}")

    def solve(self, planner: SitePlanner, running: list[Entry], budget_w: float) -> SitePlan:
        return uniform(running, budget_w, float(self.cap_step_w))


# --- dr_fair_slowdown --------------------------------------------------------------------


@dataclass
class DrFairSlowdown(_Capping):
    """During a demand-response event, one equal relative slowdown for every running job:
    a common throughput fraction f (relative to uncapped); each job's cap is the lowest
    whole-watt cap at which the hardware model gives it at least f on its GPU model and
    profile (its earlier cap if that already gives less than f), and f is the highest on a
    grid of `fraction_step` that meets the target (bisection on f). Starts are admitted at
    the `admit_min_fraction` floor and then run at the same f.

    Rationale: sharing the event's cost as equal slowdowns (equal progress rates relative
    to each job's own uncapped speed) is the fairness notion of multi-tenant GPU cluster
    schedulers (e.g. finish-time fairness in Themis, Mahajan et al., NSDI 2020; Gavel,
    Narayanan et al., OSDI 2020); in-event Jain index of slowdowns close to 1.
    """

    fraction_step: float = 0.005
    """The common throughput fraction f moves on a grid of this step: fewer cap changes as
    jobs come and go, at most one step of throughput left unused (0 < x <= 0.05)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        x = self.fraction_step
        if not (isinstance(x, int | float) and 0.0 < x <= 0.05):
            raise ValueError(f"fraction_step must be in (0, 0.05], got {x!r}")

    def solve(self, planner: SitePlanner, running: list[Entry], budget_w: float) -> SitePlan:
        if not running:
            return SitePlan([], None, 0.0, feasible=budget_w >= -TOL_W)
        # f = 0 puts every job at its minimum cap, f = 1 every job at its ceiling
        step = float(self.fraction_step)
        return bisect_level(running, budget_w, Curve.index_at_fraction, 0.0, 1.0, step / 8.0, step)


# --- dr_complementary --------------------------------------------------------------------


@dataclass
class DrComplementary(_Capping):
    """During a demand-response event, cap first the jobs that lose least work per watt
    saved. Each job's caps are cut into steps of `step_w` from its earlier cap down to its
    GPU model's minimum; a step's price is the work it costs, gpus x weight x (throughput
    fraction lost), per watt of IT power it saves, gpus x (power saved), both from the
    hardware model. Greedily, the cheapest next step of any job is taken until the site
    meets its target; the last step is then refined to the highest whole-watt cap that
    still meets it. Starts are admitted at the `admit_min_fraction` floor and then take
    part in the greedy like the running jobs.

    With `weight_by_speed`, weight is the job's reference speed on its GPU model (work in
    reference GPU-hours per GPU-hour uncapped), so the greedy minimises the reference
    GPU-hours lost, the summary's `dr_throughput_loss_gpu_h`; without it every GPU-hour
    counts the same (the loss in throughput fractions). Under the calibrated model a
    memory-bound job's shallow caps are cheapest (its draw is below the top of the range,
    so the first watts cost it almost nothing) but its deep caps are dearest (less of its
    power scales with the clock), so the greedy caps memory-bound jobs first and
    compute-bound jobs deepest: equal marginal prices, the optimum for convex curves.

    Rationale: give a shared power budget to the jobs that turn watts into most work. Zeus
    (You et al., NSDI 2023) and Perseus (Chung et al., arXiv:2312.06902) show that slowdown
    per watt shed differs widely between workloads; POLCA (Patel et al., arXiv:2308.12908)
    caps the GPUs of inference clusters, which lose least, to oversubscribe power.
    """

    step_w: float = 10.0
    """Width of the cap steps the greedy takes, W (the last one is refined to 1 W)."""
    weight_by_speed: bool = True
    """Price a step in reference GPU-hours (True) or in GPU-hours of throughput fraction."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.step_w, int | float) and 1.0 <= self.step_w <= 200.0):
            raise ValueError(f"step_w must be in [1, 200] W, got {self.step_w!r}")

    def _next(self, e: Entry, i: int) -> int:
        """The index one step below `i` (at least one grid point, and saving power)."""
        return e.curve.steps(self.step_w)[0][i]

    def _price(self, e: Entry, i: int) -> float:
        """Work lost per watt saved by the step below index `i`."""
        return e.weight * e.curve.steps(self.step_w)[1][i]

    def solve(self, planner: SitePlanner, running: list[Entry], budget_w: float) -> SitePlan:
        if not running:
            return SitePlan([], None, 0.0, feasible=budget_w >= -TOL_W)
        idx = [e.curve.top for e in running]
        used = sum(e.power_w(i) for e, i in zip(running, idx, strict=True))
        if used <= budget_w + TOL_W:
            return SitePlan(idx, None, used)
        # Jobs with the same curve and weight have the same step prices: their steps come in
        # turn (each step dearer than the one before), so the greedy runs per group, and
        # only the step at which the target is met is taken by part of a group.
        groups: dict[tuple[int, float], list[int]] = {}
        for n, e in enumerate(running):
            groups.setdefault((id(e.curve), e.weight), []).append(n)
        members = list(groups.values())
        heap = [
            (self._price(running[ns[0]], running[ns[0]].curve.top), g)
            for g, ns in enumerate(members)
            if running[ns[0]].curve.top > 0
        ]
        heapq.heapify(heap)
        price = 0.0
        last = prev = -1
        while used > budget_w + TOL_W and heap:
            price, g = heapq.heappop(heap)
            e0 = running[members[g][0]]
            i = idx[members[g][0]]
            k = self._next(e0, i)
            per_gpu_w = float(e0.curve.power_w[i] - e0.curve.power_w[k])
            for n in members[g]:
                used -= running[n].gpus * per_gpu_w
                last, prev, idx[n] = n, i, k
                if used <= budget_w + TOL_W:
                    break
            else:
                if k > 0:
                    heapq.heappush(heap, (self._price(e0, k), g))
        if used > budget_w + TOL_W:
            return SitePlan(idx, price, used, feasible=False)
        # Refine the last step to the highest cap in it that still fits (power is
        # non-decreasing in the cap, so a search on the power column finds it).
        e = running[last]
        room_w = (budget_w + TOL_W - (used - e.power_w(idx[last]))) / e.gpus
        k = int(np.searchsorted(e.curve.power_w, room_w, side="right")) - 1
        k = min(max(k, idx[last]), prev)
        used += e.power_w(k) - e.power_w(idx[last])
        idx[last] = k
        return SitePlan(idx, price, used)

    def prepare(self, planner: SitePlanner, entry: Entry) -> None:
        """The entry's weight: its reference speed on its GPU model (`weight_by_speed`)."""
        entry.weight = (
            planner.state.reference_speed(entry.model, entry.job.profile)
            if self.weight_by_speed
            else 1.0
        )


# --- dr_pause ----------------------------------------------------------------------------


@dataclass
class DrPause(DemandResponse):
    """During a demand-response event, checkpoint and suspend interruptible running jobs at
    the site, most slack to deadline first (a job without a deadline has unbounded slack),
    until it meets its target; the other jobs keep their caps. If pausing every
    interruptible job is not enough, the rest are capped as `dr_uniform_cap` does
    (`fallback_uniform_cap`). While some of its jobs are paused the policy holds every start
    at the site, and resumes its paused jobs (least slack first) as soon as the power left
    allows, during the event or after it, on the site and GPU model they left, with the cap
    they had.

    Rationale: checkpoint-and-pause is how flexible training jobs shed load outright
    (e.g. Wiesner et al., "Let's wait awhile", Middleware 2021, for interruptible jobs;
    demand-response participation of datacenters, Zhang et al., "Flex", ISCA 2021): the
    paused jobs lose all progress during the event, the others none.
    """

    fallback_uniform_cap: bool = True
    """When pausing every interruptible job at the site is not enough, cap the remaining
    jobs with dr_uniform_cap's rule (False: leave them, the limit is broken)."""

    def late_index(self, entry: Entry, level: float | None) -> int | None:
        """A start runs at its ceiling, or under the fallback common cap."""
        return entry.curve.top if level is None else entry.curve.index_at_cap(level)

    def solve(self, planner: SitePlanner, running: list[Entry], budget_w: float) -> SitePlan:
        state, mem, site = planner.state, planner.mem, planner.site
        idx = [e.curve.top for e in running]
        used = sum(e.power_w(i) for e, i in zip(running, idx, strict=True))
        paused_here = [
            j for j, (s, _, _) in mem.paused.items() if s == site and j.state == "suspended"
        ]
        if used > budget_w + TOL_W:
            slack = {
                e.job: slack_s(state, e.job, site, e.model, e.job.cap_w)
                for e in running
                if e.job.interruptible
            }
            order = sorted((e for e in running if e.job.interruptible), key=lambda e: -slack[e.job])
            suspend: list[Entry] = []
            for e in order:
                if used <= budget_w + TOL_W:
                    break
                idle = e.gpus * state.idle_w(site, e.model)
                used += idle - e.power_w(e.curve.top)
                suspend.append(e)
            if used <= budget_w + TOL_W:
                return SitePlan(idx, None, used, suspend=suspend, hold_starts=True)
            rest = [e for e in running if e not in suspend]
            idle_w = used - sum(e.power_w(e.curve.top) for e in rest)
            if not self.fallback_uniform_cap:
                return SitePlan(idx, None, used, feasible=False, suspend=suspend)
            capped = uniform(rest, budget_w - idle_w, _PAUSE_CAP_STEP_W)
            by_entry = dict(zip(map(id, rest), capped.idx, strict=True))
            idx = [by_entry.get(id(e), e.curve.top) for e in running]
            return SitePlan(
                idx,
                capped.level,
                capped.used_w + idle_w,
                feasible=capped.feasible,
                suspend=suspend,
                hold_starts=True,
            )
        # Under the target: paused jobs come back, least slack first, while they fit; starts
        # wait until every paused job of the site is back.
        waiting = sorted(
            paused_here,
            key=lambda j: slack_s(state, j, site, mem.paused[j][1], mem.paused[j][2]),
        )
        return SitePlan(idx, None, used, resume=waiting, hold_starts=bool(waiting))
