"""Demand-response policies: `dr_uniform_cap`, `dr_fair_slowdown`, `dr_complementary`, `dr_pause`.

A demand-response (DR) event asks a site to keep its FACILITY power under `limit_kw` during
[start_s, end_s) (`state.demand_response(site)`). All four policies are adjusters
(`policies.adjusting.Adjuster`): alone they adjust what `run_now` plans, in a `chain` they
come last and have the final word on the plan of the members before them. They differ only
in how they bring the running jobs of a site under the limit:

- `dr_uniform_cap`: one equal per-GPU power cap for every running GPU of the site;
- `dr_fair_slowdown`: one equal throughput fraction (relative slowdown) for every job;
- `dr_complementary`: caps first the jobs that lose least work per watt saved (typically
  memory-bound ones: their draw sits below the top of the cap range, so shallow caps cost
  them almost nothing), greedily, by the calibrated hardware model;
- `dr_pause`: checkpoints and suspends interruptible jobs (most slack to deadline first),
  resumes them after the event; caps uniformly if pausing is not enough.

Common rules, at every decision while an event is active at a site (start_s <= now < end_s;
the engine decides at event notice, start and end, at arrivals and completions, and at PUE
steps during events):

1. Target. IT power <= limit_kw x 1000 x (1 - margin_pct / 100) / PUE(now). The power
   predictions are the engine's own hardware model, so they are exact for running jobs;
   the margin covers what a decision cannot see: a node that finishes booting raises power
   without a decision, several starts on one pool that together wake more nodes than each
   alone.
2. Prediction. IT power = what the site draws now, with each running job's GPUs at the
   power of the cap chosen for it (`state.operating_point`), each job leaving the site
   (suspended, migrated away) back at idle, and each admitted start adding
   `state.power_delta_w` (with its active draw counted even while its nodes boot).
3. Caps never rise above the cap a job had before the event (its "ceiling": its own cap,
   else the site's cap, else the GPU model's maximum), and always lie in the GPU model's
   settable range; all caps are whole watts (`nvidia-smi -pl` takes integers), except a
   ceiling or range end that is not. The common level of `dr_uniform_cap` and
   `dr_fair_slowdown` moves on a grid (`cap_step_w`, `fraction_step`): jobs are re-capped
   when it crosses a grid line, not at every arrival or completion.
4. Starts. The plan's starts (and resumes) at the site are considered in plan order. For
   the three capping policies, a start is admitted if every job at the site, it and the
   starts admitted before it included, could still run at `admit_min_fraction` of its
   uncapped throughput within the target (each at the lowest cap giving it that much);
   the policy then sizes the running and admitted jobs together, on its own terms, so a
   start is never cheaper for the running jobs than the floor, and the running jobs yield
   power to it only down to that floor. `dr_pause` admits a start only at its ceiling, in
   the power its (uncapped) running jobs leave, and holds every start at a site while one
   of its paused jobs there waits. A start that is not admitted is held: dropped from the
   plan, it stays pending and is reconsidered at the next decision. With `redirect`, a
   held `Start` goes instead to the first other site without an active event that has a
   pool with enough free GPUs. A migration onto the site is dropped (the job keeps running
   where it is); one away from it counts as power freed.
5. Infeasible. If even every job at its GPU model's minimum cap (and, for `dr_pause`, every
   interruptible job suspended) cannot meet the target (e.g. the idle and host power of the
   site alone exceed it), every running job is capped at its minimum and every start at the
   site is held: the limit is broken by the least possible amount with the jobs admitted.
6. After the event (the first decision at which no event is active at the site) every job
   gets back the cap it had before (e.g. one an `energy_optimal_cap` earlier in the chain
   set), paused jobs are resumed where their site has room (least slack first, before the
   plan's own starts there), and held jobs start as the scheduler plans. A `SetCap` that a
   scheduler earlier in the chain issues for a job during an event becomes the cap restored
   after it. Caps may rise during an event when jobs complete and free power.

docs/policies-demand-response.md has parameters, rationale and measured results.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from policies.adjusting import Adjuster
from policies.chain import job_of
from policies.run_now import FreeGpus
from sim.api import (
    Action,
    JobView,
    Migrate,
    Resume,
    SetCap,
    Start,
    Suspend,
    SystemState,
)

__all__ = ["DrComplementary", "DrFairSlowdown", "DrPause", "DrUniformCap"]

_TOL_W = 1e-6
"""Power comparisons tolerate this much, W (floating-point sums of draws)."""
_PAUSE_CAP_STEP_W = 5.0
"""Grid of dr_pause's fallback common cap, W (as dr_uniform_cap's default)."""


# --- hardware curves ---------------------------------------------------------------------


class _Curve:
    """Operating points of one GPU of `model` running `profile`, from the model's lowest
    settable cap up to a ceiling: caps (W, ascending), average power (W) and throughput
    fraction (relative to uncapped), all non-decreasing in the cap. Index -1 is the ceiling."""

    __slots__ = ("_steps", "caps_w", "frac", "power_w", "top")

    def __init__(self, caps_w: np.ndarray, power_w: np.ndarray, frac: np.ndarray):
        self.caps_w = caps_w
        self.power_w = power_w
        self.frac = frac
        self.top = len(caps_w) - 1
        self._steps: dict[float, tuple[list[int], list[float]]] = {}

    def index_at_cap(self, cap_w: float) -> int:
        """Index of the highest cap at or below `cap_w` (the lowest if none)."""
        k = int(np.searchsorted(self.caps_w, cap_w + _TOL_W, side="right")) - 1
        return min(max(k, 0), self.top)

    def index_at_fraction(self, f: float) -> int:
        """Index of the lowest cap giving at least throughput fraction `f` (the top if none)."""
        return min(int(np.searchsorted(self.frac, f, side="left")), self.top)

    def steps(self, step_w: float) -> tuple[list[int], list[float]]:
        """For each index i > 0: the index one step of `step_w` below (at least one grid
        point lower, and saving power), and the step's throughput fraction lost per watt
        saved (inf if it saves none). Computed once per step width."""
        hit = self._steps.get(step_w)
        if hit is None:
            caps, power, frac = self.caps_w, self.power_w, self.frac
            below = np.searchsorted(caps, caps - step_w + _TOL_W, side="right") - 1
            nxt, price = [0], [math.inf]
            for i in range(1, len(caps)):
                k = min(max(int(below[i]), 0), i - 1)
                while k > 0 and power[i] - power[k] <= _TOL_W:
                    k -= 1
                saved_w = float(power[i] - power[k])
                nxt.append(k)
                price.append(float(frac[i] - frac[k]) / saved_w if saved_w > _TOL_W else math.inf)
            hit = self._steps[step_w] = (nxt, price)
        return hit


class _Curves:
    """Curves per (model, profile, ceiling), on a 1 W grid from `state.operating_point`;
    each (model, profile) table is computed once per run."""

    __slots__ = ("_curves", "_tables")

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], _Curve] = {}
        self._curves: dict[tuple[str, str, float], _Curve] = {}

    def table(self, state: SystemState, model: str, profile: str) -> _Curve:
        key = (model, profile)
        hit = self._tables.get(key)
        if hit is None:
            spec = state.gpu_spec(model)
            lo, hi = float(spec.min_cap_w), float(spec.max_cap_w)
            caps = np.unique(np.concatenate([[lo], np.arange(math.ceil(lo), hi), [hi]]))
            caps = caps[(caps >= lo) & (caps <= hi)]
            points = [state.operating_point(model, profile, float(c)) for c in caps]
            hit = self._tables[key] = _Curve(
                caps,
                np.array([p.power_w for p in points]),
                np.array([p.throughput_fraction for p in points]),
            )
        return hit

    def curve(self, state: SystemState, model: str, profile: str, ceiling_w: float) -> _Curve:
        key = (model, profile, ceiling_w)
        hit = self._curves.get(key)
        if hit is None:
            t = self.table(state, model, profile)
            k = int(np.searchsorted(t.caps_w, ceiling_w + _TOL_W, side="right"))
            if k > 0 and abs(t.caps_w[k - 1] - ceiling_w) <= _TOL_W:
                hit = _Curve(t.caps_w[:k], t.power_w[:k], t.frac[:k])
            else:  # a ceiling off the grid (e.g. 237.5 W): its own point on top
                p = state.operating_point(model, profile, ceiling_w)
                hit = _Curve(
                    np.append(t.caps_w[:k], ceiling_w),
                    np.append(t.power_w[:k], p.power_w),
                    np.append(t.frac[:k], p.throughput_fraction),
                )
            self._curves[key] = hit
        return hit


# --- planning structures -----------------------------------------------------------------


@dataclass(eq=False)
class _Entry:
    """One job in a site's plan: running there, or arriving (start, resume, migration)."""

    job: JobView
    gpus: int
    model: str
    curve: _Curve
    restore_w: float | None
    """The job's own cap to go back to after the event (None: the site's cap, or uncapped)."""
    fixed_w: float = 0.0
    """Arrivals: IT power the arrival adds besides gpus x the draw of its cap, W (minus the
    idle draw of the GPUs it takes, plus nodes it wakes)."""
    action: Action | None = None
    """Arrivals: the plan's action."""
    weight: float = 1.0
    """Work per unit of throughput fraction and GPU (reference speed), for dr_complementary."""

    def power_w(self, idx: int) -> float:
        return self.gpus * float(self.curve.power_w[idx])

    def cap_action_w(self, idx: int) -> float | None:
        """The own cap that gives index `idx`: the restore cap at the ceiling."""
        return self.restore_w if idx == self.curve.top else float(self.curve.caps_w[idx])


