"""The on-site energy study: the PV, wind and battery sizes that reach 90% and 99% 24/7 CFE
at `scenarios/onsite_energy.toml`'s site, with and without workload flexibility, ranked by
total carbon (grid-import operational + the equipment's embodied carbon).

    python scripts/study_onsite_energy.py --out out/onsite            # full: a year, 5x5x6 sizes
    python scripts/study_onsite_energy.py --out out/onsite --quick    # two weeks, 3x3x3 sizes
    python scripts/study_onsite_energy.py --out out/onsite --check    # + full runs at 3 sizes
    python scripts/study_onsite_energy.py --out out/onsite --flexible '{"name": "wait_awhile"}'

Method. Without a policy directing the battery, the site runs self-consumption and nothing
a generation-blind policy sees depends on the equipment: the run's power table is the same
at every size. So each workload setting is simulated once (`sim.sweep`, its runs kept in
`out`), and the balance of every (PV kWp, wind kW, battery kWh) is solved again on that
power table by the engine's own code (`resolve`: `sim.engine.onsite.OnsiteEnergy`'s
results hook on the run's tables, with the scenario at that size). A flexible policy that
reads the site's on-site state (not in `GENERATION_BLIND`) gets one run per (PV, wind)
size, the battery still by re-solving (exact for the policy's schedule at the scenario's
battery; an approximation at other batteries). `--check` runs the engine in full at three
sizes and asserts that the re-solve gives the same summary, bit for bit.

`notebooks/onsite_energy.ipynb` calls `study`, `cheapest` and `frontier_figure`; the doc
page with the measured numbers is docs/study-onsite-energy.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

import sim
from sim.config.scenario import Scenario
from sim.engine.onsite import OnsiteEnergy
from sim.grid import signal_for_site
from sim.results import ResultParts, Results
from sim.study.plots import OKABE_ITO, STYLE

__all__ = [
    "BATTERY_C_RATE",
    "FLEXIBLE",
    "GENERATION_BLIND",
    "INFLEXIBLE",
    "SCENARIO",
    "at_size",
    "cheapest",
    "check",
    "frontier_figure",
    "resolve",
    "sizes",
    "study",
]

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "onsite_energy.toml"
SITE = 0
"""The scenario's one site, whose equipment is swept."""

INFLEXIBLE: dict[str, Any] = {"name": "run_now"}
"""Without flexibility: every job starts as soon as GPUs are free (its slack unused)."""
FLEXIBLE: tuple[dict[str, Any], ...] = ({"name": "carbon_time"}, {"name": "follow_onsite"})
"""With flexibility, by default two settings: GAIA's carbon-time shifter on the grid's
forecast intensity (docs/policies-time-shifting.md) and `follow_onsite`, which moves the
jobs into the forecast on-site surplus (docs/policies-onsite-energy.md); `--flexible`
replaces them."""

GENERATION_BLIND = frozenset({"run_now", "carbon_time", "wait_awhile", "lowest_window"})
"""Policies whose schedule does not read the site's on-site generation or battery: one run
serves every size."""

BATTERY_C_RATE = 0.5
"""Battery power rating per kWh of capacity, kW/kWh (a 2-hour battery): a battery of two
hours of the mean load can carry the mean load."""


def sizes(quick: bool) -> tuple[list[str], list[float], list[float], list[float]]:
    """Scenario overrides and the swept PV kWp, wind kW and battery kWh: a year on a 5 x 5
    x 6 grid (the site's mean facility load is about 25 kW), or two weeks of June on 3 x 3
    x 3 (quick: numbers not meant to be read)."""
    if quick:
        overrides = [
            "start=2019-06-01T00:00:00Z",
            "duration_h=336",
            "workload.synthetic.max_jobs=600",
        ]
        return overrides, [0.0, 100.0, 400.0], [0.0, 50.0, 200.0], [0.0, 100.0, 400.0]
    grid = [0.0, 50.0, 100.0, 200.0, 400.0]
    return [], grid, grid, [*grid, 800.0]


