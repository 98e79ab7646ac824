"""The battery and the site balance (sim.energy) against Vessim 0.16.0 (dos-group/vessim,
MIT; the `[dev]` extra) on a measured day of solar generation, and against a trajectory
computed by hand where Vessim's battery cannot follow (efficiencies).

Vessim's `SimpleBattery` is lossless and does not self-discharge or age, and has no
upper state-of-charge bound below 1: the comparison configures ours to that common
subset (efficiencies 1, self-discharge 0, fade 0, soc_max 1, power rating = c_rate x
capacity). Its step semantics differ: a power is held for a whole step and its feasible
range lowers the power so that a bound is reached exactly at the step's end, where ours
runs the requested power until the bound (the engine's change event) and idles after.
Over a step both move the same energy, so the state of charge at each step's end and the
grid energy of each step agree to rounding (measured: 1e-16 in state of charge, 4e-13 kWh
of grid energy in steps of up to 550 kWh; relative 1e-12 is asserted).

The PV trace is CAISO's measured solar generation (EIA-930, hourly MW) on 2021-06-21 and
-22 UTC, from ../shared/data/carboncast (skipped without it), scaled to a 1 MW-peak site.
"""

from __future__ import annotations

import pandas as pd
import pytest

from sim.energy import Battery, GridConnection, site_balance
from sim.energy.battery import BatteryState
from tests.energy import steady

vessim = pytest.importorskip("vessim")


def run_site(
    battery: Battery, state: BatteryState, hours: list[tuple[float, float]]
) -> tuple[list[float], list[float], list[float]]:
    """Drive a site hour by hour as the engine will: the battery follows the net power
    (absorbs surplus, covers deficit) until it reaches a bound, then idles. The state of
    charge at each hour's start and end, and each hour's grid import and export (kWh)."""
    connection = GridConnection()
    socs, imports, exports = [state.soc], [], []
    for load_kw, pv_kw in hours:
        left_s, imported, exported = 3600.0, 0.0, 0.0
        while left_s > 0:
            power = battery.applied_power_kw(state, pv_kw - load_kw)
            run_s = min(left_s, battery.time_to_bound_s(state, power))
            balance = site_balance(load_kw, pv_kw, power, run_s, connection)
            state = battery.advance(state, balance.battery_kw, run_s).end
            imported += balance.grid_import_kwh
            exported += balance.export_kwh
            left_s -= run_s
        socs.append(state.soc)
        imports.append(imported)
        exports.append(exported)
    return socs, imports, exports


def run_vessim(
    capacity_kwh: float, c_rate: float, soc: float, soc_min: float, hours: list
) -> tuple[list[float], list[float]]:
    """The same site in Vessim: its state of charge at each hour's start and end, and
    each hour's net grid energy (kWh, export positive)."""
    battery = vessim.SimpleBattery(
        "battery", capacity=capacity_kwh * 1000, initial_soc=soc, min_soc=soc_min, c_rate=c_rate
    )
    grid = vessim.Microgrid(
        step_size=3600,
        actors=[],
        dispatchables=[battery, vessim.GridConnection()],
        policy=vessim.DefaultDispatchPolicy(),
    )
    socs, net = [], []
    for hour, (load_kw, pv_kw) in enumerate(hours):
        grid.advance(hour * 3600, external_power=(pv_kw - load_kw) * 1000)
        socs.append(battery.soc())
        net.append(grid.p_grid * 3600 / 3.6e6)
    grid.finish(len(hours) * 3600)
    return socs + [battery.soc()], net


def caiso_pv_kw(shared_data) -> list[float]:
    frame = pd.read_csv(shared_data / "carboncast" / "CISO_lifecycle_emissions.csv")
    times = pd.to_datetime(frame["UTC time"])
    days = frame[(times >= "2021-06-21") & (times < "2021-06-23")]
    solar_mw = days["solar"].to_numpy()
    assert len(solar_mw) == 48
    return [float(mw) for mw in solar_mw / solar_mw.max() * 1000.0]


def test_state_of_charge_and_grid_energy_match_vessim_on_a_measured_pv_day(shared_data):
    pv_kw = caiso_pv_kw(shared_data)
    hours = [(450.0 + 100.0 * (h % 24 >= 16), pv) for h, pv in enumerate(pv_kw)]
    ours = steady(
        2000.0, 0.25 * 2000.0, charge_efficiency=1.0, discharge_efficiency=1.0, soc_min=0.1
    )
    socs, imports, exports = run_site(ours, ours.new(0.3), hours)
    vessim_socs, vessim_net = run_vessim(2000.0, 0.25, 0.3, 0.1, hours)
    assert socs == pytest.approx(vessim_socs, rel=1e-12)
    net = [exported - imported for imported, exported in zip(imports, exports, strict=True)]
    assert net == pytest.approx(vessim_net, rel=1e-12, abs=1e-9)
    # the day exercised both bounds, mid-step, and both directions of the grid
    assert min(socs) == pytest.approx(0.1) and max(socs) == pytest.approx(1.0)
    assert max(imports) > 0 and max(exports) > 0


def test_a_lossy_battery_follows_the_hand_computed_trajectory():
    """100 kWh, 50 kW, eta_c 0.9, eta_d 0.8, soc_min 0.2, from 50 kWh; (load, PV) kW:
    h1 (60, 100): charge 40 kW, stored 50 + 36 = 86.
    h2 (20, 100): charge 50 kW (rated) at 45 kWh/h, full after 14/45 h = 1120 s; export
        30 kW for 1120 s then 80 kW for 2480 s = 232000/3600 kWh.
    h3 (80, 0): discharge 50 kW at 62.5 kWh/h for the hour: 100 - 62.5 = 37.5; import 30.
    h4 (80, 0): 17.5 kWh to the reserve of 20 takes 17.5/62.5 h = 1008 s, 14 kWh out;
        import 80 - 14 = 66."""
    battery = steady(100.0, 50.0, charge_efficiency=0.9, discharge_efficiency=0.8, soc_min=0.2)
    hours = [(60.0, 100.0), (20.0, 100.0), (80.0, 0.0), (80.0, 0.0)]
    socs, imports, exports = run_site(battery, battery.new(0.5), hours)
    assert socs == pytest.approx([0.5, 0.86, 1.0, 0.375, 0.2], rel=1e-12)
    assert imports == pytest.approx([0.0, 0.0, 30.0, 66.0], rel=1e-12)
    assert exports == pytest.approx([0.0, 232000 / 3600, 0.0, 0.0], rel=1e-12)
