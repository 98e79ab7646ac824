"""Cost-aware time- and space-shifting: `objective = "carbon" | "cost" | "weighted"`
(policies/kit/objective.py), on hand-built signals where carbon and price disagree."""

from __future__ import annotations

import numpy as np
import pytest

from policies.carbon_threshold import CarbonThreshold
from policies.gaia import LowestWindow
from policies.kit import Objective, objective_forecast
from policies.space_shifting import LowestCarbonSite
from policies.wait_awhile import WaitAwhile
from sim.api import Defer, Start
from sim.engine.build import simulate
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

H = 3600.0
# Carbon, g/kWh, hour by hour from Monday 2020-06-01 00:00 UTC: cleanest at 12:00.
CARBON = [300] * 12 + [20] + [300] * 35
# Price (TOU, UTC): cheapest at 01:00 on weekdays, where the grid is dirty.
PRICES = [
    {"days": "weekday", "start_hour": 0, "end_hour": 1, "rate_per_kwh": 0.30},
    {"days": "weekday", "start_hour": 1, "end_hour": 2, "rate_per_kwh": 0.02},
    {"days": "weekday", "start_hour": 2, "end_hour": 24, "rate_per_kwh": 0.30},
    {"days": "weekend", "start_hour": 0, "end_hour": 24, "rate_per_kwh": 0.30},
]
TARIFF = {"kind": "tou", "timezone": "UTC", "periods": PRICES}


def _site(tmp_path) -> dict:
    rows = [f"2020-06-{1 + h // 24:02d}T{h % 24:02d}:00:00Z,{v}" for h, v in enumerate(CARBON)]
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,carbon_intensity\n" + "\n".join(rows) + "\n")
    return site(name="a", carbon={"file": str(path)}, tariff=TARIFF)


def _harness(tmp_path, **overrides) -> PolicyHarness:
    job = {"job_id": "j", "submit_time": 0.0, "gpus": 1, "work_gpu_h": 1.0, "deadline": 24 * H}
    scenario = make_scenario(tmp_path, jobs=[job], sites=[_site(tmp_path)], **overrides)
    return PolicyHarness(scenario).advance(0.0)


@pytest.mark.parametrize("policy", [WaitAwhile, LowestWindow])
@pytest.mark.parametrize(
    ("params", "start_h"),
    [
        ({}, 12),  # carbon (the default): the 20 g/kWh hour
        ({"objective": "cost"}, 1),  # the 0.02 per kWh hour
        ({"objective": "weighted", "carbon_price_per_t": 1e5}, 12),  # 0.1 per g: carbon wins
        ({"objective": "weighted", "carbon_price_per_t": 0.0}, 1),  # carbon free: price
    ],
)
def test_a_time_shifter_minimises_the_chosen_objective(tmp_path, policy, params, start_h):
    h = _harness(tmp_path)
    assert policy(**params).decide(h.state) == [Defer(h.job("j"), start_h * H)]


def test_weighted_is_price_plus_carbon_at_the_rate_on_both_signals_breakpoints(tmp_path):
    state = _harness(tmp_path).state
    times, values = objective_forecast(state, "a", 14 * H, Objective("weighted", 1000.0))
    # 1000 per tonne = 0.001 per g: 300 g/kWh adds 0.3, 20 g/kWh adds 0.02 per kWh.
    assert times.tolist() == [h * H for h in range(14)]
    expected = [0.6, 0.32] + [0.6] * 10 + [0.32, 0.6]
    assert values == pytest.approx(expected, rel=1e-12)


def test_carbon_threshold_under_cost_starts_in_the_cheap_hour(tmp_path):
    h = _harness(tmp_path)
    policy = CarbonThreshold(percentile=4.0, objective="cost")  # 1 h of 24: 4.2 %
    assert policy.decide(h.state) == [Defer(h.job("j"), 1 * H)]  # next price step
    with pytest.raises(ValueError, match="needs percentile"):
        CarbonThreshold(threshold_g_per_kwh=100.0, objective="cost")


def test_lowest_carbon_site_under_cost_picks_the_cheaper_dirtier_grid(tmp_path):
    flat = [{"days": "all", "start_hour": 0, "end_hour": 24, "rate_per_kwh": 0.30}]
    cheap = [{"days": "all", "start_hour": 0, "end_hour": 24, "rate_per_kwh": 0.10}]
    sites = [
        site(name="clean", carbon={"constant_g_per_kwh": 50.0}, tariff=TARIFF | {"periods": flat}),
        site(name="dirty", carbon={"constant_g_per_kwh": 600}, tariff=TARIFF | {"periods": cheap}),
    ]
    job = {"job_id": "j", "submit_time": 0.0, "gpus": 1, "work_gpu_h": 1.0}
    h = PolicyHarness(make_scenario(tmp_path, jobs=[job], sites=sites)).advance(0.0)
    to = {a.site for a in LowestCarbonSite().decide(h.state) if isinstance(a, Start)}
    assert to == {"clean"}
    cost = LowestCarbonSite(objective="cost").decide(h.state)
    assert [a.site for a in cost if isinstance(a, Start)] == ["dirty"]
    # 0.001 per g: clean 0.30 + 0.05, dirty 0.10 + 0.60 per kWh.
    weighted = LowestCarbonSite(objective="weighted", carbon_price_per_t=1000.0).decide(h.state)
    assert [a.site for a in weighted if isinstance(a, Start)] == ["clean"]


def test_the_objective_and_its_rate_are_recorded_in_meta(tmp_path):
    job = {"job_id": "j", "submit_time": 0.0, "gpus": 1, "work_gpu_h": 1.0, "deadline": 24 * H}
    policy = {"name": "wait_awhile", "params": {"objective": "weighted", "carbon_price_per_t": 80}}
    results = simulate(make_scenario(tmp_path, jobs=[job], sites=[_site(tmp_path)], policy=policy))
    assert results.meta["policy_objective"] == {
        "WaitAwhile": {"objective": "weighted", "carbon_price_per_t": 80.0, "unit": "currency/kWh"}
    }
    assert simulate(make_scenario(), "run_now").meta["policy_objective"] is None


def test_bad_objectives_are_refused():
    with pytest.raises(ValueError, match="objective must be one of"):
        Objective("money")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="applies to objective 'weighted'"):
        Objective("carbon", 50.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        Objective("weighted", float(np.nan))
