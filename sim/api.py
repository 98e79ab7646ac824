"""The policy contract: what a policy sees (`SystemState`) and what it may return (actions).

A policy is a `Policy`: it implements ``decide(state) -> Sequence[Action]`` and may set
the optional hooks `Policy` declares with their defaults (`signal_steps`, `tick_s`,
`amend`, `from_params`). Any object with a `decide` method is accepted too; its hooks are
read by the same names (`PolicyHooks.of`).

It is called at decision points: job arrival, completion, deferral expiry, the end of a
checkpoint write (GPUs freed), demand-response notice/start/end, a PUE step during an
event, every carbon-signal step (`signal_steps`) and every `tick_s`. Several events at
the same instant lead to one call. `SystemState` is a read-only view onto the run, which
it asks through `StateQueries`: nothing is copied per call, so read what you need, when
you need it. Policies never touch SimPy and never mutate the state; they may keep
attributes of their own.

Actions are checked by the engine in order; an action that cannot be applied raises
`PolicyError` naming it (capacity, cap range, job not in the right state, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Protocol, cast, overload

import numpy as np

from sim.errors import PolicyError
from sim.models import mig
from sim.models.hardware import GPU_CATALOG, Estimate, GpuSpec, estimate
from sim.models.placement import PoolPlacer
from sim.util.jit import helper, kernel
from sim.util.percentile import weighted_percentile

if TYPE_CHECKING:
    from sim.config.services import Directive, ServiceConfig, Variant
    from sim.serving.service_sim import LiveStats
    from sim.workload import JobTable

__all__ = [
    "Action",
    "BatchPlan",
    "Defer",
    "DemandResponseView",
    "Estimate",
    "GpuSpec",
    "JobView",
    "MigGpuState",
    "Migrate",
    "MigrationCost",
    "OnsiteReading",
    "ParallelScaling",
    "Policy",
    "PolicyError",
    "PolicyHooks",
    "PoolPlacer",
    "Reject",
    "Repartition",
    "ReplicaPoint",
    "Resume",
    "Route",
    "Scale",
    "ServiceView",
    "SetBattery",
    "SetCap",
    "SetDirective",
    "Start",
    "StateQueries",
    "Suspend",
    "SystemState",
    "helper",
    "kernel",
    "weighted_percentile",
]


# --- actions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """Start a pending (or deferred) job on `site`, all its GPUs from one pool.

    `gpu_model=None` takes the site's first pool with enough free GPUs; `gpu_cap_w=None`
    runs under the site's cap (see `SetCap`), or uncapped. `batch_size`: for a job with a
    `target_metric` that has not run yet, train at this batch size instead of its own (its
    profile and work become those of the batch size, for the same drawn training run; see
    docs/training.md); None keeps it. `gpus`: for such a job (whole GPUs), run it on this
    many GPUs instead of its own; its work stays the same and its speed follows the
    scenario's `[scaling]` (docs/scaling.md); None keeps it. `capacity`: on a pool split
    into capacity kinds (docs/spot-capacity.md), the kinds the job takes its GPUs from,
    first to last (a job may hold several), e.g. ("spot", "reserved"); None: the engine's
    order, reserved, on-demand, spot (`SystemState.free_gpus_by_kind` shows what is free).
    PolicyError for a kind not in ("reserved", "on_demand", "spot") or named twice, a pool
    that is not split, or fewer free GPUs of the named kinds than the job needs; with
    `gpu_model=None` the pool is the one chosen without `capacity`.
    """

    job: JobView
    site: str
    gpu_cap_w: float | None = None
    gpu_model: str | None = None
    batch_size: int | None = None
    gpus: int | None = None
    capacity: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Defer:
    """Hide a pending job from the policy until `until_s` (s since start), then call again."""

    job: JobView
    until_s: float


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop an interruptible running job, keeping its progress; its GPUs are freed."""

    job: JobView


@dataclass(frozen=True, slots=True)
class Resume:
    """Restart a suspended job on `site` (any site), like `Start`."""

    job: JobView
    site: str
    gpu_cap_w: float | None = None
    gpu_model: str | None = None


@dataclass(frozen=True, slots=True)
class Migrate:
    """Move an interruptible running job to another site (or another GPU model), keeping its
    progress and its own cap, which must be in the new GPU model's settable range."""

    job: JobView
    site: str
    gpu_model: str | None = None


@dataclass(frozen=True, slots=True)
class SetCap:
    """Set the GPU power cap, W: of one running job (`target` a JobView), of a service's
    replicas at every site (`target` a ServiceView), or of every GPU of a site (`target` a
    site name: running jobs and services without a cap of their own, and later starts).
    `watts=None` removes the cap."""

    target: JobView | ServiceView | str
    watts: float | None


@dataclass(frozen=True, slots=True)
class Scale:
    """Run `replicas` replicas of `service`'s `variant` (None: its own model) at `site` (one
    of its sites). New replicas take free GPUs of the variant's GPU model there and serve
    after a cold start (the weights read at the site's `checkpoint_read_gbps`, after booting
    powered-off nodes); replicas taken away stop admitting requests and free their GPUs when
    their last one finishes. Switching variants is scaling one up and another down."""

    service: ServiceView
    site: str
    replicas: int
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class SetDirective:
    """From now, `service`'s requests are answered at directive `level` (one of its
    `directives`): their output tokens scaled by its factor, their quality lowered by its
    penalty (docs/inference-levers.md)."""

    service: ServiceView
    level: str


@dataclass(frozen=True, slots=True)
class Route:
    """From now, send `service`'s requests to its sites in these shares (site -> weight >= 0,
    normalised; sites left out get none); None: in proportion to the ready replicas (the
    default). Requests served away from the service's origin pay the WAN round trip in
    their time to first token."""

    service: ServiceView
    shares: dict[str, float] | None


@dataclass(frozen=True, slots=True)
class Reject:
    """Give up on a job that is not running; it ends rejected with `reason`."""

    job: JobView
    reason: str


