"""The inference services' results: their extra power in the sites' power table, the
`services` table (one row per service and step), the `requests` table (request level),
the serving summary keys and their share of `cost_compute` and allocated embodied carbon.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from sim.config.services import Directive, ServiceConfig
from sim.engine.service_power import per_step, with_extra_power
from sim.engine.service_quality import QualityTally, directive_mix, tally_requests, tally_steps
from sim.results import ResultParts
from sim.serving.service_sim import STEP_COLUMNS, ServiceSim, served_latencies
from sim.util.percentile import weighted_percentile

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.ledger import Site
    from sim.engine.service_replicas import Deployment
    from sim.serving.directives import DirectedSource

__all__ = ["SERVICE_COLUMNS", "ServedServices", "write_service_results"]


class ServedServices(Protocol):
    """What the results read of the services (`sim.engine.services.Services`): per
    service, in scenario order, its configuration, name, deployments, fidelity, directive
    levels and requests."""

    @property
    def configs(self) -> list[ServiceConfig]: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def levels(self) -> list[list[Deployment]]: ...
    @property
    def sims(self) -> list[ServiceSim]: ...
    @property
    def directives(self) -> list[tuple[Directive, ...]]: ...
    @property
    def sources(self) -> list[DirectedSource]: ...


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


def write_service_results(
    out: ResultParts, core: Core, services: ServedServices, sites: list[Site]
) -> None:
    """Adds `services`' extra power to the power table of `sites`; the `services` table
    (and `requests` at the request level); the serving summary keys."""
    horizon_s = core.horizon_s
    if services.configs:
        out.power = with_extra_power(out.power, sites, services.levels)
    step_s = core.scenario.serving.step_s
    n_steps = int(np.ceil(horizon_s / step_s))  # the fidelities' step grid
    edges = np.append(step_s * np.arange(n_steps), horizon_s)
    n = len(edges) - 1
    columns: dict[str, np.ndarray] = {}

    def put(column: str, i: int, values: np.ndarray | int) -> None:
        """Service `i`'s rows of `column` (each column allocated once, for every service)."""
        if column not in columns:
            dtype = np.asarray(values).dtype
            columns[column] = np.empty(len(services.configs) * n, dtype=dtype)
        columns[column][i * n : (i + 1) * n] = values

    energy_kwh = carbon_kg = gpu_s = embodied_kg = idle_kwh = loading_kwh = 0.0
    tallies: list[QualityTally] = []
    # each service's served latencies: at the request level from its table, built once
    mixtures: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    requests: list[pd.DataFrame] = []
    for i in range(len(services.configs)):
        steps = services.sims[i].step_table()
        e_step, c_step, g_step, r_step, cost = (np.zeros(len(edges) - 1) for _ in range(5))
        for level in services.levels[i]:
            e, c, g, idle, loading = per_step(level, edges, horizon_s)
            idle_kwh += float(idle.sum())
            loading_kwh += float(loading.sum())
            e_step += e
            c_step += c
            g_step += g
            r_step += g / np.diff(edges) / level.gpus_per_replica
            if g.any():  # a GPU nothing held costs nothing, priced or not
                cost += np.where(g > 0, g / 3600.0 * core.prices.charged(level.pool.model), 0.0)
            embodied_kg += float(np.sum(level.pool.embodied.kg(g, edges[:-1], edges[1:])))
        tally, frame = _served_quality(services, i, edges)
        tallies.append(tally)
        if frame is not None:
            requests.append(frame)
        sim = services.sims[i]
        mixtures.append(sim.latency_mixtures() if frame is None else served_latencies(frame))
        energy_kwh += e_step.sum()
        carbon_kg += c_step.sum()
        gpu_s += g_step.sum()
        for col in steps.columns:
            put(col, i, steps[col].to_numpy())
        put("service", i, i)
        put("start_s", i, edges[:-1])
        put("rate_per_s", i, steps["arrived"].to_numpy() / np.diff(edges))
        put("replicas", i, r_step)
        put("quality_mean", i, tally.mean())
        put("energy_kwh", i, e_step)
        put("carbon_kg", i, c_step)
        put("cost", i, cost)
        out.summary["cost_compute"] += float(cost.sum())
    table = {c: columns.get(c, np.zeros(0)) for c in SERVICE_COLUMNS}
    codes = table["service"].astype(np.int64, copy=False)
    table["service"] = pd.Categorical.from_codes(codes, categories=list(services.names))
    # the columns as they are, not copied into one block per dtype (10 million rows a year)
    out.tables["services"] = pd.DataFrame(table, copy=False)
    if requests:
        frame = pd.concat(requests, ignore_index=True)
        frame["service"] = pd.Categorical(frame["service"], categories=list(services.names))
        out.tables["requests"] = frame
    out.summary.update(_serving_summary(services.sims, mixtures, energy_kwh, carbon_kg, gpu_s))
    out.summary["energy_serving_idle_kwh"] = idle_kwh
    out.summary["energy_serving_loading_kwh"] = loading_kwh
    out.summary.update(_quality_summary(tallies, services.configs))
    imports = {
        cfg.name: {
            "format": r.format,
            "rows_read": r.rows_read,
            "imported": r.imported,
            "skipped": dict(r.skipped),
        }
        for cfg, src in zip(services.configs, services.sources, strict=True)
        if (r := getattr(src.base, "report", None)) is not None
    }
    if imports:
        out.meta["request_imports"] = imports
    if services.configs:
        out.meta["serving"] = _extrapolation_meta(services)
    if core.scenario.embodied == "allocated":
        out.summary["carbon_embodied_kg"] += embodied_kg


