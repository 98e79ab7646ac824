"""A battery for an event-driven engine: power is constant between changes, so every
quantity over an interval has a closed form, and the time at which the state of charge
would reach a bound is known in advance (the engine schedules a change there: no
overshoot).

The model. The stored energy E (kWh) changes at a constant internal rate q (kW) and
leaks by self-discharge, a first-order loss at rate k (1/s):

    dE/dt = q / 3600 - k E,   q = eta_c P (charging, P > 0),  q = P / eta_d (P < 0)

where P (kW) is the power at the battery's terminals (positive charges). Its exact
solution over an interval of t seconds is E(t) = E_inf + (E0 - E_inf) exp(-k t), with
E_inf = q / (3600 k) (and E(t) = E0 + q t / 3600 when k = 0). k comes from a rate per day
r, the fraction an idle battery loses in a day: exp(-k 86400) = 1 - r.

The state of charge is E over the present capacity; dispatch keeps it in [soc_min,
soc_max]: a charge stops at soc_max of the present capacity, a discharge at a reserve of
soc_min of the nominal capacity (fixed in kWh, so that the fade a discharge causes does
not reopen the bound it ended at; the state of charge there is soc_min or a little
above). Self-discharge of an idle
battery is physics, not dispatch: it can take the state of charge below soc_min (never
below zero). Power is limited by one rating, `power_kw`, in both directions.

Ageing is capacity fade by throughput: each full equivalent cycle (discharged energy at
the terminals equal to the nominal capacity) takes `fade_per_cycle` of the nominal
capacity away. The fade is applied at the end of each interval, so an interval runs at
the capacity it started with; when the fade leaves more energy stored than soc_max of
the new capacity allows, the excess is counted as `fade_loss_kwh`.

Cited defaults for lithium-ion (`Battery`'s defaults):

- round-trip efficiency 0.85, split evenly (charge and discharge sqrt(0.85) each): NREL
  Annual Technology Baseline 2020, utility-scale battery storage, which adopts Cole and
  Frazier (2020)'s representative 85 %
  (https://atb.nrel.gov/electricity/2020/index.php?t=st&s=cf);
- self-discharge 2.5 % a month (30 days), the middle of lithium-ion's 2-3 % per month
  (D. Darling, Encyclopedia of Alternative Energy, "self discharge",
  http://www.daviddarling.info/encyclopedia/S/AE_self_discharge.html), as a rate per
  day: 1 - 0.975 ** (1 / 30) = 0.000844;
- capacity fade 0.4 / 8000 = 5e-5 of nominal capacity per full equivalent cycle: Modo
  Energy's degradation model, about 60 % of nameplate capacity left after 8000 cycles,
  a cycle being discharged energy equal to the nameplate capacity
  (https://forecastdocs.modoenergy.com/v2.0/docs/battery-degredation);
- embodied carbon 83.5 kgCO2e per kWh of capacity (`sim.energy.embodied`), spread over a
  15-year lifetime, the upper end of the 10-15-year operating horizon of utility-scale
  battery systems (N. K. Singal, "BESS degradation modeling and augmentation strategy",
  https://neerajkumarsingal.com/bess-degradation-modeling-augmentation-strategy/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sim.energy.embodied import LI_ION_EMBODIED_KG_PER_KWH, amortised_embodied_kg
from sim.errors import ScenarioError

SECONDS_PER_DAY = 86400.0

LI_ION_ROUND_TRIP_EFFICIENCY = 0.85
"""NREL ATB 2020, utility-scale battery storage (Cole and Frazier 2020)."""

LI_ION_SELF_DISCHARGE_PER_DAY = 1.0 - 0.975 ** (1.0 / 30.0)
"""2.5 % per 30 days (lithium-ion's 2-3 % per month, Darling), as a fraction per day."""

LI_ION_FADE_PER_CYCLE = 0.4 / 8000.0
"""Fraction of nominal capacity lost per full equivalent cycle (Modo Energy: 60 % after 8000)."""

LI_ION_LIFETIME_YEARS = 15.0
"""The lifetime over which the embodied carbon is spread (Singal: 10-15 years of operation)."""


@dataclass(frozen=True)
class BatteryState:
    """A battery at an instant: `stored_kwh` of energy in a `capacity_kwh` (faded) capacity,
    after `discharged_kwh` of discharge at the terminals since it was new."""

    stored_kwh: float
    capacity_kwh: float
    discharged_kwh: float = 0.0

    @property
    def soc(self) -> float:
        """State of charge: stored energy over the present capacity (a fraction)."""
        return self.stored_kwh / self.capacity_kwh


@dataclass(frozen=True)
class BatteryInterval:
    """What one interval of constant terminal power did. Energies in kWh, at the
    terminals unless named otherwise; `end.stored_kwh - start.stored_kwh` = `charged_kwh`
    - `discharged_kwh` - `conversion_loss_kwh` - `self_discharge_loss_kwh` -
    `fade_loss_kwh` (`self_discharge_loss_kwh` is computed as that remainder)."""

    power_kw: float
    """The power applied at the terminals (the request, limited by the rating and the
    state of charge); positive charges."""
    duration_s: float
    start: BatteryState
    end: BatteryState
    charged_kwh: float
    discharged_kwh: float
    conversion_loss_kwh: float
    """Charging: charged x (1 - eta_c); discharging: discharged x (1 / eta_d - 1)."""
    self_discharge_loss_kwh: float
    fade_loss_kwh: float
    at_bound: bool
    """True when the interval ended exactly at the state-of-charge bound it was heading to."""


def _fraction(name: str, value: float, *, low_open: bool) -> None:
    ok = math.isfinite(value) and (0.0 < value if low_open else 0.0 <= value) and value <= 1.0
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ScenarioError(f"battery: {name} = {value!r} is not in {interval}")


@dataclass(frozen=True)
class Battery:
    """A battery's ratings and physics (defaults: lithium-ion, cited in the module).

    `capacity_kwh`: nominal usable energy when new; `power_kw`: the power rating, charge
    and discharge; efficiencies are one-way fractions; `soc_min`/`soc_max`: the dispatch
    bounds; `self_discharge_per_day`: fraction an idle battery loses in a day;
    `fade_per_cycle`: fraction of nominal capacity lost per full equivalent cycle;
    `embodied_kg_per_kwh` and `lifetime_years`: embodied carbon and the years it is
    spread over."""

    capacity_kwh: float
    power_kw: float
    charge_efficiency: float = math.sqrt(LI_ION_ROUND_TRIP_EFFICIENCY)
    discharge_efficiency: float = math.sqrt(LI_ION_ROUND_TRIP_EFFICIENCY)
    soc_min: float = 0.0
    soc_max: float = 1.0
    self_discharge_per_day: float = LI_ION_SELF_DISCHARGE_PER_DAY
    fade_per_cycle: float = LI_ION_FADE_PER_CYCLE
    embodied_kg_per_kwh: float = LI_ION_EMBODIED_KG_PER_KWH
    lifetime_years: float = LI_ION_LIFETIME_YEARS
    _leak_per_s: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("capacity_kwh", "power_kw", "lifetime_years"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ScenarioError(f"battery: {name} = {value!r} must be a positive number")
        _fraction("charge_efficiency", self.charge_efficiency, low_open=True)
        _fraction("discharge_efficiency", self.discharge_efficiency, low_open=True)
        _fraction("soc_min", self.soc_min, low_open=False)
        _fraction("soc_max", self.soc_max, low_open=True)
        if self.soc_min >= self.soc_max:
            raise ScenarioError(
                f"battery: soc_min = {self.soc_min!r} must be below soc_max = {self.soc_max!r}"
            )
        for name in ("self_discharge_per_day", "fade_per_cycle"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value < 1.0):
                raise ScenarioError(f"battery: {name} = {value!r} is not in [0, 1)")
        if not (math.isfinite(self.embodied_kg_per_kwh) and self.embodied_kg_per_kwh >= 0):
            raise ScenarioError(
                f"battery: embodied_kg_per_kwh = {self.embodied_kg_per_kwh!r} must be >= 0"
            )
        leak = -math.log1p(-self.self_discharge_per_day) / SECONDS_PER_DAY
        object.__setattr__(self, "_leak_per_s", leak)

    def new(self, soc: float) -> BatteryState:
        """A new battery (full nominal capacity) at state of charge `soc`."""
        _fraction("initial soc", soc, low_open=False)
        return BatteryState(stored_kwh=soc * self.capacity_kwh, capacity_kwh=self.capacity_kwh)

    def applied_power_kw(self, state: BatteryState, request_kw: float) -> float:
        """The terminal power (kW) a request gets: limited to the rating, and zero for a
        charge at or above soc_max or a discharge at or below soc_min."""
        power = min(max(request_kw, -self.power_kw), self.power_kw)
        if power > 0 and state.stored_kwh >= self.soc_max * state.capacity_kwh:
            return 0.0
        if power < 0 and state.stored_kwh <= self.soc_min * self.capacity_kwh:
            return 0.0
        return power

    def _internal_kw(self, power_kw: float) -> float:
        """q: the rate (kW) at which terminal power `power_kw` changes the stored energy."""
        if power_kw > 0:
            return power_kw * self.charge_efficiency
        return power_kw / self.discharge_efficiency

    def _target_kwh(self, state: BatteryState, power_kw: float) -> float:
        """The bound a charge (soc_max of the present capacity) or a discharge (soc_min of
        the nominal capacity) heads to, in kWh."""
        if power_kw > 0:
            return self.soc_max * state.capacity_kwh
        return self.soc_min * self.capacity_kwh

    def time_to_bound_s(self, state: BatteryState, power_kw: float) -> float:
        """Seconds until the state of charge reaches the bound `power_kw` (an applied
        power, `applied_power_kw`) heads to; `math.inf` when idle or when self-discharge
        balances the charge before the bound (E_inf <= soc_max x capacity)."""
        if power_kw == 0:
            return math.inf
        q = self._internal_kw(power_kw)
        gap_kwh = self._target_kwh(state, power_kw) - state.stored_kwh
        if self._leak_per_s == 0:
            return max(gap_kwh * 3600.0 / q, 0.0)
        drift_kwh = q / (3600.0 * self._leak_per_s) - state.stored_kwh  # E_inf - E0
        # E(t) - E0 = drift (1 - exp(-k t)) = gap  =>  t = -log1p(-gap / drift) / k
        ratio = gap_kwh / drift_kwh
        if not 0.0 <= ratio < 1.0:  # the leak outruns the charge before the bound
            return math.inf
        return max(-math.log1p(-ratio) / self._leak_per_s, 0.0)

    def stored_after_kwh(self, state: BatteryState, power_kw: float, duration_s: float) -> float:
        """E(t): the stored energy (kWh) after `duration_s` at terminal power `power_kw`."""
        q = self._internal_kw(power_kw)
        if self._leak_per_s == 0:
            return state.stored_kwh + q * duration_s / 3600.0
        drift_kwh = q / (3600.0 * self._leak_per_s) - state.stored_kwh
        return state.stored_kwh - drift_kwh * math.expm1(-self._leak_per_s * duration_s)

    def advance(self, state: BatteryState, power_kw: float, duration_s: float) -> BatteryInterval:
        """Run `duration_s` seconds at the applied terminal power `power_kw` (from
        `applied_power_kw`). `duration_s` must not pass `time_to_bound_s`: the engine ends
        the interval there; ending exactly there lands exactly on the bound."""
        if power_kw != self.applied_power_kw(state, power_kw):
            raise ValueError(f"{power_kw} kW is not an applied power (applied_power_kw)")
        bound_s = self.time_to_bound_s(state, power_kw)
        if duration_s > bound_s:
            raise ValueError(f"{duration_s} s passes the state-of-charge bound at {bound_s} s")
        at_bound = duration_s == bound_s
        if at_bound:
            stored = self._target_kwh(state, power_kw)
        else:
            stored = self.stored_after_kwh(state, power_kw, duration_s)
        terminal_kwh = abs(power_kw) * duration_s / 3600.0
        charged = terminal_kwh if power_kw > 0 else 0.0
        discharged = terminal_kwh if power_kw < 0 else 0.0
        conversion = charged * (1.0 - self.charge_efficiency) + discharged * (
            1.0 / self.discharge_efficiency - 1.0
        )
        leaked = state.stored_kwh + charged - discharged - conversion - stored
        throughput = state.discharged_kwh + discharged
        capacity = self.capacity_kwh * (1.0 - self.fade_per_cycle * throughput / self.capacity_kwh)
        kept = min(stored, self.soc_max * capacity)
        end = BatteryState(stored_kwh=kept, capacity_kwh=capacity, discharged_kwh=throughput)
        return BatteryInterval(
            power_kw=power_kw,
            duration_s=duration_s,
            start=state,
            end=end,
            charged_kwh=charged,
            discharged_kwh=discharged,
            conversion_loss_kwh=conversion,
            self_discharge_loss_kwh=leaked,
            fade_loss_kwh=stored - kept,
            at_bound=at_bound,
        )

    def embodied_kg(self, duration_s: float) -> float:
        """The embodied carbon (kgCO2e) an interval of `duration_s` carries: nominal
        capacity x `embodied_kg_per_kwh`, spread linearly over `lifetime_years`."""
        total_kg = self.capacity_kwh * self.embodied_kg_per_kwh
        return amortised_embodied_kg(total_kg, self.lifetime_years, duration_s)
