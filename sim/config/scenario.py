"""The whole scenario (`Scenario`): its sections composed, and the checks across them (site
names unique and referred to, jobs that fit some pool, demand-response events inside the
run, services that fit their sites' pools). All input validation of the scenario's own keys
lives in `sim.config`; `sim.config.loading` reads a file into a `Scenario`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import tomli_w
from pydantic import Field, field_validator, model_validator

from sim.config.base import ConfigModel
from sim.config.functions import FunctionsConfig
from sim.config.market import DemandResponseEvent, DrProgram, PriceConfig, SpotConfig
from sim.config.runtime import (
    EngineConfig,
    FailuresConfig,
    ForecastConfig,
    PolicyConfig,
    WanConfig,
)
from sim.config.services import (
    MAX_SERVICE_ROWS,
    ServiceConfig,
    ServingConfig,
    Variant,
)
from sim.config.sites import Site
from sim.config.workload import (
    MAX_JOBS,
    PredictionErrorConfig,
    ReboundConfig,
    ScalingConfig,
    SharingConfig,
    ThroughputConfig,
    VirtualClustersConfig,
    Workload,
)
from sim.models.hardware import speed as roofline_speed
from sim.models.llm_parallel import layout_for
from sim.models.llm_replica import replica_model
from sim.models.pricing import DEFAULT_CURRENCY, Currency
from sim.models.scaling import default_node, interconnect

SCHEMA_VERSION: Final = 1


class Scenario(ConfigModel):
    """A complete, validated study input. Times inside the engine are seconds since `start`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=0)
    start: datetime
    duration_h: float = Field(gt=0)
    years: Literal["align", "wrap"] | None = None
    """How a run that needs a catalog zone-year the catalog lacks reads another year
    (docs/grid-years.md): "align" moves a trace of another year by whole days (keeping
    weekday and hour) and continues into its next year, "wrap" also stays within that year;
    None: no substitution, such a run is an error. Recorded in meta.json."""
    sites: list[Site] = Field(min_length=1)
    workload: Workload = Workload()
    """The training jobs; without `[workload]` there are none (a serving-only scenario,
    which must then have `[[services]]`)."""
    forecast: ForecastConfig = ForecastConfig()
    policy: PolicyConfig = PolicyConfig()
    demand_response: list[DemandResponseEvent] = []
    dr_programs: dict[str, DrProgram] = {}
    """Demand-response programs by name, referred to by `demand_response[*].program`."""
    gpu_models: dict[str, dict[str, Any]] = {}
    """GPU models this scenario adds to the catalog, fields as in `sim/data/gpus.toml`."""
    embodied: Literal["allocated", "installed"] = "allocated"
    """Charge GPUs' embodied carbon per allocated GPU-hour (to the jobs that use them) or per
    installed GPU-hour (the whole fleet over the horizon, used or not)."""
    wan: WanConfig | None = None
    """The wide-area network between the sites (docs/wan.md); None: no WAN model."""
    services: list[ServiceConfig] = []
    """LLM inference services (docs/serving.md)."""
    serving: ServingConfig = ServingConfig()
    failures: FailuresConfig | None = None
    """GPU and node failures of running jobs; None: none."""
    spot: SpotConfig | None = None
    """Evictions of the sites' spot GPUs (`GpuPool.spot`); None: spot GPUs are never
    evicted."""
    throughput: ThroughputConfig | None = None
    """Measured speeds per (profile, GPU model) overriding the roofline; None: the roofline."""
    prediction_error: PredictionErrorConfig | None = None
    """The error of the runtimes policies are told; None: exact."""
    scaling: ScalingConfig | None = None
    """Multi-GPU scaling of training jobs; None: linear in the GPU count."""
    rebound: ReboundConfig | None = None
    """Users who resubmit when their jobs are slowed; None: they do not."""
    sharing: SharingConfig = SharingConfig()
    """GPU sharing of fractional jobs: the interference of co-located jobs."""
    virtual_clusters: VirtualClustersConfig | None = None
    """GPU quotas of virtual clusters (job column `vc`); None: no quotas."""
    currency: Currency = DEFAULT_CURRENCY
    """The currency of every price and cost of the run (docs/prices.md): prices from the
    default table are converted at its fixed exchange rate, recorded in meta.json."""
    prices: PriceConfig = PriceConfig()
    """GPU-hour prices: the kind charged (on-demand, reserved, spot) and overrides."""
    engine: EngineConfig = EngineConfig()
    """Which engine runs it: "auto" (default), "event" or "batch"."""
    functions: FunctionsConfig | None = None
    """Serverless functions with keep-alive on one site (docs/functions.md); None: none."""

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError(f"must carry a UTC offset, e.g. 2020-06-01T00:00:00Z, got {v}")
        return v

    @model_validator(mode="after")
    def _known_dr_programs(self) -> Scenario:
        for i, ev in enumerate(self.demand_response):
            if ev.program is not None and ev.program not in self.dr_programs:
                raise ValueError(
                    f"demand_response[{i}].program: unknown program {ev.program!r} "
                    f"(dr_programs: {sorted(self.dr_programs)})"
                )
        return self

    @model_validator(mode="after")
    def _hardware_bought(self) -> Scenario:
        """No pool runs before its `purchase_year` (the hardware did not exist yet)."""
        for i, site in enumerate(self.sites):
            for k, pool in enumerate(site.gpus):
                if pool.purchase_year is not None and pool.purchase_year > self.start.year:
                    raise ValueError(
                        f"sites[{i}].gpus[{k}].purchase_year: site {site.name!r}, pool "
                        f"{pool.model}: bought in {pool.purchase_year}, after the scenario "
                        f"start {self.start.isoformat()} (the hardware did not exist yet)"
                    )
        return self

    @model_validator(mode="after")
    def _spot_capacity(self) -> Scenario:
        if self.spot is not None and not any(p.spot for s in self.sites for p in s.gpus):
            raise ValueError("spot: no site has spot GPUs (give sites.gpus a `spot` count)")
        return self

    @model_validator(mode="after")
    def _service_rows(self) -> Scenario:
        """services.parquet (a row per service and `[serving] step_s`) fits in memory."""
        steps = math.ceil(self.horizon_s / self.serving.step_s)
        if steps * len(self.services) > MAX_SERVICE_ROWS:
            shortest_s = self.horizon_s * len(self.services) / MAX_SERVICE_ROWS
            raise ValueError(
                f"serving.step_s: {self.serving.step_s:g} s gives {steps:.3g} steps over "
                f"{self.duration_h:g} h for each of {len(self.services)} services, more than "
                f"the {MAX_SERVICE_ROWS:,} rows of services.parquet a run holds (about 4 GB); "
                f"give step_s >= {shortest_s:.3g}"
            )
        return self

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        if self.rebound is not None and self.prediction_error is not None:
            raise ValueError(
                "rebound and prediction_error cannot be combined yet: prediction errors are "
                "drawn per job index, which the follow-up jobs would move"
            )
        names = [s.name for s in self.sites]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"site names must be unique, repeated: {dupes}")
        if not self.workload.has_jobs and not self.services and self.functions is None:
            raise ValueError(
                "workload: give [workload.synthetic] or workload.file, or [[services]] for a "
                "serving-only scenario, or [functions] (a scenario with none has nothing to run)"
            )
        if self.functions is not None and self.functions.site not in names:
            raise ValueError(
                f"functions.site: unknown site {self.functions.site!r} (sites: {names})"
            )
        largest = max(s.max_pool_gpus for s in self.sites)
        syn = self.workload.synthetic
        if syn is not None and self.workload.oversized == "error":
            too_big = [n for n, p in syn.gpus.items() if p > 0 and n > largest]
            if too_big:
                raise ValueError(
                    f"workload.synthetic.gpus: jobs of {max(too_big)} GPUs fit on no site "
                    f"(largest GPU pool has {largest})"
                )
            origins = syn.origin_sites or {}
            for s, w in origins.items():
                if s not in names:
                    raise ValueError(f"workload.synthetic.origin_sites: unknown site {s!r}")
                if not (math.isfinite(w) and w >= 0):
                    raise ValueError(f"workload.synthetic.origin_sites.{s} must be >= 0, got {w}")
            if origins and sum(origins.values()) <= 0:
                raise ValueError("workload.synthetic.origin_sites: weights must not all be 0")
        if syn is not None:
            expected = syn.mean_arrival_rate_per_h() * self.duration_h
            if min(expected, syn.max_jobs or math.inf) > MAX_JOBS:
                raise ValueError(
                    f"workload.synthetic: about {expected:.3g} jobs over {self.duration_h:g} h; "
                    f"a run holds at most {MAX_JOBS:,} jobs (lower the rate or set max_jobs)"
                )
        for origin, allowed in (self.workload.residency or {}).items():
            key = f"workload.residency.{origin}"
            if origin not in names:
                raise ValueError(f"{key}: unknown site {origin!r} (sites: {names})")
            unknown = [s for s in allowed if s not in names]
            if unknown or not allowed:
                raise ValueError(
                    f"{key} must list sites of the scenario ({', '.join(names)}), got {allowed}"
                )
        for i, ev in enumerate(self.demand_response):
            if ev.site not in names:
                raise ValueError(f"demand_response[{i}].site: unknown site {ev.site!r}")
            if ev.generator is not None:
                continue
            start, end = ev.window()
            if start < self.start or end > self.end:
                raise ValueError(
                    f"demand_response[{i}]: event {start.isoformat()} .. {end.isoformat()} "
                    f"is outside the scenario {self.start.isoformat()} .. {self.end.isoformat()}; "
                    f"lengthen duration_h, or drop the events with --set demand_response=[]"
                )
        self._check_services(names)
        return self

    def _check_services(self, names: list[str]) -> None:
        """Service names unique; their sites exist and have pools of their GPU; the weights
        fit a replica; the starting replicas fit the pools (with every other service's)."""

        seen = [s.name for s in self.services]
        dupes = sorted({n for n in seen if seen.count(n) > 1})
        if dupes:
            raise ValueError(f"services: names must be unique, repeated: {dupes}")
        taken: dict[tuple[str, str], int] = {}
        pools = {(s.name, p.model): p.count for s in self.sites for p in s.gpus}
        sliced = {(s.name, p.model): p.mig for s in self.sites for p in s.gpus if p.mig}
        node_gpus = {s.name: s.gpus_per_node for s in self.sites}
        on_servers = {s.name for s in self.sites if any(p.servers for p in s.gpus)}
        for i, svc in enumerate(self.services):
            key = f"services[{i}]"
            for site in svc.sites:
                if site not in names:
                    raise ValueError(f"{key}.sites: unknown site {site!r} (sites: {names})")
                if site in on_servers:
                    raise ValueError(
                        f"{key}.sites: site {site} has a pool of servers; services on servers "
                        "are not supported yet"
                    )
                if (site, svc.gpu) not in pools:
                    raise ValueError(f"{key}.gpu: site {site} has no {svc.gpu!r} GPUs")
                if ((site, svc.gpu) in sliced) != (svc.mig_profile is not None):
                    kind = "whole" if svc.mig_profile is None else "MIG-partitioned"
                    raise ValueError(
                        f"{key}.gpu: the service's own model needs {kind} {svc.gpu} GPUs at "
                        f"each of its sites; site {site}'s are not"
                    )
            specs = {v.name: v for v in svc.variant_specs()}
            for k, variant in enumerate(specs.values()):
                where = key if k == 0 else f"{key}.variants[{k - 1}]"
                if svc.disaggregation is not None:
                    where = f"{key}.disaggregation.{variant.name}"
                _check_variant(where, variant, svc.sites, pools, sliced, node_gpus)
            if svc.disaggregation is not None:
                self._check_disaggregated(key, svc)
            if svc.mig_profile is not None:
                continue  # its starting replicas take slices: checked as the run starts
            for where, site, name, k in svc.initial_deployments():
                v = specs[name] if name is not None else next(iter(specs.values()))
                need = k * v.gpus_per_replica
                taken[site, v.gpu] = taken.get((site, v.gpu), 0) + need
                if taken[site, v.gpu] > pools.get((site, v.gpu), 0):
                    raise ValueError(
                        f"{key}.{where}: {k} replicas of {v.gpus_per_replica} GPUs "
                        f"do not fit {site}'s {pools.get((site, v.gpu), 0)} {v.gpu} GPUs "
                        f"(with the services before it: {taken[site, v.gpu]} needed)"
                    )

    def _check_disaggregated(self, key: str, svc: ServiceConfig) -> None:
        """A disaggregated service runs at the iteration level, over a link of the catalog."""
        d = svc.disaggregation
        assert d is not None
        if self.serving.fidelity != "iteration":
            raise ValueError(
                f'{key}.disaggregation: needs [serving] fidelity = "iteration", got '
                f"{self.serving.fidelity!r}"
            )
        try:
            if d.link is None:
                default_node(svc.variant_specs()[0].gpu)
            else:
                interconnect(d.link)
        except ValueError as e:
            raise ValueError(f"{key}.disaggregation.link: {e}") from None

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.duration_h)

    @property
    def horizon_s(self) -> float:
        return self.duration_h * 3600.0

    def site_names(self) -> list[str]:
        return [s.name for s in self.sites]

    def speed(self, gpu: str, profile: str) -> float:
        """Work one `gpu` does on a `profile` job at its maximum power limit, reference GPU-s
        per s: the `[throughput]` table's, else the roofline's (`sim.models.hardware.speed`)."""
        if self.throughput is None:
            return roofline_speed(gpu, profile)
        return self.throughput.speed(gpu, profile)

    def to_toml(self) -> str:
        """The scenario as TOML (paths absolute), loadable again with `load_scenario`."""
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))


