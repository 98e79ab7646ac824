"""`best_config` and `oracle_config`: per training job, the GPU model, batch size and power
cap of least energy or carbon that still meets its deadline or time-to-accuracy target.

For a job with a `target_metric` (docs/training.md) that starts now, every candidate
(site, GPU model with enough free GPUs, batch size b of `state.training_options(job)`,
cap c on the model's grid from `min_cap_w` in steps of `cap_step_w`, `max_cap_w` always
included) is priced from the pieces `sim.api` gives:

    speed per GPU = reference_speed(model, W@b) x operating_point(model, W@b, c).throughput_fraction
    time          = work_b x 3600 / (gpus x speed per GPU)                       s
    energy        = time x gpus x (operating_point power + host_w_per_gpu) x PUE  J
    carbon        = energy x mean forecast intensity over [now, now + time]

with W the job's workload and work_b the expected work at b (reference GPU-h; the oracle:
the work of the run the job will actually train). A candidate is feasible if it ends
`deadline_margin_s` before the job's deadline (if any) and, with `max_slowdown`, takes at
most that many times the time of the job's own batch size at the maximum limit on the
fastest free GPU. The policy starts the feasible candidate of least objective (ties: the
faster); if none is feasible, the fastest candidate (a job that cannot meet its target
gets there as soon as it can). With `gpu_counts`, each listed GPU count is a candidate
too, at the engine's scaling (`state.parallel_scaling`); else the count stays `job.gpus`.

Alone (`decide`), the jobs are taken in queue order over every site they may use; a job
without a target is placed as `run_now` places it; a job that fits nowhere waits, and so
do the jobs behind it unless `backfill` (a job its virtual cluster's quota holds back waits
alone). In a `chain` after a scheduler (`amend`), each of
the scheduler's `Start`s of a target job that sets neither a batch size nor a cap is
re-chosen at the site the scheduler chose (its time- or space-shifting stands), among the
models there with GPUs still free; every other action is kept as planned. docs/policies-
best-config.md has the parameters, limitations and measured results.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from policies.kit import FreeGpus, OperatingPoints, WindowMean
from sim.api import Action, JobView, Policy, PolicyError, Start, SystemState

__all__ = ["BestConfig", "Candidate", "OracleConfig"]

OBJECTIVES = ("energy", "carbon")


class Candidate(NamedTuple):
    """One configuration of a job and what it is expected to cost."""

    site: str
    gpu_model: str
    batch_size: int
    cap_w: float
    gpus: int
    time_s: float
    energy_kwh: float
    """Facility energy of the job's GPUs and host share over the run, kWh."""
    carbon_kg: float
    """`energy_kwh` at the site's mean forecast intensity over the run, kg."""


