"""Carbon intensity as a step function of simulation time, with exact integrals.

The carbon intensity of the electricity a site draws, in g CO2e per kWh, is a
*piecewise-constant* function of simulation time (float seconds since the scenario start,
UTC). Trace samples hold from their timestamp until the next one; the last sample holds for
the trace's median step. Operational carbon is then an exact integral of piecewise-constant
power times this step function, computed from prefix sums (no polling).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType

import numpy as np
import pandas as pd

from sim.errors import ScenarioError

SERIES_NAME = "carbon_intensity_g_per_kwh"


class CarbonSignal:
    """Piecewise-constant carbon intensity (g/kWh) over simulation time (s since scenario start).

    Value i holds on [times_s[i], times_s[i+1]); the last value holds on [times_s[-1], end_s).
    The domain is [times_s[0], end_s]; `times_s[0]` may be negative (a trace step that began
    before the scenario start). Querying outside the domain raises `ValueError`.

    Attributes (read-only):
        times_s: float64 ascending breakpoints, s.
        values_g_per_kwh: float64 carbon intensity on each step, g/kWh.
        end_s: end of the last step, s.
        kind: "average" or "marginal" emissions.
        repairs: what the trace's loader repaired, name -> count (`series.attrs["repairs"]`,
            keys in `sim.grid.loaders.REPAIR_KEYS`; empty for a constant or a clean trace).
    """

    __slots__ = (
        "times_s",
        "values_g_per_kwh",
        "end_s",
        "kind",
        "repairs",
        "_step_s",
        "_t",
        "_v",
        "_cum",
        "_t0",
        "_last",
        "_knots_s",
        "_knots_cum",
    )

    def __init__(
        self,
        times_s: Sequence[float] | np.ndarray,
        values_g_per_kwh: Sequence[float] | np.ndarray,
        end_s: float,
        kind: str = "average",
        repairs: Mapping[str, int] | None = None,
    ) -> None:
        t = np.array(times_s, dtype=np.float64)
        v = np.array(values_g_per_kwh, dtype=np.float64)
        end_s = float(end_s)
        if t.ndim != 1 or v.shape != t.shape or t.size == 0:
            raise ValueError(
                f"times_s and values_g_per_kwh must be 1-D of equal, non-zero length, "
                f"got shapes {t.shape} and {v.shape}"
            )
        if not (np.all(np.isfinite(t)) and math.isfinite(end_s)):
            raise ValueError("times_s and end_s must be finite")
        if np.any(np.diff(t) <= 0):
            i = int(np.argmax(np.diff(t) <= 0))
            raise ValueError(f"times_s must be strictly ascending, got {t[i]} then {t[i + 1]}")
        if end_s <= t[-1]:
            raise ValueError(f"end_s ({end_s}) must be after the last breakpoint ({t[-1]})")
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise ValueError("values_g_per_kwh must be finite and >= 0")
        if kind not in ("average", "marginal"):
            raise ValueError(f"kind must be 'average' or 'marginal', got {kind!r}")
        t.setflags(write=False)
        v.setflags(write=False)
        self.times_s = t
        self.values_g_per_kwh = v
        self.end_s = end_s
        self.kind = kind
        self.repairs: Mapping[str, int] = MappingProxyType(dict(repairs or {}))
        # Prefix sums: _cum[i] = integral from t[0] to t[i]. Kept as Python lists too, so the
        # scalar paths (called per job start/finish) are bisect + float arithmetic only.
        knots = np.append(t, end_s)
        cum = np.concatenate(([0.0], np.cumsum(v * np.diff(knots))))
        cum.setflags(write=False)
        self._knots_s = knots
        self._knots_cum = cum
        self._t: list[float] = t.tolist()
        self._v: list[float] = v.tolist()
        self._cum: list[float] = cum.tolist()
        self._t0 = self._t[0]
        self._last = len(self._t) - 1
        # A regular grid (hourly catalog traces) finds a step by division: O(1) lookups.
        steps = np.diff(t)
        regular = steps.size and np.allclose(steps, steps[0], rtol=1e-9, atol=0.0)
        self._step_s = float(steps[0]) if regular else 0.0

    def __repr__(self) -> str:
        return (
            f"CarbonSignal({len(self._t)} steps, {self._t0:g}..{self.end_s:g} s, "
            f"{min(self._v):.4g}..{max(self._v):.4g} g/kWh, {self.kind})"
        )

    def __len__(self) -> int:
        return len(self._t)

    # -- construction

    def transformed(self, scale: float = 1.0, offset_g_per_kwh: float = 0.0) -> CarbonSignal:
        """What-if: every value x `scale` + `offset_g_per_kwh`. Raises ValueError if that makes
        a value negative."""
        values = self.values_g_per_kwh * scale + offset_g_per_kwh
        if np.any(values < 0):
            i = int(np.argmin(values))
            raise ValueError(
                f"scale {scale:g} and offset {offset_g_per_kwh:g} g/kWh make the intensity "
                f"negative ({values[i]:.4g} g/kWh at {self.times_s[i]:g} s)"
            )
        return CarbonSignal(self.times_s, values, self.end_s, kind=self.kind, repairs=self.repairs)

    @classmethod
    def constant(
        cls, value_g_per_kwh: float, horizon_s: float, kind: str = "average"
    ) -> CarbonSignal:
        """A constant intensity (g/kWh) over [0, horizon_s] (s)."""
        return cls([0.0], [value_g_per_kwh], horizon_s, kind=kind)

    @classmethod
    def from_series(
        cls,
        series: pd.Series,
        start: datetime,
        horizon_s: float,
        *,
        what: str,
        kind: str = "average",
    ) -> CarbonSignal:
        """The step function of a trace, in seconds since `start`, covering [0, horizon_s].

        `series`: values in g/kWh on a DatetimeIndex (UTC; a naive index is read as UTC).
        Each sample holds until the next; the last one holds for the median step.
        `series.attrs["repairs"]` (the loader's repair counts) becomes `repairs`.
        `what` names the trace in errors. Raises `ScenarioError` when the trace does not
        cover [start, start + horizon_s], naming both times. Only the breakpoints needed for
        the horizon are kept (plus the one at or before 0).
        """
        if not isinstance(series.index, pd.DatetimeIndex):
            raise ScenarioError(f"{what}: trace index must be timestamps, got {series.index.dtype}")
        if len(series) < 2:
            raise ScenarioError(f"{what}: trace needs at least 2 samples, got {len(series)}")
        idx = series.index
        idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
        start_ts = _utc(start)
        t = np.asarray((idx - start_ts).total_seconds(), dtype=np.float64)
        v = np.asarray(series.to_numpy(), dtype=np.float64)
        steps = np.diff(t)
        if np.any(steps <= 0):
            i = int(np.argmax(steps <= 0))
            raise ScenarioError(
                f"{what}: trace timestamps must be strictly increasing, "
                f"got {_fmt_time(idx[i])} then {_fmt_time(idx[i + 1])}"
            )
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            i = int(np.argmax(~np.isfinite(v) | (v < 0)))
            raise ScenarioError(
                f"{what}: trace value at {_fmt_time(idx[i])} is {v[i]}, "
                f"expected a finite number >= 0"
            )
        last_step_s = float(np.median(steps))
        covered_end_s = float(t[-1]) + last_step_s
        if t[0] > 0:
            raise ScenarioError(
                f"{what}: trace starts {_fmt_time(idx[0])}, after the scenario start "
                f"{_fmt_time(start_ts)}"
            )
        if covered_end_s < horizon_s:
            end_ts = idx[-1] + pd.Timedelta(seconds=last_step_s)
            scen_end = start_ts + pd.Timedelta(seconds=horizon_s)
            raise ScenarioError(
                f"{what}: trace ends {_fmt_time(end_ts)}, before the scenario end "
                f"{_fmt_time(scen_end)}"
            )
        i0 = int(np.searchsorted(t, 0.0, side="right")) - 1  # last breakpoint at or before 0
        i1 = int(np.searchsorted(t, horizon_s, side="left"))  # first breakpoint at/after end
        i1 = max(i1, i0 + 1)
        repairs = series.attrs.get("repairs")
        return cls(t[i0:i1], v[i0:i1], horizon_s, kind=kind, repairs=repairs)

    # -- queries (scalar fast paths use bisect on Python lists)

    def _check(self, t_s: float) -> None:
        if not (self._t0 <= t_s <= self.end_s):
            raise ValueError(
                f"t_s={t_s} is outside the signal's domain [{self._t0}, {self.end_s}] s"
            )

    def _index(self, t_s: float) -> int:
        """Index of the step holding at `t_s` (in the domain): O(1) on a regular grid."""
        step_s = self._step_s
        if step_s:
            t = self._t
            last = self._last
            i = int((t_s - self._t0) // step_s)
            if i >= last:
                i = last
            elif t[i + 1] <= t_s:  # guard against rounding
                return i + 1
            return i - 1 if t[i] > t_s else i
        return bisect_right(self._t, t_s) - 1

    def value_at(self, t_s: float) -> float:
        """Carbon intensity (g/kWh) at time `t_s` (s); at `end_s`, the last step's value."""
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        return self._v[self._index(t_s)]

    def cumulative(self, t_s: float | np.ndarray) -> float | np.ndarray:
        """Exact integral of the intensity from `times_s[0]` to `t_s`, in (g/kWh)*s.

        Scalars take an O(1) path on regular grids, else a bisect; arrays are vectorised with
        `np.interp` on the prefix sums (exact up to rounding: the integral is piecewise linear
        between breakpoints).
        """
        if not isinstance(t_s, float | int):
            arr = np.asarray(t_s, dtype=np.float64)
            if arr.size and (arr.min() < self._t0 or arr.max() > self.end_s):
                bad = arr[(arr < self._t0) | (arr > self.end_s)][0]
                self._check(float(bad))
            return np.interp(arr, self._knots_s, self._knots_cum)
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        i = self._index(t_s)
        return self._cum[i] + self._v[i] * (t_s - self._t[i])

    def integral(self, t0_s: float, t1_s: float) -> float:
        """Exact integral of the intensity over [t0_s, t1_s] (s), in (g/kWh)*s.

        Multiply by a constant power in kW and divide by 3600 to get grams. Computed from the
        two partial steps plus a prefix-sum difference over the whole steps between them, so
        short intervals late in a long signal keep full relative precision.
        """
        if t1_s < t0_s:
            raise ValueError(f"integral needs t0_s <= t1_s, got {t0_s} > {t1_s}")
        if not (self._t0 <= t0_s and t1_s <= self.end_s):
            self._check(t0_s)
            self._check(t1_s)
        t, v = self._t, self._v
        i = self._index(t0_s)
        if i == self._last or t1_s < t[i + 1]:  # within t0_s's step: one lookup
            return v[i] * (t1_s - t0_s)
        j = self._index(t1_s)
        return v[i] * (t[i + 1] - t0_s) + (self._cum[j] - self._cum[i + 1]) + v[j] * (t1_s - t[j])

    def integrals(self, t0_s: np.ndarray, t1_s: np.ndarray) -> np.ndarray:
        """`integral(t0, t1)` of each pair of the arrays (t0 <= t1, in the domain), by the
        same partial steps and prefix sums in the same order: the same bits, (g/kWh)*s."""
        t, v, cum = self.times_s, self.values_g_per_kwh, self._knots_cum
        if t0_s.size and (t0_s.min() < self._t0 or t1_s.max() > self.end_s):
            bad = np.concatenate((t0_s[t0_s < self._t0], t1_s[t1_s > self.end_s]))[0]
            self._check(float(bad))
        i = np.searchsorted(t, t0_s, side="right") - 1
        j = np.searchsorted(t, t1_s, side="right") - 1
        after = np.minimum(i + 1, self._last)  # i + 1 wherever i != j
        across = v[i] * (t[after] - t0_s) + (cum[j] - cum[after]) + v[j] * (t1_s - t[j])
        return np.where(i == j, v[i] * (t1_s - t0_s), across)

    def mean(self, t0_s: float, t1_s: float) -> float:
        """Time-weighted mean intensity (g/kWh) over [t0_s, t1_s]; the value at t0_s if equal."""
        if t1_s == t0_s:
            return self.value_at(t0_s)
        return self.integral(t0_s, t1_s) / (t1_s - t0_s)

    def breakpoints_between(self, t0_s: float, t1_s: float) -> np.ndarray:
        """Breakpoints (s) strictly inside (t0_s, t1_s), ascending (a read-only view)."""
        return self.times_s[bisect_right(self._t, t0_s) : bisect_left(self._t, t1_s)]

    def step_index(self, t_s: float) -> int:
        """Index i of the step holding at `t_s` (times_s[i] <= t_s < times_s[i+1])."""
        if not (self._t0 <= t_s <= self.end_s):
            self._check(t_s)
        return self._index(t_s)


def _utc(ts: pd.Timestamp | datetime) -> pd.Timestamp:
    """A timestamp in UTC; a naive one is taken to be UTC already."""
    ts = pd.Timestamp(ts)
    return ts.tz_localize("UTC") if ts.tz is None else ts.tz_convert("UTC")


def _fmt_time(ts: pd.Timestamp | datetime) -> str:
    """UTC time as 2020-06-01T00:00Z (seconds shown only when non-zero)."""
    ts = _utc(ts)
    if ts.second or ts.microsecond or ts.nanosecond:
        return ts.strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    return ts.strftime("%Y-%m-%dT%H:%M") + "Z"
