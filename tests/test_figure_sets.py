"""`dcsim plot DIR`: every figure that fits a run folder or a sweep folder, as PNG and PDF;
a folder that is not a complete run or sweep, or an output that is not a folder, is a
one-line error naming the folder and the file."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

import sim
from sim.results import FILES
from sim.study import figure_sets, plots
from sim.study.figure_sets import savings_table
from tests.conftest import REPO, make_scenario, run_cli

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


def test_plot_of_a_sweep_folder_adds_the_pareto_front_and_the_savings_heatmap(
    tmp_path, capsys, monkeypatch
):
    sweep_dir = tmp_path / "sweep"
    sim.sweep(
        QUICKSTART,
        {"policy": ["run_now", "wait_awhile"], "sites[0].pue": [1.1, 1.4]},
        seeds=[0, 1],
        out=sweep_dir,
        overrides=["duration_h=24", "demand_response=[]"],
        workers=1,
    )
    drawn: dict[str, dict] = {}
    for kind in ("power_and_carbon", "pareto_front", "savings_heatmap"):
        monkeypatch.setattr(figure_sets.plots, kind, spy(drawn, kind, getattr(plots, kind)))
    code, out = run_cli(["plot", str(sweep_dir)], capsys)  # default: DIR/figures
    assert code == 0, out.err
    found = figures_in(sweep_dir / "figures")
    assert set(found) == RUN_FIGURES | {"pareto_front", "savings_heatmap"}
    # a figure of one of the sweep's runs says which; the means' intervals say over what
    assert drawn["power_and_carbon"]["run_label"] == "run_now, sites[0].pue=1.1, seed 0"
    assert drawn["pareto_front"]["interval"] == (
        "95% confidence interval of the mean over seeds 0, 1"
    )
    # the savings against run_now, per pue, with their paired intervals over the two seeds
    heatmap = drawn["savings_heatmap"]
    assert heatmap["interval"] == "95% paired bootstrap interval over 2 seeds (BCa)"
    assert list(heatmap["low"].index) == list(heatmap["high"].index) == ["wait_awhile"]
    assert (heatmap["low"] < heatmap["high"]).all(axis=None)


def spy(drawn: dict, kind: str, draw):
    """`draw`, recording the keyword arguments of its last call in `drawn[kind]`."""

    def recorded(*args, **kwargs):
        drawn[kind] = kwargs
        return draw(*args, **kwargs)

    return recorded


def test_a_sweep_whose_runs_completed_no_job_still_plots_and_says_why_a_panel_is_empty(
    tmp_path, capsys, monkeypatch
):
    sweep_dir = tmp_path / "sweep"
    summary = sim.sweep(QUICKSTART, {"policy": ["run_now", "wait_awhile"]}, out=sweep_dir,
                        overrides=["duration_h=0.02", "demand_response=[]"], workers=1)  # fmt: skip
    assert list(summary["status"]) == ["ok", "ok"]
    assert summary["wait_mean_h"].isna().all()  # a run that completed no job has no mean wait
    drawn: dict[str, object] = {}
    for kind in ("pareto_front", "wait_and_completion_cdfs"):
        monkeypatch.setattr(figure_sets.plots, kind, keep(drawn, kind, getattr(plots, kind)))
    code, out = run_cli(["plot", str(sweep_dir)], capsys)
    assert code == 0, out.err
    assert "Traceback" not in out.err
    assert set(figures_in(sweep_dir / "figures")) == RUN_FIGURES | {"pareto_front"}
    notes = {
        kind: [t.get_text() for ax in fig.axes for t in ax.texts] for kind, fig in drawn.items()
    }
    assert notes == {
        "pareto_front": [
            "no run has both a mean wait and a total carbon\n"
            "(a run that completed no job has no mean wait)"
        ],
        "wait_and_completion_cdfs": ["no job started", "no job completed"],
    }


def test_a_sweep_in_which_no_run_finished_is_a_one_line_error(small_sweep, tmp_path, capsys):
    sweep_dir, _ = small_sweep
    failed = tmp_path / "failed"
    shutil.copytree(sweep_dir, failed)
    table = pd.read_parquet(failed / "summary.parquet")
    table["status"] = "failed"
    table.to_parquet(failed / "summary.parquet", index=False)
    assert plot_error([str(failed)], capsys) == f"error: {failed}: no run of this sweep finished"


def keep(drawn: dict, kind: str, draw):
    """`draw`, keeping the figure of its last call in `drawn[kind]`."""

    def kept(*args, **kwargs):
        drawn[kind] = draw(*args, **kwargs)
        return drawn[kind]

    return kept


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
    table, options = result
    assert options["value_label"] == "total carbon saved vs run_now (%)"
    assert table.loc["wait_awhile"].to_list() == pytest.approx([10.0, 10.0])
    # every seed saves exactly 10%: BCa is undefined, the percentile interval has no width
    for bound in ("low", "high"):
        assert options[bound].loc["wait_awhile"].to_list() == pytest.approx([10.0, 10.0])
    assert options["interval"] == (
        "95% paired bootstrap interval over 2 seeds (percentile: BCa is undefined)"
    )


# --- folders that are not complete results ----------------------------------------------------


@pytest.fixture
def run_folder(tmp_path):
    """The result files of a small run (a day, one site, four GPUs)."""
    return sim.simulate(make_scenario()).save(tmp_path / "run")


def plot_error(args: list[str], capsys) -> str:
    """`dcsim plot ARGS` exits 2 with one line on stderr; that line."""
    code, out = run_cli(["plot", *args], capsys)
    assert code == 2, out
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    return lines[0]


@pytest.mark.parametrize("missing", ["jobs.parquet", "power.parquet", "meta.json", "scenario.toml"])
def test_a_run_folder_with_a_result_file_missing_names_the_folder_and_the_file(
    missing, run_folder, capsys
):
    (run_folder / missing).unlink()
    assert plot_error([str(run_folder)], capsys) == (
        f"error: {run_folder}: not a complete run folder: {missing} is missing"
    )
    assert not (run_folder / "figures").exists()


@pytest.mark.parametrize("damaged", ["summary.json", "jobs.parquet", "dr_events.parquet"])
@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff"])
def test_a_run_folder_with_an_unreadable_result_file_names_the_file(
    damaged, content, run_folder, capsys
):
    (run_folder / damaged).write_bytes(content)
    line = plot_error([str(run_folder)], capsys)
    assert line.startswith(f"error: {run_folder / damaged}: unreadable run result file (")


def test_a_truncated_parquet_file_is_unreadable(run_folder, capsys):
    path = run_folder / "jobs.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    line = plot_error([str(run_folder)], capsys)
    assert line.startswith(f"error: {path}: unreadable run result file (")


def test_a_folder_that_does_not_exist_or_is_a_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert plot_error([str(missing)], capsys) == (
        f"error: {missing}: does not exist (expected the folder of a run or a sweep)"
    )
    file = tmp_path / "summary.json"
    file.write_text("{}")
    assert plot_error([str(file)], capsys) == (
        f"error: {file}: is not a folder (expected the folder of a run or a sweep)"
    )


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    """A sweep folder of one six-hour run."""
    out = tmp_path_factory.mktemp("sweep")
    summary = sim.sweep(QUICKSTART, {"policy": ["run_now"]}, seeds=[0], out=out,
                        overrides=["duration_h=6", "demand_response=[]"], workers=1)  # fmt: skip
    assert list(summary["status"]) == ["ok"]
    return out, summary["run_id"].iloc[0]


def test_a_sweep_folder_without_its_summary_names_the_missing_file(small_sweep, tmp_path, capsys):
    sweep_dir, _ = small_sweep
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "sweep.json").write_bytes((sweep_dir / "sweep.json").read_bytes())
    assert plot_error([str(partial)], capsys) == (
        f"error: {partial}: not a complete sweep folder: summary.parquet is missing"
    )


def test_a_sweep_whose_run_folder_is_damaged_names_the_run_and_the_file(
    small_sweep, tmp_path, capsys
):
    sweep_dir, run_id = small_sweep
    copy = tmp_path / "copy"
    shutil.copytree(sweep_dir, copy)
    (copy / "runs" / run_id / "events.parquet").unlink()
    assert plot_error([str(copy), "--out", str(tmp_path / "fig")], capsys) == (
        f"error: {copy / 'runs' / run_id}: not a complete run folder: events.parquet is missing"
    )


@pytest.mark.parametrize("name", ["figures.png", "figures.SVG", "pareto.pdf"])
def test_an_out_folder_named_like_a_figure_file_is_refused_before_anything_is_read(
    name, tmp_path, capsys
):
    out = tmp_path / name
    assert plot_error([str(tmp_path / "not-read"), "--out", str(out)], capsys) == (
        f"error: --out {out}: names a folder for the figures, each written as .png and "
        f".pdf, not a {out.suffix} file (give a folder name without a figure suffix)"
    )
    assert not out.exists()


def test_every_file_a_run_writes_is_checked():
    assert set(figure_sets.RUN_FILES) == set(FILES)
