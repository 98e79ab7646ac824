"""The inference services' power, from their deployments' level logs (`Deployment`): exact
integrals of the logged step functions times the site's PUE (and PUE x carbon intensity),
per step of the services table, over a window, and merged into the sites' power table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from sim.engine.ledger import Site
from sim.engine.service_replicas import Deployment
from sim.util.records import in_instants, instant_starts

__all__ = [
    "StepEnergy",
    "extra_facility_ws",
    "per_step",
    "site_rows_with_extra",
    "with_extra_power",
]

_WS_PER_KWH = 3.6e6
_GS_PER_KGH = 3.6e9  # (g/kWh x W x s) -> kg


def extra_facility_ws(level: Deployment, t0_s: float, t1_s: float) -> float:
    """Facility energy of `level`'s extra power (above the ledger's idle) over [t0, t1]: the
    integral of its logged step function x its site's PUE, W s."""
    t = np.asarray(level.time_s)
    a = np.clip(t, t0_s, t1_s)
    b = np.clip(np.append(t[1:], np.inf), t0_s, t1_s)
    pue = level.site.pue
    return float(np.sum(np.asarray(level.extra_w) * (pue.cumulative(b) - pue.cumulative(a))))


class StepEnergy(NamedTuple):
    """One deployment's integrals per step of the services table (`per_step`)."""

    energy_kwh: np.ndarray
    """Facility energy of all its GPUs held (serving, idle, loading, draining), kWh."""
    carbon_kg: np.ndarray
    gpu_s: np.ndarray
    """GPU-seconds held."""
    idle_kwh: np.ndarray
    """Facility energy of the GPUs of serving replicas with nothing in flight (their idle
    and host share), kWh; part of `energy_kwh`."""
    loading_kwh: np.ndarray
    """Facility energy of the replicas in their cold start, kWh; part of `energy_kwh`."""


def per_step(level: Deployment, edges_s: np.ndarray, horizon_s: float) -> StepEnergy:
    """Per step (`edges_s`): the energies, carbon and GPU-seconds of the service's GPUs at
    `level`'s site (`StepEnergy`): exact integrals of the level log."""
    t = np.asarray(level.time_s)
    floor_w = level.pool.idle_w + level.pool.host_w
    site = level.site
    bounds_s = np.append(t, horizon_s)  # each log row's start, then the horizon
    k = np.clip(np.searchsorted(t, edges_s, side="right") - 1, 0, len(t) - 1)  # row at edge
    t_k = t[k]
    from_s = np.maximum(edges_s, t_k)

    def increments(fn) -> tuple[np.ndarray, np.ndarray]:
        """The cumulative `fn` (elementwise) over each log row, and from each edge's row to
        the edge."""
        at_bounds = fn(bounds_s)
        return np.diff(at_bounds), fn(from_s) - at_bounds[k]

    def integral(weights: np.ndarray, rows: np.ndarray, to_edge: np.ndarray) -> np.ndarray:
        """Per step, the integral of the step function `weights` (from each log row's
        time) against a cumulative function of `increments` (`rows`, `to_edge`)."""
        before = np.zeros(len(weights) + 1)
        np.cumsum(weights * rows, out=before[1:])
        return np.diff(before[k] + weights[k] * to_edge)

    pue = increments(site.pue.cumulative)
    it_w = level.it_w()
    return StepEnergy(
        energy_kwh=integral(it_w, *pue) / _WS_PER_KWH,
        carbon_kg=integral(it_w, *increments(site.facility_ci.cumulative)) / _GS_PER_KGH,
        gpu_s=integral(np.asarray(level.gpus_log, dtype=float), np.diff(bounds_s), from_s - t_k),
        idle_kwh=integral(np.asarray(level.idle_gpus_log) * floor_w, *pue) / _WS_PER_KWH,
        loading_kwh=integral(np.asarray(level.loading_w_log), *pue) / _WS_PER_KWH,
    )


def with_extra_power(
    power: pd.DataFrame, sites: list[Site], levels: list[list[Deployment]]
) -> pd.DataFrame:
    """The sites' power table with the services' extra power added (IT and facility),
    with a row wherever either changes, in the table's canonical order (`in_instants`).

    Each site's rows are built in time order from its times and those of its deployments'
    logs, each in time order already (a stable sort merges such runs rather than sorting
    anew); one stable sort of the sites' runs then puts all rows in time order, the order
    in which `in_instants` finds its instants and keys cheapest to sort."""
    codes = power["site"].cat.codes.to_numpy()
    names = ("time_s", "it_w", "facility_w", "busy_gpus")
    table = {name: power[name].to_numpy() for name in names}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in (*names, "site")}
    for site in sites:
        here = codes == site.index
        rows = {name: column[here] for name, column in table.items()}
        mine = [lv for service in levels for lv in service if lv.site is site]
        if mine:
            rows = site_rows_with_extra(rows, site, [(lv.time_s, lv.extra_w) for lv in mine])
        for name, column in rows.items():
            parts[name].append(column)
        parts["site"].append(np.full(len(rows["time_s"]), site.index, dtype=codes.dtype))
    columns = {name: np.concatenate(part) for name, part in parts.items()}
    by_time = np.argsort(columns["time_s"], kind="stable")  # the sites' runs, merged
    order, time_s = in_instants(columns["time_s"][by_time], columns["site"][by_time])
    order = by_time[order]
    return pd.DataFrame(
        {
            "time_s": time_s,
            "site": pd.Categorical.from_codes(
                columns["site"][order], categories=power["site"].cat.categories
            ),
            **{name: columns[name][order] for name in names[1:]},
        },
        copy=False,
    )


def site_rows_with_extra(
    rows: dict[str, np.ndarray], site: Site, logs: Sequence[tuple[ArrayLike, ArrayLike]]
) -> dict[str, np.ndarray]:
    """One site's power rows (`time_s`, W, GPUs; in time order) with the extra power of its
    deployments added, their level logs `logs` ((times s, extra W), in time order, in the
    order `with_extra_power` takes the deployments): a row at each instant of the site's or
    a log's times (at the instant's first time, showing the levels at its last)."""
    t_site = rows["time_s"]
    times = np.concatenate([t_site, *(np.asarray(t) for t, _ in logs)])
    times.sort(kind="stable")  # sorted runs: merged, not sorted anew
    times = times[np.r_[True, times[1:] != times[:-1]]]
    new = instant_starts(times)
    read_s = times[np.r_[np.flatnonzero(new)[1:], len(times)] - 1]
    k = np.searchsorted(t_site, read_s, side="right") - 1
    extra = np.zeros(len(read_s))
    lookups: list[tuple[np.ndarray, np.ndarray]] = []  # deployments logged at the same times
    for log_s, extra_w in logs:
        t = np.asarray(log_s)
        rows_after = next((j for u, j in lookups if np.array_equal(u, t)), None)
        if rows_after is None:  # each read time's log row + 1 (0: before the log, 0 W)
            rows_after = np.searchsorted(t, read_s, side="right")
            lookups.append((t, rows_after))
        extra += np.r_[0.0, extra_w][rows_after]
    return {
        "time_s": times[new],
        "it_w": rows["it_w"][k] + extra,
        "facility_w": rows["facility_w"][k] + extra * site.pue.values_at(read_s),
        "busy_gpus": rows["busy_gpus"][k],
    }
