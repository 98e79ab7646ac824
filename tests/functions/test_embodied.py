"""Embodied carbon as EcoLife's artifact counts it (github.com/LukeJYK/SC24_eco-life,
`server_info.json` and `utils.py` at 68f5cb7): executions and cold starts hold the whole
CPU's embodied carbon and their memory's share of the DRAM's, idle warm instances one
core's share of the CPU's and their memory's share of the DRAM's, over 4 x 12 x 30 days;
the total is operational + embodied, and the carbon-aware policy weighs both."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sim.functions import (
    ECOLIFE_GENERATIONS,
    CarbonAwareKeepAlive,
    FixedKeepAlive,
    FunctionState,
    Generation,
    generate_invocations,
    simulate_keep_alive,
)
from sim.functions.generations import ECOLIFE_LIFETIME_S
from sim.grid.signal import CarbonSignal

LT_S = 4 * 12 * 30 * 24 * 3600  # 124,416,000 s, the artifact's lifetime
ZERO = CarbonSignal.constant(0.0, 100_000.0)  # no operational carbon: carbon = embodied


def _one_invocation(generation: str, window_s: float, signal: CarbonSignal = ZERO):
    """One invocation at 0 s of 2 s (reference) holding 1 GB, kept warm `window_s`."""
    inv = pd.DataFrame(
        {"function_id": [0], "arrival_s": [0.0], "exec_s": [2.0], "memory_mb": [1024.0]}
    )
    return simulate_keep_alive(
        inv, FixedKeepAlive(window_s, generation), ECOLIFE_GENERATIONS, signal, 50_000.0
    )


def test_the_lifetime_is_the_artifacts_four_years_of_360_days():
    assert ECOLIFE_LIFETIME_S == LT_S == 124_416_000
    assert {g.lifetime_s for g in ECOLIFE_GENERATIONS.values()} == {LT_S}


@pytest.mark.parametrize(
    ("name", "busy_s", "busy_kg", "idle_kg"),
    [
        # i3: cold start 3.4934 s + 2 s x 1.0; q = 1 GB / 512 GB.
        # busy: 34.7 kg CPU + 1584 kg / 512 = 37.79375 kg; a warm minute: 34.7 kg / 36
        # cores + 1584 kg / 512
        ("i3", 3.4934 + 2.0, 34.7 + 1584 / 512, 34.7 / 36 + 1584 / 512),
        # m5zn: cold start 3.1432 s + 2 s x 0.7948; q = 1 GB / 192 GB.
        # busy: 36 kg + 744 kg / 192 = 39.875 kg; a warm minute: 36 kg / 24 + 744 kg / 192
        ("m5zn", 3.1432 + 2.0 * 0.7948, 36 + 744 / 192, 36 / 24 + 744 / 192),
    ],
)
def test_a_cold_invocation_and_a_warm_minute_by_hand(name, busy_s, busy_kg, idle_kg):
    res = _one_invocation(name, 60.0)
    cold_g = busy_s / LT_S * busy_kg * 1000  # e.g. i3: 5.4934 s: 1.6687e-3 g
    minute_g = 60 / LT_S * idle_kg * 1000  # e.g. i3: 60 s: 1.9568e-3 g
    assert res.invocations["embodied_g"].iloc[0] == pytest.approx(cold_g, rel=1e-12)
    assert res.invocations["carbon_g"].iloc[0] == pytest.approx(cold_g, rel=1e-12)
    assert res.summary["function_embodied_kg"] == pytest.approx(
        (cold_g + minute_g) / 1000, rel=1e-12
    )
    assert res.summary["function_carbon_kg"] == res.summary["function_embodied_kg"]


def test_a_warm_invocation_holds_its_execution_only():
    # i3, 1 GB, 2 s: cold at 0 (ends 5.4934 s), warm at 100 s (2 s, no cold start)
    inv = pd.DataFrame(
        {"function_id": 0, "arrival_s": [0.0, 100.0], "exec_s": 2.0, "memory_mb": 1024.0}
    )
    res = simulate_keep_alive(inv, FixedKeepAlive(600.0, "i3"), ECOLIFE_GENERATIONS, ZERO, 1e4)
    assert res.invocations["cold"].tolist() == [True, False]
    warm_g = 2.0 / LT_S * (34.7 + 1584 / 512) * 1000
    assert res.invocations["embodied_g"].iloc[1] == pytest.approx(warm_g, rel=1e-12)


def test_the_total_is_operational_plus_embodied():
    _, inv = generate_invocations(30, 3 * 3600.0, np.random.default_rng(2))
    signal = CarbonSignal([0.0, 3600.0], [300.0, 80.0], 86_400.0)
    no_embodied = {
        name: dataclasses.replace(g, embodied_cpu_kg=0.0, embodied_dram_kg=0.0)
        for name, g in ECOLIFE_GENERATIONS.items()
    }
    policy = FixedKeepAlive(600.0, "m5zn")
    both = simulate_keep_alive(inv, policy, ECOLIFE_GENERATIONS, signal, 3 * 3600.0)
    operational = simulate_keep_alive(inv, policy, no_embodied, signal, 3 * 3600.0)
    assert operational.summary["function_embodied_kg"] == 0.0
    assert both.summary["function_embodied_kg"] > 0.0
    assert both.summary["function_carbon_kg"] == pytest.approx(
        operational.summary["function_carbon_kg"] + both.summary["function_embodied_kg"],
        rel=1e-12,
    )
    rows = both.invocations
    np.testing.assert_allclose(
        rows["carbon_g"] - rows["embodied_g"], operational.invocations["carbon_g"], rtol=1e-12
    )


def _gen(name: str, exec_w: float, embodied_cpu_kg: float) -> Generation:
    """1 s cold starts of 1000 J, 1 W idle; 4 cores, 1 GB, no DRAM embodied."""
    return Generation(name, 1.0, 1000.0, 1.0, exec_w, 1.0, 0.0, 4, 1.0, embodied_cpu_kg, 0.0)


def test_embodied_carbon_can_flip_the_generation():
    # Under 360 g/kWh (1e-4 g/J) with 300 s gaps and 1 s executions, "new" saves 5 J = 5e-4 g
    # an execution. With 10 kg of CPU embodied it idles 300 s a gap at 10,000 g / 4 cores /
    # 124,416,000 s = 2.0e-5 g/s: 6.0e-3 g, more than it saves: the old one wins.
    flat = CarbonSignal.constant(360.0, 100_000.0)
    state = FunctionState(0.0, 0.5, 1.0, np.full(20, 300.0))
    for new_kg, chosen in ((0.0, "new"), (10.0, "old")):
        gens = {"old": _gen("old", 10.0, 0.0), "new": _gen("new", 5.0, new_kg)}
        policy = CarbonAwareKeepAlive(gens, flat, default_generation="old")
        assert policy.choose_generation(state) == chosen


def test_on_a_carbon_free_grid_the_policy_weighs_embodied_only():
    # Zero intensity: the expected carbon of a 10-minute window on i3 with 300 s gaps is
    # 300 s idle at (34.7 / 36 + 0.5 x 1584 / 512) kg and a warm 1 s execution at
    # (34.7 + 0.5 x 1584 / 512) kg, over the lifetime, g.
    policy = CarbonAwareKeepAlive(ECOLIFE_GENERATIONS, ZERO)
    state = FunctionState(0.0, 0.5, 1.0, np.full(20, 300.0))
    q = 0.5 / 512
    expected_g = (300 * (34.7 / 36 + q * 1584) + 1.0 * (34.7 + q * 1584)) * 1000 / LT_S
    got = policy.expected_carbon_g(ECOLIFE_GENERATIONS["i3"], 600.0, state)
    assert got == pytest.approx(expected_g, rel=1e-12)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("cores", 0, "cores must be > 0, got 0"),
        ("memory_gb", -1.0, "memory_gb must be >= 0, got -1.0"),
        ("embodied_cpu_kg", float("nan"), "embodied_cpu_kg must be >= 0, got nan"),
        ("embodied_dram_kg", -2.0, "embodied_dram_kg must be >= 0, got -2.0"),
        ("lifetime_s", 0.0, "lifetime_s must be > 0, got 0.0"),
    ],
)
def test_bad_embodied_fields_are_refused_naming_them(key, value, message):
    with pytest.raises(ValueError, match=f"Generation 'i3': {message}"):
        dataclasses.replace(ECOLIFE_GENERATIONS["i3"], **{key: value})
