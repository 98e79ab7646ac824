"""Figures: each function draws a non-empty PNG and PDF whose axes all carry labels, from
exact numbers, refuses input it cannot draw with a clear message, and does not mislead:
one scale where panels are compared, intervals where numbers are means, tick labels that
can be read, and what a figure shows (a model, a run) in its title."""

from __future__ import annotations

import dataclasses
import itertools
import re
import warnings
from datetime import timedelta

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

import sim
from sim.errors import ScenarioError
from sim.results import operational_carbon_over_time_kg
from sim.study import plots
from tests.conftest import REPO, make_scenario, run_cli, site

QUICKSTART = REPO / "scenarios" / "quickstart.toml"


@pytest.fixture(scope="module")
def with_dr() -> sim.Results:
    """Three days of the quickstart: its first demand-response evening falls inside."""
    return sim.simulate(sim.load_scenario(QUICKSTART, ["duration_h=72"]))


@pytest.fixture(scope="module")
def shifted() -> sim.Results:
    return sim.simulate(sim.load_scenario(QUICKSTART, ["duration_h=72"]), "wait_awhile")


@pytest.fixture(scope="module")
def without_dr() -> sim.Results:
    return sim.simulate(sim.load_scenario(QUICKSTART, ["duration_h=24", "demand_response=[]"]))


@pytest.fixture(scope="module")
def serving() -> sim.Results:
    """Two hours of the serving scenario at the request level, with a synthetic source."""
    overrides = [
        "duration_h=2",
        "services[0].requests={rate_per_s=3.0}",
        "services[1].requests={rate_per_s=1.0, tokens='azure-code'}",
    ]
    return sim.simulate(sim.load_scenario(REPO / "scenarios" / "serving.toml", overrides))


def sweep_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "policy": ["run_now", "wait_awhile", "carbon_time", "lowest_window"],
            "wait_mean_h": [0.0, 3.0, 2.0, 2.5],
            "carbon_total_kg": [100.0, 90.0, 92.0, 95.0],
        }
    )


def figures(with_dr, shifted, serving=None):
    runs = {"run_now": with_dr, "wait_awhile": shifted}
    heat = pd.DataFrame(
        [[5.0, 9.5], [1.0, 2.5]],
        index=pd.Index(["DE", "FR"], name="zone"),
        columns=pd.Index(["6 h", "24 h"], name="flexibility window"),
    )
    return {
        "power_and_carbon": lambda p: plots.power_and_carbon(with_dr, p),
        "cumulative_carbon": lambda p: plots.cumulative_carbon(runs, p),
        "pareto_front": lambda p: plots.pareto_front(sweep_table(), p),
        "wait_and_completion_cdfs": lambda p: plots.wait_and_completion_cdfs(runs, p),
        "savings_heatmap": lambda p: plots.savings_heatmap(heat, p),
        "dr_event_closeup": lambda p: plots.dr_event_closeup(with_dr, p),
        "energy_time_curve": lambda p: plots.energy_time_curve(["V100", "H100-SXM"], p),
        "latency_cdfs": lambda p: plots.latency_cdfs(serving, p),
        "carbon_per_1k_tokens": lambda p: plots.carbon_per_1k_tokens(serving, p),
    }


def test_there_is_a_test_for_every_figure_kind(with_dr, shifted):
    assert set(figures(with_dr, shifted)) == set(plots.FIGURE_KINDS)


