"""The assembly of results from a finished engine: the power and event logs drained, every
component's `write_results`, the totals across components and meta.json's entries
(`build_results`), in the order of `sim.results`' contract."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.grid.catalog import signals_meta, site_year_plans
from sim.grid.data_dir import grid_data_source
from sim.results import (
    JOB_COLUMNS,
    SUMMARY_KEYS,
    ResultParts,
    Results,
    git_revision,
    library_versions,
    package_version,
)
from sim.util.columns import stored_once, text_array
from sim.util.memory import release_free_memory
from sim.workload.feasibility import infeasible_deadlines
from sim.workload.rebound import parent_ids
from sim.workload.time_to_accuracy import outcome_columns, outcome_summary

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["build_results"]


def build_results(engine: Engine, wall_s: float) -> Results:
    """The results of a finished run: the power and event logs drained into their tables
    (emptying the engine's logs), then every component's `write_results` hook, then the
    totals across components, in the documented column and key order."""
    scenario = engine.scenario
    names = engine.fleet.names
    jt = engine.jobs
    infeasible = infeasible_deadlines(jt, scenario.sites, scenario.speed)
    # Each step below frees what the one before drained; the heap's free pages go back to
    # the OS in between, so that the steps' peaks do not stack (sim.util.memory).
    release_free_memory()
    power = engine.fleet.power_log.drain_frame(names)
    release_free_memory()
    # one text array of the ids for the jobs table and the events' job categories
    job_ids = text_array(jt.job_id)
    out = ResultParts(power=power, events=engine.events.drain_frame(job_ids, names))
    release_free_memory()
    # The workload's own columns; text columns of few distinct values are categoricals.
    out.job_columns.update(
        job_id=job_ids,
        submit_s=jt.submit_s,
        deadline_s=jt.deadline_s,
        deadline_infeasible=infeasible,
    )
    engine.write_results(out)
    release_free_memory()
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
    release_free_memory()
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
    # A column of one value (no failures, no targets: zeros, NaN) is stored once; copy=False:
    # the columns as written, not a consolidated copy of them all (memory).
    for name in list(cols):
        cols[name] = stored_once(cols[name])
    jobs = pd.DataFrame(_ordered(cols, JOB_COLUMNS), copy=False)

    meta = {
        "dcsim_version": package_version(),
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "libraries": library_versions(),
        "grid_data": grid_data_source(),
        "seed": scenario.seed,
        "scenario_name": scenario.name,
        "scenario_start": scenario.start.isoformat(),
        "policy": type(engine.policy).__name__,
        "policy_objective": _policy_objectives(engine.policy),
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
        out.tables.get("onsite"),
        out.tables.get("functions"),
        out.tables.get("servers"),
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


def _policy_objectives(policy: object) -> dict[str, Any] | None:
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
