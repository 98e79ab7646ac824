"""Jobs given as a measured workload trained to a target metric instead of fixed GPU-hours.

A job with a `target_metric` trains one of Zeus's workloads (`sim.models.training`) at its profile's
batch size (`resnet50@512`; a plain `resnet50` means the workload's default batch size) until
the metric reaches the target. Its epochs come from the Zeus train trace: a uniform draw per
job (from the run's `training` random stream, `sim.util.streams`, and the job's id, so it does not
depend on the order of the file) picks one of the trace's runs
(seeds) at that batch size, as Zeus's simulator samples a training path; a run that never
reached the target trains the workload's maximum epochs and ends without it. Its work, in
reference GPU-hours, is those epochs times the batch size's time per epoch on the reference
GPU (`sim.models.hardware.reference_epoch_s`), so that on a GPU Zeus measured it runs exactly the
measured time per epoch, at the measured power, under any measured power limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sim.models import hardware, training
from sim.util.streams import id_draws
from sim.workload.table import JobTable


@dataclass(frozen=True, slots=True)
class TrainingJobs:
    """The training-to-target columns of a job file, resolved (one entry per row)."""

    profile: np.ndarray
    """str (object): a target row's batch-size profile (`resnet50@256`); others unchanged."""
    work_gpu_h: np.ndarray
    """float64: a target row's work, reference GPU-hours; others NaN."""
    training_u: np.ndarray
    """float64 in [0, 1): a target row's draw of its training run; others NaN."""
    reached: np.ndarray
    """bool: whether a target row's drawn run reaches its target (False for other rows)."""
    problem: np.ndarray
    """str (object): why a target row cannot be trained ("" if it can, or for other rows)."""


def training_draws(seed: int, job_ids: np.ndarray) -> np.ndarray:
    """A uniform draw in [0, 1) per job that picks its training run: the run's `training`
    stream and the job's id (`sim.util.streams.id_draws`)."""
    return id_draws(seed, "training", job_ids)


def resolve_targets(profile: np.ndarray, target: np.ndarray, u: np.ndarray) -> TrainingJobs:
    """Each row's batch-size profile, work and whether its run reaches the target, for the
    rows with a finite `target` (the others pass through); `u` their draws."""
    n = len(profile)
    out_profile = np.asarray(profile, dtype=object).copy()
    work = np.full(n, np.nan)
    draws = np.full(n, np.nan)
    reached = np.zeros(n, bool)
    problem = np.full(n, "", dtype=object)
    for i in np.flatnonzero(np.isfinite(target)).tolist():
        try:
            out_profile[i] = target_profile(str(profile[i]))
            work[i], reached[i] = training_work(out_profile[i], float(target[i]), float(u[i]))
        except ValueError as e:
            problem[i] = str(e)
            continue
        draws[i] = u[i]
    return TrainingJobs(out_profile, work, draws, reached, problem)


def training_work(profile: str, target: float, u: float) -> tuple[float, bool]:
    """(work in reference GPU-h, whether the run reaches the target) of training the
    batch-size `profile` to `target` along the run the draw `u` picks. ValueError if the
    trace has no run at that batch size that reaches the target."""
    workload, batch = training.split_batch_profile(profile)  # type: ignore[misc]
    wl = training.TRAINING_WORKLOADS[workload]
    wl.require_reached(batch, target)
    epochs, reached = wl.epochs_to_target(batch, target, u)
    return work_of(workload, batch, epochs), reached


def work_of(workload: str, batch_size: int, epochs: float) -> float:
    """Reference GPU-hours of `epochs` of `workload` at `batch_size`."""
    return epochs * hardware.reference_epoch_s(workload, batch_size) / 3600.0


def training_options(profile: str, target: float, u: float | None) -> dict[int, float]:
    """{batch size: work to `target`, reference GPU-h} of the workload of a batch-size
    `profile` at every batch size Zeus trained and measured where a run reaches the target:
    along the run the draw `u` picks, or (u None) the mean over the trace's runs."""
    workload = training.split_batch_profile(profile)[0]  # type: ignore[index]
    wl = training.TRAINING_WORKLOADS[workload]
    out = {}
    for b in training.measured_batch_sizes(workload):
        if b not in wl.epochs or target not in wl.epochs[b]:
            continue
        runs = wl.runs(b, target)
        if all(math.isnan(e) for e in runs):
            continue
        if u is None:
            epochs = float(np.mean([wl.max_epochs if math.isnan(e) else e for e in runs]))
        else:
            epochs = wl.epochs_to_target(b, target, u)[0]
        out[b] = work_of(workload, b, epochs)
    return out


def target_profile(profile: str) -> str:
    """The batch-size profile a target job trains: `resnet50@512` as given, `resnet50` at its
    default batch size (`resnet50@256`). ValueError for a profile that cannot have a target."""
    if training.split_batch_profile(profile) is not None:
        return profile
    wl = training.TRAINING_WORKLOADS.get(profile)
    if wl is None:
        names = ", ".join(training.TRAINING_WORKLOADS)
        raise ValueError(f"needs a measured workload as profile ({names}), got {profile!r}")
    return training.batch_profile(profile, wl.default_batch_size)


def runs_reach_target(jobs: JobTable, profiles: np.ndarray) -> np.ndarray:
    """bool per job: whether the training run drawn for a target job reaches its target at
    the batch size of its profile in `profiles` (False for jobs without a target)."""
    reached = np.zeros(len(jobs), bool)
    for j in np.flatnonzero(np.isfinite(jobs.target_metric)).tolist():
        target, u = float(jobs.target_metric[j]), float(jobs.training_u[j])
        reached[j] = training_work(str(profiles[j]), target, u)[1]
    return reached


def outcome_columns(
    jobs: JobTable, profiles, completed: np.ndarray, start_s, end_s, energy_kwh
) -> dict[str, Any]:
    """The jobs-table columns of training to a target: `target_metric` (NaN: fixed work),
    `target_reached` (nullable bool: NA for jobs without a target; True once a completed
    job's run reached it), `time_to_accuracy_h` (first start to completion, h) and
    `energy_to_accuracy_kwh` (all the job's energy as charged, kWh), NaN unless reached;
    `profiles`: the profile each job trained as."""
    has_target = np.isfinite(jobs.target_metric)
    reached = has_target & np.asarray(completed, bool) & runs_reach_target(jobs, profiles)
    return {
        "target_metric": jobs.target_metric,
        "target_reached": pd.arrays.BooleanArray(reached, ~has_target),  # NA: no target
        "time_to_accuracy_h": np.where(reached, (end_s - start_s) / 3600.0, np.nan),
        "energy_to_accuracy_kwh": np.where(reached, np.asarray(energy_kwh, float), np.nan),
    }


def outcome_summary(columns: dict[str, Any]) -> dict[str, Any]:
    """Summary keys: `targets_reached` (jobs), and the means over them of time (h) and energy
    (kWh) to accuracy (None if no job reached its target)."""
    reached = int(np.asarray(columns["target_reached"].fillna(False), bool).sum())
    tta, eta = columns["time_to_accuracy_h"], columns["energy_to_accuracy_kwh"]
    return {
        "targets_reached": reached,
        "time_to_accuracy_mean_h": float(np.nanmean(tta)) if reached else None,
        "energy_to_accuracy_mean_kwh": float(np.nanmean(eta)) if reached else None,
    }
