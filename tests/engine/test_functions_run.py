"""Serverless functions in a run (`[functions]`, docs/functions.md "In a run"): the run's
functions are the keep-alive simulation of the generator's invocations on the site's
PUE x carbon signal, reported apart from the GPU fleet; bad keys are refused in one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim.config.loading import load_scenario
from sim.engine.build import simulate
from sim.functions import (
    ECOLIFE_GENERATIONS,
    FixedKeepAlive,
    generate_invocations,
    simulate_keep_alive,
)
from sim.grid import CarbonSignal
from sim.util.streams import random_streams
from tests.conftest import REPO, SMALL_SCENARIO_TOML, make_scenario, one_line_cli_error, run_cli

FUNCTION_KEYS = (
    "function_invocations",
    "function_cold_starts",
    "function_warm_gb_h",
    "function_energy_kwh",
    "function_embodied_kg",
    "function_carbon_kg",
)


def test_a_run_gives_the_keep_alive_simulation_of_its_generated_invocations():
    """30 functions over 6 h on site "a" (300 g/kWh, PUE 1.5): the summary and the table are
    `simulate_keep_alive` of the generator's invocations from the run's `functions`
    stream, without those above 5,000 a day, charged at 450 g per IT kWh."""
    config = {"site": "a", "functions": 30, "max_rate_per_day": 5000}
    scenario = make_scenario(duration_h=6.0, functions=config)
    results = simulate(scenario)

    _, invocations = generate_invocations(
        30, 6 * 3600.0, random_streams(scenario.seed)["functions"], max_rate_per_day=5000
    )
    signal = CarbonSignal.constant(300.0 * 1.5, 7 * 3600.0)
    expected = simulate_keep_alive(
        invocations, FixedKeepAlive(600.0, "i3"), ECOLIFE_GENERATIONS, signal, 6 * 3600.0
    )
    assert 0 < expected.summary["function_cold_starts"] < len(invocations)
    assert {k: results.summary[k] for k in FUNCTION_KEYS} == expected.summary
    pd.testing.assert_frame_equal(results.functions, expected.invocations, check_exact=True)


def test_function_carbon_is_reported_apart_from_the_fleets():
    without = simulate(make_scenario(duration_h=6.0))
    with_functions = simulate(
        make_scenario(duration_h=6.0, functions={"site": "a", "functions": 10})
    )
    assert with_functions.summary["function_carbon_kg"] > 0
    assert (
        0
        < with_functions.summary["function_embodied_kg"]
        < with_functions.summary["function_carbon_kg"]
    )
    for key in (
        "energy_facility_kwh",
        "carbon_operational_kg",
        "carbon_embodied_kg",
        "carbon_total_kg",
    ):
        assert with_functions.summary[key] == without.summary[key], key
    assert with_functions.jobs.equals(without.jobs)


def test_a_run_without_functions_has_null_function_keys_and_no_table():
    results = simulate(make_scenario(duration_h=6.0))
    assert {k: results.summary[k] for k in FUNCTION_KEYS} == dict.fromkeys(FUNCTION_KEYS)
    assert results.functions is None


def test_the_carbon_aware_policy_trades_cold_starts_for_warm_memory_and_carbon(tmp_path):
    """The example scenario, shortened: the carbon-aware choice keeps less memory warm and
    emits less carbon than the fixed 10 minutes on i3, for more cold starts."""
    file = REPO / "scenarios" / "serverless_keepalive.toml"
    short = ["duration_h=6", "functions.functions=60"]
    fixed = simulate(load_scenario(file, short)).summary
    aware = simulate(
        load_scenario(file, [*short, 'functions.keep_alive={name="carbon_aware"}'])
    ).summary
    assert aware["function_invocations"] == fixed["function_invocations"] > 0
    assert aware["function_cold_starts"] > fixed["function_cold_starts"]
    assert aware["function_warm_gb_h"] < fixed["function_warm_gb_h"]
    assert aware["function_carbon_kg"] < fixed["function_carbon_kg"]


def test_a_functions_only_scenario_needs_no_jobs_and_writes_its_counts_as_integers(
    tmp_path, capsys
):
    no_jobs = SMALL_SCENARIO_TOML.split("[workload.synthetic]")[0]
    path = tmp_path / "fns.toml"
    path.write_text(no_jobs + '[functions]\nsite = "a"\nfunctions = 5\nmax_rate_per_day = 500\n')
    code, out = run_cli(["run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 0, out.err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    counts = {k: summary[k] for k in ("function_invocations", "function_cold_starts")}
    assert all(type(v) is int and v > 0 for v in counts.values()), counts
    table = pd.read_parquet(tmp_path / "run" / "functions.parquet")
    assert table["instance"].dtype == "int64" and table["cold"].dtype == bool
    assert table["cold"].sum() == counts["function_cold_starts"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[functions]\nsite = "nowhere"\nfunctions = 5',
            "functions.site: unknown site 'nowhere' (sites: ['a'])",
        ),
        ('[functions]\nsite = "a"', "functions.functions: required key is missing"),
        ('[functions]\nsite = "a"\nfunctions = 0', "functions.functions:"),
        (
            '[functions]\nsite = "a"\nfunctions = 5\nkeep_alive = { name = "fixed", window = 60 }',
            "functions.keep_alive.window: unknown key",
        ),
        (
            '[functions]\nsite = "a"\nfunctions = 5\nkeep_alive = { name = "forever" }',
            "functions.keep_alive.name:",
        ),
        (
            '[functions]\nsite = "a"\nfunctions = 5\nkeep_alive = { max_window_s = 60 }',
            'max_window_s is only meaningful with name = "carbon_aware", not "fixed"',
        ),
        (
            '[functions]\nsite = "a"\nfunctions = 5\n'
            'keep_alive = { name = "carbon_aware", window_step_s = 0.01 }',
            "candidate windows",
        ),
        (
            '[functions]\nsite = "a"\nfunctions = 5\n'
            'keep_alive = { name = "fixed", generation = "z80" }',
            "functions.keep_alive.generation: unknown generation 'z80'; known: i3, m5zn",
        ),
        (
            '[functions]\nsite = "a"\nfunctions = 5\n'
            'keep_alive = { name = "carbon_aware", generation = "z80" }',
            "functions.keep_alive.generation: unknown generation 'z80'",
        ),
    ],
)
def test_bad_functions_keys_are_refused_in_one_line_by_run_and_validate(
    tmp_path, capsys, extra, message
):
    line = one_line_cli_error(tmp_path, capsys, {}, extra)
    assert message in line
    path = tmp_path / "validate.toml"
    path.write_text(SMALL_SCENARIO_TOML + "\n" + extra + "\n")
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 2
    (refused,) = out.err.strip().splitlines()
    assert message in refused
