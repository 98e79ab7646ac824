"""`TimeShifter`: the base of the schedulers that defer jobs (wait_awhile, carbon_threshold,
lowest_window, carbon_time, and space_time, which also picks the site).

A time shifter decides, for each pending job with a deadline, whether it starts now or is
deferred to a later time (`defer_until`); everything else is `run_now`:

- jobs without a deadline, and flexible jobs whose time has come, start in queue order on
  the first site with enough free GPUs, the job's origin first (`FreeGpus`), with
  `gpu_model` set so that power-capping adjusters later in a chain can amend the `Start`;
- with `backfill = false` (as in `run_now`), once a job that should start now does not fit,
  later jobs that should start now wait too; deferrals are decided all the same (a job
  its virtual cluster's quota holds back waits alone, as in `first_come_first_served`);
- a deferred job is never deferred past its latest start, deadline - runtime - `margin_s`,
  runtime being `state.estimate` at its origin site on its first GPU model.

Subclasses implement `defer_until(state, job)`, and may add actions about running and
suspended jobs before the pending queue is served (`preempt`). `PlannedStart` is the base of
the policies that choose one start time per job when they first see it (wait_awhile,
lowest_window, carbon_time): they defer the job to that time and start it when its deferral
expires, without planning it again (no chains of deferrals); with `capacity_aware`, only to
a time whose run fits the GPUs at its origin site (`Bookings`).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Literal, NamedTuple

import numpy as np

from policies.kit.bookings import Bookings, Run
from policies.kit.gpus import FreeGpus
from policies.kit.objective import (
    CARBON,
    Objective,
    forecast_from_now,
    objective_forecast,
    objective_now,
)
from policies.kit.windows import (
    MIN_DEFER_S,
    WindowMean,
    best_window_plan,
    best_window_start,
    prefix_integrals,
    window_candidates,
    window_means,
)
from sim.api import Action, Defer, JobView, Policy, Start, SystemState

__all__ = [
    "DecisionForecast",
    "DecisionForecasts",
    "ForecastBlock",
    "PlannedStart",
    "Planning",
    "TimeShifter",
    "fetch_horizon_s",
    "forecast_from_now",
    "latest_start_s",
    "ranked_starts",
    "runtime_s",
]


def runtime_s(state: SystemState, job: JobView) -> float:
    """Time to finish `job`'s remaining work uninterrupted, s: where it runs (on its GPU
    model, under its cap), else at its origin site on the site's first GPU model."""
    if job.site is not None:
        return state.runtime_s(job, job.site, job.cap_w, job.gpu_model)
    return state.runtime_s(job, job.origin_site)


def latest_start_s(state: SystemState, job: JobView, runtime: float, margin_s: float) -> float:
    """deadline - runtime - margin_s (the job must have a deadline)."""
    assert job.deadline_s is not None
    return job.deadline_s - runtime - margin_s


def ranked_starts(starts_s: np.ndarray, costs: np.ndarray, first_s: float) -> np.ndarray:
    """The candidate `starts_s` (ascending), `first_s` (one of them) first, then the others
    by ascending `costs` (one per start), equal costs the earliest first, s."""
    ranked = starts_s[np.argsort(costs, kind="stable")]
    return np.concatenate(([first_s], ranked[ranked != first_s]))


FIRST_HORIZON_S = 86400.0
"""The horizon of a site's first forecast in a decision, s (a day: most plans fit in it)."""

REACH_PAST_S = 3600.0
"""How far past the horizon asked a forecast is fetched at least, s: so that a plan's window
ends inside the forecast it is made from, which is kept while the site's `forecast_version`
holds, and the plan can be set aside (`DecisionForecast.clear_around`)."""


def fetch_horizon_s(fetched_s: float | None, horizon_s: float) -> float:
    """How far to fetch a forecast of a decision asked for `horizon_s` (s from now) when
    the one fetched so far reaches `fetched_s` (None: none yet): at least twice as far, a
    day first, and `REACH_PAST_S` past `horizon_s`."""
    return max(horizon_s + REACH_PAST_S, 2.0 * fetched_s if fetched_s else FIRST_HORIZON_S)


