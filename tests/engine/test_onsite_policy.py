"""Policies and on-site energy: `state.onsite` shows the site's generation, battery and
connection now, `SetBattery` runs the battery at a held power (checked by the engine),
and `battery_carbon` charges in clean hours and discharges in dirty ones."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from policies import REGISTRY
from policies.battery import BatteryCarbon
from policies.chain import Chain
from policies.wait_awhile import WaitAwhile
from sim.api import Action, Policy, PolicyError, SetBattery, SystemState
from sim.config.loading import load_scenario
from sim.engine.build import simulate
from tests.conftest import generation_forecast_state as forecast
from tests.conftest import onsite_reading

SCENARIO = """
name = "onsite-policy"
seed = 3
start = 2019-06-01T00:00:00Z
duration_h = 48

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
pue = 1.25
carbon = { zone = "DE", year = 2019 }
gpus = [{ model = "A100-80GB", count = 8 }]
onsite = { pv_kwp = 10 }
battery = { capacity_kwh = 40, power_kw = 10, soc_min = 0.1, soc_max = 0.9 }
grid_connection = { import_limit_kw = 30, export_limit_kw = 5, mode = "refuse" }

[[sites]]
name = "b"
lat = 48.9
lon = 2.4
carbon = { zone = "FR", year = 2019 }
gpus = [{ model = "A100-80GB", count = 8 }]
onsite = { pv_kwp = 5 }

[[sites]]
name = "c"
lat = 48.9
lon = 2.4
carbon = { zone = "FR", year = 2019 }
gpus = [{ model = "A100-80GB", count = 8 }]

