"""Inference services: their replicas' GPUs, cold starts, caps and power, and their results.

A replica holds `gpus_per_replica` GPUs of its site's pool (a MIG variant's: one slice of
a partitioned pool, counted as its SM share of a GPU), in the site ledger at idle
power (so services and training jobs compete for the same GPUs, and the ledger's busy
GPUs count them); what a replica draws above idle is the service's *extra power*, kept
here in one level log per (service, site) and added to the sites' power table when the
results are built. The requests themselves are a fidelity's business
(`sim.serving.service_sim`: the request level or the fluid level), advanced lazily: only
when a policy reads or changes a service, when a site's power is asked for, and at the
horizon, so a service costs nothing between decisions.

- Cold start: a new replica takes its GPUs now and serves after the weights are read at
  the site's `checkpoint_read_gbps` (after booting powered-off nodes), its GPUs drawing
  the power of a batch of one (`ReplicaModel.load_w`) meanwhile.
- Scale-down: loading replicas go first (at once); serving ones stop admitting and free
  their GPUs when the fidelity says their last request has finished.
- Caps: a service's own cap, else its site's (`SetCap(site)`), rebuilds the replica model
  (`sim.models.llm_replica`) and applies from now.
- Variants (docs/inference-levers.md): each (site, variant) the site has GPUs for is a
  *deployment* with replicas of its own (`Scale(..., variant=)`); the fidelity sees the
  deployments as its sites. Requests a site receives are split over its deployments in
  proportion to their ready capacity (requests/s with the batch full). With one variant a
  deployment is a site, as before.
- Directives: `SetDirective` rescales the output tokens of the requests arriving from now
  (`sim.serving.directives.DirectedSource`) and rebuilds the replica models at the new mean
  output length. A served request's quality is its variant's minus its directive's penalty.

The replicas' lifecycle lives in `sim.engine.service_replicas`, the integrals of their
power in `sim.engine.service_power`, the results in `sim.engine.service_results`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim.api import ReplicaPoint
from sim.config.services import Directive, ServiceConfig, Variant
from sim.config.sites import Site as SiteConfig
from sim.engine.component import Component
from sim.engine.ledger import Site
from sim.engine.service_power import extra_facility_ws
from sim.engine.service_replicas import Deployment, Replicas, power_callback
from sim.engine.service_results import SERVICE_COLUMNS, write_service_results
from sim.errors import PolicyError, ScenarioError
from sim.models.kv_transfer import kv_link
from sim.models.llm_parallel import layout_for
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.models.scaling import default_node
from sim.results import ResultParts
from sim.serving.directives import DirectedSource
from sim.serving.service_sim import LiveStats, ServiceContext, ServiceSim
from sim.serving.sources import RequestSource

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.network import Wan

__all__ = ["Services", "SERVICE_COLUMNS"]

_EARTH_KM = 6371.0
FIBRE_KM_PER_S = 204_190.0
"""Signal speed in fibre (c / 1.4682), for the round trip of a scenario without `[wan]`."""


class Services(Component):
    """The scenario's inference services (none: every hook does nothing)."""

    name = "services"
    uses = ("fleet",)

    __slots__ = (
        "_core",
        "_fleet",
        "configs",
        "names",
        "index",
        "levels",
        "sims",
        "sources",
        "cap_w",
        "variants",
        "directives",
        "site_shares",
        "replicas",
    )

    def __init__(self, core: Core, *, fleet: Fleet, sources: list[RequestSource], wan: Wan | None):
        self._core = core
        self._fleet = fleet
        scenario = core.scenario
        self.configs: list[ServiceConfig] = list(scenario.services)
        self.names = tuple(c.name for c in self.configs)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.variants: list[tuple[Variant, ...]] = [c.variant_specs() for c in self.configs]
        self.directives: list[tuple[Directive, ...]] = [c.directive_specs() for c in self.configs]
        self.sources = [
            DirectedSource(s, [d.output_factor for d in directives])
            for s, directives in zip(sources, self.directives, strict=True)
        ]
        """Each service's requests, with its directive levels' log (`level`: in force)."""
        self.cap_w: list[float | None] = [None] * len(self.configs)
        """Each service's own GPU cap, W (None: its sites' caps)."""
        self.site_shares: list[np.ndarray | None] = [None] * len(self.configs)
        """Each service's routing weights over its sites (None: by ready capacity)."""
        self.replicas = Replicas(core, fleet, self.advance, self._replicas_changed)
        """The replicas' lifecycle: cold starts, drains, their GPUs in the site ledger."""
        fidelity = _fidelity(scenario.serving.fidelity) if self.configs else ServiceSim
        self.levels: list[list[Deployment]] = []
        self.sims: list[ServiceSim] = []
        for i, cfg in enumerate(self.configs):
            levels: list[Deployment] = []
            for site_k, name in enumerate(cfg.sites):
                site = self._fleet.by_name[name]
                for v, spec in enumerate(self.variants[i]):
                    pool = site.pool(spec.gpu)
                    if pool is None or (pool.mig is None) != (spec.mig_profile is None):
                        continue  # the variant cannot run here (checked: some site has it)
                    level = Deployment(
                        f"{cfg.name}/{spec.name}", site, pool, len(levels), site_k, v, spec
                    )
                    level.model = self._model(i, level)
                    levels.append(level)
            self.levels.append(levels)
            origin = scenario.sites[self._fleet.by_name[cfg.origin].index]
            rtt_s = np.array(
                [_round_trip_s(wan, origin, scenario.sites[lv.site.index]) for lv in levels]
            )
            self.sims.append(
                (fidelity if cfg.disaggregation is None else _disaggregated())(
                    ServiceContext(
                        cfg.name,
                        self.sources[i],
                        rtt_s,
                        cfg.slo,
                        cfg.timeout_s,
                        scenario.serving.step_s,
                        core.horizon_s,
                        power_callback(levels),
                    ),
                    **_fidelity_options(scenario.serving.fidelity, levels),
                    **_disaggregation_options(cfg, levels),
                )
            )

    def _model(self, i: int, level: Deployment) -> ReplicaModel:
        """The replica model of `level`, under the cap in force (`_cap_in_force_w`)."""
        return self._model_for_cap(
            i, level.spec, self._cap_in_force_w(i, level), site=level.site.index
        )

    def _cap_in_force_w(self, i: int, level: Deployment) -> float | None:
        """The per-GPU cap on `level`'s GPUs, W: service `i`'s own (a policy's `SetCap`),
        else its variant's (a disaggregated pool's `cap_w`), else the site's."""
        if self.cap_w[i] is not None:
            return self.cap_w[i]
        return level.spec.cap_w if level.spec.cap_w is not None else level.site.cap_w

    def _model_for_cap(
        self,
        i: int,
        spec: Variant,
        cap_w: float | None,
        mean_output: float | None = None,
        site: int | None = None,
    ) -> ReplicaModel:
        """Service `i`'s replica model of variant `spec` under a per-GPU cap `cap_w` (W;
        None: uncapped), at its request source's mean input tokens and `mean_output` tokens
        (None: the mean under its directive); with an output law, that law scaled to this
        mean (its in-flight context share); on the nodes of site `site` (an index of the
        scenario's sites; None: the GPU model's default node). ValueError for a cap out of
        range."""
        tokens = self.sources[i].tokens
        mean = self.mean_output(i) if mean_output is None else mean_output
        law = tokens.output_law
        node_gpus = None if site is None else self._core.scenario.sites[site].gpus_per_node
        return replica_model(
            spec.model,
            spec.gpu,
            spec.gpus_per_replica,
            spec.max_batch,
            tokens.mean_input,
            mean if law is None else law.scaled(mean / law.mean),
            cap_w,
            spec.mig_profile,
            spec.precision,
            layout_for(spec.gpu, spec.tp, spec.ep, node_gpus),
            self.configs[i].prefix_cache_hit_rate,
        )

    def mean_output(self, i: int) -> float:
        """Service `i`'s mean output tokens per request under its directive now."""
        factor = self.directives[i][self.sources[i].level].output_factor
        return self.sources[i].tokens.mean_output * factor

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """The starting replicas serve from time 0 (deployed before the run); the policy
        decides at time 0, where it may scale and route them."""
        if self.configs:
            self._core.request_decision()
        for i, cfg in enumerate(self.configs):
            for key, site_name, variant, n in cfg.initial_deployments():
                level = self.level(i, site_name, "replicas", variant)
                why = self.replicas.room(level, n)
                if why is not None:
                    raise ScenarioError(f"services[{i}].{key}: {why}")
                if n:
                    self.replicas.take_gpus(level, n)
                    level.ready = n
                    self.sims[i].configure(0.0, level.k, n, level.model)
                level.record(0.0)
            for level in self.levels[i]:
                if not level.time_s:
                    level.record(0.0)
            self._replicas_changed(i)

    def advance(self, i: int) -> ServiceSim:
        """Service `i`'s fidelity, its requests served up to now."""
        sim = self.sims[i]
        sim.advance_to(self._core.env.now)
        return sim

    def close(self, now_s: float) -> None:
        for sim in self.sims:
            sim.advance_to(now_s)
            sim.close(now_s)

    # --- actions (checked by the core's `apply` first) -------------------------------------

    def service(self, name: str, asker: object) -> int:
        """The index of service `name`; PolicyError naming `asker` if there is none."""
        i = self.index.get(name)
        if i is None:
            raise PolicyError(f"{asker}: unknown service {name!r} (services: {self.names})")
        return i

    def level(
        self, i: int, site_name: str, asker: object, variant: str | None = None
    ) -> Deployment:
        """Service `i`'s deployment of `variant` (None: its own model) at `site_name`;
        PolicyError naming `asker` if the service may not run there or has no such
        variant, or the site has none of the variant's GPUs."""
        cfg = self.configs[i]
        if site_name not in cfg.sites:
            raise PolicyError(
                f"{asker}: service {cfg.name} may not run on {site_name!r} (its sites: "
                f"{', '.join(cfg.sites)})"
            )
        names = [v.name for v in self.variants[i]]
        v = 0 if variant is None else names.index(variant) if variant in names else -1
        if v < 0:
            raise PolicyError(f"{asker}: service {cfg.name} has no variant {variant!r} ({names})")
        site_k = cfg.sites.index(site_name)
        for level in self.levels[i]:
            if level.site_k == site_k and level.variant == v:
                return level
        spec = self.variants[i][v]
        kind = "whole" if spec.mig_profile is None else "MIG-partitioned"
        raise PolicyError(
            f"{asker}: variant {names[v]} of service {cfg.name} needs {kind} {spec.gpu} GPUs, "
            f"{site_name} has none"
        )

    def scale(self, i: int, level: Deployment, replicas: int, asker: object) -> None:
        """Run `replicas` replicas of service `i` at `level`'s site from now
        (`Replicas.scale`)."""
        self.replicas.scale(i, level, replicas, asker)

    def route(self, i: int, shares: dict[str, float] | None, asker: object) -> None:
        """Send service `i`'s requests to its sites in `shares` from now (None: by replicas)."""
        cfg = self.configs[i]
        weights = None
        if shares is not None:
            weights = np.zeros(len(cfg.sites))
            for name, w in shares.items():
                if name not in cfg.sites:
                    self.level(i, name, asker)  # raises naming the service's sites
                if not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
                    raise PolicyError(f"{asker}: share of {name} must be a number >= 0, got {w!r}")
                weights[cfg.sites.index(name)] = w
            if weights.sum() <= 0:
                raise PolicyError(f"{asker}: the shares must not all be 0")
            weights = weights / weights.sum()
        self.site_shares[i] = weights
        self._log_route(i, weights)
        if len(self.variants[i]) == 1:
            self.advance(i).set_shares(self._core.env.now, weights)
        else:
            self._replicas_changed(i)

    def _log_route(self, i: int, weights: np.ndarray | None) -> None:
        """Event rows of service `i`'s new routing: one per site with its share, or one
        without a site (share NaN) for routing by ready replicas."""
        now, name, events = self._core.env.now, self.names[i], self._core.events
        if weights is None:
            events.append(now, "route", detail=name)
            return
        for site_name, share in zip(self.configs[i].sites, weights, strict=True):
            events.append(
                now, "route", site=self._fleet.by_name[site_name].index, value=share, detail=name
            )

    def _replicas_changed(self, i: int) -> None:
        """Service `i`'s ready replicas or their models changed: with several variants, split
        each site's share of the requests over its deployments by their ready capacity (one
        variant: the fidelity's own rule, by ready replicas, applies)."""
        if len(self.variants[i]) == 1:
            return
        levels = self.levels[i]
        capacity = np.array([lv.ready * self.capacity_rps(i, lv) for lv in levels])
        site_of = np.array([lv.site_k for lv in levels])
        shares = self.site_shares[i]
        if shares is None:
            weights = capacity
        else:
            per_site = np.bincount(site_of, weights=capacity, minlength=len(shares))
            count = np.bincount(site_of, minlength=len(shares))
            total = per_site[site_of]
            weights = shares[site_of] * np.where(
                total > 0, capacity / np.where(total > 0, total, 1.0), 1.0 / count[site_of]
            )
        if weights.sum() <= 0:
            self.sims[i].set_shares(self._core.env.now, None)
            return
        self.sims[i].set_shares(self._core.env.now, weights / weights.sum())

    def set_directive(self, i: int, d: int) -> None:
        """Service `i`'s answers at directive level `d` for the requests arriving from now."""
        sim = self.advance(i)
        now = self._core.env.now
        directive = self.directives[i][d]
        self._core.events.append(
            now,
            "directive",
            value=directive.output_factor,
            detail=f"{self.names[i]}/{directive.name}",
        )
        self.sources[i].set_level(now, d)
        sim.source_changed(now)
        self._recap(i)

    def set_cap(self, i: int, watts: float | None) -> None:
        """Cap service `i`'s GPUs at every site (None: its sites' caps)."""
        self.cap_w[i] = watts
        value = math.nan if watts is None else watts
        self._core.events.append(self._core.env.now, "setcap", value=value, detail=self.names[i])
        self._recap(i)

    def site_cap_changed(self, site: Site) -> None:
        """`site`'s cap changed: its services without a cap of their own follow it."""
        for i in range(len(self.configs)):
            if self.cap_w[i] is None and any(lv.site is site for lv in self.levels[i]):
                self._recap(i, site)

    def _recap(self, i: int, only: Site | None = None) -> None:
        sim = self.advance(i)
        now = self._core.env.now
        for level in self.levels[i]:
            if only is not None and level.site is not only:
                continue
            level.model = self._model(i, level)
            if level.ready:
                sim.configure(now, level.k, level.ready, level.model)
            level.record(now)
        self._replicas_changed(i)

    def check_cap(self, i: int, watts: float, asker: object) -> None:
        """PolicyError unless `watts` is a settable cap of service `i`'s GPUs."""
        cfg = self.configs[i]
        try:
            for spec in self.variants[i]:
                self._model_for_cap(i, spec, watts)
        except ValueError as e:
            raise PolicyError(f"{asker}: service {cfg.name}: {e}") from None

    # --- queries ------------------------------------------------------------------------------

    def at_site(self, site: Site) -> list[Deployment]:
        """The deployments at `site`, in the order the power table adds them
        (`with_extra_power`), their services' requests served up to now (`advance`), so
        their level logs are complete up to now."""
        here = []
        for i, levels in enumerate(self.levels):
            mine = [level for level in levels if level.site is site]
            if mine:
                self.advance(i)
                here += mine
        return here

    def extra_w(self, site: Site) -> float:
        """Power the services at `site` draw above the ledger's idle now, W."""
        return sum((level.extra_now_w() for level in self.at_site(site)), 0.0)

    def mean_extra_facility_kw(self, site: Site, t0_s: float, t1_s: float) -> float:
        """Mean facility power of the services' extra power at `site` over [t0, t1], kW."""
        t0_s = max(0.0, t0_s)
        if t1_s <= t0_s:
            return self.extra_w(site) * site.pue.value_at(t1_s) / 1000.0
        energy_ws = sum((extra_facility_ws(lv, t0_s, t1_s) for lv in self.at_site(site)), 0.0)
        return energy_ws / (t1_s - t0_s) / 1000.0

    def stats(self, i: int) -> LiveStats:
        """Service `i`'s live statistics now (`ServiceSim.live_at`: at the fluid level, its
        requests served up to the start of the step in progress, so that a read at a job's
        event does not cut the service's step)."""
        return self.sims[i].live_at(self._core.env.now)

    def capacity_rps(self, i: int, level: Deployment) -> float:
        """Requests/s one replica at `level` serves with its batch full."""
        m = level.model
        return m.slots / (self.mean_output(i) * float(m.iter_s[m.slots]))

    def replica_point(
        self, i: int, level: Deployment, directive: str | None, cap_w: float | None = None
    ) -> ReplicaPoint:
        """One replica of `level` under `directive` (None: in force) and a per-GPU cap
        `cap_w` W (None: in force): with its batch full, and its rate and power by batch."""
        names = [d.name for d in self.directives[i]]
        if directive is not None and directive not in names:
            raise PolicyError(
                f"replica_point: service {self.names[i]} has no directive {directive!r} ({names})"
            )
        in_force = self.sources[i].level
        d = in_force if directive is None else names.index(directive)
        model = level.model
        mean_out = self.sources[i].tokens.mean_output * self.directives[i][d].output_factor
        if d != in_force or cap_w is not None:
            if cap_w is None:
                cap_w = self._cap_in_force_w(i, level)
            try:
                model = self._model_for_cap(i, level.spec, cap_w, mean_out, level.site.index)
            except ValueError as e:
                raise PolicyError(f"replica_point: service {self.names[i]}: {e}") from None
        quality = level.spec.quality
        gpus = level.gpus_per_replica
        batch_rps = np.maximum.accumulate(np.arange(model.slots + 1) / (mean_out * model.iter_s))
        return ReplicaPoint(
            capacity_rps=float(batch_rps[-1]),
            busy_w=float(model.power_w[model.slots]),
            idle_w=float(model.power_w[0]),
            gpus=gpus,
            price_per_h=gpus * self._core.prices.per_gpu_h(level.pool.model),
            quality=None if quality is None else quality - self.directives[i][d].quality_penalty,
            mean_output_tokens=mean_out,
            batch_rps=tuple(batch_rps.tolist()),
            batch_power_w=tuple(model.power_w.tolist()),
        )

    def rtt_s(self, i: int, level: Deployment) -> float:
        """Round trip from service `i`'s origin to `level`'s site, s."""
        return float(self.sims[i].rtt_s[level.k])

    def rate_forecast(self, i: int, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(step starts s, mean arrivals per s in each) of service `i`'s requests over the
        next `horizon_s` (cut at the horizon), on the `[serving] step_s` grid from now."""
        now, end = self._core.env.now, min(self._core.horizon_s, self._core.env.now + horizon_s)
        step_s = self._core.scenario.serving.step_s
        starts = now + step_s * np.arange(math.ceil((end - now) / step_s - 1e-9))
        edges = np.append(starts, end)
        if len(edges) < 2:
            return np.array([now]), np.array([0.0])
        arrivals = self.sources[i].step_sums(edges)[0]
        return starts, arrivals / np.diff(edges)

    # --- results --------------------------------------------------------------------------------

    def write_results(self, out: ResultParts) -> None:
        """The services' power, tables and summary keys (`write_service_results`)."""
        write_service_results(out, self._core, self, self._fleet.sites)


def _fidelity(name: str) -> Callable[..., ServiceSim]:
    """What builds the fidelity called `name` ("request", "iteration" or "fluid": `fluid`,
    the request level for a bursty source)."""
    if name == "request":
        from sim.serving.request_level import RequestLevel

        return RequestLevel
    if name == "iteration":
        from sim.serving.iteration_level import IterationLevel

        return IterationLevel
    from sim.serving.fluid import fluid

    return fluid


def _fidelity_options(name: str, levels: list[Deployment]) -> dict:
    """What fidelity `name` takes beyond the contract's arguments: the iteration level, each
    deployment's scheduler resolved for its GPU and maximum batch."""
    if name != "iteration":
        return {}
    return {
        "schedulers": [
            lv.spec.scheduler.resolved(lv.spec.gpu, lv.spec.mig_profile, lv.spec.max_batch)
            for lv in levels
        ]
    }


def _disaggregated() -> type[ServiceSim]:
    """The iteration level with prefill and decode on separate replicas."""
    from sim.serving.iteration_level.disaggregated import DisaggregatedLevel

    return DisaggregatedLevel


def _disaggregation_options(cfg: ServiceConfig, levels: list[Deployment]) -> dict:
    """What a disaggregated service's fidelity takes beyond the iteration level's: each
    deployment's role ("prefill" or "decode": its variant's name) and site, and the link its KV
    caches cross (`sim.models.kv_transfer`), used by as many GPUs as the smaller pool's
    replica has."""
    d = cfg.disaggregation
    if d is None:
        return {}
    prefill, decode = cfg.variant_specs()
    link = d.link or default_node(prefill.gpu).inter_node
    return {
        "pools": [(lv.spec.name, lv.site_k) for lv in levels],
        "link": kv_link(link, min(prefill.gpus_per_replica, decode.gpus_per_replica)),
    }


def _round_trip_s(wan: Wan | None, a: SiteConfig, b: SiteConfig) -> float:
    """Round-trip propagation between two sites, s: the WAN's route when there is one,
    else the great-circle distance in fibre (a lower bound)."""
    if a.name == b.name:
        return 0.0
    if wan is not None:
        return 2.0 * wan.route(a.name, b.name).propagation_s
    lat1, lon1, lat2, lon2 = map(math.radians, (a.lat, a.lon, b.lat, b.lon))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    km = 2 * _EARTH_KM * math.asin(math.sqrt(h))
    return 2.0 * km / FIBRE_KM_PER_S
