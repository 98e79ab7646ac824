"""A site's energy over a run: its balance re-solved at every change of facility load, of
on-site generation and of the battery's state (a bound reached), integrated exactly.

Default dispatch (no setpoint from a policy): self-consumption. The battery is
asked for the on-site surplus, generation - load (kW): a surplus charges it, a deficit
discharges it, within its rating and state-of-charge bounds (`Battery.applied_power_kw`).
It thus never charges from the grid nor discharges to it (up to the rounding of
generation - load: an ulp of grid charge), and never takes import or export over a
limit. Self-consumption is the import cap at 0 kW: a policy's import cap X
(`SetBattery(site, import_cap_kw=X)`) asks the battery for X + generation - load, i.e. to
discharge what the load takes above generation + X and to charge (from the surplus, then
the grid) up to X below it, re-solved at every interval, so the grid import stays at or
below X while the battery has the rating and the energy (`import_cap_request_kw`). The cap
is lowered to the connection's import limit.

Between changes every power is constant, so each interval is one `site_balance` and one
`Battery.advance`; an interval ends where the battery reaches a bound
(`Battery.time_to_bound_s`), and the rest of it runs at the power applied there.
A policy's power setpoint (`SetBattery`: kW, positive charging, held until changed)
replaces that request from its time on; the battery applies it within its rating and
state-of-charge bounds in the same way.

Carbon-free share of stored energy: the battery is one pool. Energy charged from
on-site generation is carbon-free, from the grid it is not; losses and self-discharge
take both in proportion, so a discharge delivers the pool's carbon-free fraction, which
a charge updates exactly (the charge's carbon-free share is constant over an interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.energy.balance import GridConnection, SiteBalance, site_balance
from sim.energy.battery import Battery, BatteryState

__all__ = ["EnergyInterval", "SiteEnergy", "hour_edges_s", "import_cap_request_kw"]


def import_cap_request_kw(load_kw: float, generation_kw: float, cap_kw: float) -> float:
    """The battery power (kW, positive charging) that holds the grid import at `cap_kw`:
    cap + generation - load (a discharge of what the load takes above generation + cap, a
    charge up to the cap below it). At a cap of 0 it is self-consumption's request, the
    on-site surplus."""
    return cap_kw + generation_kw - load_kw


@dataclass(frozen=True)
class EnergyInterval:
    """One interval [t0_s, t1_s] of constant powers: its balance, the battery after it
    (None without one) and the carbon-free energy that met the load, kWh (on-site used +
    the carbon-free share of the battery's discharge to the load)."""

    t0_s: float
    t1_s: float
    balance: SiteBalance
    battery: BatteryState | None
    carbon_free_to_load_kwh: float


@dataclass
class SiteEnergy:
    """A site's on-site equipment and its state as a run advances: generation (kW per
    step), an optional battery, and its grid connection; `where` names the site in errors."""

    connection: GridConnection
    battery: Battery | None = None
    state: BatteryState | None = None
    where: str = "site"
    clean_fraction: float = 0.0
    """The carbon-free fraction of the energy stored; the energy in the battery at the
    start counts as not carbon-free (its origin is unknown: the conservative choice)."""
    sink: Callable[[EnergyInterval], None] | None = None
    """Where each interval goes, in time order (None: `run` returns them in a list)."""

    def run(
        self,
        load_times_s: np.ndarray,
        load_kw: np.ndarray,
        generation_times_s: np.ndarray,
        generation_kw: np.ndarray,
        horizon_s: float,
        setpoint_times_s: np.ndarray | None = None,
        setpoint_kw: np.ndarray | None = None,
        start_s: float = 0.0,
        setpoint_cap_kw: np.ndarray | None = None,
    ) -> list[EnergyInterval]:
        """Integrate [start_s, horizon_s] (the state being that at `start_s`): the load
        (kW) is `load_kw[k]` from `load_times_s[k]` on, the generation `generation_kw[k]`
        from `generation_times_s[k]` on (both step functions whose first time is at or
        before `start_s`), the battery's setpoint (kW, positive charging; NaN: none)
        `setpoint_kw[k]` from `setpoint_times_s[k]` on, else its import cap (kW;
        `import_cap_request_kw`) `setpoint_cap_kw[k]` where that is given and not NaN,
        else self-consumption (the cap 0; also before the first setpoint, and throughout
        when none is given).
        An interval ends at every time of the three, so integrating [0, t] and then
        [t, horizon_s] from a time t of one of them gives the intervals of [0, horizon_s].
        The intervals go to `sink`, else are returned (a long run's are many: a sink
        keeps the memory flat)."""
        kept: list[EnergyInterval] = []
        own_sink = self.sink is None  # this run's list, not kept for the next run
        if own_sink:
            self.sink = kept.append
        set_times = np.zeros(0) if setpoint_times_s is None else setpoint_times_s
        set_kw = np.zeros(0) if setpoint_kw is None else setpoint_kw
        set_cap_kw = np.full(len(set_kw), np.nan) if setpoint_cap_kw is None else setpoint_cap_kw
        edges = np.union1d(np.union1d(load_times_s, generation_times_s), set_times)
        edges = np.concatenate(
            ([start_s], edges[(edges > start_s) & (edges < horizon_s)], [horizon_s])
        )
        load_at = np.searchsorted(load_times_s, edges[:-1], side="right") - 1
        generation_at = np.searchsorted(generation_times_s, edges[:-1], side="right") - 1
        set_at = np.searchsorted(set_times, edges[:-1], side="right") - 1
        try:
            for k in range(len(edges) - 1):
                load, generation = (
                    float(load_kw[load_at[k]]),
                    float(generation_kw[generation_at[k]]),
                )
                setpoint, cap = math.nan, math.nan
                if set_at[k] >= 0:
                    setpoint, cap = float(set_kw[set_at[k]]), float(set_cap_kw[set_at[k]])
                self._advance(float(edges[k]), float(edges[k + 1]), load, generation, setpoint, cap)
        finally:
            if own_sink:
                self.sink = None
        return kept

    def _advance(
        self,
        t0_s: float,
        t1_s: float,
        load_kw: float,
        generation_kw: float,
        setpoint_kw: float,
        cap_kw: float,
    ) -> None:
        """[t0_s, t1_s] at constant load, generation and setpoint (NaN: none) or import cap
        (NaN: 0, self-consumption), split where the battery reaches a bound."""
        t_s = t0_s
        while t_s < t1_s:
            end_s, battery_kw, bound_s = t1_s, 0.0, math.inf
            battery, state = self.battery, self.state
            if battery is not None and state is not None:
                request_kw = setpoint_kw
                if math.isnan(setpoint_kw):
                    cap = (
                        0.0 if math.isnan(cap_kw) else min(cap_kw, self.connection.import_limit_kw)
                    )
                    request_kw = import_cap_request_kw(load_kw, generation_kw, cap)
                battery_kw = battery.applied_power_kw(state, request_kw)
                bound_s = battery.time_to_bound_s(state, battery_kw)
                end_s = min(t1_s, t_s + bound_s)
                if end_s <= t_s:  # at the bound already (rounding): idle
                    battery_kw, end_s, bound_s = 0.0, t1_s, math.inf
            # the battery runs exactly to its bound: t_s + bound_s may round past it
            self._interval(
                t_s, end_s, min(end_s - t_s, bound_s), load_kw, generation_kw, battery_kw
            )
            t_s = end_s

    def _interval(
        self,
        t0_s: float,
        t1_s: float,
        dt_s: float,
        load_kw: float,
        generation_kw: float,
        battery_kw: float,
    ) -> None:
        """One interval [t0_s, t1_s] of constant powers lasting `dt_s` (t1_s - t0_s, or the
        battery's exact time to its bound where that differs by rounding): the balance, the
        battery, the carbon-free share."""
        balance = site_balance(
            load_kw, generation_kw, battery_kw, dt_s, self.connection, self.where
        )
        end = None
        from_battery_clean = 0.0
        battery, state = self.battery, self.state
        if battery is not None and state is not None:
            step = battery.advance(state, balance.battery_kw, dt_s)
            end = self.state = step.end
            from_battery_clean = balance.battery_to_load_kwh * self.clean_fraction
            before_fade_kwh = end.stored_kwh + step.fade_loss_kwh
            if balance.battery_charge_kwh > 0 and before_fade_kwh > 0:
                # what is left of the start's energy, and what the charge added (the fade
                # takes both in proportion)
                kept_kwh = battery.stored_after_kwh(state, 0.0, dt_s)
                added_kwh = max(before_fade_kwh - kept_kwh, 0.0)
                clean_share = balance.generation_to_battery_kwh / balance.battery_charge_kwh
                clean_kwh = self.clean_fraction * kept_kwh + clean_share * added_kwh
                self.clean_fraction = min(1.0, clean_kwh / before_fade_kwh)
        assert self.sink is not None  # `run` sets one
        self.sink(
            EnergyInterval(t0_s, t1_s, balance, end, balance.on_site_used_kwh + from_battery_clean)
        )


def hour_edges_s(first_hour_s: float, horizon_s: float) -> np.ndarray:
    """0 and every whole hour `first_hour_s` + 3600 k in (0, horizon_s), s."""
    hours = first_hour_s + 3600.0 * np.arange(math.ceil((horizon_s - first_hour_s) / 3600.0))
    return np.union1d([0.0], hours[(hours > 0) & (hours < horizon_s)])
