"""`dcsim plot DIR`: every figure that fits a run folder or a sweep folder, as PNG and PDF."""

from __future__ import annotations

import pandas as pd
import pytest

import sim
from sim.figure_sets import savings_table
from tests.conftest import REPO, run_cli

QUICKSTART = REPO / "scenarios" / "quickstart.toml"
RUN_FIGURES = {"power_and_carbon", "cumulative_carbon", "wait_and_completion_cdfs", "energy_time"}


def figures_in(folder) -> dict[str, set[str]]:
    """Figure name -> the formats written, for files that are not empty."""
    found: dict[str, set[str]] = {}
    for path in folder.iterdir():
        if path.stat().st_size > 1000:
            found.setdefault(path.stem, set()).add(path.suffix)
    return found


def test_plot_of_a_run_folder_draws_its_figures_and_a_closeup_of_each_dr_event(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, out = run_cli(
        ["run", str(QUICKSTART), "--set", "duration_h=72", "--out", str(run_dir)], capsys
    )
    assert code == 0, out.err
    events = len(sim.Results.load(run_dir).dr_events)
    assert events >= 1  # the quickstart's first evening event falls inside three days
    code, out = run_cli(["plot", str(run_dir), "--out", str(tmp_path / "fig")], capsys)
    assert code == 0, out.err
    found = figures_in(tmp_path / "fig")
    expected = RUN_FIGURES | {f"dr_event_{i}" for i in range(events)}
    assert set(found) == expected
    assert all(formats == {".png", ".pdf"} for formats in found.values())
    assert f"{len(expected)} figures (PNG and PDF) written to" in out.out


def test_plot_of_a_sweep_folder_adds_the_pareto_front_and_the_savings_heatmap(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    sim.sweep(
        QUICKSTART,
        {"policy": ["run_now", "wait_awhile"], "sites[0].pue": [1.1, 1.4]},
        seeds=[0, 1],
        out=sweep_dir,
        overrides=["duration_h=24", "demand_response=[]"],
        workers=1,
    )
    code, out = run_cli(["plot", str(sweep_dir)], capsys)  # default: DIR/figures
    assert code == 0, out.err
    found = figures_in(sweep_dir / "figures")
    assert set(found) == RUN_FIGURES | {"pareto_front", "savings_heatmap"}


def test_plot_of_a_folder_without_results_is_a_clear_error(tmp_path, capsys):
    code, out = run_cli(["plot", str(tmp_path)], capsys)
    assert code == 2
    assert out.err.startswith(f"error: {tmp_path}: no results here")


@pytest.mark.parametrize("params", [["policy"], ["sites[0].pue", "policy"]])
def test_the_sweep_heatmap_shows_savings_against_run_now_when_the_grid_has_it(params):
    rows = []
    for seed in (0, 1):
        for pue in (1.1, 1.4):
            for policy, carbon in (("run_now", 100.0), ("wait_awhile", 90.0)):
                rows.append({"seed": seed, "sites[0].pue": pue, "policy": policy,
                             "status": "ok", "carbon_total_kg": carbon * pue})  # fmt: skip
    ok = pd.DataFrame(rows)
    ok.attrs["params"] = params
    result = savings_table(ok, params)
    if params == ["policy"]:
        assert result is None  # one grid key: nothing to cross
        return
    table, label = result
    assert label == "total carbon saved vs run_now (%)"
    assert table.loc["wait_awhile"].to_list() == pytest.approx([10.0, 10.0])
