"""The carbon-aware inference study: each inference lever alone and combined against
`serve_autoscale` on `scenarios/carbon_aware_inference.toml`, over seeds, as sweeps.

    python scripts/study_carbon_aware_inference.py --out out/cai          # full: 1 week, 3 seeds
    python scripts/study_carbon_aware_inference.py --out out/cai --quick  # 3 h, 1 seed

`notebooks/carbon_aware_inference.ipynb` calls `run_study` and `lever_table`; the runs are
kept under `out` (the sweep cache: a rerun reuses every finished run). The doc page with the
measured numbers is docs/study-carbon-aware-inference.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import sim
from sim.study.plots import OKABE_ITO, STYLE
from sim.study.stats import mean_ci, paired_differences

__all__ = [
    "BASELINE",
    "METRICS",
    "POLICIES",
    "SCENARIO",
    "lever_table",
    "load_study",
    "run_study",
    "served_where",
    "size",
    "tradeoff_figure",
]

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "carbon_aware_inference.toml"
SERVICES = ("chat_dk", "chat_gb", "code_hu")
ORIGINS = ("copenhagen", "london", "budapest")
"""Each service's first site, where it has one replica of its own model at the start."""

_DIRECTIVES: dict[str, Any] = {"name": "carbon_aware_directives"}
_ROUTING: dict[str, Any] = {"name": "carbon_aware_routing", "params": {"scale": True}}
_HETERO: dict[str, Any] = {"name": "heterogeneous_pool"}


def _chain(*members: dict[str, Any]) -> dict[str, Any]:
    return {"name": "chain", "params": {"policies": list(members)}}


POLICIES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "serve_autoscale": ({"name": "serve_autoscale"}, ()),
    "variants": ({"name": "carbon_aware_variants"}, ()),
    "directives": (_chain({"name": "serve_autoscale"}, _DIRECTIVES), ()),
    "hetero_pool": (_HETERO, ()),
    "hetero_pool_floor60": (
        _HETERO,
        tuple(f"services[{i}].quality_floor=60" for i in range(len(SERVICES))),
    ),
    "mig": (
        {"name": "mig_partitioner"},
        tuple(f"services[{i}].replicas={{{site}=0}}" for i, site in enumerate(ORIGINS)),
    ),
    "routing": (_ROUTING, ()),
    "variants+directives": (_chain({"name": "carbon_aware_variants"}, _DIRECTIVES), ()),
    "routing+directives": (_chain(_ROUTING, _DIRECTIVES), ()),
}
"""label -> (the policy as a sweep's `policy` value, scenario overrides of that label).
`mig` starts with no replica of the own model, so the services are served by what
`mig_partitioner` places: the 8B on 3g.40gb slices of Copenhagen's partitioned A100s (and
its bridge replicas on whole GPUs while it repartitions).
`hetero_pool_floor60` raises every service's quality floor to 60, so the 8B variants (48.3)
are out and the heterogeneous pool can only mix GPU types of the 70B."""

BASELINE = "serve_autoscale"

_MARKERS = "osD^vP*Xh"
"""One marker per lever of `POLICIES` in the figure: its eight Okabe-Ito colours repeat at
the ninth lever, the markers do not."""

METRICS = [
    "carbon_per_1k_tokens_g",
    "carbon_serving_kg",
    "energy_serving_kwh",
    "served_quality_mean",
    "served_below_floor_share",
    "slo_attainment",
    "cost_compute",
    "tokens_generated",
    "carbon_total_kg",
    "jobs_completed",
]
"""Summary keys reported per lever (units in their names; quality is MMLU-Pro points)."""


def size(quick: bool) -> tuple[list[int], list[str]]:
    """Seeds and size overrides: the full week over three seeds, or 3 h and one seed."""
    if quick:
        return [1], ["duration_h=3"]
    return [1, 2, 3], []


