"""The site energy balance (sim.energy.balance): on-site generation first, then the
battery, then the grid; export up to the limit, curtailment beyond; the connection limit
refuses or curtails a battery power; and the identities hold exactly, to the last bit,
at every step."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.energy import Battery, GridConnection, SiteBalance, site_balance
from sim.energy.balance import battery_excess_kw
from sim.errors import PolicyError, ScenarioError

power = st.floats(0.0, 1e4, allow_subnormal=False)
limit = st.one_of(st.just(math.inf), st.floats(0.0, 1e4, allow_subnormal=False))


def assert_identities(b: SiteBalance) -> None:
    """Exact, in the order the module documents; and every flow non-negative."""
    assert b.load_kwh == b.on_site_used_kwh + b.battery_to_load_kwh + b.grid_to_load_kwh
    assert b.generation_kwh == (
        b.on_site_used_kwh + b.generation_to_battery_kwh + b.generation_export_kwh + b.curtailed_kwh
    )
    assert b.battery_charge_kwh == b.generation_to_battery_kwh + b.grid_to_battery_kwh
    assert b.battery_discharge_kwh == b.battery_to_load_kwh + b.battery_to_grid_kwh
    flows = [v for k, v in vars(b).items() if k.endswith("_kwh") and "_per_" not in k]
    assert all(value >= 0 for value in flows)


@settings(max_examples=2000, deadline=None)
@given(
    load_kw=power,
    generation_kw=power,
    battery_kw=st.floats(-1e4, 1e4, allow_subnormal=False),
    duration_s=st.floats(1e-3, 1e6, allow_subnormal=False),
    import_limit_kw=limit,
    export_limit_kw=limit,
    over_limit=st.sampled_from(["refuse", "curtail"]),
)
@example(  # curtailed at the import limit: the admitted power, computed on the rounding
    # grid, came out an ulp above the request
    load_kw=4096.497929700464,
    generation_kw=1.157507825237417,
    battery_kw=1.157507825237417,
    duration_s=1.0,
    import_limit_kw=4096.497929700464,
    export_limit_kw=math.inf,
    over_limit="curtail",
)
@example(  # curtailed at an export limit of 0: the admitted discharge, rounded in kWh,
    # went 2**-49 kWh past the load
    load_kw=8702.0,
    generation_kw=2399.38,
    battery_kw=-6303.0,
    duration_s=1.25,
    import_limit_kw=math.inf,
    export_limit_kw=0.0,
    over_limit="curtail",
)
@example(  # a request far above the load: the admitted power is not on the request's grid
    load_kw=1.1,
    generation_kw=0.0,
    battery_kw=-1e4,
    duration_s=7.0,
    import_limit_kw=math.inf,
    export_limit_kw=0.3,
    over_limit="curtail",
)
@example(  # the same on the import side
    load_kw=1.1,
    generation_kw=0.7,
    battery_kw=1e4,
    duration_s=7.0,
    import_limit_kw=1.3,
    export_limit_kw=math.inf,
    over_limit="curtail",
)
@example(  # the export limit above the largest flow: the battery's and the surplus's
    # export together pass it
    load_kw=0.0,
    generation_kw=900.0,
    battery_kw=-900.0,
    duration_s=3600.0,
    import_limit_kw=math.inf,
    export_limit_kw=1500.0,
    over_limit="refuse",
)
def test_the_identities_are_exact_at_every_step(
    load_kw, generation_kw, battery_kw, duration_s, import_limit_kw, export_limit_kw, over_limit
):
    connection = GridConnection(import_limit_kw, export_limit_kw, over_limit)
    try:
        b = site_balance(load_kw, generation_kw, battery_kw, duration_s, connection)
    except PolicyError:
        return  # refused: nothing was balanced
    assert_identities(b)
    hours = duration_s / 3600.0
    # the limits in kWh as the balance has them (limit_kw x duration_s / 3600): never passed
    # by the export, nor by the import beyond the load's own (admitted in kW, rounded here)
    import_limit_kwh = import_limit_kw * duration_s / 3600.0
    export_limit_kwh = export_limit_kw * duration_s / 3600.0
    assert b.export_kwh <= export_limit_kwh
    assert b.grid_import_kwh <= max(import_limit_kwh, b.grid_to_load_kwh)
    grid_kwh = 2**-50 * max(b.load_kwh, b.generation_kwh, abs(battery_kw) * hours)  # Q
    assert b.grid_to_load_kwh <= import_limit_kw * hours * (1 + 1e-12) + grid_kwh
    assert abs(b.battery_kw) <= abs(battery_kw)
    if over_limit == "refuse":
        assert b.battery_kw == battery_kw
    # the battery's energy in the balance against the battery model's (Battery.advance's
    # |battery_kw| x duration_s / 3600): Q / 2, or up to 7 Q below it where a limit cut it
    terminal_kwh = abs(b.battery_kw) * duration_s / 3600.0
    q = 2**-50 * max(b.load_kwh, b.generation_kwh, terminal_kwh)  # Q is at most this
    in_balance = b.battery_charge_kwh if b.battery_kw > 0 else b.battery_discharge_kwh
    if b.battery_kw == 0:
        assert b.battery_charge_kwh == b.battery_discharge_kwh == 0.0
    else:
        assert b.battery_charge_kwh == 0.0 or b.battery_discharge_kwh == 0.0
        assert terminal_kwh - 7 * q <= in_balance <= terminal_kwh + q / 2
    # a cut leaves the battery's flow at the limit rounded down to the grid (within Q of it)
    below_the_limits = (
        b.battery_to_grid_kwh < export_limit_kwh - q and b.grid_import_kwh < import_limit_kwh - q
    )
    if below_the_limits:
        assert abs(in_balance - terminal_kwh) <= q / 2


def test_generation_meets_the_load_first_then_the_battery_then_the_grid():
    b = site_balance(100.0, 30.0, -50.0, 3600.0, GridConnection())
    assert (b.on_site_used_kwh, b.battery_to_load_kwh, b.grid_to_load_kwh) == (30.0, 50.0, 20.0)
    assert b.grid_import_kwh == 20.0 and b.export_kwh == 0.0
    # the brief's identity, with a battery neither charging from nor exporting to the grid
    assert b.load_kwh == b.on_site_used_kwh + b.battery_discharge_kwh + b.grid_import_kwh


def test_surplus_charges_the_battery_then_is_exported_and_credited():
    tariff = GridConnection(export_price_per_kwh=0.05)
    b = site_balance(100.0, 180.0, 30.0, 1800.0, tariff)  # half an hour
    assert b.on_site_used_kwh == 50.0 and b.generation_to_battery_kwh == 15.0
    assert b.generation_export_kwh == 25.0 and b.curtailed_kwh == 0.0
    assert b.export_credit == pytest.approx(25.0 * 0.05)
    assert site_balance(100.0, 180.0, 30.0, 1800.0, GridConnection()).export_credit == 0.0


def test_surplus_beyond_the_export_limit_is_curtailed():
    b = site_balance(100.0, 200.0, 30.0, 3600.0, GridConnection(export_limit_kw=40.0))
    assert (b.generation_to_battery_kwh, b.generation_export_kwh, b.curtailed_kwh) == (
        30.0,
        40.0,
        30.0,
    )
    none = site_balance(100.0, 200.0, 0.0, 3600.0, GridConnection(export_limit_kw=0.0))
    assert none.export_kwh == 0.0 and none.curtailed_kwh == 100.0
    # a limit above every flow still counts in full: the battery's 900 and the surplus's 600
    both = site_balance(0.0, 900.0, -900.0, 3600.0, GridConnection(export_limit_kw=1500.0))
    assert (both.battery_to_grid_kwh, both.generation_export_kwh, both.curtailed_kwh) == (
        900.0,
        600.0,
        300.0,
    )


def test_a_discharge_curtailed_at_the_export_limit_exports_nothing_past_it():
    # admitted in kW, the discharge rounded in kWh went 2**-49 kWh past the load
    curtail = GridConnection(export_limit_kw=0.0, over_limit="curtail")
    b = site_balance(8702.0, 2399.38, -6303.0, 1.25, curtail)
    assert b.export_kwh == 0.0 and b.battery_discharge_kwh == b.battery_to_load_kwh
    assert_identities(b)


def test_a_charge_beyond_the_surplus_comes_from_the_grid():
    b = site_balance(100.0, 120.0, 50.0, 3600.0, GridConnection())
    assert (b.generation_to_battery_kwh, b.grid_to_battery_kwh) == (20.0, 30.0)
    assert b.grid_import_kwh == 30.0


def test_a_discharge_beyond_the_load_goes_to_the_grid():
    b = site_balance(20.0, 0.0, -50.0, 3600.0, GridConnection())
    assert (b.battery_to_load_kwh, b.battery_to_grid_kwh, b.export_kwh) == (20.0, 30.0, 30.0)


def test_the_import_limit_refuses_or_curtails_grid_charging():
    refuse = GridConnection(import_limit_kw=60.0)
    with pytest.raises(PolicyError, match="battery power 50.0 kW exceeds the import limit by 10"):
        site_balance(100.0, 80.0, 50.0, 3600.0, refuse, where="site fr")
    curtail = GridConnection(import_limit_kw=60.0, over_limit="curtail")
    b = site_balance(100.0, 80.0, 50.0, 3600.0, curtail)  # 20 kW deficit + 50 kW charge > 60
    assert b.battery_kw == 40.0 and b.grid_import_kwh == 60.0
    assert_identities(b)


def test_the_export_limit_refuses_or_curtails_a_discharge_to_the_grid():
    with pytest.raises(PolicyError, match="exceeds the export limit by 20"):
        site_balance(10.0, 0.0, -40.0, 3600.0, GridConnection(export_limit_kw=10.0))
    curtail = GridConnection(export_limit_kw=10.0, over_limit="curtail")
    b = site_balance(10.0, 0.0, -40.0, 3600.0, curtail)
    assert b.battery_kw == -20.0 and b.export_kwh == 10.0


@pytest.mark.parametrize("over_limit", ["refuse", "curtail"])
def test_a_load_the_site_cannot_meet_is_refused_in_either_mode(over_limit):
    connection = GridConnection(import_limit_kw=50.0, over_limit=over_limit)
    with pytest.raises(PolicyError, match="site de: load 100.0 kW exceeds"):
        site_balance(100.0, 20.0, -10.0, 3600.0, connection, where="site de")


def test_the_battery_energy_is_the_battery_models_to_the_balances_grid():
    battery = Battery(capacity_kwh=500.0, power_kw=123.456)
    state = battery.new(0.3)
    for request_kw, duration_s in [(123.456, 1234.5), (-77.7, 999.9), (0.1, 7.3)]:
        applied = battery.applied_power_kw(state, request_kw)
        b = site_balance(60.0, 90.0, applied, duration_s, GridConnection())
        step = battery.advance(state, b.battery_kw, duration_s)
        grid_kwh = 2**-50 * max(
            b.load_kwh, b.generation_kwh, step.charged_kwh + step.discharged_kwh
        )
        assert abs(b.battery_charge_kwh - step.charged_kwh) <= grid_kwh / 2
        assert abs(b.battery_discharge_kwh - step.discharged_kwh) <= grid_kwh / 2
        state = step.end


@pytest.mark.parametrize(
    "settings_, message",
    [
        ({"import_limit_kw": -1.0}, "grid connection: import_limit_kw = -1.0 must be >= 0"),
        ({"over_limit": "shed"}, "over_limit = 'shed' is not 'refuse' or 'curtail'"),
    ],
)
def test_bad_connection_settings_are_one_line_errors(settings_, message):
    with pytest.raises(ScenarioError, match=message):
        GridConnection(**settings_)


def test_a_refusing_connection_judges_the_battery_own_flows_not_the_surplus():
    # 30 kW of generation, no load, export limit 0: the surplus over the battery's charge
    # is curtailed, so a charge below the surplus (or none) is within the limits
    no_export = GridConnection(import_limit_kw=5.0, export_limit_kw=0.0, over_limit="refuse")
    assert battery_excess_kw(0.0, 30.0, 10.0, no_export)[1] <= 0
    assert battery_excess_kw(0.0, 30.0, 0.0, no_export)[1] <= 0
    site_balance(0.0, 30.0, 10.0, 3600.0, no_export)  # accepted: 20 kWh curtailed
    # a discharge with no load goes to the grid: over the export limit by its power
    assert battery_excess_kw(0.0, 30.0, -4.0, no_export) == ("export", 4.0)
    # a charge beyond the surplus comes from the grid: the import room is what the load's
    # own 3 kW import leaves of the 5 kW limit
    assert battery_excess_kw(4.0, 1.0, 6.0, no_export) == ("import", 4.0)
    assert battery_excess_kw(4.0, 1.0, 2.0, no_export)[1] <= 0