@dataclass
class _SitePlan:
    """What a policy decided for the running jobs of one site."""

    idx: list[int]
    """Curve index per running entry (ignored for suspended ones)."""
    level: object
    """The policy's level (a cap, a fraction, a price), for dr_pause to size starts on the
    running jobs' terms (None: at their ceilings)."""
    used_w: float
    """Power of the running entries (and suspended ones at idle) under the plan, W."""
    feasible: bool = True
    suspend: list[_Entry] = field(default_factory=list)
    resume: list[JobView] = field(default_factory=list)
    """Paused jobs to resume at the site if they fit, in this order (dr_pause)."""
    hold_starts: bool = False


class _Free(FreeGpus):
    """Free GPUs per site and model as the decision's actions are planned, in order.

    GPUs that a plan's `Suspend` or `Migrate` gives back count for the plan's own later
    actions (as the scheduler planned them) but not for the policy's additions (`own`):
    a job that writes a checkpoint holds its GPUs until the write is done."""

    __slots__ = ("_released",)

    def __init__(self, state: SystemState):
        super().__init__(state)
        self._released: dict[tuple[str, str], int] = {}

    def take(
        self,
        site: str,
        model: str | None,
        gpus: int,
        cap_w: float | None = None,
        own: bool = False,
    ) -> str | None:
        """Take `gpus` GPUs of `model` (None: the first pool with enough, whose range holds
        `cap_w`); returns the model, or None if none fits. `own`: for an action the policy
        adds, which may not count on GPUs the plan released."""
        free = self.at(site)
        for m, n in free.items():
            usable = n - self._released.get((site, m), 0) if own else n
            if (model is None or m == model) and usable >= gpus:
                if model is None and cap_w is not None:
                    spec = self._state.gpu_spec(m)
                    if not spec.min_cap_w <= cap_w <= spec.max_cap_w:
                        continue
                free[m] = n - gpus
                return m
        return None

    def release(self, site: str, model: str, gpus: int, by_plan: bool = False) -> None:
        """Give back `gpus` GPUs; `by_plan`: a plan's Suspend or Migrate (see the class)."""
        free = self.at(site)
        free[model] = free.get(model, 0) + gpus
        if by_plan:
            self._released[(site, model)] = self._released.get((site, model), 0) + gpus