def at_size(scenario: Scenario, pv_kwp: float, wind_kw: float, battery_kwh: float) -> Scenario:
    """`scenario` with the site's PV, onshore wind and battery set (battery 0: none; power
    `BATTERY_C_RATE` x capacity); the other equipment keys as the scenario gives them."""
    site = scenario.sites[SITE]
    assert site.onsite is not None and site.battery is not None, "the scenario sets both"
    onsite = site.onsite.model_copy(update={"pv_kwp": pv_kwp, "wind_kw": wind_kw})
    battery = (
        None
        if battery_kwh == 0
        else site.battery.model_copy(
            update={"capacity_kwh": battery_kwh, "power_kw": BATTERY_C_RATE * battery_kwh}
        )
    )
    sites = list(scenario.sites)
    sites[SITE] = site.model_copy(update={"onsite": onsite, "battery": battery})
    return scenario.model_copy(update={"sites": sites})


_ONSITE_SITE_COLUMNS = [
    "carbon_load_kg",
    "energy_grid_import_kwh",
    "energy_onsite_generation_kwh",
    "export_credit",
    "cfe_score",
    "carbon_market_based_kg",
]
"""The `sites` columns the on-site hook writes (`OnsiteEnergy._sites`)."""


def resolve(run: Results, scenario: Scenario) -> tuple[dict[str, Any], pd.DataFrame]:
    """The on-site summary keys and hourly `onsite` table that a run of `scenario` would
    have, solved on `run`'s power table (a run whose facility power does not depend on the
    equipment) by the engine's own hook, `OnsiteEnergy.write_results`, on the run's
    tables with the gross carbon restored. `carbon_embodied_kg` is the equipment's only."""
    horizon_s = scenario.horizon_s
    signals = [
        signal_for_site(site, i, scenario.start, horizon_s, scenario.years)
        for i, site in enumerate(scenario.sites)
    ]
    core = SimpleNamespace(scenario=scenario, horizon_s=horizon_s)
    fleet = SimpleNamespace(  # what the hook reads of the fleet; no tariff: no bill
        names=[s.name for s in scenario.sites],
        sites=[SimpleNamespace(signal=s) for s in signals],
        tariffs=[None for _ in signals],
    )
    sites = run.sites.copy()
    sites["carbon_operational_kg"] = sites["carbon_load_kg"]
    sites = sites.drop(columns=_ONSITE_SITE_COLUMNS)
    parts = ResultParts(power=run.power, events=pd.DataFrame())
    parts.tables["sites"] = sites
    parts.summary["carbon_embodied_kg"] = 0.0
    services = SimpleNamespace()  # read only during a run
    OnsiteEnergy(core, fleet=fleet, services=services).write_results(parts)  # type: ignore[arg-type]
    return parts.summary, parts.tables["onsite"]


def _row(summary: dict[str, Any], hourly: pd.DataFrame) -> dict[str, float]:
    """One size's figures: 24/7 CFE with the grid's carbon-free share and on-site only,
    grid import, operational (location-based, on grid import), equipment embodied and
    total carbon (kg over the run)."""
    load_kwh = float(hourly["load_kwh"].sum())
    operational = float(summary["carbon_operational_kg"])
    embodied = float(summary["carbon_embodied_kg"])
    return {
        "cfe_score": float(summary["cfe_score"]),
        "cfe_onsite": float(hourly["carbon_free_to_load_kwh"].sum()) / load_kwh,
        "load_kwh": load_kwh,
        "grid_import_kwh": float(summary["grid_import_kwh"]),
        "carbon_operational_kg": operational,
        "carbon_embodied_equipment_kg": embodied,
        "carbon_total_kg": operational + embodied,
    }