def _extrapolation_meta(services: ServedServices) -> dict[str, dict[str, dict[str, Any]]]:
    """meta.json's `serving`: per service and variant, whether the serving model
    extrapolates it and why (`ReplicaModel.extrapolated_why`; docs/serving.md)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for cfg, levels in zip(services.configs, services.levels, strict=True):
        variants = out.setdefault(cfg.name, {})
        for level in levels:
            why = list(level.model.extrapolated_why)
            variants[level.spec.name] = {"extrapolated": bool(why), "why": why}
    return out


def _served_quality(
    services: ServedServices, i: int, edges: np.ndarray
) -> tuple[QualityTally, pd.DataFrame | None]:
    """Service `i`'s served quality per step (`edges`, s); at the request level also its
    requests' table, with each request's site (index in the service's `sites`), variant
    and quality."""
    cfg, sim = services.configs[i], services.sims[i]
    levels = services.levels[i]
    quality = np.array([np.nan if lv.spec.quality is None else lv.spec.quality for lv in levels])
    penalty = np.array([d.quality_penalty for d in services.directives[i]])
    source = services.sources[i]
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


def _quality_summary(tallies: list[QualityTally], configs: list[ServiceConfig]) -> dict:
    """`served_quality_mean` over the requests served with a known quality;
    `served_below_floor_share` over those of services with a `quality_floor` (None
    when none has one or none was served)."""
    known = sum(float(t.known.sum()) for t in tallies)
    floored = [t for t, cfg in zip(tallies, configs, strict=True) if cfg.quality_floor is not None]
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


def _serving_summary(
    sims: list[ServiceSim],
    mixtures: list[dict[str, tuple[np.ndarray, np.ndarray]]],
    energy_kwh: float,
    carbon_kg: float,
    gpu_s: float,
) -> dict:
    """The requests' summary keys over every service's fidelity and served latencies
    (`ServiceSim.latency_mixtures`), with the services' facility energy `energy_kwh`,
    carbon `carbon_kg` and GPU-seconds held `gpu_s`."""
    sums = [sim.summary() for sim in sims]
    total = sum(s["requests_total"] for s in sums)
    tokens = sum(s["tokens_generated"] for s in sums)

    def worst(key: str) -> float | None:
        values = [s[key] for s in sums if not math.isnan(s[key])]
        return max(values) if values else None

    def over_requests(key: str) -> float | None:
        """The 99th percentile of `key` over every served request of every service."""
        values = np.concatenate([np.zeros(0)] + [m[key][0] for m in mixtures])
        weights = np.concatenate([np.zeros(0)] + [m[key][1] for m in mixtures])
        if not weights.sum() > 0:
            return None
        return weighted_percentile(values, weights, 99.0)

    return {
        "requests_total": total,
        "requests_served": sum(s["requests_served"] for s in sums),
        "requests_dropped": sum(s["requests_dropped"] for s in sums),
        "requests_preempted": sum(s.get("requests_preempted", 0.0) for s in sums),
        "requests_refused": sum(s.get("requests_refused", 0.0) for s in sums),
        "slo_attainment": sum(s["slo_met"] for s in sums) / total if total else None,
        "ttft_p99_requests_ms": over_requests("ttft_ms"),
        "tpot_p99_requests_ms": over_requests("tpot_ms"),
        "ttft_p99_worst_service_ms": worst("ttft_p99_ms"),
        "tpot_p99_worst_service_ms": worst("tpot_p99_ms"),
        "tokens_generated": tokens,
        "energy_serving_kwh": energy_kwh,
        "carbon_serving_kg": carbon_kg,
        "carbon_per_1k_tokens_g": carbon_kg * 1e6 / tokens if tokens else None,
        "serving_gpu_h": gpu_s / 3600.0,
        "kv_transfer_gb": _sum_or_none(sums, "kv_transfer_gb"),
        "kv_transfer_energy_kwh": _sum_or_none(sums, "kv_transfer_energy_kwh"),
    }


def _sum_or_none(sums: list[dict[str, float]], key: str) -> float | None:
    """The sum of `key` over the services whose fidelity reports it (None: none does: no
    service is disaggregated)."""
    values = [s[key] for s in sums if key in s]
    return sum(values) if values else None
