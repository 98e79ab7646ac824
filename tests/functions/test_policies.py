"""Keep-alive policies: the fixed window and the carbon-aware choice (hand cases)."""

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
from sim.grid.signal import CarbonSignal

FLAT = CarbonSignal.constant(360.0, 100_000.0)
GAPS = np.full(20, 300.0)
AT_0 = FunctionState(0.0, 0.5, 1.0, GAPS)
"""At 0 s, 0.5 GB, 1 s executions, 20 gaps of 300 s."""


def _gen(name="g", cold_j=1000.0, idle_w=1.0, exec_w=10.0, factor=1.0, embodied_kg=0.0):
    """A generation of 1 s cold starts, no idle power per GB; `embodied_kg` of CPU (and
    none of DRAM) over `LIFETIME_S`."""
    return Generation(name, 1.0, cold_j, factor, exec_w, idle_w, 0.0, 4, 1.0, embodied_kg, 0.0)


def _policy(*gens, windows=(0.0, 600.0)):
    return CarbonAwareKeepAlive(
        {g.name: g for g in gens}, FLAT, windows_s=windows, default_generation=gens[0].name
    )


def test_fixed_keeps_ten_minutes_by_default():
    assert FixedKeepAlive().choose_window_s(_gen(), AT_0) == 600.0


def test_longer_window_when_cold_starts_cost_more_than_idling():
    # next arrival 300 s away: idling costs 300 J, a cold start 1000 J
    g = _gen(cold_j=1000.0, idle_w=1.0)
    assert _policy(g).choose_window_s(g, AT_0) == 600.0


def test_no_keep_alive_when_idling_costs_more_than_a_cold_start():
    g = _gen(cold_j=100.0, idle_w=1.0)
    assert _policy(g).choose_window_s(g, AT_0) == 0.0


def test_the_window_just_covering_the_gaps_wins():
    g = _gen(cold_j=1000.0, idle_w=1.0)
    policy = _policy(g, windows=tuple(60.0 * m for m in range(31)))
    assert policy.choose_window_s(g, AT_0) == 360.0


def test_expected_carbon_by_hand():
    g = _gen(cold_j=1000.0, idle_w=1.0, exec_w=10.0)
    gaps = np.array([100.0, 900.0])
    # w = 600: idle 100 + 600 s at 1 W; next: warm 10 J, cold 1010 J -> mean 710 J
    expected_j = (100.0 + 600.0 + 10.0 + 1010.0) / 2
    got = _policy(g).expected_carbon_g(g, 600.0, FunctionState(0.0, 0.5, 1.0, gaps))
    assert got == pytest.approx(expected_j * 1e-4, rel=1e-12)


def test_the_generation_of_less_carbon_is_chosen():
    old = _gen("old", cold_j=1000.0, exec_w=10.0)
    new = _gen("new", cold_j=1000.0, exec_w=5.0)
    assert _policy(old, new).choose_generation(AT_0) == "new"


def test_without_history_the_defaults():
    g = _gen()
    first = FunctionState(0.0, 0.5, 1.0, np.empty(0))
    policy = CarbonAwareKeepAlive({"g": g}, FLAT, default_generation="g", default_window_s=42.0)
    assert policy.choose_window_s(g, first) == 42.0
    assert policy.choose_generation(first) == "g"


def test_the_signal_is_read_when_each_cost_falls():
    # 0 g/kWh until the switch, 720 after; gaps 300 s; a 40 J cold start at 300 s is
    # dirty. Keeping warm idles 300 s at 1 W, dirty only after the switch: switch at
    # 250 s, 50 J > 40 J: no keep-alive; at 270 s, 30 J < 40 J: keep warm. (Under a flat
    # signal, idling's 300 J always loses.)
    g = _gen(cold_j=40.0, idle_w=1.0)
    for switch_s, window_s in ((250.0, 0.0), (270.0, 600.0)):
        signal = CarbonSignal([0.0, switch_s], [0.0, 720.0], 100_000.0)
        policy = CarbonAwareKeepAlive(
            {"g": g}, signal, windows_s=(0.0, 600.0), default_generation="g"
        )
        assert policy.choose_window_s(g, AT_0) == window_s


def test_carbon_aware_runs_in_the_simulation_and_beats_no_keep_alive():
    g = _gen(cold_j=1000.0, idle_w=1.0)
    inv = pd.DataFrame(
        {"function_id": 0, "arrival_s": np.arange(30) * 300.0, "exec_s": 1.0, "memory_mb": 128.0}
    )
    aware = simulate_keep_alive(inv, _policy(g), {"g": g}, FLAT, 10_000.0)
    none = simulate_keep_alive(inv, FixedKeepAlive(0.0, "g"), {"g": g}, FLAT, 10_000.0)
    assert aware.summary["function_cold_starts"] < none.summary["function_cold_starts"]
    assert aware.summary["function_carbon_kg"] < none.summary["function_carbon_kg"]


