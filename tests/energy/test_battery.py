"""The battery (sim.energy.battery): state of charge within its bounds, losses equal to
the efficiency arithmetic, self-discharge by its exact solution, ageing by throughput,
the time to a bound exact, embodied carbon amortised, bad settings named in one line."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from sim.energy import Battery, BatteryState, amortised_embodied_kg
from sim.energy.battery import LI_ION_SELF_DISCHARGE_PER_DAY
from sim.energy.embodied import PV_EMBODIED_KG_PER_KWP
from sim.errors import ScenarioError
from tests.energy import steady

DAY_S = 86400.0


def fading(fade_per_cycle: float) -> Battery:
    """100 kWh, 100 kW, lossless, no self-discharge: only the fade acts."""
    return Battery(
        capacity_kwh=100.0,
        power_kw=100.0,
        charge_efficiency=1.0,
        discharge_efficiency=1.0,
        self_discharge_per_day=0.0,
        fade_per_cycle=fade_per_cycle,
    )


def run(battery: Battery, state: BatteryState, request_kw: float, duration_s: float):
    """As the engine will: apply the request, stop at the bound if it comes first."""
    power = battery.applied_power_kw(state, request_kw)
    step = battery.advance(state, power, min(duration_s, battery.time_to_bound_s(state, power)))
    return step


@settings(max_examples=200, deadline=None)
@given(
    soc_min=st.floats(0.0, 0.4),
    soc_max=st.floats(0.6, 1.0),
    leak=st.sampled_from([0.0, LI_ION_SELF_DISCHARGE_PER_DAY]),
    requests=st.lists(
        st.tuples(st.floats(-500.0, 500.0), st.floats(1.0, 20000.0)), min_size=1, max_size=30
    ),
)
def test_state_of_charge_stays_within_its_bounds(soc_min, soc_max, leak, requests):
    battery = Battery(
        capacity_kwh=100.0,
        power_kw=80.0,
        soc_min=soc_min,
        soc_max=soc_max,
        self_discharge_per_day=leak,
        fade_per_cycle=0.001,
    )
    state = battery.new((soc_min + soc_max) / 2)
    for request_kw, duration_s in requests:
        step = run(battery, state, request_kw, duration_s)
        assert abs(step.power_kw) <= battery.power_kw
        state = step.end
        assert state.stored_kwh <= soc_max * state.capacity_kwh
        if step.power_kw < 0:  # a discharge stops at soc_min; only self-discharge goes lower
            assert (
                state.stored_kwh >= soc_min * battery.capacity_kwh >= soc_min * state.capacity_kwh
            )
        assert state.stored_kwh >= 0


def test_conversion_losses_are_the_efficiency_arithmetic():
    battery = steady(100.0, 50.0, charge_efficiency=0.9, discharge_efficiency=0.8)
    state = battery.new(0.5)
    charge = battery.advance(state, 10.0, 3600.0)  # 10 kWh in, 9 kWh stored, 1 kWh lost
    assert charge.charged_kwh == 10.0 and charge.discharged_kwh == 0.0
    assert charge.conversion_loss_kwh == pytest.approx(1.0, rel=1e-12)
    assert charge.end.stored_kwh == pytest.approx(59.0, rel=1e-12)
    discharge = battery.advance(charge.end, -10.0, 3600.0)  # 10 kWh out, 12.5 kWh taken
    assert discharge.discharged_kwh == 10.0
    assert discharge.conversion_loss_kwh == pytest.approx(2.5, rel=1e-12)
    assert discharge.end.stored_kwh == pytest.approx(46.5, rel=1e-12)
    assert charge.self_discharge_loss_kwh == pytest.approx(0.0, abs=1e-12)


def test_a_full_round_trip_returns_the_round_trip_efficiency():
    battery = steady(100.0, 25.0)
    empty = battery.new(0.0)
    full = run(battery, empty, 25.0, 1e9)
    assert full.at_bound and full.end.soc == 1.0
    drained = run(battery, full.end, -25.0, 1e9)
    assert drained.at_bound and drained.end.stored_kwh == 0.0
    assert drained.discharged_kwh / full.charged_kwh == pytest.approx(0.85, rel=1e-12)  # NREL ATB


def test_self_discharge_over_an_idle_day_loses_the_daily_rate():
    battery = Battery(capacity_kwh=100.0, power_kw=50.0, self_discharge_per_day=0.01)
    day = battery.advance(battery.new(0.8), 0.0, DAY_S)
    assert day.end.stored_kwh == pytest.approx(80.0 * 0.99, rel=1e-12)
    assert day.self_discharge_loss_kwh == pytest.approx(0.8, rel=1e-9)
    assert day.charged_kwh == day.discharged_kwh == day.conversion_loss_kwh == 0.0
    # the lithium-ion default: 2.5 % over 30 idle days
    li_ion = Battery(capacity_kwh=100.0, power_kw=50.0)
    month = li_ion.advance(li_ion.new(1.0), 0.0, 30 * DAY_S)
    assert month.end.stored_kwh == pytest.approx(97.5, rel=1e-12)


@pytest.mark.parametrize("power_kw", [30.0, -30.0, 0.0])
def test_the_closed_form_solves_the_stated_differential_equation(power_kw):
    """dE/dt = q/3600 - k E with k from a (large, to be visible) 20 % per day."""
    battery = Battery(
        capacity_kwh=1000.0,
        power_kw=50.0,
        charge_efficiency=0.95,
        discharge_efficiency=0.9,
        self_discharge_per_day=0.2,
    )
    state = battery.new(0.5)
    q = power_kw * 0.95 if power_kw > 0 else power_kw / 0.9
    k = -math.log(0.8) / DAY_S
    times = [600.0, 3600.0, 5 * 3600.0]
    numeric = solve_ivp(
        lambda t, e: q / 3600 - k * e, (0, times[-1]), [500.0], t_eval=times, rtol=1e-11
    ).y[0]
    exact = [battery.advance(state, power_kw, t).end.stored_kwh for t in times]
    assert exact == pytest.approx(list(numeric), rel=1e-8)


@pytest.mark.parametrize("power_kw", [40.0, -40.0])
@pytest.mark.parametrize("leak", [0.0, 0.05])
def test_advancing_to_the_time_to_bound_lands_on_the_bound_and_no_further(power_kw, leak):
    battery = Battery(
        capacity_kwh=100.0, power_kw=50.0, soc_min=0.1, soc_max=0.9, self_discharge_per_day=leak
    )
    state = battery.new(0.5)
    bound_s = battery.time_to_bound_s(state, power_kw)
    target = 90.0 if power_kw > 0 else 10.0
    assert battery.stored_after_kwh(state, power_kw, bound_s) == pytest.approx(target, rel=1e-12)
    step = battery.advance(state, power_kw, bound_s)
    assert step.at_bound and step.end.stored_kwh == target
    assert battery.applied_power_kw(step.end, power_kw) == 0.0  # the bound stops it
    with pytest.raises(ValueError, match="passes the state-of-charge bound"):
        battery.advance(state, power_kw, bound_s * 1.001)


def test_a_charge_slower_than_the_leak_never_reaches_the_top():
    battery = Battery(capacity_kwh=1000.0, power_kw=50.0, self_discharge_per_day=0.5)
    # E_inf = q / (3600 k) = 0.1 * 0.92 / (3600 * ln2 / 86400) ~ 3.2 kWh < 900
    assert battery.time_to_bound_s(battery.new(0.9), 0.1) == math.inf
    assert battery.time_to_bound_s(battery.new(0.001), 0.1) == math.inf


def test_capacity_fades_by_full_equivalent_cycles_of_throughput():
    battery = fading(0.001)
    state, capacities = battery.new(0.0), []
    for _ in range(10):  # ten full cycles: charge to the top, discharge to empty
        state = run(battery, state, 100.0, 1e9).end
        capacities.append(state.capacity_kwh)
        state = run(battery, state, -100.0, 1e9).end
    assert state.stored_kwh == 0.0
    assert state.discharged_kwh == pytest.approx(sum(capacities), rel=1e-12)
    cycles = state.discharged_kwh / 100.0  # full equivalent cycles of the nominal capacity
    assert state.capacity_kwh == pytest.approx(100.0 * (1 - 0.001 * cycles), rel=1e-12)
    assert capacities[1] == pytest.approx(99.9, rel=1e-12)  # one cycle: 0.1 % gone
    # the default: Modo Energy's 60 % of nameplate after 8000 cycles
    li_ion = Battery(capacity_kwh=100.0, power_kw=100.0)
    worn = BatteryState(stored_kwh=50.0, capacity_kwh=100.0, discharged_kwh=8000 * 100.0 - 1.0)
    assert li_ion.advance(worn, -60.0, 60.0).end.capacity_kwh == pytest.approx(60.0, rel=1e-12)


def test_fade_at_the_top_counts_the_energy_it_removes():
    battery = fading(0.01)
    full = BatteryState(stored_kwh=100.0, capacity_kwh=100.0, discharged_kwh=0.0)
    step = battery.advance(full, -100.0, 36.0)  # 1 kWh out: capacity 99.99, stored 99
    assert step.fade_loss_kwh == 0.0
    topped = BatteryState(stored_kwh=100.0, capacity_kwh=100.0, discharged_kwh=100.0)
    idle = battery.advance(topped, 0.0, 60.0)  # the fade of one cycle applied: 99 kWh fit
    assert idle.end.stored_kwh == 99.0 and idle.fade_loss_kwh == 1.0


JULIAN_YEAR_S = 365.25 * 86400.0
"""The year of every lifetime, s: "a Julian year of 365.25 days" (docs/onsite-energy.md,
embodied carbon)."""


def test_embodied_carbon_is_amortised_over_the_lifetime():
    battery = Battery(capacity_kwh=200.0, power_kw=50.0)  # 83.5 kg/kWh over 15 years
    assert battery.embodied_kg(JULIAN_YEAR_S) == pytest.approx(200 * 83.5 / 15, rel=1e-12)
    assert battery.embodied_kg(15 * JULIAN_YEAR_S) == pytest.approx(200 * 83.5, rel=1e-12)
    assert PV_EMBODIED_KG_PER_KWP == pytest.approx(1836.0)  # Hsu et al. 2012, harmonised
    assert amortised_embodied_kg(1836.0, 30.0, 0.0) == 0.0
    with pytest.raises(ScenarioError, match="lifetime_years = 0"):
        amortised_embodied_kg(1.0, 0.0, 1.0)


@pytest.mark.parametrize(
    "settings_, message",
    [
        ({"capacity_kwh": 0.0}, "battery: capacity_kwh = 0.0 must be a positive number"),
        ({"power_kw": math.nan}, "battery: power_kw = nan must be a positive number"),
        ({"charge_efficiency": 1.2}, r"battery: charge_efficiency = 1.2 is not in \(0, 1\]"),
        ({"soc_min": 0.9, "soc_max": 0.5}, "soc_min = 0.9 must be below soc_max = 0.5"),
        ({"self_discharge_per_day": 1.0}, r"self_discharge_per_day = 1.0 is not in \[0, 1\)"),
        ({"embodied_kg_per_kwh": -1.0}, "embodied_kg_per_kwh = -1.0 must be >= 0"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_key(settings_, message):
    with pytest.raises(ScenarioError, match=message) as raised:
        Battery(**{"capacity_kwh": 100.0, "power_kw": 50.0, **settings_})
    assert "\n" not in str(raised.value)
