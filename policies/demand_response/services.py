"""`dr_services`: demand response with inference services in the mix.

During an event a site's training jobs take the cut first, as `dr_complementary` shares it
(its planner and solve, unchanged); only when even their lowest caps leave the site over its
target are its services cut, each lever only as far as needed and never below the
service's forecast peak rate with headroom (its SLO): (1) its replicas move to a
lower-power variant (before the event, in its lead window: a move takes a cold start, both
variants drawing power meanwhile), (2) a shorter directive (more requests per replica, so
fewer replicas), (3) a cap on its GPUs. After the event the service gets back what it had.
The rules are in docs/policies-demand-response.md ("dr_services")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from policies.demand_response.planner import Entry, SitePlan, SitePlanner, active_limits
from policies.demand_response.strategies import DrComplementary
from policies.kit import FreeGpus
from policies.kit.inference import forecast_peak_rps
from sim.api import Action, ReplicaPoint, Scale, ServiceView, SetCap, SetDirective, SystemState

__all__ = ["DrServices"]


@dataclass
class _Config:
    """How a service runs: replicas per (site, variant name), directive, own cap (W)."""

    replicas: dict[tuple[str, str], int]
    directive: str
    cap_w: float | None

    @classmethod
    def of(cls, svc: ServiceView) -> _Config:
        reps = {(s, v): svc.replicas(s, v) + svc.starting(s, v) for s, v in svc.deployments}
        return cls(reps, svc.directive, svc.cap_w)


@dataclass
class _Memory:
    """Per run: each cut service's configuration before the cut and the one planned."""

    state: SystemState | None = None
    before: dict[str, _Config] = field(default_factory=dict)
    target: dict[str, _Config] = field(default_factory=dict)