class DecisionForecast:
    """One site's `objective_forecast` (for carbon, `forecast_from_now`) in one decision,
    fetched once for the longest horizon
    asked (at least twice the last one), with its `prefix_integrals` (made when first
    asked: a forecast fetched only to check that it `extends` another needs none):
    `cut(horizon_s)` is
    what `forecast_from_now(state, site, horizon_s)` gives, bit for bit (a longer forecast
    extends a shorter one, and the prefix sums of a forecast cut short are the first ones
    of the whole)."""

    __slots__ = ("_cum", "_mean", "_t", "horizon_s", "now_s", "times", "values", "version")

    def __init__(
        self, state: SystemState, site: str, horizon_s: float, objective: Objective = CARBON
    ):
        self.now_s = state.now_s
        self.horizon_s = horizon_s
        """The horizon it was fetched for, s from now."""
        self.version = state.forecast_version(site)
        """The site's `forecast_version` when it was fetched."""
        self.times, self.values = objective_forecast(state, site, horizon_s, objective)
        self._cum: np.ndarray | None = None
        self._t: list[float] = self.times.tolist()
        self._mean: WindowMean | None = None

    @property
    def cum(self) -> np.ndarray:
        """Its `prefix_integrals`, g/kWh x s."""
        if self._cum is None:
            self._cum = prefix_integrals(self.times, self.values)
        return self._cum

    def mean_per_kwh(self, start_s: float, length_s: float) -> float:
        """Mean of the forecast objective signal over [start_s, start_s + length_s]
        (start_s >= now), per kWh: g CO2e under "carbon", the scenario's currency under
        "cost" (`policies.kit.objective`); the same bits as `window_means`."""
        if self._mean is None:
            self._mean = WindowMean(self.times, self.values)
        return self._mean(start_s, length_s)

    def best_start(
        self, earliest_s: float, latest_s: float, length_s: float
    ) -> tuple[float, float]:
        """`best_window_start` on this forecast: (start, mean g/kWh) of the window of
        `length_s` starting in [earliest_s, latest_s] with the lowest mean, the earliest of
        ties; `earliest_s` if latest_s < earliest_s."""
        return best_window_start(self.times, self.values, earliest_s, latest_s, length_s, self.cum)

    def end_s(self, horizon_s: float) -> float:
        """Where `forecast_from_now` with `horizon_s` cuts (before the signal's end), s."""
        return self.now_s + max(horizon_s, 0.0)

    def cut(self, horizon_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, values, prefix integrals) of `forecast_from_now(.., horizon_s)`
        (horizon_s <= the fetched one)."""
        k = bisect_left(self._t, self.end_s(horizon_s))
        return self.times[:k], self.values[:k], self.cum[:k]

    def breakpoints_before(self, t_s: float) -> int:
        """How many of its times are before `t_s`."""
        return bisect_left(self._t, t_s)

    def clear_around(self, t_s: float, pad_s: float) -> bool:
        """Whether it reaches past t_s + pad_s with no breakpoint in [t_s - pad_s,
        t_s + pad_s] (s): cut anywhere there, it is the same."""
        return t_s + pad_s < self.end_s(self.horizon_s) and bisect_left(
            self._t, t_s - pad_s
        ) == bisect_right(self._t, t_s + pad_s)

    def holds_now(self, state: SystemState, site: str, objective: Objective) -> bool:
        """True if a forecast of `site` fetched now, as long as this one (of an earlier or
        the same decision) reaches, would `extend` it, known without fetching it: now is
        before its end, the site's `forecast_version` is the one it was fetched at (the
        later steps are the same), and its step in effect now has the objective's value
        now (the one a fresh forecast starts with)."""
        now = state.now_s
        return (
            now < self.end_s(self.horizon_s)
            and state.forecast_version(site) == self.version
            and self.values[bisect_right(self._t, now) - 1] == objective_now(state, site, objective)
        )

    def extends(self, earlier: DecisionForecast) -> bool:
        """True if this forecast (of a later or the same decision, as long at least) is the
        same step function as `earlier` from this one's start to `earlier`'s end: the same
        later breakpoints and values (as a perfect forecast is; a noisy one never)."""
        k = bisect_right(earlier._t, self.now_s) - 1
        n = len(earlier._t) - k
        return (
            len(self._t) >= n
            and self._t[1:n] == earlier._t[k + 1 :]
            and bool(np.array_equal(self.values[:n], earlier.values[k:]))
        )


class DecisionForecasts:
    """The sites' forecasts of one decision (`DecisionForecast`), each fetched when first
    needed and again only for a longer horizon: at least twice the last one, a day first,
    and an hour past the horizon asked (`REACH_PAST_S`).
    For policies that price many runs in one decision (every site a job may use, for every
    job)."""

    __slots__ = ("_by_site", "_objective", "_state", "now_s")

    def __init__(self, state: SystemState, objective: Objective = CARBON):
        self._state = state
        self._objective = objective
        self.now_s = state.now_s
        self._by_site: dict[str, DecisionForecast] = {}

    def at_least(self, site: str, horizon_s: float) -> DecisionForecast:
        """`site`'s forecast of this decision, at least `horizon_s` long (s from now)."""
        got = self._by_site.get(site)
        if got is None or got.horizon_s < horizon_s:
            longer = fetch_horizon_s(got.horizon_s if got else None, horizon_s)
            got = self._by_site[site] = DecisionForecast(self._state, site, longer, self._objective)
        return got

    def until(self, site: str, until_s: float) -> DecisionForecast:
        """`site`'s forecast from now to at least `until_s` (s since the scenario start)."""
        return self.at_least(site, until_s - self.now_s)


