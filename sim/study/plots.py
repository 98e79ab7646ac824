"""Figures, one function per kind, publication quality: labelled axes with units, a
colour-blind-safe palette (Okabe-Ito), one style.

Each function takes results (`sim.Results`) or a summary table, returns a matplotlib
`Figure` and, given `path`, also writes `path.png` and `path.pdf` (each atomically; a
`.png` or `.pdf` suffix of `path` is dropped, another figure format's is refused).
Figures are built without pyplot, so nothing accumulates in a long session, headless runs
need no display, and a notebook shows a returned figure inline.

Figures of one run take `run_label`, which names the run in the figure's title (a sweep
draws such figures for one of its runs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.rcsetup import cycler

from sim.errors import ScenarioError
from sim.market.dr_events import BASELINE_WINDOW_S
from sim.models import hardware
from sim.results import Results, operational_carbon_over_time_kg

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
STYLE: dict[RcKeyType, Any] = {
    "figure.dpi": 150,
    "savefig.dpi": 200,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 9,
    "legend.frameon": False,
    "axes.prop_cycle": cycler(color=OKABE_ITO),
}
SEQUENTIAL_CMAP = "cividis"
"""Colour map for heatmaps: perceptually uniform and readable with colour-vision deficiency."""
SHADE: dict[str, Any] = {"color": OKABE_ITO[3], "alpha": 0.15, "lw": 0}
"""How demand-response events are shaded."""
BASELINE_SHADE: dict[str, Any] = {"color": OKABE_ITO[5], "alpha": 0.2, "lw": 0}
"""How the window a demand-response baseline is measured over is shaded."""
FIGURE_SUFFIXES = (".png", ".pdf")
"""The files each figure function writes."""

METRIC_LABELS = {
    "carbon_total_kg": "total carbon (kg CO2e)",
    "carbon_operational_kg": "operational carbon (kg CO2e)",
    "carbon_embodied_kg": "embodied carbon (kg CO2e)",
    "carbon_wan_kg": "WAN carbon (kg CO2e)",
    "energy_facility_kwh": "facility energy (kWh)",
    "energy_it_kwh": "IT energy (kWh)",
    "energy_jobs_kwh": "jobs' facility energy (kWh)",
    "wait_mean_h": "mean wait (h)",
    "jct_mean_h": "mean job completion time (h)",
    "jct_p95_h": "95th percentile job completion time (h)",
    "deadline_misses": "deadline misses (jobs)",
    "gpu_utilization": "GPU utilisation (fraction)",
    "dr_compliance": "demand-response compliance (fraction of event time)",
    "dr_throughput_loss_gpu_h": "throughput lost in events (GPU-h)",
}
NO_PARETO_DATA = "no run has both a {x} and a {y}\n(a run that completed no job has no mean wait)"
"""What an empty Pareto panel says (`pareto_front`); `{x}`, `{y}`: the axes' quantities."""
FIGURE_KINDS = (
    "power_and_carbon",
    "cumulative_carbon",
    "pareto_front",
    "wait_and_completion_cdfs",
    "savings_heatmap",
    "dr_event_closeup",
    "energy_time_curve",
    "latency_cdfs",
    "carbon_per_1k_tokens",
)