@dataclass
class DrServices(DrComplementary):
    """`dr_complementary` for the jobs, then the services' variants, directives and caps
    (module docstring; docs/policies-demand-response.md, "dr_services")."""

    headroom: float = 0.25
    """Spare capacity kept over a service's forecast peak rate (as serve_autoscale's)."""
    lookahead_s: float = 900.0
    """How far ahead the forecast peak rate is taken, s."""
    lead_s: float = 600.0
    """Variant moves are made in the last `lead_s` seconds before an event starts, s."""
    tick_s: float = 300.0
    """Decide at least this often, s (at most `lead_s`, so a decision falls in the lead)."""
    service_cap_step_w: float = 10.0
    """Grid of a service's cap, W, in [1, 100]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        checks = (
            ("headroom", 0 <= self.headroom <= 10, "in [0, 10]"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("lead_s", 0 < self.lead_s < math.inf, "> 0"),
            ("tick_s", 0 < self.tick_s <= self.lead_s, "in (0, lead_s]"),
            ("service_cap_step_w", 1 <= self.service_cap_step_w <= 100, "in [1, 100] W"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")
        self._svc = _Memory()

    # ---- the procedure ----

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """The jobs' plan (with in-event directive and cap cuts planned by `solve`), then
        variant moves for events in their lead, then the services driven to their plans."""
        if self._svc.state is not state:
            self._svc = _Memory(state)
        out = super().amend(state, actions)
        self._lead_moves(state)
        self._restore_ended(state)
        free = FreeGpus(state)
        for a in out:
            free.book(a)
        return out + self._drive(state, free)

    def solve(self, planner: SitePlanner, running: list[Entry], budget_w: float) -> SitePlan:
        """The jobs' plan; if even their lowest caps leave the site over its target, the
        services there cut by directives, then caps, as far as needed, and the jobs re-planned
        with the power that frees."""
        plan = super().solve(planner, running, budget_w)
        if plan.feasible:
            return plan
        freed_w = self._cut_in_event(planner.state, planner.site, plan.used_w - budget_w)
        return super().solve(planner, running, budget_w + freed_w) if freed_w > 0 else plan

    # ---- the services' plans ----

    def _services_at(self, state: SystemState, site: str) -> list[ServiceView]:
        svcs = (state.service(n) for n in state.services)
        return [s for s in svcs if any(d[0] == site for d in s.deployments)]

    def _config(self, svc: ServiceView) -> _Config:
        """The configuration planned for `svc` (its current one if none), remembering the one
        it had before its first cut."""
        mem = self._svc
        if svc.name not in mem.target:
            mem.before[svc.name] = _Config.of(svc)
            mem.target[svc.name] = _Config.of(svc)
        return mem.target[svc.name]

    def need_rps(self, svc: ServiceView) -> float:
        """Capacity `svc` keeps: its peak forecast rate over `lookahead_s` (or the last
        step's, if higher) times 1 + `headroom`, requests/s."""
        return forecast_peak_rps(svc, self.lookahead_s) * (1.0 + self.headroom)

    def _point(self, svc: ServiceView, site: str, variant: str, cfg: _Config) -> ReplicaPoint:
        """One replica of `variant` at `site` under `cfg`'s directive and cap (without a cap
        of its own: the site's, else none, i.e. its GPU's highest cap)."""
        state = self._svc.state
        assert state is not None  # set by amend before any plan
        cap_w = cfg.cap_w if cfg.cap_w is not None else state.site_cap_w(site)
        if cap_w is None:
            gpu = next(v.gpu for v in svc.variants if v.name == variant)
            cap_w = state.gpu_spec(gpu).max_cap_w
        return svc.replica_point(site, variant, cfg.directive, cap_w)

    def _capacity_rps(self, svc: ServiceView, cfg: _Config) -> float:
        """Capacity of `svc` under `cfg`, requests/s."""
        return sum(
            n * self._point(svc, s, v, cfg).capacity_rps for (s, v), n in cfg.replicas.items() if n
        )

    def _power_w(self, svc: ServiceView, cfg: _Config, site: str) -> float:
        """GPU power above idle of `svc`'s replicas at `site` under `cfg`, W: each at its
        share of the service's peak forecast rate (over `lookahead_s`; every replica of
        `cfg` at the same fraction of its capacity), at the batch that serves it
        (`ReplicaPoint.power_at_w`), less its idle power (a GPU a replica frees draws that
        still)."""
        points = {k: self._point(svc, *k, cfg) for k, n in cfg.replicas.items() if n}
        capacity_rps = sum(cfg.replicas[k] * p.capacity_rps for k, p in points.items())
        load = forecast_peak_rps(svc, self.lookahead_s) / capacity_rps if points else 0.0
        return sum(
            cfg.replicas[k] * (p.power_at_w(load * p.capacity_rps) - p.idle_w)
            for k, p in points.items()
            if k[0] == site
        )

    def _lead_moves(self, state: SystemState) -> None:
        """For each event starting within `lead_s`: if the site would be over its target with
        its jobs at their lowest caps, move services' replicas there to the variant of the
        highest quality that covers the shortfall (else the lowest-power one)."""
        now = state.now_s
        for ev in state.demand_response():
            if not (ev.start_s - self.lead_s <= now < ev.start_s):
                continue
            site = ev.site
            target_w = ev.limit_kw * 1000.0 * (1.0 - self.margin_pct / 100.0) / state.pue(site)
            short_w = self._jobs_floor_it_w(state, site) - target_w
            for svc in self._services_at(state, site):
                if short_w <= 0:
                    break
                short_w -= self._move_variant(svc, site, short_w)

    def _jobs_floor_it_w(self, state: SystemState, site: str) -> float:
        """The site's IT power now with its running jobs at their lowest caps, W."""
        it_w = state.site_it_power_kw(site) * 1000.0
        site_cap = state.site_cap_w(site)
        for job in state.running:
            if job.site == site and job.gpu_model is not None:
                curve = self.curves.of_job(state, job.gpu_model, job.profile, job.cap_w, site_cap)
                it_w += job.gpus * (float(curve.power_w[0]) - job.gpu_power_w)
        return it_w

    def _move_variant(self, svc: ServiceView, site: str, short_w: float) -> float:
        """Plan `svc`'s replicas at `site` on one variant (step 1); the power saved, W."""
        cfg = self._config(svc)
        here = {k: n for k, n in cfg.replicas.items() if k[0] == site}
        others = _Config(
            {k: n for k, n in cfg.replicas.items() if k[0] != site}, cfg.directive, None
        )
        room = self.need_rps(svc) - self._capacity_rps(svc, others)
        now_w = self._power_w(svc, cfg, site)
        options = []
        for v in svc.variants:
            if (site, v.name) not in svc.deployments or v.mig_profile is not None:
                continue
            pt = self._point(svc, site, v.name, cfg)
            n = max(0, math.ceil(room / pt.capacity_rps - 1e-9))
            trial = _Config(
                {**cfg.replicas, **dict.fromkeys(here, 0), (site, v.name): n},
                cfg.directive,
                cfg.cap_w,
            )
            saved = now_w - self._power_w(svc, trial, site)
            quality = -math.inf if v.quality is None else v.quality
            if saved > 0:
                options.append((saved >= short_w, quality if saved >= short_w else saved, trial))
        if not options:
            return 0.0
        _, _, best = max(options, key=lambda o: (o[0], o[1]))
        self._svc.target[svc.name] = best
        return now_w - self._power_w(svc, best, site)

    def _cut_in_event(self, state: SystemState, site: str, short_w: float) -> float:
        """Directives (step 2), then caps (step 3) of the services at `site`; power freed, W."""
        freed = 0.0
        for lever in (self._shorter_directive, self._cap):
            for svc in self._services_at(state, site):
                if freed >= short_w:
                    return freed
                freed += lever(state, svc, site, short_w - freed)
        return freed

    def _shorter_directive(
        self, state: SystemState, svc: ServiceView, site: str, short_w: float
    ) -> float:
        """The mildest shorter directive whose fewer replicas at `site` cover `short_w` (else
        the one that saves most, the mildest of equals); the power saved, W."""
        cfg = self._config(svc)
        now_w = self._power_w(svc, cfg, site)
        factor = {d.name: d.output_factor for d in svc.directives}
        best: tuple[float, _Config] | None = None
        for d in sorted(svc.directives, key=lambda d: d.quality_penalty):
            if d.output_factor >= factor[cfg.directive]:
                continue
            trial = self._fewest(svc, _Config(dict(cfg.replicas), d.name, cfg.cap_w), site)
            saved = now_w - self._power_w(svc, trial, site)
            if saved > 0 and (best is None or best[0] < min(saved, short_w)):
                best = (saved, trial)
        if best is None:
            return 0.0
        self._svc.target[svc.name] = best[1]
        return best[0]

    def _fewest(self, svc: ServiceView, cfg: _Config, site: str) -> _Config:
        """`cfg` with the replicas at `site` cut, from its largest deployment there, while the
        service's capacity stays at least its need."""
        need = self.need_rps(svc)
        reps = dict(cfg.replicas)
        for key in sorted((k for k in reps if k[0] == site), key=lambda k: -reps[k]):
            per = self._point(svc, *key, cfg).capacity_rps
            while reps[key] > 0:
                spare = self._capacity_rps(svc, _Config(reps, cfg.directive, cfg.cap_w)) - need
                if spare < per:
                    break
                reps[key] -= 1
        return _Config(reps, cfg.directive, cfg.cap_w)

    def _cap(self, state: SystemState, svc: ServiceView, site: str, short_w: float) -> float:
        """The highest cap (on the `service_cap_step_w` grid) of `svc`'s GPUs whose power
        saved at the service's load (`_power_w`: a cap saves only where a replica draws more
        than it) covers `short_w` while its capacity (`replica_point` under that cap) stays
        at least its need (else the lowest such cap); the power saved, W."""
        cfg = self._config(svc)
        gpus = {
            v.gpu for v in svc.variants if any(cfg.replicas.get((s, v.name), 0) for s in svc.sites)
        }
        if not gpus:
            return 0.0
        specs = [state.gpu_spec(g) for g in gpus]
        lo = max(s.min_cap_w for s in specs)
        top = cfg.cap_w if cfg.cap_w is not None else min(s.max_cap_w for s in specs)
        now_w = self._power_w(svc, cfg, site)
        need = self.need_rps(svc)
        best: tuple[float, _Config] | None = None
        cap = math.floor((top - 1e-9) / self.service_cap_step_w) * self.service_cap_step_w
        while cap >= lo:
            trial = _Config(dict(cfg.replicas), cfg.directive, float(cap))
            if self._capacity_rps(svc, trial) < need:
                break
            saved = now_w - self._power_w(svc, trial, site)
            if saved > 0:
                best = (saved, trial)
                if saved >= short_w:
                    break
            cap -= self.service_cap_step_w
        if best is None:
            return 0.0
        self._svc.target[svc.name] = best[1]
        return best[0]

    # ---- restoring and applying ----

    def _restore_ended(self, state: SystemState) -> None:
        """Services cut for events that are over (and with none in force or in its lead at
        their sites) get back the configuration they had."""
        busy = set(active_limits(state))
        busy |= {e.site for e in state.demand_response() if e.start_s - self.lead_s <= state.now_s}
        mem = self._svc
        for name in list(mem.target):
            svc = state.service(name)
            if busy.isdisjoint(svc.sites):
                mem.target[name] = mem.before[name]
                if _Config.of(svc) == mem.before[name]:
                    del mem.target[name], mem.before[name]

    def _drive(self, state: SystemState, free: FreeGpus) -> list[Action]:
        """The actions that bring each planned service to its plan: scale-ups as GPUs allow;
        scale-downs only once the plan's ready replicas cover its need (make before break);
        its directive and cap."""
        out: list[Action] = []
        for name, cfg in self._svc.target.items():
            svc = state.service(name)
            if cfg.directive != svc.directive:
                out.append(SetDirective(svc, cfg.directive))
            if cfg.cap_w != svc.cap_w:
                out.append(SetCap(svc, cfg.cap_w))
            ready = {k: min(svc.replicas(*k), n) for k, n in cfg.replicas.items()}
            covered = (
                self._capacity_rps(svc, _Config(ready, cfg.directive, cfg.cap_w))
                >= self.need_rps(svc) - 1e-9
            )
            for (site, v), n in cfg.replicas.items():
                have = svc.replicas(site, v) + svc.starting(site, v)
                variant = next(x for x in svc.variants if x.name == v)
                if n > have and free.take(site, variant.gpu, (n - have) * variant.gpus_per_replica):
                    out.append(Scale(svc, site, n, v))
                elif n < have and covered:
                    out.append(Scale(svc, site, n, v))
        return out