class ForecastBlock:
    """Every site's `objective_forecast` of one decision over one horizon, in one block:
    site k's (in the order given) is times[offsets[k]:offsets[k + 1]] and the same slice
    of values. For carbon, one batched query (`state.forecasts`, the current step's value
    replaced by `state.carbon_intensities`: `forecast_from_now`, bit for bit)."""

    __slots__ = ("horizon_s", "offsets", "times", "values")

    def __init__(
        self, state: SystemState, sites: Sequence[str], horizon_s: float, objective: Objective
    ):
        self.horizon_s = horizon_s
        """The horizon it was fetched for, s from now."""
        if objective.kind == "carbon":
            times, values, offsets = state.forecasts(sites, max(horizon_s, 0.0))
            full = offsets[1:] > offsets[:-1]
            values[offsets[:-1][full]] = state.carbon_intensities(sites)[full]
        else:
            parts = [objective_forecast(state, s, horizon_s, objective) for s in sites]
            offsets = np.zeros(len(parts) + 1, dtype=np.int64)
            np.cumsum([t.size for t, _ in parts], out=offsets[1:])
            times = np.concatenate([np.empty(0)] + [t for t, _ in parts])
            values = np.concatenate([np.empty(0)] + [v for _, v in parts])
        self.times, self.values, self.offsets = times, values, offsets


_FLEXIBLE, _RUN_NOW = 1, 2


