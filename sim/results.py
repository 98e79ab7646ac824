"""Results of a run: tables, metrics as pure functions over them, and files.

Energy is the exact integral of the power step function; operational carbon the exact
integral of facility power x the carbon-intensity step function (both piecewise
constant, so the integral is a sum over the merged breakpoints, done with the signal's
prefix sums). Files are written atomically: to a temporary name, then renamed.
"""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.config.loading import load_scenario
from sim.config.scenario import Scenario
from sim.grid import CarbonSignal
from sim.grid.catalog import signals_meta, site_year_plans
from sim.util.atomic import write_atomic
from sim.util.records import DrJobRecord, DrWindow
from sim.workload.feasibility import infeasible_deadlines
from sim.workload.rebound import parent_ids
from sim.workload.time_to_accuracy import outcome_columns, outcome_summary

TERMINAL_STATES = ("completed", "rejected", "unfinished")
"""What a job's `state` in the jobs table can be at the horizon."""

if TYPE_CHECKING:
    from sim.engine import Engine
    from sim.market.billing import PriceCurve

SUMMARY_KEYS = (
    "jobs_submitted",
    "jobs_completed",
    "jobs_rejected",
    "jobs_unfinished",
    "energy_it_kwh",
    "energy_facility_kwh",
    "energy_jobs_kwh",
    "energy_idle_kwh",
    "energy_checkpoint_kwh",
    "work_lost_gpu_h",
    "failures",
    "work_lost_failures_gpu_h",
    "spot_evictions",
    "work_lost_evictions_gpu_h",
    "spot_gpu_h",
    "targets_reached",
    "time_to_accuracy_mean_h",
    "energy_to_accuracy_mean_kwh",
    "rebound_jobs",
    "rebound_work_gpu_h",
    "carbon_operational_kg",
    "carbon_operational_decision_kg",
    "carbon_embodied_kg",
    "carbon_wan_kg",
    "carbon_total_kg",
    "energy_wan_kwh",
    "wan_data_gb",
    "jobs_away_share",
    "wait_mean_h",
    "jct_mean_h",
    "jct_p95_h",
    "deadline_misses",
    "deadline_infeasible",
    "gpu_utilization",
    "dr_overshoot_kwh",
    "dr_compliance",
    "dr_energy_shed_kwh",
    "dr_peak_reduction_kw",
    "dr_rebound_peak_kw",
    "dr_jobs_affected",
    "dr_jobs_paused",
    "dr_throughput_loss_gpu_h",
    "dr_slowdown_mean",
    "dr_slowdown_p95",
    "dr_payment",
    "dr_penalty",
    "slowdown_jain_index",
    "requests_total",
    "requests_served",
    "requests_dropped",
    "slo_attainment",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "tokens_generated",
    "energy_serving_kwh",
    "carbon_serving_kg",
    "carbon_per_1k_tokens_g",
    "serving_gpu_h",
    "served_quality_mean",
    "served_below_floor_share",
    "cost_compute",
    "cost_energy",
    "cost_demand_charge",
    "cost_reserved",
    "mig_repartitions",
    "sim_wall_s",
)
FILES = (
    "summary.json",
    "jobs.parquet",
    "sites.parquet",
    "power.parquet",
    "events.parquet",
    "dr_events.parquet",
    "services.parquet",
    "scenario.toml",
    "meta.json",
)
"""The files every run writes."""
OPTIONAL_FILES = ("requests.parquet",)
"""Files a run writes only when it has them (requests: the request-level fidelity)."""