def study(
    out: Path,
    quick: bool = False,
    flexible: tuple[dict[str, Any], ...] = FLEXIBLE,
    workers: int = 2,
) -> pd.DataFrame:
    """Every size of `sizes(quick)` for each setting, "inflexible" and one "flexible NAME"
    per policy of `flexible`: one row per (`setting`, `pv_kwp`, `wind_kw`, `battery_kwh`)
    with `_row`'s columns and the run it was solved on (`run_id`). The runs are a sweep per
    setting under `out` (kept: a rerun reuses them)."""
    overrides, pv_grid, wind_grid, battery_grid = sizes(quick)
    rows = []
    settings = [("inflexible", INFLEXIBLE)] + [(f"flexible {p['name']}", p) for p in flexible]
    for setting, policy in settings:
        per_generation = policy["name"] not in GENERATION_BLIND
        grid: dict[str, list[Any]] = {"policy": [policy]}
        if per_generation:
            grid |= {f"sites[{SITE}].onsite.pv_kwp": pv_grid}
            grid |= {f"sites[{SITE}].onsite.wind_kw": wind_grid}
        folder = out / setting.replace(" ", "_")
        summary = sim.sweep(
            SCENARIO, grid=grid, seeds=[1], out=folder, overrides=overrides, workers=workers
        )
        failed = summary[summary["status"] != "ok"]
        if len(failed):
            raise RuntimeError(f"{setting}: run failed: {failed['error'].iloc[0]}")
        base = sim.load_scenario(SCENARIO, overrides)
        for _, run_row in summary.iterrows():
            run = sim.load_run(folder, run_row["run_id"])
            if per_generation:
                pvs = [float(run_row[f"sites[{SITE}].onsite.pv_kwp"])]
                winds = [float(run_row[f"sites[{SITE}].onsite.wind_kw"])]
            else:
                pvs, winds = pv_grid, wind_grid
            for pv, wind, battery in itertools.product(pvs, winds, battery_grid):
                solved = resolve(run, at_size(base, pv, wind, battery))
                rows.append(
                    {
                        "setting": setting,
                        "pv_kwp": pv,
                        "wind_kw": wind,
                        "battery_kwh": battery,
                        **_row(*solved),
                        "run_id": run_row["run_id"],
                    }
                )
    return pd.DataFrame(rows)


def cheapest(table: pd.DataFrame, targets: tuple[float, ...] = (0.9, 0.99)) -> pd.DataFrame:
    """Per setting and CFE target, the size with the least total carbon among those whose
    `cfe_score` reaches it (NaN sizes where none of the swept sizes does), with the
    number of sizes that reach it (`reaching`)."""
    rows = []
    for setting, target in itertools.product(table["setting"].unique(), targets):
        group = table[(table["setting"] == setting) & (table["cfe_score"] >= target)]
        best = (
            group.loc[group["carbon_total_kg"].idxmin()].to_dict()
            if len(group)
            else {"setting": setting}
        )
        rows.append({**best, "target": target, "reaching": len(group)})
    columns = ["setting", "target", "reaching", "pv_kwp", "wind_kw", "battery_kwh"]
    return pd.DataFrame(rows).reindex(columns=[*columns, *_ROW_COLUMNS])


_ROW_COLUMNS = [
    "cfe_score",
    "cfe_onsite",
    "grid_import_kwh",
    "carbon_operational_kg",
    "carbon_embodied_equipment_kg",
    "carbon_total_kg",
]


def _front(group: pd.DataFrame, column: str) -> pd.DataFrame:
    """The sizes of `group` with the least `column` among those of at least their CFE
    score (the Pareto front of CFE up, `column` down), by CFE score descending."""
    ordered = group.sort_values(["cfe_score", column], ascending=[False, True])
    return ordered[ordered[column].cummin() == ordered[column]]