@dataclass
class TimeShifter(Policy):
    backfill: bool = False
    """Let later jobs that fit start while a job that should start now waits for GPUs."""
    margin_s: float = 60.0
    """Safety margin before deadlines, s: a deferred job starts by deadline - runtime -
    margin_s, and interruptible plans end by deadline - margin_s (rounding, runtime
    estimates, and, for suspended jobs, resume overheads)."""
    objective: Literal["carbon", "cost", "weighted"] = "carbon"
    """What the start times minimise: "carbon", "cost" (the sites' energy price) or
    "weighted" (price + carbon x carbon_price_per_t), `policies.kit.Objective`."""
    carbon_price_per_t: float = 0.0
    """With objective "weighted": the scenario's currency per tonne CO2e."""

    def __post_init__(self) -> None:
        if not self.margin_s >= 0.0:
            raise ValueError(f"margin_s must be >= 0 s, got {self.margin_s}")
        self.goal = Objective(self.objective, self.carbon_price_per_t)
        """The objective of the start times (the signal `forecast` gives)."""
        self._kind = bytearray()
        """Per job index: 0 not yet seen, `_FLEXIBLE` (ask `defer_until`) or `_RUN_NOW`
        (no deadline, or `start_when_free`): one byte per job."""
        self._mark = 0
        """`state.pending_mark` at the last decision: jobs pending since are new to it."""
        self._flexible: dict[int, tuple[int, JobView]] = {}
        """Job index -> (join number, view) of the pending jobs of kind `_FLEXIBLE` that
        `_defer_flexible` asks, in queue order (and, until the next full walk, some that left
        the queue); a subclass may set aside jobs whose answer it knows (`_set_aside`)."""
        self._joins = 0
        """How many times jobs have joined `_flexible`: the next join number."""

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

    def queued(self, job: JobView) -> None:
        """`job` has joined the pending queue since the last decision: it arrived, came back
        from a deferral, or was requeued after a failure (forget what held while it was
        elsewhere)."""

    def start_when_free(self, job: JobView) -> None:
        """From now on, `job` starts as soon as GPUs allow, as a job without a deadline
        does: `defer_until` is not asked about it again (for a job given its one deferral)."""
        self._kind[job.index] = _RUN_NOW

    def decide(self, state: SystemState) -> list[Action]:
        free = FreeGpus(state)
        actions = self.preempt(state, free)
        self._see_new_pending(state)
        if not state.pending:
            return actions
        now = state.now_s
        kind = self._kind
        asked: set[int] = set()
        for job in state.pending:
            j = job.index
            if kind[j] == _FLEXIBLE:
                asked.add(j)
                until = self.defer_until(state, job)
                if until is not None and until - now >= MIN_DEFER_S:
                    actions.append(Defer(job, until))
                    continue
            placed = self.place(state, free, job)
            if placed is not None:
                actions.append(placed)
                self.started(job)
            elif not self.backfill and free.vc_fits(job):  # a quota holds back its own
                self._defer_flexible(state, asked, actions)
                return actions
        self._flexible = {j: e for j, e in self._flexible.items() if _still_flexible(e[1], kind)}
        return actions

    def _see_new_pending(self, state: SystemState) -> None:
        """Classify the jobs that became pending since the last decision, and queue the
        flexible ones in `_flexible`, in the pending queue's order."""
        kind = self._kind
        for job in state.pending_since(self._mark):
            j = job.index
            self.queued(job)
            if j >= len(kind):
                kind.extend(bytes(j + 1 + len(kind)))
            if not kind[j]:
                kind[j] = _RUN_NOW if job.deadline_s is None else _FLEXIBLE
            if kind[j] == _FLEXIBLE:
                self._flexible.pop(j, None)  # back in the queue: at its end
                self._flexible[j] = (self._joins, job)
                self._joins += 1
        self._mark = state.pending_mark

    def _set_aside(self, j: int) -> tuple[int, JobView] | None:
        """Take job `j` out of the jobs `_defer_flexible` asks (a subclass knows its answer
        is to start now): its entry there, None if it is not there."""
        return self._flexible.pop(j, None)

    def _put_back(self, entries: list[tuple[int, tuple[int, JobView]]]) -> None:
        """Return jobs set aside (job index, entry) to the jobs `_defer_flexible` asks, at
        their places in queue order."""
        if entries:
            merged = [*self._flexible.items(), *entries]
            merged.sort(key=lambda item: item[1][0])
            self._flexible = dict(merged)

    def _defer_flexible(self, state: SystemState, asked: set[int], actions: list[Action]) -> None:
        """Once a job that should start now has not fit (no backfill), no later job starts:
        only flexible jobs not `asked` yet can act, by a deferral. They are found in
        `_flexible` rather than by walking the whole queue."""
        now = state.now_s
        kind = self._kind
        for j, (_, job) in list(self._flexible.items()):
            if j in asked:
                continue
            if not _still_flexible(job, kind):
                del self._flexible[j]
                continue
            until = self.defer_until(state, job)
            if until is not None and until - now >= MIN_DEFER_S:
                actions.append(Defer(job, until))


def _still_flexible(job: JobView, kind: bytearray) -> bool:
    """Whether `job` is pending and still asked when to start (`defer_until`)."""
    return kind[job.index] == _FLEXIBLE and job.state == "pending"