[workload.synthetic]
arrival_rate_per_h = 1
duration = { dist = "exponential", mean_h = 2 }
{forecast}
"""


def scenario(tmp_path, forecast: str = ""):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.replace("{forecast}", textwrap.dedent(forecast)))
    return load_scenario(path)


class Probe(Policy):
    """Runs nothing; reads site a's on-site state every hour, and applies `actions` at
    the first decision."""

    tick_s = 3600.0

    def __init__(self, actions: list[Action] = ()):  # type: ignore[assignment]
        self.actions = list(actions)
        self.readings: dict[float, object] = {}
        self.forecasts: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def decide(self, state: SystemState) -> list[Action]:
        self.readings[state.now_s] = state.onsite("a")
        self.forecasts[state.now_s] = state.onsite_forecast("a", 6 * 3600.0)
        out, self.actions = self.actions, []
        return out


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    probe = Probe()
    results = simulate(scenario(tmp_path_factory.mktemp("probe")), probe)
    return probe, results


def test_state_shows_generation_battery_and_limits_as_the_run_has_them(probed):
    probe, results = probed
    hours = results.onsite[results.onsite["site"] == "a"].reset_index(drop=True)
    checked = 0
    for k in range(1, 47):
        now = 3600.0 * k
        r = probe.readings[now]
        # a whole hour's generation kWh is its kW; the SoC at hour k's start is the
        # table's at hour k-1's end, bit for bit
        assert r.generation_kw == pytest.approx(hours.loc[k, "generation_kwh"], rel=1e-14)
        assert r.battery_soc == hours.loc[k - 1, "soc"]
        # the SoC is over the present capacity, which throughput fades below 40 kWh
        assert r.battery_soc * 40 * (1 - 1e-3) < r.battery_kwh <= r.battery_soc * 40
        checked += 1
    assert checked == 46
    r = probe.readings[3600.0]
    assert (r.battery_capacity_kwh, r.battery_power_kw) == (40, 10)
    assert (r.battery_soc_min, r.battery_soc_max, r.battery_setpoint_kw) == (0.1, 0.9, None)
    assert (r.import_limit_kw, r.export_limit_kw, r.over_limit) == (30, 5, "refuse")


def test_a_perfect_forecast_is_the_generation_of_the_next_hours(probed):
    probe, results = probed
    hours = results.onsite[results.onsite["site"] == "a"].reset_index(drop=True)
    times, kw = probe.forecasts[7200.0]
    assert list(times) == [7200.0 + 3600.0 * h for h in range(6)]
    assert list(kw) == list(hours.loc[2:7, "generation_kwh"])


def test_a_forecast_with_errors_differs_but_keeps_the_night_dark(tmp_path):
    probe = Probe()
    simulate(scenario(tmp_path, '[forecast]\nmodel = "gaussian"\nsigma_frac = 0.1'), probe)
    perfect = Probe()
    simulate(scenario(tmp_path), perfect)
    noisy = np.concatenate([kw for _, kw in probe.forecasts.values()])
    truth = np.concatenate([kw for _, kw in perfect.forecasts.values()])
    assert not np.array_equal(noisy, truth)
    assert ((truth == 0) == (noisy == 0)).all()
    assert (noisy <= 10.0).all()


def test_a_held_setpoint_charges_from_the_grid_at_that_power(tmp_path):
    probe = Probe([SetBattery("a", 4.0)])
    results = simulate(scenario(tmp_path), probe)
    assert min(probe.readings) < 3600.0  # set in the first hour
    a = results.onsite[results.onsite["site"] == "a"].reset_index(drop=True)
    # from 50 % of 40 kWh, 4 kW x 0.95 (the default charge efficiency) reaches 90 % in
    # over 4 h: the second hour (01:00 UTC, dark) takes 4 kWh at the terminals, from the
    # grid; and the battery then holds at 90 % (no discharge)
    assert a.loc[1, "generation_kwh"] == 0
    assert a.loc[1, "battery_charge_kwh"] == pytest.approx(4.0, rel=1e-12)
    assert a.loc[1, "grid_to_battery_kwh"] == pytest.approx(4.0, rel=1e-12)
    assert a.loc[1:, "battery_discharge_kwh"].sum() == 0
    assert a["soc"].max() <= 0.9 + 1e-12
    assert a["soc"].min() >= 0.1 - 1e-12


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (SetBattery("z", 1.0), "unknown site 'z'"),
        (SetBattery("c", 1.0), "site 'c' has no on-site energy"),
        (SetBattery("b", 1.0), "site 'b' has no battery"),
        (SetBattery("a", 12.0), "power_kw = 12.0 is over the battery's rating 10"),
        (SetBattery("a", -10.0), "takes the battery's export over the connection's limit by"),
    ],
)
def test_a_battery_action_the_site_cannot_take_is_a_one_line_policy_error(
    tmp_path, action, message
):
    with pytest.raises(PolicyError) as e:
        simulate(scenario(tmp_path), Probe([action]))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module")
def dispatched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dispatch")
    return simulate(scenario(tmp), BatteryCarbon()), simulate(scenario(tmp), "run_now")


def test_battery_carbon_charges_in_clean_hours_and_discharges_in_dirty_ones(dispatched):
    results, plain = dispatched
    a = results.onsite[results.onsite["site"] == "a"].reset_index(drop=True)
    # each hour's grid intensity: its import carbon over its import
    with np.errstate(invalid="ignore", divide="ignore"):
        hours_ci = (a["carbon_import_kg"] / a["grid_import_kwh"]).to_numpy()
    charging = a["grid_to_battery_kwh"] > 0
    discharging = a["battery_to_load_kwh"] > 0
    assert charging.any() and discharging.any()
    # grid charging happens in cleaner hours than discharging
    assert np.nanmean(hours_ci[charging]) < np.nanmean(hours_ci[discharging & ~charging])
    assert a["soc"].max() <= 0.9 + 1e-12 and a["soc"].min() >= 0.1 - 1e-12
    load = a["on_site_used_kwh"] + a["battery_to_load_kwh"] + a["grid_to_load_kwh"]
    assert np.allclose(a["load_kwh"], load, rtol=1e-12, atol=0)
    # an adjuster: the jobs ran as run_now ran them
    assert results.jobs["start_s"].equals(plain.jobs["start_s"])
    assert REGISTRY["battery_carbon"] is BatteryCarbon


def test_battery_carbon_refuses_bad_parameters():
    with pytest.raises(ValueError, match="high_percentile = 20"):
        BatteryCarbon(low_percentile=30, high_percentile=20)


def test_battery_carbon_chains_after_a_time_shifter(tmp_path):
    sc = scenario(tmp_path)
    chained = simulate(sc, Chain([WaitAwhile(), BatteryCarbon()]))
    alone = simulate(sc, WaitAwhile())
    # the jobs start as the time-shifter starts them; the battery follows its own rule
    assert chained.jobs["start_s"].equals(alone.jobs["start_s"])
    a = chained.onsite[chained.onsite["site"] == "a"]
    assert a["grid_to_battery_kwh"].sum() > 1.0
    # self-consumption charges from the grid only by the rounding of generation - load
    assert alone.onsite[alone.onsite["site"] == "a"]["grid_to_battery_kwh"].sum() < 1e-9


def test_battery_carbon_follows_self_consumption_when_the_forecast_surplus_fills_it():
    # 20 kWh between the bounds (0.1..0.9 of 25 kWh); the load now 2 kW; four hourly steps
    # of generation: surplus 0 + 3 + 6 + 0 = 9 kWh, x 0.9 = 8.1 kWh: it does not fill
    reading = onsite_reading(load_kw=2.0)
    policy = BatteryCarbon(lookahead_h=4)
    assert not policy.surplus_fills(forecast([1.0, 5.0, 8.0, 2.0]), reading)
    # twice the surplus (18 kWh x 0.9 = 16.2): still short of 20 kWh; 25 kWh x 0.9 fills it
    assert not policy.surplus_fills(forecast([2.0, 8.0, 14.0, 2.0]), reading)
    assert policy.surplus_fills(forecast([2.0, 12.0, 17.0, 2.0]), reading)


def test_battery_carbon_on_cost_charges_in_cheap_hours_and_discharges_in_dear_ones(tmp_path):
    # a time-of-use tariff at site a: 0.10 at night (0-6 h UTC), 0.40 in the evening
    # (17-22 h), 0.25 otherwise; the battery follows the price, not the carbon
    periods = [
        (0, 6, 0.10),
        (6, 17, 0.25),
        (17, 22, 0.40),
        (22, 24, 0.25),
    ]
    rows = ", ".join(
        f'{{ days = "all", start_hour = {a}, end_hour = {b}, rate_per_kwh = {r} }}'
        for a, b, r in periods
    )
    tariff = f'tariff = {{ kind = "tou", timezone = "UTC", periods = [{rows}] }}\n'
    path = tmp_path / "s.toml"
    text = SCENARIO.replace("{forecast}", "")
    path.write_text(text.replace("pue = 1.25\n", "pue = 1.25\n" + tariff, 1))
    results = simulate(load_scenario(path), BatteryCarbon(objective="cost"))
    a = results.onsite[results.onsite["site"] == "a"]
    hour = (a["start_s"] // 3600 % 24).astype(int)
    price = hour.map(lambda h: next(r for lo, hi, r in periods if lo <= h < hi))
    # grid charging (above the ulps self-consumption's rounding takes from the grid) only
    # at the night rate; the battery meets the load at the higher rates
    charging = a["grid_to_battery_kwh"] > 1e-9
    assert charging.any() and (price[charging] == 0.10).all()
    discharging = a["battery_to_load_kwh"] > 0
    assert (price[discharging & ~charging] > 0.10).any()
    plain = simulate(load_scenario(path), BatteryCarbon())
    assert results.summary["cost_energy"] < plain.summary["cost_energy"]
    with pytest.raises(ValueError, match="carbon_price_per_t applies to objective 'weighted'"):
        BatteryCarbon(objective="cost", carbon_price_per_t=50.0)
