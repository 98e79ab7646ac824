"""Inference services: their replicas' GPUs, cold starts, caps and power, and their results.

A replica holds `gpus_per_replica` GPUs of its site's pool, in the site ledger at idle
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
"""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.cluster import Pool, Site
from sim.engine.component import Component
from sim.errors import PolicyError
from sim.results import ResultParts
from sim.scenario import Site as SiteConfig
from sim.serving.config import ServiceConfig
from sim.serving.replica import ReplicaModel, replica_model
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceSim
from sim.serving.sources import RequestSource

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
    "energy_kwh",
    "carbon_kg",
)
"""The columns of services.parquet: one row per service and step (`[serving] step_s`)."""


class _ColdStart:
    """Replicas of one scale-up in their cold start (fewer if some were cancelled)."""

    __slots__ = ("replicas",)

    def __init__(self, replicas: int):
        self.replicas = replicas


class _Level:
    """One (service, site): its replicas, their GPUs, and the log of its power."""

    __slots__ = (
        "site",
        "pool",
        "k",
        "ready",
        "loading",
        "batches",
        "model",
        "fidelity_w",
        "gpus",
        "time_s",
        "extra_w",
        "gpus_log",
    )

    def __init__(self, site: Site, pool: Pool, k: int, model: ReplicaModel):
        self.site = site
        self.pool = pool
        self.k = k
        self.ready = 0
        self.loading = 0
        self.batches: list[_ColdStart] = []
        """Replicas in their cold start, per scale-up, oldest first."""
        self.model = model
        self.fidelity_w = 0.0
        """Extra power of the serving replicas (the fidelity's last report), W."""
        self.gpus = 0
        """GPUs held (serving, loading, draining)."""
        self.time_s = array("d")
        self.extra_w = array("d")
        """Power above the ledger's idle of all the service's GPUs here, W, from time_s."""
        self.gpus_log = array("q")

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
        self.gpus_log.frombytes(np.full(len(t_s), self.gpus, dtype=np.int64).tobytes())

    def it_w(self) -> np.ndarray:
        """IT power of the service's GPUs here at each log row, W (GPU idle + host share +
        extra)."""
        gpus = np.asarray(self.gpus_log, dtype=float)
        return gpus * (self.pool.idle_w + self.pool.host_w) + np.asarray(self.extra_w)


