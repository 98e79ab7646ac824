"""A site's energy over a run (`sim.energy.dispatch.SiteEnergy`): self-consumption
dispatch, exact balance at every interval, state of charge within bounds, the
carbon-free share of stored energy, against a day computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.energy import Battery, GridConnection
from sim.energy.dispatch import SiteEnergy, hour_edges_s

HOUR_S = 3600.0


def lossless(capacity_kwh: float, power_kw: float, **kw) -> Battery:
    return Battery(
        capacity_kwh,
        power_kw,
        charge_efficiency=1.0,
        discharge_efficiency=1.0,
        self_discharge_per_day=0.0,
        fade_per_cycle=0.0,
        **kw,
    )


def run_day(energy: SiteEnergy, load_kw, generation_kw, load_times_s=None):
    hours = np.arange(len(generation_kw)) * HOUR_S
    load_t = hours[: len(load_kw)] if load_times_s is None else np.asarray(load_times_s)
    return energy.run(
        load_t,
        np.asarray(load_kw, float),
        hours,
        np.asarray(generation_kw, float),
        hours[-1] + HOUR_S,
    )


def test_a_constant_load_on_a_pv_day_matches_the_hand_computed_balance():
    # 100 kW load; PV 0, 50, 150, 200, 150, 0 kW; a lossless 100 kWh / 50 kW battery from empty.
    # h0: grid 100.  h1: PV 50 used, grid 50.  h2: surplus 50 charges (50 kWh), export 0.
    # h3: surplus 100: charge 50 kW until full at 100 kWh (1 h at 50 kW), export 50.
    # h4: surplus 50, full: export 50.  h5: deficit 100: battery 50 kW for 1 h + grid 50.
    energy = SiteEnergy(GridConnection(), lossless(100, 50), lossless(100, 50).new(0.0))
    out = run_day(energy, [100.0] * 6, [0, 50, 150, 200, 150, 0], [0.0])
    per_hour = lambda name: [getattr(x.balance, name) for x in out]  # noqa: E731
    assert per_hour("grid_import_kwh") == [100, 50, 0, 0, 0, 50]
    assert per_hour("on_site_used_kwh") == [0, 50, 100, 100, 100, 0]
    assert per_hour("battery_charge_kwh") == [0, 0, 50, 50, 0, 0]
    assert per_hour("export_kwh") == [0, 0, 0, 50, 50, 0]
    assert per_hour("battery_to_load_kwh") == [0, 0, 0, 0, 0, 50]
    assert [x.battery.stored_kwh for x in out] == [0, 0, 50, 100, 100, 50]
    # the battery was charged from PV only: its discharge is carbon-free
    assert [x.carbon_free_to_load_kwh for x in out] == [0, 50, 100, 100, 100, 50]


def test_the_battery_reaching_a_bound_ends_an_interval_there():
    # surplus 80 kW into a 50 kWh / 100 kW battery from 10 kWh: full after 0.5 h
    battery = lossless(50, 100)
    energy = SiteEnergy(GridConnection(), battery, battery.new(0.2))
    out = run_day(energy, [20.0], [100.0], [0.0])
    assert [(x.t0_s, x.t1_s) for x in out] == [(0.0, 1800.0), (1800.0, 3600.0)]
    assert out[0].battery.stored_kwh == 50.0
    assert out[0].balance.battery_charge_kwh == 40.0
    assert out[1].balance.battery_charge_kwh == 0.0
    assert out[1].balance.export_kwh == 40.0


def identities_hold(b) -> bool:
    return (
        b.load_kwh == b.on_site_used_kwh + b.battery_to_load_kwh + b.grid_to_load_kwh
        and b.generation_kwh
        == b.on_site_used_kwh
        + b.generation_to_battery_kwh
        + b.generation_export_kwh
        + b.curtailed_kwh
        and b.battery_charge_kwh == b.generation_to_battery_kwh + b.grid_to_battery_kwh
        and b.battery_discharge_kwh == b.battery_to_load_kwh + b.battery_to_grid_kwh
    )


@pytest.mark.parametrize("mode", ["refuse", "curtail"])
def test_balance_is_exact_and_soc_in_bounds_at_every_step_with_export_limit_and_curtailment(mode):
    rng = np.random.default_rng(35)
    hours = 24 * 7
    generation = np.clip(rng.normal(300, 250, hours), 0, None)
    load_times = np.sort(rng.uniform(0, hours * HOUR_S, 400))
    load_times[0] = 0.0
    load = rng.uniform(50, 400, len(load_times))
    battery = Battery(500, 120, soc_min=0.1, soc_max=0.9)  # the lossy, ageing defaults
    connection = GridConnection(import_limit_kw=450, export_limit_kw=60, over_limit=mode)
    energy = SiteEnergy(connection, battery, battery.new(0.5))
    out = energy.run(load_times, load, np.arange(hours) * HOUR_S, generation, hours * HOUR_S)
    assert all(identities_hold(x.balance) for x in out)
    assert sum(x.balance.curtailed_kwh for x in out) > 0
    assert sum(x.balance.export_kwh for x in out) > 0
    assert all(x.balance.export_kwh <= 60 * (x.t1_s - x.t0_s) / HOUR_S * (1 + 1e-12) for x in out)
    # self-consumption neither charges from the grid nor discharges to it (up to the
    # rounding of surplus = generation - load)
    assert all(x.balance.grid_to_battery_kwh <= 1e-12 * x.balance.load_kwh for x in out)
    assert all(x.balance.battery_to_grid_kwh <= 1e-12 * x.balance.load_kwh for x in out)
    stored = np.array([x.battery.stored_kwh for x in out])
    capacity = np.array([x.battery.capacity_kwh for x in out])
    assert np.all(stored <= 0.9 * capacity * (1 + 1e-12))
    # a discharge stops at the reserve; only self-discharge of an idle battery goes below
    assert np.all(stored >= 0.1 * 500 * (1 - 1e-3))
    assert out[-1].t1_s == hours * HOUR_S
    assert all(a.t1_s == b.t0_s for a, b in zip(out, out[1:], strict=False))


def test_energy_from_the_grid_in_the_battery_at_the_start_is_not_carbon_free():
    # 50 kWh stored at the start, no generation: its discharge meets load, not carbon-free
    battery = lossless(100, 50)
    energy = SiteEnergy(GridConnection(), battery, battery.new(0.5))
    (x,) = run_day(energy, [50.0], [0.0], [0.0])
    assert x.balance.battery_to_load_kwh == 50.0
    assert x.carbon_free_to_load_kwh == 0.0


def test_a_half_pv_charged_battery_delivers_half_carbon_free_energy():
    # 50 kWh from the start (not carbon-free) + 50 kWh of PV surplus, then a discharge
    battery = lossless(100, 50)
    energy = SiteEnergy(GridConnection(), battery, battery.new(0.5))
    out = run_day(energy, [0.0, 50.0], [50.0, 0.0])
    assert out[1].balance.battery_to_load_kwh == 50.0
    assert out[1].carbon_free_to_load_kwh == 25.0


def test_a_load_over_the_import_limit_is_refused_naming_the_site():
    energy = SiteEnergy(GridConnection(import_limit_kw=10), where="site a")
    with pytest.raises(Exception, match="site a: load 20.0 kW exceeds"):
        run_day(energy, [20.0], [0.0], [0.0])


def test_hour_edges_start_at_zero_and_follow_whole_hours():
    assert list(hour_edges_s(1800.0, 3 * HOUR_S)) == [0.0, 1800.0, 5400.0, 9000.0]
    assert list(hour_edges_s(0.0, 2 * HOUR_S)) == [0.0, 3600.0]
    assert math.isclose(hour_edges_s(0.0, 1.5 * HOUR_S)[-1], 3600.0)


def test_integrating_to_a_change_and_on_from_there_gives_the_same_intervals_bit_for_bit():
    rng = np.random.default_rng(5)
    hours = 48
    generation = np.clip(rng.normal(200, 200, hours), 0, None)
    load_times = np.sort(rng.uniform(0, hours * HOUR_S, 150))
    load_times[0] = 0.0
    load = rng.uniform(50, 300, len(load_times))
    set_times, set_kw = np.array([5 * HOUR_S, 20 * HOUR_S]), np.array([80.0, math.nan])
    battery = Battery(400, 100, soc_min=0.1, soc_max=0.9)

    def energy() -> SiteEnergy:
        return SiteEnergy(GridConnection(), battery, battery.new(0.5))

    args = (load_times, load, np.arange(hours) * HOUR_S, generation)
    whole = energy().run(*args, hours * HOUR_S, set_times, set_kw)
    split = energy()
    cut_s = float(load_times[70])  # a change of load
    first = split.run(*args, cut_s, set_times, set_kw)
    rest = split.run(*args, hours * HOUR_S, set_times, set_kw, start_s=cut_s)
    assert first + rest == whole
    # a held setpoint charges at its power from the grid (the battery ends full or at 80 kW)
    held = [x for x in whole if 5 * HOUR_S <= x.t0_s < 20 * HOUR_S]
    assert all(x.balance.battery_kw in (80.0, 0.0) for x in held)
    assert sum(x.balance.grid_to_battery_kwh for x in held) > 0


def run_capped(energy: SiteEnergy, load_kw, generation_kw, cap_kw: float):
    """Hourly load and generation, the battery holding import at or below `cap_kw` from
    the start."""
    hours = np.arange(len(generation_kw)) * HOUR_S
    return energy.run(
        hours,
        np.asarray(load_kw, float),
        hours,
        np.asarray(generation_kw, float),
        hours[-1] + HOUR_S,
        np.array([0.0]),
        np.array([math.nan]),
        setpoint_cap_kw=np.array([cap_kw]),
    )


def test_an_import_cap_shaves_the_peaks_and_recharges_below_the_cap_by_hand():
    # cap 60 kW; a lossless 40 kWh / 30 kW battery from 20 kWh; no generation.
    # h0 load 50: charge 10 kW from the grid (30 kWh).  h1 load 80: discharge 20 (10 kWh).
    # h2 load 100: discharge 30 kW (the rating): import 70 > cap (0 kWh left after 1/3 h at
    #   30 kW: 10 kWh / 30 kW = 20 min, then import 100).  h3 load 40: charge 20 (20 kWh).
    battery = lossless(40, 30)
    out = run_capped(
        SiteEnergy(GridConnection(), battery, battery.new(0.5)),
        [50, 80, 100, 40],
        [0, 0, 0, 0],
        60.0,
    )
    assert [(x.t0_s, x.balance.battery_kw) for x in out] == [
        (0.0, 10.0),
        (3600.0, -20.0),
        (7200.0, -30.0),
        (7200.0 + 1200.0, 0.0),
        (3 * 3600.0, 20.0),
    ]
    assert [x.battery.stored_kwh for x in out] == pytest.approx([30, 10, 0, 0, 20], abs=1e-12)
    imports_kw = [x.balance.grid_import_kwh * 3600 / x.balance.duration_s for x in out]
    assert imports_kw == pytest.approx([60, 60, 70, 100, 60], rel=1e-12)


def test_an_import_cap_holds_while_the_battery_has_energy_and_rating():
    rng = np.random.default_rng(11)
    hours = 72
    generation = np.clip(rng.normal(30, 40, hours), 0, None)
    load = rng.uniform(20, 160, hours)
    battery = Battery(300, 60, soc_min=0.1, soc_max=0.9)
    cap_kw = 90.0
    connection = GridConnection(import_limit_kw=200.0, export_limit_kw=10.0)
    out = run_capped(SiteEnergy(connection, battery, battery.new(0.5)), load, generation, cap_kw)
    for x in out:
        b = x.balance
        import_kw = b.grid_import_kwh * 3600 / b.duration_s
        load_kw, generation_kw = (
            b.load_kwh * 3600 / b.duration_s,
            b.generation_kwh * 3600 / b.duration_s,
        )
        empty = x.battery.stored_kwh <= battery.soc_min * battery.capacity_kwh * (1 + 1e-9)
        at_rating = math.isclose(-b.battery_kw, battery.power_kw)
        if not (empty or at_rating):  # the battery could cover it: import at most the cap
            assert import_kw <= cap_kw * (1 + 1e-12)
        if load_kw - generation_kw < cap_kw and not math.isclose(b.battery_kw, battery.power_kw):
            # below the cap, a battery not full charges up to it (else it idles full)
            assert import_kw == pytest.approx(cap_kw, rel=1e-9) or b.battery_kw == 0
        # the load is met by on-site supply, the battery and the grid, exactly
        assert b.load_kwh == b.on_site_used_kwh + b.battery_to_load_kwh + b.grid_to_load_kwh
        assert b.battery_to_grid_kwh == 0  # shaving never exports from the battery
    assert sum(x.balance.battery_discharge_kwh for x in out) > 0
    assert sum(x.balance.grid_to_battery_kwh for x in out) > 0


def test_a_cap_above_the_import_limit_is_held_at_the_limit():
    battery = lossless(100, 50)
    out = run_capped(
        SiteEnergy(GridConnection(import_limit_kw=40.0), battery, battery.new(0.5)),
        [30.0, 70.0],
        [0.0, 0.0],
        1000.0,
    )
    assert [x.balance.battery_kw for x in out] == [10.0, -30.0]
