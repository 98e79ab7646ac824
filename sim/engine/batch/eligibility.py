"""When the batch engine applies (`refusal`), and the proof that capacity never binds
(`capacity_refusal`): each a one-line reason it does not, None when it does."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["capacity_refusal", "peak_gpus", "refusal"]


def refusal(engine: Engine) -> str | None:
    """Why the batch engine cannot run `engine`'s world (None: it can, if the plans fit,
    `capacity_refusal`): it needs one site with one pool of whole GPUs, jobs that are
    whole-GPU, uncapped and unrestricted, and nothing that makes jobs or time interact
    (failures, spot, demand response, services, servers, power-off, an hourly PUE, WAN, periodic
    checkpoints, quotas, scaling, rebound, prediction error, a forecast other than
    perfect, replayed forecasts), and a policy with a `plan_batch` hook."""
    sc, jobs = engine.scenario, engine.jobs
    site = sc.sites[0]
    checks = [
        (len(sc.sites) != 1, "more than one site"),
        (len(site.gpus) != 1, f"site {site.name} has more than one GPU pool"),
        (bool(site.gpus[0].mig or site.gpus[0].split), "a MIG-partitioned or split pool"),
        (site.gpus[0].servers is not None, "a pool of servers (gpus[].servers)"),
        (site.power_off is not None, "sites.power_off"),
        (not isinstance(site.pue, float | int), "an hourly PUE"),
        (site.forecast is not None, "sites.forecast (replayed forecasts)"),
        (sc.forecast.model != "perfect", f"forecast model {sc.forecast.model!r}"),
        (bool(sc.demand_response), "demand_response events"),
        (bool(sc.services), "services"),
        (sc.failures is not None, "failures"),
        (sc.spot is not None, "spot"),
        (sc.wan is not None, "a WAN"),
        (sc.scaling is not None, "scaling"),
        (sc.rebound is not None, "rebound"),
        (sc.prediction_error is not None, "prediction_error"),
        (sc.virtual_clusters is not None, "virtual_clusters"),
        (sc.workload.checkpoint_interval_h is not None, "workload.checkpoint_interval_h"),
        (len(jobs) == 0, "no jobs"),
        (bool((jobs.gpu_milli != 1000).any()), "jobs sharing a GPU (gpu_milli)"),
        (bool((jobs.mig_profile != "").any()), "jobs on MIG slices"),
        (bool((jobs.allowed_gpu_models != "").any()), "jobs restricted to GPU models"),
        (bool((~np.isnan(jobs.target_metric)).any()), "jobs with a target_metric"),
        (bool((jobs.gpus > site.gpus[0].count).any()), "a job larger than the pool"),
        (not _plans_in_batch(engine.policy), _no_plan(engine.policy)),
    ]
    return next((why for failed, why in checks if failed), None)


def _plans_in_batch(policy: object) -> bool:
    """Whether `policy`'s own class defines `plan_batch`: a plan mirrors one class's
    decisions, so a subclass (which may decide differently) inherits none."""
    return "plan_batch" in vars(type(policy))


def _no_plan(policy: object) -> str:
    """The refusal for a policy without a `plan_batch` of its own class."""
    name = type(policy).__name__
    if hasattr(policy, "plan_batch"):
        return f"the policy's class {name} inherits plan_batch (a subclass must define its own)"
    return f"the policy ({name}) has no plan_batch hook"


def peak_gpus(start_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray) -> int:
    """The most GPUs the runs [start_s, end_s] hold at once, a run ending at the instant
    another starts counted with it (a sweep over the sorted ends; NaN starts: no run)."""
    ran = ~np.isnan(start_s)
    times = np.concatenate((start_s[ran], end_s[ran]))
    delta = np.concatenate((gpus[ran], -gpus[ran])).astype(np.int64)
    order = np.lexsort((-delta, times))  # at one instant, starts before ends
    return int(np.cumsum(delta[order]).max(initial=0))


def capacity_refusal(engine: Engine, start_s: np.ndarray, end_s: np.ndarray) -> str | None:
    """Why the planned runs may interact (None: they never do): their peak concurrent
    GPUs exceed the pool's, so some start would find no room and wait."""
    count = engine.scenario.sites[0].gpus[0].count
    peak = peak_gpus(start_s, end_s, engine.jobs.gpus)
    if peak > count:
        return f"capacity binds: the planned runs hold up to {peak:,} GPUs of the {count:,}"
    return None
