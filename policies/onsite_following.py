"""`follow_onsite`: start each flexible job when its energy is best met by on-site surplus.

A time shifter (`policies.kit.PlannedStart`) whose window cost counts the forecast on-site
surplus as carbon-free. For a job with a deadline, at site s, drawing P kW of facility
power for its runtime R, the start t in [now, deadline - R - margin_s] minimises the grid
signal of the part of its power that surplus does not cover:

    cost(t) = integral over [t, t + R] of max(0, P - S(u)) x CI(u) du
    S(u)    = max(0, G(u) - L(u))

G is the site's forecast generation (`state.onsite_forecast`), L its forecast load (below),
CI its forecast grid signal (`state.forecast` for carbon; the objective's signal,
`policies.kit.objective_forecast`, for "cost" and "weighted"). cost(t) / (P R) is the
window mean of the step function CI x max(0, P - S) / P, so the best start is found
exactly by the kit's window machinery (`best_window_plan`: the earliest of starts within
`REL_TIE`). With no surplus in the window the step function is CI itself, and the start is
`wait_awhile`'s; a site without on-site energy takes `wait_awhile`'s rule unchanged.

The forecast load L (an assumption, stated): the site's facility power now
(`OnsiteReading.load_kw`), less the jobs running there that this policy started, held
constant, plus the runs this policy committed at the site (started, or deferred to a
planned start) over [start, start + runtime], each at its marginal facility power
(`state.power_delta_w` x the site's PUE now) and its `state.runtime_s`. Jobs it did not
start (a running job resumed or migrated there) stay in the load as it is now; the
battery is not forecast (its flows do not enter S).

Alone it plans at each job's origin site on its first GPU model, as `wait_awhile` does.
In a `chain` after a scheduler it amends the scheduler's plan (`amend`): each `Start` of a
job with a deadline that it sees first is planned at the `Start`'s site, GPU model and cap,
and replaced by a `Defer` to the planned start if that is later; back from its deferral
the job starts as the scheduler then places it. Jobs an earlier member defers are that
member's: they are never shifted again. docs/policies-onsite-energy.md has the chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from policies.kit import (
    MIN_DEFER_S,
    FreeGpus,
    PlannedStart,
    Planning,
    best_window_plan,
    window_candidates,
    window_means,
)
from policies.kit.time_shifting import fetch_horizon_s
from sim.api import Action, Defer, JobView, OnsiteReading, Start, SystemState

__all__ = ["OnsiteFollowing"]

_W_PER_KW = 1000.0


class _Run(NamedTuple):
    """A run this policy committed at a site with on-site energy."""

    job: JobView
    site: str
    start_s: float
    end_s: float
    kw: float
    """Its marginal facility power, kW."""


class _Where(NamedTuple):
    """Where the job being planned would run: site, GPU model (None: the first pool) and
    cap (None: the site's)."""

    site: str
    gpu_model: str | None
    cap_w: float | None


@dataclass
class OnsiteFollowing(PlannedStart):
    """Shift flexible jobs into forecast on-site surplus, the grid's signal breaking ties."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._committed: dict[int, _Run] = {}
        """Job index -> its run, for the jobs this policy started or deferred at a site with
        on-site energy (the forecast load's additions)."""
        self._seen: set[int] = set()
        """In a chain: the jobs with a deadline planned already, or deferred by a member
        before this one."""
        self._state: SystemState | None = None
        self._where: _Where | None = None
        """The state and place of the plan being made (`choose_start`, `start_costs`)."""
        self._now_s = -1.0
        self._readings: dict[str, OnsiteReading | None] = {}
        self._generation: dict[str, tuple[float, np.ndarray, np.ndarray]] = {}
        """Per site, this decision's (horizon s, times s, kW) generation forecast."""

    # --- the plan: the cost of each start ------------------------------------------------

    def _reading(self, state: SystemState, site: str) -> OnsiteReading | None:
        """`state.onsite(site)`, read once per decision (whose first read forgets the runs
        that have ended, and those of jobs no longer pending, deferred or running)."""
        now = state.now_s
        if now != self._now_s:
            self._now_s = now
            self._readings.clear()
            self._generation.clear()
            live = ("pending", "deferred", "running")
            self._committed = {
                j: r for j, r in self._committed.items() if r.end_s > now and r.job.state in live
            }
        if site not in self._readings:
            self._readings[site] = state.onsite(site)
        return self._readings[site]

    def _generation_forecast(
        self, state: SystemState, site: str, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """`state.onsite_forecast(site, ...)` reaching at least `horizon_s` from now, fetched
        again in a decision only for a longer one (`fetch_horizon_s`)."""
        got = self._generation.get(site)
        if got is None or got[0] < horizon_s:
            longer = fetch_horizon_s(got[0] if got else None, horizon_s)
            got = self._generation[site] = (longer, *state.onsite_forecast(site, longer))
        return got[1], got[2]

    def _load_forecast(
        self, state: SystemState, site: str, reading: OnsiteReading
    ) -> tuple[np.ndarray, np.ndarray]:
        """The site's forecast facility load from now (times s, kW): the load now less the
        committed runs running there, plus every committed run there while it lasts."""
        now = state.now_s
        runs = [r for r in self._committed.values() if r.site == site and r.end_s > now]
        base_kw = reading.load_kw - sum(r.kw for r in runs if r.job.state == "running")
        starts = np.array([r.start_s for r in runs])
        ends = np.array([r.end_s for r in runs])
        times = np.unique(np.concatenate(([now], starts[starts > now], ends)))
        active = (starts[:, None] <= times) & (times < ends[:, None])
        return times, base_kw + np.array([r.kw for r in runs]) @ active

    @staticmethod
    def _job_kw(state: SystemState, job: JobView, where: _Where) -> float:
        """The facility power `job` would add at `where`, kW: its `power_delta_w` x the
        site's PUE now."""
        delta_w = state.power_delta_w(job, where.cap_w, where.site, where.gpu_model)
        return delta_w * state.pue(where.site) / _W_PER_KW

    def _signal(self, job: JobView, plan: Planning) -> tuple[np.ndarray, np.ndarray]:
        """The step function whose window mean the start minimises (times s, values): the
        forecast signal `plan.values` times the share of the job's power that surplus does
        not cover, CI x max(0, P - max(0, G - L)) / P; `plan`'s own where the place has no
        on-site energy."""
        assert self._state is not None and self._where is not None
        state, site = self._state, self._where.site
        reading = self._reading(state, site)
        if reading is None:
            return plan.times, plan.values
        job_kw = self._job_kw(state, job, self._where)
        now, end = plan.now_s, plan.latest_s + plan.runtime_s
        gen_t, gen_kw = self._generation_forecast(state, site, end - now)
        load_t, load_kw = self._load_forecast(state, site, reading)
        times = np.unique(np.concatenate((plan.times, gen_t, load_t)))
        times = times[(times >= now) & ((times < end) | (times == now))]

        def at(t: np.ndarray, v: np.ndarray) -> np.ndarray:
            return v[np.searchsorted(t, times, side="right") - 1]

        surplus_kw = np.maximum(at(gen_t, gen_kw) - at(load_t, load_kw), 0.0)
        if job_kw <= 0.0:  # draws nothing more: nothing to cover
            return times, at(plan.times, plan.values)
        uncovered = np.maximum(job_kw - surplus_kw, 0.0) / job_kw
        return times, at(plan.times, plan.values) * uncovered

    def choose_start(self, job: JobView, plan: Planning) -> tuple[float, float]:
        """The start of the window of least `_signal` mean, the earliest of ties; without
        on-site energy `wait_awhile`'s (with its start-now promise), else no promise (the
        load and generation a promise would rest on change with every start)."""
        times, values = self._signal(job, plan)
        if values is plan.values:
            return super().choose_start(job, plan)
        start, _ = best_window_plan(times, values, plan.now_s, plan.latest_s, plan.runtime_s)
        return start, plan.now_s

    def start_costs(self, job: JobView, plan: Planning) -> tuple[np.ndarray, np.ndarray]:
        times, values = self._signal(job, plan)
        if values is plan.values:
            return super().start_costs(job, plan)
        starts = window_candidates(times, plan.now_s, plan.latest_s, plan.runtime_s)
        return starts, window_means(times, values, starts, plan.runtime_s)

    # --- alone: plan at the origin site --------------------------------------------------

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        site = job.origin_site
        self._state, self._where = state, _Where(site, next(iter(state.total_gpus(site))), None)
        until = super().defer_until(state, job)
        if until is not None and until - state.now_s >= MIN_DEFER_S:
            self._commit(state, job, self._where, until)
        return until

    def place(self, state: SystemState, free: FreeGpus, job: JobView) -> Start | None:
        placed = super().place(state, free, job)
        if placed is not None:
            where = _Where(placed.site, placed.gpu_model, placed.gpu_cap_w)
            self._commit(state, job, where, state.now_s)
        return placed

    def _commit(self, state: SystemState, job: JobView, where: _Where, start_s: float) -> None:
        """Count `job`'s run from `start_s` at `where` in its site's forecast load, in place
        of any run committed for it before (if the site has on-site energy)."""
        self._committed.pop(job.index, None)
        if self._reading(state, where.site) is None:
            return
        runtime = state.runtime_s(job, where.site, where.cap_w, where.gpu_model)
        self._committed[job.index] = _Run(
            job, where.site, start_s, start_s + runtime, self._job_kw(state, job, where)
        )

    # --- in a chain: amend the plan of the members before --------------------------------

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """The plan with each first `Start` of a job with a deadline at a place whose best
        start is later replaced by a `Defer` there; every start at a site with on-site
        energy counted in its forecast load."""
        now = state.now_s
        self._seen.update(a.job.index for a in actions if isinstance(a, Defer))
        out: list[Action] = []
        for a in actions:
            if not isinstance(a, Start):
                out.append(a)
                continue
            job, where = a.job, _Where(a.site, a.gpu_model, a.gpu_cap_w)
            start = now
            if job.deadline_s is not None and job.index not in self._seen:
                self._seen.add(job.index)
                start = self._planned_start(state, job, where)
            if start - now >= MIN_DEFER_S:
                out.append(Defer(job, start))
            else:
                out.append(a)
                start = now
            self._commit(state, job, where, start)
        return out

    def _planned_start(self, state: SystemState, job: JobView, where: _Where) -> float:
        """`choose_start` for `job` at `where` from now, s (now if it has no room left)."""
        assert job.deadline_s is not None
        now = state.now_s
        runtime = state.runtime_s(job, where.site, where.cap_w, where.gpu_model)
        latest = self.latest_start(state, job, runtime)
        if latest - now < MIN_DEFER_S:
            return now
        horizon = latest + runtime - now
        times, values, cum = self.forecast(state, where.site, horizon).cut(horizon)
        if times.size == 0:
            return now
        self._state, self._where = state, where
        return self.choose_start(job, Planning(times, values, cum, latest, runtime))[0]
