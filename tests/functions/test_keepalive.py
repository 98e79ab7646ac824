"""The keep-alive simulation: warm inside the window, cold after it, exact memory-hours,
concurrency, energy and carbon."""

import numpy as np
import pandas as pd
import pytest

from sim.functions import FixedKeepAlive, Generation, simulate_keep_alive
from sim.grid.signal import CarbonSignal

GEN = Generation(
    name="g",
    cold_start_s=2.0,
    cold_start_energy_j=100.0,
    exec_time_factor=1.0,
    exec_power_w=50.0,
    idle_power_w=1.0,
    idle_power_w_per_gb=0.5,
    cores=1,
    memory_gb=1.0,
    embodied_cpu_kg=0.0,
    embodied_dram_kg=0.0,
)
"""Operational carbon only (no embodied), for the hand cases of energy and carbon."""
GENS = {"g": GEN}
FLAT = CarbonSignal.constant(360.0, 100_000.0)  # 360 g/kWh = 1e-4 g/J


def _invocations(arrivals_s, exec_s=1.0, memory_mb=1024.0, function_id=0):
    n = len(arrivals_s)
    return pd.DataFrame(
        {
            "function_id": [function_id] * n,
            "arrival_s": list(arrivals_s),
            "exec_s": [exec_s] * n,
            "memory_mb": [memory_mb] * n,
        }
    )


def _run(arrivals_s, window_s, horizon_s=50_000.0, **kw):
    return simulate_keep_alive(
        _invocations(arrivals_s, **kw),
        FixedKeepAlive(window_s, "g"),
        GENS,
        FLAT,
        horizon_s,
    )


def test_a_warm_function_never_cold_starts():
    # each invocation arrives 100 s after the previous one ended, well inside 600 s
    arrivals = [0.0, 103.0, 204.0, 305.0, 406.0]
    res = _run(arrivals, 600.0)
    assert res.invocations["cold"].tolist() == [True, False, False, False, False]
    assert res.invocations["instance"].tolist() == [0] * 5
    assert res.summary["function_cold_starts"] == 1


def test_an_expired_function_always_cold_starts():
    # each arrives 700 s after the previous one ended: past the 600 s window
    arrivals = [0.0, 703.0, 1406.0, 2109.0]
    res = _run(arrivals, 600.0)
    assert res.invocations["cold"].all()
    assert res.invocations["instance"].tolist() == [0, 1, 2, 3]


def test_the_window_is_half_open():
    # the first execution ends at 3 s; warm on [3, 13), cold at 13
    assert not _run([0.0, 12.999], 10.0).invocations["cold"].iloc[1]
    assert _run([0.0, 13.0], 10.0).invocations["cold"].iloc[1]


def test_memory_hours_are_exact_by_hand():
    # 2 GB. Ends at 3 s; reused at 403 s (idle 400 s); ends at 404 s; never reused:
    # idle 600 s. 1000 s x 2 GB = 2000 GB s.
    res = _run([0.0, 403.0], 600.0, memory_mb=2048.0)
    assert res.invocations["cold"].tolist() == [True, False]
    assert res.summary["function_warm_gb_h"] == pytest.approx(2000.0 / 3600.0, rel=1e-12)


def test_idle_memory_is_cut_at_the_horizon():
    res = _run([0.0], 600.0, horizon_s=103.0, memory_mb=1024.0)
    assert res.summary["function_warm_gb_h"] == pytest.approx(100.0 / 3600.0, rel=1e-12)


def test_an_invocation_while_the_instance_is_busy_opens_a_new_one():
    # the first executes on [2, 12); the second arrives at 5
    res = _run([0.0, 5.0, 20.0], 600.0, exec_s=10.0)
    inv = res.invocations
    assert inv["cold"].tolist() == [True, True, False]
    assert inv["instance"].tolist()[:2] == [0, 1]
    # the third takes the instance idle most recently (the second, ended at 17)
    assert inv["instance"].iloc[2] == 1


def test_energy_and_carbon_by_hand():
    # cold 100 J + exec 50 W x 1 s, then idle 600 s at 1 + 0.5 x 1 GB = 1.5 W: 900 J
    res = _run([0.0], 600.0)
    energy_j = 100.0 + 50.0 + 900.0
    assert res.summary["function_energy_kwh"] == pytest.approx(energy_j / 3.6e6, rel=1e-12)
    assert res.summary["function_carbon_kg"] == pytest.approx(energy_j * 1e-4 / 1e3, rel=1e-12)
    assert res.invocations["energy_j"].iloc[0] == pytest.approx(150.0)


def test_carbon_follows_the_signal_step():
    # 0 g/kWh until 1000 s, 720 after: only the idle tail [1000, 1003) counts
    signal = CarbonSignal([0.0, 1000.0], [0.0, 720.0], 100_000.0)
    res = simulate_keep_alive(
        _invocations([397.0]), FixedKeepAlive(606.0, "g"), GENS, signal, 50_000.0
    )
    # exec ends at 400; idle to 1006 at 1.5 W: 6 s x 1.5 W x 2e-4 g/J
    assert res.summary["function_carbon_kg"] == pytest.approx(6 * 1.5 * 2e-4 / 1e3, rel=1e-12)


def test_functions_are_independent():
    a = _invocations([0.0, 100.0], function_id=0)
    b = _invocations([50.0], function_id=1)
    res = simulate_keep_alive(
        pd.concat([a, b], ignore_index=True), FixedKeepAlive(600.0, "g"), GENS, FLAT, 5000.0
    )
    assert res.invocations["cold"].tolist() == [True, False, True]


def test_a_signal_too_short_is_an_error_naming_the_times():
    short = CarbonSignal.constant(100.0, 10.0)
    with pytest.raises(ValueError, match="signal covers"):
        simulate_keep_alive(_invocations([0.0]), FixedKeepAlive(600.0, "g"), GENS, short, 50.0)


def test_a_missing_column_is_an_error_naming_it():
    with pytest.raises(ValueError, match="memory_mb"):
        simulate_keep_alive(
            _invocations([0.0]).drop(columns="memory_mb"),
            FixedKeepAlive(),
            GENS,
            FLAT,
            10.0,
        )


def test_an_unknown_generation_is_an_error_naming_it():
    with pytest.raises(ValueError, match="'nope'"):
        simulate_keep_alive(_invocations([0.0]), FixedKeepAlive(600.0, "nope"), GENS, FLAT, 10.0)


def test_no_invocations_gives_zero_totals():
    res = _run([], 600.0)
    assert res.summary["function_invocations"] == 0
    assert np.isclose(res.summary["function_carbon_kg"], 0.0)
