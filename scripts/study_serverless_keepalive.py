"""The serverless keep-alive study (EcoLife's question): keep functions warm on the old or
the new hardware generation, and for how long? `scenarios/serverless_keepalive.toml`'s
functions (Azure-2019-calibrated, those invoked at most 2,000 times a day) run under three
policies: the platforms' fixed 10-minute window on the old generation (i3, 2016) only, on
the new one (m5zn, 2020) only, and the carbon-aware choice of window and generation
(EcoLife's, as an exhaustive search: docs/functions.md).

    python scripts/study_serverless_keepalive.py --out out/keepalive            # ~5 min
    python scripts/study_serverless_keepalive.py --out out/keepalive --check    # + claims
    python scripts/study_serverless_keepalive.py --out out/keepalive --quick    # 2 x 6 h

Cases: the scenario itself (a day of June 2020 on Germany's grid) and a week of January
and a week of June 2020 on a clean grid (France), a middling one (Germany) and a dirty one
(Poland). Each run is `sim.simulate` of the scenario with the overrides; a case's
invocations are the same under the three policies (the run's own `functions` stream).

Writes `runs.csv` (one row per case and policy: `row`'s columns) and
`study-serverless-keepalive.png`; `--check` asserts `CLAIMS` (AssertionError naming the
claim and the case). `notebooks/serverless_keepalive.ipynb` calls `study`, `savings` and
`figure`; the doc page with the measured numbers is docs/study-serverless-keepalive.md.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import sim
from sim.study.plots import OKABE_ITO, STYLE

__all__ = [
    "AWARE",
    "CLAIMS",
    "NEW",
    "OLD",
    "POLICIES",
    "SCENARIO",
    "cases",
    "check",
    "figure",
    "row",
    "savings",
    "study",
]

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "serverless_keepalive.toml"

POLICIES: dict[str, str] = {
    "fixed 10 min, old (i3)": '{ name = "fixed", window_s = 600, generation = "i3" }',
    "fixed 10 min, new (m5zn)": '{ name = "fixed", window_s = 600, generation = "m5zn" }',
    "carbon-aware": '{ name = "carbon_aware" }',
}
"""The compared keep-alive policies, as `functions.keep_alive` values."""
OLD, NEW, AWARE = POLICIES

ZONES = {"clean (FR)": "FR", "middling (DE)": "DE", "dirty (PL)": "PL"}
SEASONS = {"January": "2020-01-08T00:00:00Z", "June": "2020-06-03T00:00:00Z"}


def cases(quick: bool = False) -> dict[str, list[str]]:
    """The cases, name -> scenario overrides: the scenario as written, then a week per
    (zone, season) of 2020 (quick: the scenario and a dirty-grid case, 6 h each, numbers
    not meant to be read)."""
    if quick:
        short = ["duration_h=6"]
        return {
            "scenario (DE, June day)": short,
            "dirty (PL), June": [*short, 'sites[0].carbon={ zone = "PL", year = 2020 }'],
        }
    out: dict[str, list[str]] = {"scenario (DE, June day)": []}
    for season, start in SEASONS.items():
        for zone_name, zone in ZONES.items():
            out[f"{zone_name}, {season}"] = [
                f'sites[0].carbon={{ zone = "{zone}", year = 2020 }}',
                f"start={start}",
                "duration_h=168",
            ]
    return out


def row(summary: dict[str, Any], functions: pd.DataFrame) -> dict[str, float]:
    """One run's figures: the summary's counts and totals (`carbon_kg` is operational +
    embodied, `embodied_kg` its embodied part, `operational_kg` the rest), the operational
    (facility) carbon per kWh of IT energy, the delay a cold start adds (start - arrival,
    s: mean and p95 over all invocations, and the mean over cold ones), and how the work
    splits between the generations: invocations, instances opened (cold starts) and
    functions (by where most of their invocations ran) on the new generation (m5zn)."""
    delay_s = (functions["start_s"] - functions["arrival_s"]).to_numpy()
    cold = functions["cold"].to_numpy()
    on_new = (functions["generation"] == "m5zn").to_numpy()
    per_function_new = pd.Series(on_new).groupby(functions["function_id"].to_numpy()).mean()
    energy_kwh = float(summary["function_energy_kwh"])
    carbon_kg = float(summary["function_carbon_kg"])
    embodied_kg = float(summary["function_embodied_kg"])
    return {
        "invocations": int(summary["function_invocations"]),
        "cold_starts": int(summary["function_cold_starts"]),
        "cold_start_share": float(cold.mean()),
        "warm_gb_h": float(summary["function_warm_gb_h"]),
        "energy_kwh": energy_kwh,
        "carbon_kg": carbon_kg,
        "embodied_kg": embodied_kg,
        "operational_kg": carbon_kg - embodied_kg,
        "embodied_share": embodied_kg / carbon_kg,
        "g_per_kwh": 1000.0 * (carbon_kg - embodied_kg) / energy_kwh,
        "delay_mean_s": float(delay_s.mean()),
        "delay_p95_s": float(np.percentile(delay_s, 95)),
        "cold_delay_mean_s": float(delay_s[cold].mean()),
        "new_share_invocations": float(on_new.mean()),
        "new_share_instances": float(on_new[cold].mean()),
        "new_share_functions": float((per_function_new > 0.5).mean()),
    }


def _run(case: str, overrides: list[str], policy: str) -> dict[str, Any]:
    scenario = sim.load_scenario(SCENARIO, [*overrides, f"functions.keep_alive={POLICIES[policy]}"])
    t0 = time.perf_counter()
    results = sim.simulate(scenario)
    assert results.functions is not None, "the scenario has [functions]"
    wall_s = time.perf_counter() - t0
    return {
        "case": case,
        "policy": policy,
        **row(results.summary, results.functions),
        "wall_s": wall_s,
    }


def study(quick: bool = False, workers: int = 2) -> pd.DataFrame:
    """Every case of `cases(quick)` under every policy of `POLICIES`: one row per (case,
    policy) with `row`'s columns and the run's wall time (`wall_s`), run in `workers`
    processes (1: in this one)."""
    jobs = list(zip(*[(c, o, p) for c, o in cases(quick).items() for p in POLICIES], strict=True))
    if workers == 1:
        return pd.DataFrame(list(map(_run, *jobs)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return pd.DataFrame(list(pool.map(_run, *jobs)))


def savings(table: pd.DataFrame) -> pd.DataFrame:
    """Per case, each policy's carbon, cold starts and warm GB-h relative to the fixed 10
    minutes on the old generation (1 = the same), and the carbon-aware policy's share of
    instances opened on the new generation."""
    base = table[table["policy"] == OLD].set_index("case")
    out = table.set_index(["case", "policy"])[["carbon_kg", "cold_starts", "warm_gb_h"]]
    out = out.div(base[["carbon_kg", "cold_starts", "warm_gb_h"]], level="case")
    return out.rename(columns=lambda c: f"{c} / fixed old").reset_index()


def _by_case(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """`column` of `table` as one row per case, one column per policy."""
    return table.pivot(index="case", columns="policy", values=column)


def _less_carbon(table: pd.DataFrame) -> list[str]:
    carbon = _by_case(table, "carbon_kg")
    fixed = carbon[[OLD, NEW]].min(axis=1)
    return list(carbon.index[~(carbon[AWARE] < fixed)])


def _the_trade(table: pd.DataFrame) -> list[str]:
    warm, cold = _by_case(table, "warm_gb_h"), _by_case(table, "cold_starts")
    holds = (warm[AWARE] < warm[OLD]) & (cold[AWARE] > cold[OLD])
    return list(warm.index[~holds])


def _saving_is_energy(table: pd.DataFrame) -> list[str]:
    carbon, energy = _by_case(table, "operational_kg"), _by_case(table, "energy_kwh")
    gap = (carbon[AWARE] / carbon[OLD] - energy[AWARE] / energy[OLD]).abs()
    return list(carbon.index[~(gap < 0.01)])


def _both_generations(table: pd.DataFrame) -> list[str]:
    share = _by_case(table, "new_share_instances")[AWARE]
    return list(share.index[~((share > 0.05) & (share < 0.95))])


CLAIMS = {
    "the carbon-aware choice emits less carbon than the fixed 10 minutes on either "
    "generation": _less_carbon,
    "it holds less memory warm than the fixed 10 minutes on old, for more cold starts": (
        _the_trade
    ),
    "its operational carbon saving on the fixed 10 minutes on old is its energy saving, "
    "within 1 percentage point (it saves by energy, not by timing)": _saving_is_energy,
    "it opens instances on both generations (5% to 95% on the new one)": _both_generations,
}
"""The study's claims (docs/study-serverless-keepalive.md), each a function of `study`'s
table giving the cases where it fails; `check` asserts that there are none."""


def check(table: pd.DataFrame) -> None:
    """Assert every claim of `CLAIMS` on `study`'s table (AssertionError naming the claim
    and the cases where it fails)."""
    for text, failing_cases in CLAIMS.items():
        failing = failing_cases(table)
        assert not failing, f"claim fails: {text}; in {failing}"


def figure(table: pd.DataFrame) -> Figure:
    """Per case: (a) carbon of each policy relative to the fixed 10 minutes on the old
    generation; (b) cold starts against memory held warm (GB-h), both relative to the same;
    (c) the carbon-aware policy's share of instances and of invocations on the new
    generation."""
    rel = savings(table)
    case_names = list(dict.fromkeys(table["case"]))
    x = np.arange(len(case_names))
    with plt.rc_context(STYLE):
        fig, (carbon, trade, split) = plt.subplots(1, 3, figsize=(14.0, 4.2))
        width = 0.8 / len(POLICIES)
        for k, (policy, colour) in enumerate(zip(POLICIES, OKABE_ITO, strict=False)):
            group = rel[rel["policy"] == policy].set_index("case").loc[case_names]
            carbon.bar(
                x + (k - 1) * width,
                group["carbon_kg / fixed old"],
                width,
                color=colour,
                label=policy,
            )
            trade.scatter(
                group["warm_gb_h / fixed old"],
                group["cold_starts / fixed old"],
                color=colour,
                label=policy,
            )
        carbon.set_xticks(x, case_names, rotation=35, ha="right", fontsize=7)
        carbon.set_ylim(0.8, 1.05)
        carbon.axhline(1.0, color="0.5", lw=0.8)
        carbon.set_ylabel("function carbon / fixed 10 min on old")
        carbon.set_title("(a) carbon (operational + embodied)", fontsize=9)
        carbon.legend(fontsize=7, loc="lower left")
        trade.set_xlabel("warm GB-h / fixed 10 min on old")
        trade.set_ylabel("cold starts / fixed 10 min on old")
        trade.set_title("(b) the trade: memory held warm vs cold starts", fontsize=9)
        aware = table[table["policy"] == AWARE].set_index("case").loc[case_names]
        split.bar(
            x - 0.2, aware["new_share_instances"], 0.4, color=OKABE_ITO[2], label="instances opened"
        )
        split.bar(
            x + 0.2,
            aware["new_share_invocations"],
            0.4,
            color=OKABE_ITO[5],
            label="invocations run",
        )
        split.set_xticks(x, case_names, rotation=35, ha="right", fontsize=7)
        split.set_ylim(0, 1)
        split.set_ylabel("share on the new generation (m5zn)")
        split.set_title("(c) carbon-aware: old vs new", fontsize=9)
        split.legend(fontsize=7)
        fig.tight_layout()
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the table and figure")
    parser.add_argument("--quick", action="store_true", help="two cases of 6 h")
    parser.add_argument("--check", action="store_true", help="assert the study's claims")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    t0 = time.perf_counter()
    table = study(args.quick, args.workers)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "runs.csv", index=False)
    figure(table).savefig(args.out / "study-serverless-keepalive.png", dpi=150)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.drop(columns="wall_s").round(3).to_string(index=False))
        print(savings(table).round(3).to_string(index=False))
    if args.check:
        check(table)
        print(f"{len(CLAIMS)} claims hold")
    print(f"{len(table)} runs in {time.perf_counter() - t0:.0f} s; tables in {args.out}")


if __name__ == "__main__":
    main()