@dataclass(frozen=True, slots=True)
class Repartition:
    """Give `gpus` GPUs of `site`'s MIG-partitioned `gpu_model` pool the MIG `layout` (its
    slices' profiles, e.g. ("3g.40gb", "2g.20gb", "2g.20gb"); docs/mig.md). The engine takes
    the lowest-index GPUs that hold no slice, are not being reconfigured and have another
    layout (`SystemState.mig_layouts` shows them). They offer no slice for
    `sim.models.mig.reconfiguration_s(gpu_model)` (after booting a powered-off node, if one is
    needed), drawing idle power meanwhile, then the new layout's slices (a decision point).
    Draining is the policy's business: a GPU with a held slice cannot be repartitioned.
    PolicyError for an invalid layout (the reason from `sim.models.mig.validate_layout`) or too
    few such GPUs."""

    site: str
    gpu_model: str
    layout: tuple[str, ...]
    gpus: int = 1


@dataclass(frozen=True, slots=True)
class SetBattery:
    """From now, run `site`'s battery at `power_kw` kW at its terminals (positive charging,
    negative discharging), held until changed; or, with `import_cap_kw` instead, hold the
    site's grid import at or below that cap (kW, lowered to the connection's import
    limit): at every change of load, generation or state of charge the battery
    discharges what the load takes above generation + cap and charges (from on-site
    surplus, then the grid) up to the cap below it; neither (both None): back to the
    default, self-consumption (charge from on-site surplus, discharge to meet the deficit:
    the cap 0). The battery applies either within its rating and state-of-charge bounds
    (it stops at a bound); a charge beyond on-site surplus comes from the grid, a discharge
    beyond the load goes to it. PolicyError for an unknown site, a site without a battery,
    both fields given, a power over the battery's rating, a cap that is negative or not
    finite, or (connection mode "refuse") a power that would take the site's import or
    export over its connection limit now."""

    site: str
    power_kw: float | None = None
    import_cap_kw: float | None = None


Action = (
    Start
    | Defer
    | Suspend
    | Resume
    | Migrate
    | SetCap
    | Reject
    | Scale
    | Route
    | SetDirective
    | Repartition
    | SetBattery
)


