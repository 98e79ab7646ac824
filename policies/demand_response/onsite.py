"""Demand response served by on-site energy first (docs/policies-demand-response.md,
"On-site energy first").

A site with on-site energy is metered on its grid import (docs/onsite-energy.md, "The
grid meter"), so an event's limit applies to what the site takes from the grid: the
battery's discharge and the site's own generation count toward it before any job is
slowed. Per site with on-site energy and an announced event:

- **From the notice to the start**: the battery charges at its rating (lowered to the
  import room now: import limit + generation - load; 0 if none), to meet the event full.
- **During the event**: the battery holds the grid import at the event's target
  (`SetBattery(site, import_cap_kw=limit x (1 - margin))`: it discharges what the load
  takes above generation + target, re-solved at every change), and the workload is sized
  against the target plus `onsite_supply_kw`, the power on-site energy can supply
  throughout the rest of the event; the jobs are slowed only for what it cannot.
- **After it**: self-consumption again (`SetBattery(site)`), unless a policy before it in
  the chain set the battery.
"""

from __future__ import annotations

import numpy as np

from sim.api import OnsiteReading, SetBattery, SystemState

__all__ = ["OnsiteFirst", "onsite_supply_kw"]


def onsite_supply_kw(state: SystemState, reading: OnsiteReading, until_s: float) -> float:
    """The power, kW, that `reading.site`'s on-site energy can supply at every moment of
    [now, until_s): the lowest forecast generation over it (`state.onsite_forecast`) plus
    the battery's sustainable discharge, its energy above the reserve (`soc_min` of the
    nominal capacity) times its discharge efficiency spread evenly over the time left, at
    most its rating (self-discharge, 0.084 % a day by default, is neglected)."""
    left_s = until_s - state.now_s
    if left_s <= 0.0:
        return 0.0
    _, generation_kw = state.onsite_forecast(reading.site, left_s)
    supply_kw = float(np.min(generation_kw))
    if reading.battery_kwh is not None:
        assert reading.battery_capacity_kwh is not None and reading.battery_soc_min is not None
        assert reading.battery_power_kw is not None
        assert reading.battery_discharge_efficiency is not None
        usable_kwh = max(
            reading.battery_kwh - reading.battery_soc_min * reading.battery_capacity_kwh, 0.0
        )
        sustained_kw = usable_kwh * reading.battery_discharge_efficiency * 3600.0 / left_s
        supply_kw += min(sustained_kw, reading.battery_power_kw)
    return supply_kw


class OnsiteFirst:
    """The battery actions and the workload's limits of one decision, for the sites whose
    events on-site energy serves first; `set_by_us` (kept across the run's decisions: the
    sites whose battery this policy set) lets it hand the battery back after the event."""

    __slots__ = ("actions", "limits_kw", "set_by_us", "_state")

    def __init__(self, state: SystemState, set_by_us: set[str]):
        self._state = state
        self.set_by_us = set_by_us
        self.actions: list[SetBattery] = []
        """The `SetBattery` actions this decision adds."""
        self.limits_kw: dict[str, float] = {}
        """Per site under an event, the facility power the workload may draw, kW."""

    def plan(self, limits_kw: dict[str, float], margin_pct: float, taken: set[str]) -> None:
        """Fill `actions` and `limits_kw` for the sites of `limits_kw` (under an event now,
        kW) and those with an event ahead; `taken`: sites whose battery a policy before
        this one set in this decision (left to it outside events)."""
        state = self._state
        ends: dict[str, float] = {}
        ahead: set[str] = set()
        for ev in state.demand_response():
            if ev.start_s <= state.now_s < ev.end_s:
                ends[ev.site] = max(ends.get(ev.site, ev.end_s), ev.end_s)
            elif state.now_s < ev.start_s:
                ahead.add(ev.site)
        for site in state.sites:
            reading = state.onsite(site)
            if reading is None:
                continue
            if site in limits_kw:
                target_kw = limits_kw[site] * (1.0 - margin_pct / 100.0)
                supply_kw = onsite_supply_kw(state, reading, ends[site])
                self.limits_kw[site] = limits_kw[site] + supply_kw / (1.0 - margin_pct / 100.0)
                if reading.battery_power_kw is not None:
                    self._set(reading, SetBattery(site, import_cap_kw=target_kw))
            elif site in ahead and reading.battery_power_kw is not None:
                room_kw = reading.import_limit_kw + reading.generation_kw - reading.load_kw
                charge_kw = min(reading.battery_power_kw, room_kw)
                self._set(reading, SetBattery(site, max(charge_kw, 0.0)))
            elif site in self.set_by_us:
                self.set_by_us.discard(site)
                if site not in taken:
                    self.actions.append(SetBattery(site))

    def _set(self, reading: OnsiteReading, action: SetBattery) -> None:
        """Add `action` unless the battery already runs as it says."""
        self.set_by_us.add(reading.site)
        held = (reading.battery_setpoint_kw, reading.battery_import_cap_kw)
        if held != (action.power_kw, action.import_cap_kw):
            self.actions.append(action)
