"""How a demand-response policy amends one decision's plan: the plan walked in order
(`Amendment`), then each site under an event planned by a `SitePlanner`, which asks the
policy's strategy hooks (`Strategy`: `admit`, `solve`, `late_index`, `prepare`, as
`base.DemandResponse` declares them). The rules are those of
docs/policies-demand-response.md ("How they work")."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from policies.demand_response.curves import TOL_W, Curve, Curves
from policies.demand_response.memory import Memory
from policies.kit import FreeGpus, job_of
from sim.api import Action, JobView, Migrate, Resume, SetCap, Start, Suspend, SystemState

__all__ = [
    "Amendment",
    "Entry",
    "Free",
    "SitePlan",
    "SitePlanner",
    "Strategy",
    "active_limits",
    "slack_s",
]


@dataclass(eq=False)
class Entry:
    """One job in a site's plan: running there, or arriving (start, resume, migration)."""

    job: JobView
    gpus: int
    model: str
    curve: Curve
    restore_w: float | None
    """The job's own cap to go back to after the event (None: the site's cap, or uncapped)."""
    fixed_w: float = 0.0
    """Arrivals: IT power the arrival adds besides gpus x the draw of its cap, W (minus the
    idle draw of the GPUs it takes, plus nodes it wakes)."""
    weight: float = 1.0
    """Work per unit of throughput fraction and GPU (reference speed), for dr_complementary."""

    def power_w(self, idx: int) -> float:
        return self.gpus * float(self.curve.power_w[idx])

    def cap_action_w(self, idx: int) -> float | None:
        """The own cap that gives index `idx`: the restore cap at the ceiling."""
        return self.restore_w if idx == self.curve.top else float(self.curve.caps_w[idx])


@dataclass
class SitePlan:
    """What a strategy decided for the jobs of one site (`Strategy.solve`)."""

    idx: list[int]
    """Curve index per entry (ignored for suspended ones)."""
    level: float | None
    """The strategy's level (a cap, a fraction, a price), for `late_index` to size starts on
    the running jobs' terms (None: at their ceilings)."""
    used_w: float
    """Power of the entries (suspended ones at idle) under the plan, W."""
    feasible: bool = True
    suspend: list[Entry] = field(default_factory=list)
    resume: list[JobView] = field(default_factory=list)
    """Paused jobs to resume at the site if they fit, in this order (dr_pause)."""
    hold_starts: bool = False


class Free(FreeGpus):
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


def active_limits(state: SystemState) -> dict[str, float]:
    """Limit, kW, of each site with an event active now (the lowest if several overlap)."""
    now = state.now_s
    out: dict[str, float] = {}
    for ev in state.demand_response():
        if ev.start_s <= now < ev.end_s:
            out[ev.site] = min(out.get(ev.site, math.inf), ev.limit_kw)
    return out


def slack_s(state: SystemState, job: JobView, site: str, model: str, cap_w: float | None) -> float:
    """Time to spare before `job`'s deadline if it ran from now under `cap_w`, s (inf: none)."""
    if job.deadline_s is None:
        return math.inf
    runtime_s, _ = state.estimate(job, site, cap_w, model)
    return job.deadline_s - state.now_s - runtime_s