@dataclass
class BestConfig(Policy):
    """Per target job, the (site, GPU model, batch size, cap) of least expected `objective`
    that meets its deadline and `max_slowdown` (module docstring)."""

    objective: str = "energy"
    """What to minimise: "energy" (facility kWh) or "carbon" (kg at the forecast intensity)."""
    cap_step_w: float = 10.0
    """Step of the cap grid searched, W (the maximum limit is always a candidate)."""
    max_slowdown: float | None = None
    """Time-to-accuracy target: at most this multiple (>= 1) of the time of the job's own
    batch size at the maximum limit on the fastest free GPU; None: no such target."""
    deadline_margin_s: float = 300.0
    """Time kept in reserve before a job's deadline, s."""
    backfill: bool = False
    """Alone: let later jobs start while the head of the queue waits for GPUs."""
    gpu_counts: list[int] | None = None
    """GPU counts to try per job (each where a pool has them free; the job's speed on n GPUs
    follows the scenario's `[scaling]`, `state.parallel_scaling`); None: the job's own."""

    truth: ClassVar[bool] = False
    """Price batch sizes with the work of the run the job will train (the oracle), not the
    expectation a scheduler can know."""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if not (math.isfinite(self.cap_step_w) and self.cap_step_w > 0):
            raise ValueError(f"cap_step_w must be a positive number, got {self.cap_step_w!r}")
        if self.max_slowdown is not None and not self.max_slowdown >= 1.0:
            raise ValueError(f"max_slowdown must be >= 1, got {self.max_slowdown!r}")
        if not self.deadline_margin_s >= 0.0:
            raise ValueError(f"deadline_margin_s must be >= 0, got {self.deadline_margin_s!r}")
        counts = self.gpu_counts
        whole = counts is None or all(type(n) is int and n >= 1 for n in counts)
        if not whole or counts == []:
            raise ValueError(f"gpu_counts must be a list of integers >= 1, got {counts!r}")
        self._points = OperatingPoints(float(self.cap_step_w))

    # -- the plan ------------------------------------------------------------------------

    def decide(self, state: SystemState) -> list[Action]:
        free = FreeGpus(state)
        actions: list[Action] = []
        for job in state.pending:
            if job.target_metric is None:
                start = free.place(job)
            else:
                sites = [s for s in state.sites if s in job.allowed_sites]
                start = self._start(state, free, job, sites)
            if start is not None:
                actions.append(start)
            elif not self.backfill and free.vc_fits(job):  # a quota holds back its own
                break
        return actions

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """The scheduler's plan with each `Start` of a target job that sets neither a batch
        size nor a cap re-chosen at its site; a start (or other placement) is dropped, the
        job waiting, if the GPUs re-chosen before it took every pool it fitted on."""
        free = FreeGpus(state)
        out: list[Action] = []
        for a in actions:
            if isinstance(a, Start) and _configurable(a):
                start = self._start(state, free, a.job, [a.site])
                if start is not None:
                    out.append(start)
            elif free.book(a):
                out.append(a)
        return out

    def _start(
        self, state: SystemState, free: FreeGpus, job: JobView, sites: Sequence[str]
    ) -> Start | None:
        """The `Start` of the best candidate for `job` on `sites`, its GPUs taken from
        `free`; None if no pool has enough free GPUs."""
        if job.mig_profile or job.gpu_milli < 1000:  # a slice or a share: placed as it asks
            return free.place(job, sites)
        counts = [n for n in self._counts(job) if free.vc_fits(job, n)]
        if not counts:
            return None  # its virtual cluster's quota has no room now
        pools = _pools(free, job, sites, min(counts))
        best = self.choose(self.candidates(state, job, pools, free, counts), job, state)
        if best is None:
            return None
        free.take_job(job, best.site, best.gpu_model, best.gpus)
        return Start(
            job,
            best.site,
            gpu_cap_w=best.cap_w,
            gpu_model=best.gpu_model,
            batch_size=best.batch_size,
            gpus=None if best.gpus == job.gpus else best.gpus,
        )

    def _counts(self, job: JobView) -> list[int]:
        """The GPU counts to try for `job`: `gpu_counts` (whole-GPU jobs), else its own."""
        if self.gpu_counts is None or job.gpu_milli < 1000:  # a share of one GPU keeps it
            return [job.gpus]
        return sorted(set(self.gpu_counts))

    # -- the search ----------------------------------------------------------------------

    def candidates(
        self,
        state: SystemState,
        job: JobView,
        pools: Iterable[tuple[str, str]],
        free: FreeGpus | None = None,
        counts: Sequence[int] | None = None,
    ) -> list[Candidate]:
        """Every (GPU count, batch size, cap) of `job` on each (site, GPU model) of `pools`,
        priced; a count of `counts` (None: `gpu_counts`, else the job's own) only where
        `free` has that many GPUs of the pool (None: the job's own count, wherever `pools`
        says)."""
        workload = job.profile.split("@")[0]
        options = state.training_options(job, truth=self.truth)
        now_s = state.now_s
        out: list[Candidate] = []
        for site, model in pools:
            host_w = state.host_w_per_gpu(site)
            pue = state.pue(site)
            room = job.gpus if free is None else free.at(site).get(model, 0)
            wanted = self._counts(job) if counts is None else counts
            fitting = [n for n in wanted if n <= room] if free else [job.gpus]
            priced: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
            for n in fitting:
                for b, work_gpu_h in options.items():
                    profile = f"{workload}@{b}"
                    caps, r, power = self._points.table(state, model, profile)
                    try:
                        par = state.parallel_scaling(site, model, profile, n, job.parallelism)
                    except PolicyError:  # a count its parallel scheme cannot use
                        continue
                    speed = state.reference_speed(model, profile) * r * par.efficiency
                    draw_w = power * (1.0 - par.comm_time_frac * (1.0 - par.comm_power_frac))
                    time_s = work_gpu_h * 3600.0 / (n * speed)
                    energy_kwh = time_s * n * (draw_w + host_w) * pue / 3.6e6
                    priced.append((n, b, caps, time_s, energy_kwh))
            longest_s = max((float(p[3].max()) for p in priced), default=0.0)
            mean_g_per_kwh = WindowMean(*state.forecast(site, longest_s))
            for n, b, caps, time_s, energy_kwh in priced:
                for c, t, e in zip(
                    caps.tolist(), time_s.tolist(), energy_kwh.tolist(), strict=True
                ):
                    carbon_kg = e * mean_g_per_kwh(now_s, t) / 1000.0
                    out.append(Candidate(site, model, b, c, n, t, e, carbon_kg))
        return out

    def choose(
        self, candidates: Sequence[Candidate], job: JobView, state: SystemState
    ) -> Candidate | None:
        """The feasible candidate of least objective (ties: the faster); the fastest if
        none is feasible; None if there are none."""
        if not candidates:
            return None
        fastest = min(candidates, key=lambda c: c.time_s)
        limit_s = math.inf
        if job.deadline_s is not None:
            limit_s = job.deadline_s - self.deadline_margin_s - state.now_s
        if self.max_slowdown is not None:
            limit_s = min(limit_s, self.max_slowdown * _default_time_s(candidates, job))
        feasible = [c for c in candidates if c.time_s <= limit_s]
        if not feasible:
            return fastest
        cost = (lambda c: c.energy_kwh) if self.objective == "energy" else (lambda c: c.carbon_kg)
        return min(feasible, key=lambda c: (cost(c), c.time_s))


