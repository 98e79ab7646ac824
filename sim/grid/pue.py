"""A site's PUE as a function of simulation time, and its product with a carbon signal.

Facility physics with no engine state: constant, or 24 values by UTC hour of the day, with
exact integrals (prefix sums over the day) and the step function PUE x carbon intensity
(g per IT kWh) that the site's operational carbon integrates (`sim.engine.ledger.Site`,
`sim.results.operational_carbon_over_time_kg`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np

from sim.grid.signal import CarbonSignal

__all__ = ["PueProfile"]

_DAY_S = 86400.0


class PueProfile:
    """PUE as a function of simulation time: constant, or 24 values by UTC hour of the day."""

    __slots__ = ("_hourly", "_offset_s", "_prefix", "constant")

    def __init__(self, pue: float | list[float], start: datetime):
        self.constant = pue if isinstance(pue, float | int) else None
        self._hourly = [float(x) for x in pue] if isinstance(pue, list) else [float(pue)] * 24
        start = start.astimezone(UTC)
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
        self._offset_s = (start - midnight).total_seconds()  # UTC seconds into the first day
        self._prefix = [0.0]
        for x in self._hourly:
            self._prefix.append(self._prefix[-1] + x * 3600.0)

    def value_at(self, t_s: float) -> float:
        return self._hourly[int(((t_s + self._offset_s) % _DAY_S) // 3600.0)]

    def _cumulative(self, t_s: float) -> float:
        """Integral of PUE from the first day's UTC midnight to `t_s`, s."""
        u = t_s + self._offset_s
        days, into = divmod(u, _DAY_S)
        hour = min(int(into // 3600.0), 23)
        return (
            days * self._prefix[24]
            + self._prefix[hour]
            + self._hourly[hour] * (into - hour * 3600.0)
        )

    def values_at(self, t_s: np.ndarray) -> np.ndarray:
        """PUE at each of the times `t_s` (s), vectorised `value_at`."""
        t = np.asarray(t_s, dtype=float)
        if self.constant is not None:
            return np.full(t.shape, float(self.constant))
        hours = (((t + self._offset_s) % _DAY_S) // 3600.0).astype(np.int64)
        return np.asarray(self._hourly)[hours]

    def cumulative(self, t_s: np.ndarray) -> np.ndarray:
        """Integral of PUE from time 0 to each of the times `t_s`, s (vectorised)."""
        t = np.asarray(t_s, dtype=float)
        if self.constant is not None:
            return self.constant * t
        u = t + self._offset_s
        days, into = np.divmod(u, _DAY_S)
        hour = np.minimum((into // 3600.0).astype(np.int64), 23)
        prefix = np.asarray(self._prefix)
        cum = (
            days * prefix[24]
            + prefix[hour]
            + np.asarray(self._hourly)[hour] * (into - hour * 3600.0)
        )
        return cum - self._cumulative(0.0)

    def integral(self, t0_s: float, t1_s: float) -> float:
        """Exact integral of PUE over [t0_s, t1_s], s."""
        if self.constant is not None:
            return self.constant * (t1_s - t0_s)
        return self._cumulative(t1_s) - self._cumulative(t0_s)

    def steps_between(self, t0_s: float, t1_s: float) -> list[float]:
        """Times (s) in (t0_s, t1_s) where the PUE changes; none for a constant PUE."""
        if self.constant is not None:
            return []
        first = math.floor((t0_s + self._offset_s) / 3600.0 + 1) * 3600.0 - self._offset_s
        return [
            t
            for t in np.arange(first, t1_s, 3600.0).tolist()
            if self.value_at(t) != self.value_at(t - 3600.0)
        ]

    def times(self, signal: CarbonSignal) -> CarbonSignal:
        """The step function PUE x carbon intensity over the signal's domain, g per IT kWh."""
        if self.constant is not None:
            return signal.transformed(scale=self.constant)
        t0 = float(signal.times_s[0])
        knots = np.union1d(signal.times_s, np.asarray(self.steps_between(t0, signal.end_s)))
        values = [signal.value_at(t) * self.value_at(t) for t in knots.tolist()]
        return CarbonSignal(knots, values, signal.end_s, kind=signal.kind)
