"""Demand-response metering: announcing the scenario's events, measuring each against its
baseline, what the events did to the jobs at their sites, and what they earned and cost
under their programs (`sim.market.dr_programs`).

At an event's notice the meter fixes its limit (given, or a reduction of the mean
facility power in the hour before the notice: the baseline) and calls a decision; at its
start and end it calls decisions again. What is measured is what the utility meters: the
facility power, or at a site with on-site equipment its grid import
(`OnsiteEnergy.mean_import_kw` for the baseline, from the balance advanced in the run;
`OnsiteEnergy.metered_power` for the event's power after the run).

A job running at an event's site accrues, for the time inside events, the work it did
and the work it would have done uncapped; a job suspended inside one accrues the work it
did not do. The result metrics are defined in
`sim.results` (`demand_response_table`, `dr_job_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.api import DemandResponseView
from sim.engine.component import Component
from sim.engine.ledger import Pool, Site
from sim.market.dr_events import BASELINE_WINDOW_S, DrEvent, DrJobRecord, DrWindow, dr_events
from sim.market.dr_programs import settle
from sim.results import (
    ResultParts,
    demand_response_metrics,
    demand_response_table,
    dr_job_metrics,
    jain_index,
)

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.engine.onsite import OnsiteEnergy
    from sim.engine.runs import Runs
    from sim.engine.services import Services

__all__ = ["DemandResponseMeter"]


@dataclass(frozen=True, slots=True)
class _Pause:
    """A job suspended while an event at its site was on or ahead."""

    site: int
    since_s: float
    uncapped_rate: float
    """What it would do uncapped, reference GPU-s per s."""


class DemandResponseMeter(Component):
    """The run's demand-response events and their per-job accounting."""

    name = "dr"
    uses = ("runs", "services", "fleet", "onsite")

    __slots__ = (
        "_core",
        "_runs",
        "_services",
        "_fleet",
        "_onsite",
        "events",
        "announced",
        "windows",
        "window_events",
        "site_windows",
        "jobs",
        "_paused",
    )

    def __init__(
        self, core: Core, *, runs: Runs, services: Services, fleet: Fleet, onsite: OnsiteEnergy
    ):
        self._core = core
        self._runs = runs
        self._services = services
        self._fleet = fleet
        self._onsite = onsite
        scenario = core.scenario
        self.events: list[DrEvent] = dr_events(
            scenario.demand_response,
            scenario.site_names(),
            scenario.start,
            scenario.horizon_s,
            [s.signal for s in fleet.sites],
        )
        self.announced: list[DemandResponseView] = []
        """Events announced and not yet ended, as policies see them."""
        self.windows: list[DrWindow] = []
        """Every announced event, with its limit and baseline."""
        self.window_events: list[DrEvent] = []
        """The event of each of `windows` (its program, its notice)."""
        self.site_windows: list[list[tuple[float, float]]] = [[] for _ in core.scenario.sites]
        """Per site, the (start_s, end_s) of its announced events, merged where they touch."""
        self.jobs: dict[int, DrJobRecord] = {}
        """Per job that ran or was suspended during an event at its site."""
        self._paused: dict[int, _Pause] = {}

    def idle_hooks(self) -> frozenset[str]:
        """Without demand-response events, no segment falls in one."""
        return frozenset() if self.events else frozenset({"segment_closed"})

    def start(self) -> None:
        for ev in self.events:
            self._core.env.process(self._announce(ev))

    def _announce(self, ev: DrEvent):
        core = self._core
        env = core.env
        site = self._fleet.sites[ev.site]
        start_s, end_s, notice_s = ev.start_s, ev.end_s, ev.notice_s
        yield env.timeout(notice_s)
        since_s = notice_s - BASELINE_WINDOW_S
        if self._onsite.assets[site.index] is None:
            # the services' power reaches the power log only at the end
            baseline_kw = self._fleet.mean_facility_kw(
                site, since_s, notice_s
            ) + self._services.mean_extra_facility_kw(site, since_s, notice_s)
        else:  # the live balance counts the services' power
            baseline_kw = self._onsite.mean_import_kw(site.index, since_s)
        if ev.limit_kw is not None:
            limit_kw = ev.limit_kw
        else:
            assert ev.reduction_pct is not None
            limit_kw = baseline_kw * (1.0 - ev.reduction_pct / 100.0)
        view = DemandResponseView(site.name, start_s, end_s, limit_kw)
        self.announced.append(view)
        self.windows.append(
            DrWindow(site.index, start_s, end_s, limit_kw, baseline_kw, ev.rebound_h)
        )
        self.window_events.append(ev)
        self.site_windows[site.index] = _union(self.site_windows[site.index], start_s, end_s)
        core.events.append(notice_s, "dr_notice", site=site.index, value=limit_kw, detail=ev.key)
        core.request_decision()
        if start_s > env.now:
            yield env.timeout(start_s - env.now)
        core.events.append(start_s, "dr_start", site=site.index, value=limit_kw)
        core.request_decision()
        yield env.timeout(end_s - env.now)
        self.announced.remove(view)
        core.events.append(end_s, "dr_end", site=site.index, value=limit_kw)
        core.request_decision()

    def active(self, site_index: int, t_s: float) -> bool:
        """An announced event at the site is on at `t_s`."""
        return any(s <= t_s < e for s, e in self.site_windows[site_index])

    def pue_stepped(self, i: int, t_s: float) -> None:
        """Site `i`'s PUE changed: during an event there its limit in IT watts moved, and
        the policy decides."""
        if self.active(i, t_s):
            self._core.request_decision()

    def ahead(self, site_index: int, t_s: float) -> bool:
        """An announced event at the site is on at `t_s` or still to come."""
        return any(t_s < e for _, e in self.site_windows[site_index])

    def overlap_s(self, site_index: int, t0_s: float, t1_s: float) -> float:
        """Time of [t0_s, t1_s] inside `site_index`'s demand-response events, s."""
        return sum(max(0.0, min(t1_s, e) - max(t0_s, s)) for s, e in self.site_windows[site_index])

    def segment_closed(
        self, j: int, site: Site, pool: Pool, t0_s: float, t1_s: float, energy_kwh: float
    ) -> None:
        """The time of the segment inside events at the site: the work `j` did then at its
        rate, and what it would have done uncapped."""
        if not self.site_windows[site.index]:
            return
        in_event_s = self.overlap_s(site.index, t0_s, t1_s)
        if in_event_s > 0.0:
            runs = self._runs
            rec = self._record(j)
            rec.run_s += in_event_s
            rec.done_gpu_s += runs.live[j].rate * in_event_s
            rec.uncapped_gpu_s += runs.uncapped_rate(j, pool) * in_event_s

    def suspending(self, j: int) -> None:
        """Running `j` is about to be suspended: if an event at its site is on or ahead,
        the work it will not do in events is counted from now."""
        runs, now = self._runs, self._core.env.now
        run = runs.live[j]
        if self.ahead(run.site.index, now):
            self._paused[j] = _Pause(run.site.index, now, runs.uncapped_rate(j, run.pool))

    def end_pause(self, j: int, now: float) -> None:
        """Charge a job suspended during an event with the work it did not do in events."""
        paused = self._paused.pop(j, None)
        if paused is not None:
            lost_s = self.overlap_s(paused.site, paused.since_s, now)
            if lost_s > 0.0:
                rec = self._record(j)
                rec.uncapped_gpu_s += paused.uncapped_rate * lost_s
                rec.paused_s += lost_s

    def _record(self, j: int) -> DrJobRecord:
        rec = self.jobs.get(j)
        if rec is None:
            rec = self.jobs[j] = DrJobRecord()
        return rec

    def close(self, now_s: float) -> None:
        for j in tuple(self._paused):
            self.end_pause(j, now_s)

    def write_results(self, out: ResultParts) -> None:
        """The `dr_events` table and its summary, with the programs' money columns and
        `dr_payment`/`dr_penalty` (`sim.market.dr_programs.settle`); column `dr_slowdown` = the
        job's uncapped speed / its actual speed over its time in events (NaN if it never ran
        in one; inf if suspended through them); `slowdown_jain_index` over the jobs events
        touched, or over every completed job's `slowdown` when the run has no events."""
        core = self._core
        power = self._onsite.metered_power(out.power)
        dr = demand_response_table(power, self._fleet.names, self.windows, core.horizon_s)
        scenario = core.scenario
        programs = {
            e.program: scenario.dr_programs[e.program]
            for e in scenario.demand_response
            if e.program is not None
        }
        money = settle(
            programs,
            self._fleet.names,
            scenario.start,
            scenario.duration_h,
            scenario.currency,
            dr,
            self.window_events,
            power,
        )
        if money.columns is not None:
            out.tables["dr_events"] = pd.concat([dr, money.columns], axis=1)
            out.meta["dr_programs"] = money.meta
        else:
            out.tables["dr_events"] = dr
        out.summary.update(demand_response_metrics(dr))
        out.summary.update(money.summary)
        out.summary.update(dr_job_metrics(list(self.jobs.values())))
        dr_slowdown = np.full(len(core.jobs), np.nan)
        for j, rec in self.jobs.items():
            if rec.uncapped_gpu_s > 0.0:
                done = rec.done_gpu_s
                dr_slowdown[j] = rec.uncapped_gpu_s / done if done > 0 else np.inf
        out.job_columns["dr_slowdown"] = dr_slowdown
        touched = dr_slowdown if self.windows else out.job_columns["slowdown"]
        touched = touched[~np.isnan(touched)]
        out.summary["slowdown_jain_index"] = jain_index(1.0 / touched)


def _union(windows: list[tuple[float, float]], start_s: float, end_s: float):
    """`windows` (sorted, disjoint) with [start_s, end_s) added, merged where they touch."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted([*windows, (start_s, end_s)]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
