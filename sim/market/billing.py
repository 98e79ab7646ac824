"""Electricity bills of sites: tariffs resolved for a run, the energy price as a step
function, demand charges.

A pure module (it does not import the engine); docs/electricity-costs.md explains it.

- `Tariff` (`[sites.tariff]`, `sim.config.market`): what a site pays for electricity, in
  the tariff's `currency`. `kind = "wholesale"`: the zone's hourly day-ahead price
  (`sim.grid.load_price`; `prices` chooses the real auction prices or the modelled ones)
  plus a fixed `adder_per_kwh` (network charges, levies, supplier margin); `kind = "tou"`:
  time-of-use `periods`, rates by local hour of day on weekdays (Monday-Friday) and weekend
  days, every hour of the week covered exactly once. Either kind may add a monthly
  `demand_charge_per_kw_month` on the peak facility power averaged over
  `demand_interval_min`.
- `PriceCurve`: the energy price, scenario currency per kWh, as a step function of
  simulation time with exact prefix-sum integrals (prices may be negative).
- `SiteTariff`: a site's tariff resolved for a run: its price curve, time zone, demand
  charge, and what meta.json records.
- `demand_charge`: the exact demand charge of a piecewise-constant power log.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.config.market import Tariff
from sim.errors import ScenarioError
from sim.models.pricing import conversion_rate

if TYPE_CHECKING:
    from sim.config.sites import Site
    from sim.grid.catalog import YearPlan

__all__ = [
    "PriceCurve",
    "SiteTariff",
    "demand_charge",
    "interval_peaks_kw",
    "month_start",
    "running_month_peak_kw",
    "site_tariff",
]


class PriceCurve:
    """Energy price (currency per kWh) as a step function of simulation time (s).

    Value i holds on [times_s[i], times_s[i+1]); the last one until `end_s`. Values may be
    negative (wholesale prices are). Integrals are exact, from prefix sums.
    """

    __slots__ = ("times_s", "values_per_kwh", "end_s", "_knots_s", "_cum", "_t")

    def __init__(self, times_s: np.ndarray, values_per_kwh: np.ndarray, end_s: float):
        t = np.asarray(times_s, dtype=np.float64)
        v = np.asarray(values_per_kwh, dtype=np.float64)
        if t.ndim != 1 or t.shape != v.shape or not t.size or np.any(np.diff(t) <= 0):
            raise ValueError("times_s must be 1-D, ascending and as long as values_per_kwh")
        if end_s <= t[-1] or not np.all(np.isfinite(v)):
            raise ValueError("end_s must follow the last time and every value be finite")
        self.times_s, self.values_per_kwh, self.end_s = t, v, float(end_s)
        self._knots_s = np.append(t, end_s)
        self._cum = np.concatenate(([0.0], np.cumsum(v * np.diff(self._knots_s))))
        self._t: list[float] = t.tolist()

    def value_at(self, t_s: float) -> float:
        """Price at `t_s` (s), currency per kWh; ValueError outside [times_s[0], end_s]."""
        if not (self._t[0] <= t_s <= self.end_s):
            raise ValueError(f"t_s={t_s} is outside the price curve [{self._t[0]}, {self.end_s}]")
        return float(self.values_per_kwh[bisect_right(self._t, t_s) - 1])

    def cumulative(self, t_s: np.ndarray) -> np.ndarray:
        """Integral of the price from times_s[0] to each of `t_s`, (currency per kWh) x s."""
        return np.interp(np.asarray(t_s, dtype=np.float64), self._knots_s, self._cum)

    def window(self, now_s: float, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The curve over [now_s, min(now_s + horizon_s, end_s)): (start times s, values per
        kWh), times[0] == now_s; empty when the window is."""
        end_s = min(now_s + horizon_s, self.end_s)
        if now_s >= end_s:
            return np.empty(0), np.empty(0)
        i = bisect_right(self._t, now_s) - 1
        j = int(np.searchsorted(self.times_s, end_s, side="left"))
        times = np.concatenate(([now_s], self.times_s[i + 1 : j]))
        return times, self.values_per_kwh[i:j].copy()


@dataclass(frozen=True)
class SiteTariff:
    """A site's tariff resolved for a run; amounts in the scenario's currency."""

    config: Tariff
    energy_price: PriceCurve
    """Energy component, scenario currency per kWh, over [0, horizon]."""
    timezone: str
    demand_charge_per_kw_month: float
    """In the scenario's currency."""
    meta: dict[str, Any]


