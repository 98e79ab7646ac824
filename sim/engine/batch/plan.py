"""The batch engine's schedule: every job's arrival decision time, the policy's deferrals
(`plan_batch`), and the start and end each run gets, as the event engine times them."""

from __future__ import annotations

from itertools import accumulate, islice
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from sim.api import BatchPlan

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["Schedule", "schedule"]


class Schedule(NamedTuple):
    """Per job (arrays in job order), times in s since the scenario start."""

    arrived: np.ndarray
    """Whether the job arrived before the horizon."""
    now_s: np.ndarray
    """Its arrival decision's time (the engine's clock there)."""
    until_s: np.ndarray
    """The time it was deferred to at arrival (NaN: not deferred)."""
    start_s: np.ndarray
    """Its start (NaN: none before the horizon)."""
    end_s: np.ndarray
    """Its run's end if uninterrupted (NaN: not started; may be past the horizon)."""
    rate: np.ndarray
    """Its progress, reference GPU-s per s."""
    draw_w: np.ndarray
    """Active power of each of its GPUs, W."""


def arrival_clock(submit_s: np.ndarray) -> np.ndarray:
    """The engine's clock at each arrival: the arrivals process waits `t - now` from the
    previous arrival's clock `now` (so the clock is t up to rounding), s."""
    clock = accumulate(submit_s.tolist(), _wait_until, initial=0.0)
    return np.fromiter(islice(clock, 1, None), dtype=np.float64, count=submit_s.size)


def _wait_until(now: float, t: float) -> float:
    """The clock after waiting from `now` until `t` (no wait if t <= now), as SimPy adds."""
    return now + (t - now) if t > now else now


def schedule(engine: Engine) -> Schedule | str:
    """The runs of `engine`'s jobs on its one site's one pool under its policy's
    `plan_batch`, or the one-line reason the policy cannot plan them so."""
    jobs, horizon = engine.jobs, engine.horizon_s
    site = engine.fleet.sites[0]
    pool = site.pools[0]
    runs = engine.runs
    # (reference GPU-s per s per GPU, W per GPU) per profile, asked of a job of each
    codes, profiles = pd.factorize(np.asarray(runs.profile, dtype=object))
    first_of = np.full(len(profiles), codes.size)
    np.minimum.at(first_of, codes, np.arange(codes.size))
    speeds = np.array([runs.placement.speed(int(j), pool, None) for j in first_of]).reshape(-1, 2)
    per_gpu, draw_w = speeds[codes, 0], speeds[codes, 1]
    rate = jobs.gpus * per_gpu
    runtime = np.asarray(runs.remaining_gpu_s) / rate
    now = arrival_clock(np.asarray(jobs.submit_s, dtype=np.float64))
    signal = engine.fleet.decision_signal(site)
    plan = BatchPlan(
        now, jobs.submit_s, jobs.deadline_s, runtime,
        signal.times_s, signal.values_g_per_kwh, signal.end_s,
    )  # fmt: skip
    until = engine.policy.plan_batch(plan)  # type: ignore[attr-defined]
    if until is None:
        return f"policy {type(engine.policy).__name__}, so configured, has no batch plan"
    arrived = now < horizon
    until = np.where(arrived, until, np.nan)
    expiry = now + (until - now)
    start = np.where(
        np.isnan(until), now, np.where((until < horizon) & (expiry < horizon), expiry, np.nan)
    )
    start[~arrived] = np.nan
    return Schedule(arrived, now, until, start, start + runtime, rate, draw_w)
