"""The inference services' power, from their deployments' level logs (`Deployment`): exact
integrals of the logged step functions times the site's PUE (and PUE x carbon intensity),
per step of the services table, over a window, and merged into the sites' power table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.engine.ledger import Site
from sim.engine.service_replicas import Deployment
from sim.util.records import in_instants, instant_starts

__all__ = ["extra_facility_ws", "per_step", "with_extra_power"]

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


def per_step(
    level: Deployment, edges_s: np.ndarray, horizon_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step (`edges_s`): facility energy (kWh), carbon (kg) and GPU-seconds held of the
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

    energy_kwh = np.diff(cumulative_at(edges_s, it_w, cum_pue)) / _WS_PER_KWH
    carbon_kg = np.diff(cumulative_at(edges_s, it_w, cum_ci)) / _GS_PER_KGH
    gpu_s = np.diff(cumulative_at(edges_s, gpus, lambda x: np.asarray(x, dtype=float)))
    return energy_kwh, carbon_kg, gpu_s


def with_extra_power(
    power: pd.DataFrame, sites: list[Site], levels: list[list[Deployment]]
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