def power_and_carbon(
    results: Results,
    path: str | Path | None = None,
    *,
    sites: Sequence[str] | None = None,
    run_label: str | None = None,
) -> Figure:
    """Per site, facility power (kW) over time and, on a second axis, the grid's carbon
    intensity (g/kWh); the site's demand-response events are shaded. Carbon intensity has
    one scale, from zero, shared by every site's panel, so a grid five times dirtier draws a
    line five times higher; power has its own scale, from zero, per site. Time is in UTC
    dates."""
    from sim.grid import signal_for_site

    names = [s.name for s in results.scenario.sites]
    sites = list(sites) if sites is not None else names
    for name in sites:
        if name not in names:
            raise ValueError(f"no site {name!r} in this run (sites: {', '.join(names)})")
    start, horizon_s = results.scenario.start, results.scenario.horizon_s
    ci_label = "grid carbon intensity" + (", one scale for all sites" if len(sites) > 1 else "")
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 2.4 * len(sites) + 0.8), layout="constrained")
        axes = fig.subplots(len(sites), 1, sharex=True, squeeze=False)[:, 0]
        ci_axes: list[Any] = []
        power_label = "facility power"
        for ax, name in zip(axes, sites, strict=True):
            steps = results.power[results.power["site"] == name]
            times_s = steps["time_s"].to_numpy()
            kw = steps["facility_w"].to_numpy() / 1000.0
            if len(kw) <= MAX_DRAWN_STEPS:
                edges_s = np.append(times_s, horizon_s)
            else:  # more changes than the figure has pixels (e.g. a service's every request)
                edges_s, kw, low_kw, high_kw = step_envelope(times_s, kw, horizon_s)
                bin_min = horizon_s / MAX_DRAWN_STEPS / 60.0
                power_label = f"facility power (mean per {bin_min:.3g} min; band: min to max)"
                ax.stairs(high_kw, _utc_days(start, edges_s), baseline=low_kw, fill=True,
                          color=OKABE_ITO[0], alpha=0.25, lw=0)  # fmt: skip
            t = _utc_days(start, edges_s)
            ax.stairs(kw, t, baseline=None, color=OKABE_ITO[0], label=power_label)
            ax.set(ylabel="facility power (kW)", xlim=_utc_days(start, [0.0, horizon_s]))
            ax.set_title(name, loc="left")
            ax.set_ylim(bottom=0)
            sc = results.scenario
            i = names.index(name)
            signal = signal_for_site(sc.sites[i], i, sc.start, sc.horizon_s, sc.years)
            edges = np.clip(np.append(signal.times_s, signal.end_s), 0, horizon_s)
            ci_ax = ax.twinx()
            if ci_axes:
                ci_ax.sharey(ci_axes[0])
            ci_axes.append(ci_ax)
            ci_ax.stairs(
                signal.values_g_per_kwh,
                _utc_days(start, edges),
                baseline=None,
                color=OKABE_ITO[1],
                label=ci_label,
            )
            ci_ax.set_ylabel("carbon intensity (gCO2e/kWh)")
            ci_ax.grid(False)
            events = results.dr_events[results.dr_events["site"] == name]
            for ev in events.itertuples():
                ax.axvspan(*_utc_days(start, [ev.start_s, ev.end_s]), **SHADE)
        ci_axes[0].set_ylim(bottom=0)
        handles = axes[0].get_legend_handles_labels()[0] + ci_axes[0].get_legend_handles_labels()[0]
        if not results.dr_events.empty:
            handles.append(matplotlib.patches.Patch(**SHADE, label="demand-response event"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
        _utc_axis(axes[-1])
        _name_run(fig, run_label)
    return _saved(fig, path)


MAX_DRAWN_STEPS = 2000
"""A step function of more changes than this is drawn as its mean, minimum and maximum over
this many equal bins (`step_envelope`): a figure 8 inches wide has about 1,600 pixels, and
drawing millions of steps took minutes."""


def step_envelope(
    times_s: np.ndarray, values: np.ndarray, end_s: float, bins: int = MAX_DRAWN_STEPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A step function (`values[k]` from `times_s[k]`, increasing, the first at or before 0,
    the last until `end_s`) over `bins` equal bins of [0, end_s]: (bin edges s, exact
    time-weighted mean, minimum and maximum of the values in force in each bin)."""
    t = np.asarray(times_s, dtype=float)
    v = np.asarray(values, dtype=float)
    edges = np.linspace(0.0, end_s, bins + 1)
    cum = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
    k = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    integral = cum[k] + v[k] * (edges - t[k])
    mean = np.diff(integral) / np.diff(edges)
    first = k[:-1]
    last = np.maximum(np.searchsorted(t, edges[1:], side="left") - 1, first)
    # rows first[j] .. last[j] are in force in bin j; last[j] is first[j + 1] or one before
    low = np.minimum(np.minimum.reduceat(v, first), v[last])
    high = np.maximum(np.maximum.reduceat(v, first), v[last])
    return edges, mean, low, high


def empirical_cdf(
    values: np.ndarray, points: int = MAX_DRAWN_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of `values` as (sorted values, share of values at or below each):
    every value, or of more than `points` values, the exact CDF at `points` of them evenly
    spaced in rank (the smallest and the largest among them)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    rank = np.arange(n) if n <= points else np.unique(np.linspace(0, n - 1, points).round())
    rank = rank.astype(np.int64)
    return x[rank], (rank + 1) / max(n, 1)


def cumulative_carbon(runs: Mapping[str, Results], path: str | Path | None = None) -> Figure:
    """Cumulative operational carbon (kg) over time, one line per labelled run; exact
    integrals, ending at each run's `carbon_operational_kg`."""
    _need_runs(runs)
    longest_s = max(r.scenario.horizon_s for r in runs.values())
    scale_s, unit = _time_unit(longest_s)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6, 3.5), layout="constrained")
        ax = fig.subplots()
        for label, results in runs.items():
            t = np.linspace(0.0, results.scenario.horizon_s, 400)
            ax.plot(t / scale_s, operational_carbon_over_time_kg(results, t), label=label)
        ax.set(
            xlabel=f"time ({unit} since start)",
            ylabel="cumulative operational carbon (kg CO2e)",
            title="operational carbon",
        )
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend()
    return _saved(fig, path)


def pareto_front(
    summary: pd.DataFrame,
    path: str | Path | None = None,
    *,
    x: str = "wait_mean_h",
    y: str = "carbon_total_kg",
    label: str = "policy",
    interval: str = "95% confidence interval of the mean over seeds",
) -> Figure:
    """Carbon against delay: one point per row of `summary` (a run, or a combination's
    means), coloured by `label`; the Pareto front (lowest `y` for no more `x`) as a line.

    Rows with the interval columns `sim.study.stats.mean_ci` writes (`<x>_ci_low`, `<x>_ci_high`,
    and the same for `y`) get error bars, described under the figure by `interval`; a row
    without them (e.g. a single run) gets none. Both axes reach zero, so the distance
    between two points reads against the whole quantity and a small difference is not
    drawn as a large one. When no row has both `x` and `y` (a run that completed no job
    has no mean wait), the panel is drawn empty and says so (`NO_PARETO_DATA`)."""
    for col in (x, y, label):
        if col not in summary.columns:
            raise ValueError(f"no column {col!r} in the summary")
    data = summary.dropna(subset=[x, y])
    x_label, y_label = METRIC_LABELS.get(x, x), METRIC_LABELS.get(y, y)
    if data.empty:
        note = NO_PARETO_DATA.format(x=_short(x_label), y=_short(y_label))
        return _saved(_no_data(x_label, y_label, note), path)
    front = _pareto(data[x].to_numpy(float), data[y].to_numpy(float))
    with_ci = any(_error_bars(data, c) is not None for c in (x, y))
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6, 4), layout="constrained")
        ax = fig.subplots()
        for i, (name, group) in enumerate(data.groupby(label, sort=False)):
            ax.errorbar(
                group[x],
                group[y],
                xerr=_error_bars(group, x),
                yerr=_error_bars(group, y),
                fmt="o",
                ms=5,
                capsize=2,
                elinewidth=1,
                color=_colour(i),
                label=str(name),
                zorder=3,
                clip_on=False,  # a point at zero sits on the axis, drawn whole
            )
        ax.step(*front, where="post", color="0.3", lw=1, ls="--", label="Pareto front")
        ax.set(xlabel=x_label, ylabel=y_label)
        ax.set_title(f"{_short(y_label)} vs {_short(x_label)}")
        _reach_zero(ax)
        ax.legend(fontsize=7)
        if with_ci:
            fig.supxlabel(f"error bars: {interval}", fontsize=7)
    return _saved(fig, path)