@dataclass
class OracleConfig(BestConfig):
    """`best_config` that knows the work of the run each job will train
    (`state.training_options(job, truth=True)`): the baseline it is measured against."""

    truth: ClassVar[bool] = True


def _configurable(start: Start) -> bool:
    """A scheduler's `Start` of a target job that leaves batch size and cap open."""
    return (
        start.batch_size is None and start.gpu_cap_w is None and start.job.target_metric is not None
    )


def _pools(free: FreeGpus, job: JobView, sites: Sequence[str], gpus: int) -> list[tuple[str, str]]:
    """The (site, GPU model) pools of `sites` with `gpus` free GPUs of a model `job` may use."""
    allowed = job.allowed_gpu_models
    return [
        (site, model)
        for site in sites
        for model, n in free.at(site).items()
        if n >= gpus and (not allowed or model in allowed)
    ]


def _default_time_s(candidates: Sequence[Candidate], job: JobView) -> float:
    """Time of `job`'s own batch size at the maximum limit on its fastest pool, s (of the
    fastest candidate if that batch size cannot reach the target)."""
    own_b = int(job.profile.split("@")[1])
    at_max: dict[tuple[str, str, int, int], Candidate] = {}
    for c in candidates:  # the maximum limit is the last cap of each (pool, count, batch size)
        at_max[(c.site, c.gpu_model, c.gpus, c.batch_size)] = c
    own = [c.time_s for c in at_max.values() if c.batch_size == own_b and c.gpus == job.gpus]
    return min(own) if own else min(c.time_s for c in candidates)
