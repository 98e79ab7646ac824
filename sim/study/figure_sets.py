"""Which figures a result folder gets (`dcsim plot DIR`): a run folder (`dcsim run --out`) or
a sweep folder (`dcsim sweep --out`). Each figure is written as PNG and PDF."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet

from sim.errors import ScenarioError
from sim.results import FILES as RUN_FILES
from sim.results import Results
from sim.study import plots
from sim.study.experiments import SUMMARY_FILE, SWEEP_FILE, load_sweep
from sim.study.stats import mean_ci, paired_differences

MAX_LINES = len(plots.OKABE_ITO)
"""Runs drawn as lines in one figure, at most (one colour each)."""
MAX_DR_EVENTS = 4
BASELINE_POLICY = "run_now"
CI_LEVEL = 0.95
"""Confidence level of the intervals across seeds on the Pareto front."""
SWEEP_FILES = (SWEEP_FILE, SUMMARY_FILE)
"""The files of a sweep folder that `dcsim plot` reads (besides its runs' folders)."""


def figures_for(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every figure that fits the results in `folder` into `out` (default
    `folder/figures`); return the files written. Raises ScenarioError, naming the folder and
    the file, if `folder` is not a complete run or sweep folder (a file missing or
    unreadable), and if `out` looks like a figure file rather than a folder."""
    folder = Path(folder)
    out = _figure_folder(out) if out is not None else folder / "figures"
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise ScenarioError(f"{folder}: {state} (expected the folder of a run or a sweep)")
    if (folder / SWEEP_FILE).exists() or (folder / SUMMARY_FILE).exists():
        _check_files(folder, SWEEP_FILES, "sweep")
        return _sweep_figures(folder, out)
    if (folder / "summary.json").exists():
        results = _load_run(folder)
        label = f"{results.scenario.name}, {results.scenario.policy.name}"
        return _run_figures(results, {results.scenario.policy.name: results}, out, label)
    raise ScenarioError(
        f"{folder}: no results here (expected summary.json from `dcsim run --out` or "
        f"{SUMMARY_FILE} and {SWEEP_FILE} from `dcsim sweep --out`)"
    )


def _figure_folder(out: str | Path) -> Path:
    """`out` if it does not end like a figure file (`dcsim plot --out` names a folder)."""
    out = Path(out)
    if out.suffix.lower().removeprefix(".") in plots.figure_formats():
        raise ScenarioError(
            f"--out {out}: names a folder for the figures, each written as "
            f"{' and '.join(plots.FIGURE_SUFFIXES)}, not a {out.suffix} file "
            f"(give a folder name without a figure suffix)"
        )
    return out


def _check_files(folder: Path, files: tuple[str, ...], kind: str) -> None:
    """ScenarioError naming the first of `files` in `folder` that is missing or does not
    parse (JSON and TOML read whole, Parquet by its footer)."""
    for name in files:
        path = folder / name
        if not path.is_file():
            raise ScenarioError(f"{folder}: not a complete {kind} folder: {name} is missing")
        try:
            if path.suffix == ".parquet":
                pyarrow.parquet.read_metadata(path)
            elif path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".toml":
                tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ScenarioError(f"{path}: unreadable {kind} result file ({_reason(e)})") from None


def _load_run(folder: Path) -> Results:
    """The results in run folder `folder`, its files checked one by one first
    (`_check_files`) so that an error names the file."""
    _check_files(folder, RUN_FILES, "run")
    try:
        return Results.load(folder)
    except (OSError, ValueError) as e:  # a file whose footer parses but whose data do not
        raise ScenarioError(f"{folder}: unreadable run results ({_reason(e)})") from None


def _reason(error: Exception) -> str:
    """The first line of `error`'s message, or its type's name if it has none."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _draw(out: Path, name: str, figure_function, *args, **kwargs) -> list[Path]:
    """Call a `sim.study.plots` function with `path=out/name`; the two files it writes."""
    figure_function(*args, path=out / name, **kwargs)
    return [out / f"{name}{suffix}" for suffix in plots.FIGURE_SUFFIXES]


def _run_figures(
    results: Results, runs: dict[str, Results], out: Path, run_label: str
) -> list[Path]:
    """Figures of one run (`results`, named `run_label` in their titles), and of several
    runs side by side (`runs`). The jobs' figures (waits and completion times, the power
    model's energy-time curves under caps, which are training's) only if a run has a
    `[workload]`."""
    one = {"run_label": run_label}
    written = _draw(out, "power_and_carbon", plots.power_and_carbon, results, **one)
    written += _draw(out, "cumulative_carbon", plots.cumulative_carbon, runs)
    jobs = any(r.scenario.workload.has_jobs for r in runs.values())
    if jobs:
        written += _draw(out, "wait_and_completion_cdfs", plots.wait_and_completion_cdfs, runs)
    for i in range(min(len(results.dr_events), MAX_DR_EVENTS)):
        written += _draw(out, f"dr_event_{i}", plots.dr_event_closeup, results, event=i, **one)
    if not results.services.empty:
        written += _draw(out, "latency_cdfs", plots.latency_cdfs, results, **one)
        written += _draw(out, "carbon_per_1k_tokens", plots.carbon_per_1k_tokens, results, **one)
    if jobs:  # the power model's curves under caps are those of training jobs
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
    means = mean_ci(ok, by, ["carbon_total_kg", "wait_mean_h"], level=CI_LEVEL)
    means = means.rename(columns={"carbon_total_kg_mean": "carbon_total_kg",
                                  "wait_mean_h_mean": "wait_mean_h"})  # fmt: skip
    means["label"] = [_label(row, by) for row in means.to_dict("records")]
    seeds = sorted(ok["seed"].unique())
    written = _draw(
        out,
        "pareto_front",
        plots.pareto_front,
        means,
        label="label",
        interval=f"{CI_LEVEL:.0%} confidence interval of the mean over seeds {_seed_list(seeds)}",
    )
    heatmap = savings_table(ok, params)
    if heatmap is not None:
        table, options = heatmap
        written += _draw(out, "savings_heatmap", plots.savings_heatmap, table, **options)
    first_seed = ok[ok["seed"] == seeds[0]].head(MAX_LINES).to_dict("records")
    runs = {_label(row, by): _load_run(folder / "runs" / row["run_id"]) for row in first_seed}
    first_label = next(iter(runs)) + ("" if by == ["seed"] else f", seed {seeds[0]}")
    return written + _run_figures(next(iter(runs.values())), runs, out, first_label)


def savings_table(
    ok: pd.DataFrame, params: list[str]
) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """Rows x columns of the first two grid keys, and the keyword arguments of
    `plots.savings_heatmap` that describe them. With a `policy` key that includes the baseline
    policy: the paired carbon saving against it (%), with its `CI_LEVEL` paired bootstrap
    interval over seeds (`paired_differences`) as `low` and `high` and what it is as
    `interval`; else mean total carbon."""
    others = [p for p in params if p != "policy"]
    if "policy" in params and (ok["policy"] == BASELINE_POLICY).any() and others:
        diff = paired_differences(ok, "carbon_total_kg", baseline=BASELINE_POLICY, level=CI_LEVEL)

        def saved(column: str) -> pd.DataFrame:
            return -diff.pivot_table(index="policy", columns=others[0], values=column)

        return saved("change_pct"), {
            "value_label": f"total carbon saved vs {BASELINE_POLICY} (%)",
            "low": saved("change_pct_high"),  # the largest increase is the smallest saving
            "high": saved("change_pct_low"),
            "interval": _bootstrap_caption(diff),
        }
    if len(params) >= 2:
        table = ok.pivot_table(index=params[0], columns=params[1], values="carbon_total_kg")
        return table, {"value_label": "mean total carbon (kg CO2e)"}
    return None


def _bootstrap_caption(diff: pd.DataFrame) -> str:
    """What the intervals of `paired_differences` table `diff` are: their level, over how
    many seeds, by which bootstrap method (empty if no comparison has one)."""
    pairs = diff.loc[diff["change_pct_method"].notna(), "pairs"]
    if pairs.empty:
        return ""
    seeds = str(pairs.min()) if pairs.min() == pairs.max() else f"{pairs.min()}-{pairs.max()}"
    methods = set(diff["change_pct_method"].dropna())
    method = "BCa" if "BCa" in methods else "percentile: BCa is undefined"
    if methods == {"BCa", "percentile"}:
        method += ", percentile where it is undefined"
    return f"{CI_LEVEL:.0%} paired bootstrap interval over {seeds} seeds ({method})"


def _label(row: dict, by: list[str]) -> str:
    return ", ".join(str(row[k]) if k == "policy" else f"{k}={row[k]}" for k in by)


def _seed_list(seeds: list) -> str:
    """`0-4` for consecutive seeds, else `0, 2, 7`."""
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)