class Amendment:
    """One decision's plan as a demand-response policy amends it: the scheduler's actions
    (`plan`, those dropped marked in `keep`), the GPUs they take (`free`), what touches each
    site under an event, the actions the policy adds after the plan (`tail`) and the starts
    it holds (`held`)."""

    def __init__(
        self,
        state: SystemState,
        mem: Memory,
        limits: dict[str, float],
        actions: Sequence[Action],
    ):
        self.state = state
        self.mem = mem
        self.limits = limits
        """Limit, kW, of each site with an event active now."""
        self.plan = list(actions)
        self.keep = [True] * len(self.plan)
        self.free = Free(state)
        self.planned = {job for a in self.plan if (job := job_of(a)) is not None}
        """The jobs the plan concerns."""
        self.wished: dict[JobView, float | None] = {}
        """Caps the plan sets for jobs at event sites: restored after the event."""
        self.site_caps: dict[str, float | None] = {}
        """Site caps the plan sets."""
        self.leaving: dict[str, list[JobView]] = {s: [] for s in limits}
        """Per event site: jobs the plan suspends or migrates away."""
        self.arriving: dict[str, list[tuple[int, Start | Resume, str]]] = {s: [] for s in limits}
        """Per event site: (index in the plan, action, GPU model) of its starts and resumes."""
        self.tail: list[Action] = []
        self.held: list[tuple[int, Start]] = []

    def forget_taken_over(self) -> None:
        """Paused jobs the plan concerns are the scheduler's again."""
        for job in self.planned & self.mem.paused.keys():
            del self.mem.paused[job]

    def resume_paused(self) -> list[Action]:
        """Resumes of the jobs the policy paused whose site has no event and has room, least
        slack first (rule 6), their GPUs taken before the plan's."""
        mem = self.mem
        if not mem.paused:
            return []
        out: list[Action] = []
        waiting = []
        for job, (site, model, cap) in list(mem.paused.items()):
            if job.state != "suspended":
                del mem.paused[job]
            elif site not in self.limits:
                waiting.append((slack_s(self.state, job, site, model, cap), job, site, model, cap))
        for _, job, site, model, cap in sorted(waiting, key=lambda w: w[0]):
            if self.free.take_for(job, site, model) is not None:
                out.append(Resume(job, site, cap, model))
                del mem.paused[job]
        return out

    def walk(self) -> None:
        """Walk the plan in order, booking its GPUs, and set aside what touches event sites:
        starts and resumes there (`arriving`), jobs leaving (`leaving`), cap wishes
        (`wished`, dropped from the plan: the DR cap replaces them). Migrations onto an
        event site, and placements whose GPUs went to a resumed paused job, are dropped."""
        limits, free, keep = self.limits, self.free, self.keep
        for i, a in enumerate(self.plan):
            if isinstance(a, Start | Resume):
                model = free.take_for(a.job, a.site, a.gpu_model)  # GPUs, a share or a slice
                if model is None:  # the room went to a job this policy resumed
                    keep[i] = False
                elif a.site in limits:
                    self.arriving[a.site].append((i, a, model))
            elif isinstance(a, Migrate):
                if a.site in limits:  # no load moves onto a site during its event
                    keep[i] = False
                    continue
                src, src_model = a.job.site, a.job.gpu_model
                if free.take_for(a.job, a.site, a.gpu_model) is None:
                    keep[i] = False
                    continue
                if src is not None and src_model is not None:
                    if _whole_gpus(a.job):  # a share or a slice frees no whole GPU
                        free.release(src, src_model, a.job.gpus, by_plan=True)
                    if src in limits:
                        self.leaving[src].append(a.job)
            elif isinstance(a, Suspend):
                if a.job.site is not None and a.job.gpu_model is not None:
                    if _whole_gpus(a.job):
                        free.release(a.job.site, a.job.gpu_model, a.job.gpus, by_plan=True)
                    if a.job.site in limits:
                        self.leaving[a.job.site].append(a.job)
            elif isinstance(a, SetCap):
                if isinstance(a.target, str):
                    self.site_caps[a.target] = a.watts
                elif isinstance(a.target, JobView) and a.target.site in limits:
                    self.wished[a.target] = a.watts
                    keep[i] = False  # the DR cap replaces it; the wish is restored later

    def redirect_held(self) -> None:
        """Held starts go to the first other site the job may use without an active event
        that has a pool with enough free GPUs (not counting GPUs the plan released)."""
        for _, a in self.held:
            for other in a.job.allowed_sites:
                if other in self.limits or other == a.site:
                    continue
                job = a.job
                if not _whole_gpus(job):  # a slice or a share: placed as it asks
                    model = self.free.take_for(job, other, None)
                else:
                    model = self.free.take(other, None, job.gpus, a.gpu_cap_w, own=True)
                if model is not None:
                    self.tail.append(Start(a.job, other, a.gpu_cap_w, model))
                    break

    def kept(self) -> list[Action]:
        """The plan's actions that stay, amended."""
        return [a for a, k in zip(self.plan, self.keep, strict=True) if k]

    def restores(self) -> list[Action]:
        """The caps jobs had before an event, for jobs at sites whose events have ended
        (rule 6). A job the plan re-caps keeps the plan's cap; one it suspends or migrates
        is looked at again at the next decision."""
        mem, state = self.mem, self.state
        if not mem.saved:
            return []
        recapped = {
            a.target
            for a, k in zip(self.plan, self.keep, strict=True)
            if k and isinstance(a, SetCap)
        }
        out: list[Action] = []
        for job, cap in list(mem.saved.items()):
            site, model = job.site, job.gpu_model
            if site is None or model is None:  # finished, suspended by someone else, ...
                del mem.saved[job]
                continue
            if site in self.limits or (job in self.planned and job not in recapped):
                continue
            del mem.saved[job]
            if job in recapped or cap == job.cap_w:
                continue
            spec = state.gpu_spec(model)
            if cap is None or spec.min_cap_w <= cap <= spec.max_cap_w:
                out.append(SetCap(job, cap))
        return out