def _check_variant(
    where: str,
    variant: Variant,
    sites: list[str],
    pools: dict[tuple[str, str], int],
    sliced: dict[tuple[str, str], tuple[str, ...]],
    node_gpus: dict[str, int],
) -> None:
    """ValueError naming `where` unless some site of the service has the variant's GPUs of
    its kind (a MIG variant: partitioned; else whole), a replica holds its weights, its
    GPU runs its precision and its parallel layout suits the model (on the first such
    site's nodes)."""
    profile = variant.mig_profile
    kind = "partitioned into MIG slices (gpus[].mig)" if profile else "as whole GPUs"
    fitting = [
        site
        for site in sites
        if (site, variant.gpu) in pools and ((site, variant.gpu) in sliced) == (profile is not None)
    ]
    if not fitting:
        raise ValueError(
            f"{where}.gpu: none of the service's sites {sites} has {variant.gpu!r} GPUs {kind}"
        )
    try:
        if profile is not None and variant.gpus_per_replica != 1:
            raise ValueError(
                f"a replica on a MIG slice takes one slice (gpus_per_replica = 1), got "
                f"{variant.gpus_per_replica}"
            )
        # the weights and one short sequence must fit (the run uses the requests' lengths)
        replica_model(
            variant.model,
            variant.gpu,
            variant.gpus_per_replica,
            variant.max_batch,
            1.0,
            1.0,
            variant.cap_w,
            profile,
            variant.precision,
            layout_for(variant.gpu, variant.tp, variant.ep, node_gpus[fitting[0]]),
        )
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