@dataclass
class Results:
    """What one run produced. `summary` is a flat dict of metrics, names carrying units;
    a metric with no data (e.g. no job completed) is None."""

    scenario: Scenario
    summary: dict[str, Any]
    jobs: pd.DataFrame
    sites: pd.DataFrame
    """One row per site: GPUs, utilisation, facility energy, operational carbon, the
    effective carbon intensity of its energy (g/kWh), jobs finished or stopped there."""
    power: pd.DataFrame
    events: pd.DataFrame
    dr_events: pd.DataFrame
    """One row per demand-response event: limit, baseline, energy, peak, compliance,
    overshoot, energy shed, rebound peak (see `demand_response_table`)."""
    meta: dict[str, Any]
    services: pd.DataFrame = field(default_factory=pd.DataFrame)
    """One row per inference service and step (`sim.engine.service_results.SERVICE_COLUMNS`)."""
    requests: pd.DataFrame | None = None
    """One row per request of every service (request-level fidelity only; else None)."""

    def save(self, out_dir: str | Path) -> Path:
        """Write the result files into `out_dir` (created if needed), each atomically."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "jobs.parquet", lambda p: self.jobs.to_parquet(p, index=False))
        write_atomic(out / "sites.parquet", lambda p: self.sites.to_parquet(p, index=False))
        write_atomic(out / "power.parquet", lambda p: self.power.to_parquet(p, index=False))
        write_atomic(out / "events.parquet", lambda p: self.events.to_parquet(p, index=False))
        write_atomic(out / "dr_events.parquet", lambda p: self.dr_events.to_parquet(p, index=False))
        write_atomic(out / "services.parquet", lambda p: self.services.to_parquet(p, index=False))
        requests = self.requests
        if requests is not None:
            write_atomic(out / "requests.parquet", lambda p: requests.to_parquet(p, index=False))
        write_atomic(out / "scenario.toml", lambda p: p.write_text(self.scenario.to_toml()))
        write_atomic(out / "meta.json", lambda p: p.write_text(json.dumps(self.meta, indent=2)))
        write_atomic(
            out / "summary.json", lambda p: p.write_text(json.dumps(self.summary, indent=2))
        )
        return out

    @classmethod
    def load(cls, out_dir: str | Path) -> Results:
        """Read back what `save` wrote."""
        d = Path(out_dir)
        return cls(
            scenario=load_scenario(d / "scenario.toml"),
            summary=json.loads((d / "summary.json").read_text()),
            jobs=pd.read_parquet(d / "jobs.parquet"),
            sites=pd.read_parquet(d / "sites.parquet"),
            power=pd.read_parquet(d / "power.parquet"),
            events=pd.read_parquet(d / "events.parquet"),
            dr_events=pd.read_parquet(d / "dr_events.parquet"),
            meta=json.loads((d / "meta.json").read_text()),
            services=pd.read_parquet(d / "services.parquet")
            if (d / "services.parquet").exists()
            else pd.DataFrame(),
            requests=pd.read_parquet(d / "requests.parquet")
            if (d / "requests.parquet").exists()
            else None,
        )


# --- building results from a finished engine ---------------------------------------------


@dataclass(slots=True)
class ResultParts:
    """What a finished run's components write, assembled by `sim.results.build_results`.

    `power` (the site power step functions) and `events` (the event log) are built before
    the hooks run; components add to the other three, in the core's component order, so a
    component may read what an earlier one wrote (the demand-response meter reads the
    runs' `slowdown`)."""

    power: pd.DataFrame
    events: pd.DataFrame
    job_columns: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-job result columns, one value per job in the workload's order."""
    summary: dict[str, Any] = field(default_factory=dict)
    """Summary metrics, names with units (`sim.results.SUMMARY_KEYS` orders them)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    """Further result tables by name (`dr_events`)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Entries for meta.json (how inputs were read)."""


JOB_COLUMNS = (
    "job_id",
    "submit_s",
    "start_s",
    "end_s",
    "site",
    "gpu_model",
    "gpus",
    "profile",
    "work_gpu_h",
    "deadline_s",
    "deadline_infeasible",
    "state",
    "reason",
    "wait_h",
    "jct_h",
    "gpu_h",
    "energy_kwh",
    "checkpoint_kwh",
    "carbon_kg",
    "embodied_kg",
    "wan_gb",
    "wan_energy_kwh",
    "wan_carbon_kg",
    "work_lost_gpu_h",
    "slowdown",
    "dr_slowdown",
    "failures",
    "work_lost_failures_gpu_h",
    "target_metric",
    "target_reached",
    "time_to_accuracy_h",
    "energy_to_accuracy_kwh",
    "rebound_of",
    "gpu_milli",
    "mig_profile",
)
"""The columns of `jobs.parquet`, in order; a new component's columns follow these."""


def build_results(engine: Engine, wall_s: float) -> Results:
    """The results of a finished run: the power and event logs drained into their tables
    (emptying the engine's logs), then every component's `write_results` hook, then the
    totals across components, in the documented column and key order."""
    scenario = engine.scenario
    names = engine.fleet.names
    jt = engine.jobs
    infeasible = infeasible_deadlines(jt, scenario.sites, scenario.speed)
    out = ResultParts(
        power=engine.fleet.power_log.drain_frame(names),
        events=engine.events.drain_frame(jt.job_id, names),
    )
    # The workload's own columns; text columns of few distinct values are categoricals.
    out.job_columns.update(
        job_id=jt.job_id,
        submit_s=jt.submit_s,
        deadline_s=jt.deadline_s,
        deadline_infeasible=infeasible,
    )
    engine.write_results(out)
    cols = out.job_columns
    training = outcome_columns(
        jt,
        np.asarray(cols["profile"], dtype=object),
        cols["state"] == "completed",
        cols["start_s"],
        cols["end_s"],
        cols["energy_kwh"],
    )
    cols.update(training)
    parents = parent_ids(jt.job_id) if scenario.rebound is not None else None
    cols["rebound_of"] = pd.Categorical([""] * len(jt) if parents is None else parents)
    summary = out.summary
    summary.update(outcome_summary(training))
    followup = np.zeros(len(jt), bool) if parents is None else parents != ""
    summary["rebound_jobs"] = int(followup.sum())
    summary["rebound_work_gpu_h"] = float(np.asarray(cols["work_gpu_h"])[followup].sum())
    summary["carbon_total_kg"] = (
        summary["carbon_operational_kg"] + summary["carbon_embodied_kg"] + summary["carbon_wan_kg"]
    )
    summary["deadline_infeasible"] = int(infeasible.sum())
    summary["sim_wall_s"] = wall_s
    # copy=False: the columns as written, not a consolidated copy of them all (memory).
    jobs = pd.DataFrame(_ordered(out.job_columns, JOB_COLUMNS), copy=False)

    meta = {
        "dcsim_version": package_version(),
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "seed": scenario.seed,
        "scenario_name": scenario.name,
        "scenario_start": scenario.start.isoformat(),
        "policy": type(engine.policy).__name__,
        "policy_objective": policy_objectives(engine.policy),
        "carbon_signal_kind": {s.name: s.signal.kind for s in engine.fleet.sites},
        "carbon_signals": signals_meta(
            scenario.sites, scenario.start, scenario.horizon_s, scenario.years
        ),
        "trace_repairs": {s.name: dict(s.signal.repairs) for s in engine.fleet.sites},
        "serving_fidelity": scenario.serving.fidelity if scenario.services else None,
        "wan_model": "none"
        if engine.checkpoints.wan is None
        else engine.checkpoints.wan.config.energy_model,
        "wan_contention": engine.checkpoints.wan is not None
        and engine.checkpoints.wan.config.contention,
        "throughput_table": None if scenario.throughput is None else str(scenario.throughput.file),
        "prediction_error": _prediction_meta(engine),
        "years": _years_meta(engine),
        "forecast_replay": {r.site: r.record() for r in engine.forecaster.replays()} or None,
        "sim_wall_s": wall_s,
        "times": "seconds since scenario_start (UTC)",
        "deadline_infeasible_at_submission": {
            "jobs": int(infeasible.sum()),
            "first_job_ids": [str(i) for i in jt.job_id[infeasible][:10]],
            "rule": "deadline < submit + the fastest runtime on any allowed site "
            "(sim/workload/feasibility.py)",
        },
        **out.meta,
    }
    return Results(
        scenario,
        _ordered(summary, SUMMARY_KEYS),
        jobs,
        out.tables["sites"],
        out.power,
        out.events,
        out.tables["dr_events"],
        meta,
        out.tables["services"],
        out.tables.get("requests"),
    )


def _years_meta(engine: Engine) -> dict[str, Any]:
    """The scenario's `years` rule and every zone-year substitution it made: per site zone
    (and blend zone), per WAN zone read and per site's wholesale prices
    (docs/grid-years.md)."""
    scenario = engine.scenario
    wan = engine.checkpoints.wan
    sites = [
        {"site": name, "signal": which, **plan.meta()}
        for name, which, plan in site_year_plans(
            scenario.sites, scenario.start, scenario.horizon_s, scenario.years
        )
    ]
    wan_zones = [] if wan is None else [{"wan": True, **plan.meta()} for plan in wan.year_plans()]
    prices = [
        {"site": name, "prices": True, **tariff.meta["year_plan"]}
        for name, tariff in zip(engine.fleet.names, engine.fleet.tariffs, strict=True)
        if tariff is not None and "year_plan" in tariff.meta
    ]
    return {
        "rule": scenario.years,
        "substitutions": [p for p in sites + wan_zones + prices if p["shift_days"] or p["wrapped"]],
    }


def policy_objectives(policy: object) -> dict[str, Any] | None:
    """What the policy (or each member of a chain, by class name) minimises, for meta.json:
    its `goal` (`policies.kit.Objective`: objective and carbon price); None if no policy of
    the run has one."""
    members = getattr(policy, "members", [policy])
    found = {
        type(m).__name__: m.goal.meta()
        for m in members
        if hasattr(getattr(m, "goal", None), "meta")
    }
    return found or None


def _prediction_meta(engine: Engine) -> dict[str, Any] | None:
    """The run's `[prediction_error]` settings for meta.json (None: exact)."""
    config, prediction = engine.scenario.prediction_error, engine.queries.prediction
    if config is None or prediction is None:
        return None
    return {
        "sigma_frac": config.sigma_frac,
        "sigma_by_model": {m: config.sigma(m) for m in prediction.columns},
        "factor": "exp(sigma x z), z ~ N(0, 1), one per (job, GPU model), "
        "from the 'prediction' random stream",
        "applies_to": "state.estimate, state.runtime_s, state.expected_ends",
    }


def _ordered(values: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """`values` with the keys of `order` first, in that order, then any others as added."""
    missing = [k for k in order if k not in values]
    if missing:
        raise RuntimeError(f"no component wrote {missing}")
    return {**{k: values[k] for k in order}, **values}


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


# --- metrics: pure functions over the tables -------------------------------------------------


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
    from sim.engine.ledger import PueProfile
    from sim.grid import signal_for_site

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


def package_version() -> str:
    try:
        return metadata.version("dcsim")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_revision() -> str | None:
    """The commit dcsim runs from, `-dirty` if it has uncommitted changes; None outside git."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=40"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
