"""Keep-alive policies: the fixed window and the carbon-aware choice (hand cases)."""

import numpy as np
import pandas as pd
import pytest

from sim.functions import CarbonAwareKeepAlive, FixedKeepAlive, Generation, simulate_keep_alive
from sim.grid.signal import CarbonSignal

FLAT = CarbonSignal.constant(360.0, 100_000.0)
GAPS = np.full(20, 300.0)


def _gen(name="g", cold_j=1000.0, idle_w=1.0, exec_w=10.0, factor=1.0):
    return Generation(name, 1.0, cold_j, factor, exec_w, idle_w, 0.0)


def _policy(*gens, windows=(0.0, 600.0)):
    return CarbonAwareKeepAlive(
        {g.name: g for g in gens}, FLAT, windows_s=windows, default_generation=gens[0].name
    )


def test_fixed_keeps_ten_minutes_by_default():
    assert FixedKeepAlive().choose_window_s(_gen(), 0.0, 1.0, 1.0, GAPS) == 600.0


def test_longer_window_when_cold_starts_cost_more_than_idling():
    # next arrival 300 s away: idling costs 300 J, a cold start 1000 J
    g = _gen(cold_j=1000.0, idle_w=1.0)
    assert _policy(g).choose_window_s(g, 0.0, 0.5, 1.0, GAPS) == 600.0


def test_no_keep_alive_when_idling_costs_more_than_a_cold_start():
    g = _gen(cold_j=100.0, idle_w=1.0)
    assert _policy(g).choose_window_s(g, 0.0, 0.5, 1.0, GAPS) == 0.0


def test_the_window_just_covering_the_gaps_wins():
    g = _gen(cold_j=1000.0, idle_w=1.0)
    policy = _policy(g, windows=tuple(60.0 * m for m in range(31)))
    assert policy.choose_window_s(g, 0.0, 0.5, 1.0, GAPS) == 360.0


def test_expected_carbon_by_hand():
    g = _gen(cold_j=1000.0, idle_w=1.0, exec_w=10.0)
    gaps = np.array([100.0, 900.0])
    # w = 600: idle 100 + 600 s at 1 W; next: warm 10 J, cold 1010 J -> mean 710 J
    expected_j = (100.0 + 600.0 + 10.0 + 1010.0) / 2
    got = _policy(g).expected_carbon_g(g, 600.0, 0.0, 0.5, 1.0, gaps)
    assert got == pytest.approx(expected_j * 1e-4, rel=1e-12)


def test_the_generation_of_less_carbon_is_chosen():
    old = _gen("old", cold_j=1000.0, exec_w=10.0)
    new = _gen("new", cold_j=1000.0, exec_w=5.0)
    assert _policy(old, new).choose_generation(0.0, 0.5, 1.0, GAPS) == "new"


def test_without_history_the_defaults():
    g = _gen()
    policy = CarbonAwareKeepAlive({"g": g}, FLAT, default_generation="g", default_window_s=42.0)
    assert policy.choose_window_s(g, 0.0, 0.5, 1.0, np.empty(0)) == 42.0
    assert policy.choose_generation(0.0, 0.5, 1.0, np.empty(0)) == "g"


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
        assert policy.choose_window_s(g, 0.0, 0.5, 1.0, GAPS) == window_s


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
