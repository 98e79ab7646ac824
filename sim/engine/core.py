"""The event core: the SimPy environment, the event loop, decision points, action dispatch.

Every concept is a SimPy event: an arrival is a timeout of the arrivals process, a job's
completion a timeout carrying a callback, a decision point a zero-delay timeout, so that
all the events of one instant lead to a single `policy.decide` call. Everything with
state is a component (`sim.engine.component`): the core builds them, starts them, asks
the policy, checks each action and hands it to the component that carries it out.

Components (`Engine.COMPONENTS`), in the order their hooks run; each is built after the
siblings it declares it uses (`Component.uses`, `sim.engine.component.wire`):

- `book` (`JobBook`): job states, the pending/running/suspended sets, deferrals, arrivals;
- `runs` (`Runs`): progress, speed and power of running jobs, their energy and carbon;
- `checkpoints` (`Checkpoints`): checkpoint writes and reads, WAN moves;
- `failures` (`Failures`): GPU and node failures of running jobs;
- `spot` (`Spot`): capacity kinds, spot evictions;
- `services` (`Services`): inference services' replicas, their power, their requests;
- `dr` (`DemandResponseMeter`): demand-response events and their per-job accounting;
- `fleet` (`Fleet`): the sites, their power log, power-off and PUE timers;
- `queries` (`Queries`): the answers behind `SystemState` and `JobView`;
- `functions` (`Functions`): serverless functions with keep-alive, run at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np
import simpy

from sim import plugins
from sim.api import (
    Defer,
    JobView,
    Migrate,
    Policy,
    PolicyHooks,
    Reject,
    Repartition,
    Resume,
    Route,
    Scale,
    ServiceView,
    SetBattery,
    SetCap,
    SetDirective,
    Start,
    Suspend,
    SystemState,
)
from sim.config.scenario import Scenario
from sim.engine.action_fields import field_check
from sim.engine.checkpoints import Checkpoints
from sim.engine.component import BROADCAST_HOOKS, Component, Core, overrides, wire
from sim.engine.demand_response import DemandResponseMeter
from sim.engine.failures import Failures
from sim.engine.fleet import Fleet
from sim.engine.functions import Functions
from sim.engine.gpu_prices import GpuPrices
from sim.engine.jobs import DEFERRED, PENDING, RUNNING, STATE_NAMES, SUSPENDED, JobBook
from sim.engine.ledger import Pool, Site
from sim.engine.onsite import OnsiteEnergy
from sim.engine.queries import Queries
from sim.engine.run_placement import node_of
from sim.engine.runs import Runs
from sim.engine.services import Services
from sim.engine.spot import Spot
from sim.errors import PolicyError
from sim.grid import Forecaster
from sim.models import hardware, mig, scaling, sharing, training
from sim.models.pricing import PriceBook
from sim.results import ResultParts
from sim.util.memory import release_free_memory
from sim.util.records import EventLog
from sim.workload import JobTable
from sim.workload.table import MAX_JOB_GPUS
from sim.workload.time_to_accuracy import training_work

__all__ = ["Engine"]


class Engine:
    """One simulation run. Build it with `sim.engine.build.build_engine` (the one construction
    path; `simulate` builds, runs and turns it into `Results`)."""

    COMPONENTS: tuple[type[Component], ...] = (
        JobBook,
        Runs,
        Checkpoints,
        Failures,
        Spot,
        Services,
        Fleet,
        OnsiteEnergy,
        DemandResponseMeter,
        Queries,
        Functions,
    )
    """Every component's class, in the order their hooks run (a hook may read what an
    earlier one wrote); they are built in the order their `uses` make."""

    def __init__(
        self,
        scenario: Scenario,
        jobs: JobTable,
        policy: Policy,
        streams: Mapping[str, np.random.Generator],
        inputs: Mapping[str, Mapping[str, Any]],
    ):
        """`streams`: the run's random streams (`sim.util.streams.random_streams`), each
        handed as `rng` to the component that declares it (`Component.stream`); `inputs`:
        per component name, its construction inputs besides its siblings and its stream
        (signals, the WAN, request sources, the forecaster: `sim.engine.build`)."""
        self.scenario = scenario
        self.horizon_s = scenario.horizon_s
        self.env = simpy.Environment()
        self.jobs = jobs
        self.policy = policy
        self.hooks = plugins.call_policy(policy, "reading its hooks", PolicyHooks.of, policy)
        self.events = EventLog()
        self.prices = GpuPrices(PriceBook(scenario.currency, scenario.prices))

        core: Core = self  # what the components see of the engine (checked by mypy)

        def build(kind: type[Component], siblings: dict[str, Component]) -> Component:
            rng = {} if kind.stream is None else {"rng": streams[kind.stream]}
            construct = cast(Callable[..., Component], kind)  # its own keyword inputs
            return construct(core, **siblings, **inputs.get(kind.name, {}), **rng)

        built = wire(self.COMPONENTS, build)
        self.components: tuple[Component, ...] = tuple(built[k.name] for k in self.COMPONENTS)
        """Every component, in the order their hooks run."""
        idle = {c.name: c.idle_hooks() for c in self.components}
        self._hooked = {
            hook: tuple(
                c for c in self.components if overrides(c, hook) and hook not in idle[c.name]
            )
            for hook in BROADCAST_HOOKS
        }
        self.book = cast(JobBook, built["book"])
        self.runs = cast(Runs, built["runs"])
        self.checkpoints = cast(Checkpoints, built["checkpoints"])
        self.failures = cast(Failures, built["failures"])
        self.spot = cast(Spot, built["spot"])
        self.services = cast(Services, built["services"])
        self.dr = cast(DemandResponseMeter, built["dr"])
        self.fleet = cast(Fleet, built["fleet"])
        self.queries = cast(Queries, built["queries"])
        self.onsite = cast(OnsiteEnergy, built["onsite"])
        self._gpu_models: list[str] = jobs.allowed_gpu_models.tolist()
        """Per job, the GPU models it may run on ("": any; `sim.workload.JobTable`)."""
        self.state_view = SystemState(self.queries)
        self._decision_scheduled = False
        self._carry_out: dict[type, Callable[[Any], None]] = {
            Start: self._start,
            Resume: self._resume,
            Defer: self._defer,
            Suspend: self._suspend,
            Migrate: self._migrate,
            SetCap: self._set_cap,
            SetBattery: self._set_battery,
            Scale: self._scale,
            Route: self._route,
            SetDirective: self._set_directive,
            Reject: self._reject,
            Repartition: self._repartition,
        }
        """How each action type is checked and carried out, in the order of `apply`'s
        search for a subclass."""

    @property
    def forecaster(self) -> Forecaster:
        """The carbon forecasts policies are told."""
        return self.queries.forecaster

    def hooked(self, hook: str) -> tuple[Component, ...]:
        """The components that override broadcast hook `hook` and do not name it in their
        `idle_hooks`, in hook order."""
        return self._hooked[hook]

    # --- running -------------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None = None) -> None:
        """Run to the horizon; `progress(fraction)` is called along the way."""
        self.start_processes()
        chunks = 100 if progress else 1
        for k in range(1, chunks + 1):
            self.env.run(until=self.horizon_s * k / chunks)
            if progress:
                progress(k / chunks)
        for component in self.components:
            component.close(self.horizon_s)

    def start_processes(self) -> None:
        """Start every component's processes, and the policy's signal steps and ticks."""
        for component in self.components:
            component.start()
        if self.hooks.signal_steps:
            self.env.process(self._signal_steps())
        if self.hooks.tick_s:
            self.env.process(self._ticks(self.hooks.tick_s))

    def write_results(self, out: ResultParts) -> None:
        """Every component writes its results into `out`, in order; then the prices, and
        the summary's `mig_repartitions` (GPUs reconfigured by `Repartition`; None without
        a MIG-partitioned pool)."""
        for component in self.components:
            component.write_results(out)
            release_free_memory()  # its temporaries' pages, before the next one's (memory)
        if math.isnan(out.summary["cost_compute"]):
            out.summary["cost_compute"] = None
        out.meta["prices"] = self.prices.meta()
        partitioned = [p.mig for s in self.fleet.sites for p in s.pools if p.mig is not None]
        out.summary["mig_repartitions"] = (
            sum(m.repartitions for m in partitioned) if partitioned else None
        )

    def _signal_steps(self):
        sites = self.fleet.sites
        steps = np.unique(
            np.concatenate(
                [
                    self.fleet.decision_signal(s).breakpoints_between(0.0, self.horizon_s)
                    for s in sites
                ]
            )
        )
        for t in steps.tolist():
            yield self.env.timeout(t - self.env.now)
            self.request_decision()

    def _ticks(self, tick_s: float):
        while True:
            yield self.env.timeout(tick_s)
            self.request_decision()

    # --- decisions -----------------------------------------------------------------------

    def request_decision(self) -> None:
        """Ask the policy to decide at the end of this instant (once, however often asked);
        not while no job is pending if the policy acts on pending jobs only
        (`Policy.pending_only`: a job that becomes pending asks again)."""
        if not self._decision_scheduled and (self.book.pending or not self.hooks.pending_only):
            self._decision_scheduled = True
            self.env.timeout(0).callbacks.append(self._decide)

    def _decide(self, _event: simpy.Event) -> None:
        self._decision_scheduled = False
        # All actions exist before any is applied: the state does not move under a policy
        # that yields them lazily while iterating over it.
        for action in plugins.decide(self.policy, self.state_view):
            self.apply(action)

    def apply(self, a: object) -> None:
        """Check action `a` and carry it out now; PolicyError naming it if it cannot be."""
        kind: type = type(a)
        carry_out = self._carry_out.get(kind)
        if carry_out is None:  # a subclass of an action type, or not an action
            base = next((t for t in self._carry_out if isinstance(a, t)), None)
            if base is None:
                raise plugins.not_an_action(self.policy, a)
            kind, carry_out = base, self._carry_out[base]
        wrong = field_check(kind).wrong(a)  # the fields of the action type, as declared
        if wrong is not None:
            raise plugins.wrong_field(self.policy, a, *wrong)
        carry_out(a)

    # One method per action type (dispatched on the type: a `match` on class patterns
    # costs about 1.5 us more per action).

    def _start(self, a: Start) -> None:
        j = self._job(a, a.job, (PENDING, DEFERRED))
        dest = self._allowed_site(a, j, a.site)
        retrain = None if a.batch_size is None else self._batch_size(a, j, a.batch_size)
        own_gpus = self.runs.gpus[j]
        if a.gpus is not None:
            self._check_gpu_count(a, j, a.gpus)
            self.runs.resize(j, a.gpus)  # tentatively: the pool must hold the new count
        try:
            self._check_quota(a, j)
            pool = self._pool_under_cap(a, j, dest, a.gpu_model, a.gpu_cap_w)
            if a.gpus is not None or retrain is not None:
                self._check_scales(
                    a, j, pool, self.runs.profile[j] if retrain is None else retrain[0]
                )
            if a.capacity is not None:
                self.spot.check_capacity(a, j, dest, pool, a.capacity)
        except PolicyError:
            self.runs.resize(j, own_gpus)
            raise
        if retrain is not None:
            self.runs.retrain(j, *retrain)
        self.book.leave_queue(j)
        load_s = self.checkpoints.start_s(j, dest)
        self.runs.run_on(j, dest, pool, a.gpu_cap_w, "start", load_s, a.capacity)

    def _check_quota(self, a: Start | Resume, j: int) -> None:
        """PolicyError if `j`'s GPUs would take its virtual cluster over its quota."""
        gpus = self.runs.gpus[j]
        if gpus > self.book.vc_room(j):
            vc = self.jobs.vc[j]
            raise PolicyError(
                f"{a}: virtual cluster {vc} holds {self.book.vc_running_gpus[vc]} of its "
                f"{self.book.vc_quota[vc]} GPUs; job {self.jobs.job_id[j]} needs {gpus}"
            )

    def _check_scales(self, a: Start, j: int, pool: Pool, profile: str) -> None:
        """PolicyError if the scaling model cannot run `j` as `profile` on its GPUs of `pool`
        under its parallel scheme (`[scaling]`; checked at build for the jobs' own counts)."""
        config = self.scenario.scaling
        gpus = self.runs.gpus[j]
        if config is None or gpus <= 1:
            return
        try:
            scaling.scaling(
                profile, pool.model, gpus, self.runs.parallelism[j], node_of(pool, config)
            )
        except ValueError as e:
            raise PolicyError(f"{a}: {e}") from None

    def _check_gpu_count(self, a: Start, j: int, gpus: int) -> None:
        """PolicyError unless target job `j` holds whole GPUs, has not run, and `gpus` is a
        GPU count."""
        if math.isnan(float(self.jobs.target_metric[j])):
            raise PolicyError(f"{a}: gpus needs a job with a target_metric")
        if self.book.site_of[j] != -1:
            raise PolicyError(f"{a}: gpus can only be chosen before the job first runs")
        if sharing.is_fractional(int(self.jobs.gpu_milli[j])):
            raise PolicyError(f"{a}: a job holding a share of one GPU keeps it")
        if self.runs.mig_profile[j]:
            raise PolicyError(f"{a}: a job on a MIG slice keeps it")
        if not (_whole(gpus) and 1 <= gpus <= MAX_JOB_GPUS):
            raise PolicyError(f"{a}: gpus must be an integer in 1..{MAX_JOB_GPUS:,}")

    def _batch_size(self, a: Start, j: int, batch_size: int) -> tuple[str, float]:
        """(profile, work reference GPU-h) of target job `j` trained at `batch_size`;
        PolicyError unless it has a target, has not run, and the batch size can reach it."""
        target = float(self.jobs.target_metric[j])
        if math.isnan(target):
            raise PolicyError(f"{a}: batch_size needs a job with a target_metric")
        if self.book.site_of[j] != -1:
            raise PolicyError(f"{a}: batch_size can only be chosen before the job first runs")
        if not (_whole(batch_size) and batch_size > 0):
            raise PolicyError(f"{a}: batch_size must be a positive integer")
        workload = training.split_batch_profile(self.runs.profile[j])[0]  # type: ignore[index]
        profile = training.batch_profile(workload, batch_size)
        try:  # a batch size with no run reaching the target, or never measured
            work_gpu_h, _ = training_work(profile, target, float(self.jobs.training_u[j]))
        except ValueError as e:
            raise PolicyError(f"{a}: {e}") from None
        return profile, work_gpu_h

    def _resume(self, a: Resume) -> None:
        j = self._job(a, a.job, (SUSPENDED,))
        dest = self._allowed_site(a, j, a.site)
        self._check_quota(a, j)
        pool = self._pool_under_cap(a, j, dest, a.gpu_model, a.gpu_cap_w)
        self.book.unsuspend(j)
        self.dr.end_pause(j, self.env.now)
        load_s = self.checkpoints.load_s(j, dest, move=True)
        self.runs.run_on(j, dest, pool, a.gpu_cap_w, "resume", load_s)

    def _defer(self, a: Defer) -> None:
        j = self._job(a, a.job, (PENDING, DEFERRED))
        now = self.env.now
        if not a.until_s > now:
            raise PolicyError(f"{a}: until_s must be after now ({now} s)")
        self.book.defer(j, a.until_s)

    def _suspend(self, a: Suspend) -> None:
        j = self._job(a, a.job, (RUNNING,))
        self._check_interruptible(a, j)
        self.dr.suspending(j)
        self.events.append(self.env.now, "suspend", j, self.book.site_of[j])
        self.checkpoints.leave(j)
        self.book.suspend(j)

    def _migrate(self, a: Migrate) -> None:
        runs = self.runs
        j = self._job(a, a.job, (RUNNING,))
        dest = self._allowed_site(a, j, a.site)
        self._check_interruptible(a, j)
        if dest is runs.live[j].site and a.gpu_model in (None, runs.model[j]):
            raise PolicyError(f"{a}: job {self.jobs.job_id[j]} already runs there")
        cap = runs.cap_w[j]
        pool = self._pool_under_cap(a, j, dest, a.gpu_model, cap)
        self.checkpoints.leave(j)
        load_s = self.checkpoints.load_s(j, dest, move=True)
        runs.run_on(j, dest, pool, cap, "migrate", load_s)

    def _set_cap(self, a: SetCap) -> None:
        target, watts = a.target, a.watts
        if isinstance(target, str):
            capped = self.fleet.site(target, a)
            if watts is not None:
                for p in capped.pools:
                    self._check_cap(a, p.spec, watts)
            self.fleet.set_cap(capped, watts)
            self.runs.site_cap_changed(capped)
            self.services.site_cap_changed(capped)
        elif isinstance(target, ServiceView):
            i = self._service(a, target)
            if watts is not None:
                self.services.check_cap(i, watts, a)
            self.services.set_cap(i, watts)
        else:
            j = self._job(a, target, (RUNNING,))
            if watts is not None:
                self._check_cap(a, self.runs.live[j].pool.spec, watts)
            self.runs.set_job_cap(j, watts)

    def _set_battery(self, a: SetBattery) -> None:
        self.onsite.take(a, self.queries.onsite)

    def _scale(self, a: Scale) -> None:
        i = self._service(a, a.service)
        level = self.services.level(i, a.site, a, a.variant)
        replicas = a.replicas
        if not (isinstance(replicas, int) and replicas >= 0):
            raise PolicyError(f"{a}: replicas must be an int >= 0, got {replicas!r}")
        self.services.scale(i, level, replicas, a)

    def _route(self, a: Route) -> None:
        self.services.route(self._service(a, a.service), a.shares, a)

    def _set_directive(self, a: SetDirective) -> None:
        i = self._service(a, a.service)
        names = [d.name for d in self.services.directives[i]]
        if a.level not in names:
            raise PolicyError(
                f"{a}: service {a.service.name} has no directive {a.level!r} ({names})"
            )
        self.services.set_directive(i, names.index(a.level))

    def _reject(self, a: Reject) -> None:
        j = self._job(a, a.job, (PENDING, DEFERRED, SUSPENDED))
        self.dr.end_pause(j, self.env.now)
        self.book.reject(j, str(a.reason))

    def _repartition(self, a: Repartition) -> None:
        site = self.fleet.site(a.site, a)
        pool = site.pool(a.gpu_model) if isinstance(a.gpu_model, str) else None
        if pool is None or pool.mig is None:
            raise PolicyError(f"{a}: site {site.name} has no MIG-partitioned {a.gpu_model} GPUs")
        if not (_whole(a.gpus) and a.gpus >= 1):
            raise PolicyError(f"{a}: gpus must be a positive integer, got {a.gpus!r}")
        if isinstance(a.layout, str) or not all(isinstance(p, str) for p in a.layout):
            raise PolicyError(f"{a}: layout must be a sequence of MIG profile names")
        now = self.env.now
        ready_s = now + self.fleet.wake_s(site, pool, a.gpus) + mig.reconfiguration_s(pool.model)
        try:
            chosen = site.repartition(now, pool, a.layout, a.gpus, ready_s)
        except ValueError as e:
            raise PolicyError(f"{a}: {e}") from None
        timer = self.env.timeout(ready_s - now)
        timer.callbacks.append(lambda _e: self._reconfigured(site, pool, chosen))

    def _reconfigured(self, site: Site, pool: Pool, gpus: list[int]) -> None:
        """GPUs `gpus` of `pool` have their new layout: free, and a decision point."""
        freed = sum(site.reconfigured(self.env.now, pool, g) for g in gpus)
        if freed and site.power_off is not None:
            self.fleet.switch_off_later(site)  # nodes left idle switch off, as after a release
        self.request_decision()

    # --- action checks -------------------------------------------------------------------

    def _job(self, action: object, job: object, allowed: tuple[int, ...]) -> int:
        if not isinstance(job, JobView) or job._q is not self.queries:
            raise PolicyError(f"{action}: job must be a JobView taken from the state")
        j = job.index
        state = self.book.state[j]
        if state not in allowed:
            want = " or ".join(STATE_NAMES[s] for s in allowed)
            raise PolicyError(
                f"{action}: job {self.jobs.job_id[j]} is {STATE_NAMES[state]}, not {want}"
            )
        return j

    def _service(self, action: object, service: object) -> int:
        if not isinstance(service, ServiceView) or service._q is not self.queries:
            raise PolicyError(f"{action}: service must be a ServiceView taken from the state")
        return self.services.service(service.name, action)

    def _allowed_site(self, action: object, j: int, name: str) -> Site:
        """The site `name`, which job `j` must be allowed to run on (data residency)."""
        site = self.fleet.site(name, action)
        if not (self.book.allowed[j] >> site.index) & 1:
            raise PolicyError(
                f"{action}: job {self.jobs.job_id[j]} may not run on {site.name} "
                f"(allowed sites: {', '.join(self.queries.allowed_sites(j))})"
            )
        return site

    def _check_interruptible(self, action: object, j: int) -> None:
        if not self.jobs.interruptible[j]:
            raise PolicyError(f"{action}: job {self.jobs.job_id[j]} is not interruptible")

    @staticmethod
    def _check_cap(action: object, spec: hardware.GpuSpec, watts: float) -> None:
        why = spec.cap_error(watts)
        if why is not None:
            raise PolicyError(f"{action}: {why}")

    def _pool_under_cap(
        self, action: object, j: int, site: Site, model: str | None, cap_w: float | None
    ) -> Pool:
        """The pool of `site` that `action` puts job `j` on, with `cap_w` in its GPUs'
        settable range."""
        pool = self._choose_pool(action, j, site, model)
        if cap_w is not None:
            self._check_cap(action, pool.spec, cap_w)
        return pool

    def _choose_pool(self, action: object, j: int, site: Site, model: str | None) -> Pool:
        """The pool of `site` that `action` puts job `j` on: `model`'s, which must have room
        for it (free GPUs, or for a fractional job a shared GPU with room or a free GPU, or
        for a MIG job a free slice of its profile in a partitioned pool); None takes the
        first pool with room (of a model the job may run on)."""
        placement = self.runs.placement
        allowed = self.jobs.gpu_models_of(j) if self._gpu_models[j] else ()
        if model is not None:
            if allowed and model not in allowed:
                raise PolicyError(
                    f"{action}: job {self.jobs.job_id[j]} may not run on {model} "
                    f"(allowed GPU models: {', '.join(allowed)})"
                )
            pool = site.pool(model)
            if pool is None:
                raise PolicyError(f"{action}: site {site.name} has no {model} GPUs")
            if not placement.fits(j, pool):
                raise PolicyError(
                    f"{action}: job needs {placement.needs(j)}, {site.name} has {pool.free} free "
                    f"{model}{self._parts_text([pool])}"
                )
            return pool
        pools = [p for p in site.pools if not allowed or p.model in allowed]
        for pool in pools:
            if placement.fits(j, pool):
                return pool
        free = ", ".join(f"{p.model}={p.free}" for p in pools)
        if allowed:
            raise PolicyError(
                f"{action}: job {self.jobs.job_id[j]} needs {placement.needs(j)} of one of "
                f"{', '.join(allowed)}, {site.name} has {free or 'none'} free"
                f"{self._parts_text(pools)}"
            )
        raise PolicyError(
            f"{action}: job needs {placement.needs(j)} of one model, {site.name} has {free} free"
            f"{self._parts_text(pools)}"
        )

    @staticmethod
    def _parts_text(pools: list[Pool]) -> str:
        """For messages: the milli held on the shared GPUs of `pools` and the free slices of
        their partitioned ones, if any."""
        held = [
            f"{p.model}: {', '.join(map(str, p.shared.used_milli()))}"
            for p in pools
            if len(p.shared)
        ]
        slices = [
            f"{p.model}: {', '.join(f'{n} {name}' for name, n in p.mig.free_slices().items())}"
            for p in pools
            if p.mig is not None
        ]
        text = f" (milli held on shared GPUs: {'; '.join(held)})" if held else ""
        return text + (f" (free MIG slices: {'; '.join(slices)})" if slices else "")


def _whole(n: object) -> bool:
    """Whether `n` is an integer (Python's or numpy's), not a bool or a float."""
    return isinstance(n, int | np.integer) and not isinstance(n, bool)