class _Memory:
    """What a DR policy remembers across decisions of one run."""

    __slots__ = ("paused", "saved", "state")

    def __init__(self, state: SystemState | None):
        self.state = state
        self.saved: dict[JobView, float | None] = {}
        """Own cap of each job touched by an event, to restore after it."""
        self.paused: dict[JobView, tuple[str, str, float | None]] = {}
        """Jobs this policy suspended: (site, GPU model) to resume on, own cap to resume with."""


# --- the base ----------------------------------------------------------------------------


@dataclass
class _DemandResponse(Adjuster):
    margin_pct: float = 1.0
    """Safety margin below the limit, % of the limit (0 to < 50): target facility power =
    limit x (1 - margin_pct / 100)."""
    redirect: bool = True
    """Send a start held at a site under an event to another site without an active event
    that has enough free GPUs (the first in the scenario's order), instead of holding it."""

    def __post_init__(self) -> None:
        if not (isinstance(self.margin_pct, int | float) and 0.0 <= self.margin_pct < 50.0):
            raise ValueError(f"margin_pct must be in [0, 50), got {self.margin_pct!r}")
        self._curves = _Curves()
        self._curve_of: dict[tuple[str, str, float | None, float | None], _Curve] = {}
        self._mem = _Memory(None)

    # ---- the hook each policy implements ----

    def _solve(
        self, state: SystemState, site: str, running: list[_Entry], budget_w: float
    ) -> _SitePlan:
        raise NotImplementedError

    def _level_index(self, entry: _Entry, level: object) -> int:
        """Curve index of an arrival on the same terms as the running jobs at `level`."""
        raise NotImplementedError

    def _prepare(self, state: SystemState, site: str, entry: _Entry) -> None:
        """Fill what the policy needs of each entry beyond its curve (default: nothing)."""

    # ---- the shared procedure ----

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        mem = self._memory(state)
        limits = _active_limits(state)
        plan = list(actions)
        free = _Free(state)
        planned = {job_of(a) for a in plan} - {None}
        for job in planned & mem.paused.keys():  # the scheduler took a paused job over
            del mem.paused[job]

        # Jobs this policy paused go back first where their site has no event and has room.
        front: list[Action] = self._resume_paused(state, mem, limits, free)

        # Walk the plan in order, tracking capacity; set aside what touches event sites.
        wished: dict[JobView, float | None] = {}
        site_caps: dict[str, float | None] = {}
        leaving: dict[str, list[JobView]] = {s: [] for s in limits}
        arriving: dict[str, list[tuple[int, str]]] = {s: [] for s in limits}
        keep = [True] * len(plan)
        for i, a in enumerate(plan):
            if isinstance(a, Start | Resume):
                model = free.take(a.site, a.gpu_model, a.job.gpus)
                if model is None:  # the room went to a job this policy resumed
                    keep[i] = False
                elif a.site in limits:
                    arriving[a.site].append((i, model))
            elif isinstance(a, Migrate):
                if a.site in limits:  # no load moves onto a site during its event
                    keep[i] = False
                    continue
                src, src_model = a.job.site, a.job.gpu_model
                if free.take(a.site, a.gpu_model, a.job.gpus) is None:
                    keep[i] = False
                    continue
                if src is not None and src_model is not None:
                    free.release(src, src_model, a.job.gpus, by_plan=True)
                    if src in limits:
                        leaving[src].append(a.job)
            elif isinstance(a, Suspend):
                if a.job.site is not None and a.job.gpu_model is not None:
                    free.release(a.job.site, a.job.gpu_model, a.job.gpus, by_plan=True)
                    if a.job.site in limits:
                        leaving[a.job.site].append(a.job)
            elif isinstance(a, SetCap):
                if isinstance(a.target, str):
                    site_caps[a.target] = a.watts
                elif a.target.site in limits:
                    wished[a.target] = a.watts
                    keep[i] = False  # the DR cap replaces it; the wish is restored later

        tail: list[Action] = []
        held: list[tuple[int, Start]] = []
        for site, limit_kw in limits.items():
            self._plan_site(
                state,
                mem,
                site,
                limit_kw,
                plan,
                keep,
                wished,
                site_caps,
                leaving[site],
                arriving[site],
                free,
                tail,
                held,
            )

        # Held starts: elsewhere if a site without an event has room, else they wait.
        for _, a in held:
            if not self.redirect:
                break
            for other in a.job.allowed_sites:
                if other in limits or other == a.site:
                    continue
                model = free.take(other, None, a.job.gpus, a.gpu_cap_w, own=True)
                if model is not None:
                    tail.append(Start(a.job, other, a.gpu_cap_w, model))
                    break

        restores = self._restore(state, mem, limits, plan, keep, planned)
        return front + [a for a, k in zip(plan, keep, strict=True) if k] + restores + tail

    def _memory(self, state: SystemState) -> _Memory:
        if self._mem.state is not state:  # a new run
            self._mem = _Memory(state)
        return self._mem

    def _plan_site(
        self,
        state: SystemState,
        mem: _Memory,
        site: str,
        limit_kw: float,
        plan: list[Action],
        keep: list[bool],
        wished: dict[JobView, float | None],
        site_caps: dict[str, float | None],
        leaving: list[JobView],
        arriving: list[tuple[int, str]],
        free: _Free,
        tail: list[Action],
        held: list[tuple[int, Start]],
    ) -> None:
        site_cap = site_caps[site] if site in site_caps else state.site_cap_w(site)
        target_w = limit_kw * 1000.0 * (1.0 - self.margin_pct / 100.0) / state.pue(site)
        gone = set(leaving)
        base_w = state.site_it_power_kw(site) * 1000.0
        running: list[_Entry] = []
        for job in state.running:
            if job.site != site:
                continue
            base_w -= job.gpus * job.gpu_power_w
            model = job.gpu_model
            if job in gone:
                base_w += job.gpus * state.idle_w(site, model)
                continue
            if job in wished:
                mem.saved[job] = wished[job]
            elif job not in mem.saved:
                mem.saved[job] = job.cap_w
            e = self._entry(state, job, model, mem.saved[job], site_cap)
            self._prepare(state, site, e)
            running.append(e)
        budget_w = target_w - base_w

        admit = self._admit(state, mem, site, site_cap, running, budget_w, plan, arriving)
        arrivals = [e for _, e in admit]
        fixed_w = sum(e.fixed_w for e in arrivals)
        result = self._solve(state, site, running + arrivals, budget_w - fixed_w)
        used_w = result.used_w + fixed_w
        for e, idx in zip(running, result.idx[: len(running)], strict=True):
            if e in result.suspend:
                continue
            want = e.cap_action_w(idx)
            if want != e.job.cap_w:
                tail.append(SetCap(e.job, want))
        for e in result.suspend:
            tail.append(Suspend(e.job))
            mem.paused[e.job] = (site, e.model, e.restore_w)
            mem.saved.pop(e.job, None)

        # Arrivals: admitted ones start under the caps the solve gave them; with the
        # policy's `_admit` deferring to this (dr_pause), on the terms of the running jobs.
        hold = result.hold_starts or not result.feasible
        admitted = {i: e for i, e in admit}
        for i, model in arriving:
            a = plan[i]
            job = a.job
            if i in admitted:
                e = admitted[i]
                idx = result.idx[len(running) + arrivals.index(e)]
                ok = True
            elif self._joint_admission or hold:
                ok = False
            else:
                e = self._entry(state, job, model, a.gpu_cap_w, site_cap)
                self._prepare(state, site, e)
                e.fixed_w = self._fixed_w(state, e, site)
                idx = e.curve.top if result.level is None else self._level_index(e, result.level)
                need = e.power_w(idx) + e.fixed_w
                ok = used_w + need <= budget_w + _TOL_W
                if ok:
                    used_w += need
            if ok:
                mem.saved[job] = a.gpu_cap_w
                plan[i] = dataclasses.replace(a, gpu_cap_w=e.cap_action_w(idx), gpu_model=model)
            else:
                keep[i] = False
                free.release(site, model, job.gpus)
                if isinstance(a, Start):
                    held.append((i, a))

        for job in result.resume:  # paused jobs back while the power left allows
            _, model, cap = mem.paused[job]
            e = self._entry(state, job, model, cap, site_cap)
            need = e.power_w(e.curve.top) + self._fixed_w(state, e, site)
            if used_w + need <= budget_w + _TOL_W and free.take(site, model, job.gpus, own=True):
                used_w += need
                tail.append(Resume(job, site, cap, model))
                del mem.paused[job]

    _joint_admission = False
    """True: `_admit` decides which starts run and the solve sizes them with the running
    jobs; False: starts are sized after the running jobs, on their terms (`_level_index`)."""

    def _admit(
        self,
        state: SystemState,
        mem: _Memory,
        site: str,
        site_cap: float | None,
        running: list[_Entry],
        budget_w: float,
        plan: list[Action],
        arriving: list[tuple[int, str]],
    ) -> list[tuple[int, _Entry]]:
        """The plan's starts (index in the plan, entry) to size together with the running
        jobs; by default none (they are sized after the running jobs)."""
        return []

    def _entry(
        self,
        state: SystemState,
        job: JobView,
        model: str,
        own_w: float | None,
        site_cap: float | None,
    ) -> _Entry:
        profile = job.profile
        key = (model, profile, own_w, site_cap)
        curve = self._curve_of.get(key)
        if curve is None:
            spec = state.gpu_spec(model)
            ceiling = (
                own_w if own_w is not None else site_cap if site_cap is not None else spec.max_cap_w
            )
            ceiling = min(max(float(ceiling), spec.min_cap_w), spec.max_cap_w)
            curve = self._curve_of[key] = self._curves.curve(state, model, profile, ceiling)
        return _Entry(job, job.gpus, model, curve, own_w)

    @staticmethod
    def _fixed_w(state: SystemState, e: _Entry, site: str) -> float:
        """IT power an arrival adds besides its GPUs' draw at its cap, W."""
        top_cap = float(e.curve.caps_w[-1])
        delta = state.power_delta_w(e.job, top_cap, site, e.model)
        active = e.power_w(e.curve.top) - e.gpus * state.idle_w(site, e.model)
        if state.powered_off_gpus(site).get(e.model, 0) > 0 and abs(delta - active) > _TOL_W:
            delta += active  # it wakes nodes: held at idle now, at its active draw once up
        return delta - e.power_w(e.curve.top)

    def _restore(
        self,
        state: SystemState,
        mem: _Memory,
        limits: dict[str, float],
        plan: list[Action],
        keep: list[bool],
        planned: set[JobView],
    ) -> list[Action]:
        """The caps jobs had before an event, for jobs at sites whose events have ended. A
        job the plan re-caps keeps the plan's cap; one it suspends or migrates is looked at
        again at the next decision."""
        if not mem.saved:
            return []
        recapped = {
            a.target for a, k in zip(plan, keep, strict=True) if k and isinstance(a, SetCap)
        }
        out: list[Action] = []
        for job, cap in list(mem.saved.items()):
            site = job.site
            if site is None:  # finished, suspended by someone else, ...
                del mem.saved[job]
                continue
            if site in limits or (job in planned and job not in recapped):
                continue
            del mem.saved[job]
            if job in recapped or cap == job.cap_w:
                continue
            spec = state.gpu_spec(job.gpu_model)
            if cap is None or spec.min_cap_w <= cap <= spec.max_cap_w:
                out.append(SetCap(job, cap))
        return out

    def _resume_paused(
        self, state: SystemState, mem: _Memory, limits: dict[str, float], free: _Free
    ) -> list[Action]:
        if not mem.paused:
            return []
        out: list[Action] = []
        waiting = []
        for job, (site, model, cap) in list(mem.paused.items()):
            if job.state != "suspended":
                del mem.paused[job]
            elif site not in limits:
                waiting.append((_slack_s(state, job, site, model, cap), job, site, model, cap))
        for _, job, site, model, cap in sorted(waiting, key=lambda w: w[0]):
            if free.take(site, model, job.gpus) is not None:
                out.append(Resume(job, site, cap, model))
                del mem.paused[job]
        return out

    def _speed(self, state: SystemState, job: JobView, site: str, model: str) -> float:
        """Reference GPU-s of work per s of one uncapped `model` GPU on `job`'s profile."""
        return state.reference_speed(model, job.profile)


