"""Demand-response programs: what the run's events earn and cost in money
(docs/demand-response-programs.md).

A pure module (it does not import the engine). From the run's facility power log (a step
function: its energies are exact integrals), the `dr_events` table, the announced events and
the scenario's `[dr_programs]`, per event under a program:

- `settlement_baseline_kw`: the program's settlement baseline (`previous_hour`,
  `weekdays_10` or `constant`, `settlement_baseline`), and `settlement_baseline_days` the
  weekdays it averaged (weekdays_10 only);
- `settlement_shed_kwh` = max(0, baseline_kw x duration_h - energy_kwh);
- `payment` = settlement_shed_kwh x pay_per_kwh_shed; `penalty` = overshoot_kwh x
  penalty_per_kwh_over (the facility energy above the event's limit);

and per program a capacity payment of committed_kw x capacity_per_kw_month x the run's
months. Amounts are converted from the program's currency to the scenario's with the ECB
rates of `sim.models.pricing`. Summary: `dr_payment` (capacity plus energy payments) and
`dr_penalty`, None when no `[[demand_response]]` entry names a program.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from sim.config.market import DrProgram
from sim.market.dr_events import DrEvent
from sim.models.pricing import PriceBook, conversion_rate

__all__ = [
    "MONTH_H",
    "WEEKDAYS_IN_BASELINE",
    "DrSettlement",
    "SitePower",
    "settle",
    "settlement_baseline",
    "weekdays_baseline",
]

MONTH_H = 365.2425 * 24.0 / 12.0
"""A month of a capacity payment: the mean Gregorian month, 730.485 h."""
WEEKDAYS_IN_BASELINE = 10
"""Days a `weekdays_10` baseline averages when the run has them (CAISO's "10 of 10")."""
_DAY_S = 86400.0


class SitePower:
    """One site's facility power from the power log (constant between its rows); exact
    energies over any interval."""

    def __init__(self, power: pd.DataFrame, site: str, horizon_s: float):
        rows = power[power["site"] == site]
        knots = np.append(rows["time_s"].to_numpy(dtype=float), horizon_s)
        kw = rows["facility_w"].to_numpy(dtype=float) / 1000.0
        self._knots = knots
        self._cumulative_kwh = np.concatenate([[0.0], np.cumsum(kw * np.diff(knots))]) / 3600.0

    def energy_kwh(self, t0_s: float, t1_s: float) -> float:
        """Facility energy over [t0_s, t1_s] (inside the logged span), kWh: the cumulative
        energy is linear between rows, so interpolating it is exact."""
        e = np.interp([t0_s, t1_s], self._knots, self._cumulative_kwh)
        return float(e[1] - e[0])


def weekdays_baseline(
    power: SitePower,
    event: DrEvent,
    site_windows: Sequence[tuple[float, float]],
    start: datetime,
) -> tuple[float, int]:
    """(mean facility kW, days used) over the event's hours on the last
    `WEEKDAYS_IN_BASELINE` weekdays before it: days back by whole 24 h steps, weekdays
    Monday-Friday of the UTC calendar, wholly inside the run and before the notice, and
    not event days: no event at the site (`site_windows`) on the UTC calendar day(s) the
    hours fall on, as in CAISO's 10-in-10 rule. Fewer days when the run holds fewer (NaN
    kW and 0 days without any). `start`: the run's start."""
    duration_s = event.end_s - event.start_s
    energies: list[float] = []
    back = 1
    while len(energies) < WEEKDAYS_IN_BASELINE:
        t0, t1 = event.start_s - back * _DAY_S, event.end_s - back * _DAY_S
        back += 1
        if t0 < 0.0:
            break
        weekday = (start + timedelta(seconds=t0)).weekday()
        day0, day1 = _utc_days(start, t0, t1)
        clear = all(day1 <= s or e <= day0 for s, e in site_windows)  # no event that day
        if t1 <= event.notice_s and weekday < 5 and clear:
            energies.append(power.energy_kwh(t0, t1))
    if not energies:
        return math.nan, 0
    return float(np.mean(energies)) * 3600.0 / duration_s, len(energies)


def _utc_days(start: datetime, t0_s: float, t1_s: float) -> tuple[float, float]:
    """The run-clock span (s) of the whole UTC calendar days that [t0_s, t1_s] touches, in a
    run from `start`."""
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
    offset_s = (start - midnight).total_seconds()
    day0 = math.floor((t0_s + offset_s) / _DAY_S) * _DAY_S - offset_s
    day1 = math.ceil((t1_s + offset_s) / _DAY_S) * _DAY_S - offset_s
    return day0, max(day1, day0 + _DAY_S)


def settlement_baseline(
    program: DrProgram,
    event: DrEvent,
    row: pd.Series,
    power: SitePower,
    site_windows: Sequence[tuple[float, float]],
    start: datetime,
) -> tuple[float, int | None]:
    """(baseline kW, weekdays used or None) of `event` (its `dr_events` `row`) under
    `program`. `previous_hour` is the row's `baseline_kw`: the mean facility power in the
    hour before the notice, the same reference a `reduction_pct` limit is cut from."""
    if program.baseline == "previous_hour":
        return float(row["baseline_kw"]), None
    if program.baseline == "constant":
        assert program.baseline_kw is not None  # DrProgram._keys_that_apply
        return program.baseline_kw, None
    return weekdays_baseline(power, event, site_windows, start)


@dataclass(frozen=True, slots=True)
class DrSettlement:
    """The money of a run's events: columns for the `dr_events` table (None: no program in
    the run), the summary keys, and the meta.json entry."""

    columns: pd.DataFrame | None
    summary: Mapping[str, float | None]
    meta: dict[str, Any] | None = None


def settle(
    programs: Mapping[str, DrProgram],
    site_names: Sequence[str],
    start: datetime,
    run_duration_h: float,
    currency: str,
    dr: pd.DataFrame,
    events: Sequence[DrEvent],
    power: pd.DataFrame,
) -> DrSettlement:
    """Settle the announced `events` (one per row of the `dr_events` table `dr`, in order)
    under the `programs` the scenario's `[[demand_response]]` entries name (`[dr_programs]`,
    by name), from the `power` log of a run of `run_duration_h` from `start` at the sites
    `site_names`, in the run's `currency`."""
    used = sorted(programs)
    if not used:
        return DrSettlement(None, {"dr_payment": None, "dr_penalty": None})
    powers = {i: SitePower(power, n, run_duration_h * 3600.0) for i, n in enumerate(site_names)}
    site_windows: dict[int, list[tuple[float, float]]] = {i: [] for i in powers}
    for ev in events:
        site_windows[ev.site].append((ev.start_s, ev.end_s))
    fx = {p: conversion_rate(programs[p].currency, currency) for p in used}
    rows: list[dict[str, Any]] = []
    for ev, (_, row) in zip(events, dr.iterrows(), strict=True):
        if ev.program is None:
            rows.append({"program": None, "payment": 0.0, "penalty": 0.0})
            continue
        program = programs[ev.program]
        baseline_kw, days = settlement_baseline(
            program, ev, row, powers[ev.site], site_windows[ev.site], start
        )
        event_h = (ev.end_s - ev.start_s) / 3600.0
        factor = fx[ev.program]
        shed_kwh = baseline_kw * event_h - float(row["energy_kwh"])
        shed_kwh = math.nan if math.isnan(shed_kwh) else max(0.0, shed_kwh)
        rows.append(
            {
                "program": ev.program,
                "settlement_baseline_kw": baseline_kw,
                "settlement_baseline_days": days,
                "settlement_shed_kwh": shed_kwh,
                "payment": 0.0
                if math.isnan(shed_kwh)
                else program.pay_per_kwh_shed * factor * shed_kwh,
                "penalty": program.penalty_per_kwh_over * factor * float(row["overshoot_kwh"]),
            }
        )
    columns = pd.DataFrame(
        rows,
        columns=[
            "program",
            "settlement_baseline_kw",
            "settlement_baseline_days",
            "settlement_shed_kwh",
            "payment",
            "penalty",
        ],
    ).astype(
        {
            "program": "str",
            "settlement_baseline_kw": float,
            "settlement_baseline_days": "Int64",
            "settlement_shed_kwh": float,
            "payment": float,
            "penalty": float,
        }
    )
    capacity = {
        p: programs[p].capacity_per_kw_month
        * (programs[p].committed_kw or 0.0)
        * fx[p]
        * run_duration_h
        / MONTH_H
        for p in used
    }
    book = PriceBook(currency).meta()
    short = columns["settlement_baseline_days"].dropna()
    meta = {
        "currency": currency,
        "rate_date": book["usd_rate_date"],
        "rate_source": book["usd_rate_source"],
        "programs": {
            p: {
                **programs[p].model_dump(),
                "to_run_currency": fx[p],
                "capacity_payment": capacity[p],
                "energy_payment": float(columns.loc[columns.program == p, "payment"].sum()),
                "penalty": float(columns.loc[columns.program == p, "penalty"].sum()),
                "events": int((columns.program == p).sum()),
            }
            for p in used
        },
        "events_short_of_10_weekdays": int((short < WEEKDAYS_IN_BASELINE).sum()),
        "events_without_baseline": int(
            (columns["program"].notna() & columns["settlement_shed_kwh"].isna()).sum()
        ),
    }
    summary = {
        "dr_payment": sum(capacity.values()) + float(columns["payment"].sum()),
        "dr_penalty": float(columns["penalty"].sum()),
    }
    return DrSettlement(columns, summary, meta)