def frontier_figure(table: pd.DataFrame) -> Figure:
    """Per setting, against 24/7 CFE: (a) total carbon (t over the run), every size a dot,
    the least total carbon at each CFE or above a line, the equipment-free size (the
    grid's carbon-free share alone) a cross; (b) the least embodied carbon of equipment
    (t over the run) that reaches each CFE."""
    with plt.rc_context(STYLE):
        fig, (total, embodied) = plt.subplots(1, 2, figsize=(10.0, 4.0))
        groups = table.groupby("setting", sort=False)
        for colour, (setting, group) in zip(OKABE_ITO, groups, strict=False):
            t = group["carbon_total_kg"] / 1000
            total.scatter(group["cfe_score"], t, s=6, alpha=0.3, color=colour)
            front = _front(group, "carbon_total_kg")
            total.step(
                front["cfe_score"],
                front["carbon_total_kg"] / 1000,
                where="post",
                color=colour,
                label=setting,
            )
            bare = (group["pv_kwp"] == 0) & (group["wind_kw"] == 0) & (group["battery_kwh"] == 0)
            total.scatter(group["cfe_score"][bare], t[bare], marker="x", color=colour, s=40)
            front = _front(group, "carbon_embodied_equipment_kg")
            embodied.step(
                front["cfe_score"],
                front["carbon_embodied_equipment_kg"] / 1000,
                where="post",
                color=colour,
                marker=".",
                label=setting,
            )
        for ax in (total, embodied):
            for target in (0.9, 0.99):
                ax.axvline(target, color="0.6", lw=0.8, ls="--")
            ax.set_xlabel("24/7 CFE score (grid carbon-free share included)")
            ax.legend(fontsize=8, loc="upper center")
        total.set_ylabel("total carbon over the run, t CO2e\n(grid import + equipment embodied)")
        total.set_title("(a) total carbon; line: least at this CFE or above", fontsize=9)
        embodied.set_ylabel("equipment embodied carbon over the run, t CO2e")
        embodied.set_title("(b) least embodied carbon reaching this CFE", fontsize=9)
        fig.tight_layout()
    return fig


def check(out: Path, quick: bool, table: pd.DataFrame) -> pd.DataFrame:
    """Full engine runs of the inflexible setting at three sizes (in `out/check`) against
    the re-solve's figures: the summary's cfe_score, grid_import_kwh and
    carbon_operational_kg must be equal, bit for bit (AssertionError otherwise)."""
    overrides, pv_grid, wind_grid, battery_grid = sizes(quick)
    base = sim.load_scenario(SCENARIO, overrides)
    picks = [
        (pv_grid[1], wind_grid[0], battery_grid[-1]),
        (pv_grid[-1], wind_grid[-1], battery_grid[1]),
        (pv_grid[0], wind_grid[-1], battery_grid[0]),
    ]
    rows = []
    for pv, wind, battery in picks:
        full = sim.simulate(at_size(base, pv, wind, battery), policy=INFLEXIBLE["name"])
        solved = table[
            (table["setting"] == "inflexible")
            & (table["pv_kwp"] == pv)
            & (table["wind_kw"] == wind)
            & (table["battery_kwh"] == battery)
        ].iloc[0]
        row = {"pv_kwp": pv, "wind_kw": wind, "battery_kwh": battery}
        for key in ("cfe_score", "grid_import_kwh", "carbon_operational_kg"):
            row[f"{key} (run)"] = full.summary[key]
            row[f"{key} (re-solve)"] = solved[key]
            assert full.summary[key] == solved[key], (row, key)
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs and tables")
    parser.add_argument("--quick", action="store_true", help="two weeks, 3 x 3 x 3 sizes")
    parser.add_argument("--check", action="store_true", help="full runs at three sizes")
    parser.add_argument(
        "--flexible",
        type=json.loads,
        action="append",
        help='a flexible setting\'s policy, JSON, e.g. \'{"name": "wait_awhile"}\' (repeat '
        "for several; default: carbon_time and follow_onsite)",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    t0 = time.perf_counter()
    flexible = FLEXIBLE if args.flexible is None else tuple(args.flexible)
    table = study(args.out, args.quick, flexible, args.workers)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "sizes.csv", index=False)
    best = cheapest(table)
    best.to_csv(args.out / "cheapest.csv", index=False)
    frontier_figure(table).savefig(args.out / "onsite_frontier.png", dpi=150)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(best.round(3).to_string(index=False))
        if args.check:
            print(check(args.out, args.quick, table).to_string(index=False))
    print(f"{len(table)} sizes in {time.perf_counter() - t0:.0f} s; tables in {args.out}")


if __name__ == "__main__":
    main()