def _no_data(x_label: str, y_label: str, note: str) -> Figure:
    """An empty Pareto panel, its axes labelled, that says why it is empty."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6, 4), layout="constrained")
        ax = fig.subplots()
        ax.set(xlabel=x_label, ylabel=y_label, xlim=(0, 1), ylim=(0, 1))
        ax.set_title(f"{_short(y_label)} vs {_short(x_label)}")
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", wrap=True)
    return fig


def _short(label: str) -> str:
    """An axis label without its unit: "mean wait (h)" -> "mean wait"."""
    return label.split(" (")[0]


def share_text(share: float) -> str:
    """`share` (0-1) as a percentage that reads 100% only when it is exactly 1 and 0% only
    when it is exactly 0: whole percents where they do not round to either end, else one
    decimal, else "> 99.9%" or "< 0.1%"."""
    if share in (0.0, 1.0) or 0.005 <= share < 0.995:
        return f"{share:.0%}"
    if 0.0005 <= share < 0.9995:
        return f"{share:.1%}"
    return "< 0.1%" if share < 0.5 else "> 99.9%"


def wait_and_completion_cdfs(runs: Mapping[str, Results], path: str | Path | None = None) -> Figure:
    """Empirical CDFs of the jobs' wait time and job completion time (h), one line per
    labelled run. Waits of zero would stack into one step at zero and squeeze the others
    against the top, so the wait panel draws the CDF of the jobs that waited and its legend
    gives each run's share of jobs that did not wait (`share_text`: 100% only when every
    job started at once, 0% only when none did), or that no job started. A panel with
    nothing to draw says so. A time axis is logarithmic when its times span more than two
    decades."""
    _need_runs(runs)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.2), layout="constrained")
        ax_wait, ax_jct = fig.subplots(1, 2)
        anyone_started = False
        for i, (label, results) in enumerate(runs.items()):
            waits_h = results.jobs["wait_h"].dropna().to_numpy(float)
            started = len(waits_h) > 0
            wait_label = (
                f"{label}: {share_text(float(np.mean(waits_h <= 0)))} did not wait"
                if started
                else f"{label}: no job started"
            )
            anyone_started |= started
            _cdf(ax_wait, waits_h[waits_h > 0], _colour(i), wait_label)
            _cdf(ax_jct, results.jobs["jct_h"].dropna().to_numpy(float), _colour(i), label)
        ax_wait.set(
            xlabel="job wait (h)",
            ylabel="share of the jobs that waited",
            title="wait, of the jobs that waited",
        )
        ax_jct.set(
            xlabel="job completion time (h)", ylabel="share of jobs", title="job completion time"
        )
        for ax in (ax_wait, ax_jct):
            _time_axis(ax)
            ax.set_ylim(0, 1.02)
        if not any(len(line.get_xdata()) for line in ax_wait.lines):
            note = "no job waited" if anyone_started else "no job started"
            ax_wait.text(0.5, 0.5, note, transform=ax_wait.transAxes, ha="center")
        if not any(len(line.get_xdata()) for line in ax_jct.lines):
            ax_jct.text(0.5, 0.5, "no job completed", transform=ax_jct.transAxes, ha="center")
        ax_wait.legend(fontsize=7)
        ax_jct.legend(fontsize=7)
    return _saved(fig, path)


def savings_heatmap(
    table: pd.DataFrame,
    path: str | Path | None = None,
    *,
    value_label: str = "carbon saving (%)",
    row_label: str | None = None,
    col_label: str | None = None,
    number_format: str = "{:.3g}",
    low: pd.DataFrame | None = None,
    high: pd.DataFrame | None = None,
    interval: str = "95% paired bootstrap interval over seeds",
) -> Figure:
    """A table (rows x columns, e.g. zone x flexibility window) as an annotated heatmap,
    each cell written with `number_format`; axis labels default to the index's and the
    columns' names.

    With `low` and `high` (the bounds of each cell's interval, tables with the rows and
    columns of `table`), a cell whose bounds are both finite also gives them in brackets
    under its value, "12.3" over "[10.2, 14.1]", and a caption under the figure says what
    the brackets are (`interval`). The colours show the values only."""
    if table.empty:
        raise ValueError("the table to draw is empty")
    if (low is None) != (high is None):
        raise ValueError("an interval needs both bounds: give low and high, or neither")
    values = table.to_numpy(float)
    bounds = [
        np.full_like(values, np.nan) if b is None else b.reindex_like(table).to_numpy(float)
        for b in (low, high)
    ]
    with_interval = np.isfinite(bounds[0]) & np.isfinite(bounds[1])
    with matplotlib.rc_context(STYLE):
        width_in = 1.1 * table.shape[1] + 3.6
        row_in = 0.7 if with_interval.any() else 0.5
        fig = Figure(figsize=(width_in, row_in * table.shape[0] + 1.8), layout="constrained")
        ax = fig.subplots()
        image = ax.imshow(values, cmap=SEQUENTIAL_CMAP, aspect="auto")
        ax.set_xticks(range(table.shape[1]), [str(c) for c in table.columns])
        ax.set_yticks(range(table.shape[0]), [str(i) for i in table.index])
        ax.grid(False)
        middle = np.nanmin(values) + 0.5 * (np.nanmax(values) - np.nanmin(values))
        for (r, c), v in np.ndenumerate(values):
            if np.isfinite(v):
                text = number_format.format(v)
                if with_interval[r, c]:
                    lo, hi = (number_format.format(b[r, c]) for b in bounds)
                    text += f"\n[{lo}, {hi}]"
                colour = "black" if v > middle else "white"  # cividis: dark low, light high
                ax.text(c, r, text, ha="center", va="center", color=colour, fontsize=8)
        ax.set(
            xlabel=col_label or str(table.columns.name or "column"),
            ylabel=row_label or str(table.index.name or "row"),
        )
        fig.colorbar(image, ax=ax).set_label(value_label)
        if with_interval.any():
            fig.supxlabel(f"in brackets: {interval}", fontsize=7)
    return _saved(fig, path)


def dr_event_closeup(
    results: Results,
    path: str | Path | None = None,
    *,
    event: int = 0,
    margin_h: float = 3.0,
    run_label: str | None = None,
) -> Figure:
    """Facility power of the event's site around one demand-response event (`event`: its row
    in `results.dr_events`), the event shaded, its power limit and baseline drawn, the time
    it was announced (its notice) marked, and the hour before the notice, over which the
    baseline is the mean facility power, shaded (`BASELINE_WINDOW_S`). The view spans
    `margin_h` hours either side of the event, widened to show the baseline window."""
    if results.dr_events.empty:
        raise ValueError("no demand-response events in this run")
    if not 0 <= event < len(results.dr_events):
        raise ValueError(f"event {event}: the run has {len(results.dr_events)} event(s)")
    ev = results.dr_events.iloc[event]
    notice_s = _notice_s(results, event)
    window_s = max(0.0, notice_s - BASELINE_WINDOW_S)
    steps = results.power[results.power["site"] == ev["site"]]
    t0_s = max(0.0, min(ev["start_s"] - margin_h * 3600, window_s))
    t1_s = min(results.scenario.horizon_s, ev["end_s"] + margin_h * 3600)
    t = steps["time_s"].to_numpy()
    edges = np.append(t, results.scenario.horizon_s)
    keep = (edges[1:] > t0_s) & (edges[:-1] < t1_s)
    hours = (np.clip(edges, t0_s, t1_s) - ev["start_s"]) / 3600.0
    kw = steps["facility_w"].to_numpy() / 1000.0
    lo, hi = np.flatnonzero(keep)[[0, -1]]
    notice_h, window_h = (np.array([notice_s, window_s]) - ev["start_s"]) / 3600.0
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6, 3.4), layout="constrained")
        ax = fig.subplots()
        ax.axvspan(0.0, (ev["end_s"] - ev["start_s"]) / 3600.0, **SHADE, label="event")
        ax.axvspan(window_h, notice_h, **BASELINE_SHADE, label="baseline window")
        ax.stairs(
            kw[lo : hi + 1],
            hours[lo : hi + 2],
            baseline=None,
            color=OKABE_ITO[0],
            label="facility power",
        )
        ax.axhline(ev["limit_kw"], color=OKABE_ITO[3], ls="--", label="limit")
        if np.isfinite(ev.get("baseline_kw", np.nan)):
            ax.axhline(ev["baseline_kw"], color="0.4", ls=":", label="baseline")
        ax.axvline(notice_h, color="black", ls="-.", lw=1, label="notice (announced)")
        ax.set(
            xlabel="time from event start (h)",
            ylabel="facility power (kW)",
            title=f"{ev['site']}: demand-response event {event}, compliance {ev['compliance']:.0%}",
        )
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        _name_run(fig, run_label)
    return _saved(fig, path)


def energy_time_curve(
    gpu_models: str | Sequence[str],
    path: str | Path | None = None,
    *,
    profile: str = "mixed",
    caps_w: Sequence[float] | None = None,
) -> Figure:
    """The power model's energy-time trade-off (`sim.models.hardware.estimate`, not a measurement):
    for each GPU model, GPU energy and time per unit of work (both relative to the uncapped
    GPU) as the power cap goes from the model's lowest to its highest limit (or over
    `caps_w`); the energy-optimal cap is marked. GPU models whose curves are identical are
    drawn once, labelled with all their names ("A100-40GB = A100-80GB")."""
    models = [gpu_models] if isinstance(gpu_models, str) else list(gpu_models)
    if not models:
        raise ValueError("no GPU model to draw")
    for m in models:
        if m not in hardware.GPU_CATALOG:
            raise ValueError(f"unknown GPU model {m!r}")
        if caps_w is None and not hardware.GPU_CATALOG[m].min_cap_sourced:
            raise ValueError(
                f"{m} has no sourced lowest power limit (min_cap_w): give caps_w to draw its curve"
            )
    if profile not in hardware.PROFILES:
        raise ValueError(f"unknown profile {profile!r} (known: {hardware.profile_choices()})")
    curves: list[tuple[list[str], np.ndarray, np.ndarray, float]] = []
    for model in models:
        spec = hardware.GPU_CATALOG[model]
        default_caps = np.linspace(spec.min_cap_w, spec.max_cap_w, 60)
        caps = np.asarray(caps_w if caps_w is not None else default_caps, dtype=float)
        uncapped = hardware.estimate(model, profile)
        points = [hardware.estimate(model, profile, c) for c in caps]
        time_rel = np.array([1.0 / p.throughput_fraction for p in points])
        energy_rel = np.array(
            [p.power_w / p.throughput_fraction / uncapped.power_w for p in points]
        )
        best_w = float(caps[int(np.argmin(energy_rel))])
        same = [c for c in curves if _same_curve(c, time_rel, energy_rel, best_w)]
        if same:
            same[0][0].append(model)
        else:
            curves.append(([model], time_rel, energy_rel, best_w))
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6, 4), layout="constrained")
        ax = fig.subplots()
        for i, (names, time_rel, energy_rel, best_w) in enumerate(curves):
            name = " = ".join(names)
            best = int(np.argmin(energy_rel))
            ax.plot(time_rel, energy_rel, color=_colour(i), label=name)
            ax.scatter([time_rel[best]], [energy_rel[best]], color=_colour(i), marker="v", s=36,
                       zorder=3, label=f"{name}: energy-optimal {best_w:.0f} W")  # fmt: skip
        ax.scatter([1.0], [1.0], color="black", marker="o", s=20, zorder=4, label="uncapped")
        ax.set(
            xlabel="time per unit of work (relative to uncapped)",
            ylabel="GPU energy per unit of work (relative to uncapped)",
            title=f"the power model's curves under power caps, {profile} workload",
        )
        ax.legend(fontsize=7)
    return _saved(fig, path)


def latency_cdfs(
    results: Results, path: str | Path | None = None, *, run_label: str | None = None
) -> Figure:
    """Per service, the CDFs of time to first token and time per output token (ms) against
    the service's targets (dashed). At the request level, over the served requests; at the
    fluid level (no per-request records), over the steps' 99th percentiles. Of more than
    `MAX_DRAWN_STEPS` values the CDF is drawn at that many of them (`empirical_cdf`), as the
    axis says."""
    services = _need_services(results)
    requests = results.requests
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.2), layout="constrained")
        axes = fig.subplots(1, 2, sharey=True)
        share = "share of requests" if requests is not None else "share of steps"
        sampled = False
        for ax, metric, what in zip(
            axes, ("ttft", "tpot"), ("time to first token", "time per output token"), strict=True
        ):
            for i, svc in enumerate(results.scenario.services):
                if requests is not None:
                    rows = requests[
                        (requests["service"] == svc.name) & (requests["state"] == "served")
                    ]
                    values = rows[f"{metric}_ms"].to_numpy(float)
                    label = svc.name
                else:
                    rows = services[services["service"] == svc.name]
                    values = rows[f"{metric}_p99_ms"].dropna().to_numpy(float)
                    label = f"{svc.name} (step p99)"
                drawn, shares = empirical_cdf(values)
                ax.step(drawn, shares, where="post", color=_colour(i), label=label)
                sampled = sampled or len(drawn) < len(values)
                target = getattr(svc.slo, f"{metric}_ms")
                ax.axvline(target, color=_colour(i), ls="--", lw=1)
            ax.set(xlabel=f"{what} (ms)", ylabel=share, title=what)
            ax.set_xscale("log")
        axes[0].set_ylim(0, 1.02)
        if sampled:
            axes[0].set_ylabel(f"{share} (drawn at {MAX_DRAWN_STEPS:,} quantiles)")
        axes[1].legend(fontsize=7, title="dashed: targets", title_fontsize=7)
        _name_run(fig, run_label)
    return _saved(fig, path)


CARBON_WINDOWS = 48
"""`carbon_per_1k_tokens` draws about this many windows over a run (each a whole number of
the services table's steps): per minute, the ratio of two small numbers is noise."""


def carbon_per_1k_tokens(
    results: Results, path: str | Path | None = None, *, run_label: str | None = None
) -> Figure:
    """Per service, the operational carbon of its GPUs per 1,000 output tokens generated
    (gCO2e) over windows of whole steps of services.parquet (about `CARBON_WINDOWS` over
    the run, the length in the title). A window in which the service generated no token
    is merged into the next one that has tokens (the last ones into the one before them),
    its carbon with it, so every minute's carbon is drawn; the title says how many were
    merged (`token_windows`)."""
    services = _need_services(results)
    horizon_s = results.scenario.horizon_s
    step_s = results.scenario.serving.step_s
    window_s = step_s * max(1, int(horizon_s / CARBON_WINDOWS / step_s))
    scale_s, unit = _time_unit(horizon_s)
    merged = 0
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.2), layout="constrained")
        ax = fig.subplots()
        for i, svc in enumerate(results.scenario.services):
            rows = services[services["service"] == svc.name]
            edges_s, g_per_1k, empty = token_windows(
                rows["start_s"].to_numpy(),
                rows["carbon_kg"].to_numpy(),
                rows["tokens"].to_numpy(),
                window_s,
                horizon_s,
            )
            merged += empty
            ax.stairs(g_per_1k, edges_s / scale_s, baseline=None, color=_colour(i),
                      label=svc.name, lw=1)  # fmt: skip
        note = f"; {merged} without tokens merged into the next" if merged else ""
        ax.set(
            xlabel=f"time ({unit} since start)",
            ylabel="carbon per 1k tokens (gCO2e)",
            title=f"carbon per 1,000 output tokens, per {_duration(window_s)} window{note}",
        )
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        _name_run(fig, run_label)
    return _saved(fig, path)


