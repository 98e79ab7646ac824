"""`TimeShifter`: the base of the schedulers that defer jobs (wait_awhile, carbon_threshold,
lowest_window, carbon_time, and space_time, which also picks the site).

A time shifter decides, for each pending job with a deadline, whether it starts now or is
deferred to a later time (`defer_until`); everything else is `run_now`:

- jobs without a deadline, and flexible jobs whose time has come, start in queue order on
  the first site with enough free GPUs, the job's origin first (`FreeGpus`), with
  `gpu_model` set so that power-capping adjusters later in a chain can amend the `Start`;
- with `backfill = false` (as in `run_now`), once a job that should start now does not fit,
  later jobs that should start now wait too; deferrals are decided all the same;
- a deferred job is never deferred past its latest start, deadline - runtime - `margin_s`,
  runtime being `state.estimate` at its origin site on its first GPU model.

Subclasses implement `defer_until(state, job)`, and may add actions about running and
suspended jobs before the pending queue is served (`preempt`). `PlannedStart` is the base of
the policies that choose one start time per job when they first see it (wait_awhile,
lowest_window, carbon_time): they defer the job to that time and start it when its deferral
expires, without planning it again (no chains of deferrals).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.kit.gpus import FreeGpus
from sim.api import Action, Defer, JobView, Policy, Start, SystemState

__all__ = [
    "MIN_DEFER_S",
    "PlannedStart",
    "TimeShifter",
    "forecast_from_now",
    "latest_start_s",
    "runtime_s",
]

MIN_DEFER_S = 1.0
"""A deferral shorter than this (s) is not worth an extra decision: the job starts now."""


def runtime_s(state: SystemState, job: JobView) -> float:
    """Time to finish `job`'s remaining work uninterrupted, s: where it runs (on its GPU
    model, under its cap), else at its origin site on the site's first GPU model."""
    if job.site is not None:
        return state.estimate(job, job.site, job.cap_w, job.gpu_model)[0]
    return state.estimate(job, job.origin_site)[0]


def forecast_from_now(
    state: SystemState, site: str, horizon_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """`state.forecast(site, horizon_s)` with the current step's value replaced by the
    intensity measured now (`state.carbon_intensity`): what holds now is known, only the
    later steps are forecast."""
    times, values = state.forecast(site, max(horizon_s, 0.0))
    if values.size:
        values[0] = state.carbon_intensity(site)
    return times, values


def latest_start_s(state: SystemState, job: JobView, runtime: float, margin_s: float) -> float:
    """deadline - runtime - margin_s (the job must have a deadline)."""
    assert job.deadline_s is not None
    return job.deadline_s - runtime - margin_s


@dataclass
class TimeShifter(Policy):
    backfill: bool = False
    """Let later jobs that fit start while a job that should start now waits for GPUs."""
    margin_s: float = 60.0
    """Safety margin before deadlines, s: a deferred job starts by deadline - runtime -
    margin_s, and interruptible plans end by deadline - margin_s (rounding, runtime
    estimates, and, for suspended jobs, resume overheads)."""

    def __post_init__(self) -> None:
        if not self.margin_s >= 0.0:
            raise ValueError(f"margin_s must be >= 0 s, got {self.margin_s}")

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        """When pending `job` (which has a deadline) should be looked at again, s; None:
        start it now."""
        raise NotImplementedError

    def preempt(self, state: SystemState, free: FreeGpus) -> list[Action]:
        """Actions about running and suspended jobs, applied before the pending queue is
        served; GPUs they take are booked in `free` (GPUs a `Suspend` frees are not
        offered: they stay held while the job's checkpoint is written)."""
        return []

    def place(self, state: SystemState, free: FreeGpus, job: JobView) -> Start | None:
        """Where `job` starts now (GPUs taken from `free`), None if it must wait: the first
        site that fits, its origin first."""
        return free.place(job)

    def started(self, job: JobView) -> None:
        """`job` is being started now (forget what was planned for it)."""

    def decide(self, state: SystemState) -> list[Action]:
        free = FreeGpus(state)
        actions = self.preempt(state, free)
        if not state.pending:
            return actions
        now = state.now_s
        blocked = False
        for job in state.pending:
            if job.deadline_s is not None:
                until = self.defer_until(state, job)
                if until is not None and until - now >= MIN_DEFER_S:
                    actions.append(Defer(job, until))
                    continue
            if blocked:
                continue
            placed = self.place(state, free, job)
            if placed is not None:
                actions.append(placed)
                self.started(job)
            elif not self.backfill:
                blocked = True
        return actions


@dataclass
class PlannedStart(TimeShifter):
    """Plans a start in [now, latest start] for a flexible job when it first becomes
    pending, from the forecast at its origin site; defers it there; starts it when the
    deferral expires (or as soon as GPUs are free after that)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._planned: dict[str, float] = {}
        """Job id -> planned start, s, for jobs deferred and not yet started."""

    def latest_start(self, state: SystemState, job: JobView, runtime: float) -> float:
        """The latest start this policy allows `job`, s."""
        return latest_start_s(state, job, runtime, self.margin_s)

    def choose_start(
        self, job: JobView, times: np.ndarray, values: np.ndarray, latest: float, runtime: float
    ) -> float:
        """The planned start in [times[0] (now), latest], s, given the forecast (times,
        values) at the job's origin over [now, latest + runtime]."""
        raise NotImplementedError

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        if job.id in self._planned:
            return None  # back from its deferral: its time has come
        now = state.now_s
        runtime = runtime_s(state, job)
        latest = self.latest_start(state, job, runtime)
        if latest - now < MIN_DEFER_S:
            return None
        times, values = forecast_from_now(state, job.origin_site, latest + runtime - now)
        if times.size == 0:
            return None
        start = self.choose_start(job, times, values, latest, runtime)
        if start - now < MIN_DEFER_S:
            return None
        self._planned[job.id] = start
        return start

    def started(self, job: JobView) -> None:
        self._planned.pop(job.id, None)