def test_a_default_generation_not_offered_is_an_error_naming_it():
    with pytest.raises(ValueError, match="default_generation 'i3'"):
        CarbonAwareKeepAlive({"g": _gen()}, FLAT)


def _window_by_window(policy, gen, now_s, memory_gb, exec_s, gaps):
    """The search as first written (one candidate window at a time), the reference the
    vectorised search must equal bit for bit."""
    expected = []
    for w in policy.windows_s:
        idle_s = np.minimum(gaps, w)
        idle_g = (
            gen.keep_alive_power_w(memory_gb) * policy._integrals(now_s, now_s + idle_s) / 3.6e6
            + gen.keep_alive_embodied_g_per_s(memory_gb) * idle_s
        )
        next_j = gen.exec_power_w * gen.exec_s(exec_s) + np.where(
            gaps < w, 0.0, gen.cold_start_energy_j
        )
        busy_s = gen.exec_s(exec_s) + np.where(gaps < w, 0.0, gen.cold_start_s)
        next_g = (
            next_j * policy._values(now_s + gaps) / 3.6e6
            + gen.busy_embodied_g_per_s(memory_gb) * busy_s
        )
        expected.append(float(np.mean(idle_g + next_g)))
    return expected


class _WindowByWindow(CarbonAwareKeepAlive):
    """The carbon-aware policy searching with `_window_by_window`."""

    def _expected_g(self, gen, state, windows_s):
        return np.array(
            _window_by_window(self, gen, state.now_s, state.memory_gb, state.exec_s, state.gaps_s)
        )[np.searchsorted(self._windows, windows_s)]


def test_the_vectorised_search_equals_the_window_by_window_search_bit_for_bit():
    rng = np.random.default_rng(7)
    signal = CarbonSignal(np.arange(48) * 1800.0, rng.uniform(50.0, 600.0, 48), 86_400.0)
    policy = CarbonAwareKeepAlive(ECOLIFE_GENERATIONS, signal)
    for _ in range(40):
        gaps = rng.exponential(rng.uniform(10.0, 3000.0), int(rng.integers(1, 21)))
        now_s, memory_gb, exec_s = rng.uniform(0, 80_000), rng.uniform(0.1, 4), rng.uniform(0, 9)
        for gen in ECOLIFE_GENERATIONS.values():
            state = FunctionState(now_s, memory_gb, exec_s, gaps)
            reference = _window_by_window(policy, gen, now_s, memory_gb, exec_s, gaps)
            got = [policy.expected_carbon_g(gen, w, state) for w in policy.windows_s]
            assert got == reference
            best = policy.windows_s[int(np.argmin(reference))]
            assert policy.choose_window_s(gen, state) == best


def test_the_simulations_totals_are_those_of_the_window_by_window_search_counts_as_ints():
    """40 functions over 6 h (seed 5; those invoked under 2,000 times), 400 g/kWh, 100 from
    3 h, 250 from 4.5 h: the same totals with the window-by-window search (the numbers as
    it recorded them, operational and embodied)."""
    _, inv = generate_invocations(40, 6 * 3600.0, np.random.default_rng(5))
    inv = inv[inv.groupby("function_id")["arrival_s"].transform("size") < 2000]
    signal = CarbonSignal([0.0, 3 * 3600.0, 4.5 * 3600], [400.0, 100.0, 250.0], 3 * 86400.0)
    results = [
        simulate_keep_alive(
            inv, cls(ECOLIFE_GENERATIONS, signal), ECOLIFE_GENERATIONS, signal, 6 * 3600.0
        )
        for cls in (CarbonAwareKeepAlive, _WindowByWindow)
    ]
    summary = results[0].summary
    assert summary == results[1].summary
    assert {k: type(v) for k, v in summary.items() if "function_" in k} == {
        "function_invocations": int,
        "function_cold_starts": int,
        "function_warm_gb_h": float,
        "function_energy_kwh": float,
        "function_embodied_kg": float,
        "function_carbon_kg": float,
    }
    assert summary == {
        "function_invocations": 1919,
        "function_cold_starts": 347,
        "function_warm_gb_h": 3.645904364433494,
        "function_energy_kwh": 0.07034632602593464,
        "function_embodied_kg": 0.0016583692169731875,
        "function_carbon_kg": 0.02226644825016913,
    }