def _active_limits(state: SystemState) -> dict[str, float]:
    """Limit, kW, of each site with an event active now (the lowest if several overlap)."""
    now = state.now_s
    out: dict[str, float] = {}
    for ev in state.demand_response():
        if ev.start_s <= now < ev.end_s:
            out[ev.site] = min(out.get(ev.site, math.inf), ev.limit_kw)
    return out


def _slack_s(state: SystemState, job: JobView, site: str, model: str, cap_w: float | None) -> float:
    """Time to spare before `job`'s deadline if it ran from now under `cap_w`, s (inf: none)."""
    if job.deadline_s is None:
        return math.inf
    runtime_s, _ = state.estimate(job, site, cap_w, model)
    return job.deadline_s - state.now_s - runtime_s


def _uniform(running: list[_Entry], budget_w: float, step_w: float) -> _SitePlan:
    """The highest whole-watt per-GPU cap c (each job at min(c, its ceiling), clipped into
    its model's range) whose total draw fits `budget_w`; bisection on c."""
    if not running:
        return _SitePlan([], None, 0.0, feasible=budget_w >= -_TOL_W)
    plan = _bisect_level(
        running,
        budget_w,
        _Curve.index_at_cap,
        lo=math.floor(min(float(e.curve.caps_w[0]) for e in running)),
        hi=math.ceil(max(float(e.curve.caps_w[-1]) for e in running)),
        tolerance=1.0,
        step=step_w,
        integer=True,
    )
    if not plan.feasible:
        plan.level = -math.inf
    return plan