def _sweeps() -> list[tuple[tuple[str, ...], list[str]]]:
    """The levers grouped by their scenario overrides: one sweep per group, in order."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for label, (_, extra) in POLICIES.items():
        groups.setdefault(extra, []).append(label)
    return list(groups.items())


def run_study(out: Path, quick: bool = False, workers: int = 2) -> pd.DataFrame:
    """Run every lever over the seeds (one sweep per override group, `out/sweep<i>`; a
    rerun reuses the finished runs) and return `load_study(out)`."""
    seeds, overrides = size(quick)
    for index, (extra, labels) in enumerate(_sweeps()):
        sim.sweep(
            SCENARIO,
            grid={"policy": [POLICIES[label][0] for label in labels]},
            seeds=seeds,
            out=out / f"sweep{index}",
            overrides=[*overrides, *extra],
            workers=workers,
        )
    return load_study(out)


def load_study(out: Path) -> pd.DataFrame:
    """The runs of the sweeps under `out`: one row per run (the sweep's summary columns),
    with `lever` (its label in `POLICIES`) and `sweep` (its folder)."""
    frames = []
    for index, (_, labels) in enumerate(_sweeps()):
        folder = out / f"sweep{index}"
        summary = sim.load_sweep(folder)
        by_policy = dict(zip(summary["policy"].unique(), labels, strict=True))
        frames.append(summary.assign(lever=summary["policy"].map(by_policy), sweep=str(folder)))
    runs = pd.concat(frames, ignore_index=True)
    runs["lever"] = pd.Categorical(runs["lever"], categories=list(POLICIES), ordered=True)
    return runs


def served_where(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per run and service (each service's origin is one grid): its carbon, tokens and
    g CO2 per 1k tokens (NaN without tokens); and its served requests per site and variant
    (`n`). Only runs with status ok."""
    scenario = sim.load_scenario(SCENARIO)
    configs = {svc.name: svc for svc in scenario.services}
    per_service, where = [], []
    for _, row in runs[runs["status"] == "ok"].iterrows():
        results = sim.load_run(row["sweep"], row["run_id"])
        sv = results.services.groupby("service", observed=True)[["carbon_kg", "tokens"]].sum()
        sv["g_per_1k_tokens"] = 1e6 * sv["carbon_kg"] / sv["tokens"].where(sv["tokens"] > 0)
        tag = {"lever": row["lever"], "seed": row["seed"]}
        per_service.append(sv.reset_index().assign(**tag))
        req = results.requests
        if req is None:  # the study runs at the request level, which writes this table
            raise ValueError(f"{row['sweep']}: run {row['run_id']} has no requests table")
        served = req[req["state"] == "served"]
        counts = served.groupby(["service", "site", "variant"], observed=True).size()
        where.append(counts.rename("n").reset_index().assign(**tag))
    places = pd.concat(where, ignore_index=True)
    # the requests table gives a request's site as its index in the service's `sites`,
    # its variant as its index in the service's variants (its own model first)
    keys = list(zip(places["service"], places["site"], places["variant"], strict=True))
    places["site"] = [configs[s].sites[k] for s, k, _ in keys]
    places["variant"] = [configs[s].variant_specs()[v].name for s, _, v in keys]
    return pd.concat(per_service, ignore_index=True), places


def lever_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per lever, the mean and 95% t interval over seeds of every metric, and the paired
    change of carbon per 1k tokens against the baseline, %."""
    table = mean_ci(runs, by=["lever"], metrics=METRICS).set_index("lever")
    paired = paired_differences(
        runs, "carbon_per_1k_tokens_g", factor="lever", baseline=BASELINE, pair_on=["seed"]
    )
    return table.join(paired.set_index("lever").add_prefix("vs_baseline_"))


def tradeoff_figure(table: pd.DataFrame, title: str, path: Path | None = None) -> Figure:
    """Carbon per 1k tokens against served quality (left) and SLO attainment (right), one
    point per lever of `lever_table`, 95% intervals as error bars where there are several
    seeds. Levers that generated under half the baseline's tokens are left out (their carbon
    per token would set the scale), and the title says which. Writes `path`.png/.pdf if
    given."""
    served = table["tokens_generated_mean"] / table.loc[BASELINE, "tokens_generated_mean"]
    levers = list(table.index[served >= 0.5])
    left_out = [lever for lever in table.index if lever not in levers]
    if left_out:
        title += f"; left out (under half the baseline's tokens): {', '.join(left_out)}"
    y, yerr = table["carbon_per_1k_tokens_g_mean"], _errors(table, "carbon_per_1k_tokens_g")
    panels = [
        ("served_quality_mean", "served quality (MMLU-Pro, mean per request)"),
        ("slo_attainment", "SLO attainment (share of requests)"),
    ]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True, sharey=True)
        for ax, (metric, label) in zip(axes, panels, strict=True):
            x, xerr = table[f"{metric}_mean"], _errors(table, metric)
            for k, lever in enumerate(levers):
                i = table.index.get_loc(lever)
                ax.errorbar(
                    x.iloc[i],
                    y.iloc[i],
                    xerr=None if xerr is None else xerr[:, i : i + 1],
                    yerr=None if yerr is None else yerr[:, i : i + 1],
                    fmt=_MARKERS[k % len(_MARKERS)],
                    color=OKABE_ITO[k % len(OKABE_ITO)],
                    label=lever,
                    capsize=3,
                    markersize=7,
                )
            ax.set_xlabel(label)
            ax.set_ylim(bottom=0)
        axes[0].set_ylabel("serving carbon (g CO2 / 1k tokens)")
        axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.suptitle(title, fontsize=9)
        if path is not None:
            fig.savefig(path.with_suffix(".png"))
            fig.savefig(path.with_suffix(".pdf"))
    return fig


def _errors(table: pd.DataFrame, metric: str) -> np.ndarray | None:
    """Error bar lengths (below, above) of `metric`'s 95% interval; None with one seed."""
    mean, low, high = (table[f"{metric}_{s}"] for s in ("mean", "ci_low", "ci_high"))
    if low.isna().all():
        return None
    return np.vstack([mean - low, high - mean])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the sweeps")
    parser.add_argument("--quick", action="store_true", help="3 h and one seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--no-run", action="store_true", help="only read the sweeps already under --out"
    )
    parser.add_argument("--figures", type=Path, help="write the trade-off figure here")
    args = parser.parse_args()
    runs = load_study(args.out) if args.no_run else run_study(args.out, args.quick, args.workers)
    for _, row in runs[runs["status"] != "ok"].iterrows():
        print(f"FAILED {row['lever']} seed {row['seed']}: {row['error']}")
    table = lever_table(runs[runs["status"] == "ok"])
    per_service, places = served_where(runs)
    with pd.option_context("display.width", 250, "display.max_columns", 100):
        print(table.round(4).T.to_string())
        by_grid = per_service.groupby(["lever", "service"], observed=True)["g_per_1k_tokens"]
        print(by_grid.mean().unstack("service").round(4).to_string())
        share = places.groupby(["lever", "service", "site", "variant"], observed=True)["n"].sum()
        share = 100 * share / share.groupby(["lever", "service"], observed=True).transform("sum")
        print(share.round(1).to_string())
    if args.figures is not None:
        args.figures.mkdir(parents=True, exist_ok=True)
        seeds = int(table["runs"].max())
        tradeoff_figure(
            table,
            f"carbon_aware_inference: mean of {seeds} seed(s), 95% CI",
            args.figures / "carbon_aware_inference_tradeoffs",
        )


if __name__ == "__main__":
    main()
