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
  (`sim.serving.replica`) and applies from now.
- Variants (docs/inference-levers.md): each (site, variant) the site has GPUs for is a
  *deployment* with replicas of its own (`Scale(..., variant=)`); the fidelity sees the
  deployments as its sites. Requests a site receives are split over its deployments in
  proportion to their ready capacity (requests/s with the batch full). With one variant a
  deployment is a site, as before.
- Directives: `SetDirective` rescales the output tokens of the requests arriving from now
  (`sim.serving.directives.DirectedSource`) and rebuilds the replica models at the new mean
  output length. A served request's quality is its variant's minus its directive's penalty.
"""

from __future__ import annotations

import itertools
import math
from array import array
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.api import ReplicaPoint
from sim.config.scenario import Site as SiteConfig
from sim.config.services import Directive, ServiceConfig, Variant
from sim.engine.component import Component
from sim.engine.ledger import Pool, Site
from sim.engine.service_quality import QualityTally, directive_mix, tally_requests, tally_steps
from sim.errors import PolicyError, ScenarioError
from sim.models import mig
from sim.results import ResultParts
from sim.serving.directives import DirectedSource
from sim.serving.replica import ReplicaModel, replica_model
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceSim
from sim.serving.sources import RequestSource
from sim.util.records import in_instants, instant_starts

if TYPE_CHECKING:
    from sim.engine.core import Engine
    from sim.network import Wan

__all__ = ["Services", "SERVICE_COLUMNS"]

_WS_PER_KWH = 3.6e6
_GS_PER_KGH = 3.6e9  # (g/kWh x W x s) -> kg
_EARTH_KM = 6371.0
FIBRE_KM_PER_S = 204_190.0
"""Signal speed in fibre (c / 1.4682), for the round trip of a scenario without `[wan]`."""

SERVICE_COLUMNS = (
    "service",
    "step",
    "start_s",
    "rate_per_s",
    "replicas",
    *STEP_COLUMNS[1:],
    "quality_mean",
    "energy_kwh",
    "carbon_kg",
    "cost",
)
"""The columns of services.parquet: one row per service and step (`[serving] step_s`);
`quality_mean` is the mean quality of the step's served requests (NaN: none of known
quality); `cost` the price of the GPU-hours its replicas held (NaN: a GPU without price)."""


class _ColdStart:
    """Replicas of one scale-up in their cold start (fewer if some were cancelled)."""

    __slots__ = ("replicas",)

    def __init__(self, replicas: int):
        self.replicas = replicas


class _Level:
    """One deployment (service, site, variant): its replicas, their GPUs, the log of its
    power."""

    __slots__ = (
        "site",
        "pool",
        "k",
        "site_k",
        "variant",
        "spec",
        "ready",
        "loading",
        "batches",
        "model",
        "fidelity_w",
        "gpus",
        "time_s",
        "extra_w",
        "gpus_log",
        "gpus_per_replica",
        "holders",
    )

    def __init__(self, site: Site, pool: Pool, k: int, site_k: int, variant: int, spec: Variant):
        self.site = site
        self.pool = pool
        self.k = k
        """The deployment's index (the fidelity's site index)."""
        self.site_k = site_k
        """The site's index in the service's `sites`."""
        self.variant = variant
        """The variant's index in the service's `variant_specs()`."""
        self.spec = spec
        self.ready = 0
        self.loading = 0
        self.batches: list[_ColdStart] = []
        """Replicas in their cold start, per scale-up, oldest first."""
        self.model: ReplicaModel
        self.fidelity_w = 0.0
        """Extra power of the serving replicas (the fidelity's last report), W."""
        self.gpus = 0.0
        """GPUs held (serving, loading, draining); a slice counts as its SM share."""
        self.gpus_per_replica = (
            float(spec.gpus_per_replica)
            if spec.mig_profile is None
            else mig.sm_share(spec.gpu, spec.mig_profile)
        )
        """GPUs one replica holds (a slice: its SM share of the GPU)."""
        self.holders: list[tuple[str, int]] = []
        """A MIG variant's slices held, newest last (their holder keys)."""
        self.time_s = array("d")
        self.extra_w = array("d")
        """Power above the ledger's idle of all the service's GPUs here, W, from time_s."""
        self.gpus_log = array("d")

    def extra_now_w(self) -> float:
        return self.fidelity_w + self.loading * (self.model.load_w - self.model.power_w[0])

    def record(self, t_s: float) -> None:
        """Log the power level and GPUs held from `t_s` (one row per instant)."""
        if self.time_s and self.time_s[-1] == t_s:
            self.extra_w[-1] = self.extra_now_w()
            self.gpus_log[-1] = self.gpus
            return
        self.time_s.append(t_s)
        self.extra_w.append(self.extra_now_w())
        self.gpus_log.append(self.gpus)

    def record_many(self, t_s: np.ndarray, fidelity_w: np.ndarray) -> None:
        """Log the fidelity's extra power `fidelity_w` from each of the increasing times
        `t_s` (loading replicas and GPUs held are constant over them: a fidelity is always
        advanced before either changes)."""
        if not len(t_s):
            return
        if self.time_s and self.time_s[-1] == t_s[0]:
            self.time_s.pop()
            self.extra_w.pop()
            self.gpus_log.pop()
        self.fidelity_w = float(fidelity_w[-1])
        loading_w = self.loading * (self.model.load_w - self.model.power_w[0])
        # frombytes copies the arrays' memory (extend would convert element by element)
        self.time_s.frombytes(np.asarray(t_s, dtype=np.float64).tobytes())
        self.extra_w.frombytes((np.asarray(fidelity_w, dtype=np.float64) + loading_w).tobytes())
        self.gpus_log.frombytes(np.full(len(t_s), self.gpus, dtype=np.float64).tobytes())

    def it_w(self) -> np.ndarray:
        """IT power of the service's GPUs here at each log row, W (GPU idle + host share +
        extra)."""
        gpus = np.asarray(self.gpus_log, dtype=float)
        return gpus * (self.pool.idle_w + self.pool.host_w) + np.asarray(self.extra_w)


class Services(Component):
    """The scenario's inference services (none: every hook does nothing)."""

    __slots__ = (
        "_core",
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
        "_serial",
    )

    def __init__(self, core: Engine, sources: list[RequestSource], wan: Wan | None):
        self._core = core
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
        self._serial = itertools.count()
        """Numbers the slices replicas hold (their holder keys: ("replica", n))."""
        self.site_shares: list[np.ndarray | None] = [None] * len(self.configs)
        """Each service's routing weights over its sites (None: by ready capacity)."""
        fidelity = _fidelity(scenario.serving.fidelity) if self.configs else ServiceSim
        self.levels: list[list[_Level]] = []
        self.sims: list[ServiceSim] = []
        for i, cfg in enumerate(self.configs):
            levels: list[_Level] = []
            for site_k, name in enumerate(cfg.sites):
                site = core.fleet.by_name[name]
                for v, spec in enumerate(self.variants[i]):
                    pool = site.pool(spec.gpu)
                    if pool is None or (pool.mig is None) != (spec.mig_profile is None):
                        continue  # the variant cannot run here (checked: some site has it)
                    level = _Level(site, pool, len(levels), site_k, v, spec)
                    level.model = self._model(i, level)
                    levels.append(level)
            self.levels.append(levels)
            origin = scenario.sites[core.fleet.by_name[cfg.origin].index]
            rtt_s = np.array(
                [_round_trip_s(wan, origin, scenario.sites[lv.site.index]) for lv in levels]
            )
            self.sims.append(
                fidelity(
                    cfg.name,
                    self.sources[i],
                    rtt_s,
                    cfg.slo,
                    cfg.timeout_s,
                    scenario.serving.step_s,
                    core.horizon_s,
                    self._power_callback(levels),
                )
            )

    @staticmethod
    def _power_callback(levels: list[_Level]):
        def on_power(k: int, t_s, extra_w) -> None:
            """One change (floats), or many (increasing times and powers, numpy arrays)."""
            level = levels[k]
            if isinstance(t_s, np.ndarray):
                level.record_many(t_s, extra_w)
                return
            level.fidelity_w = extra_w
            level.record(t_s)

        return on_power

    def _model(self, i: int, level: _Level) -> ReplicaModel:
        """The replica model of `level`, under service `i`'s own cap or the site's."""
        cap_w = self.cap_w[i] if self.cap_w[i] is not None else level.site.cap_w
        return self._model_for_cap(i, level.spec, cap_w)

    def _model_for_cap(
        self, i: int, spec: Variant, cap_w: float | None, mean_output: float | None = None
    ) -> ReplicaModel:
        """Service `i`'s replica model of variant `spec` under a per-GPU cap `cap_w` (W;
        None: uncapped), at its request source's mean input tokens and `mean_output` tokens
        (None: the mean under its directive). ValueError for a cap out of range."""
        return replica_model(
            spec.model,
            spec.gpu,
            spec.gpus_per_replica,
            spec.max_batch,
            self.sources[i].tokens.mean_input,
            self.mean_output(i) if mean_output is None else mean_output,
            cap_w,
            spec.mig_profile,
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
            for site_name, n in cfg.initial_replicas().items():
                level = self.level(i, site_name, "replicas")
                why = self._room(level, n)
                if why is not None:
                    raise ScenarioError(f"services[{i}].replicas.{site_name}: {why}")
                if n:
                    self._take_gpus(level, n)
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

    # --- the ledger ----------------------------------------------------------------------------

    def _take_gpus(self, level: _Level, replicas: int) -> None:
        """`replicas` more replicas of `level` take their GPUs (or slices) now, at idle."""
        now = self._core.env.now
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            level.site.allocate(now, pool, replicas * level.spec.gpus_per_replica, pool.idle_w)
        else:
            assert pool.mig is not None  # checked with the scenario
            for _ in range(replicas):
                holder = ("replica", next(self._serial))
                level.site.allocate_part(now, pool, pool.mig, holder, profile, pool.idle_w, now)
                level.holders.append(holder)
        level.gpus += replicas * level.gpus_per_replica

    def _free_gpus(
        self, level: _Level, replicas: int, held: list[tuple[str, int]] | None = None
    ) -> None:
        """`replicas` replicas of `level` give back their GPUs (or slices: `held`, else
        the newest)."""
        fleet, pool = self._core.fleet, level.pool
        if level.spec.mig_profile is None:
            fleet.release(level.site, pool, replicas * level.spec.gpus_per_replica, pool.idle_w)
        else:
            assert pool.mig is not None
            for _ in range(replicas):
                holder = held.pop() if held else level.holders.pop()
                fleet.release_part(level.site, pool, pool.mig, holder, pool.idle_w)
        level.gpus -= replicas * level.gpus_per_replica
        level.record(self._core.env.now)

    def _drained(self, i: int, level: _Level, replicas: int, held: list[tuple[str, int]]) -> None:
        """Draining replicas of service `i` finished their last requests: their GPUs are
        free (the fidelity advanced first, so the power log stays in time order)."""
        self.advance(i)
        self._free_gpus(level, replicas, held)

    def _room(self, level: _Level, more: int) -> str | None:
        """None if `more` replicas of `level` fit now, else why not."""
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            need, free, what = more * level.spec.gpus_per_replica, pool.free, f"{pool.model} GPUs"
        else:
            assert pool.mig is not None
            need, free = more, pool.mig.free_slices().get(profile, 0)
            what = f"{profile} slices of {pool.model}"
        if need <= free:
            return None
        return (
            f"{more} more replicas of {level.spec.name} need {need} {what}, "
            f"{level.site.name} has {free} free"
        )

    # --- actions (checked by the core's `apply` first) -------------------------------------

    def service(self, name: str, asker: object) -> int:
        """The index of service `name`; PolicyError naming `asker` if there is none."""
        i = self.index.get(name)
        if i is None:
            raise PolicyError(f"{asker}: unknown service {name!r} (services: {self.names})")
        return i

    def level(self, i: int, site_name: str, asker: object, variant: str | None = None) -> _Level:
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

    def scale(self, i: int, level: _Level, replicas: int, asker: object) -> None:
        """Run `replicas` replicas of service `i` at `level`'s site from now."""
        have = level.ready + level.loading
        if replicas > have:
            why = self._room(level, replicas - have)
            if why is not None:
                raise PolicyError(f"{asker}: {why}")
        sim = self.advance(i)
        now = self._core.env.now
        if replicas > have:
            self._cold_start(i, level, replicas - have)
            return
        cancel = have - replicas
        while cancel and level.batches:  # the most recent cold starts go first
            batch = level.batches[-1]
            n = min(cancel, batch.replicas)
            batch.replicas -= n
            level.loading -= n
            cancel -= n
            if batch.replicas == 0:
                level.batches.pop()
            self._free_gpus(level, n)
        if cancel:
            level.ready -= cancel
            free_at_s = sim.configure(now, level.k, level.ready, level.model)
            self._replicas_changed(i)
            if free_at_s <= now:
                self._free_gpus(level, cancel)
            else:  # the drained replicas' own slices, whatever scales up meanwhile
                held = [level.holders.pop() for _ in range(cancel)] if level.holders else []
                timer = self._core.env.timeout(free_at_s - now)
                timer.callbacks.append(lambda _e: self._drained(i, level, cancel, held))

    def _cold_start(self, i: int, level: _Level, n: int) -> None:
        core = self._core
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            wake_s = core.fleet.wake_s(level.site, pool, n * level.spec.gpus_per_replica)
        else:  # a slice on a GPU nothing holds may need its node booted
            assert pool.mig is not None
            wake_s = (
                core.fleet.wake_s(level.site, pool, 1) if pool.mig.fit(profile) is None else 0.0
            )
        load_s = level.model.weights_gb / level.site.checkpoint_read_gbps
        self._take_gpus(level, n)
        level.loading += n
        batch = _ColdStart(n)
        level.batches.append(batch)
        level.record(core.env.now)
        timer = core.env.timeout(wake_s + load_s)
        timer.callbacks.append(lambda _e: self._loaded(i, level, batch))

    def _loaded(self, i: int, level: _Level, batch: _ColdStart) -> None:
        n = batch.replicas
        if n == 0:
            return  # cancelled while loading
        level.batches = [b for b in level.batches if b is not batch]
        sim = self.advance(i)
        level.loading -= n
        level.ready += n
        sim.configure(self._core.env.now, level.k, level.ready, level.model)
        self._replicas_changed(i)
        level.record(self._core.env.now)
        self._core.request_decision()

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
        if len(self.variants[i]) == 1:
            self.advance(i).set_shares(self._core.env.now, weights)
        else:
            self._replicas_changed(i)

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
        self.sources[i].set_level(now, d)
        sim.source_changed(now)
        self._recap(i)

    def set_cap(self, i: int, watts: float | None) -> None:
        """Cap service `i`'s GPUs at every site (None: its sites' caps)."""
        self.cap_w[i] = watts
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

    def extra_w(self, site: Site) -> float:
        """Power the services at `site` draw above the ledger's idle now, W."""
        total = 0.0
        for i, levels in enumerate(self.levels):
            for level in levels:
                if level.site is site:
                    self.advance(i)
                    total += level.extra_now_w()
        return total

    def mean_extra_facility_kw(self, site: Site, t0_s: float, t1_s: float) -> float:
        """Mean facility power of the services' extra power at `site` over [t0, t1], kW."""
        t0_s = max(0.0, t0_s)
        if t1_s <= t0_s:
            return self.extra_w(site) * site.pue.value_at(t1_s) / 1000.0
        energy_ws = 0.0
        for i, levels in enumerate(self.levels):
            for level in levels:
                if level.site is site:
                    self.advance(i)
                    energy_ws += _integral(level, np.asarray(level.extra_w), site, t0_s, t1_s)
        return energy_ws / (t1_s - t0_s) / 1000.0

    def stats(self, i: int) -> LiveStats:
        return self.advance(i).live()

    def capacity_rps(self, i: int, level: _Level) -> float:
        """Requests/s one replica at `level` serves with its batch full."""
        m = level.model
        return m.slots / (self.mean_output(i) * float(m.iter_s[m.slots]))

    def replica_point(
        self, i: int, level: _Level, directive: str | None, cap_w: float | None = None
    ) -> ReplicaPoint:
        """One replica of `level` with its batch full under `directive` (None: in force)
        and a per-GPU cap `cap_w` W (None: in force)."""
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
                cap_w = self.cap_w[i] if self.cap_w[i] is not None else level.site.cap_w
            try:
                model = self._model_for_cap(i, level.spec, cap_w, mean_out)
            except ValueError as e:
                raise PolicyError(f"replica_point: service {self.names[i]}: {e}") from None
        quality = level.spec.quality
        gpus = level.gpus_per_replica
        return ReplicaPoint(
            capacity_rps=model.slots / (mean_out * float(model.iter_s[model.slots])),
            busy_w=float(model.power_w[model.slots]),
            idle_w=float(model.power_w[0]),
            gpus=gpus,
            price_per_h=gpus * self._core.price_per_gpu_h(level.pool.model),
            quality=None if quality is None else quality - self.directives[i][d].quality_penalty,
            mean_output_tokens=mean_out,
        )

    def rtt_s(self, i: int, level: _Level) -> float:
        """Round trip from service `i`'s origin to `level`'s site, s."""
        return float(self.sims[i].rtt_s[level.k])

    def rate_forecast(self, i: int, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
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
        """Adds the services' extra power to the sites' power table; the `services` table
        (and `requests` at the request level); the serving summary keys."""
        core = self._core
        horizon_s = core.horizon_s
        if self.configs:
            out.power = _with_extra_power(out.power, core.fleet.sites, self.levels)
        step_s = core.scenario.serving.step_s
        n_steps = int(np.ceil(horizon_s / step_s))  # the fidelities' step grid
        edges = np.append(step_s * np.arange(n_steps), horizon_s)
        columns: dict[str, list[np.ndarray]] = {c: [] for c in SERVICE_COLUMNS}
        energy_kwh = carbon_kg = gpu_s = embodied_kg = 0.0
        tallies: list[QualityTally] = []
        requests: list[pd.DataFrame] = []
        for i in range(len(self.configs)):
            steps = self.sims[i].step_table()
            e_step, c_step, g_step, r_step, cost = (np.zeros(len(edges) - 1) for _ in range(5))
            for level in self.levels[i]:
                e, c, g = _per_step(level, edges, horizon_s)
                e_step += e
                c_step += c
                g_step += g
                r_step += g / np.diff(edges) / level.gpus_per_replica
                if g.any():  # a GPU nothing held costs nothing, priced or not
                    cost += np.where(g > 0, g / 3600.0 * core.charged(level.pool.model), 0.0)
                embodied_kg += g.sum() / 3600.0 * level.pool.spec.embodied_kg_per_gpu_h
            tally, frame = self._quality(i, edges)
            tallies.append(tally)
            if frame is not None:
                requests.append(frame)
            energy_kwh += e_step.sum()
            carbon_kg += c_step.sum()
            gpu_s += g_step.sum()
            for col in steps.columns:
                columns[col].append(steps[col].to_numpy())
            columns["service"].append(np.full(len(steps), i))
            columns["start_s"].append(edges[:-1])
            columns["rate_per_s"].append(steps["arrived"].to_numpy() / np.diff(edges))
            columns["replicas"].append(r_step)
            columns["quality_mean"].append(tally.mean())
            columns["energy_kwh"].append(e_step)
            columns["carbon_kg"].append(c_step)
            columns["cost"].append(cost)
            out.summary["cost_compute"] += float(cost.sum())
        table = {c: np.concatenate(v) if v else np.zeros(0) for c, v in columns.items()}
        codes = table["service"].astype(np.int64)
        table["service"] = pd.Categorical.from_codes(codes, categories=list(self.names))
        out.tables["services"] = pd.DataFrame(table)
        if requests:
            frame = pd.concat(requests, ignore_index=True)
            frame["service"] = pd.Categorical(frame["service"], categories=list(self.names))
            out.tables["requests"] = frame
        out.summary.update(self._summary(energy_kwh, carbon_kg, gpu_s))
        out.summary.update(self._quality_summary(tallies))
        imports = {
            cfg.name: {
                "format": r.format,
                "rows_read": r.rows_read,
                "imported": r.imported,
                "skipped": dict(r.skipped),
            }
            for cfg, src in zip(self.configs, self.sources, strict=True)
            if (r := getattr(src.base, "report", None)) is not None
        }
        if imports:
            out.meta["request_imports"] = imports
        if core.scenario.embodied == "allocated":
            out.summary["carbon_embodied_kg"] += embodied_kg

    def _quality(self, i: int, edges: np.ndarray) -> tuple[QualityTally, pd.DataFrame | None]:
        """Service `i`'s served quality per step; at the request level also its requests'
        table, with each request's site (index in the service's `sites`), variant and
        quality."""
        cfg, sim = self.configs[i], self.sims[i]
        levels = self.levels[i]
        quality = np.array(
            [np.nan if lv.spec.quality is None else lv.spec.quality for lv in levels]
        )
        penalty = np.array([d.quality_penalty for d in self.directives[i]])
        source = self.sources[i]
        log_s, log_level = np.asarray(source.from_s), np.asarray(source.levels)
        frame = sim.request_table()
        if frame is None:
            mix = directive_mix(source.base, edges, log_s, log_level, len(penalty))
            return tally_steps(sim.served_by_site(), quality, penalty, mix, cfg.quality_floor), None
        site = frame["site"].to_numpy()
        tally, per_request = tally_requests(
            site,
            frame["arrival_s"].to_numpy(),
            (frame["state"] == "served").to_numpy(),
            quality,
            penalty,
            log_s,
            log_level,
            cfg.quality_floor,
            sim.step_s,
            sim.n_steps,
        )
        site_k = np.array([lv.site_k for lv in levels] + [-1], dtype=site.dtype)
        variant = np.array([lv.variant for lv in levels] + [-1], dtype=site.dtype)
        frame["site"] = site_k[site]
        frame.insert(3, "variant", variant[site])
        frame["quality"] = per_request
        return tally, frame

    def _quality_summary(self, tallies: list[QualityTally]) -> dict:
        """`served_quality_mean` over the requests served with a known quality;
        `served_below_floor_share` over those of services with a `quality_floor` (None
        when none has one or none was served)."""
        known = sum(float(t.known.sum()) for t in tallies)
        floored = [
            t for t, cfg in zip(tallies, self.configs, strict=True) if cfg.quality_floor is not None
        ]
        served_floored = sum(float(t.served.sum()) for t in floored)
        return {
            "served_quality_mean": (
                sum(float(t.quality_sum.sum()) for t in tallies) / known if known else None
            ),
            "served_below_floor_share": (
                sum(float(t.below_floor.sum()) for t in floored) / served_floored
                if served_floored
                else None
            ),
        }

    def _summary(self, energy_kwh: float, carbon_kg: float, gpu_s: float) -> dict:
        sums = [sim.summary() for sim in self.sims]
        total = sum(s["requests_total"] for s in sums)
        tokens = sum(s["tokens_generated"] for s in sums)

        def worst(key: str) -> float | None:
            values = [s[key] for s in sums if not math.isnan(s[key])]
            return max(values) if values else None

        return {
            "requests_total": total,
            "requests_served": sum(s["requests_served"] for s in sums),
            "requests_dropped": sum(s["requests_dropped"] for s in sums),
            "slo_attainment": sum(s["slo_met"] for s in sums) / total if total else None,
            "ttft_p99_ms": worst("ttft_p99_ms"),
            "tpot_p99_ms": worst("tpot_p99_ms"),
            "tokens_generated": tokens,
            "energy_serving_kwh": energy_kwh,
            "carbon_serving_kg": carbon_kg,
            "carbon_per_1k_tokens_g": carbon_kg * 1e6 / tokens if tokens else None,
            "serving_gpu_h": gpu_s / 3600.0,
        }


def _fidelity(name: str) -> type[ServiceSim]:
    """The fidelity class called `name` ("request" or "fluid")."""
    if name == "request":
        from sim.serving.request_level import RequestLevel

        return RequestLevel
    from sim.serving.fluid import Fluid

    return Fluid


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


def _integral(level: _Level, power_w: np.ndarray, site: Site, t0_s: float, t1_s: float) -> float:
    """Integral over [t0, t1] of the step function `power_w` (at `level`'s log times) x PUE,
    W s."""
    t = np.asarray(level.time_s)
    a = np.clip(t, t0_s, t1_s)
    b = np.clip(np.append(t[1:], np.inf), t0_s, t1_s)
    pue = site.pue
    return float(np.sum(power_w * (pue.cumulative(b) - pue.cumulative(a))))


def _per_step(
    level: _Level, edges: np.ndarray, horizon_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step (`edges`): facility energy (kWh), carbon (kg) and GPU-seconds held of the
    service's GPUs at `level`'s site: exact integrals of the level log."""
    t = np.asarray(level.time_s)
    it_w = level.it_w()
    gpus = np.asarray(level.gpus_log, dtype=float)
    site = level.site
    cum_pue = site.pue.cumulative
    cum_ci = site.facility_ci.cumulative
    t_next = np.append(t[1:], horizon_s)

    def cumulative_at(x: np.ndarray, weights: np.ndarray, fn) -> np.ndarray:
        before = np.concatenate([[0.0], np.cumsum(weights * (fn(t_next) - fn(t)))])
        k = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 1)
        return before[k] + weights[k] * (fn(np.maximum(x, t[k])) - fn(t[k]))

    energy = np.diff(cumulative_at(edges, it_w, cum_pue)) / _WS_PER_KWH
    carbon = np.diff(cumulative_at(edges, it_w, cum_ci)) / _GS_PER_KGH
    gpu_s = np.diff(cumulative_at(edges, gpus, lambda x: np.asarray(x, dtype=float)))
    return energy, carbon, gpu_s


def _with_extra_power(
    power: pd.DataFrame, sites: list[Site], levels: list[list[_Level]]
) -> pd.DataFrame:
    """The sites' power table with the services' extra power added (IT and facility),
    with a row wherever either changes."""
    parts = []
    for site in sites:
        rows = power[power["site"] == site.name]
        mine = [lv for service in levels for lv in service if lv.site is site]
        if not mine:
            parts.append(rows)
            continue
        t_site = rows["time_s"].to_numpy()
        times = np.union1d(t_site, np.concatenate([np.asarray(lv.time_s) for lv in mine]))
        new = instant_starts(times)
        # an instant's row shows the levels at its last time
        read_s = times[np.r_[np.flatnonzero(new)[1:], len(times)] - 1]
        times = times[new]
        k = np.searchsorted(t_site, read_s, side="right") - 1
        extra = np.zeros(len(times))
        for lv in mine:
            t = np.asarray(lv.time_s)
            j = np.searchsorted(t, read_s, side="right") - 1
            extra += np.where(j >= 0, np.asarray(lv.extra_w)[np.maximum(j, 0)], 0.0)
        it_w = rows["it_w"].to_numpy()[k] + extra
        parts.append(
            pd.DataFrame(
                {
                    "time_s": times,
                    "site": pd.Categorical.from_codes(
                        np.full(len(times), site.index), categories=power["site"].cat.categories
                    ),
                    "it_w": it_w,
                    "facility_w": rows["facility_w"].to_numpy()[k]
                    + extra * site.pue.values_at(read_s),
                    "busy_gpus": rows["busy_gpus"].to_numpy()[k],
                }
            )
        )
    merged = pd.concat(parts, ignore_index=True)
    order, time_s = in_instants(merged["time_s"].to_numpy(), merged["site"].cat.codes.to_numpy())
    merged = merged.iloc[order].reset_index(drop=True)
    merged["time_s"] = time_s
    return merged