def _uniform_index(e: _Entry, level: object) -> int:
    return e.curve.index_at_cap(float(level))  # type: ignore[arg-type]


def _bisect_level(
    running: list[_Entry],
    budget_w: float,
    index_at,
    lo: float,
    hi: float,
    tolerance: float,
    step: float,
    integer: bool = False,
) -> _SitePlan:
    """The highest level in [lo, hi] on a grid of `step` at which the running jobs fit
    `budget_w`, each job at the curve index `index_at(curve, level)` (the site's power is
    non-decreasing in the level; at `lo` every job is at its lowest cap, at `hi` at its
    ceiling). Bisection to `tolerance`, then down to the grid (never below `lo`): the level,
    and so every job's cap, changes only when it crosses a grid line, not at every small
    change of the site's load. Evaluated per distinct curve with its GPUs summed, since
    jobs share few curves."""
    groups: dict[int, list] = {}
    for e in running:
        g = groups.get(id(e.curve))
        if g is None:
            groups[id(e.curve)] = [e.curve, e.gpus]
        else:
            g[1] += e.gpus

    def used(level: float | None) -> float:
        return sum(
            gpus * float(c.power_w[c.top if level is None else index_at(c, level)])
            for c, gpus in groups.values()
        )

    if used(None) <= budget_w + _TOL_W:
        return _SitePlan([e.curve.top for e in running], None, used(None))
    lowest = sum(gpus * float(c.power_w[0]) for c, gpus in groups.values())
    if lowest > budget_w + _TOL_W:
        return _SitePlan([0] * len(running), lo, lowest, feasible=False)
    floor = lo
    while hi - lo > tolerance:
        mid = (lo + hi) // 2 if integer else 0.5 * (lo + hi)
        if used(mid) <= budget_w + _TOL_W:
            lo = mid
        else:
            hi = mid
    lo = max(floor, math.floor(lo / step + 1e-9) * step)
    return _SitePlan([index_at(e.curve, lo) for e in running], float(lo), used(lo))


