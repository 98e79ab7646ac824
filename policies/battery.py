"""On-site battery dispatch: `battery_carbon`.

An adjuster (`policies.kit.Adjuster`): it leaves the jobs and services to the scheduler it
follows (alone: `run_now`; in a `chain`: the members before it) and adds one
`SetBattery(site, power_kw)` per site with a battery whose setpoint changes. It decides
every `tick_s` (an hour by default) and at every other decision point.

Rule, per site with a battery: self-consumption (setpoint None) when the forecast
on-site surplus over the look-ahead would fill the battery (`surplus_fills`); otherwise,
from the site's `objective` signal (carbon intensity by default; the energy price with
"cost": cheap and dear hours) forecast over the next `lookahead_h` hours
(`objective_forecast`, its value now measured; its steps weighted by how long they hold)
and its value now (`objective_now`):

- clean (now at or below the `low_percentile` of the look-ahead): charge at
  `power_frac` x the rating, from on-site surplus and the grid (lowered to fit the import
  limit now; no charge if nothing fits);
- dirty (now at or above the `high_percentile`): self-consumption (setpoint None): the
  battery meets the site's deficit, never exporting, and takes any surplus;
- between: hold for the dirty hours: charge from the on-site surplus now only
  (max(generation - load, 0), as it stands at the decision; 0 without surplus).

docs/policies-onsite-energy.md has the parameters and an example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from policies.kit import Adjuster, Objective, objective_forecast, objective_now
from sim.api import Action, OnsiteReading, SetBattery, SystemState, weighted_percentile

__all__ = ["BatteryCarbon"]


@dataclass
class BatteryCarbon(Adjuster):
    tick_s: float | None = 3600.0
    """Decide at least this often, s."""
    lookahead_h: float = 24.0
    """The forecast window the percentiles are taken over, h."""
    low_percentile: float = 25.0
    """At or below this percentile of the look-ahead's intensity (0..100): charge."""
    high_percentile: float = 75.0
    """At or above this percentile: discharge (self-consumption)."""
    power_frac: float = 1.0
    """The charging power in clean hours, a fraction of the battery's rating (0..1]."""
    objective: Literal["carbon", "cost", "weighted"] = "carbon"
    """What makes an hour clean or dirty: "carbon" (the intensity), "cost" (the site's
    energy price: charge in cheap hours, discharge in dear ones) or "weighted" (price +
    carbon x carbon_price_per_t), `policies.kit.Objective`."""
    carbon_price_per_t: float = 0.0
    """With objective "weighted": the scenario's currency per tonne CO2e."""

    def __post_init__(self) -> None:
        checks = (
            ("lookahead_h", self.lookahead_h, self.lookahead_h > 0),
            ("low_percentile", self.low_percentile, 0 <= self.low_percentile <= 100),
            ("high_percentile", self.high_percentile, self.high_percentile <= 100),
            ("high_percentile", self.high_percentile, self.low_percentile < self.high_percentile),
            ("power_frac", self.power_frac, 0 < self.power_frac <= 1),
        )
        for name, value, ok in checks:
            if not (isinstance(value, int | float) and math.isfinite(value) and ok):
                raise ValueError(f"battery_carbon: {name} = {value!r} is out of range")
        self.goal = Objective(self.objective, self.carbon_price_per_t)
        """The signal whose percentiles decide (`objective_forecast`)."""

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        out = list(actions)
        for site in state.sites:
            reading = state.onsite(site)
            if reading is None or reading.battery_power_kw is None:
                continue
            power = self.setpoint_kw(state, site, reading)
            if (reading.battery_setpoint_kw, reading.battery_import_cap_kw) != (power, None):
                out.append(SetBattery(site, power))
        return out

    def setpoint_kw(self, state: SystemState, site: str, reading: OnsiteReading) -> float | None:
        """The battery power this rule wants at `site` now, kW (None: self-consumption)."""
        assert reading.battery_power_kw is not None
        if self.surplus_fills(state, reading):
            return None
        times, ci = objective_forecast(state, site, self.lookahead_h * 3600.0, self.goal)
        weights = np.diff(np.append(times, max(times[-1], state.now_s + self.lookahead_h * 3600.0)))
        if weights.sum() <= 0:
            weights = np.ones(len(ci))
        now_ci = objective_now(state, site, self.goal)
        surplus_kw = reading.generation_kw - reading.load_kw
        if now_ci >= weighted_percentile(ci, weights, self.high_percentile):
            return None
        if now_ci <= weighted_percentile(ci, weights, self.low_percentile):
            room_kw = reading.import_limit_kw + surplus_kw  # import = load - gen + charge
            charge_kw = min(self.power_frac * reading.battery_power_kw, room_kw)
            return charge_kw if charge_kw > 0 else 0.0
        return min(max(surplus_kw, 0.0), reading.battery_power_kw)

    def surplus_fills(self, state: SystemState, reading: OnsiteReading) -> bool:
        """Whether the forecast on-site surplus over the look-ahead would fill the battery
        from its reserve: sum over the generation forecast's steps of max(generation - load
        now, 0) x their hours x the charge efficiency >= (soc_max - soc_min) x the nominal
        capacity. The battery then follows self-consumption: what it discharges now the
        surplus stores again, and holding it full (or charging it from the grid) would only
        export the surplus."""
        assert reading.battery_capacity_kwh is not None and reading.battery_soc_max is not None
        assert reading.battery_soc_min is not None and reading.battery_charge_efficiency is not None
        horizon_s = self.lookahead_h * 3600.0
        times, generation_kw = state.onsite_forecast(reading.site, horizon_s)
        hours = np.diff(np.append(times, state.now_s + horizon_s)) / 3600.0
        surplus_kwh = float(np.maximum(generation_kw - reading.load_kw, 0.0) @ hours)
        room_kwh = (
            reading.battery_soc_max - reading.battery_soc_min
        ) * reading.battery_capacity_kwh
        return surplus_kwh * reading.battery_charge_efficiency >= room_kwh
