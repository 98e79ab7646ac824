"""The SimPy engine: arrivals, decision points, job runs under changing speed, DR events.

Every concept is a SimPy event: an arrival is a timeout of the arrivals process, a job's
completion is one timeout carrying a callback (re-timed by bumping a version number when
its speed changes), a decision point is a zero-delay timeout, so that all the events of
one instant lead to a single `policy.decide` call.

Progress is exact under changing speed: a running job's speed is constant between
changes (start, cap change, suspend, migrate), so at each change the engine closes a
segment, subtracts speed x duration from the work left, charges the segment's energy
and carbon (power x the exact integral of the carbon signal), and schedules the
completion from the work left.

Work is counted in reference GPU-seconds (A100-80GB at its maximum power limit); a job on
`g` GPUs of model `m` under cap `c` advances at g x speed(m, profile) x throughput(m, profile, c)
reference GPU-seconds per second.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import simpy

from sim import hardware
from sim.api import (
    Defer,
    DemandResponseView,
    JobView,
    Migrate,
    Reject,
    Resume,
    SetCap,
    Start,
    Suspend,
    SystemState,
)
from sim.cluster import Pool, Site
from sim.dr_events import DrEvent, dr_events
from sim.errors import PolicyError, ScenarioError
from sim.grid import CarbonSignal, Forecaster
from sim.network import Wan
from sim.records import EventLog, PowerLog
from sim.scenario import Scenario
from sim.workload import JobTable
from sim.workload.table import mask_sites

# Job states. Terminal: COMPLETED, REJECTED; at the horizon every other state is "unfinished".
SUBMITTED_LATER, PENDING, DEFERRED, RUNNING, SUSPENDED, COMPLETED, REJECTED = range(7)
STATE_NAMES = (
    "not submitted",
    "pending",
    "deferred",
    "running",
    "suspended",
    "completed",
    "rejected",
)

_WS_PER_KWH = 3.6e6
_GS_PER_KGH = 3.6e9  # (g/kWh x W x s) -> kg


class DrWindow(NamedTuple):
    """An announced demand-response event as measured: limit and the mean facility power in
    the hour before its notice (its baseline), kW."""

    site: int
    start_s: float
    end_s: float
    limit_kw: float
    baseline_kw: float
    rebound_h: float


class Engine:
    """One simulation run. Build it with `simulate`, which also turns it into `Results`."""

    def __init__(
        self,
        scenario: Scenario,
        jobs: JobTable,
        signals: list[CarbonSignal],
        policy: object,
        forecaster: Forecaster,
        wan: Wan | None = None,
    ):
        self.scenario = scenario
        self.wan = wan
        """The WAN data and checkpoints cross between sites (None: moves are free)."""
        if wan is not None and wan.config.contention:
            raise ScenarioError(
                "wan.contention = true: shared link capacity is modelled in sim.network but "
                "the engine does not drive it yet; set contention = false"
            )
        self.horizon_s = scenario.horizon_s
        self.env = simpy.Environment()
        self.jobs = jobs
        self.policy = policy
        self.forecaster = forecaster
        self.site_names = scenario.site_names()
        self.power_log = PowerLog(len(scenario.sites))
        self.sites = [
            Site(i, cfg, scenario.start, signals[i], self.power_log)
            for i, cfg in enumerate(scenario.sites)
        ]
        self._site_by_name = {s.name: s for s in self.sites}
        self.events = EventLog()

        n = len(jobs)
        self._gpus = jobs.gpus.tolist()
        self._profile = jobs.profile.tolist()
        self._interruptible = jobs.interruptible.tolist()
        self._allowed = jobs.allowed_sites.tolist()
        """Per job, bit mask of the sites it may run on (data residency)."""
        self._names_by_mask: dict[int, tuple[str, ...]] = {}
        self._state = [SUBMITTED_LATER] * n
        self._remaining = (jobs.work_gpu_h * 3600.0).tolist()
        """Work left, reference GPU-seconds."""
        self._site: list[Site | None] = [None] * n
        self._pool: list[Pool | None] = [None] * n
        self._cap: list[float | None] = [None] * n
        self._rate = [0.0] * n
        """Progress, reference GPU-seconds per second (while running)."""
        self._draw_w = [0.0] * n
        """Active power of one of the job's GPUs, W (while running)."""
        self._seg_start = [0.0] * n
        self._version = [0] * n
        self._deferred_until: dict[int, float] = {}
        self._holding: set[int] = set()
        """Running jobs held at idle power: nodes booting for them, or a checkpoint loading."""
        self._loading: set[int] = set()
        """Held jobs reading their checkpoint (resumed or migrated)."""
        interval_h = scenario.workload.checkpoint_interval_h
        self._ckpt_interval_s = None if interval_h is None else interval_h * 3600.0
        self._writing: dict[int, tuple[Site, Pool, float, float]] = {}
        """Suspended or migrated jobs still writing their checkpoint on the GPUs they left:
        (site, pool, since_s, until_s)."""
        self._since_ckpt: dict[int, list[float]] = {}
        """With periodic checkpoints, per running job: [running s since its last checkpoint,
        work left at that checkpoint (reference GPU-s)]."""
        self.checkpoint_kwh: dict[int, float] = {}
        """Facility energy spent writing and loading checkpoints, per job, kWh."""
        self.work_lost_gpu_s: dict[int, float] = {}
        """Work redone after restarting from a periodic checkpoint, reference GPU-s."""
        self.wan_moves: dict[int, list[float]] = {}
        """Per job that moved data over the WAN: [GB, kWh, kg CO2]."""
        self._ckpt_site: dict[int, Site] = {}
        """Where each suspended job's checkpoint lies."""
        # Per-job results, in typed arrays (8 bytes a value, not a float object and a slot).
        self.start_s = array("d", [math.nan]) * n
        self.end_s = array("d", [math.nan]) * n
        self.model: list[str | None] = [None] * n
        self.site_of = array("q", [-1]) * n
        self.energy_kwh = array("d", [0.0]) * n
        self.carbon_kg = array("d", [0.0]) * n
        self.embodied_kg = array("d", [0.0]) * n
        self.gpu_s = array("d", [0.0]) * n
        self.reason: dict[int, str] = {}

        # Ordered job sets (dicts as insertion-ordered sets), viewed by the policy.
        self.pending: dict[int, None] = {}
        self.running: dict[int, None] = {}
        self.suspended: dict[int, None] = {}
        self.state_view = SystemState(self)
        self._decision_scheduled = False
        self._estimates: dict[tuple[str, str, float | None], tuple[float, float]] = {}
        self._announced: list[DemandResponseView] = []
        self.dr_events = dr_events(scenario, signals)
        self.dr_windows: list[DrWindow] = []
        """Every announced demand-response event, with its limit and baseline."""
        self._site_windows: list[list[tuple[float, float]]] = [[] for _ in self.sites]
        """Per site, the (start_s, end_s) of its announced events."""
        self.dr_job: dict[int, list[float]] = {}
        """Per job that ran or was suspended during an event at its site: [s run in events,
        reference GPU-s of work done then, reference GPU-s it would have done uncapped in
        that time and while suspended in events, s suspended in events]."""
        self._paused: dict[int, tuple[int, float, float]] = {}
        """Jobs suspended during an event at their site: (site, since_s, uncapped rate)."""

    # --- running -------------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None = None) -> None:
        """Run to the horizon; `progress(fraction)` is called along the way."""
        self.start_processes()
        chunks = 100 if progress else 1
        for k in range(1, chunks + 1):
            self.env.run(until=self.horizon_s * k / chunks)
            if progress:
                progress(k / chunks)
        self._close_at_horizon()

    def start_processes(self) -> None:
        """Set up arrivals, DR events, power-off checks, PUE steps, signal steps, ticks."""
        env = self.env
        env.process(self._arrivals())
        for ev in self.dr_events:
            env.process(self._demand_response(ev))
        for site in self.sites:
            if site.power_off is not None:  # every node is idle at the start
                env.timeout(site.power_off.idle_s).callbacks.append(
                    lambda _e, site=site: self._switch_off_check(site)
                )
        if any(s.pue.constant is None for s in self.sites):
            env.process(self._pue_steps())
        if getattr(self.policy, "signal_steps", False):
            env.process(self._signal_steps())
        tick_s = getattr(self.policy, "tick_s", None)
        if tick_s:
            env.process(self._ticks(float(tick_s)))

    def _arrivals(self):
        env = self.env
        largest = max(p.count for s in self.sites for p in s.pools)
        for j, t in enumerate(self.jobs.submit_s.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            self.events.append(t, "submit", j)
            if self._gpus[j] > largest:
                self._reject(j, f"needs {self._gpus[j]} GPUs; the largest pool has {largest}")
                continue
            self._state[j] = PENDING
            self.pending[j] = None
            self._request_decision()

    def _signal_steps(self):
        steps = np.unique(
            np.concatenate([s.signal.breakpoints_between(0.0, self.horizon_s) for s in self.sites])
        )
        for t in steps.tolist():
            yield self.env.timeout(t - self.env.now)
            self._request_decision()

    def _pue_steps(self):
        """Log facility power wherever a site's hourly PUE changes."""
        steps = sorted(
            {(t, s.index) for s in self.sites for t in s.pue.steps_between(0.0, self.horizon_s)}
        )
        for t, i in steps:
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            self.sites[i].log_power(t)
            if self._event_active(i, t):  # the limit in IT watts moved
                self._request_decision()

    def _ticks(self, tick_s: float):
        while True:
            yield self.env.timeout(tick_s)
            self._request_decision()

    def _event_active(self, site_index: int, t_s: float) -> bool:
        return any(s <= t_s < e for s, e in self._site_windows[site_index])

    def _event_ahead(self, site_index: int, t_s: float) -> bool:
        """An announced event at the site is on now or still to come."""
        return any(t_s < e for _, e in self._site_windows[site_index])

    def _demand_response(self, ev: DrEvent):
        env = self.env
        site = self.sites[ev.site]
        start_s, end_s, notice_s = ev.start_s, ev.end_s, ev.notice_s
        yield env.timeout(notice_s)
        baseline_kw = self._mean_facility_kw(site, notice_s - 3600.0, notice_s)
        if ev.limit_kw is not None:
            limit_kw = ev.limit_kw
        else:
            limit_kw = baseline_kw * (1.0 - ev.reduction_pct / 100.0)
        view = DemandResponseView(site.name, start_s, end_s, limit_kw)
        self._announced.append(view)
        self.dr_windows.append(
            DrWindow(site.index, start_s, end_s, limit_kw, baseline_kw, ev.rebound_h)
        )
        self._site_windows[site.index] = _union(self._site_windows[site.index], start_s, end_s)
        self.events.append(notice_s, "dr_notice", site=site.index, value=limit_kw, detail=ev.key)
        self._request_decision()
        if start_s > env.now:
            yield env.timeout(start_s - env.now)
        self.events.append(start_s, "dr_start", site=site.index, value=limit_kw)
        self._request_decision()
        yield env.timeout(end_s - env.now)
        self._announced.remove(view)
        self.events.append(end_s, "dr_end", site=site.index, value=limit_kw)
        self._request_decision()

    def _mean_facility_kw(self, site: Site, t0_s: float, t1_s: float) -> float:
        """Mean facility power of `site` over [t0, t1] (t0 clipped at 0), kW; the current
        power if the window is empty."""
        t0_s = max(0.0, t0_s)
        if t1_s <= t0_s:
            return site.facility_w(t1_s) / 1000.0
        log = self.power_log
        energy_ws, t_next, i = 0.0, t1_s, len(log.time_s) - 1
        while i >= 0:
            if log.site[i] == site.index and log.time_s[i] < t1_s:
                t = max(log.time_s[i], t0_s)
                energy_ws += log.facility_w[i] * (t_next - t)
                t_next = t
                if t <= t0_s:
                    break
            i -= 1
        return energy_ws / (t1_s - t0_s) / 1000.0

    def _close_at_horizon(self) -> None:
        now = self.horizon_s
        for j in self.running:
            self._close_segment(j, now)
        for j in tuple(self._paused):
            self._end_pause(j, now)
        for j, (site, pool, t0, t1) in self._writing.items():
            self._add_checkpoint_kwh(j, self._charge(j, site, pool, pool.idle_w, t0, min(t1, now)))
        for j, st in enumerate(self._state):
            if st in (PENDING, DEFERRED, RUNNING, SUSPENDED):
                self.events.append(now, "unfinished", j, self.site_of[j])

    # --- decisions -----------------------------------------------------------------------

    def _request_decision(self) -> None:
        if not self._decision_scheduled:
            self._decision_scheduled = True
            self.env.timeout(0).callbacks.append(self._decide)

    def _decide(self, _event: simpy.Event) -> None:
        self._decision_scheduled = False
        actions = self.policy.decide(self.state_view)
        if actions is None:
            raise PolicyError(
                f"{type(self.policy).__name__}.decide returned None; return a list of actions"
            )
        # All actions exist before any is applied: the state does not move under a policy
        # that yields them lazily while iterating over it.
        for action in list(actions):
            self._apply(action)

    def _apply(self, a: object) -> None:
        match a:
            case Start(job, site, cap, model):
                j = self._job(a, job, (PENDING, DEFERRED))
                dest = self._allowed_site(a, j, site)
                self._deferred_until.pop(j, None)
                self.pending.pop(j, None)
                origin = self.sites[self.jobs.origin_site[j]]
                move_s = self._move(j, origin, dest, float(self.jobs.data_gb[j]), self.env.now)
                self._place(a, j, dest, cap, model, "start", move_s)
            case Resume(job, site, cap, model):
                j = self._job(a, job, (SUSPENDED,))
                dest = self._allowed_site(a, j, site)
                self.suspended.pop(j)
                self._end_pause(j, self.env.now)
                self._place(a, j, dest, cap, model, "resume", self._load_s(j, dest, move=True))
            case Defer(job, until_s):
                j = self._job(a, job, (PENDING, DEFERRED))
                if not until_s > self.env.now:
                    raise PolicyError(f"{a}: until_s must be after now ({self.env.now} s)")
                self.pending.pop(j, None)
                self._state[j] = DEFERRED
                self._deferred_until[j] = until_s
                self.events.append(self.env.now, "defer", j, value=until_s)
                if until_s < self.horizon_s:
                    self.env.timeout(until_s - self.env.now).callbacks.append(
                        lambda _e, j=j, u=until_s: self._deferral_expired(j, u)
                    )
            case Suspend(job):
                j = self._job(a, job, (RUNNING,))
                if not self._interruptible[j]:
                    raise PolicyError(f"{a}: job {self.jobs.job_id[j]} is not interruptible")
                site = self._site[j]
                if self._event_ahead(site.index, self.env.now):
                    self._paused[j] = (
                        site.index,
                        self.env.now,
                        self._uncapped_rate(j, self._pool[j]),
                    )
                self.events.append(self.env.now, "suspend", j, self.site_of[j])
                self._leave(j)
                self._state[j] = SUSPENDED
                self.suspended[j] = None
            case Migrate(job, site, model):
                j = self._job(a, job, (RUNNING,))
                dest = self._allowed_site(a, j, site)
                if not self._interruptible[j]:
                    raise PolicyError(f"{a}: job {self.jobs.job_id[j]} is not interruptible")
                if dest is self._site[j] and model in (None, self.model[j]):
                    raise PolicyError(f"{a}: job {self.jobs.job_id[j]} already runs there")
                pool = self._choose_pool(a, j, dest, model)
                if self._cap[j] is not None:
                    self._check_cap(a, pool.spec, self._cap[j])
                self._leave(j)
                self._run_on(
                    j, dest, pool, self._cap[j], "migrate", self._load_s(j, dest, move=True)
                )
            case SetCap(target, watts):
                if isinstance(target, str):
                    self._set_site_cap(a, self._site_of_action(a, target), watts)
                else:
                    j = self._job(a, target, (RUNNING,))
                    if watts is not None:
                        self._check_cap(a, self._pool[j].spec, watts)
                    self._cap[j] = watts
                    if j not in self._holding:  # a held job takes its cap when it starts
                        self._retime(j)
                    self.events.append(
                        self.env.now,
                        "setcap",
                        j,
                        self.site_of[j],
                        math.nan if watts is None else watts,
                    )
            case Reject(job, reason):
                j = self._job(a, job, (PENDING, DEFERRED, SUSPENDED))
                self.pending.pop(j, None)
                self.suspended.pop(j, None)
                self._deferred_until.pop(j, None)
                self._end_pause(j, self.env.now)
                self._reject(j, str(reason))
            case _:
                raise PolicyError(f"{type(self.policy).__name__} returned {a!r}, not an action")

    # --- action checks -------------------------------------------------------------------

    def _job(self, action: object, job: object, allowed: tuple[int, ...]) -> int:
        if not isinstance(job, JobView) or job._e is not self:
            raise PolicyError(f"{action}: job must be a JobView taken from the state")
        j = job.index
        if self._state[j] not in allowed:
            want = " or ".join(STATE_NAMES[s] for s in allowed)
            raise PolicyError(
                f"{action}: job {self.jobs.job_id[j]} is {STATE_NAMES[self._state[j]]}, not {want}"
            )
        return j

    def _site_of_action(self, action: object, name: str) -> Site:
        site = self._site_by_name.get(name)
        if site is None:
            raise PolicyError(f"{action}: unknown site {name!r} (sites: {self.site_names})")
        return site

    def _allowed_site(self, action: object, j: int, name: str) -> Site:
        """The site `name`, which job `j` must be allowed to run on (data residency)."""
        site = self._site_of_action(action, name)
        if not (self._allowed[j] >> site.index) & 1:
            raise PolicyError(
                f"{action}: job {self.jobs.job_id[j]} may not run on {site.name} "
                f"(allowed sites: {', '.join(self.allowed_sites(j))})"
            )
        return site

    def _check_cap(self, action: object, spec: hardware.GpuSpec, watts: float) -> None:
        if not spec.min_cap_w <= watts <= spec.max_cap_w:
            raise PolicyError(
                f"{action}: cap {watts} W is outside {spec.id}'s settable range "
                f"{spec.min_cap_w:g}-{spec.max_cap_w:g} W"
            )

    def _choose_pool(self, action: object, j: int, site: Site, model: str | None) -> Pool:
        gpus = self._gpus[j]
        if model is not None:
            pool = site.pool(model)
            if pool is None:
                raise PolicyError(f"{action}: site {site.name} has no {model} GPUs")
            if pool.free < gpus:
                raise PolicyError(
                    f"{action}: job needs {gpus} GPUs, {site.name} has {pool.free} free {model}"
                )
            return pool
        for pool in site.pools:
            if pool.free >= gpus:
                return pool
        free = ", ".join(f"{p.model}={p.free}" for p in site.pools)
        raise PolicyError(
            f"{action}: job needs {gpus} GPUs of one model, {site.name} has {free} free"
        )

    # --- job runs ------------------------------------------------------------------------

    def _place(
        self,
        action,
        j: int,
        site: Site,
        cap: float | None,
        model: str | None,
        kind: str,
        hold_s: float = 0.0,
    ) -> None:
        pool = self._choose_pool(action, j, site, model)
        if cap is not None:
            self._check_cap(action, pool.spec, cap)
        self._cap[j] = cap
        self._run_on(j, site, pool, cap, kind, hold_s)

    def _effective_cap(self, site: Site, own_cap: float | None) -> float | None:
        return own_cap if own_cap is not None else site.cap_w

    def _speed(self, model: str, profile: str, cap: float | None) -> tuple[float, float]:
        """(reference GPU-s per s of one GPU, active W of one GPU), cached."""
        key = (model, profile, cap)
        hit = self._estimates.get(key)
        if hit is None:
            est = hardware.estimate(model, profile, cap)
            hit = (hardware.speed(model, profile) * est.throughput_fraction, est.power_w)
            self._estimates[key] = hit
        return hit

    def _run_on(
        self, j: int, site: Site, pool: Pool, cap: float | None, kind: str, hold_s: float = 0.0
    ) -> None:
        """Run `j` on `pool`; first held at idle power for `hold_s` (a checkpoint loading)
        or for the boot of powered-off nodes it needs, whichever is longer."""
        now = self.env.now
        gpus = self._gpus[j]
        if hold_s > 0.0:
            self._loading.add(j)
        if self._needs_wake(site, pool, gpus):
            hold_s = max(hold_s, site.power_off.wake_s)
        if hold_s > 0.0:
            rate, draw_w = 0.0, pool.idle_w
        else:
            rate, draw_w = self._rate_and_draw(j, site, pool, cap)
        woken = site.allocate(now, pool, gpus, draw_w)
        self._state[j] = RUNNING
        self.running[j] = None
        pool.jobs[j] = None
        self._site[j], self._pool[j] = site, pool
        self.site_of[j], self.model[j] = site.index, pool.model
        self._rate[j] = rate
        self._draw_w[j] = draw_w
        self._seg_start[j] = now
        if self._ckpt_interval_s is not None:
            self._since_ckpt[j] = [0.0, self._remaining[j]]
        if math.isnan(self.start_s[j]):
            self.start_s[j] = now
        cap_w = self._effective_cap(site, cap)
        self.events.append(
            now, kind, j, site.index, math.nan if cap_w is None else cap_w, detail=pool.model
        )
        if woken:
            self.events.append(now, "wake", j, site.index, value=woken)
        if hold_s > 0.0:
            self._version[j] += 1
            v = self._version[j]
            self._holding.add(j)
            self.env.timeout(hold_s).callbacks.append(lambda _e: self._held(j, v))
        else:
            self._schedule_finish(j)

    def _rate_and_draw(self, j: int, site: Site, pool: Pool, cap: float | None):
        """(progress in reference GPU-s per s, active W per GPU) of `j` on `pool` under its
        own `cap` or the site's; periodic checkpoint writes slow progress by the fraction
        of time they stall the job (a fluid model of the stalls)."""
        per_gpu, draw_w = self._speed(pool.model, self._profile[j], self._effective_cap(site, cap))
        if self._ckpt_interval_s is None:
            return self._gpus[j] * per_gpu, draw_w
        return self._gpus[j] * per_gpu * self._ckpt_duty(j, site), draw_w

    def _write_s(self, j: int, site: Site) -> float:
        return float(self.jobs.checkpoint_gb[j]) / site.checkpoint_write_gbps

    def _load_s(self, j: int, dest: Site, move: bool = False) -> float:
        """Time before a suspended or migrating job runs on `dest`: the rest of its checkpoint
        write, its transfer over the WAN from where it was written (charged to the job if
        `move`), then the read at `dest`'s bandwidth, s."""
        now = self.env.now
        writing = self._writing.get(j)
        left_s = max(0.0, writing[3] - now) if writing else 0.0
        gb = float(self.jobs.checkpoint_gb[j])
        src = self._ckpt_site.get(j, dest)
        move_s = self._move(j, src, dest, gb, now + left_s, charge=move)
        return left_s + move_s + gb / dest.checkpoint_read_gbps

    def _move(self, j: int, src: Site, dest: Site, gb: float, t0_s: float, charge=True) -> float:
        """Move `gb` GB of job `j`'s data from `src` to `dest` over the WAN from `t0_s`;
        returns the time it takes, s, and (if `charge`) charges its energy and carbon."""
        if self.wan is None or src is dest or gb <= 0.0:
            return 0.0
        duration_s, energy_kwh, carbon_kg = self.wan.totals(src.name, dest.name, gb, t0_s)
        if charge:
            moved = self.wan_moves.setdefault(j, [0.0, 0.0, 0.0])
            moved[0] += gb
            moved[1] += energy_kwh
            moved[2] += carbon_kg
            self.events.append(self.env.now, "transfer", j, dest.index, gb, detail=src.name)
        return duration_s

    def _ckpt_duty(self, j: int, site: Site) -> float:
        """Fraction of running time spent computing rather than writing periodic checkpoints."""
        if self._ckpt_interval_s is None:
            return 1.0
        return self._ckpt_interval_s / (self._ckpt_interval_s + self._write_s(j, site))

    @staticmethod
    def _needs_wake(site: Site, pool: Pool, gpus: int) -> bool:
        """True if `gpus` more busy GPUs of `pool` need a powered-off node."""
        return site.power_off is not None and pool.nodes_to_wake(gpus) > 0

    def _held(self, j: int, version: int) -> None:
        if self._version[j] != version:
            return  # stopped while held
        self._retime(j)  # charges the hold first
        self._holding.discard(j)
        self._loading.discard(j)

    def _switch_off_check(self, site: Site) -> None:
        off = site.switch_off_idle(self.env.now)
        if off:
            self.events.append(self.env.now, "power_off", -1, site.index, value=off)

    def _schedule_finish(self, j: int) -> None:
        self._version[j] += 1
        v = self._version[j]
        delay = self._remaining[j] / self._rate[j]
        self.env.timeout(delay).callbacks.append(lambda _e: self._finish(j, v))

    def _close_segment(self, j: int, now: float) -> None:
        """Charge the run since the last change: progress, energy, carbon, GPU time."""
        t0 = self._seg_start[j]
        dt = now - t0
        if dt <= 0.0:
            return
        site, pool = self._site[j], self._pool[j]
        self._remaining[j] = max(0.0, self._remaining[j] - self._rate[j] * dt)
        energy_kwh = self._charge(j, site, pool, self._draw_w[j], t0, now)
        self._seg_start[j] = now
        if j in self._loading:
            self._add_checkpoint_kwh(j, energy_kwh)
        elif self._ckpt_interval_s is not None and j not in self._holding:
            self._add_checkpoint_kwh(j, energy_kwh * (1.0 - self._ckpt_duty(j, site)))
            self._count_checkpoints(j, dt)
        if self._site_windows[site.index]:
            in_event_s = self._overlap_s(site.index, t0, now)
            if in_event_s > 0.0:
                acc = self.dr_job.setdefault(j, [0.0, 0.0, 0.0, 0.0])
                acc[0] += in_event_s
                acc[1] += self._rate[j] * in_event_s
                acc[2] += self._uncapped_rate(j, pool) * in_event_s

    def _charge(self, j: int, site: Site, pool: Pool, draw_w: float, t0: float, t1: float) -> float:
        """Charge `j` for its GPUs on `pool` drawing `draw_w` W each over [t0, t1]: energy,
        carbon, GPU time, embodied carbon. Returns the facility energy, kWh."""
        gpus = self._gpus[j]
        it_w = gpus * (draw_w + pool.host_w)
        energy_kwh = it_w * site.pue.integral(t0, t1) / _WS_PER_KWH
        self.energy_kwh[j] += energy_kwh
        self.carbon_kg[j] += it_w * site.facility_ci.integral(t0, t1) / _GS_PER_KGH
        self.gpu_s[j] += gpus * (t1 - t0)
        self.embodied_kg[j] += gpus * (t1 - t0) / 3600.0 * pool.spec.embodied_kg_per_gpu_h
        return energy_kwh

    def _add_checkpoint_kwh(self, j: int, kwh: float) -> None:
        if kwh > 0.0:
            self.checkpoint_kwh[j] = self.checkpoint_kwh.get(j, 0.0) + kwh

    def _count_checkpoints(self, j: int, dt: float) -> None:
        """Periodic checkpoints: advance the running time since the last one by `dt`; when
        one (or more) fell in this segment, the last is `since` s before now."""
        since = self._since_ckpt[j]
        since[0] += dt
        if since[0] >= self._ckpt_interval_s:
            since[0] %= self._ckpt_interval_s
            since[1] = self._remaining[j] + self._rate[j] * since[0]

    def _leave(self, j: int) -> None:
        """A running job stops to be suspended or migrated. With periodic checkpoints, it
        falls back to its last one (the work since is lost); else it writes a checkpoint
        now, holding its GPUs at idle power for the write."""
        now = self.env.now
        self._ckpt_site[j] = self._site[j]
        if self._ckpt_interval_s is not None:
            self._close_segment(j, now)
            at_ckpt = self._since_ckpt.pop(j)[1]
            lost = at_ckpt - self._remaining[j]
            if lost > 0.0:
                self.work_lost_gpu_s[j] = self.work_lost_gpu_s.get(j, 0.0) + lost
                self._remaining[j] = at_ckpt
            self._stop(j)
            return
        site, pool = self._site[j], self._pool[j]
        write_s = self._write_s(j, site)
        if write_s <= 0.0 or j in self._holding:
            self._stop(j)  # nothing to write, or it never ran since its last checkpoint
            return
        self._close_segment(j, now)
        self._version[j] += 1  # cancels the pending completion
        site.change_power(now, self._gpus[j] * (pool.idle_w - self._draw_w[j]))
        del self.running[j]
        del pool.jobs[j]
        self._writing[j] = (site, pool, now, now + write_s)
        self.events.append(now, "checkpoint", j, site.index, value=write_s)
        self.env.timeout(write_s).callbacks.append(lambda _e: self._written(j))

    def _written(self, j: int) -> None:
        """`j`'s checkpoint is written: charge the write, free the GPUs it held."""
        site, pool, t0, t1 = self._writing.pop(j)
        self._add_checkpoint_kwh(j, self._charge(j, site, pool, pool.idle_w, t0, t1))
        self._release(site, pool, self._gpus[j], pool.idle_w)
        self._request_decision()  # GPUs are free

    def _overlap_s(self, site_index: int, t0_s: float, t1_s: float) -> float:
        """Time of [t0_s, t1_s] inside `site_index`'s demand-response events, s."""
        return sum(max(0.0, min(t1_s, e) - max(t0_s, s)) for s, e in self._site_windows[site_index])

    def _uncapped_rate(self, j: int, pool: Pool) -> float:
        """Progress of `j` on `pool` with no cap (periodic checkpoint stalls included)."""
        return self._rate_and_draw(j, self._site[j], pool, math.inf)[0]

    def _end_pause(self, j: int, now: float) -> None:
        """Charge a job suspended during an event with the work it did not do in events."""
        paused = self._paused.pop(j, None)
        if paused is not None:
            site_index, since_s, rate = paused
            lost_s = self._overlap_s(site_index, since_s, now)
            if lost_s > 0.0:
                acc = self.dr_job.setdefault(j, [0.0, 0.0, 0.0, 0.0])
                acc[2] += rate * lost_s
                acc[3] += lost_s

    def _stop(self, j: int) -> None:
        """Close the run and free the GPUs (suspend, migrate, finish)."""
        now = self.env.now
        self._close_segment(j, now)
        self._version[j] += 1  # cancels the pending completion (or wake)
        self._holding.discard(j)
        self._loading.discard(j)
        self._release(self._site[j], self._pool[j], self._gpus[j], self._draw_w[j])
        del self.running[j]
        del self._pool[j].jobs[j]
        self._since_ckpt.pop(j, None)

    def _release(self, site: Site, pool: Pool, gpus: int, draw_w: float) -> None:
        idled = site.release(self.env.now, pool, gpus, draw_w)
        if idled:  # nodes left with no busy GPU switch off after idle_s
            self.env.timeout(site.power_off.idle_s).callbacks.append(
                lambda _e: self._switch_off_check(site)
            )

    def _retime(self, j: int) -> None:
        """The cap of running job `j` changed: new speed and power from now on."""
        now = self.env.now
        self._close_segment(j, now)
        site, pool = self._site[j], self._pool[j]
        rate, draw_w = self._rate_and_draw(j, site, pool, self._cap[j])
        site.change_power(now, self._gpus[j] * (draw_w - self._draw_w[j]))
        self._draw_w[j] = draw_w
        self._rate[j] = rate
        self._schedule_finish(j)

    def _set_site_cap(self, action: object, site: Site, watts: float | None) -> None:
        if watts is not None:
            for pool in site.pools:
                self._check_cap(action, pool.spec, watts)
        site.cap_w = watts
        self.events.append(
            self.env.now, "setcap", -1, site.index, math.nan if watts is None else watts
        )
        for j in tuple(self.running):
            if self._site[j] is site and self._cap[j] is None and j not in self._holding:
                self._retime(j)

    def _reject(self, j: int, reason: str) -> None:
        self._state[j] = REJECTED
        self.reason[j] = reason
        self.events.append(self.env.now, "reject", j, detail=reason)

    def _finish(self, j: int, version: int) -> None:
        if self._version[j] != version:
            return  # re-timed or stopped since this completion was scheduled
        self._stop(j)
        # Shared constants in place of the job's own float objects (memory at 1M jobs).
        self._remaining[j] = self._rate[j] = self._draw_w[j] = self._seg_start[j] = 0.0
        self._state[j] = COMPLETED
        self.end_s[j] = self.env.now
        self.events.append(self.env.now, "finish", j, self.site_of[j])
        self._request_decision()

    def _deferral_expired(self, j: int, until_s: float) -> None:
        if self._deferred_until.get(j) != until_s:
            return  # started, rejected or deferred again meanwhile
        del self._deferred_until[j]
        self._state[j] = PENDING
        self.pending[j] = None
        self.events.append(self.env.now, "ready", j)
        self._request_decision()

    # --- what the state view reads -------------------------------------------------------

    def site(self, name: str) -> Site:
        site = self._site_by_name.get(name)
        if site is None:
            raise PolicyError(f"unknown site {name!r} (sites: {self.site_names})")
        return site

    def state_name(self, j: int) -> str:
        return STATE_NAMES[self._state[j]]

    def remaining_gpu_s(self, j: int) -> float:
        if self._state[j] == RUNNING:
            return max(
                0.0, self._remaining[j] - self._rate[j] * (self.env.now - self._seg_start[j])
            )
        return self._remaining[j]

    def held(self, j: int) -> bool:
        return j in self._holding

    def allowed_sites(self, j: int) -> tuple[str, ...]:
        mask = self._allowed[j]
        names = self._names_by_mask.get(mask)
        if names is None:
            names = self._names_by_mask[mask] = mask_sites(mask, self.site_names)
        return names

    def running_site(self, j: int) -> str | None:
        site = self._site[j]
        return site.name if self._state[j] == RUNNING else None

    def running_model(self, j: int) -> str | None:
        return self.model[j] if self._state[j] == RUNNING else None

    def job_cap_w(self, j: int) -> float | None:
        return self._cap[j]

    def transfer_cost(self, src: str, dst: str, gb: float) -> tuple[float, float, float]:
        a, b = self.site(src), self.site(dst)
        if self.wan is None or a is b or gb <= 0.0:
            return 0.0, 0.0, 0.0
        return self.wan.totals(a.name, b.name, gb, self.env.now)

    def migration_cost(
        self, j: int, site_name: str, model: str | None
    ) -> tuple[float, float, float, float]:
        """(stall s, facility kWh, kg CO2, lost reference GPU-s) of migrating running job `j`
        to `site_name`'s `model` pool (None: its first) now, as `Migrate` would: the
        checkpoint write on the GPUs it leaves (none with periodic checkpoints: it falls back
        to its last one, losing the work since), the WAN transfer, and the read, during
        which it holds the new GPUs at idle power. GPU and host energy at each site's PUE and
        carbon intensity now; the transfer's as `transfer_cost`."""
        src, pool = self._site[j], self._pool[j]
        dest = self.site(site_name)
        dest_pool = dest.pools[0] if model is None else dest.pool(model)
        if dest_pool is None:
            raise PolicyError(f"migration_cost: site {site_name} has no {model} GPUs")
        now = self.env.now
        gb = float(self.jobs.checkpoint_gb[j])
        lost_s = 0.0
        write_s = 0.0
        if self._ckpt_interval_s is not None:
            lost_s = self._work_since_checkpoint(j, now)
        elif j not in self._holding:
            write_s = self._write_s(j, src)
        move_s, move_kwh, move_kg = self.transfer_cost(src.name, dest.name, gb)
        hold_s = write_s + move_s + gb / dest.checkpoint_read_gbps
        gpus = self._gpus[j]
        kwh = kg = 0.0
        for site, p, dt in ((src, pool, write_s), (dest, dest_pool, hold_s)):
            site_kwh = gpus * (p.idle_w + p.host_w) * dt * site.pue.value_at(now) / _WS_PER_KWH
            kwh += site_kwh
            kg += site_kwh * site.signal.value_at(now) / 1000.0
        return hold_s, kwh + move_kwh, kg + move_kg, lost_s

    def _work_since_checkpoint(self, j: int, now: float) -> float:
        """With periodic checkpoints: work running job `j` did since its last checkpoint,
        reference GPU-s (what it loses if it stops now)."""
        since_s, at_ckpt = self._since_ckpt.get(j, (0.0, self._remaining[j]))
        if j not in self._holding:
            since_s += now - self._seg_start[j]
            if since_s >= self._ckpt_interval_s:
                return self._rate[j] * (since_s % self._ckpt_interval_s)
        return max(0.0, at_ckpt - self.remaining_gpu_s(j))

    def job_draw_w(self, j: int) -> float:
        return self._draw_w[j] if self._state[j] == RUNNING else 0.0

    def power_delta_w(
        self, j: int, cap: float | None, site_name: str | None, model: str | None
    ) -> float:
        gpus = self._gpus[j]
        if self._state[j] == RUNNING:
            site, pool = self._site[j], self._pool[j]
            if j in self._holding:
                return 0.0  # takes its cap when its nodes are up
            _, draw_w = self._speed(pool.model, self._profile[j], self._effective_cap(site, cap))
            return gpus * (draw_w - self._draw_w[j])
        if site_name is None:
            raise PolicyError(
                "power_delta_w: give the site a job that is not running would start on"
            )
        site = self.site(site_name)
        pool = site.pools[0] if model is None else site.pool(model)
        if pool is None:
            raise PolicyError(f"power_delta_w: site {site_name} has no {model} GPUs")
        _, draw_w = self._speed(pool.model, self._profile[j], self._effective_cap(site, cap))
        if self._needs_wake(site, pool, gpus):
            return pool.nodes_to_wake(gpus) * pool.node_w  # held at idle power while booting
        return gpus * (draw_w - pool.idle_w)

    def forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        return self.forecaster.forecast(self.site(site).signal, self.env.now, horizon_s)

    def announced_events(self, site: str | None) -> list[DemandResponseView]:
        return [v for v in self._announced if site is None or v.site == site]

    def estimate(
        self, j: int, site_name: str, cap: float | None, model: str | None
    ) -> tuple[float, float]:
        site = self.site(site_name)
        pool = site.pools[0] if model is None else site.pool(model)
        if pool is None:
            raise PolicyError(f"estimate: site {site_name} has no {model} GPUs")
        rate, draw_w = self._rate_and_draw(j, site, pool, cap)
        gpus = self._gpus[j]
        now = self.env.now
        hold_s = self._load_s(j, site) if self._state[j] == SUSPENDED else 0.0
        if self._needs_wake(site, pool, gpus):
            hold_s = max(hold_s, site.power_off.wake_s)
        runtime_s = self.remaining_gpu_s(j) / rate
        energy_kwh = (
            gpus
            * (
                (pool.idle_w + pool.host_w) * site.pue.integral(now, now + hold_s)
                + (draw_w + pool.host_w) * site.pue.integral(now + hold_s, now + hold_s + runtime_s)
            )
            / _WS_PER_KWH
        )
        return hold_s + runtime_s, energy_kwh

    def expected_ends(self, site_name: str, model: str) -> tuple[list[float], list[int]]:
        site = self.site(site_name)
        pool = site.pool(model)
        if pool is None:
            raise PolicyError(f"expected_ends: site {site_name} has no {model} GPUs")
        now = self.env.now
        ends, gpus = [], []
        for j in pool.jobs:
            if j in self._holding:  # its rate once it computes; the hold left is not counted
                rate = self._rate_and_draw(j, site, pool, self._cap[j])[0]
                end = now + self._remaining[j] / rate
            else:  # when its completion is scheduled
                end = self._seg_start[j] + self._remaining[j] / self._rate[j]
            ends.append(end)
            gpus.append(self._gpus[j])
        return ends, gpus

    def terminal_states(self) -> list[str]:
        """Each job's terminal state: completed, rejected, or unfinished (at the horizon)."""
        return [
            "completed" if s == COMPLETED else "rejected" if s == REJECTED else "unfinished"
            for s in self._state
        ]


def _union(windows: list[tuple[float, float]], start_s: float, end_s: float):
    """`windows` (sorted, disjoint) with [start_s, end_s) added, merged where they touch."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted([*windows, (start_s, end_s)]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