# --- the capping policies ----------------------------------------------------------------


@dataclass
class _Capping(_DemandResponse):
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

    _joint_admission = True

    def _admit(
        self,
        state: SystemState,
        mem: _Memory,
        site: str,
        site_cap: float | None,
        running: list[_Entry],
        budget_w: float,
        plan: list[Action],
        arriving: list[tuple[int, str]],
    ) -> list[tuple[int, _Entry]]:
        if not arriving:
            return []
        f = float(self.admit_min_fraction)
        at_floor_w = sum(e.power_w(e.curve.index_at_fraction(f)) for e in running)
        out = []
        for i, model in arriving:
            a = plan[i]
            e = self._entry(state, a.job, model, a.gpu_cap_w, site_cap)
            self._prepare(state, site, e)
            e.fixed_w = self._fixed_w(state, e, site)
            need = e.power_w(e.curve.index_at_fraction(f)) + e.fixed_w
            if at_floor_w + need <= budget_w + _TOL_W:
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

    def _solve(
        self, state: SystemState, site: str, running: list[_Entry], budget_w: float
    ) -> _SitePlan:
        return _uniform(running, budget_w, float(self.cap_step_w))


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

    def _solve(
        self, state: SystemState, site: str, running: list[_Entry], budget_w: float
    ) -> _SitePlan:
        if not running:
            return _SitePlan([], None, 0.0, feasible=budget_w >= -_TOL_W)
        # f = 0 puts every job at its minimum cap, f = 1 every job at its ceiling
        step = float(self.fraction_step)
        return _bisect_level(
            running, budget_w, _Curve.index_at_fraction, 0.0, 1.0, step / 8.0, step
        )


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

    def _next(self, e: _Entry, i: int) -> int:
        """The index one step below `i` (at least one grid point, and saving power)."""
        return e.curve.steps(self.step_w)[0][i]

    def _price(self, e: _Entry, i: int) -> float:
        """Work lost per watt saved by the step below index `i`."""
        return e.weight * e.curve.steps(self.step_w)[1][i]

    def _solve(
        self, state: SystemState, site: str, running: list[_Entry], budget_w: float
    ) -> _SitePlan:
        if not running:
            return _SitePlan([], None, 0.0, feasible=budget_w >= -_TOL_W)
        idx = [e.curve.top for e in running]
        used = sum(e.power_w(i) for e, i in zip(running, idx, strict=True))
        if used <= budget_w + _TOL_W:
            return _SitePlan(idx, None, used)
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
        while used > budget_w + _TOL_W and heap:
            price, g = heapq.heappop(heap)
            e0 = running[members[g][0]]
            i = idx[members[g][0]]
            k = self._next(e0, i)
            per_gpu_w = float(e0.curve.power_w[i] - e0.curve.power_w[k])
            for n in members[g]:
                used -= running[n].gpus * per_gpu_w
                last, prev, idx[n] = n, i, k
                if used <= budget_w + _TOL_W:
                    break
            else:
                if k > 0:
                    heapq.heappush(heap, (self._price(e0, k), g))
        if used > budget_w + _TOL_W:
            return _SitePlan(idx, price, used, feasible=False)
        # Refine the last step to the highest cap in it that still fits (power is
        # non-decreasing in the cap, so a search on the power column finds it).
        e = running[last]
        room_w = (budget_w + _TOL_W - (used - e.power_w(idx[last]))) / e.gpus
        k = int(np.searchsorted(e.curve.power_w, room_w, side="right")) - 1
        k = min(max(k, idx[last]), prev)
        used += e.power_w(k) - e.power_w(idx[last])
        idx[last] = k
        return _SitePlan(idx, price, used)

    def _prepare(self, state: SystemState, site: str, entry: _Entry) -> None:
        entry.weight = (
            self._speed(state, entry.job, site, entry.model) if self.weight_by_speed else 1.0
        )


