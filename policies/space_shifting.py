"""Space-shifting: run each job where it emits least, and move running jobs when it pays.

- `lowest_carbon_site`: each pending job, in queue order, starts now on the site it may use
  (`JobView.allowed_sites`) with the lowest carbon intensity now among those with enough
  free GPUs of one model (the "follow the greenest grid" heuristic of the geo-distributed
  scheduling literature, e.g. Zhou et al., "Carbon-aware load balancing for geo-distributed
  cloud services", MASCOTS 2013). The data transfer is not weighed.
- `forecast_site`: each pending job starts now on the (site, GPU model) it may use with the
  lowest expected carbon: the facility energy of its run there (`state.estimate`) times the
  mean forecast intensity over the run, which begins once its data has crossed the WAN,
  plus the transfer's own carbon (`state.transfer_cost`, hop by hop) and the idle power of
  the GPUs held meanwhile.
- `space_time`: a job with a deadline gets the (site, GPU model, start time) with the
  lowest expected carbon, the start anywhere in [now, deadline - transfer - runtime -
  margin_s] (the best window on each site's forecast, found exactly as in `wait_awhile`);
  it is deferred to that time and then started there, or, if that site has no room by
  then, where `forecast_site` would start it. Jobs without a deadline run as in
  `forecast_site`. Planned once, when the job is first seen (Hanafy et al.'s joint
  spatio-temporal shifting, "Going Green for Less Green", 2023, here with WAN costs).
- `migrate`: an adjuster (see `policies.kit.Adjuster`): alone it adjusts `run_now`, in a
  `chain` the members before it. At every decision (and every signal step) it moves each
  interruptible running job that the plan leaves alone to the (site, GPU model) with the
  largest expected saving, if that saving exceeds `min_saving_kg`:

      saving = carbon(stay) - carbon(run there) - migration cost

  `carbon(stay)` is the work left at the current site under the forecast;
  `carbon(run there)` the same work, plus what falls back to the last periodic checkpoint,
  at the new site, starting after the stall; the migration cost is
  `state.migration_cost` (checkpoint write, WAN transfer, read, GPUs held idle). A move
  that would make a job with a deadline miss it is not made.

All four respect each job's allowed sites and the free GPUs; a job that fits nowhere it may
go waits (behind it, the queue waits too unless `backfill = true`). Expected carbon uses
the facility energy, so each site's PUE counts; embodied carbon is not weighed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from policies.kit import (
    MIN_DEFER_S,
    Adjuster,
    Bookings,
    DecisionForecasts,
    FreeGpus,
    Objective,
    TimeShifter,
    first_come_first_served,
    job_of,
    objective_now,
)
from policies.kit.option_kernels import price_options
from policies.kit.time_shifting import ForecastBlock, fetch_horizon_s
from sim.api import Action, JobView, Migrate, Policy, PolicyError, Start, SystemState

__all__ = ["ForecastSite", "LowestCarbonSite", "MigrateWhenWorth", "SpaceTime"]

_KWH_G_PER_KG = 1000.0
_WS_PER_KWH = 3.6e6


@dataclass
class _StartNow(Policy):
    """Start the pending jobs now, in queue order (`first_come_first_served`), each on the
    site a subclass ranks best."""

    backfill: bool = False
    """Let later jobs that fit start while the head of the queue waits."""
    objective: Literal["carbon", "cost", "weighted"] = "carbon"
    """What the site choice minimises: "carbon", "cost" (the sites' energy price) or
    "weighted" (price + carbon x carbon_price_per_t), `policies.kit.Objective`."""
    carbon_price_per_t: float = 0.0
    """With objective "weighted": the scenario's currency per tonne CO2e."""

    def __post_init__(self) -> None:
        self.goal = Objective(self.objective, self.carbon_price_per_t)


@dataclass
class LowestCarbonSite(_StartNow):
    """Start each job on the allowed site with the lowest carbon intensity now that fits."""

    def decide(self, state: SystemState) -> list[Action]:
        # sorted() is stable: sites with equal values keep the scenario's order
        by_carbon = sorted(state.sites, key=lambda site: objective_now(state, site, self.goal))
        return first_come_first_served(
            state, self.backfill, lambda free, job: free.place(job, by_carbon)
        )


@dataclass(frozen=True, slots=True)
class Option:
    """Running a job on `site`'s `gpu_model` pool from `start_s` (its data transfer
    included) to `end_s`, and what the objective weighs of it (`score`)."""

    site: str
    gpu_model: str
    start_s: float
    end_s: float
    score: float
    """Expected carbon, kg CO2e, under objective "carbon" (for a migration: its saving);
    else the expected cost, the scenario's currency, with carbon at its price for
    "weighted" (`policies.kit.Objective.per_score`)."""


class Outlook:
    """Expected carbon of runs, from the forecasts of one decision (`DecisionForecasts`),
    with what does not depend on the start time (the WAN transfer, the run's estimate, the
    GPUs held while the data moves) priced once per job, site and GPU model."""

    def __init__(self, state: SystemState, goal: Objective | None = None):
        self.state = state
        self.now_s = state.now_s
        self.goal = goal if goal is not None else Objective()
        """What the options' `score` weighs (carbon by default)."""
        self._forecasts = DecisionForecasts(state, self.goal)
        self._sites: dict[str, tuple[dict[str, int], float, float, float]] = {}
        """Per site: installed GPUs per model, host W per GPU, PUE, objective signal now."""
        self._block: ForecastBlock | None = None
        """Every site's forecast of this decision, for `options`."""
        self._index = {site: k for k, site in enumerate(state.sites)}
        """Site -> its forecast's index in `_block`."""
        self._fixed: dict[tuple[JobView, str], list[tuple[str, float, float, float, float]]] = {}
        """Per (job, site): per usable GPU model, (model, transfer s, runtime s, run kWh,
        the score of the transfer and of the GPUs held meanwhile)."""

    def forecast(self, site: str, until_s: float) -> tuple[np.ndarray, np.ndarray]:
        """`site`'s forecast from now to at least `until_s` (s since the scenario start)."""
        got = self._forecasts.until(site, until_s)
        return got.times, got.values

    def mean_per_kwh(self, site: str, start_s: float, length_s: float) -> float:
        """Mean of `site`'s forecast objective signal over [start_s, start_s + length_s],
        per kWh (g CO2e under "carbon"; `DecisionForecast.mean_per_kwh`)."""
        return self._forecasts.until(site, start_s + length_s).mean_per_kwh(start_s, length_s)

    def _site(self, site: str) -> tuple[dict[str, int], float, float, float]:
        got = self._sites.get(site)
        if got is None:
            state = self.state
            got = self._sites[site] = (
                state.total_gpus(site),
                state.host_w_per_gpu(site),
                state.pue(site),
                objective_now(state, site, self.goal),
            )
        return got

    def _fixed_parts(self, job: JobView, site: str) -> list[tuple[str, float, float, float, float]]:
        """Per GPU model of `site` with enough GPUs for `job`: (model, transfer s, runtime s,
        run kWh, the score (`Option.score`) of the transfer and of the GPUs held idle
        meanwhile)."""
        key = (job, site)
        got = self._fixed.get(key)
        if got is None:
            state, goal = self.state, self.goal
            gpus = job.gpus
            move_s, _, move_kg = state.transfer_cost(job.origin_site, site, job.data_gb)
            total, host_w, pue, ci = self._site(site)
            got = []
            for model, count in total.items():
                if count < gpus:
                    continue
                runtime_s, run_kwh = state.estimate(job, site, None, model)
                hold_kwh = gpus * (state.idle_w(site, model) + host_w) * move_s * pue / _WS_PER_KWH
                fixed = move_kg * goal.per_kg_co2 + hold_kwh * ci / goal.per_score
                got.append((model, move_s, runtime_s, run_kwh, fixed))
            self._fixed[key] = got
        return got

    def options(self, job: JobView, shift_until_s: float | None = None) -> list[Option]:
        """Every (site, GPU model) pending `job` may use and could ever fit on, with the
        expected carbon of starting it now (or, with `shift_until_s`, its deadline less
        the margin: at the best time before that), lowest score first. Priced in one
        compiled call (`price_options`) on this decision's forecasts of every site."""
        now = self.now_s
        index = self._index
        found: list[tuple[str, str]] = []
        columns: list[tuple[int, float, float, float, float]] = []
        until_s = now if shift_until_s is None else shift_until_s
        for site in job.allowed_sites:
            k = index[site]
            for model, move_s, runtime_s, run_kwh, fixed in self._fixed_parts(job, site):
                found.append((site, model))
                columns.append((k, move_s, runtime_s, run_kwh, fixed))
                until_s = max(until_s, now + move_s + runtime_s)
        if not found:
            return []
        block = self._block_until(until_s - now)
        at, move, runtime, kwh, fixed_score = zip(*columns, strict=True)
        priced = price_options(
            block.times,
            block.values,
            block.offsets,
            np.array(at, dtype=np.int64),
            np.array(move),
            np.array(runtime),
            np.array(kwh),
            np.array(fixed_score),
            now,
            math.nan if shift_until_s is None else shift_until_s,
            MIN_DEFER_S,
            self.goal.per_score,
        ).tolist()
        out = [
            Option(site, model, start_s, end_s, score)
            for (site, model), (start_s, end_s, score) in zip(found, priced, strict=True)
        ]
        out.sort(key=lambda o: o.score)  # stable: ties keep the scenario's site order
        return out

    def _block_until(self, horizon_s: float) -> ForecastBlock:
        """This decision's forecasts of every site, at least `horizon_s` long (s from now;
        PolicyError if a site's is empty: its signal has ended)."""
        got = self._block
        if got is None or got.horizon_s < horizon_s:
            longer = fetch_horizon_s(got.horizon_s if got else None, horizon_s)
            got = self._block = ForecastBlock(self.state, self.state.sites, longer, self.goal)
            empty = np.flatnonzero(got.offsets[1:] == got.offsets[:-1])
            if empty.size:
                site = self.state.sites[int(empty[0])]
                raise PolicyError(f"space_time: site {site}'s forecast is empty at {self.now_s} s")
        return got


def take_first(
    free: FreeGpus, job: JobView, options: list[Option], margin_s: float = 0.0
) -> Start | None:
    """A `Start` of `job` now on the first of `options` with enough free GPUs, taking them.
    A job with a deadline takes only those that end `margin_s` before it while any do, else
    the one that ends first: a cleaner grid never costs a deadline that could be kept."""
    fits = [o for o in options if free.can_take(job, o.site, o.gpu_model)]
    if job.deadline_s is not None:
        latest_end_s = job.deadline_s - margin_s
        fits = [o for o in fits if o.end_s <= latest_end_s] or sorted(fits, key=lambda o: o.end_s)
    if not fits:
        return None
    o = fits[0]
    free.take_job(job, o.site, o.gpu_model)
    return Start(job, o.site, gpu_model=o.gpu_model)


@dataclass
class ForecastSite(_StartNow):
    """Start each job now where its run, its data transfer included, is expected to emit
    least."""

    def decide(self, state: SystemState) -> list[Action]:
        outlook = Outlook(state, self.goal)
        return first_come_first_served(
            state, self.backfill, lambda free, job: take_first(free, job, outlook.options(job))
        )


@dataclass
class SpaceTime(TimeShifter):
    """Choose site and start time together: the lowest expected carbon before the deadline."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._planned: dict[JobView, Option] = {}
        """Jobs deferred to a planned start -> where and when."""
        self._booked = Bookings()
        """The running jobs and the plans as the current decision sees them: every plan in
        `_planned`, and those started since the decision's first look (`_leaving`)."""
        self._leaving: list[tuple[JobView, Option]] = []
        """Plans of jobs started since the last look, still booked until the next one (a
        decision's bookings are those of its first look, and the plans it makes)."""
        self._looked = False

    def decide(self, state: SystemState) -> list[Action]:
        self._outlook = Outlook(state, self.goal)
        self._looked = False  # the bookings are brought up to date when first asked
        return super().decide(state)

    def bookings(self, state: SystemState) -> Bookings:
        """This decision's bookings (running jobs and the plans of jobs not started at its
        first call)."""
        if not self._looked:
            self._looked = True
            for job, o in self._leaving:
                self._booked.drop(job, o)
            self._leaving.clear()
            for job in [j for j in self._planned if j.state not in ("pending", "deferred")]:
                # started or rejected without this policy's knowing
                self._booked.drop(job, self._planned.pop(job))
            self._booked.look_at(state)
        return self._booked

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        if job in self._planned:
            return None  # back from its deferral: its time has come
        assert job.deadline_s is not None
        for o in self._outlook.options(job, shift_until_s=job.deadline_s - self.margin_s):
            if o.start_s - state.now_s < MIN_DEFER_S:
                return None  # best now: start where it fits now
            booked = self.bookings(state)
            if booked.fits(o, job.gpus):
                booked.add(job, o)
                self._planned[job] = o
                return o.start_s
        return None

    def place(self, state: SystemState, free: FreeGpus, job: JobView) -> Start | None:
        plan = self._planned.get(job)
        if plan is not None and free.take_job(job, plan.site, plan.gpu_model) is not None:
            return Start(job, plan.site, gpu_model=plan.gpu_model)
        return take_first(free, job, self._outlook.options(job), self.margin_s)

    def started(self, job: JobView) -> None:
        plan = self._planned.pop(job, None)
        if plan is not None:
            self._leaving.append((job, plan))


@dataclass
class MigrateWhenWorth(Adjuster):
    """Move interruptible running jobs where the expected saving exceeds the move's cost."""

    min_saving_kg: float = 0.0
    """Move a job only if the expected saving, the migration's cost deducted, exceeds this,
    kg CO2 (>= 0; a margin against forecast error)."""
    margin_s: float = 60.0
    """A job with a deadline is moved only if it still finishes this long before it, s."""

    def __post_init__(self) -> None:
        if not self.min_saving_kg >= 0.0:
            raise ValueError(f"min_saving_kg must be >= 0 kg, got {self.min_saving_kg}")
        if not self.margin_s >= 0.0:
            raise ValueError(f"margin_s must be >= 0 s, got {self.margin_s}")
        self.signal_steps = True

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        planned = {job_of(a) for a in actions}
        free = FreeGpus(state)
        for a in actions:
            free.book(a)
        outlook = Outlook(state)
        out = list(actions)
        for job in state.running:
            if job.interruptible and not job.held and job not in planned:
                best = self.best_move(state, outlook, free, job)
                if best is not None and free.take_for(job, best.site, best.gpu_model):
                    out.append(Migrate(job, best.site, best.gpu_model))
        return out

    def best_move(
        self, state: SystemState, outlook: Outlook, free: FreeGpus, job: JobView
    ) -> Option | None:
        """The (site, model) with free GPUs where moving `job` now saves most, if that saving
        exceeds `min_saving_kg`; `score` of the answer is the saving, kg."""
        now = state.now_s
        here, here_model, cap_w = job.site, job.gpu_model, job.cap_w
        assert here is not None and here_model is not None
        stay_s, stay_kwh = state.estimate(job, here, cap_w, here_model)
        stay_kg = stay_kwh * outlook.mean_per_kwh(here, now, stay_s) / _KWH_G_PER_KG
        remaining_gpu_h = job.remaining_gpu_h
        best: Option | None = None
        for site in job.allowed_sites:
            for model, n_free in free.at(site).items():
                if (site, model) == (here, here_model) or n_free < job.gpus:
                    continue
                spec = state.gpu_spec(model)
                if cap_w is not None and not spec.min_cap_w <= cap_w <= spec.max_cap_w:
                    continue  # Migrate keeps the job's own cap
                cost = state.migration_cost(job, site, model)
                run_s, run_kwh = state.estimate(job, site, cap_w, model)
                redo = 1.0 + cost.lost_gpu_h / remaining_gpu_h if remaining_gpu_h > 0 else 1.0
                run_s, run_kwh = run_s * redo, run_kwh * redo
                end_s = now + cost.stall_s + run_s
                if job.deadline_s is not None and end_s > job.deadline_s - self.margin_s:
                    continue
                mean = outlook.mean_per_kwh(site, now + cost.stall_s, run_s)
                saving_kg = stay_kg - run_kwh * mean / _KWH_G_PER_KG - cost.carbon_kg
                if saving_kg > self.min_saving_kg and (best is None or saving_kg > best.score):
                    best = Option(site, model, now, end_s, saving_kg)
        return best
