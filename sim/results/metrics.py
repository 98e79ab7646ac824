"""Metrics as pure functions over the result tables.

Energy is the exact integral of the power step function; operational carbon the exact
integral of facility power x the carbon-intensity step function (both piecewise
constant, so the integral is a sum over the merged breakpoints, done with the signal's
prefix sums); energy cost likewise with the price curves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.grid import CarbonSignal, signal_for_site
from sim.grid.pue import PueProfile
from sim.market.dr_events import DrJobRecord, DrWindow

if TYPE_CHECKING:
    from sim.market.billing import PriceCurve
    from sim.results.files import Results

__all__ = [
    "busy_gpu_s",
    "deadline_misses",
    "demand_response_metrics",
    "demand_response_table",
    "dr_job_metrics",
    "ideal_runtime_s",
    "jain_index",
    "operational_carbon_over_time_kg",
    "site_energy_cost",
    "site_energy_kwh",
    "site_operational_carbon_kg",
]


def ideal_runtime_s(work_gpu_h, gpus, model, profile, speed) -> np.ndarray:
    """Runtime uninterrupted and uncapped on the GPU model the job ran on (NaN if it never
    ran), s; `speed(model, profile)`: one GPU's work rate (the scenario's `Scenario.speed`)."""
    out = np.full(len(work_gpu_h), np.nan)
    ran = np.array([m is not None for m in model], dtype=bool)
    pairs = pd.DataFrame({"m": model[ran], "p": profile[ran]}).drop_duplicates()
    for m, p in pairs.itertuples(index=False):
        sel = ran & (model == m) & (profile == p)
        out[sel] = work_gpu_h[sel] * 3600.0 / (gpus[sel] * speed(m, p))
    return out


def _site_steps(power: pd.DataFrame, site: str, horizon_s: float):
    rows = power[power["site"] == site]
    t = rows["time_s"].to_numpy()
    t_next = np.append(t[1:], horizon_s)
    return rows, t, t_next


def site_energy_kwh(
    power: pd.DataFrame, sites: list[str], horizon_s: float, column: str
) -> dict[str, float]:
    """Energy per site over [0, horizon], kWh: the integral of the power step function in
    `column` ("it_w" or "facility_w")."""
    out = {}
    for s in sites:
        rows, t, t_next = _site_steps(power, s, horizon_s)
        out[s] = float(np.sum(rows[column].to_numpy() * (t_next - t)) / 3.6e6)
    return out


def busy_gpu_s(power: pd.DataFrame, sites: list[str], horizon_s: float) -> float:
    """Allocated GPU-seconds over all sites."""
    total = 0.0
    for s in sites:
        rows, t, t_next = _site_steps(power, s, horizon_s)
        total += float(np.sum(rows["busy_gpus"].to_numpy() * (t_next - t)))
    return total


def site_operational_carbon_kg(
    power: pd.DataFrame, sites: list[str], facility_ci: list[CarbonSignal], horizon_s: float
) -> dict[str, float]:
    """Per site, the exact integral of IT power x PUE x carbon intensity over [0, horizon],
    kg. The power log has a row at every change of IT power or PUE, so IT power is constant
    on each interval and `facility_ci` (PUE x intensity) integrates the rest exactly."""
    out = {}
    for s, fci in zip(sites, facility_ci, strict=True):
        rows, t, t_next = _site_steps(power, s, horizon_s)
        ci_ws = fci.cumulative(t_next) - fci.cumulative(t)  # (g per IT kWh) x s per interval
        out[s] = float(np.sum(rows["it_w"].to_numpy() * ci_ws)) / 3.6e9
    return out


def site_energy_cost(
    power: pd.DataFrame, sites: list[str], prices: list[PriceCurve], horizon_s: float
) -> dict[str, float]:
    """Per site, the exact integral of facility power x the energy price over [0, horizon],
    in the prices' currency. Facility power is constant between rows of the power log (it
    has a row at every change of IT power or PUE) and `prices` (currency per kWh) are step
    functions with prefix sums, so each interval contributes power x a prefix difference."""
    out = {}
    for s, price in zip(sites, prices, strict=True):
        rows, t, t_next = _site_steps(power, s, horizon_s)
        price_ws = price.cumulative(t_next) - price.cumulative(t)  # (per kWh) x s
        out[s] = float(np.sum(rows["facility_w"].to_numpy() * price_ws)) / 3.6e6
    return out


def operational_carbon_over_time_kg(results: Results, times_s: np.ndarray) -> np.ndarray:
    """Cumulative operational carbon of all sites from the start to each of `times_s` (s,
    within [0, horizon]), kg: the same exact integral as `carbon_operational_kg`, which is
    its value at the horizon. Rebuilds each site's PUE x carbon-intensity step function
    from `results.scenario`."""
    scenario, times_s = results.scenario, np.asarray(times_s, dtype=float)
    total = np.zeros(len(times_s))
    for i, site in enumerate(scenario.sites):
        signal = signal_for_site(site, i, scenario.start, scenario.horizon_s, scenario.years)
        fci = PueProfile(site.pue, scenario.start).times(signal)
        rows, t, t_next = _site_steps(results.power, site.name, scenario.horizon_s)
        if not len(t):
            continue
        it_w = rows["it_w"].to_numpy()
        before = np.concatenate(
            [[0.0], np.cumsum(it_w * (fci.cumulative(t_next) - fci.cumulative(t)))]
        )
        k = np.clip(np.searchsorted(t, times_s, side="right") - 1, 0, len(t) - 1)
        partial = it_w[k] * (fci.cumulative(np.maximum(times_s, t[k])) - fci.cumulative(t[k]))
        total += (before[k] + partial) / 3.6e9
    return total


def deadline_misses(jobs: pd.DataFrame, horizon_s: float) -> int:
    """Jobs with a deadline not completed by it (rejected jobs are counted apart)."""
    d = jobs["deadline_s"]
    late = (jobs["state"] == "completed") & (jobs["end_s"] > d)
    never = (jobs["state"] == "unfinished") & (d <= horizon_s)
    return int((late | never).sum())


def demand_response_table(
    power: pd.DataFrame, sites: list[str], windows: list[DrWindow], horizon_s: float
) -> pd.DataFrame:
    """One row per demand-response event, from the facility power step function:

    - `compliance`: fraction of the event with facility power at or under the limit;
    - `overshoot_kwh`: facility energy above the limit during the event;
    - `baseline_kw`: mean facility power in the hour before the event's notice;
    - `energy_kwh`, `peak_kw`: facility energy and highest power during the event;
    - `shed_kwh` = baseline x duration - energy; `peak_reduction_kw` = baseline - peak;
    - `rebound_peak_kw`: highest power in the `rebound_h` after the event minus the baseline
      (> 0: load deferred by the event came back above the baseline)."""
    rows = []
    for w in windows:
        steps, t, t_next = _site_steps(power, sites[w.site], horizon_s)
        facility_kw = steps["facility_w"].to_numpy() / 1000.0
        dt = np.clip(t_next, w.start_s, w.end_s) - np.clip(t, w.start_s, w.end_s)
        inside = dt > 0
        excess_kw = facility_kw - w.limit_kw
        over = inside & (excess_kw > 1e-9 * max(w.limit_kw, 1.0))
        energy_kwh = float(np.sum(facility_kw * dt)) / 3600.0
        peak_kw = float(facility_kw[inside].max()) if inside.any() else w.baseline_kw
        after_end = min(w.end_s + w.rebound_h * 3600.0, horizon_s)
        after = (t < after_end) & (t_next > w.end_s)
        rebound_kw = float(facility_kw[after].max()) - w.baseline_kw if after.any() else None
        duration_h = (w.end_s - w.start_s) / 3600.0
        rows.append(
            {
                "site": sites[w.site],
                "start_s": w.start_s,
                "end_s": w.end_s,
                "limit_kw": w.limit_kw,
                "baseline_kw": w.baseline_kw,
                "energy_kwh": energy_kwh,
                "peak_kw": peak_kw,
                "compliance": 1.0 - float(np.sum(dt[over])) / (w.end_s - w.start_s),
                "overshoot_kwh": float(np.sum(excess_kw[over] * dt[over])) / 3600.0,
                "shed_kwh": w.baseline_kw * duration_h - energy_kwh,
                "peak_reduction_kw": w.baseline_kw - peak_kw,
                "rebound_peak_kw": rebound_kw,
            }
        )
    columns = [
        "site",
        "start_s",
        "end_s",
        "limit_kw",
        "baseline_kw",
        "energy_kwh",
        "peak_kw",
        "compliance",
        "overshoot_kwh",
        "shed_kwh",
        "peak_reduction_kw",
        "rebound_peak_kw",
    ]
    return pd.DataFrame(rows, columns=columns).astype({"rebound_peak_kw": float})


def demand_response_metrics(dr: pd.DataFrame) -> dict[str, Any]:
    """Summary of the events: `dr_compliance` over all event time, `dr_overshoot_kwh` and
    `dr_energy_shed_kwh` summed, `dr_peak_reduction_kw` the mean over events,
    `dr_rebound_peak_kw` the largest. None (0 for energies) without events."""
    if dr.empty:
        return {
            "dr_overshoot_kwh": 0.0,
            "dr_compliance": None,
            "dr_energy_shed_kwh": 0.0,
            "dr_peak_reduction_kw": None,
            "dr_rebound_peak_kw": None,
        }
    duration_s = dr["end_s"] - dr["start_s"]
    rebound = dr["rebound_peak_kw"].dropna()
    return {
        "dr_overshoot_kwh": float(dr["overshoot_kwh"].sum()),
        "dr_compliance": float((dr["compliance"] * duration_s).sum() / duration_s.sum()),
        "dr_energy_shed_kwh": float(dr["shed_kwh"].sum()),
        "dr_peak_reduction_kw": float(dr["peak_reduction_kw"].mean()),
        "dr_rebound_peak_kw": float(rebound.max()) if len(rebound) else None,
    }


def dr_job_metrics(records: list[DrJobRecord]) -> dict[str, Any]:
    """What events did to the jobs at their sites: how many lost work (ran slower than
    uncapped, or were suspended, in events), how many were suspended in one, the reference
    GPU-hours of work not done compared with running uncapped, and the distribution of the
    in-event slowdown (uncapped / actual speed) of the jobs that lost work while running."""
    done = np.array([r.done_gpu_s for r in records])
    uncapped = np.array([r.uncapped_gpu_s for r in records])
    paused = np.array([r.paused_s for r in records])
    lost = done < uncapped * (1.0 - 1e-9)
    ran = lost & (done > 0)
    slowdown = uncapped[ran] / done[ran]
    return {
        "dr_jobs_affected": int(lost.sum()),
        "dr_jobs_paused": int((paused > 0).sum()),
        "dr_throughput_loss_gpu_h": float(np.sum(uncapped - done)) / 3600.0,
        "dr_slowdown_mean": float(slowdown.mean()) if len(slowdown) else None,
        "dr_slowdown_p95": float(np.percentile(slowdown, 95)) if len(slowdown) else None,
    }


def jain_index(x: np.ndarray) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2), in (0, 1]; None for no data (or all 0)."""
    if len(x) == 0 or not np.any(x):
        return None
    return float(x.sum() ** 2 / (len(x) * np.square(x).sum()))