class Policy:
    """The policy contract: one required method, `decide`, and optional hooks with defaults.

    Subclass it, or write any class with a `decide(state)` method: the engine reads the
    hooks of an object that does not inherit from `Policy` by the same names
    (`PolicyHooks.of`), with the defaults declared here. Lifecycle: the policy is built
    once per run (by `from_params` if it declares one, else from its dataclass fields),
    then `decide` is called at every decision point until the horizon.
    """

    signal_steps: bool = False
    """True: also decide at every step of any site's carbon-intensity signal."""

    tick_s: float | None = None
    """A period, s: also decide every `tick_s` seconds (None: no timer)."""

    pending_only: bool = False
    """True: `decide` returns no action while no job is pending, whatever else the state
    holds (a scheduler that only starts queued jobs). The engine then skips the decision
    points at which no job is pending (a completion with an empty queue): results are the
    same, each costs nothing. Every job that becomes pending asks for a decision. A promise
    about one `decide`: a subclass that overrides `decide` must declare it again."""

    amend: Callable[[SystemState, list[Action]], Sequence[Action]] | None = None
    """An adjuster's hook (power caps, demand response), None for a scheduler:
    `amend(state, actions)` receives the actions planned by the policies before it in a
    `chain` and returns the actions to apply (caps added, starts held back, actions
    added). See `policies.kit.Adjuster`."""

    from_params: Callable[..., Policy] | None = None
    """A composite's constructor from the scenario's `[policy.params]`, None for a policy
    built from its dataclass fields (validated by name and type): a classmethod
    `from_params(params, build)` that builds its members with `build(name, params, key)`
    and raises ValueError naming the key of a bad parameter (see `policies.chain`)."""

    def decide(self, state: SystemState) -> Sequence[Action]:
        """The actions to apply now, checked and applied in order; [] to do nothing. Read
        `state`, never change it; keep attributes of your own if you need memory."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """What a policy's optional `plan_batch(plan)` hook plans every job from at once, for
    the batch engine (docs/performance.md, "the batch engine"): a run on one site whose
    capacity never binds, with a perfect forecast, where each job is decided alone when it
    arrives. Per job (arrays in job order): `now_s`, the time of its arrival decision (the
    event engine's clock there, s); `submit_s`; `deadline_s` (NaN: none); `runtime_s`, its
    uninterrupted runtime at the site (`SystemState.runtime_s`). The site's decision signal
    as a step function: `signal_times_s`, `signal_values` (g/kWh), `signal_end_s`.

    `plan_batch` returns, per job, the time it is deferred to at arrival (`Defer.until_s`),
    NaN for a start at arrival: the same floats `decide` would give one job at a time; or
    None when this policy, so configured, cannot plan so (the event engine then runs). A
    promise about one class's decisions: only a policy whose own class defines `plan_batch`
    is planned so (a subclass, which may decide differently, declares it again)."""

    now_s: np.ndarray
    submit_s: np.ndarray
    deadline_s: np.ndarray
    runtime_s: np.ndarray
    signal_times_s: np.ndarray
    signal_values: np.ndarray
    signal_end_s: float


@dataclass(frozen=True, slots=True)
class PolicyHooks:
    """A policy's optional hooks as the engine and `chain` read them, once per run."""

    signal_steps: bool
    tick_s: float | None
    pending_only: bool
    amend: Callable[[SystemState, list[Action]], Sequence[Action]] | None

    @classmethod
    def of(cls, policy: object) -> PolicyHooks:
        """The hooks `policy` declares (a `Policy` subclass, or any object with `decide`),
        the defaults of `Policy` for those it does not."""
        tick_s = getattr(policy, "tick_s", Policy.tick_s)
        return cls(
            signal_steps=bool(getattr(policy, "signal_steps", Policy.signal_steps)),
            tick_s=float(tick_s) if tick_s else None,
            pending_only=_promised_by_its_decide(policy, "pending_only"),
            amend=getattr(policy, "amend", Policy.amend),
        )


def _promised_by_its_decide(policy: object, hook: str) -> bool:
    """Whether `policy` declares the promise `hook` (a true attribute) about the `decide` it
    has: on the instance, or on the class that defines that `decide` or a subclass of it
    (a subclass overriding `decide` does not inherit its base's promise)."""
    if not getattr(policy, hook, False):
        return False
    if hook in getattr(policy, "__dict__", ()):
        return True
    mro = type(policy).__mro__
    declared = next(i for i, k in enumerate(mro) if hook in vars(k))
    decides = next((i for i, k in enumerate(mro) if "decide" in vars(k)), len(mro))
    return declared <= decides


# --- read-only views ------------------------------------------------------------------------


class _PoolReading(Protocol):
    """What the views read of one GPU pool of a site: the contract the engine's read-only
    `sim.engine.site_view.PoolView` keeps (so that this module imports no engine module)."""

    @property
    def model(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def free(self) -> int: ...
    @property
    def idle_w(self) -> float: ...
    @property
    def powered_off_gpus(self) -> int: ...
    def free_by_kind(self) -> dict[str, int] | None: ...
    def shared_milli(self) -> list[int]: ...
    def free_mig_slices(self) -> dict[str, int] | None: ...
    def mig_layouts(self) -> list[MigGpuState] | None: ...
    def free_by_server(self) -> list[int] | None: ...
    @property
    def placer(self) -> PoolPlacer | None: ...


class _SiteReading(Protocol):
    """What the views read of a site: the contract the engine's read-only
    `sim.engine.site_view.SiteView` keeps."""

    @property
    def pools(self) -> Sequence[_PoolReading]: ...
    @property
    def server_pools(self) -> Sequence[_PoolReading]: ...
    @property
    def name(self) -> str: ...
    @property
    def host_w_per_gpu(self) -> float: ...
    @property
    def cap_w(self) -> float | None: ...
    def pool(self, model: str) -> _PoolReading | None: ...
    def pue_at(self, t_s: float) -> float: ...


class _Offered(Protocol):
    """The queries `SystemState` offers policies as the engine answers them: each is declared
    once, here (its signature and its docstring with units). `SystemState` inherits it,
    forwarding it to the engine, and `StateQueries`, which the engine implements
    (`sim.engine.queries.Queries`), extends this protocol, so a new query is this one edit
    plus its answer in `Queries`. A query about a job takes its `JobView` (the engine reads
    `job.index`)."""

    __slots__ = ()

    def price_per_gpu_h(self, gpu_model: str) -> float:
        """The scenario's price of one GPU-hour of `gpu_model`, its currency (NaN: none)."""
        return _engine(self).price_per_gpu_h(gpu_model)

    def carbon_intensity(self, site: str) -> float:
        """Carbon intensity of `site`'s grid now, g/kWh: the signal the site decides on
        (`[sites.decision_carbon]` if it has one, else `[sites.carbon]`)."""
        return _engine(self).carbon_intensity(site)

    def forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Forecast of `site`'s carbon intensity from now over `horizon_s`, as a step function
        (start times s, values g/kWh), with the scenario's forecast error model."""
        return _engine(self).forecast(site, horizon_s)

    def forecasts(
        self, sites: Sequence[str], horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`forecast(site, horizon_s)` of every site of `sites` in one call: (times s, values
        g/kWh, offsets), site k's forecast being times[offsets[k]:offsets[k + 1]] and the same
        slice of values (offsets: len(sites) + 1 int64, offsets[0] == 0)."""
        return _engine(self).forecasts(sites, horizon_s)

    def carbon_intensities(self, sites: Sequence[str]) -> np.ndarray:
        """`carbon_intensity(site)` of every site of `sites` in one call, g/kWh."""
        return _engine(self).carbon_intensities(sites)

    def forecast_version(self, site: str) -> int:
        """A number that changes whenever `forecast(site, ..)`'s steps after the current
        one may stop being those of a forecast made earlier: while it is unchanged, every
        forecast made since it took its value has the same later breakpoints and values, up
        to the shorter one's end. The value of the step in effect now is not covered (a
        fresh forecast's may differ from the earlier one's value for that time). A policy
        may keep a forecast rather than ask again. Never changes for "perfect" and "persistence"
        forecasts; for a replayed archive with the "perfect" model, at each new issue;
        otherwise ("gaussian", "calibrated", archives replayed with another model) at every
        new time. (`price_forecast` is perfect: it never changes.)"""
        return _engine(self).forecast_version(site)

    def electricity_price(self, site: str) -> float:
        """The energy price `site` pays now, the scenario's currency per kWh: its tariff's
        energy component (wholesale price plus adder, or the TOU rate); demand charges are
        not in it. PolicyError if the site has no `[sites.tariff]`."""
        return _engine(self).electricity_price(site)

    def price_forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """`site`'s energy price from now over `horizon_s` (cut at the horizon of the run),
        as a step function (start times s, values in the scenario's currency per kWh), like
        `forecast`. Perfect: day-ahead prices and tariffs are known ahead (a day-ahead price
        is published the day before; beyond that this is foresight). PolicyError if the
        site has no `[sites.tariff]`."""
        return _engine(self).price_forecast(site, horizon_s)

    def parallel_scaling(
        self, site: str, model: str, profile: str, gpus: int, scheme: str = "data"
    ) -> ParallelScaling:
        """How `gpus` GPUs of `model` at `site` scale on a `profile` job parallelised by
        `scheme` (docs/scaling.md): the engine's own numbers, so a job on n GPUs advances at
        n x `reference_speed` x the cap's throughput fraction x `efficiency`. Without the
        scenario's `[scaling]`: (1, 0, 1), linear."""
        return _engine(self).parallel_scaling(site, model, profile, gpus, scheme)

    def transfer_cost(self, src: str, dst: str, gb: float) -> tuple[float, float, float]:
        """Moving `gb` GB from site `src` to site `dst` over the WAN from now: (duration s,
        energy kWh, carbon kg), each hop charged at its own grid's intensity; zeros for a
        same-site move or a scenario without `[wan]`. Starting a job away from its origin
        moves its `data_gb`; resuming or migrating it elsewhere moves its `checkpoint_gb`."""
        return _engine(self).transfer_cost(src, dst, gb)

    def reference_speed(self, model: str, profile: str) -> float:
        """Work one uncapped `model` GPU does on a `profile` job, reference GPU-s per s (an
        A100-80GB at its maximum power limit does 1): the scenario's `[throughput]` table's
        where it lists the pair, else the roofline's."""
        return _engine(self).reference_speed(model, profile)

    def expected_ends(self, site: str, gpu_model: str) -> tuple[list[float], list[int]]:
        """The jobs running on `site`'s `gpu_model` GPUs: when each is expected to finish at
        its current speed (s since the scenario start; a held job from now, its hold left
        out) and how many GPUs it frees then, as two lists in start order (of the jobs
        sharing a GPU, the last to end frees it: 1, the others 0). The same ends as
        `estimate(job, site, job.cap_w, gpu_model)`, read in O(1) per job: for policies that
        look at a whole pool's future (bookings, backfilling) at every decision."""
        return _engine(self).expected_ends(site, gpu_model)

    def runtime_version(self, site: str) -> int:
        """A number that changes whenever `runtime_s` (and `estimate`'s runtime) at `site`
        may change for a job that stays pending: a new site cap, and with power-off, any
        start, end or switch-off there. While it is unchanged, such a job's runtime there
        is too: a policy may keep it rather than ask again, until the job runs (a job back
        in the queue after a failure has less work left: `pending_since` shows it again)."""
        return _engine(self).runtime_version(site)

    def training_options(self, job: JobView, truth: bool = False) -> dict[int, float]:
        """For a job with a `target_metric` (docs/training.md): {batch size: work to the
        target at that batch size, reference GPU-h} over the batch sizes Zeus trained and
        measured at which some run reaches the target. `truth=False`: the expected work (the
        mean over the trace's runs at that batch size, a run that never reaches it counted
        at the maximum epochs), what a scheduler can know; `truth=True`: the work of the run
        the job will actually train (an oracle's view). A `Start(..., batch_size=b)` before
        the job first runs makes its work the truth at `b`. {} for other jobs."""
        return _engine(self).training_options(job, truth)

    def power_delta_w(
        self,
        job: JobView,
        cap_w: float | None = None,
        site: str | None = None,
        gpu_model: str | None = None,
    ) -> float:
        """How much `site`'s IT power would change, W: if pending/suspended `job` started
        there now under `cap_w` (None: the site's cap; `site` and `gpu_model` as in `Start`,
        waking powered-off nodes included), or, for a running job, if its own cap became
        `cap_w` (None: the site's cap, or uncapped)."""
        return _engine(self).power_delta_w(job, cap_w, site, gpu_model)

    def estimate(
        self, job: JobView, site: str, cap_w: float | None = None, gpu_model: str | None = None
    ) -> tuple[float, float]:
        """(runtime_s, facility energy kWh) to finish `job`'s remaining work on `site` from
        now, uninterrupted, under `cap_w` (None: the site's cap, or uncapped), on `gpu_model`
        (None: the site's first pool)."""
        return _engine(self).estimate(job, site, cap_w, gpu_model)

    def runtime_s(
        self, job: JobView, site: str, cap_w: float | None = None, gpu_model: str | None = None
    ) -> float:
        """`estimate(job, site, cap_w, gpu_model)`'s runtime_s alone, without its energy
        integrals."""
        return _engine(self).runtime_s(job, site, cap_w, gpu_model)


def _engine(state: _Offered) -> StateQueries:
    """What `state` (a `SystemState`) asks."""
    return cast("SystemState", state)._q


class StateQueries(_Offered, Protocol):
    """What `SystemState` and `JobView` ask the engine: the small interface between the
    policy's views and the run (implemented by `sim.engine.queries.Queries`). Job
    arguments `j` are job indices (`JobView.index`); times are s since the scenario start;
    errors are `PolicyError` naming the query."""

    jobs: JobTable
    """The workload's columns (ids, submit times, GPUs, work, deadlines, ...)."""
    site_names: tuple[str, ...]
    pending: dict[int, int]
    running: dict[int, None]
    suspended: dict[int, None]

    @property
    def now_s(self) -> float: ...
    @property
    def horizon_s(self) -> float: ...
    def site(self, name: str) -> _SiteReading:
        """A read-only view of site `name`; PolicyError naming it if there is none."""

    @property
    def pending_count(self) -> int: ...
    def pending_since(self, mark: int) -> list[int]: ...
    def state_name(self, j: int) -> str: ...
    def remaining_gpu_s(self, j: int) -> float: ...
    def held(self, j: int) -> bool: ...
    def allowed_sites(self, j: int) -> tuple[str, ...]: ...
    def allowed_gpu_models(self, j: int) -> tuple[str, ...]: ...
    def running_site(self, j: int) -> str | None: ...
    def running_model(self, j: int) -> str | None: ...
    def job_cap_w(self, j: int) -> float | None: ...
    def job_draw_w(self, j: int) -> float: ...
    def migration_cost(
        self, j: int, site_name: str, model: str | None
    ) -> tuple[float, float, float, float]: ...
    def announced_events(self, site: str | None) -> list[DemandResponseView]: ...
    def job_profile(self, j: int) -> str: ...
    def job_gpus(self, j: int) -> int: ...
    def vc_room(self, j: int) -> float: ...
    def job_work_gpu_h(self, j: int) -> float: ...
    def site_it_w(self, name: str) -> float: ...
    def onsite(self, name: str) -> OnsiteReading | None: ...
    def onsite_forecast(self, name: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]: ...

    service_names: tuple[str, ...]

    def service_config(self, name: str) -> ServiceConfig: ...
    def service_stats(self, name: str) -> LiveStats: ...
    def service_replicas(self, name: str, site: str, variant: str | None) -> tuple[int, int]: ...
    def service_cap_w(self, name: str) -> float | None: ...
    def service_capacity_rps(self, name: str, site: str, variant: str | None) -> float: ...
    def service_variants(self, name: str) -> tuple[Variant, ...]: ...
    def service_deployments(self, name: str) -> tuple[tuple[str, str], ...]: ...
    def service_directive(self, name: str) -> str: ...
    def service_directives(self, name: str) -> tuple[Directive, ...]: ...
    def service_mean_output_tokens(self, name: str) -> float: ...
    def service_replica_point(
        self, name: str, site: str, variant: str | None, directive: str | None, cap_w: float | None
    ) -> ReplicaPoint: ...
    def service_rtt_s(self, name: str, site: str) -> float: ...
    def service_rate_forecast(
        self, name: str, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]: ...


class JobView:
    """A read-only view of one job. Times are seconds since the scenario start."""

    __slots__ = ("_q", "index")

    def __init__(self, queries: StateQueries, index: int):
        self._q = queries
        self.index = index

    def __repr__(self) -> str:
        return f"JobView({self.id!r}, {self.state})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobView) and other._q is self._q and other.index == self.index

    def __hash__(self) -> int:
        return hash(self.index)

    @property
    def id(self) -> str:
        return self._q.jobs.job_id[self.index]

    @property
    def submit_s(self) -> float:
        return float(self._q.jobs.submit_s[self.index])

    @property
    def gpus(self) -> int:
        """GPUs the job runs on (a target job's may be chosen at its first start)."""
        return self._q.job_gpus(self.index)

    @property
    def gpu_milli(self) -> int:
        """Thousandths of one GPU the job holds: 1000 for whole GPUs; below 1000 (a job of
        one GPU) it takes room on a GPU shared with other fractional jobs, or one free GPU
        (docs/gpu-sharing.md)."""
        return int(self._q.jobs.gpu_milli[self.index])

    @property
    def mig_profile(self) -> str:
        """The MIG profile of the slice the job runs on (e.g. "3g.40gb": one slice of a GPU
        pool partitioned with that profile, docs/mig.md); "" for whole GPUs or a share of
        one."""
        return str(self._q.jobs.mig_profile[self.index])

    @property
    def parallelism(self) -> str:
        """How the job splits its work over several GPUs: "data", "tensor" or "pipeline"
        (docs/scaling.md)."""
        return str(self._q.jobs.parallelism[self.index])

    @property
    def vc(self) -> str:
        """The job's virtual cluster (a trace's team share; "" for none)."""
        return str(self._q.jobs.vc[self.index])

    @property
    def user(self) -> str:
        """Who submitted the job ("" if the trace does not say)."""
        return str(self._q.jobs.user[self.index])

    @property
    def vc_room(self) -> float:
        """GPUs the job's virtual cluster may still start now under its quota
        (`[virtual_clusters]`); inf without one."""
        return self._q.vc_room(self.index)

    @property
    def work_gpu_h(self) -> float:
        """Total work in reference GPU-hours (A100-80GB at its maximum power limit); a target
        job's follows the batch size it trains at."""
        return self._q.job_work_gpu_h(self.index)

    @property
    def remaining_gpu_h(self) -> float:
        """Work left now, reference GPU-hours."""
        return self._q.remaining_gpu_s(self.index) / 3600.0

    @property
    def profile(self) -> str:
        """The job's profile (`sim.models.hardware.PROFILES`); a target job's names the batch size
        it trains at (`resnet50@256`)."""
        return self._q.job_profile(self.index)

    @property
    def target_metric(self) -> float | None:
        """The metric a training job trains to (docs/training.md), or None for fixed work."""
        t = float(self._q.jobs.target_metric[self.index])
        return None if math.isnan(t) else t

    @property
    def deadline_s(self) -> float | None:
        """Latest completion time, or None for a job that must run as soon as possible."""
        d = float(self._q.jobs.deadline_s[self.index])
        return None if math.isnan(d) else d

    @property
    def interruptible(self) -> bool:
        return bool(self._q.jobs.interruptible[self.index])

    @property
    def checkpoint_gb(self) -> float:
        return float(self._q.jobs.checkpoint_gb[self.index])

    @property
    def data_gb(self) -> float:
        return float(self._q.jobs.data_gb[self.index])

    @property
    def origin_site(self) -> str:
        return self._q.site_names[self._q.jobs.origin_site[self.index]]

    @property
    def held(self) -> bool:
        """True while a running job holds its GPUs at idle power before it computes: its
        data or checkpoint still crossing the WAN or loading, or its nodes booting."""
        return self._q.held(self.index)

    @property
    def allowed_sites(self) -> tuple[str, ...]:
        """The sites the job may run on (data residency), in scenario order; every site
        unless the workload restricts it. The engine refuses a start, resume or migration
        anywhere else."""
        return self._q.allowed_sites(self.index)

    @property
    def allowed_gpu_models(self) -> tuple[str, ...]:
        """The GPU models the job may run on (a trace's GPU-type constraint), e.g.
        ("A100-80GB", "H100-SXM"); () for any model. The engine refuses a start, resume or
        migration onto any other model."""
        return self._q.allowed_gpu_models(self.index)

    @property
    def state(self) -> str:
        """One of pending, deferred, running, suspended, completed, rejected."""
        return self._q.state_name(self.index)

    @property
    def site(self) -> str | None:
        """The site the job runs on, None unless running."""
        return self._q.running_site(self.index)

    @property
    def gpu_model(self) -> str | None:
        return self._q.running_model(self.index)

    @property
    def cap_w(self) -> float | None:
        """The job's own power cap, W (None: the site's cap or uncapped)."""
        return self._q.job_cap_w(self.index)

    @property
    def gpu_power_w(self) -> float:
        """Active power of one of the job's GPUs now, W (0 unless running; idle power while
        its nodes boot)."""
        return self._q.job_draw_w(self.index)


class _JobSeq(Sequence[JobView]):
    """A live, read-only sequence of jobs over one of the engine's ordered job sets."""

    __slots__ = ("_q", "_members")

    def __init__(self, queries: StateQueries, members: Mapping[int, object]):
        self._q = queries
        self._members = members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[JobView]:
        q = self._q
        return (JobView(q, i) for i in self._members)

    @overload
    def __getitem__(self, k: int) -> JobView: ...
    @overload
    def __getitem__(self, k: slice) -> list[JobView]: ...
    def __getitem__(self, k: int | slice) -> JobView | list[JobView]:
        if isinstance(k, slice):
            return [JobView(self._q, i) for i in tuple(self._members)[k]]
        if k < 0:
            k += len(self._members)
        try:
            return JobView(self._q, next(islice(self._members, k, None)))
        except StopIteration:
            raise IndexError(k) from None


class ServiceView:
    """A read-only view of one inference service (`SystemState.service(name)`). Rates are
    requests per second; latencies ms; `stats` describes the last completed step."""

    __slots__ = ("_q", "name")

    def __init__(self, queries: StateQueries, name: str):
        self._q = queries
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceView({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceView) and other._q is self._q and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def config(self) -> ServiceConfig:
        """The service's `[[services]]` entry: model, GPU, GPUs per replica, sites, SLO."""
        return self._q.service_config(self.name)

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(self.config.sites)

    @property
    def stats(self) -> LiveStats:
        """Rate, queue, requests in flight, p99 latencies, SLO attainment and drops of the
        last completed step (`sim.serving.service_sim.LiveStats`)."""
        return self._q.service_stats(self.name)

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Its variants (`sim.config.services.Variant`: name, model, gpu, gpus_per_replica,
        max_batch, mig_profile, quality), its own model first."""
        return self._q.service_variants(self.name)

    @property
    def deployments(self) -> tuple[tuple[str, str], ...]:
        """(site, variant name) pairs it can run: a variant at a site with its GPUs."""
        return self._q.service_deployments(self.name)

    @property
    def directive(self) -> str:
        """The directive level in force."""
        return self._q.service_directive(self.name)

    @property
    def directives(self) -> tuple[Directive, ...]:
        """Its directive levels (name, output_factor, quality_penalty), the first the start's."""
        return self._q.service_directives(self.name)

    @property
    def mean_output_tokens(self) -> float:
        """Mean output tokens per request under the directive in force."""
        return self._q.service_mean_output_tokens(self.name)

    def replicas(self, site: str, variant: str | None = None) -> int:
        """Replicas of `variant` (None: its own model) serving at `site` now (after their
        cold start)."""
        return self._q.service_replicas(self.name, site, variant)[0]

    def starting(self, site: str, variant: str | None = None) -> int:
        """Replicas of `variant` at `site` in their cold start."""
        return self._q.service_replicas(self.name, site, variant)[1]

    @property
    def cap_w(self) -> float | None:
        """The service's own GPU cap, W (None: its sites' caps, or uncapped)."""
        return self._q.service_cap_w(self.name)

    def replica_point(
        self,
        site: str,
        variant: str | None = None,
        directive: str | None = None,
        cap_w: float | None = None,
    ) -> ReplicaPoint:
        """What one replica of `variant` (None: its own model) at `site` would do under
        `directive` (None: the one in force) and a per-GPU cap of `cap_w` W (None: the cap
        in force there): requests/s and power with its batch full, its power at a lighter
        load, price, quality (`ReplicaPoint`). PolicyError for a cap out of the GPU's
        range."""
        return self._q.service_replica_point(self.name, site, variant, directive, cap_w)

    def rtt_s(self, site: str) -> float:
        """Round-trip propagation from the requests' origin to `site`, s (0 at the origin):
        what a request served there adds to its time to first token."""
        return self._q.service_rtt_s(self.name, site)

    def capacity_rps(self, site: str, variant: str | None = None) -> float:
        """Requests per second one replica of `variant` (None: its own model) at `site`
        serves with its batch full, at the service's mean token counts under its directive
        and its cap there."""
        return self._q.service_capacity_rps(self.name, site, variant)

    def rate_forecast(self, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The service's arrival rate from now over `horizon_s`, as a step function (start
        times s, requests/s per step): the request source's own rate, so a perfect
        forecast."""
        return self._q.service_rate_forecast(self.name, horizon_s)


@dataclass(frozen=True, slots=True)
class ReplicaPoint:
    """One replica of a service's variant at a site (`ServiceView.replica_point`): with its
    batch full (`capacity_rps`, `busy_w`), and at a lighter load (`power_at_w`)."""

    capacity_rps: float
    """Requests per second it serves."""
    busy_w: float
    """GPU power of the replica, W (all its GPUs; host and PUE not included)."""
    idle_w: float
    """GPU power of the replica with nothing in flight, W."""
    gpus: float
    """GPUs it holds (a MIG slice: its SM share of a GPU)."""
    price_per_h: float
    """Price of its GPUs per hour, the scenario's currency (NaN: no price for the GPU)."""
    quality: float | None
    """Its variant's quality minus the directive's penalty (None: the variant has no score)."""
    mean_output_tokens: float
    """Mean output tokens per request under the directive."""
    batch_rps: tuple[float, ...]
    """Requests per second it serves with n = 0, 1, ..., slots sequences in flight (n over
    the time a request's output takes at that batch; never falling as n grows; the last is
    `capacity_rps`)."""
    batch_power_w: tuple[float, ...]
    """GPU power of the replica with n = 0, 1, ..., slots sequences in flight, W (the first
    is `idle_w`, the last `busy_w`)."""

    def power_at_w(self, rate_rps: float) -> float:
        """GPU power of the replica serving `rate_rps` requests/s, W: at the batch that
        serves that rate (`batch_rps`; linear between whole batches, as the fluid level
        spreads a load over replicas), `busy_w` at `capacity_rps` and above."""
        return float(np.interp(rate_rps, self.batch_rps, self.batch_power_w))


@dataclass(frozen=True, slots=True)
class DemandResponseView:
    """An announced demand-response event: keep `site`'s facility power under `limit_kw`
    during [start_s, end_s)."""

    site: str
    start_s: float
    end_s: float
    limit_kw: float


@dataclass(frozen=True, slots=True)
class OnsiteReading:
    """A site's on-site energy now (`SystemState.onsite`). Battery fields are None without
    a battery; limits are `math.inf` where the connection has none."""

    site: str
    generation_kw: float
    """On-site generation now (solar + wind), kW."""
    load_kw: float
    """The site's facility power now (IT x PUE, services' power included), kW."""
    battery_kwh: float | None
    """Energy stored now, kWh."""
    battery_soc: float | None
    """State of charge now: stored / the present (faded) capacity (0..1)."""
    battery_capacity_kwh: float | None
    """Nominal capacity, kWh (the faded capacity is lower)."""
    battery_soc_min: float | None
    battery_soc_max: float | None
    battery_power_kw: float | None
    """Power rating, kW: the largest charge and discharge power at the terminals."""
    battery_charge_efficiency: float | None
    """Energy stored per unit taken at the terminals on charge (0..1]."""
    battery_discharge_efficiency: float | None
    """Energy at the terminals per unit taken from storage on discharge (0..1]."""
    battery_setpoint_kw: float | None
    """The `SetBattery` power held now, kW; None: none (an import cap or self-consumption)."""
    battery_import_cap_kw: float | None
    """The `SetBattery` import cap held now, kW; None: none."""
    month_peak_import_kw: float | None
    """The demand-charge peak so far: the largest mean grid import over the demand
    intervals (`demand_interval_min`) of the tariff's present billing month that have
    ended, kW; None without a tariff with a demand charge, or before the month's first
    interval ends. From the balance advanced in the run (the services' power counted)."""
    import_limit_kw: float
    export_limit_kw: float
    over_limit: str
    """"refuse" (an action over a limit is refused) or "curtail" (cut to fit)."""


@dataclass(frozen=True, slots=True)
class ParallelScaling:
    """How a job on several GPUs of one pool scales (`SystemState.parallel_scaling`)."""

    efficiency: float
    """Throughput of the GPUs together over their count x one GPU's, in (0, 1]; 1 without
    the scenario's `[scaling]`."""
    comm_time_frac: float
    """Share of time the GPUs wait on communication (they draw `comm_power_frac` of their
    computing power meanwhile)."""
    comm_power_frac: float
    """GPU power while communicating over power while computing."""


@dataclass(frozen=True, slots=True)
class MigGpuState:
    """One GPU of a partitioned pool, as `SystemState.mig_layouts` shows it."""

    layout: tuple[str, ...]
    """Its slices' profiles, by start slot (the new layout while it is reconfigured)."""
    held: int
    """Slices held (by jobs or replicas)."""
    ready_s: float
    """When its layout became (or becomes) usable, s since the start: the end of its last
    reconfiguration, 0.0 if never reconfigured. Until then no slice of it can be taken."""


@dataclass(frozen=True, slots=True)
class MigrationCost:
    """What migrating a running job would cost now (`SystemState.migration_cost`)."""

    stall_s: float
    """Time the job does no work: checkpoint write, WAN transfer, read at the new site (at
    least the boot of powered-off nodes there), s."""
    energy_kwh: float
    """Facility energy of the GPUs held idle meanwhile, plus the WAN transfer's, kWh."""
    carbon_kg: float
    """Carbon of that energy (each site's intensity now, the transfer hop by hop), kg."""
    lost_gpu_h: float
    """Work redone after falling back to the last periodic checkpoint, reference GPU-h."""


class SystemState(_Offered):
    """What a policy can see. Built once per run; every read is live."""

    __slots__ = ("_q", "pending", "running", "suspended", "sites", "services")

    def __init__(self, queries: StateQueries):
        self._q = queries
        self.sites: tuple[str, ...] = queries.site_names
        self.pending: Sequence[JobView] = _JobSeq(queries, queries.pending)
        """Jobs waiting to start, in the order they became ready (arrival or deferral expiry)."""
        self.running: Sequence[JobView] = _JobSeq(queries, queries.running)
        self.suspended: Sequence[JobView] = _JobSeq(queries, queries.suspended)
        self.services: tuple[str, ...] = queries.service_names
        """The names of the scenario's inference services."""

    @property
    def now_s(self) -> float:
        return self._q.now_s

    @property
    def horizon_s(self) -> float:
        return self._q.horizon_s

    @property
    def pending_mark(self) -> int:
        """A mark of the pending queue now, for `pending_since`."""
        return self._q.pending_count

    def pending_since(self, mark: int) -> list[JobView]:
        """The jobs pending now that became pending (arrived, or came back from a deferral)
        after `pending_mark` gave `mark`, in queue order: the tail of `pending`. Costs
        O(those jobs), where walking `pending` costs O(all of them)."""
        q = self._q
        return [JobView(q, j) for j in q.pending_since(mark)]

    def gpu_models(self, site: str) -> tuple[str, ...]:
        return tuple(p.model for p in self._q.site(site).pools)

    def onsite(self, site: str) -> OnsiteReading | None:
        """`site`'s on-site generation, battery and grid connection now (`OnsiteReading`);
        None for a site without on-site energy. PolicyError for an unknown site. The
        battery's state of charge is its balance integrated from the start (a cost that
        grows with the run: read it once per decision)."""
        return self._q.onsite(site)

    def onsite_forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """`site`'s forecast on-site generation from now over `horizon_s`, as a step
        function: start times (s, the first now) and kW per hour. Perfect with a perfect
        `[forecast]`, else day-ahead errors (`sim.grid.renewables.forecast_capacity_factors`).
        PolicyError for an unknown site or one without on-site energy."""
        return self._q.onsite_forecast(site, horizon_s)

    def gpu_spec(self, model: str) -> GpuSpec:
        """Catalog entry of a GPU model: power limits (W), idle power, throughput, memory."""
        return GPU_CATALOG[model]

    def total_gpus(self, site: str) -> dict[str, int]:
        """Installed GPUs per model at `site`."""
        return {p.model: p.count for p in self._q.site(site).pools}

    def free_gpus(self, site: str) -> dict[str, int]:
        """Free GPUs per model at `site`, powered on or off (a GPU fractional jobs share is
        not free: `shared_gpus`)."""
        return {p.model: p.free for p in self._q.site(site).pools}

    def free_gpus_by_kind(self, site: str, gpu_model: str) -> dict[str, int]:
        """Free GPUs of `site`'s `gpu_model` pool by capacity kind ("reserved", "on_demand",
        "spot"; docs/spot-capacity.md), GPUs; their sum is `free_gpus(site)[gpu_model]`.
        Evicted spot GPUs out of service are not free. {} if the pool is not split into
        kinds; PolicyError if the site has no `gpu_model` GPUs. `Start(..., capacity=...)`
        takes GPUs of the kinds it names."""
        pool = self._q.site(site).pool(gpu_model)
        if pool is None:
            raise PolicyError(f"free_gpus_by_kind: site {site} has no {gpu_model} GPUs")
        return pool.free_by_kind() or {}

    def servers(self, site: str) -> dict[str, tuple[PoolPlacer, list[int]]]:
        """Per model of a pool of servers at `site` (docs/placement.md, "In a run"): where
        the engine puts a job's GPUs (`place(free, gpus)` -> the (server, GPUs) pairs, or
        None: the job does not fit now, even with enough free GPUs in total) and the free
        GPUs of each server (a copy). {} if the site has no pool of servers."""
        return {
            p.model: (p.placer, free)
            for p in self._q.site(site).server_pools
            if p.placer is not None and (free := p.free_by_server()) is not None
        }

    def shared_gpus(self, site: str) -> dict[str, list[int]]:
        """Per model at `site`, the milli (thousandths of a GPU) held on each GPU that
        fractional jobs share, in the order the engine places them (first fit: a fractional
        `Start` joins the first with room, else takes a free GPU, appended last)."""
        return {p.model: p.shared_milli() for p in self._q.site(site).pools}

    def free_mig_slices(self, site: str) -> dict[str, dict[str, int]]:
        """Per model of a MIG-partitioned pool at `site`, its free slices per profile of its
        GPUs' layouts (docs/mig.md; GPUs being reconfigured offer none); a job with a
        `mig_profile` starts only on one of them."""
        pools = self._q.site(site).pools
        return {p.model: free for p in pools if (free := p.free_mig_slices()) is not None}

    def mig_layouts(self, site: str, gpu_model: str) -> list[MigGpuState]:
        """Every GPU of `site`'s MIG-partitioned `gpu_model` pool, by index (docs/mig.md):
        its `layout` (profiles by start slot; the new one while it is reconfigured), the
        slices `held`, and `ready_s`, when that layout became or becomes usable (s since the
        start; later than now while `Repartition` reconfigures it). PolicyError if the pool
        is not partitioned."""
        pool = self._q.site(site).pool(gpu_model)
        layouts = None if pool is None else pool.mig_layouts()
        if layouts is None:
            raise PolicyError(f"mig_layouts: site {site} has no MIG-partitioned {gpu_model} GPUs")
        return layouts

    def mig_profiles(self, gpu_model: str) -> tuple[str, ...]:
        """The MIG profiles of `gpu_model` (e.g. "3g.40gb"; docs/mig.md), () for a GPU
        without MIG."""
        gpu = mig.MIG_GPUS.get(gpu_model)
        return () if gpu is None else tuple(gpu.profiles)

    def maximal_mig_layouts(self, gpu_model: str) -> tuple[tuple[str, ...], ...]:
        """Every maximal valid MIG layout of `gpu_model`: the profile multisets that fit on
        one GPU and to which no profile can be added, each as its profiles by start slot
        (as `mig_layouts` shows a GPU's), in `sim.models.mig.layouts` order; () for a GPU
        without MIG. `Repartition` may give a free GPU any of them (or a subset of one)."""
        if gpu_model not in mig.MIG_GPUS:
            return ()
        return tuple(placement.profiles for placement in mig.layouts(gpu_model))

    def powered_off_gpus(self, site: str) -> dict[str, int]:
        """GPUs per model on powered-off nodes at `site`: a job that needs them waits for the
        site's `power_off.wake_s`."""
        return {p.model: p.powered_off_gpus for p in self._q.site(site).pools}

    def site_power_kw(self, site: str) -> float:
        """Facility power of `site` now (jobs, services, idle GPUs and hosts), kW."""
        q = self._q
        return q.site_it_w(site) * q.site(site).pue_at(q.now_s) / 1000.0

    def site_it_power_kw(self, site: str) -> float:
        """IT power of `site` now, kW (facility power = IT power x PUE)."""
        return self._q.site_it_w(site) / 1000.0

    def service(self, name: str) -> ServiceView:
        """The inference service called `name` (one of `services`)."""
        if name not in self.services:
            raise PolicyError(f"service: unknown service {name!r} (services: {self.services})")
        return ServiceView(self._q, name)

    def host_w_per_gpu(self, site: str) -> float:
        """Host power (CPU, memory, network) per installed GPU at `site`, W, drawn always; at
        a site with pools of servers, the host power a job pays per GPU it holds (a server's
        full-load host power over its GPUs, docs/servers.md "Host power in a run"), averaged
        over the site's GPUs."""
        return self._q.site(site).host_w_per_gpu

    def pue(self, site: str) -> float:
        """`site`'s PUE now."""
        return self._q.site(site).pue_at(self._q.now_s)

    def site_cap_w(self, site: str) -> float | None:
        """The site-wide GPU cap set with `SetCap(site, watts)`, W, or None."""
        return self._q.site(site).cap_w

    def operating_point(self, model: str, profile: str, cap_w: float | None = None) -> Estimate:
        """The hardware model: throughput fraction (relative to uncapped) and average active
        power (W) of one `model` GPU running a `profile` job under `cap_w` (None: uncapped).
        See docs/power-model.md."""
        return estimate(model, profile, cap_w)

    def migration_cost(
        self, job: JobView, site: str, gpu_model: str | None = None
    ) -> MigrationCost:
        """The overhead of `Migrate(job, site, gpu_model)` now for running `job` (see
        `MigrationCost`); `gpu_model=None`: the site's first pool. The run itself (the work
        left, plus `lost_gpu_h`, at the new site's speed) is not included: see `estimate`.
        The stall lasts at least the boot of powered-off nodes the job needs at the new site
        (its GPUs held at idle power meanwhile). A `held` job writes nothing: it waits for
        the rest of a checkpoint write under way, and its checkpoint (or data) moves from
        where it still lies if it has not arrived yet. Prices are the intensities now; with
        `wan.contention`, the transfer at the rate it would get now."""
        if job.state != "running":
            raise PolicyError(f"migration_cost: job {job.id} is {job.state}, not running")
        stall_s, kwh, kg, lost_s = self._q.migration_cost(job.index, site, gpu_model)
        return MigrationCost(stall_s, kwh, kg, lost_s / 3600.0)

    def idle_w(self, site: str, model: str) -> float:
        """Idle power of one `model` GPU at `site` (the site's override, else the catalog's), W."""
        pool = self._q.site(site).pool(model)
        if pool is None:
            raise PolicyError(f"idle_w: site {site} has no {model} GPUs")
        return pool.idle_w

    def demand_response(self, site: str | None = None) -> list[DemandResponseView]:
        """Announced events that have not ended (all sites, or one)."""
        return self._q.announced_events(site)