def site_tariff(
    site: Site,
    index: int,
    start: datetime,
    horizon_s: float,
    years: str | None,
    currency: str,
) -> SiteTariff | None:
    """The tariff of `site`, the scenario's `sites[index]`, for a run of `horizon_s` from
    `start` priced in `currency` (None: it has none); `years`: the scenario's rule for zone
    years the catalog lacks. ScenarioError prefixed with ``sites[i].tariff`` when its prices
    or time zone cannot be found."""
    tariff = site.tariff
    if tariff is None:
        return None
    key = f"sites[{index}].tariff"
    to_run = conversion_rate(tariff.currency, currency)
    carbon_zone = site.carbon.zone
    timezone = tariff.timezone or _zone_timezone(carbon_zone)
    needs_local = tariff.kind == "tou" or tariff.demand_charge_per_kw_month > 0
    if timezone is None:
        if needs_local:
            raise ScenarioError(
                f"{key}.timezone: required, as the site's carbon is not a catalog zone"
            )
        timezone = "UTC"
    meta: dict[str, Any] = {
        "kind": tariff.kind,
        "currency": tariff.currency,
        "rate_to_run_currency": to_run,
        "timezone": timezone,
        "demand_charge_per_kw_month": tariff.demand_charge_per_kw_month,
        "demand_interval_min": tariff.demand_interval_min,
    }
    if tariff.kind == "wholesale":
        zone = tariff.zone or carbon_zone
        if zone is None:
            raise ScenarioError(f"{key}.zone: required, as the site's carbon is not a catalog zone")
        year = tariff.year or site.carbon.year or start.year
        curve, plan, method = _wholesale_curve(
            zone, year, tariff, to_run, key, start, horizon_s, years, currency
        )
        meta.update(zone=zone, year=year, adder_per_kwh=tariff.adder_per_kwh)
        meta.update(prices=tariff.prices, price_method=method)
        meta["year_plan"] = plan.meta()
        meta["eur_rate_to_run_currency"] = conversion_rate("EUR", currency)
    else:
        curve = _tou_curve(tariff, timezone, to_run, start, horizon_s)
    return SiteTariff(
        config=tariff,
        energy_price=curve,
        timezone=timezone,
        demand_charge_per_kw_month=tariff.demand_charge_per_kw_month * to_run,
        meta=meta,
    )


def _zone_timezone(zone: str | None) -> str | None:
    if zone is None:
        return None
    from sim.grid.catalog import catalog

    cat = catalog()
    rows = cat.loc[cat["zone"] == zone, "timezone"]
    return str(rows.iloc[0]) if len(rows) else None


def _wholesale_curve(
    zone: str,
    year: int,
    tariff: Tariff,
    to_run: float,
    key: str,
    start: datetime,
    horizon_s: float,
    years: str | None,
    currency: str,
) -> tuple[PriceCurve, YearPlan, str]:
    """The wholesale energy price of the run (scenario currency per kWh), how its prices'
    year was read (`sim.grid.catalog.YearPlan`) and how the prices were made
    (`sim.grid.prices.price_method`)."""
    from sim.grid.prices import price_method, price_series

    try:
        series = price_series(zone, year, start, horizon_s, years, tariff.prices)
    except ScenarioError as e:
        raise ScenarioError(f"{key}: {e}") from None
    t = np.asarray((series.index - pd.Timestamp(start)).total_seconds(), dtype=float)
    per_kwh = series.to_numpy() / 1000.0 * conversion_rate("EUR", currency)
    per_kwh = per_kwh + tariff.adder_per_kwh * to_run
    i0 = int(np.searchsorted(t, 0.0, side="right")) - 1
    i1 = max(int(np.searchsorted(t, horizon_s, side="left")), i0 + 1)
    curve = PriceCurve(t[i0:i1], per_kwh[i0:i1], horizon_s)
    return curve, series.attrs["year_plan"], price_method(zone, year, tariff.prices)


_GRID_S = 900.0
"""Every UTC offset in use is a whole number of quarter hours, so a local hour starts on a
UTC quarter hour."""


def _tou_curve(
    tariff: Tariff, timezone: str, to_run: float, start: datetime, horizon_s: float
) -> PriceCurve:
    start_utc = pd.Timestamp(start).tz_convert("UTC")
    lead_s = (start_utc - start_utc.floor("15min")).total_seconds()
    t = np.arange(-lead_s, horizon_s, _GRID_S)
    local = (start_utc + pd.to_timedelta(t, unit="s")).tz_convert(timezone)
    how = np.asarray(local.day_of_week * 24 + local.hour)
    rates = np.asarray(tariff.rates_by_hour_of_week())[how] * to_run
    keep = np.concatenate(([True], rates[1:] != rates[:-1]))
    return PriceCurve(t[keep], rates[keep], horizon_s)


