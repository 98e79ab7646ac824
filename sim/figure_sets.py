"""Which figures a result folder gets (`dcsim plot DIR`): a run folder (`dcsim run --out`) or
a sweep folder (`dcsim sweep --out`). Each figure is written as PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sim import plots
from sim.errors import ScenarioError
from sim.experiments import SUMMARY_FILE, SWEEP_FILE, load_run, load_sweep
from sim.results import Results
from sim.stats import mean_ci, paired_differences

MAX_LINES = len(plots.OKABE_ITO)
"""Runs drawn as lines in one figure, at most (one colour each)."""
MAX_DR_EVENTS = 4
BASELINE_POLICY = "run_now"


def figures_for(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every figure that fits the results in `folder` into `out` (default
    `folder/figures`); return the files written. Raises ScenarioError if `folder` holds no
    results."""
    folder = Path(folder)
    out = Path(out) if out is not None else folder / "figures"
    if (folder / SWEEP_FILE).exists() and (folder / SUMMARY_FILE).exists():
        return _sweep_figures(folder, out)
    if (folder / "summary.json").exists():
        results = Results.load(folder)
        return _run_figures(results, {results.scenario.policy.name: results}, out)
    raise ScenarioError(
        f"{folder}: no results here (expected summary.json from `dcsim run --out` or "
        f"{SUMMARY_FILE} and {SWEEP_FILE} from `dcsim sweep --out`)"
    )


def _draw(out: Path, name: str, figure_function, *args, **kwargs) -> list[Path]:
    """Call a `sim.plots` function with `path=out/name`; the two files it writes."""
    figure_function(*args, path=out / name, **kwargs)
    return [out / f"{name}.png", out / f"{name}.pdf"]


def _run_figures(results: Results, runs: dict[str, Results], out: Path) -> list[Path]:
    """Figures of one run (`results`), and of several runs side by side (`runs`)."""
    written = _draw(out, "power_and_carbon", plots.power_and_carbon, results)
    written += _draw(out, "cumulative_carbon", plots.cumulative_carbon, runs)
    written += _draw(out, "wait_and_completion_cdfs", plots.wait_and_completion_cdfs, runs)
    for i in range(min(len(results.dr_events), MAX_DR_EVENTS)):
        written += _draw(out, f"dr_event_{i}", plots.dr_event_closeup, results, event=i)
    if not results.services.empty:
        written += _draw(out, "latency_cdfs", plots.latency_cdfs, results)
        written += _draw(out, "carbon_per_1k_tokens", plots.carbon_per_1k_tokens, results)
    models = sorted({p.model for s in results.scenario.sites for p in s.gpus})
    written += _draw(out, "energy_time", plots.energy_time_curve, models)
    return written


def _sweep_figures(folder: Path, out: Path) -> list[Path]:
    summary = load_sweep(folder)
    params = summary.attrs["params"]
    ok = summary[summary["status"] == "ok"]
    if ok.empty:
        raise ScenarioError(f"{folder}: no run of this sweep finished")
    by = params or ["seed"]
    means = mean_ci(ok, by, ["carbon_total_kg", "wait_mean_h"])
    means = means.rename(columns={"carbon_total_kg_mean": "carbon_total_kg",
                                  "wait_mean_h_mean": "wait_mean_h"})  # fmt: skip
    means["label"] = [_label(row, by) for row in means.to_dict("records")]
    written = _draw(out, "pareto_front", plots.pareto_front, means, label="label")
    heatmap = savings_table(ok, params)
    if heatmap is not None:
        table, value_label = heatmap
        written += _draw(
            out, "savings_heatmap", plots.savings_heatmap, table, value_label=value_label
        )
    first_seed = ok[ok["seed"] == ok["seed"].min()].head(MAX_LINES).to_dict("records")
    runs = {_label(row, by): load_run(folder, row["run_id"]) for row in first_seed}
    return written + _run_figures(next(iter(runs.values())), runs, out)


def savings_table(ok: pd.DataFrame, params: list[str]) -> tuple[pd.DataFrame, str] | None:
    """Rows x columns of the first two grid keys. With a `policy` key that includes the
    baseline policy: the paired carbon saving against it (%); else mean total carbon."""
    others = [p for p in params if p != "policy"]
    if "policy" in params and (ok["policy"] == BASELINE_POLICY).any() and others:
        diff = paired_differences(ok, "carbon_total_kg", baseline=BASELINE_POLICY)
        table = -diff.pivot_table(index="policy", columns=others[0], values="change_pct")
        return table, f"total carbon saved vs {BASELINE_POLICY} (%)"
    if len(params) >= 2:
        table = ok.pivot_table(index=params[0], columns=params[1], values="carbon_total_kg")
        return table, "mean total carbon (kg CO2e)"
    return None


def _label(row: dict, by: list[str]) -> str:
    return ", ".join(str(row[k]) if k == "policy" else f"{k}={row[k]}" for k in by)
