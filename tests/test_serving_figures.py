"""Figures of serving runs (issue #33, "Using it"): carbon per 1,000 tokens over windows
that hold tokens, with no minute's carbon dropped; no jobs' figures for a run without jobs;
a run of a million requests drawn in seconds (its power and latencies drawn at the figure's
resolution from exact numbers)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import sim
from sim.study import plots
from sim.study.figure_sets import figures_for
from tests.conftest import REPO


@pytest.fixture(scope="module")
def serving_only(tmp_path_factory):
    """Six hours of the serving-only scenario, saved."""
    out = tmp_path_factory.mktemp("serving_only")
    sc = sim.load_scenario(REPO / "scenarios" / "serving_only.toml", ["duration_h=6"])
    r = sim.simulate(sc)
    r.save(out)
    return r, out


def test_carbon_per_1k_tokens_merges_windows_without_tokens_into_the_next():
    """Steps of 60 s in windows of 120 s; the second window has no token: its carbon goes
    to the third, drawn over both; the last has none either: it joins the one before."""
    start_s = np.arange(8) * 60.0
    carbon_kg = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]) * 1e-3
    tokens = np.array([500, 500, 0, 0, 1000, 1000, 0, 0])
    edges, g_per_1k, merged = plots.token_windows(start_s, carbon_kg, tokens, 120.0, 480.0)
    assert list(edges) == [0.0, 120.0, 480.0]
    # 2 g over 1,000 tokens; then 4 + 6 + 8 g over 2,000 tokens
    assert g_per_1k == pytest.approx([2.0, 9.0])
    assert merged == 2
    # every gram is in some window: the windows' carbon adds up to the steps'
    tokens_per_window = np.array([1000, 2000])
    assert np.sum(g_per_1k * tokens_per_window / 1000) * 1e-3 == pytest.approx(carbon_kg.sum())


def test_carbon_per_1k_tokens_says_its_window_and_what_it_merged(serving_only):
    r, _ = serving_only
    title = plots.carbon_per_1k_tokens(r).axes[0].get_title()
    # about 48 windows of whole 60-s steps over 6 h: 7 steps each
    assert title == "carbon per 1,000 output tokens, per 7-min window"
    quiet = r.services.copy()
    quiet.loc[quiet.index[:28], "tokens"] = 0  # four windows without tokens
    title = plots.carbon_per_1k_tokens(dataclasses.replace(r, services=quiet)).axes[0].get_title()
    assert title.endswith("per 7-min window; 4 without tokens merged into the next")


def test_a_step_function_of_many_changes_is_drawn_as_its_exact_mean_and_range():
    rng = np.random.default_rng(1)
    t = np.concatenate([[0.0], np.sort(rng.uniform(0, 1000.0, 9999))])
    v = rng.uniform(0, 10.0, len(t))
    edges, mean, low, high = plots.step_envelope(t, v, 1000.0, bins=50)
    exact = np.sum(v * np.diff(np.append(t, 1000.0)))
    assert np.sum(mean * np.diff(edges)) == pytest.approx(exact, rel=1e-12)
    for j in (0, 17, 49):
        inside = (t < edges[j + 1]) & (np.append(t[1:], 1000.0) > edges[j])
        assert low[j] == v[inside].min() and high[j] == v[inside].max()
        assert low[j] <= mean[j] <= high[j]


def test_an_empirical_cdf_of_many_values_is_exact_at_the_points_it_draws():
    values = np.random.default_rng(2).lognormal(size=100_001)
    x, share = plots.empirical_cdf(values, points=1000)
    assert len(x) == 1000 and x[0] == values.min() and x[-1] == values.max()
    for k in (0, 500, 999):
        assert share[k] == np.mean(values <= x[k])
    x_all, share_all = plots.empirical_cdf(values[:500], points=1000)
    assert len(x_all) == 500 and share_all[-1] == 1.0


def test_a_run_without_jobs_gets_no_jobs_figures(serving_only, tmp_path):
    """No waits and completion times, and no power-cap curves of training jobs."""
    _, folder = serving_only
    names = {p.stem for p in figures_for(folder, tmp_path / "fig")}
    assert names == {
        "power_and_carbon",
        "cumulative_carbon",
        "latency_cdfs",
        "carbon_per_1k_tokens",
    }
