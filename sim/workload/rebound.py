"""User rebound: users who resubmit when their jobs are slowed, as a closed loop.

When a completed job took longer than it would have alone at full power, its user may react
(`sim.config.workload.ReboundConfig`): submit a follow-up job, asking more GPUs or more work. The
follow-ups change the load, which changes other jobs' delays, which changes their users'
reactions: a closed loop. `simulate` finds it by running to a fixed point: run with no
follow-ups, derive the follow-ups the results trigger, run again with them, until the
follow-ups a run triggers are those it ran with. The run is causal (a follow-up is submitted
after the job that triggered it ended, and every draw that decides a reaction is keyed to the
job's id, `sim.util.streams.id_draws`), so a fixed point is the one trajectory in which every
follow-up exists exactly when its trigger happened: the closed loop itself, not an
approximation of it. A run with no `[rebound]` table never gets here.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd

from sim.config.workload import ReboundConfig
from sim.util.streams import id_draws
from sim.workload.table import JobTable
from sim.workload.time_to_accuracy import training_draws, training_work

GENERATION_MARK = "#r"
"""Between a job's id and the generation of a follow-up: `job7#r1`, `job7#r2`."""


def perceived_delay(jobs: pd.DataFrame) -> np.ndarray:
    """d = turnaround / ideal runtime per row of a jobs table (NaN unless completed): the
    ideal runtime is the uninterrupted, uncapped one on the GPU model it finished on
    (`(end_s - start_s) / slowdown`)."""
    completed = (jobs["state"] == "completed").to_numpy()
    ideal_s = (jobs["end_s"] - jobs["start_s"]).to_numpy() / jobs["slowdown"].to_numpy()
    turnaround_s = (jobs["end_s"] - jobs["submit_s"]).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(completed & (ideal_s > 0), turnaround_s / ideal_s, np.nan)


def generation_of(job_id: str) -> int:
    """0 for a job of the workload, g for its g-th follow-up."""
    _, mark, g = job_id.rpartition(GENERATION_MARK)
    return int(g) if mark and g.isdigit() else 0


def parent_ids(job_ids: np.ndarray) -> np.ndarray:
    """The id of the job each follow-up follows (`a#r2` -> `a#r1`, `a#r1` -> `a`); "" for the
    workload's own jobs."""
    out = np.full(len(job_ids), "", dtype=object)
    for k, job_id in enumerate(job_ids.tolist()):
        g = generation_of(str(job_id))
        if g:
            root = root_of(str(job_id))
            out[k] = root if g == 1 else f"{root}{GENERATION_MARK}{g - 1}"
    return out


def root_of(job_id: str) -> str:
    """The id of the workload's job a follow-up descends from."""
    root, mark, g = job_id.rpartition(GENERATION_MARK)
    return root if mark and g.isdigit() else job_id


def followups(
    results_jobs: pd.DataFrame,
    table: JobTable,
    config: ReboundConfig,
    seed: int,
    horizon_s: float,
    largest_pool_gpus: int,
) -> JobTable:
    """The follow-up jobs the completed jobs of a run trigger (rows of `results_jobs` and
    `table` in the same order), sorted by submission; those that would be submitted at or
    after the horizon `horizon_s` are left out (they could not arrive). `seed`: the
    scenario's, of the draws; a follow-up asks at most `largest_pool_gpus` (the largest
    pool of whole GPUs of any site)."""
    d = perceived_delay(results_jobs)
    ids = table.job_id
    generation = np.array([generation_of(str(i)) for i in ids], dtype=np.int64)
    slowed = np.nan_to_num(d - 1.0, nan=0.0).clip(min=0.0)
    p = np.minimum(1.0, config.resubmit_elasticity * slowed)
    u = id_draws(seed, "rebound", ids)
    chosen = (u < p) & (generation < config.max_generations)
    submit_s = results_jobs["end_s"].to_numpy() + config.think_time_s
    chosen &= submit_s < horizon_s
    rows = np.flatnonzero(chosen)
    if len(rows) == 0:
        return _take(table, rows)
    base = _take(table, rows)
    x = slowed[rows]
    gpus = np.minimum(largest_pool_gpus, np.ceil(base.gpus * (1.0 + config.gpus_elasticity * x)))
    one_gpu = (base.gpu_milli < 1000) | (base.mig_profile != "")
    gpus = np.where(one_gpu, base.gpus, gpus)  # a share or a slice of one GPU stays one
    new_ids = np.array(
        [
            f"{root_of(str(i))}{GENERATION_MARK}{g + 1}"
            for i, g in zip(base.job_id, generation[rows], strict=True)
        ],
        dtype=object,
    )
    work = base.work_gpu_h * (1.0 + config.work_elasticity * x)
    target = np.isfinite(base.target_metric)
    u_train = np.where(target, training_draws(seed, new_ids), np.nan)
    for k in np.flatnonzero(target).tolist():  # a training job trains again, its own run
        work[k] = training_work(str(base.profile[k]), float(base.target_metric[k]), u_train[k])[0]
    new_submit = submit_s[rows]
    return _sorted(
        {
            **{f.name: getattr(base, f.name) for f in fields(base)},
            "job_id": new_ids,
            "submit_s": new_submit,
            "gpus": gpus.astype(np.int64),
            "work_gpu_h": work,
            "deadline_s": base.deadline_s - base.submit_s + new_submit,
            "training_u": u_train,
        }
    )


def followups_none(table: JobTable) -> JobTable:
    """No follow-ups: an empty table with `table`'s columns."""
    return _take(table, np.zeros(0, np.int64))


def merged(base: JobTable, extra: JobTable) -> JobTable:
    """`base` and `extra` in one table sorted by submission (stable: `base`'s rows first at
    equal times)."""
    return _sorted(
        {
            f.name: np.concatenate([getattr(base, f.name), getattr(extra, f.name)])
            for f in fields(base)
        }
    )


def _take(table: JobTable, rows: np.ndarray) -> JobTable:
    return JobTable(**{f.name: getattr(table, f.name)[rows] for f in fields(table)})


def _sorted(columns: dict[str, np.ndarray]) -> JobTable:
    order = np.argsort(columns["submit_s"], kind="stable")
    return JobTable(**{name: np.asarray(col)[order] for name, col in columns.items()})