class Planning(NamedTuple):
    """What a job's start is planned from (`PlannedStart.choose_start`): the forecast at its
    origin site over [now, latest + runtime] (`times` s, `values` g/kWh, their
    `prefix_integrals` `cum`), its latest start and its runtime, s."""

    times: np.ndarray
    values: np.ndarray
    cum: np.ndarray
    latest_s: float
    runtime_s: float

    @property
    def now_s(self) -> float:
        """The decision's time, the forecast's first, s."""
        return float(self.times[0])


@dataclass
class _StartsNow:
    """A pending job's plan that said "start now": what it was made from, and until when a
    plan made again from the same forecast, runtime and latest start says so too."""

    forecast: DecisionForecast
    end_s: float
    """Where its forecast was cut, s."""
    runtime_s: float
    latest_s: float
    until_s: float


@dataclass
class _Quiet:
    """The pending jobs from one origin site whose answer is known to be "start now" while
    the site's `runtime_version` stays `version`, set aside from the jobs `_defer_flexible`
    asks: jobs past their latest start (it is kept while the version holds), and jobs whose
    start-now plan holds (`held`), until its promise ends and while the site's forecast
    extends `forecast`."""

    version: int
    jobs: dict[int, tuple[int, JobView]] = field(default_factory=dict)
    """Job index -> its `_flexible` entry, for every job set aside."""
    held: dict[int, float] = field(default_factory=dict)
    """Job index -> the end of its start-now promise, s, for those set aside by a plan."""
    ends: list[tuple[float, int]] = field(default_factory=list)
    """A heap of (promise end s, job index) over `held` (and entries that have left it)."""
    forecast: DecisionForecast | None = None
    """With `held`: the latest forecast they were checked against, reaching all their
    forecasts' ends."""


