"""Replayed issued forecasts: a real archive of forecasts as a site's forecast.

An archive is a CSV file (optionally gzip-compressed) with one row per issued value,
``issued_at,target_start,<value column>``: UTC ISO 8601 times (naive times are UTC) and the
intensity forecast at `issued_at` for the window starting at `target_start`, in a declared
unit (g/kWh, kg/kWh or lbs/MWh, as the trace loaders). `load_issued_forecasts` validates it
like the trace loaders of `sim.grid.loaders`: every error is one `TraceError` line naming the
file, the line (header = line 1) and the value.

A `Replay` binds an archive to a site's signal for one run. At a decision at time t it
returns the latest forecast issued at or before t: the current step (from t to the first
issued target after t) is the true current intensity, which the policy also sees as
`state.carbon_intensity`, then each issued value from its target time on, to the end of the
window asked for. Each issued value holds until the issue's next target, the last one for
the archive's target spacing. When the run needs a forecast the archive does not cover (a
decision before the first issue, or a window reaching past the latest issue's last target),
the site's `fallback` rule decides: "error" (a `ScenarioError` naming the file and times) or
"model" (the run's `[forecast]` model fills the uncovered part). `Replay.record()` reports
what was replayed and how often the fallback was used (meta.json's `forecast_replay`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.errors import ScenarioError, TraceError
from sim.grid.loaders import UNIT_TO_G_PER_KWH, _parse_times, _parse_values, _Table
from sim.grid.signal import CarbonSignal, _fmt_time

if TYPE_CHECKING:
    from sim.config.sites import Site

__all__ = ["IssuedForecasts", "Replay", "load_issued_forecasts", "site_replays"]

ISSUED_COLUMN = "issued_at"
TARGET_COLUMN = "target_start"
FALLBACKS = ("error", "model")

ModelForecast = Callable[[CarbonSignal, float, float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class IssuedForecasts:
    """A validated archive: issue `i` holds rows `offsets[i]:offsets[i + 1]` of the target
    and value arrays. Times are UTC nanoseconds since the epoch (int64), values g/kWh."""

    path: Path
    issued_ns: np.ndarray
    offsets: np.ndarray
    target_ns: np.ndarray
    values_g_per_kwh: np.ndarray
    target_step_ns: int
    """How long an issue's last value holds: the archive's most common target spacing."""


def load_issued_forecasts(
    path: str | Path, *, column: str = "value", unit: str = "g/kWh"
) -> IssuedForecasts:
    """Read and validate an archive of issued forecasts (see the module doc).

    Raises `TraceError`, one line naming the file and line, for: an unreadable file, a
    missing column, a row of the wrong width, fewer than 2 rows, an unparseable time, a
    value that is not a finite number from 0 to 5,000 g/kWh, rows not sorted by issue time
    then target time, a duplicate (issued_at, target_start) pair, a target before its issue
    time, an unknown unit.
    """
    path = Path(path)
    if unit not in UNIT_TO_G_PER_KWH:
        raise TraceError(f"{path}: unknown unit {unit!r}; known: {', '.join(UNIT_TO_G_PER_KWH)}")
    t = _Table(path)
    ii, ti, vi = t.column(ISSUED_COLUMN), t.column(TARGET_COLUMN), t.column(column)
    t.check_shape()
    values = _parse_values(t.cells(vi), t.where, column, factor=UNIT_TO_G_PER_KWH[unit])
    issued_raw, target_raw = t.cells(ii), t.cells(ti)
    issued = _parse_times(issued_raw, t.where, ISSUED_COLUMN, "UTC")[0].as_unit("ns").asi8
    target = _parse_times(target_raw, t.where, TARGET_COLUMN, "UTC")[0].as_unit("ns").asi8
    early = target < issued
    if early.any():
        k = int(np.argmax(early))
        raise TraceError(
            f"{t.where.at(k, TARGET_COLUMN)} {target_raw[k]} is before its {ISSUED_COLUMN} "
            f"{issued_raw[k]}; a forecast is for a window starting at or after its issue"
        )
    same_issue = issued[1:] == issued[:-1]
    back = (issued[1:] < issued[:-1]) | (same_issue & (target[1:] <= target[:-1]))
    if back.any():
        k = int(np.argmax(back)) + 1
        prev = int(t.lines[k - 1])
        if issued[k] == issued[k - 1] and target[k] == target[k - 1]:
            raise TraceError(
                f"{t.where.pos(k)}: duplicate ({ISSUED_COLUMN}, {TARGET_COLUMN}) pair "
                f"({issued_raw[k]}, {target_raw[k]}), also on line {prev}"
            )
        field = ISSUED_COLUMN if issued[k] < issued[k - 1] else TARGET_COLUMN
        shown = issued_raw if field == ISSUED_COLUMN else target_raw
        raise TraceError(
            f"{t.where.at(k, field)} {shown[k]} is earlier than on line {prev} ({shown[k - 1]}); "
            f"rows must be sorted by {ISSUED_COLUMN}, then {TARGET_COLUMN}"
        )
    starts = np.flatnonzero(np.r_[True, ~same_issue])
    spacing = np.diff(target)[same_issue]
    if spacing.size == 0:
        raise TraceError(f"{path}: every issue has one target; cannot tell how long one holds")
    steps, counts = np.unique(spacing, return_counts=True)
    return IssuedForecasts(
        path=path,
        issued_ns=issued[starts],
        offsets=np.r_[starts, issued.size],
        target_ns=target,
        values_g_per_kwh=values,
        target_step_ns=int(steps[np.argmax(counts)]),
    )


class Replay:
    """An archive replayed as the forecast of one site's signal in one run.

    `site`: the site's name; `start`: the run's start (time 0 of `now_s`); `fallback`:
    "error" or "model" (see the module doc); `key`: the scenario key naming the site's
    forecast, for messages.
    """

    def __init__(
        self,
        archive: IssuedForecasts,
        signal: CarbonSignal,
        site: str,
        start: pd.Timestamp,
        fallback: str,
        key: str,
    ) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"unknown fallback {fallback!r}; known: {FALLBACKS}")
        self.archive = archive
        self.signal = signal
        self.site = site
        self.fallback = fallback
        self.key = key
        self._start = pd.Timestamp(start)
        t0 = self._start.value
        self._issued_s = (archive.issued_ns - t0) / 1e9
        self._issued_list = self._issued_s.tolist()
        self._target_s = (archive.target_ns - t0) / 1e9
        self._step_s = archive.target_step_ns / 1e9
        self.forecasts = 0
        self.fallbacks = 0
        self.first_fallback_s: float | None = None

    def forecast(
        self, now_s: float, horizon_s: float, model: ModelForecast
    ) -> tuple[np.ndarray, np.ndarray]:
        """The forecast a policy sees at `now_s` (the `Forecaster.forecast` contract):
        replayed where the archive covers the window, `model` (the run's model) where it does
        not and the fallback is "model"; ScenarioError there if it is "error"."""
        signal = self.signal
        end_s = min(now_s + horizon_s, signal.end_s)
        if horizon_s < 0 or now_s >= end_s:
            return model(signal, now_s, horizon_s)  # its empty window or its error
        self.forecasts += 1
        k = self.issue_index(now_s)
        covered_s = now_s
        times, values = np.array([now_s]), np.array([signal.value_at(now_s)])
        if k >= 0:
            a, b = self.archive.offsets[k], self.archive.offsets[k + 1]
            target = self._target_s[a:b]
            keep = (target > now_s) & (target < end_s)
            times = np.r_[times, target[keep]]
            values = np.r_[values, self.archive.values_g_per_kwh[a:b][keep]]
            covered_s = float(target[-1]) + self._step_s
        if covered_s >= end_s:
            return times, values
        if self.fallback == "error":
            raise ScenarioError(self._uncovered(k, now_s, end_s, covered_s))
        self.fallbacks += 1
        if self.first_fallback_s is None:
            self.first_fallback_s = now_s
        m_times, m_values = model(signal, now_s, horizon_s)
        if covered_s <= now_s:  # no issue yet, or the latest one's targets are all past
            return m_times, m_values
        later = m_times > covered_s
        at = np.searchsorted(m_times, covered_s, side="right") - 1
        inside = times < covered_s
        return (
            np.r_[times[inside], covered_s, m_times[later]],
            np.r_[values[inside], m_values[at], m_values[later]],
        )

    def issue_index(self, now_s: float) -> int:
        """The index of the latest issue at or before `now_s` (-1 before the first)."""
        return bisect_right(self._issued_list, now_s) - 1

    def record(self) -> dict[str, Any]:
        """What was replayed, for meta.json: the file, its issues, the fallback rule, how
        many forecasts were asked and how many the fallback filled (the first one's time)."""
        a = self.archive
        first = None if self.first_fallback_s is None else self.utc(self.first_fallback_s)
        return {
            "file": str(a.path),
            "issues": int(a.issued_ns.size),
            "first_issued_at": _fmt_time(pd.Timestamp(int(a.issued_ns[0]), tz="UTC")),
            "last_issued_at": _fmt_time(pd.Timestamp(int(a.issued_ns[-1]), tz="UTC")),
            "fallback": self.fallback,
            "forecasts": self.forecasts,
            "forecasts_with_fallback": self.fallbacks,
            "first_fallback_at": first,
        }

    def utc(self, s: float) -> str:
        """Run time `s` (seconds since the start) as a UTC time, e.g. 2023-03-26T00:00Z."""
        return _fmt_time(self._start + pd.Timedelta(seconds=s))

    def _uncovered(self, k: int, now_s: float, end_s: float, covered_s: float) -> str:
        path = self.archive.path
        if k < 0:
            first = self.utc(self._issued_s[0])
            what = f"no forecast was issued at or before it (the first: {first})"
        else:
            what = (
                f"the latest forecast, issued {self.utc(self._issued_s[k])}, covers only up "
                f"to {self.utc(covered_s)}"
            )
        return (
            f"{path}: a forecast asked at {self.utc(now_s)} up to {self.utc(end_s)}, but "
            f'{what}; add forecasts, ask shorter windows, or set {self.key}.fallback = "model"'
        )


def site_replays(
    sites: Sequence[Site], start: datetime, signals: list[CarbonSignal]
) -> list[Replay]:
    """A `Replay` for every one of the scenario's `sites` with a `forecast` archive (their
    order), for a run from `start`. Raises `TraceError` for a bad file, and ScenarioError
    when the fallback is "error" and the run starts before the archive's first issue."""
    out = []
    run_start = pd.Timestamp(start)
    for i, (site, signal) in enumerate(zip(sites, signals, strict=True)):
        config = site.forecast
        if config is None:
            continue
        key = f"sites[{i}].forecast"
        archive = load_issued_forecasts(config.file, column=config.column, unit=config.unit)
        if config.fallback == "error" and archive.issued_ns[0] > run_start.value:
            first = _fmt_time(pd.Timestamp(int(archive.issued_ns[0]), tz="UTC"))
            raise ScenarioError(
                f"{key}: {archive.path}: the run starts {_fmt_time(run_start)}, before the first "
                f'forecast ({first}); start later or set {key}.fallback = "model"'
            )
        replay = Replay(archive, signal, site.name, run_start, config.fallback, key)
        out.append(replay)
    return out
