"""The query service: the engine's answers to what `SystemState` and `JobView` ask.

Policies read the run only through `sim.api.SystemState` and `sim.api.JobView`; both
get their answers here, through the interface `sim.api.StateQueries`. Every answer is
read live from the components that own the state; nothing is copied per decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.api import DemandResponseView, JobView, OnsiteReading, ParallelScaling, ReplicaPoint
from sim.config.services import Directive, ServiceConfig, Variant
from sim.engine.component import Component
from sim.engine.jobs import RUNNING, STATE_NAMES, SUSPENDED
from sim.engine.ledger import Pool, Site
from sim.engine.prediction import Prediction, build_prediction
from sim.engine.run_charges import WS_PER_KWH
from sim.engine.run_placement import node_of
from sim.engine.site_view import SiteView
from sim.errors import PolicyError
from sim.market.billing import SiteTariff
from sim.models import scaling
from sim.models.hardware import GPU_CATALOG
from sim.serving.service_sim import LiveStats
from sim.workload import JobTable
from sim.workload.table import mask_sites
from sim.workload.time_to_accuracy import training_options

if TYPE_CHECKING:
    from sim.engine.checkpoints import Checkpoints
    from sim.engine.component import Core
    from sim.engine.demand_response import DemandResponseMeter
    from sim.engine.fleet import Fleet
    from sim.engine.jobs import JobBook
    from sim.engine.onsite import OnsiteEnergy
    from sim.engine.runs import Runs
    from sim.engine.services import Services
    from sim.grid import CarbonSignal, Forecaster

__all__ = ["Queries"]


class Queries(Component):
    """Answers for the policy's views (an implementation of `sim.api.StateQueries`)."""

    name = "queries"
    uses = ("book", "runs", "checkpoints", "services", "dr", "fleet", "onsite")
    stream = "prediction"

    __slots__ = (
        "_core",
        "_book",
        "_runs",
        "_checkpoints",
        "_services",
        "_dr",
        "_fleet",
        "_onsite",
        "forecaster",
        "jobs",
        "site_names",
        "pending",
        "running",
        "suspended",
        "_names_by_mask",
        "_views",
        "_allowed",
        "service_names",
        "prediction",
    )

    def __init__(
        self,
        core: Core,
        *,
        book: JobBook,
        runs: Runs,
        checkpoints: Checkpoints,
        services: Services,
        dr: DemandResponseMeter,
        fleet: Fleet,
        onsite: OnsiteEnergy,
        forecaster: Forecaster,
        rng: np.random.Generator,
    ):
        self._core = core
        self._book = book
        self._runs = runs
        self._checkpoints = checkpoints
        self._services = services
        self._dr = dr
        self._fleet = fleet
        self._onsite = onsite
        self.forecaster = forecaster
        """The carbon forecasts policies are told."""
        self.jobs: JobTable = core.jobs
        self.site_names: tuple[str, ...] = tuple(self._fleet.names)
        self.pending = self._book.pending
        self.running = self._book.running
        self.suspended = self._book.suspended
        self._allowed = self._book.allowed
        self._names_by_mask: dict[int, tuple[str, ...]] = {}
        self._views = [SiteView(site) for site in fleet.sites]
        """Each site's read-only view, as policies see it (`site`)."""
        self.service_names: tuple[str, ...] = self._services.names
        self.prediction: Prediction | None = build_prediction(core.scenario, len(core.jobs), rng)
        """The error of the runtimes policies are told (`sim.engine.prediction`, drawn from
        the `prediction` stream); None: exact."""

    @property
    def now_s(self) -> float:
        return self._core.env.now

    @property
    def horizon_s(self) -> float:
        return self._core.horizon_s

    @property
    def pending_count(self) -> int:
        return self._book.pending_count

    def pending_since(self, mark: int) -> list[int]:
        return self._book.pending_since(mark)

    def site(self, name: str) -> SiteView:
        return self._views[self._fleet.site(name).index]

    def decision_signal(self, name: str) -> CarbonSignal:
        """The carbon signal site `name`'s decisions see (`Fleet.decision_signal`)."""
        return self._fleet.decision_signal(self._fleet.site(name))

    def carbon_intensity(self, site: str) -> float:
        """The intensity site `site`'s decisions see now, g/kWh."""
        return self.decision_signal(site).value_at(self._core.env.now)

    def site_it_w(self, name: str) -> float:
        """IT power of site `name` now, services' power above idle included, W."""
        site = self._fleet.site(name)
        return site.it_w + self._services.extra_w(site)

    def onsite(self, name: str) -> OnsiteReading | None:
        """Site `name`'s on-site energy now (`OnsiteReading`); None without any."""
        i = self._fleet.site(name, "onsite").index
        onsite = self._onsite
        assets = onsite.assets[i]
        if assets is None:
            return None
        now = float(self._core.env.now)
        site = self._fleet.sites[i]
        battery, state, c = assets.battery, onsite.battery_now(i), assets.connection
        return OnsiteReading(
            site=name,
            generation_kw=onsite.generation_kw(i, now),
            load_kw=self.site_it_w(name) * site.pue.value_at(now) / 1000.0,
            battery_kwh=None if state is None else state.stored_kwh,
            battery_soc=None if state is None else state.soc,
            battery_capacity_kwh=None if battery is None else battery.capacity_kwh,
            battery_soc_min=None if battery is None else battery.soc_min,
            battery_soc_max=None if battery is None else battery.soc_max,
            battery_power_kw=None if battery is None else battery.power_kw,
            battery_charge_efficiency=None if battery is None else battery.charge_efficiency,
            battery_discharge_efficiency=None if battery is None else battery.discharge_efficiency,
            battery_setpoint_kw=onsite.setpoint_kw(i),
            battery_import_cap_kw=onsite.import_cap_kw(i),
            month_peak_import_kw=onsite.month_peak_import_kw(i),
            import_limit_kw=c.import_limit_kw,
            export_limit_kw=c.export_limit_kw,
            over_limit=c.over_limit,
        )

    def onsite_forecast(self, name: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Site `name`'s forecast on-site generation (`OnsiteEnergy.generation_forecast`)."""
        i, _ = self._onsite.equipment(name, "onsite_forecast")
        return self._onsite.generation_forecast(i, horizon_s)

    # --- services ---------------------------------------------------------------------------

    def _service(self, name: str) -> int:
        return self._services.service(name, "service")

    def service_config(self, name: str) -> ServiceConfig:
        return self._services.configs[self._service(name)]

    def service_stats(self, name: str) -> LiveStats:
        return self._services.stats(self._service(name))

    def service_replicas(self, name: str, site: str, variant: str | None) -> tuple[int, int]:
        services = self._services
        level = services.level(self._service(name), site, "replicas", variant)
        return level.ready, level.loading

    def service_variants(self, name: str) -> tuple[Variant, ...]:
        return self._services.variants[self._service(name)]

    def service_deployments(self, name: str) -> tuple[tuple[str, str], ...]:
        return tuple(
            (lv.site.name, lv.spec.name) for lv in self._services.levels[self._service(name)]
        )

    def service_directive(self, name: str) -> str:
        services = self._services
        i = self._service(name)
        return services.directives[i][services.sources[i].level].name

    def service_directives(self, name: str) -> tuple[Directive, ...]:
        return self._services.directives[self._service(name)]

    def service_mean_output_tokens(self, name: str) -> float:
        return self._services.mean_output(self._service(name))

    def service_replica_point(
        self, name: str, site: str, variant: str | None, directive: str | None, cap_w: float | None
    ) -> ReplicaPoint:
        services = self._services
        i = self._service(name)
        level = services.level(i, site, "replica_point", variant)
        return services.replica_point(i, level, directive, cap_w)

    def service_rtt_s(self, name: str, site: str) -> float:
        services = self._services
        i = self._service(name)
        return services.rtt_s(i, services.level(i, site, "rtt_s"))

    def price_per_gpu_h(self, gpu_model: str) -> float:
        if gpu_model not in GPU_CATALOG:
            raise PolicyError(f"price_per_gpu_h: unknown GPU model {gpu_model!r}")
        return self._core.prices.per_gpu_h(gpu_model)

    def service_cap_w(self, name: str) -> float | None:
        return self._services.cap_w[self._service(name)]

    def service_capacity_rps(self, name: str, site: str, variant: str | None) -> float:
        services = self._services
        i = self._service(name)
        return services.capacity_rps(i, services.level(i, site, "capacity_rps", variant))

    def service_rate_forecast(self, name: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        return self._services.rate_forecast(self._service(name), horizon_s)

    # --- jobs -------------------------------------------------------------------------------

    def state_name(self, j: int) -> str:
        return STATE_NAMES[self._book.state[j]]

    def remaining_gpu_s(self, j: int) -> float:
        return self._runs.remaining_now_gpu_s(j)

    def held(self, j: int) -> bool:
        return j in self._runs.holding

    def allowed_sites(self, j: int) -> tuple[str, ...]:
        mask = self._allowed[j]
        names = self._names_by_mask.get(mask)
        if names is None:
            names = self._names_by_mask[mask] = mask_sites(mask, self.site_names)
        return names

    def running_site(self, j: int) -> str | None:
        if self._book.state[j] != RUNNING:
            return None
        return self._runs.live[j].site.name

    def running_model(self, j: int) -> str | None:
        return self._runs.model[j] if self._book.state[j] == RUNNING else None

    def job_cap_w(self, j: int) -> float | None:
        return self._runs.cap_w[j]

    def job_draw_w(self, j: int) -> float:
        return self._runs.live[j].draw_w if self._book.state[j] == RUNNING else 0.0

    # --- what-ifs ----------------------------------------------------------------------------

    def transfer_cost(self, src: str, dst: str, gb: float) -> tuple[float, float, float]:
        a, b = self._fleet.site(src), self._fleet.site(dst)
        wan = self._checkpoints.wan
        if wan is None or a is b or gb <= 0.0:
            return 0.0, 0.0, 0.0
        return wan.totals(a.name, b.name, gb, self._core.env.now)

    def migration_cost(
        self, j: int, site_name: str, model: str | None
    ) -> tuple[float, float, float, float]:
        """(stall s, facility kWh, kg CO2, lost reference GPU-s) of migrating running job `j`
        to `site_name`'s `model` pool (None: its first) now, as `Migrate` would: the
        checkpoint write on the GPUs it leaves (none with periodic checkpoints: it falls back
        to its last one, losing the work since; none for a held job, which waits for the
        rest of a write under way), the WAN transfer from where its checkpoint (or, held
        before they arrived, its data) lies, and the read, during which it holds the new
        GPUs at idle power, for at least the boot of powered-off nodes they need. GPU and
        host energy at each site's PUE and carbon intensity now; the transfer's as
        `transfer_cost`."""
        core = self._core
        runs, checkpoints = self._runs, self._checkpoints
        run = runs.live[j]
        here, pool = run.site, run.pool
        dest = self._fleet.site(site_name)
        dest_pool = self._pool(j, dest, model, "migration_cost")
        now = core.env.now
        src, gb, checkpoint = checkpoints.departure(j)
        lost_s = 0.0
        write_s = 0.0
        if checkpoints.timing.interval_s is not None:
            lost_s = checkpoints.work_since_checkpoint(j, now)
        elif j not in runs.holding:
            write_s = checkpoints.timing.write_s(j, here)
        move_s, move_kwh, move_kg = self.transfer_cost(src.name, dest.name, gb)
        read_s = gb / dest.checkpoint_read_gbps if checkpoint else 0.0
        gpus = runs.gpu_share[j]
        load_s = write_s + checkpoints.write_left_s(j) + move_s + read_s
        hold_s = max(load_s, runs.placement.wake_s(j, dest, dest_pool))
        kwh = kg = 0.0
        for site, p, dt in ((here, pool, write_s), (dest, dest_pool, hold_s)):
            site_kwh = gpus * (p.idle_w + p.host_w) * dt * site.pue.value_at(now) / WS_PER_KWH
            kwh += site_kwh
            kg += site_kwh * self._fleet.decision_signal(site).value_at(now) / 1000.0
        return hold_s, kwh + move_kwh, kg + move_kg, lost_s

    def power_delta_w(
        self,
        job: JobView,
        cap_w: float | None = None,
        site: str | None = None,
        gpu_model: str | None = None,
    ) -> float:
        j, cap, site_name, model = job.index, cap_w, site, gpu_model
        runs = self._runs
        placement = runs.placement
        held = runs.gpu_share[j]  # the GPUs it is charged for: a fractional job's share
        if self._book.state[j] == RUNNING:
            run = runs.live[j]
            if j in runs.holding:
                return 0.0  # takes its cap when its nodes are up
            _, draw_w = placement.speed(j, run.pool, placement.effective_cap(run.site, cap))
            return held * (draw_w - run.draw_w)
        if site_name is None:
            raise PolicyError(
                "power_delta_w: give the site a job that is not running would start on"
            )
        at = self._fleet.site(site_name)
        pool = self._pool(j, at, model, "power_delta_w")
        _, draw_w = placement.speed(j, pool, placement.effective_cap(at, cap))
        new_gpus = placement.new_gpus(j, pool)
        if self._fleet.needs_wake(at, pool, new_gpus):
            return pool.nodes_to_wake(new_gpus) * pool.node_w  # held at idle while booting
        return placement.share_on(j, pool) * (draw_w - pool.idle_w)

    def forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        core = self._core
        return self.forecaster.forecast(self.decision_signal(site), core.env.now, horizon_s)

    def forecasts(
        self, sites: Sequence[str], horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        now, forecaster = self._core.env.now, self.forecaster
        parts = [forecaster.forecast(self.decision_signal(s), now, horizon_s) for s in sites]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([t.size for t, _ in parts], out=offsets[1:])
        if not parts:
            return np.empty(0), np.empty(0), offsets
        return (
            np.concatenate([t for t, _ in parts]),
            np.concatenate([v for _, v in parts]),
            offsets,
        )

    def carbon_intensities(self, sites: Sequence[str]) -> np.ndarray:
        now = self._core.env.now
        return np.array([self.decision_signal(s).value_at(now) for s in sites], dtype=float)

    def forecast_version(self, site: str) -> int:
        return self.forecaster.version(self.decision_signal(site), self._core.env.now)

    def _tariff(self, site: str, asker: str) -> SiteTariff:
        tariff = self._fleet.tariffs[self._fleet.site(site).index]
        if tariff is None:
            raise PolicyError(f"{asker}: site {site!r} has no [sites.tariff]")
        return tariff

    def electricity_price(self, site: str) -> float:
        return self._tariff(site, "electricity_price").energy_price.value_at(self._core.env.now)

    def price_forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        if horizon_s < 0:
            raise PolicyError(f"price_forecast: horizon must be >= 0 s, got {horizon_s}")
        curve = self._tariff(site, "price_forecast").energy_price
        return curve.window(self._core.env.now, horizon_s)

    def announced_events(self, site: str | None) -> list[DemandResponseView]:
        return [v for v in self._dr.announced if site is None or v.site == site]

    def estimate(
        self, job: JobView, site: str, cap_w: float | None = None, gpu_model: str | None = None
    ) -> tuple[float, float]:
        core, j = self._core, job.index
        at = self._fleet.site(site)
        pool = self._pool(j, at, gpu_model, "estimate")
        hold_s, runtime_s, draw_w = self._hold_run_draw(j, at, pool, cap_w)
        now = core.env.now  # the energy of the told runtime, at the true power
        energy_kwh = (
            self._runs.placement.share_on(j, pool)
            * (
                (pool.idle_w + pool.host_w) * at.pue.integral(now, now + hold_s)
                + (draw_w + pool.host_w) * at.pue.integral(now + hold_s, now + hold_s + runtime_s)
            )
            / WS_PER_KWH
        )
        return hold_s + runtime_s, energy_kwh

    def runtime_s(
        self, job: JobView, site: str, cap_w: float | None = None, gpu_model: str | None = None
    ) -> float:
        j, at = job.index, self._fleet.site(site)
        hold_s, runtime_s, _ = self._hold_run_draw(
            j, at, self._pool(j, at, gpu_model, "runtime_s"), cap_w
        )
        return hold_s + runtime_s

    def reference_speed(self, model: str, profile: str) -> float:
        return self._core.scenario.speed(model, profile)

    def _pool(self, j: int, site: Site, model: str | None, asker: str) -> Pool:
        """`site`'s pool of `model` for `j`; None: its first pool, or for a MIG job the
        first partitioned pool whose layout has its profile (PolicyError if none)."""
        profile = self._runs.mig_profile[j]
        if model is None and profile:
            for pool in site.pools:
                if pool.mig is not None and pool.mig.has(profile):
                    return pool
            raise PolicyError(f"{asker}: site {site.name} has no {profile} MIG slices")
        return self._fleet.pool(site, model, asker)

    def training_options(self, job: JobView, truth: bool = False) -> dict[int, float]:
        j = job.index
        target = float(self.jobs.target_metric[j])
        if math.isnan(target):
            return {}
        u = float(self.jobs.training_u[j]) if truth else None
        return training_options(self._runs.profile[j], target, u)

    def parallel_scaling(
        self, site: str, model: str, profile: str, gpus: int, scheme: str = "data"
    ) -> ParallelScaling:
        config = self._core.scenario.scaling
        if config is None or gpus <= 1:
            return ParallelScaling(1.0, 0.0, 1.0)
        pool = self._fleet.pool(self._fleet.site(site), model, "parallel_scaling")
        try:
            point = scaling.scaling(profile, model, gpus, scheme, node_of(pool, config))
        except ValueError as e:
            raise PolicyError(f"parallel_scaling: {e}") from None
        return ParallelScaling(
            point.efficiency, point.comm_time_frac, scaling.comm_power_frac(model, profile)
        )

    def vc_room(self, j: int) -> float:
        return self._book.vc_room(j)

    def job_gpus(self, j: int) -> int:
        return self._runs.gpus[j]

    def job_profile(self, j: int) -> str:
        return self._runs.profile[j]

    def job_work_gpu_h(self, j: int) -> float:
        return self._runs.work_gpu_h[j]

    def runtime_version(self, site: str) -> int:
        return self._fleet.site(site).runtime_version

    def _hold_run_draw(
        self, j: int, site: Site, pool: Pool, cap: float | None
    ) -> tuple[float, float, float]:
        """(hold s, computing s, active W per GPU) of `j` started or resumed on `pool` now:
        the hold is a suspended job's checkpoint load or the boot of powered-off nodes,
        whichever is longer."""
        runs = self._runs
        rate, draw_w = runs.placement.rate_and_draw(j, site, pool, cap)
        hold_s = self._checkpoints.load_s(j, site) if self._book.state[j] == SUSPENDED else 0.0
        hold_s = max(hold_s, runs.placement.wake_s(j, site, pool))
        return hold_s, self._told_s(j, pool.model, runs.remaining_now_gpu_s(j) / rate), draw_w

    def _told_s(self, j: int, model: str, runtime_s: float) -> float:
        """The runtime policies are told for `j`'s true `runtime_s` on `model`, s: times
        its prediction error factor (`sim.engine.prediction`)."""
        if self.prediction is None:
            return runtime_s
        return runtime_s * self.prediction.factor(j, model)

    def allowed_gpu_models(self, j: int) -> tuple[str, ...]:
        """The GPU models job `j` may run on; () for any (`JobView.allowed_gpu_models`)."""
        return self._core.jobs.gpu_models_of(j)

    def expected_ends(self, site: str, gpu_model: str) -> tuple[list[float], list[int]]:
        core = self._core
        runs = self._runs
        ledger = self._fleet.site(site)
        pool = ledger.pool(gpu_model)
        if pool is None:
            raise PolicyError(f"expected_ends: site {site} has no {gpu_model} GPUs")
        now = core.env.now
        ends, gpus = [], []
        for j in pool.jobs:
            if j in runs.holding:  # its rate once it computes; the hold left is not counted
                rate = runs.placement.rate_and_draw(j, ledger, pool, runs.cap_w[j])[0]
                start_s, runtime_s = now, runs.remaining_gpu_s[j] / rate
            else:  # when its completion is scheduled
                run = runs.live[j]
                start_s, runtime_s = run.seg_start_s, runs.remaining_gpu_s[j] / run.rate
            end = start_s + self._told_s(j, gpu_model, runtime_s)
            ends.append(end if self.prediction is None else max(now, end))
            gpus.append(runs.gpus[j])
        if len(pool.shared):
            self._free_shared_gpus_once(pool, ends, gpus)
        return ends, gpus

    @staticmethod
    def _free_shared_gpus_once(pool: Pool, ends: list[float], gpus: list[int]) -> None:
        """In `expected_ends`' lists (in `pool.jobs` order): a shared GPU is freed by the
        last of its running jobs to end (1 GPU), the others free none (0)."""
        index = {j: k for k, j in enumerate(pool.jobs)}
        for j, k in index.items():
            if j in pool.shared:
                mates = [index[m] for m in pool.shared.co_located(j) if m in index]
                last = max([k, *mates], key=lambda i: (ends[i], i))
                gpus[k] = 1 if last == k else 0