def token_windows(
    start_s: np.ndarray, carbon_kg: np.ndarray, tokens: np.ndarray, window_s: float, end_s: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """Carbon per 1,000 tokens (g) of steps (starting at `start_s`, with their carbon and
    tokens) over windows of `window_s` of [0, end_s], each window without tokens merged into
    the next one with tokens (trailing ones into the last with tokens): (edges s, g per
    1,000 tokens of each merged window, windows merged). No token at all: one window of NaN."""
    n = max(1, math.ceil(end_s / window_s - 1e-9))
    window = np.minimum(np.floor(np.asarray(start_s) / window_s).astype(np.int64), n - 1)
    carbon = np.bincount(window, np.asarray(carbon_kg, dtype=float), n)
    count = np.bincount(window, np.asarray(tokens, dtype=float), n)
    kept = np.flatnonzero(count > 0)
    if not len(kept):
        return np.array([0.0, end_s]), np.array([np.nan]), n - 1
    into = np.minimum(np.searchsorted(kept, np.arange(n)), len(kept) - 1)
    g_per_1k = np.bincount(into, carbon, len(kept)) * 1e6 / np.bincount(into, count, len(kept))
    edges = np.concatenate([[0.0], (kept[:-1] + 1) * window_s, [end_s]])
    return edges, g_per_1k, n - len(kept)


def _duration(seconds: float) -> str:
    """A duration as a short text: "30-min", "2-h", "1.5-day"."""
    for unit_s, unit in ((86400.0, "day"), (3600.0, "h"), (60.0, "min")):
        if seconds >= unit_s:
            return f"{seconds / unit_s:.3g}-{unit}"
    return f"{seconds:.3g}-s"


def zone_profile(series: pd.Series, title: str, timezone: str, path: str | Path) -> Path:
    """Daily profile (mean and 5-95% band by local hour), weekly profile (mean by local
    weekday) and the distribution of an hourly carbon-intensity series (g/kWh, UTC index),
    written to exactly `path` (its suffix picks the format, `check_figure_file`)."""
    path = check_figure_file(path)
    local = series.tz_convert(timezone)
    by_hour = local.groupby(local.index.hour)
    by_day = local.groupby(local.index.day_of_week).mean()
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10, 3), layout="constrained")
        ax_d, ax_w, ax_h = fig.subplots(1, 3)
        ax_d.fill_between(
            by_hour.mean().index,
            by_hour.quantile(0.05),
            by_hour.quantile(0.95),
            alpha=0.25,
            label="5-95%",
        )
        ax_d.plot(by_hour.mean(), label="mean")
        ax_d.set(
            xlabel=f"hour of day ({timezone})",
            ylabel="carbon intensity (gCO2e/kWh)",
            title="daily profile",
            xticks=range(0, 24, 6),
        )
        ax_d.legend()
        ax_w.bar(range(7), by_day.to_numpy())
        ax_w.set(
            xlabel="day of week",
            ylabel="mean carbon intensity (gCO2e/kWh)",
            title="weekly profile",
            xticks=range(7),
            xticklabels=["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
        )
        ax_h.hist(series.to_numpy(), bins=50)
        ax_h.set(xlabel="carbon intensity (gCO2e/kWh)", ylabel="hours", title="distribution")
        fig.suptitle(title)
        _write(fig, path)
    return path


def figure_formats() -> list[str]:
    """The file formats matplotlib writes, by suffix without the dot."""
    return sorted(Figure().canvas.get_supported_filetypes())


def check_figure_file(path: str | Path) -> Path:
    """`path` as a Path if its suffix names a format matplotlib writes; else ScenarioError
    naming the path and the accepted suffixes."""
    path = Path(path)
    accepted = figure_formats()
    if path.suffix.lower().removeprefix(".") not in accepted:
        raise ScenarioError(
            f"{path}: unknown figure format {path.suffix or '(no suffix)'!r} "
            f"(accepted: {', '.join('.' + f for f in accepted)})"
        )
    return path


# --- helpers ---------------------------------------------------------------------------------


def _saved(fig: Figure, path: str | Path | None) -> Figure:
    """Write `fig` to `path.png` and `path.pdf` (a `.png` or `.pdf` suffix of `path` is
    dropped; ScenarioError for another figure format's, which would be silently ignored)."""
    if path is not None:
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix in FIGURE_SUFFIXES:
            path = path.with_suffix("")
        elif suffix.removeprefix(".") in figure_formats():
            raise ScenarioError(
                f"{path}: figures are written as {' and '.join(FIGURE_SUFFIXES)}, not {suffix!r} "
                f"(give the path without a suffix, or with one of {', '.join(FIGURE_SUFFIXES)})"
            )
        for suffix in FIGURE_SUFFIXES:
            _write(fig, path.with_name(path.name + suffix))
    return fig


def _write(fig: Figure, path: Path) -> None:
    """Save atomically: to a temporary name in the same folder, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        fig.savefig(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _time_unit(horizon_s: float) -> tuple[float, str]:
    return (86400.0, "days") if horizon_s >= 2 * 86400 else (3600.0, "hours")


def _colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def _need_services(results: Results) -> pd.DataFrame:
    if results.services.empty:
        raise ValueError("this run has no inference services ([[services]])")
    return results.services


def _need_runs(runs: Mapping[str, Results]) -> None:
    if not runs:
        raise ValueError("no runs to draw")


def _pareto(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points not dominated in (x, y), both minimised, sorted by x."""
    order = np.lexsort((y, x))
    front_x, front_y, best = [], [], np.inf
    for i in order:
        if y[i] < best:
            front_x.append(x[i])
            front_y.append(y[i])
            best = y[i]
    return np.array(front_x), np.array(front_y)


def _utc_days(start: datetime, times_s: Any) -> np.ndarray:
    """Seconds since `start` as matplotlib date numbers (days)."""
    return mdates.date2num(start) + np.asarray(times_s, dtype=float) / 86400.0


def _utc_axis(ax) -> None:
    """Date ticks on `ax`'s x axis, in UTC: a tick at midnight reads "02 Jun", one within a
    day "12:00", the year and month are written at the axis' end."""
    locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(
            locator,
            tz=UTC,
            formats=["%Y", "%b", "%d %b", "%H:%M", "%H:%M", "%S.%f"],
            zero_formats=["", "%Y", "%d %b", "%d %b", "%H:%M", "%H:%M"],
        )
    )
    ax.set_xlabel("time (UTC)")