class Services(Component):
    """The scenario's inference services (none: every hook does nothing)."""

    __slots__ = ("_core", "configs", "names", "index", "levels", "sims", "sources", "cap_w")

    def __init__(self, core: Engine, sources: list[RequestSource], wan: Wan | None):
        self._core = core
        scenario = core.scenario
        self.configs: list[ServiceConfig] = list(scenario.services)
        self.names = tuple(c.name for c in self.configs)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.sources = sources
        self.cap_w: list[float | None] = [None] * len(self.configs)
        """Each service's own GPU cap, W (None: its sites' caps)."""
        fidelity = _fidelity(scenario.serving.fidelity) if self.configs else ServiceSim
        self.levels: list[list[_Level]] = []
        self.sims: list[ServiceSim] = []
        for i, cfg in enumerate(self.configs):
            levels = []
            for k, name in enumerate(cfg.sites):
                site = core.fleet.by_name[name]
                pool = site.pool(cfg.gpu)
                assert pool is not None  # checked with the scenario
                levels.append(_Level(site, pool, k, self._model(i, site)))
            self.levels.append(levels)
            origin = scenario.sites[core.fleet.by_name[cfg.origin].index]
            rtt_s = np.array(
                [_round_trip_s(wan, origin, scenario.sites[lv.site.index]) for lv in levels]
            )
            self.sims.append(
                fidelity(
                    cfg.name,
                    sources[i],
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

    def _model(self, i: int, site: Site) -> ReplicaModel:
        """Service `i`'s replica model at `site`, under its own cap or the site's."""
        return self._model_for_cap(i, self.cap_w[i] if self.cap_w[i] is not None else site.cap_w)

    def _model_for_cap(self, i: int, cap_w: float | None) -> ReplicaModel:
        """Service `i`'s replica model under a per-GPU cap `cap_w` (W; None: uncapped), at
        its request source's mean token counts. ValueError for a cap out of range."""
        cfg, tokens = self.configs[i], self.sources[i].tokens
        return replica_model(
            cfg.model,
            cfg.gpu,
            cfg.gpus_per_replica,
            cfg.max_batch,
            tokens.mean_input,
            tokens.mean_output,
            cap_w,
        )

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """The starting replicas serve from time 0 (deployed before the run); the policy
        decides at time 0, where it may scale and route them."""
        if self.configs:
            self._core.request_decision()
        for i, cfg in enumerate(self.configs):
            for site_name, n in cfg.initial_replicas().items():
                level = self.levels[i][cfg.sites.index(site_name)]
                if n:
                    self._take_gpus(level, n * cfg.gpus_per_replica)
                    level.ready = n
                    self.sims[i].configure(0.0, level.k, n, level.model)
                level.record(0.0)
            for level in self.levels[i]:
                if not level.time_s:
                    level.record(0.0)

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

    def _take_gpus(self, level: _Level, gpus: int) -> None:
        now = self._core.env.now
        level.site.allocate(now, level.pool, gpus, level.pool.idle_w)
        level.gpus += gpus

    def _free_gpus(self, level: _Level, gpus: int) -> None:
        self._core.fleet.release(level.site, level.pool, gpus, level.pool.idle_w)
        level.gpus -= gpus
        level.record(self._core.env.now)

    # --- actions (checked by the core's `apply` first) -------------------------------------

    def service(self, name: str, asker: object) -> int:
        """The index of service `name`; PolicyError naming `asker` if there is none."""
        i = self.index.get(name)
        if i is None:
            raise PolicyError(f"{asker}: unknown service {name!r} (services: {self.names})")
        return i

    def level(self, i: int, site_name: str, asker: object) -> _Level:
        cfg = self.configs[i]
        if site_name not in cfg.sites:
            raise PolicyError(
                f"{asker}: service {cfg.name} may not run on {site_name!r} (its sites: "
                f"{', '.join(cfg.sites)})"
            )
        return self.levels[i][cfg.sites.index(site_name)]

    def scale(self, i: int, level: _Level, replicas: int, asker: object) -> None:
        """Run `replicas` replicas of service `i` at `level`'s site from now."""
        cfg = self.configs[i]
        have = level.ready + level.loading
        if replicas > have:
            gpus = (replicas - have) * cfg.gpus_per_replica
            if level.pool.free < gpus:
                raise PolicyError(
                    f"{asker}: {replicas - have} more replicas need {gpus} {cfg.gpu} GPUs, "
                    f"{level.site.name} has {level.pool.free} free"
                )
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
            self._free_gpus(level, n * cfg.gpus_per_replica)
        if cancel:
            level.ready -= cancel
            free_at_s = sim.configure(now, level.k, level.ready, level.model)
            gpus = cancel * cfg.gpus_per_replica
            if free_at_s <= now:
                self._free_gpus(level, gpus)
            else:
                timer = self._core.env.timeout(free_at_s - now)
                timer.callbacks.append(lambda _e: self._free_gpus(level, gpus))

    def _cold_start(self, i: int, level: _Level, n: int) -> None:
        cfg = self.configs[i]
        gpus = n * cfg.gpus_per_replica
        core = self._core
        wake_s = core.fleet.wake_s(level.site, level.pool, gpus)
        load_s = level.model.weights_gb / level.site.checkpoint_read_gbps
        self._take_gpus(level, gpus)
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
        level.record(self._core.env.now)
        self._core.request_decision()

    def route(self, i: int, shares: dict[str, float] | None, asker: object) -> None:
        """Send service `i`'s requests to its sites in `shares` from now (None: by replicas)."""
        cfg = self.configs[i]
        weights = None
        if shares is not None:
            weights = np.zeros(len(cfg.sites))
            for name, w in shares.items():
                level = self.level(i, name, asker)
                if not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
                    raise PolicyError(f"{asker}: share of {name} must be a number >= 0, got {w!r}")
                weights[level.k] = w
            if weights.sum() <= 0:
                raise PolicyError(f"{asker}: the shares must not all be 0")
            weights = weights / weights.sum()
        self.advance(i).set_shares(self._core.env.now, weights)

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
            level.model = self._model(i, level.site)
            if level.ready:
                sim.configure(now, level.k, level.ready, level.model)
            level.record(now)

    def check_cap(self, i: int, watts: float, asker: object) -> None:
        """PolicyError unless `watts` is a settable cap of service `i`'s GPUs."""
        cfg = self.configs[i]
        try:
            self._model_for_cap(i, watts)
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
        return m.slots / (self.sources[i].tokens.mean_output * float(m.iter_s[m.slots]))

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
        for i, cfg in enumerate(self.configs):
            steps = self.sims[i].step_table()
            e_step, c_step, g_step = (np.zeros(len(edges) - 1) for _ in range(3))
            for level in self.levels[i]:
                e, c, g = _per_step(level, edges, horizon_s)
                e_step += e
                c_step += c
                g_step += g
                embodied_kg += g.sum() / 3600.0 * level.pool.spec.embodied_kg_per_gpu_h
            energy_kwh += e_step.sum()
            carbon_kg += c_step.sum()
            gpu_s += g_step.sum()
            for col in steps.columns:
                columns[col].append(steps[col].to_numpy())
            columns["service"].append(np.full(len(steps), i))
            columns["start_s"].append(edges[:-1])
            columns["rate_per_s"].append(steps["arrived"].to_numpy() / np.diff(edges))
            columns["replicas"].append(g_step / np.diff(edges) / cfg.gpus_per_replica)
            columns["energy_kwh"].append(e_step)
            columns["carbon_kg"].append(c_step)
        table = {c: np.concatenate(v) if v else np.zeros(0) for c, v in columns.items()}
        codes = table["service"].astype(np.int64)
        table["service"] = pd.Categorical.from_codes(codes, categories=list(self.names))
        out.tables["services"] = pd.DataFrame(table)
        requests = [r for sim in self.sims if (r := sim.request_table()) is not None]
        if requests:
            frame = pd.concat(requests, ignore_index=True)
            frame["service"] = pd.Categorical(frame["service"], categories=list(self.names))
            out.tables["requests"] = frame
        out.summary.update(self._summary(energy_kwh, carbon_kg, gpu_s))
        imports = {
            cfg.name: {
                "format": r.format,
                "rows_read": r.rows_read,
                "imported": r.imported,
                "skipped": dict(r.skipped),
            }
            for cfg, src in zip(self.configs, self.sources, strict=True)
            if (r := getattr(src, "report", None)) is not None
        }
        if imports:
            out.meta["request_imports"] = imports
        if core.scenario.embodied == "allocated":
            out.summary["carbon_embodied_kg"] += embodied_kg

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
        k = np.searchsorted(t_site, times, side="right") - 1
        extra = np.zeros(len(times))
        for lv in mine:
            t = np.asarray(lv.time_s)
            j = np.searchsorted(t, times, side="right") - 1
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
                    + extra * site.pue.values_at(times),
                    "busy_gpus": rows["busy_gpus"].to_numpy()[k],
                }
            )
        )
    merged = pd.concat(parts, ignore_index=True)
    order = np.lexsort((merged["site"].cat.codes.to_numpy(), merged["time_s"].to_numpy()))
    return merged.iloc[order].reset_index(drop=True)