class Strategy(Protocol):
    """What a `SitePlanner` asks of its policy (`base.DemandResponse` and its strategies):
    the margin under the limit, the curves, and the strategy hooks."""

    margin_pct: float
    curves: Curves

    def solve(self, planner: SitePlanner, entries: list[Entry], budget_w: float) -> SitePlan: ...
    def admit(self, planner: SitePlanner) -> list[tuple[int, Entry]]: ...
    def late_index(self, entry: Entry, level: float | None) -> int | None: ...
    def prepare(self, planner: SitePlanner, entry: Entry) -> None: ...


class SitePlanner:
    """The plan for one site under an event (rules 1-5): its running jobs as entries
    (`running`), the IT power they share with the starts admitted there (`budget_w`), and
    the starts arriving (`arriving`)."""

    def __init__(self, policy: Strategy, amendment: Amendment, site: str, limit_kw: float):
        state = amendment.state
        self.policy = policy
        self.amendment = amendment
        self.state = state
        self.mem = amendment.mem
        self.site = site
        site_caps = amendment.site_caps
        self.site_cap = site_caps[site] if site in site_caps else state.site_cap_w(site)
        """The site's cap as the plan leaves it, W (None: none)."""
        self.arriving = amendment.arriving[site]
        self._arrivals: dict[int, Entry] = {}
        target_w = limit_kw * 1000.0 * (1.0 - policy.margin_pct / 100.0) / state.pue(site)
        base_w, self.running = self._running(amendment.leaving[site], amendment.wished)
        self.budget_w = target_w - base_w
        """IT power the running jobs' GPUs and the admitted starts may draw, W (rule 1)."""

    def _running(
        self, leaving: list[JobView], wished: dict[JobView, float | None]
    ) -> tuple[float, list[Entry]]:
        """(IT power of the site besides its running jobs' GPUs, W; the entries of the
        running jobs that stay), remembering the cap each had before the event."""
        state, site, mem = self.state, self.site, self.mem
        gone = set(leaving)
        base_w = state.site_it_power_kw(site) * 1000.0
        running: list[Entry] = []
        for job in state.running:
            if job.site != site:
                continue
            base_w -= job.gpus * job.gpu_power_w
            model = job.gpu_model
            assert model is not None
            if job in gone:
                base_w += job.gpus * state.idle_w(site, model)
                continue
            if job in wished:
                mem.saved[job] = wished[job]
            elif job not in mem.saved:
                mem.saved[job] = job.cap_w
            e = self.entry(job, model, mem.saved[job])
            self.policy.prepare(self, e)
            running.append(e)
        return base_w, running

    def entry(self, job: JobView, model: str, own_w: float | None) -> Entry:
        """`job` on `model` GPUs at the site, its ceiling `own_w` (else the site's cap)."""
        curve = self.policy.curves.of_job(self.state, model, job.profile, own_w, self.site_cap)
        return Entry(job, job.gpus, model, curve, own_w)

    def arrival(self, i: int, action: Start | Resume, model: str) -> Entry:
        """The entry of the plan's start (or resume) `action` at index `i`, on `model`, its
        fixed power filled in (built once)."""
        e = self._arrivals.get(i)
        if e is None:
            e = self._arrivals[i] = self.entry(action.job, model, action.gpu_cap_w)
            self.policy.prepare(self, e)
            e.fixed_w = self.fixed_w(e)
        return e

    def fixed_w(self, e: Entry) -> float:
        """IT power an arrival adds besides its GPUs' draw at its cap, W."""
        state, site = self.state, self.site
        top_cap = float(e.curve.caps_w[-1])
        delta = state.power_delta_w(e.job, top_cap, site, e.model)
        active = e.power_w(e.curve.top) - e.gpus * state.idle_w(site, e.model)
        if state.powered_off_gpus(site).get(e.model, 0) > 0 and abs(delta - active) > TOL_W:
            delta += active  # it wakes nodes: held at idle now, at its active draw once up
        return delta - e.power_w(e.curve.top)

    def plan(self) -> None:
        """Size the running jobs and the admitted starts, hold the others, resume paused
        jobs that fit: the actions go into the amendment."""
        admit = self.policy.admit(self)
        arrivals = [e for _, e in admit]
        fixed_w = sum(e.fixed_w for e in arrivals)
        result = self.policy.solve(self, self.running + arrivals, self.budget_w - fixed_w)
        self._cap_running(result)
        used_w = self._place_arrivals(result, dict(admit), result.used_w + fixed_w)
        self._resume(result, used_w)

    def _cap_running(self, result: SitePlan) -> None:
        """SetCaps and Suspends of the running jobs, as `result` has them."""
        tail, mem = self.amendment.tail, self.mem
        for e, idx in zip(self.running, result.idx[: len(self.running)], strict=True):
            if e in result.suspend:
                continue
            want = e.cap_action_w(idx)
            if want != e.job.cap_w:
                tail.append(SetCap(e.job, want))
        for e in result.suspend:
            tail.append(Suspend(e.job))
            mem.paused[e.job] = (self.site, e.model, e.restore_w)
            mem.saved.pop(e.job, None)

    def _place_arrivals(self, result: SitePlan, admitted: dict[int, Entry], used_w: float) -> float:
        """Admitted starts run under the caps the solve gave them; the others, unless the
        site holds its starts, at `late_index` if they fit the power left; the rest are
        held (rule 4). Returns the power used, W."""
        am, mem = self.amendment, self.mem
        hold = result.hold_starts or not result.feasible
        first = len(self.running)
        position = {i: first + n for n, i in enumerate(admitted)}  # entry n of the solve
        for i, a, model in self.arriving:
            job = a.job
            idx: int | None = None
            if i in admitted:
                e = admitted[i]
                idx = result.idx[position[i]]
            elif not hold:
                e = self.arrival(i, a, model)
                idx = self.policy.late_index(e, result.level)
                if idx is not None:
                    need = e.power_w(idx) + e.fixed_w
                    if used_w + need <= self.budget_w + TOL_W:
                        used_w += need
                    else:
                        idx = None
            if idx is not None:
                mem.saved[job] = a.gpu_cap_w
                am.plan[i] = dataclasses.replace(a, gpu_cap_w=e.cap_action_w(idx), gpu_model=model)
            else:
                am.keep[i] = False
                am.free.release(self.site, model, job.gpus)
                if isinstance(a, Start):
                    am.held.append((i, a))
        return used_w

    def _resume(self, result: SitePlan, used_w: float) -> None:
        """Paused jobs back while the power left allows (dr_pause)."""
        am, mem, site = self.amendment, self.mem, self.site
        for job in result.resume:
            _, model, cap = mem.paused[job]
            e = self.entry(job, model, cap)
            need = e.power_w(e.curve.top) + self.fixed_w(e)
            if used_w + need <= self.budget_w + TOL_W and am.free.take(
                site, model, job.gpus, own=True
            ):
                used_w += need
                am.tail.append(Resume(job, site, cap, model))
                del mem.paused[job]


def _whole_gpus(job: JobView) -> bool:
    """Whether `job` holds whole GPUs (not a share of one, `gpu_milli`, nor a MIG slice)."""
    return not job.mig_profile and job.gpu_milli >= 1000