def month_start(year: int, month: int, timezone: str) -> pd.Timestamp:
    """The first instant of local calendar month `month` of `year` in `timezone`: local
    midnight of its 1st; when the clock jumps over that midnight (it does not exist, as in
    America/Asuncion on 2023-10-01, 00:00 -> 01:00), the first instant after the jump; when
    the clock goes back over it (it occurs twice, as in America/Havana on 2020-11-01), its
    first occurrence. Months so begun partition time: each instant is in exactly one."""
    wall = pd.Timestamp(year, month, 1)
    return min(
        wall.tz_localize(timezone, ambiguous=first, nonexistent="shift_forward")
        for first in (True, False)  # ambiguous: both occurrences; the earlier is the first
    )


def interval_peaks_kw(
    times_s: np.ndarray,
    power_w: np.ndarray,
    horizon_s: float,
    start: datetime,
    timezone: str,
    interval_min: int,
) -> list[tuple[pd.Timestamp, float, float]]:
    """Per local calendar month the run touches: (its first instant, `month_start`, peak
    kW, fraction of the month inside the run). The peak is the largest mean of the step
    function (`power_w` from each of `times_s` to the next, the last until `horizon_s`;
    `times_s[0]` = 0) over the month's intervals of `interval_min` minutes from the month's
    start, each clipped to [0, horizon_s]; exact (energy from prefix sums)."""
    t = np.asarray(times_s, dtype=np.float64)
    knots = np.append(t, horizon_s)
    energy = np.concatenate(([0.0], np.cumsum(np.asarray(power_w, float) * np.diff(knots))))
    t0 = pd.Timestamp(start).tz_convert(timezone)
    t_end = t0 + pd.Timedelta(seconds=horizon_s)
    month = month_start(t0.year, t0.month, timezone)
    out = []
    while month < t_end:
        nxt = month_start(month.year + (month.month == 12), month.month % 12 + 1, timezone)
        m0 = (month - t0).total_seconds()
        m1 = (nxt - t0).total_seconds()
        b = np.arange(m0, m1, interval_min * 60.0)
        b = np.unique(np.clip(np.append(b, m1), 0.0, horizon_s))
        if b.size >= 2:
            e = np.interp(b, knots, energy)
            peak_w = float(np.max(np.diff(e) / np.diff(b)))
            covered = (min(m1, horizon_s) - max(m0, 0.0)) / (m1 - m0)
            out.append((month, peak_w / 1000.0, covered))
        month = nxt
    return out


def demand_charge(
    times_s: np.ndarray,
    power_w: np.ndarray,
    horizon_s: float,
    start: datetime,
    tariff: SiteTariff,
) -> float:
    """The run's demand charge (scenario currency): per local calendar month, the rate x the
    peak interval-average facility power (kW) x the fraction of the month the run covers."""
    rate = tariff.demand_charge_per_kw_month
    if rate == 0:
        return 0.0
    peaks = interval_peaks_kw(
        times_s, power_w, horizon_s, start, tariff.timezone, tariff.config.demand_interval_min
    )
    return math.fsum(rate * peak_kw * covered for _, peak_kw, covered in peaks)


def running_month_peak_kw(
    times_s: np.ndarray,
    power_w: np.ndarray,
    now_s: float,
    start: datetime,
    timezone: str,
    interval_min: int,
) -> float | None:
    """The demand-charge peak so far at `now_s` (s since `start`), kW: the largest mean of
    the step function (`power_w` from each of `times_s` to the next, the last until
    `now_s`) over the intervals of `interval_min` minutes of the local calendar month
    containing `now_s` that have ended by then (as `interval_peaks_kw` cuts them: from
    the month's start, the first clipped at `times_s[0]`, which must be at or before
    the month's start, or the run's start 0). None before the month's first interval ends."""
    if not len(times_s):
        return None
    t0 = pd.Timestamp(start).tz_convert(timezone)
    now = t0 + pd.Timedelta(seconds=now_s)
    month = month_start(now.year, now.month, timezone)
    m0_s = (month - t0).total_seconds()
    step_s = interval_min * 60.0
    ended_s = m0_s + math.floor((now_s - m0_s) / step_s) * step_s
    first_s = float(times_s[0])
    if ended_s <= max(m0_s, first_s):
        return None
    shifted = np.asarray(times_s, dtype=np.float64) - first_s
    peaks = interval_peaks_kw(
        shifted,
        power_w,
        ended_s - first_s,
        pd.Timestamp(start) + pd.Timedelta(seconds=first_s),
        timezone,
        interval_min,
    )
    last_month, peak_kw, _ = peaks[-1]
    return peak_kw if last_month == month else None
