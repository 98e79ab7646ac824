"""Demand-response events of a run: the scenario's `[[demand_response]]` entries turned into
concrete events on the simulation clock (s since the scenario start).

An explicit entry is one event. (Generators that produce many events from one entry are
expanded here too.) Each event keeps the key of the entry it came from, for the event log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.grid import CarbonSignal
from sim.scenario import Scenario

__all__ = ["DrEvent", "dr_events"]


@dataclass(frozen=True, slots=True)
class DrEvent:
    """One event: keep `site`'s facility power under a limit during [start_s, end_s).

    The limit is `limit_kw`, or `reduction_pct` below the site's mean facility power in the
    hour before `notice_s`, when the event is announced."""

    key: str
    site: int
    notice_s: float
    start_s: float
    end_s: float
    limit_kw: float | None
    reduction_pct: float | None
    rebound_h: float


def dr_events(scenario: Scenario, signals: Sequence[CarbonSignal]) -> list[DrEvent]:
    """The concrete events of `scenario`, ordered by start; `signals` are the sites' carbon
    signals (for generators driven by carbon intensity)."""
    names = scenario.site_names()
    out = []
    for k, ev in enumerate(scenario.demand_response):
        start_s = (ev.start - scenario.start).total_seconds()
        out.append(
            DrEvent(
                key=f"demand_response[{k}]",
                site=names.index(ev.site),
                notice_s=max(0.0, start_s - ev.notice_h * 3600.0),
                start_s=start_s,
                end_s=start_s + ev.duration_h * 3600.0,
                limit_kw=ev.limit_kw,
                reduction_pct=ev.reduction_pct,
                rebound_h=ev.rebound_h,
            )
        )
    return sorted(out, key=lambda e: (e.start_s, e.site))