@pytest.mark.parametrize("kind", plots.FIGURE_KINDS)
def test_every_figure_writes_png_and_pdf_with_every_axis_labelled(
    kind, with_dr, shifted, serving, tmp_path
):
    fig = figures(with_dr, shifted, serving)[kind](tmp_path / "sub" / kind)
    assert isinstance(fig, Figure)
    for suffix, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF")):
        path = tmp_path / "sub" / f"{kind}{suffix}"
        assert path.read_bytes()[:4] == magic
        assert path.stat().st_size > 5_000, f"{path.name} looks empty"
    assert not [p for p in (tmp_path / "sub").iterdir() if ".tmp" in p.name]
    for ax in fig.axes:
        drawn = ax.lines or ax.collections or ax.patches or ax.images
        is_colorbar = ax.get_label() == "<colorbar>"
        if is_colorbar:
            assert ax.get_ylabel(), f"{kind}: colorbar without a label"
            continue
        assert drawn, f"{kind}: an empty axes"
        assert ax.get_ylabel(), f"{kind}: an axes without a y label"
        if ax.get_xaxis().get_visible() and not _shares_x_with_labelled(ax, fig):
            assert ax.get_xlabel(), f"{kind}: an axes without an x label"


def _shares_x_with_labelled(ax, fig) -> bool:
    """Stacked panels and twin axes share their x axis with one that carries the label."""
    return any(o is not ax and o.get_xlabel() for o in ax.get_shared_x_axes().get_siblings(ax))


def test_labels_carry_units(with_dr, shifted, serving):
    units = ("(kW)", "(gCO2e/kWh)", "(kg CO2e)", "(h)", "(%)", "share of jobs", "relative to")
    units += ("(ms)", "(gCO2e)")
    for kind, draw in figures(with_dr, shifted, serving).items():
        fig = draw(None)
        labels = [a.get_xlabel() for a in fig.axes] + [a.get_ylabel() for a in fig.axes]
        assert any(u in label for label in labels for u in units), (kind, labels)