def _name_run(fig: Figure, run_label: str | None) -> None:
    if run_label is not None:
        fig.suptitle(f"run: {run_label}", fontsize=9)


def _notice_s(results: Results, event: int) -> float:
    """When demand-response event `event` (its row in `results.dr_events`) was announced, s.
    The meter records a window and its `dr_notice` together, so the n-th notice in the event
    log belongs to the n-th row."""
    notices = results.events[results.events["kind"] == "dr_notice"]
    return float(notices["time_s"].iloc[event])


def _same_curve(curve: tuple, time_rel: np.ndarray, energy_rel: np.ndarray, best_w: float) -> bool:
    _, other_time, other_energy, other_best_w = curve
    return (
        other_best_w == best_w
        and other_time.shape == time_rel.shape
        and np.allclose(other_time, time_rel, rtol=1e-9)
        and np.allclose(other_energy, energy_rel, rtol=1e-9)
    )


def _error_bars(rows: pd.DataFrame, column: str) -> np.ndarray | None:
    """Distances below and above `column` to its interval (`<column>_ci_low` and
    `<column>_ci_high`), for matplotlib's `errorbar`; None without interval columns, or
    where no row has an interval."""
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in rows.columns or high not in rows.columns or rows[low].isna().all():
        return None
    mean = rows[column].to_numpy(float)
    return np.vstack([mean - rows[low].to_numpy(float), rows[high].to_numpy(float) - mean])


def _reach_zero(ax) -> None:
    """Widen both axes' limits to include zero, exactly at the edge: data that are all at
    or above zero start there, all-negative data end there."""
    for get, set_, data in (
        (ax.get_xlim, ax.set_xlim, ax.dataLim.intervalx),
        (ax.get_ylim, ax.set_ylim, ax.dataLim.intervaly),
    ):
        lo, hi = get()
        set_(0.0 if data[0] >= 0 else lo, 0.0 if data[1] < 0 else hi)


def _cdf(ax, values: np.ndarray, colour: str, label: str) -> None:
    """The empirical CDF of `values` as a step line."""
    values = np.sort(values)
    share = np.arange(1, len(values) + 1) / max(len(values), 1)
    ax.step(values, share, where="post", color=colour, label=label)


def _time_axis(ax) -> None:
    """A logarithmic x axis when the positive x data span more than two decades (a
    narrower span on a log axis labels minor ticks, which crowd), else a linear one from 0."""
    values = np.concatenate([line.get_xdata() for line in ax.lines] or [np.array([])])
    positive = values[values > 0]
    if len(positive) and positive.max() / positive.min() > 100:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