# --- dr_pause ----------------------------------------------------------------------------


@dataclass
class DrPause(_DemandResponse):
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

    def _level_index(self, entry: _Entry, level: object) -> int:
        return _uniform_index(entry, level)

    def _solve(
        self, state: SystemState, site: str, running: list[_Entry], budget_w: float
    ) -> _SitePlan:
        mem = self._mem
        idx = [e.curve.top for e in running]
        used = sum(e.power_w(i) for e, i in zip(running, idx, strict=True))
        paused_here = [
            j for j, (s, _, _) in mem.paused.items() if s == site and j.state == "suspended"
        ]
        if used > budget_w + _TOL_W:
            slack = {
                e.job: _slack_s(state, e.job, site, e.model, e.job.cap_w)
                for e in running
                if e.job.interruptible
            }
            order = sorted((e for e in running if e.job.interruptible), key=lambda e: -slack[e.job])
            suspend: list[_Entry] = []
            for e in order:
                if used <= budget_w + _TOL_W:
                    break
                idle = e.gpus * state.idle_w(site, e.model)
                used += idle - e.power_w(e.curve.top)
                suspend.append(e)
            hold = True
            if used <= budget_w + _TOL_W:
                return _SitePlan(idx, None, used, suspend=suspend, hold_starts=hold)
            rest = [e for e in running if e not in suspend]
            idle_w = used - sum(e.power_w(e.curve.top) for e in rest)
            if not self.fallback_uniform_cap:
                return _SitePlan(idx, None, used, feasible=False, suspend=suspend)
            capped = _uniform(rest, budget_w - idle_w, _PAUSE_CAP_STEP_W)
            by_entry = dict(zip(map(id, rest), capped.idx, strict=True))
            idx = [by_entry.get(id(e), e.curve.top) for e in running]
            return _SitePlan(
                idx,
                capped.level,
                capped.used_w + idle_w,
                feasible=capped.feasible,
                suspend=suspend,
                hold_starts=hold,
            )
        # Under the target: paused jobs come back, least slack first, while they fit; starts
        # wait until every paused job of the site is back.
        waiting = sorted(
            paused_here,
            key=lambda j: _slack_s(state, j, site, mem.paused[j][1], mem.paused[j][2]),
        )
        return _SitePlan(idx, None, used, resume=waiting, hold_starts=bool(waiting))
