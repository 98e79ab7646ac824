"""Deadlines no policy could meet: the job's deadline comes before its submission plus the
fastest runtime it could possibly have.

The fastest runtime is a lower bound: the job's work on the fastest GPU model of any site
it may run on (whose pool is large enough for it, of a model it may run on), at the maximum
power limit, starting at submission, with no data moves, boots or checkpoint stalls. A
job flagged here misses its deadline whatever the policy does, so results count it apart
(`deadline_infeasible` in the summary, `deadline_infeasible` per job, and in
`meta.json`), and a deadline miss is not blamed on the policy. Such deadlines are accepted
as input: traces and generators may hold them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sim.config.sites import Site
from sim.workload.table import JobTable, gpu_model_names

__all__ = ["fastest_runtime_s", "infeasible_deadlines"]

TOLERANCE_S = 1e-6
"""A deadline this close to the fastest end counts as feasible (float rounding)."""


def fastest_runtime_s(
    jobs: JobTable, sites: Sequence[Site], speed: Callable[[str, str], float]
) -> np.ndarray:
    """Per job, the shortest time its work can take, s (see the module docstring), on the
    scenario's `sites`, where one GPU of a model does `speed(gpu model, profile)` reference
    GPU-s per s (`Scenario.speed`); inf for a job that fits no pool of its allowed sites and
    GPU models (it is rejected at arrival)."""
    profiles, profile_of = np.unique(jobs.profile.astype(str), return_inverse=True)
    entries, entry_of = np.unique(jobs.allowed_gpu_models.astype(str), return_inverse=True)
    best_speed = np.zeros(len(jobs))
    for i, site in enumerate(sites):
        allowed = ((jobs.allowed_sites >> i) & 1).astype(bool)
        for pool in site.gpus:
            speeds = np.array([speed(pool.model, str(p)) for p in profiles])
            model_ok = np.array([not e or pool.model in gpu_model_names(e) for e in entries], bool)
            fits = allowed & model_ok[entry_of] & (jobs.gpus <= pool.count)
            best_speed = np.where(fits, np.maximum(best_speed, speeds[profile_of]), best_speed)
    with np.errstate(divide="ignore"):
        return np.where(best_speed > 0, jobs.work_gpu_h * 3600.0 / (jobs.gpus * best_speed), np.inf)


def infeasible_deadlines(
    jobs: JobTable, sites: Sequence[Site], speed: Callable[[str, str], float]
) -> np.ndarray:
    """Per job, True if it has a deadline earlier than submission plus its fastest runtime
    on `sites` at `speed` (as in `fastest_runtime_s`; jobs that fit no pool are rejected,
    not counted here)."""
    fastest = fastest_runtime_s(jobs, sites, speed)
    has_deadline = ~np.isnan(jobs.deadline_s)
    fits = np.isfinite(fastest)
    with np.errstate(invalid="ignore"):
        early = jobs.deadline_s < jobs.submit_s + fastest - TOLERANCE_S
    return has_deadline & fits & early
