"""Figures: each function draws a non-empty PNG and PDF whose axes all carry labels, from
exact numbers, and refuses input it cannot draw with a clear message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import sim
from sim import plots
from sim.results import operational_carbon_over_time_kg
from tests.conftest import REPO

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
    with pytest.raises(ValueError, match="unknown GPU model 'B200'"):
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