@dataclass
class PlannedStart(TimeShifter):
    """Plans a start in [now, latest start] for a flexible job when it first becomes
    pending, from the forecast at its origin site; defers it there; starts it when the
    deferral expires (or as soon as GPUs are free after that).

    A job whose plan is to start now but that finds no GPUs stays pending and is planned
    again at the next decision. That plan is not made again while it would give the same
    answer: the job's runtime and latest start are unchanged, the site's forecast now is
    the same step function as the one planned from (from now on), and now is before the
    time `choose_start` promised the start-now answer for. Such jobs, and the jobs past
    their latest start, are set aside per origin site (`_Quiet`) while that site's
    `runtime_version` and forecast hold, and their promises have not ended (a heap by
    promise end): a decision blocked at the head of the queue does not ask them. The plans
    made are exactly those made from scratch at every decision, at O(1) per decision and
    site for the jobs whose answer holds.

    With `capacity_aware`, a plan must also fit the GPUs of the job's origin site, on the
    site's first GPU model (where its runtime is estimated): the candidate starts are taken
    in the order of the policy's objective (`start_order`: `choose_start`'s answer first),
    and the job is deferred to the first whose run [start, start + runtime) fits this
    decision's `bookings`. It starts now if that start is now, or if none fits. Either
    answer is final, as a deferral is: a job told to start now that finds no GPUs queues
    and starts as soon as GPUs allow, without being planned again (so no start-now answer
    is kept, and a queued job keeps its place). A deferred job's run is booked when it is
    planned; the run from its actual `Start` (any job's) replaces it until the next
    decision sees the job running.
    """

    capacity_aware: bool = False
    """Defer a job only to a start whose run fits the GPUs of its origin site, given the
    running jobs and the runs planned and started before it (`Bookings`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._booked = Bookings()
        """With `capacity_aware`: the running jobs as the current decision saw them first,
        the runs of the jobs in `_runs`, and those started since (`_leaving`)."""
        self._runs: dict[int, tuple[JobView, Run]] = {}
        """Job index -> (job, booked run) for the deferred jobs not yet started."""
        self._leaving: list[tuple[JobView, Run]] = []
        """Runs of the jobs started since the last look, booked until the next one (when
        the jobs are running, in `state.expected_ends`)."""
        self._looked = False
        """Whether the current decision has brought `_booked` up to date."""
        self._planned: dict[int, float] = {}
        """Job index -> planned start, s, for jobs deferred and not yet started."""
        self._starts_now: dict[int, _StartsNow] = {}
        """Job index -> its plan to start now, for pending jobs planned to start now."""
        self._forecasts: DecisionForecasts | None = None
        """The sites' forecasts of the current decision time."""
        self._runtimes: dict[int, tuple[int, float, float]] = {}
        """Job index -> (origin's `runtime_version`, runtime s, latest start s), for the
        jobs not yet deferred or started."""
        self._extended: set[int] = set()
        """ids of the earlier forecasts that the current decision's extend (so do its
        longer ones)."""
        self._quiet: dict[str, _Quiet] = {}
        """Origin site -> its jobs set aside, their answer known to be "start now"."""
        self._quiet_site: dict[int, str] = {}
        """Job index -> origin site, for the jobs set aside in `_quiet`."""

    def latest_start(self, state: SystemState, job: JobView, runtime: float) -> float:
        """The latest start this policy allows `job`, s: a function of the job and its
        `runtime` alone (it is kept while they are unchanged)."""
        return latest_start_s(state, job, runtime, self.margin_s)

    def choose_start(self, job: JobView, plan: Planning) -> tuple[float, float]:
        """(start, holds_until_s): the planned start in [now, `plan.latest_s`], s; and, when
        that start is now (less than `MIN_DEFER_S` away), until when planning again from the
        same forecast and runtime at a later time t answers t, or a start less than
        `MIN_DEFER_S` after t (now: no such promise). By default the start of the window
        of lowest mean forecast intensity, the earliest of ties (`best_window_plan`:
        wait_awhile's and lowest_window's rule)."""
        return best_window_plan(
            plan.times, plan.values, plan.now_s, plan.latest_s, plan.runtime_s, plan.cum
        )

    def start_costs(self, job: JobView, plan: Planning) -> tuple[np.ndarray, np.ndarray]:
        """(the candidate starts in [now, latest], ascending, s; their costs, the lower the
        better): by default the mean intensity of each window [start, start + runtime],
        g/kWh (the objective of the default `choose_start`)."""
        starts = window_candidates(plan.times, plan.now_s, plan.latest_s, plan.runtime_s)
        return starts, window_means(plan.times, plan.values, starts, plan.runtime_s, plan.cum)

    def start_order(self, job: JobView, plan: Planning) -> np.ndarray:
        """The candidate starts, s, best first: `choose_start`'s answer (its ties broken as
        there), then the others by `start_costs`, equal costs the earliest first."""
        first, _ = self.choose_start(job, plan)
        starts, costs = self.start_costs(job, plan)
        return ranked_starts(starts, costs, first)

    def decide(self, state: SystemState) -> list[Action]:
        self._looked = False  # the bookings are brought up to date when first asked
        self._wake(state)
        return super().decide(state)

    def _wake(self, state: SystemState) -> None:
        """Put back the jobs set aside whose answer may no longer be "start now": all of a
        site's when its `runtime_version` has changed, its held plans when its forecast no
        longer extends the one they were checked against, and those whose promise has
        ended. All of them if some have left the queue unseen (rejected)."""
        if len(self._quiet_site) > len(state.pending):
            self._wake_all([*self._quiet_site])
        now = state.now_s
        for site, q in list(self._quiet.items()):
            if state.runtime_version(site) != q.version:
                self._wake_all([*q.jobs])
                del self._quiet[site]
                continue
            if not q.held:
                continue
            assert q.forecast is not None
            forecast = self._still_forecast(state, site, q.forecast)
            if forecast is not None:
                q.forecast = forecast
                ended = []
                while q.ends and q.ends[0][0] <= now:
                    until, j = heappop(q.ends)
                    if q.held.get(j) == until:  # not an entry left by an earlier hold
                        del q.held[j]
                        ended.append(j)
            else:
                ended = list(q.held)
            self._wake_all(ended)

    def _wake_all(self, jobs: list[int]) -> None:
        """Put jobs set aside back among those `_defer_flexible` asks."""
        self._put_back([(j, self._unquiet(j)) for j in jobs])

    def _set_quiet(
        self, state: SystemState, job: JobView, site: str, held: _StartsNow | None
    ) -> None:
        """Set pending `job` aside (`_Quiet`): its answer, just given, is "start now" because
        of `held`, or because it is past its latest start (None). A held plan whose window
        ends within a few units in the last place of a breakpoint is not (its per-job check
        compares the cuts, which rounding may move across it)."""
        j = job.index
        if held is not None:
            end = held.latest_s + held.runtime_s
            if not held.forecast.clear_around(end, 16.0 * math.ulp(end)):
                self._wake_one(j)
                return
        entry = self._set_aside(j) or self._unquiet(j)  # or asked again at the queue's head
        q = self._quiet.get(site)
        if q is None:
            q = self._quiet[site] = _Quiet(state.runtime_version(site))
        q.jobs[j] = entry
        self._quiet_site[j] = site
        if held is None:
            return
        q.held[j] = held.until_s
        heappush(q.ends, (held.until_s, j))
        if len(q.ends) > 2 * len(q.held) + 64:
            q.ends = [(until, i) for until, i in q.ends if q.held.get(i) == until]
            heapify(q.ends)
        forecast = held.forecast  # the site's now, as is q.forecast if other plans are held
        if (
            q.forecast is None
            or len(q.held) == 1
            or q.forecast.end_s(q.forecast.horizon_s) < forecast.end_s(forecast.horizon_s)
        ):
            q.forecast = forecast

    def _unquiet(self, j: int) -> tuple[int, JobView]:
        """Take job `j` (set aside) out of `_quiet`: its `_flexible` entry."""
        q = self._quiet[self._quiet_site.pop(j)]
        q.held.pop(j, None)
        return q.jobs.pop(j)

    def _wake_one(self, j: int) -> None:
        """Put job `j` back among those `_defer_flexible` asks if it was set aside (its
        answer, just given, is not a start now known to hold)."""
        if j in self._quiet_site:
            self._put_back([(j, self._unquiet(j))])

    def bookings(self, state: SystemState) -> Bookings:
        """This decision's bookings (`capacity_aware`): the running jobs at its first call,
        the runs of the deferred jobs, and those of the jobs started since."""
        if not self._looked:
            self._looked = True
            booked = self._booked
            for job, run in self._leaving:
                booked.drop(job, run)
            self._leaving.clear()
            for j, (job, run) in list(self._runs.items()):
                if job.state not in ("pending", "deferred"):  # rejected, or started elsewhere
                    booked.drop(job, run)
                    del self._runs[j]
            booked.look_at(state)
        return self._booked

    def forecast(self, state: SystemState, site: str, horizon_s: float) -> DecisionForecast:
        """`site`'s forecast of this decision, at least `horizon_s` long."""
        if self._forecasts is None or self._forecasts.now_s != state.now_s:
            self._forecasts = DecisionForecasts(state, self.goal)
            self._extended.clear()
        return self._forecasts.at_least(site, horizon_s)

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        j = job.index
        if j in self._planned:
            return None  # back from its deferral: its time has come
        now = state.now_s
        site = job.origin_site
        runtime, latest = self._runtime_and_latest(state, job, site)
        if latest - now < MIN_DEFER_S:
            self._set_quiet(state, job, site, None)
            return None
        horizon = latest + runtime - now
        held = self._starts_now.get(j)
        if held is not None and self._still_starts_now(state, site, held, runtime, latest, horizon):
            self._set_quiet(state, job, site, held)
            return None
        self._wake_one(j)
        forecast = self.forecast(state, site, horizon)
        times, values, cum = forecast.cut(horizon)
        if times.size == 0:
            return None
        plan = Planning(times, values, cum, latest, runtime)
        if self.capacity_aware:
            start = self._first_fitting_start(state, job, plan)
            if start - now < MIN_DEFER_S:
                self._runtimes.pop(j, None)
                self.start_when_free(job)  # planned once: it queues if it finds no GPUs
                return None
        else:
            start, until = self.choose_start(job, plan)
            if start - now < MIN_DEFER_S:
                if until > now:
                    held = self._starts_now[j] = _StartsNow(
                        forecast, forecast.end_s(horizon), runtime, latest, until
                    )
                    self._set_quiet(state, job, site, held)
                return None
        self._starts_now.pop(j, None)
        self._runtimes.pop(j, None)
        self._planned[j] = start
        self.start_when_free(job)  # back from its deferral, its time has come
        return start

    def _first_fitting_start(self, state: SystemState, job: JobView, plan: Planning) -> float:
        """The first of `start_order` whose run fits the bookings at `job`'s origin site on
        its first GPU model, its run booked if it is a deferral; now if none fits, s."""
        now = state.now_s
        site = job.origin_site
        model = next(iter(state.total_gpus(site)))
        booked = self.bookings(state)
        for start in self.start_order(job, plan).tolist():
            run = Run(site, model, start, start + plan.runtime_s)
            if booked.fits(run, job.gpus):
                if start - now >= MIN_DEFER_S:
                    booked.add(job, run)
                    self._runs[job.index] = (job, run)
                return start
        return now

    def place(self, state: SystemState, free: FreeGpus, job: JobView) -> Start | None:
        placed = super().place(state, free, job)
        if placed is not None and self.capacity_aware:
            self._book_start(state, job, placed)
        return placed

    def _book_start(self, state: SystemState, job: JobView, placed: Start) -> None:
        """Book `job`'s run from its `Start` now, on its site and GPU model, until the next
        decision's look (in place of its planned run, if it had one)."""
        booked = self.bookings(state)
        planned = self._runs.pop(job.index, None)
        if planned is not None:
            booked.drop(job, planned[1])
        site, model, now = placed.site, placed.gpu_model, state.now_s
        assert model is not None
        run = Run(site, model, now, now + state.runtime_s(job, site, None, model))
        booked.add(job, run)
        self._leaving.append((job, run))

    def _runtime_and_latest(
        self, state: SystemState, job: JobView, site: str
    ) -> tuple[float, float]:
        """(`runtime_s`, `latest_start`) of pending `job` at its origin `site`, s: kept
        while the site's `runtime_version` is unchanged and the job stays in the queue (it
        does not run meanwhile, so only the site can change them; `queued` forgets them)."""
        version = state.runtime_version(site)
        known = self._runtimes.get(job.index)
        if known is not None and known[0] == version:
            return known[1], known[2]
        runtime = runtime_s(state, job)
        latest = self.latest_start(state, job, runtime)
        self._runtimes[job.index] = (version, runtime, latest)
        return runtime, latest

    def _still_starts_now(
        self,
        state: SystemState,
        site: str,
        held: _StartsNow,
        runtime: float,
        latest: float,
        horizon: float,
    ) -> bool:
        """Whether a plan made now would start the job now, as `held` promised."""
        now = state.now_s
        if now >= held.until_s or runtime != held.runtime_s or latest != held.latest_s:
            return False
        forecast = self._still_forecast(state, site, held.forecast)
        if forecast is None:
            return False
        # ... and cut where it was: no breakpoint between the two cuts
        cut = forecast.breakpoints_before(now + horizon)  # horizon > 0: from now
        if cut != forecast.breakpoints_before(held.end_s):
            return False
        held.forecast = forecast  # the same from now on: jobs held since share the check
        return True

    def _still_forecast(
        self, state: SystemState, site: str, earlier: DecisionForecast
    ) -> DecisionForecast | None:
        """A forecast that is `site`'s from now to `earlier`'s end, if the site's forecast
        now `extends` `earlier` (None if not): `earlier` itself when that is known without a
        fetch (`DecisionForecast.holds_now`), else this decision's, checked once per
        `earlier`."""
        if earlier.holds_now(state, site, self.goal):
            return earlier
        forecast = self.forecast(state, site, earlier.end_s(earlier.horizon_s) - state.now_s)
        if id(earlier) not in self._extended:
            if not forecast.extends(earlier):
                return None
            self._extended.add(id(earlier))
        return forecast

    def started(self, job: JobView) -> None:
        self._planned.pop(job.index, None)
        self._starts_now.pop(job.index, None)
        self._runtimes.pop(job.index, None)
        if job.index in self._quiet_site:
            self._unquiet(job.index)

    def queued(self, job: JobView) -> None:
        self._starts_now.pop(job.index, None)  # a requeued job has less work left
        self._runtimes.pop(job.index, None)
