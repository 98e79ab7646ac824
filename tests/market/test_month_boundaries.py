"""Demand-charge months begin at the first instant of the local calendar month, in every
time zone, including those whose clocks change at local midnight (sim.market.billing)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

import numpy as np
import pandas as pd
import pytest

from sim.engine.build import simulate
from sim.market.billing import interval_peaks_kw, month_start
from tests.conftest import make_scenario, run_demand_peaks, site

RUN_FROM = datetime(2016, 12, 20, tzinfo=UTC)
RUN_TO = datetime(2025, 1, 10, tzinfo=UTC)
"""A run over every month of the years the grid data covers (2017-2024), and a bit more."""


def _changes_at_midnight(zone: str) -> list[datetime]:
    """The instants in [RUN_FROM, RUN_TO) when `zone`'s UTC offset changes and the local wall
    time just before or just after the change is 00:00. Offsets sampled daily, each change
    then found to the second by bisection (no zone changes its offset twice in a day)."""
    days = pd.date_range(RUN_FROM, RUN_TO, freq="D")
    offsets = (days.tz_convert(zone).tz_localize(None) - days.tz_localize(None)).asi8
    tz = ZoneInfo(zone)
    out = []
    for i in np.flatnonzero(np.diff(offsets)).tolist():
        lo, hi = int(days[i].timestamp()), int(days[i + 1].timestamp())
        before = datetime.fromtimestamp(lo, tz).utcoffset()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if datetime.fromtimestamp(mid, tz).utcoffset() == before:
                lo = mid
            else:
                hi = mid
        change = datetime.fromtimestamp(hi, UTC)
        after = datetime.fromtimestamp(hi, tz).utcoffset()
        assert before is not None and after is not None
        if time(0) in {(change + before).time(), (change + after).time()}:
            out.append(change)
    return out


MIDNIGHT_ZONES = sorted(z for z in available_timezones() if _changes_at_midnight(z))


def _first_local_instant(year: int, month: int, zone: str) -> pd.Timestamp:
    """Brute force: the first whole UTC minute whose local wall time in `zone` is on or after
    00:00 of the month's 1st (every offset is within -12 h..+14 h of UTC and every change in
    these years falls on a whole minute)."""
    wall = pd.Timestamp(year, month, 1)
    minutes = pd.date_range(wall - pd.Timedelta(hours=15), periods=28 * 60, freq="min", tz="UTC")
    local = minutes.tz_convert(zone)
    return local[int(np.argmax(local.tz_localize(None) >= wall))]


def test_the_zones_found_include_those_of_the_issue():
    issue = {"America/Asuncion", "America/Havana", "America/Santiago", "Asia/Beirut"}
    assert issue | {"America/Sao_Paulo"} <= set(MIDNIGHT_ZONES)


@pytest.mark.parametrize("zone", MIDNIGHT_ZONES)
def test_months_begin_at_their_first_local_instant_and_partition_the_run(zone):
    horizon_s = (RUN_TO - RUN_FROM).total_seconds()
    peaks = interval_peaks_kw(np.array([0.0]), np.array([1e3]), horizon_s, RUN_FROM, zone, 15)
    months = pd.period_range("2016-12", "2025-02", freq="M")
    bounds = [_first_local_instant(m.year, m.month, zone) for m in months]
    starts = [start for start, _, _ in peaks]
    assert starts == bounds[:-1]  # each month's start exists and is its first instant
    assert all(a < b for a, b in zip(bounds[:-1], bounds[1:], strict=False))
    assert starts[0] <= pd.Timestamp(RUN_FROM) < starts[1]
    assert starts[-1] < pd.Timestamp(RUN_TO) <= bounds[-1]
    # The months' parts inside the run add up to the run: no instant twice, none left out.
    lengths_s = [(b - a).total_seconds() for a, b in zip(bounds[:-1], bounds[1:], strict=False)]
    inside_s = [covered * n for (_, _, covered), n in zip(peaks, lengths_s, strict=True)]
    assert sum(inside_s) == pytest.approx(horizon_s, rel=1e-12)
    assert [peak_kw for _, peak_kw, _ in peaks] == pytest.approx([1.0] * len(peaks), rel=1e-12)


@pytest.mark.parametrize(
    ("zone", "year", "month", "first_instant"),
    [
        # Midnight does not exist (00:00 -> 01:00): the month begins when the clock jumps.
        ("America/Asuncion", 2023, 10, "2023-10-01T01:00:00-03:00"),
        # Midnight occurs twice (01:00 -> 00:00): the month begins at its first occurrence.
        ("America/Havana", 2020, 11, "2020-11-01T00:00:00-04:00"),
        # The clock goes back from 24:00 to 23:00: midnight is once, an hour later.
        ("Africa/Cairo", 2024, 11, "2024-11-01T00:00:00+02:00"),
    ],
)
def test_a_month_begins_at_the_first_instant_of_its_first_day(zone, year, month, first_instant):
    start = month_start(year, month, zone)
    assert start == pd.Timestamp(first_instant)
    assert (start - timedelta(seconds=1)).tz_convert(zone).month != month


WEEK = [{"days": "all", "start_hour": 0, "end_hour": 24, "rate_per_kwh": 0.1}]


def test_a_demand_charge_in_asuncion_from_2023_09_20_into_october_is_billed():
    # Before the fix: ValueError: 2023-10-01 00:00:00 is a nonexistent time.
    tariff = {
        "kind": "tou",
        "timezone": "America/Asuncion",
        "periods": WEEK,
        "demand_charge_per_kw_month": 10.0,
    }
    scenario = make_scenario(
        start="2023-09-20T00:00:00Z", duration_h=14 * 24.0, sites=[site(tariff=tariff)]
    )
    results = simulate(scenario, "run_now")
    peaks = run_demand_peaks(results, "America/Asuncion")
    assert [start for start, _, _ in peaks] == [
        pd.Timestamp("2023-09-01T00:00:00-04:00"),
        pd.Timestamp("2023-10-01T01:00:00-03:00"),
    ]
    # September is Sep 1 04:00 to Oct 1 04:00 UTC (30 days); the run has it from Sep 20 00:00.
    assert peaks[0][2] == pytest.approx((11 * 24 + 4) / (30 * 24), rel=1e-12)
    charge = sum(10.0 * peak_kw * covered for _, peak_kw, covered in peaks)
    assert results.summary["cost_demand_charge"] == pytest.approx(charge, rel=1e-12)