def test_cumulative_carbon_is_the_exact_integral_that_ends_at_the_run_total(with_dr):
    horizon_s = with_dr.scenario.horizon_s
    t = np.linspace(0, horizon_s, 50)
    carbon_kg = operational_carbon_over_time_kg(with_dr, t)
    assert carbon_kg[0] == 0.0
    assert np.all(np.diff(carbon_kg) >= 0)
    assert carbon_kg[-1] == pytest.approx(with_dr.summary["carbon_operational_kg"], rel=1e-9)
    # additivity: the carbon up to an instant inside a power step splits exactly
    inside = float(with_dr.power["time_s"].iloc[len(with_dr.power) // 2]) + 123.0
    a, b = operational_carbon_over_time_kg(with_dr, [inside, horizon_s])
    assert 0 < a < b


def test_the_pareto_front_keeps_only_points_no_other_beats_on_both_axes():
    fig = plots.pareto_front(sweep_table())
    (front,) = [line for line in fig.axes[0].lines if line.get_label() == "Pareto front"]
    x, y = front.get_data()
    # run_now (0 h, 100 kg), carbon_time (2 h, 92 kg), wait_awhile (3 h, 90 kg);
    # lowest_window (2.5 h, 95 kg) is beaten by carbon_time on both
    assert list(np.unique(x)) == [0.0, 2.0, 3.0]
    assert 95.0 not in y


def test_figures_refuse_what_they_cannot_draw(without_dr, with_dr):
    with pytest.raises(ValueError, match="no demand-response events in this run"):
        plots.dr_event_closeup(without_dr)
    with pytest.raises(ValueError, match=r"event 5: the run has 1 event\(s\)"):
        plots.dr_event_closeup(with_dr, event=5)
    with pytest.raises(ValueError, match="no site 'tokyo' in this run"):
        plots.power_and_carbon(with_dr, sites=["tokyo"])
    with pytest.raises(ValueError, match="unknown GPU model 'X200'"):
        plots.energy_time_curve("X200")
    with pytest.raises(ValueError, match="B200 has no sourced lowest power limit"):
        plots.energy_time_curve("B200")
    with pytest.raises(ValueError, match="no runs to draw"):
        plots.cumulative_carbon({})
    with pytest.raises(ValueError, match="no column 'jct_mean_h'"):
        plots.pareto_front(sweep_table(), x="jct_mean_h")


def test_the_energy_optimal_cap_is_below_the_maximum_and_saves_energy():
    fig = plots.energy_time_curve("V100")
    optimum = [c for c in fig.axes[0].collections if "energy-optimal" in c.get_label()]
    (time_rel, energy_rel) = optimum[0].get_offsets()[0]
    assert time_rel > 1.0 and energy_rel < 1.0  # slower, but less energy per unit of work


def test_zone_profile_writes_exactly_the_path_given(tmp_path):
    index = pd.date_range("2020-01-01", periods=24 * 14, freq="h", tz="UTC")
    series = pd.Series(200 + 50 * np.sin(np.arange(len(index)) / 24 * 2 * np.pi), index=index)
    path = plots.zone_profile(series, "test", "Europe/Berlin", tmp_path / "zone.svg")
    assert path == tmp_path / "zone.svg" and path.read_text().startswith("<?xml")
    assert [p.name for p in tmp_path.iterdir()] == ["zone.svg"]


# --- figures that do not mislead ------------------------------------------------------------


def overlapping_tick_labels(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of tick labels of one axis whose drawn text boxes overlap."""
    canvas = FigureCanvasAgg(fig)  # figures are built without pyplot: no canvas to draw on
    canvas.draw()
    renderer = canvas.get_renderer()
    clashes = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            boxes = [
                (label.get_text(), label.get_window_extent(renderer))
                for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                if lo <= tick.get_loc() <= hi
                for label in (tick.label1, tick.label2)
                if label.get_visible() and label.get_text()
            ]
            clashes += [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
                        if ba.overlaps(bb)]  # fmt: skip
    return clashes


@pytest.mark.parametrize("kind", plots.FIGURE_KINDS)
def test_no_two_tick_labels_of_a_figure_overlap(kind, with_dr, shifted, serving):
    fig = figures(with_dr, shifted, serving)[kind](None)
    assert overlapping_tick_labels(fig) == []


def test_the_overlap_check_finds_tick_labels_that_overlap():
    fig = Figure(figsize=(2, 2))
    ax = fig.subplots()
    ax.set_xticks(range(20), [f"label {i}" for i in range(20)])
    assert overlapping_tick_labels(fig)


def carbon_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if "carbon intensity" in ax.get_ylabel()]


def test_carbon_intensity_has_one_scale_from_zero_for_every_site(with_dr):
    fig = plots.power_and_carbon(with_dr)
    panels = carbon_axes(fig)
    assert len(panels) == len(with_dr.scenario.sites) == 3
    limits = {ax.get_ylim() for ax in panels}
    assert len(limits) == 1
    ((bottom, top),) = limits
    assert bottom == 0.0
    # the dirtiest grid's line reaches near the top, so the cleanest one (Paris, several
    # times cleaner) is drawn several times lower
    highest = [max(s.get_data()[0].max() for s in ax.patches) for ax in panels]
    assert max(highest) > 0.8 * top
    assert max(highest) / min(highest) > 5
    assert "one scale for all sites" in " ".join(t.get_text() for t in fig.legends[0].texts)


def test_power_and_carbon_reads_time_in_utc_dates(with_dr):
    fig = plots.power_and_carbon(with_dr)
    FigureCanvasAgg(fig).draw()
    bottom = fig.axes[0].get_shared_x_axes().get_siblings(fig.axes[0])
    (labelled,) = [ax for ax in bottom if ax.get_xlabel()]
    assert labelled.get_xlabel() == "time (UTC)"
    start = with_dr.scenario.start
    assert labelled.get_xlim() == pytest.approx(
        mdates.date2num([start, start + timedelta(seconds=with_dr.scenario.horizon_s)])
    )
    texts = [t.get_text() for t in labelled.get_xticklabels() if t.get_text()]
    assert "02 Jun" in texts and "03 Jun" in texts
    assert all(re.fullmatch(r"\d\d [A-Z][a-z]{2}|\d\d:\d\d", t) for t in texts), texts
    assert labelled.xaxis.get_major_formatter().get_offset() == "2020-Jun"


def test_identical_gpu_models_draw_one_curve_with_a_combined_label():
    fig = plots.energy_time_curve(["A100-40GB", "A100-80GB", "V100"])
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["A100-40GB = A100-80GB", "V100"]
    assert "power model" in ax.get_title()


def test_the_wait_panel_draws_the_jobs_that_waited_and_states_the_share_that_did_not(
    with_dr, shifted
):
    fig = plots.wait_and_completion_cdfs({"run_now": with_dr, "wait_awhile": shifted})
    wait_ax = fig.axes[0]
    waits_h = shifted.jobs["wait_h"].dropna()
    no_wait = (waits_h <= 0).mean()
    assert 0.0 < no_wait < 1.0  # the test needs both kinds
    legend = [t.get_text() for t in wait_ax.get_legend().texts]
    assert legend == [
        "run_now: 100% did not wait",
        f"wait_awhile: {plots.share_text(no_wait)} did not wait",
    ]
    now_line, shifted_line = wait_ax.lines
    assert len(now_line.get_xdata()) == 0
    assert np.min(shifted_line.get_xdata()) > 0
    assert np.max(shifted_line.get_ydata()) == 1.0  # a CDF of the jobs that waited
    assert wait_ax.get_ylabel() == "share of the jobs that waited"


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (1.0, "100%"),
        (0.0, "0%"),
        (0.5, "50%"),
        (0.994, "99%"),
        (0.998, "99.8%"),  # 3 jobs of 1500 waited: not "100%"
        (0.99999, "> 99.9%"),
        (0.004, "0.4%"),
        (0.00001, "< 0.1%"),
    ],
)
def test_a_share_reads_100_percent_only_when_whole_and_0_percent_only_when_none(share, text):
    assert plots.share_text(share) == text


def test_a_run_where_a_few_jobs_waited_does_not_say_that_all_did_not_wait(with_dr):
    jobs = with_dr.jobs.copy()
    started = jobs.index[jobs["wait_h"].notna()]
    assert (jobs["wait_h"].dropna() <= 0).all() and len(started) > 300  # needs < 0.5% waiting
    jobs.loc[started[:3], "wait_h"] = 0.5
    few_waited = dataclasses.replace(with_dr, jobs=jobs)
    wait_ax = plots.wait_and_completion_cdfs({"run_now": few_waited}).axes[0]
    (legend,) = [t.get_text() for t in wait_ax.get_legend().texts]
    share = 1 - 3 / len(started)
    assert legend == f"run_now: {share:.1%} did not wait"
    assert legend != "run_now: 100% did not wait"
    assert len(wait_ax.lines[0].get_xdata()) == 3


def test_a_run_where_no_job_waited_says_so_on_a_readable_axis(with_dr):
    fig = plots.wait_and_completion_cdfs({"run_now": with_dr})
    wait_ax = fig.axes[0]
    assert [t.get_text() for t in wait_ax.texts] == ["no job waited"]
    assert wait_ax.get_xlim()[0] == 0.0
    assert overlapping_tick_labels(fig) == []


def means_with_intervals() -> pd.DataFrame:
    table = sweep_table()
    table["wait_mean_h_ci_low"] = table["wait_mean_h"] - [0.0, 0.5, 1.0, 0.2]
    table["wait_mean_h_ci_high"] = table["wait_mean_h"] + [0.0, 0.5, 1.0, 0.2]
    table["carbon_total_kg_ci_low"] = table["carbon_total_kg"] - [4.0, 3.0, np.nan, 1.0]
    table["carbon_total_kg_ci_high"] = table["carbon_total_kg"] + [4.0, 3.0, np.nan, 1.0]
    return table


def test_the_pareto_front_draws_each_points_interval_as_error_bars():
    fig = plots.pareto_front(means_with_intervals(), interval="95% CI over seeds 0-4")
    ax = fig.axes[0]
    bars = {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}
    assert set(bars) == {"run_now", "wait_awhile", "carbon_time", "lowest_window"}
    assert {name: (c.has_xerr, c.has_yerr) for name, c in bars.items()} == {
        "run_now": (True, True),
        "wait_awhile": (True, True),
        "carbon_time": (True, False),  # no carbon interval: no vertical bar
        "lowest_window": (True, True),
    }
    _, _, (x_bars, y_bars) = bars["wait_awhile"]
    assert x_bars.get_segments()[0][:, 0].tolist() == [2.5, 3.5]
    assert y_bars.get_segments()[0][:, 1].tolist() == [87.0, 93.0]
    assert fig.get_supxlabel() == "error bars: 95% CI over seeds 0-4"


def test_the_pareto_front_axes_start_at_zero_so_a_small_difference_looks_small():
    for table in (sweep_table(), means_with_intervals()):
        ax = plots.pareto_front(table).axes[0]
        assert ax.get_xlim()[0] == 0.0 and ax.get_ylim()[0] == 0.0
        top = table.get("carbon_total_kg_ci_high", table["carbon_total_kg"]).max()
        assert ax.get_ylim()[1] >= top  # every interval in view


def test_a_single_point_at_zero_delay_gets_an_axis_from_zero_without_a_warning():
    table = pd.DataFrame({"policy": ["run_now"], "wait_mean_h": [0.0], "carbon_total_kg": [50.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = plots.pareto_front(table).axes[0]
    assert ax.get_xlim()[0] == 0.0 < ax.get_xlim()[1]
    assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] > 50.0


def test_a_pareto_front_with_no_row_that_has_both_values_is_an_empty_panel_saying_why(tmp_path):
    table = sweep_table()
    table["wait_mean_h"] = np.nan  # runs that completed no job have no mean wait
    fig = plots.pareto_front(table, tmp_path / "pareto")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == [
        "no run has both a mean wait and a total carbon\n"
        "(a run that completed no job has no mean wait)"
    ]
    assert len(ax.lines) == 0 and ax.get_xlabel() == "mean wait (h)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pareto.pdf", "pareto.png"]


def test_a_pareto_front_without_intervals_draws_no_error_bars_and_no_note():
    fig = plots.pareto_front(sweep_table())
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert bars and not any(c.has_xerr or c.has_yerr for c in bars)
    assert fig.get_supxlabel() == ""


def heat_table(values) -> pd.DataFrame:
    return pd.DataFrame(
        values,
        index=pd.Index(["DE", "FR"], name="zone"),
        columns=pd.Index(["6 h", "24 h"], name="flexibility window"),
    )


def test_the_savings_heatmap_gives_each_cells_interval_in_brackets_and_says_what_it_is():
    table = heat_table([[5.0, 9.5], [1.0, 2.5]])
    low = heat_table([[4.0, 8.25], [-0.5, np.nan]])  # no interval for one cell
    high = heat_table([[6.0, 10.5], [2.0, np.nan]])
    caption = "95% paired bootstrap interval over 5 seeds (BCa)"
    fig = plots.savings_heatmap(table, low=low, high=high, interval=caption)
    assert [t.get_text() for t in fig.axes[0].texts] == [
        "5\n[4, 6]",
        "9.5\n[8.25, 10.5]",
        "1\n[-0.5, 2]",
        "2.5",
    ]
    assert fig.get_supxlabel() == f"in brackets: {caption}"


def test_a_savings_heatmap_without_intervals_has_bare_values_and_no_caption():
    table = heat_table([[5.0, 9.5], [1.0, 2.5]])
    nowhere = heat_table([[np.nan] * 2] * 2)
    for fig in (
        plots.savings_heatmap(table),
        plots.savings_heatmap(table, low=nowhere, high=nowhere),
    ):
        assert [t.get_text() for t in fig.axes[0].texts] == ["5", "9.5", "1", "2.5"]
        assert fig.get_supxlabel() == ""
    with pytest.raises(ValueError, match="an interval needs both bounds"):
        plots.savings_heatmap(table, low=table)


def test_the_dr_closeup_marks_the_notice_and_the_baseline_window_before_it(with_dr):
    ax = plots.dr_event_closeup(with_dr).axes[0]
    notice_h = with_dr.scenario.demand_response[0].notice_h
    assert notice_h == 1.0  # the quickstart's evening event is announced an hour ahead
    (notice,) = [line for line in ax.lines if line.get_label() == "notice (announced)"]
    assert list(notice.get_xdata()) == [-notice_h, -notice_h]
    (window,) = [p for p in ax.patches if p.get_label() == "baseline window"]
    left, width = window.get_x(), window.get_width()
    assert (left, left + width) == (-notice_h - 1.0, -notice_h)
    assert ax.get_xlim()[0] <= left  # the whole window is in view


def test_each_closeup_marks_its_own_events_notice_when_notices_interleave():
    """Site b's events are announced three hours ahead, site a's one hour: b's notice comes
    first although both events start together."""
    daily = {"generator": "daily_peak", "hour": 17.0, "duration_h": 1.0, "reduction_pct": 10.0}
    results = sim.simulate(
        make_scenario(
            duration_h=48.0,
            sites=[site(name="a"), site(name="b")],
            demand_response=[{**daily, "site": "a", "notice_h": 1.0},
                             {**daily, "site": "b", "notice_h": 3.0}],
        )
    )  # fmt: skip
    notice_h = {"a": 1.0, "b": 3.0}
    assert len(results.dr_events) == 4
    for i, ev in enumerate(results.dr_events.itertuples()):
        ax = plots.dr_event_closeup(results, event=i).axes[0]
        (notice,) = [line for line in ax.lines if line.get_label() == "notice (announced)"]
        assert notice.get_xdata()[0] == -notice_h[ev.site], (i, ev.site)


def test_figures_of_one_run_name_the_run_in_their_title(with_dr, serving):
    label = "run_now, sites[0].pue=1.1, seed 0"
    for fig in (
        plots.power_and_carbon(with_dr, run_label=label),
        plots.dr_event_closeup(with_dr, run_label=label),
        plots.latency_cdfs(serving, run_label=label),
        plots.carbon_per_1k_tokens(serving, run_label=label),
    ):
        assert fig.get_suptitle() == f"run: {label}"
    assert plots.power_and_carbon(with_dr).get_suptitle() == ""


# --- figure files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pareto", "pareto.png", "pareto.PDF"])
def test_a_figure_path_with_or_without_a_png_or_pdf_suffix_writes_both(name, tmp_path):
    plots.pareto_front(sweep_table(), tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pareto.pdf", "pareto.png"]


def test_a_dot_inside_a_figure_name_is_kept(tmp_path):
    plots.pareto_front(sweep_table(), tmp_path / "pue_1.5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pue_1.5.pdf", "pue_1.5.png"]


def test_another_figure_format_as_the_suffix_is_refused_not_ignored(tmp_path):
    with pytest.raises(ScenarioError) as e:
        plots.pareto_front(sweep_table(), tmp_path / "pareto.svg")
    assert str(e.value) == (
        f"{tmp_path / 'pareto.svg'}: figures are written as .png and .pdf, not '.svg' "
        "(give the path without a suffix, or with one of .png, .pdf)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["zone.xyz", "zone"])
def test_zone_profile_refuses_a_file_name_without_a_known_figure_format(name, tmp_path):
    series = pd.Series([1.0], index=pd.date_range("2020-01-01", periods=1, freq="h", tz="UTC"))
    with pytest.raises(ScenarioError) as e:
        plots.zone_profile(series, "test", "UTC", tmp_path / name)
    message = str(e.value)
    assert message.startswith(f"{tmp_path / name}: unknown figure format")
    assert "accepted: " in message and ".png" in message and ".svg" in message
    assert "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_a_zone_figure_of_an_unknown_format_with_one_line(tmp_path, capsys):
    figure = tmp_path / "de.xyz"
    code, out = run_cli(["grid-data", "show", "DE", "--plot", str(figure)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert line.startswith(f"error: {figure}: unknown figure format '.xyz' (accepted: ")
    assert not figure.exists()
