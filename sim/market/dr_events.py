"""Demand-response events of a run: the scenario's `[[demand_response]]` entries turned into
concrete events on the simulation clock (s since the scenario start).

An explicit entry is one event. A generator entry becomes many:

- `daily_peak`: one event a day at a local hour (e.g. the evening peak), kept if it lies
  wholly inside the run;
- `high_carbon`: every stretch where the site's carbon intensity is above a percentile of
  its values over the run (time-weighted), at least `min_duration_h` long; the grid's
  dirtiest hours are when a utility or an aggregator asks for load to be shed.

Each event keeps the key of the entry it came from (`demand_response[2]`, or
`demand_response[2]#5` for a generator's sixth event), for the event log, and the entry's
`program` (a generator's events all inherit it).

What a run measured of its events is recorded here too: each announced event's limit and
baseline (`DrWindow`) and what the events did to each job (`DrJobRecord`), which the
engine's meter fills and the results' metrics read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from sim.config.market import DemandResponseEvent
from sim.grid import CarbonSignal
from sim.util.percentile import weighted_percentile

BASELINE_WINDOW_S = 3600.0
"""An event's baseline (and a `reduction_pct` limit's reference) is the site's mean facility
power over this long before the event's notice."""

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
    program: str | None = None
    """The `[dr_programs]` entry that settles the event in money (`sim.market.dr_programs`)."""


def dr_events(
    entries: Sequence[DemandResponseEvent],
    site_names: Sequence[str],
    start: datetime,
    horizon_s: float,
    signals: Sequence[CarbonSignal],
) -> list[DrEvent]:
    """The concrete events of the scenario's `[[demand_response]]` `entries` in a run of
    `horizon_s` from `start`, ordered by start; `site_names` and `signals` are the sites'
    names and carbon signals (for the high_carbon generator)."""
    names = list(site_names)
    out: list[DrEvent] = []
    for k, ev in enumerate(entries):
        site = names.index(ev.site)
        if ev.generator is None:
            # Both are required for a single event (DemandResponseEvent._one_limit).
            assert ev.start is not None and ev.duration_h is not None
            start_s = (ev.start - start).total_seconds()
            windows = [(start_s, start_s + ev.duration_h * 3600.0)]
        elif ev.generator == "daily_peak":
            # Both are required for daily_peak (DemandResponseEvent._one_limit).
            assert ev.hour is not None and ev.duration_h is not None
            windows = daily_windows(start, horizon_s, ev.hour, ev.duration_h, ev.timezone)
        else:
            windows = high_carbon_windows(
                signals[site], horizon_s, ev.percentile or 90.0, (ev.min_duration_h or 0.0) * 3600
            )
        for n, (start_s, end_s) in enumerate(windows):
            out.append(
                DrEvent(
                    key=f"demand_response[{k}]" + (f"#{n}" if ev.generator else ""),
                    site=site,
                    notice_s=max(0.0, start_s - ev.notice_h * 3600.0),
                    start_s=start_s,
                    end_s=end_s,
                    limit_kw=ev.limit_kw,
                    reduction_pct=ev.reduction_pct,
                    rebound_h=ev.rebound_h,
                    program=ev.program,
                )
            )
    return sorted(out, key=lambda e: (e.start_s, e.site))


def daily_windows(
    start: datetime, horizon_s: float, hour: float, duration_h: float, timezone: str | None
) -> list[tuple[float, float]]:
    """[start_s, end_s) of an event at local `hour` every day, wholly inside [0, horizon_s]."""
    tz = ZoneInfo(timezone or "UTC")
    day = start.astimezone(tz).date()
    out: list[tuple[float, float]] = []
    while True:
        local = datetime.combine(day, time(0), tzinfo=tz) + timedelta(hours=hour)
        start_s = (local - start).total_seconds()
        end_s = start_s + duration_h * 3600.0
        if start_s >= horizon_s:
            return out
        if start_s >= 0.0 and end_s <= horizon_s:
            out.append((start_s, end_s))
        day += timedelta(days=1)


def high_carbon_windows(
    signal: CarbonSignal, horizon_s: float, percentile: float, min_duration_s: float
) -> list[tuple[float, float]]:
    """Stretches of [0, horizon_s) where `signal` is above its time-weighted `percentile`
    over [0, horizon_s) (`sim.util.percentile.weighted_percentile`, each value weighted by
    how long it holds), each at least `min_duration_s` long."""
    t = np.concatenate([[0.0], signal.breakpoints_between(0.0, horizon_s)])
    t_next = np.append(t[1:], horizon_s)
    values = np.array([signal.value_at(x) for x in t.tolist()])
    threshold = weighted_percentile(values, t_next - t, percentile)
    out: list[tuple[float, float]] = []
    for a, b, above in zip(t.tolist(), t_next.tolist(), (values > threshold).tolist(), strict=True):
        if not above:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return [(a, b) for a, b in out if b - a >= min_duration_s]


@dataclass(frozen=True, slots=True)
class DrWindow:
    """An announced demand-response event as measured: its limit, and the mean facility
    power in the hour before its notice (its baseline), kW."""

    site: int
    start_s: float
    end_s: float
    limit_kw: float
    baseline_kw: float
    rebound_h: float
    """How long after the event its rebound is looked for, h."""


@dataclass(slots=True)
class DrJobRecord:
    """What demand-response events did to one job at its site (it ran or was suspended
    during one)."""

    run_s: float = 0.0
    """Time it ran inside events, s."""
    done_gpu_s: float = 0.0
    """Work it did then, reference GPU-s."""
    uncapped_gpu_s: float = 0.0
    """Work it would have done uncapped in that time and while suspended in events,
    reference GPU-s."""
    paused_s: float = 0.0
    """Time it was suspended inside events, s."""
