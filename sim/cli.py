"""The `dcsim` command. User errors print one line and exit with status 2."""

from __future__ import annotations

import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from sim.api import Policy
from sim.config.loading import load_scenario
from sim.config.market import PriceConfig
from sim.config.overrides import parse_value
from sim.config.scenario import Scenario
from sim.engine.build import checked_engine, simulate
from sim.errors import DcsimError, ScenarioError, TraceError
from sim.plugins import build_policy
from sim.results import Results, git_revision, package_version


class _Command(typer.core.TyperCommand):
    """A command whose help reads like a man page: arguments as `FILE` (not `{file}`),
    options as `--out DIR` (not `<path>`), flags bare (not `<bool>`)."""

    def get_params(self, ctx: typer.core._click.Context) -> list:
        return _readable(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: typer.core._click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument) and param.required:
                pieces.append(param.display_name_raw)  # typer writes {file}
            else:
                pieces += param.get_usage_pieces(ctx)
        return pieces


class _Group(typer.core.TyperGroup):
    """A command group whose `--help` flag is shown bare (`_Command`)."""

    def get_params(self, ctx: typer.core._click.Context) -> list:
        return _readable(super().get_params(ctx))


class _Argument(typer.core.TyperArgument):
    """An argument whose help row shows its name (FILE), not also its type (<path>)."""

    def display_type_rich(self, ctx: typer.core._click.Context) -> None:
        return None


def _readable(params: list) -> list:
    """`params` with a metavar each: none for a flag, the upper-case name for an option or
    an argument that declares none; arguments shown without their type."""
    for param in params:
        if isinstance(param, typer.core.TyperArgument):
            param.__class__ = _Argument  # typer builds its own; only the help row differs
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.metavar is None:
            param.metavar = (param.name or "value").upper()
    return params


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    help="dcsim: simulate GPU datacenters for carbon-aware scheduling research.",
)
out_console = Console(soft_wrap=True)  # messages name paths: never break them
err_console = Console(stderr=True, soft_wrap=True)


def _print_version(wanted: bool) -> None:
    """`dcsim --version`: the installed version and, in a git checkout, its revision."""
    if wanted:
        revision = git_revision()
        suffix = f" (git {revision})" if revision else ""
        out_console.print(f"dcsim {package_version()}{suffix}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Show the version and exit"
        ),
    ] = False,
) -> None:
    """dcsim: simulate GPU datacenters for carbon-aware scheduling research."""


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a scenario key, e.g. sites[0].pue=1.3"
    ),
]


MANY_FILLED_HOURS = 1000
"""`grid-data list` flags zone-years with this many hours of filled data or more."""


def _check_out_folder(out: Path, option: str = "--out") -> None:
    """Make sure the results can be written to folder `out` (given as `option`) before
    anything runs: an existing folder, or a missing one that can be made."""
    if out.exists() and not out.is_dir():
        raise ScenarioError(f"{option} {out}: is a file, not a folder")
    _check_writable(out, f"{option} {out}")


def _check_out_file(out: Path, option: str = "--out") -> None:
    """Make sure file `out` (given as `option`) can be written before anything is read: not
    a folder, in a folder that exists or can be made (it is created when written)."""
    if out.is_dir():
        raise ScenarioError(f"{option} {out}: is a folder, not a file")
    _check_writable(out.parent, f"{option} {out}")


def _check_writable(folder: Path, label: str) -> None:
    """ScenarioError starting with `label` unless files can be written in `folder` or, if
    it is missing, in its nearest existing ancestor (which must be a folder). Nothing is
    left behind."""
    here = folder
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        raise ScenarioError(f"{label}: lies under a file ({here}), not a folder")
    try:  # a real write, as os.access passes for root and on read-only file systems
        with tempfile.TemporaryFile(dir=here):
            pass
    except OSError as e:
        raise ScenarioError(f"{label}: cannot write in {here} ({e.strerror})") from None


def _build_policy(scenario: Scenario, file: Path) -> Policy:
    """The scenario's policy; a parameter error names the scenario file, as every other
    error of the scenario's keys does."""
    try:
        return build_policy(scenario.policy.name, scenario.policy.params)
    except ScenarioError as e:
        raise ScenarioError(f"{file}: {e}") from None


def _load(file: Path, overrides: list[str] | None, seed: int | None = None) -> Scenario:
    items = list(overrides or [])
    if seed is not None:
        items.append(f"seed={seed}")
    return load_scenario(file, items)


@app.command(cls=_Command)
def validate(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    set_: SetOption = None,
) -> None:
    """Check a scenario and every file it names, without running it: the engine `run` would
    run is built and checked (`sim.engine.build.checked_engine`, the path `run` takes), so
    `validate` refuses what `run` refuses before its first event."""
    scenario = _load(file, set_)
    jobs = checked_engine(scenario, _build_policy(scenario, file)).jobs
    gpus = sum(p.count for s in scenario.sites for p in s.gpus)
    services = ""
    if scenario.services:
        services = f"{len(scenario.services)} services ({scenario.serving.fidelity}), "
    if scenario.functions is not None:
        services += f"{scenario.functions.functions} functions on {scenario.functions.site}, "
    out_console.print(
        f"{file}: ok: {len(scenario.sites)} sites, {gpus} GPUs, {len(jobs)} jobs, "
        f"{services}{scenario.duration_h:g} h from {scenario.start.isoformat()}, "
        f"policy {scenario.policy.name}"
    )


@app.command(cls=_Command)
def run(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    policy: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Run this policy (registry name, module:Class or file.py:Class) with its "
            "default parameters; give parameters with --set policy.params.NAME=VALUE",
        ),
    ] = None,
    set_: SetOption = None,
    seed: Annotated[
        int | None, typer.Option(metavar="N", help="Override the scenario's seed")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Write the result files here")
    ] = None,
) -> None:
    """Run a scenario, print its summary, and write the result files with --out."""
    overrides = list(set_ or [])
    if policy is not None:  # the scenario's params belong to the scenario's policy
        _check_one_policy_name(policy, overrides)
        overrides[:0] = [f"policy.name={_toml_string(policy)}", "policy.params={}"]
    scenario = _load(file, overrides, seed)
    if policy is not None:
        _note_unused_params(file, policy)
    if out is not None:
        _check_out_folder(out)
    # Built before the world: a parameter the policy does not take fails at once.
    built = _build_policy(scenario, file)
    with _LazyProgress(f"simulating {scenario.name}") as progress:
        results = simulate(scenario, built, progress=progress.update)
    out_console.print(_headline(results), markup=False, highlight=False)
    _print_summary(
        results.summary,
        scenario,
        bool(results.jobs["target_metric"].notna().any()),
        results.meta,
    )
    _note_mixed_kinds(results.meta["carbon_signals"])
    _print_sites(results.sites)
    if out is not None:
        results.save(out)
        out_console.print(f"results written to {out}/ ({', '.join(_files(out))})")


def _check_one_policy_name(policy: str, overrides: list[str]) -> None:
    """--policy and a --set of the policy's name would contradict each other."""
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key in ("policy", "policy.name"):
            raise ScenarioError(
                f"--policy {policy} and --set {item} both choose the policy; give one of them"
            )


def _note_unused_params(file: Path, policy: str) -> None:
    """Say so when --policy names the scenario's own policy, whose params it does not use."""
    own = tomllib.loads(file.read_bytes().decode("utf-8-sig")).get("policy")  # loaded before
    if isinstance(own, dict) and own.get("name") == policy and own.get("params"):
        err_console.print(
            f"note: --policy {policy} runs with its default parameters, not the scenario's "
            f"policy.params ({', '.join(map(str, own['params']))}); give them with "
            f"--set policy.params.NAME=VALUE",
            markup=False,
            highlight=False,
        )


@app.command(cls=_Command)
def sweep(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    out: Annotated[
        Path,
        typer.Option(metavar="DIR", help="Folder for summary.parquet and each run's files"),
    ],
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            metavar="KEY=V1,V2,...",
            help="Values of a scenario key to sweep (repeat for a grid), e.g. "
            "policy=run_now,wait_awhile or sites[0].pue=1.1,1.3",
        ),
    ] = None,
    seeds: Annotated[str, typer.Option(metavar="SEEDS", help="Seeds, e.g. 0-9 or 1,2,5")] = "0",
    set_: SetOption = None,
    workers: Annotated[
        int | None,
        typer.Option(metavar="N", help="Parallel runs (default: the number of CPUs)"),
    ] = None,
    dask: Annotated[
        bool,
        typer.Option(
            "--dask",
            help="Run on a Dask LocalCluster of --workers processes (needs the dask extra)",
        ),
    ] = False,
    scheduler: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Run on the Dask cluster at this address, e.g. tcp://host:8786 "
            "(needs the dask extra)",
        ),
    ] = None,
    baseline: Annotated[
        str,
        typer.Option(
            metavar="POLICY",
            help="With a grid over policy: the policy the others' changes are relative to",
        ),
    ] = "run_now",
) -> None:
    """Run a scenario over a grid of parameters and seeds; finished runs are reused."""
    from sim.study.experiments import parse_grid_item, parse_seeds
    from sim.study.experiments import sweep as run_sweep
    from sim.study.stats import DEFAULT_METRICS, mean_ci

    grid_values = dict(parse_grid_item(item) for item in grid or [])
    compared = "policy" in grid_values and len(grid_values["policy"]) > 1
    if compared and baseline not in grid_values["policy"]:
        raise ScenarioError(
            f"--baseline {baseline}: not among the swept policies "
            f"({', '.join(map(str, grid_values['policy']))})"
        )
    _check_out_folder(out)
    backend = "dask" if dask or scheduler else "local"
    with Progress(
        TextColumn("sweep"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=not err_console.is_terminal,
    ) as bar:
        task = bar.add_task("sweep", total=None)
        try:
            summary = run_sweep(
                file,
                grid_values,
                parse_seeds(seeds),
                out,
                overrides=set_ or [],
                backend=backend,
                workers=workers,
                scheduler=scheduler,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        except KeyboardInterrupt:
            done = bar.tasks[0].completed
            err_console.print(
                f"interrupted: {done:.0f} of {bar.tasks[0].total or '?'} runs finished, kept "
                f"in {out}/runs; the same command resumes the sweep",
                markup=False,
                highlight=False,
            )
            raise typer.Exit(130) from None
    params = summary.attrs["params"]
    table = Table(title=f"{file.name}: mean ± 95% CI half-width over seeds {seeds}")
    for col in params:
        table.add_column(col)
    for col in ("runs", *DEFAULT_METRICS):
        table.add_column(METRIC_HEADERS.get(col, col), justify="right")
    for row in mean_ci(summary, params or ["status"], DEFAULT_METRICS).to_dict("records"):
        cells = [_fmt(row[p]) for p in params] + [_fmt(row["runs"])]
        cells += [_fmt_ci(row, m) for m in DEFAULT_METRICS]
        table.add_row(*cells)
    out_console.print(table)
    if compared and ((summary["policy"] == baseline) & (summary["status"] == "ok")).any():
        _print_changes(summary, baseline, seeds)
    a = summary.attrs
    out_console.print(
        f"{len(summary)} runs: {a['runs_executed']} run, {a['runs_cached']} reused, "
        f"{a['runs_failed']} failed; summary in {out / 'summary.parquet'}"
    )
    failed = summary[summary["status"] == "failed"]
    for r in failed.head(5).itertuples():
        err_console.print(
            f"run {r.run} (seed {r.seed}) failed: {r.error}; see {out}/runs/{r.run_id}/error.txt",
            markup=False,
            highlight=False,
        )
    if len(failed):
        raise typer.Exit(1)


METRIC_HEADERS = {
    "carbon_total_kg": "carbon kg",
    "energy_facility_kwh": "energy kWh",
    "wait_mean_h": "wait h",
    "jct_mean_h": "JCT h",
}


def _print_changes(summary, baseline: str, seeds: str) -> None:
    """The sweep's relative changes against `baseline`, paired by seed and the other grid
    parameters, each with its paired bootstrap interval (`sim.study.stats.paired_differences`)."""
    from sim.study.stats import DEFAULT_METRICS, paired_differences

    tables = [paired_differences(summary, m, baseline=baseline) for m in DEFAULT_METRICS]
    keys = ["policy", *[p for p in summary.attrs["params"] if p != "policy"]]
    level = tables[0].attrs["change_pct_interval"]["level"]
    table = Table(
        title=f"change vs {baseline}, % [{level:.0%} paired bootstrap interval over seeds "
        f"{seeds} (BCa; percentile where BCa is undefined)]"
    )
    for col in keys:
        table.add_column(col)
    for col in DEFAULT_METRICS:
        table.add_column(METRIC_HEADERS.get(col, col), justify="right")
    for i, row in enumerate(tables[0][keys].to_dict("records")):
        cells = [_fmt(row[k]) for k in keys]
        cells += [_fmt_change(t.iloc[i]) for t in tables]
        table.add_row(*cells)
    out_console.print(table)


def _fmt_change(row) -> str:
    change, low, high = row["change_pct"], row["change_pct_low"], row["change_pct_high"]
    if low != low:  # fewer than two pairs, or no interval
        return _fmt(change)
    return f"{_fmt(change)} [{_fmt(low)}, {_fmt(high)}]"


def _fmt_ci(row: dict, metric: str) -> str:
    mean, low, high = (row[f"{metric}_{k}"] for k in ("mean", "ci_low", "ci_high"))
    if low != low:  # one run: no interval
        return _fmt(mean)
    return f"{_fmt(mean)} ± {_fmt((high - low) / 2)}"


@app.command(cls=_Command)
def plot(
    folder: Annotated[
        Path, typer.Argument(help="A folder written by `dcsim run --out` or `dcsim sweep --out`")
    ],
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Folder for the figures (default: FOLDER/figures)"),
    ] = None,
) -> None:
    """Draw the figures that fit a run's or a sweep's results, as PNG and PDF."""
    from sim.study.figure_sets import figures_for

    if out is not None:
        _check_out_folder(out)
    written = figures_for(folder, out)
    names = sorted({p.stem for p in written})
    out_console.print(
        f"{len(names)} figures (PNG and PDF) written to {written[0].parent}/: {', '.join(names)}"
    )


RENEWAL_HEADERS = {
    "energy_kwh": "kWh",
    "operational_kg": "oper. kg",
    "embodied_amortised_kg": "emb. amort. kg",
    "embodied_upfront_kg": "emb. upfront kg",
    "total_amortised_kg": "total amort. kg",
    "total_upfront_kg": "total upfront kg",
}
"""`dcsim fleet-renewal`'s table: a column per option total (`sim.study.fleet_renewal`)."""


@app.command(name="fleet-renewal", cls=_Command)
def fleet_renewal(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    replace_with: Annotated[
        str,
        typer.Option(
            "--replace-with", metavar="MODEL", help="A server model (servers.toml) or GPU model"
        ),
    ],
    horizon_years: Annotated[
        int, typer.Option("--horizon-years", metavar="N", help="Years the decision covers")
    ] = 5,
    site: Annotated[
        str | None, typer.Option(metavar="SITE", help="The site of the pool (default: the first)")
    ] = None,
    pool: Annotated[int, typer.Option(metavar="I", help="The pool's index at the site")] = 0,
    count: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="Servers (or GPUs) of the new pool (default: the old pool's GPUs)"
        ),
    ] = None,
    set_: SetOption = None,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Write fleet_renewal.csv and fleet_renewal.json here"),
    ] = None,
) -> None:
    """Extend an old pool or replace it: embodied and operational carbon and energy over a
    horizon of years, and the break-even year (docs/servers.md, "Extend or replace")."""
    from sim.study.fleet_renewal import fleet_renewal as run_fleet_renewal
    from sim.study.fleet_renewal import write_renewal

    scenario = _load(file, set_)
    if out is not None:
        _check_out_folder(out)
    with _LazyProgress(f"running {scenario.name} twice (extend, replace)"):
        rows, summary = run_fleet_renewal(scenario, replace_with, horizon_years, site, pool, count)
    table = Table(
        title=f"{summary['horizon_years']} years from {scenario.start.year}: "
        f"{summary['site']} pool {pool} extended or replaced by {replace_with}"
    )
    table.add_column("option")
    for header in RENEWAL_HEADERS.values():
        table.add_column(header, justify="right")
    for option in ("extend", "replace"):
        table.add_row(option, *(_fmt(summary[option][k]) for k in RENEWAL_HEADERS))
    out_console.print(table)
    out_console.print(
        f"break-even year: {summary['break_even_year_upfront'] or 'none'} (new hardware's "
        f"embodied carbon upfront), {summary['break_even_year_amortised'] or 'none'} "
        "(amortised); "
        f"the {summary['run_hours']:g} h run scaled x{summary['scale_per_year']:.4g} per year"
    )
    if out is not None:
        write_renewal(out, rows, summary)
        out_console.print(f"results written to {out}/ (fleet_renewal.csv, fleet_renewal.json)")


grid_app = typer.Typer(cls=_Group, no_args_is_help=True, help="The carbon-intensity zone catalog.")
app.add_typer(grid_app, name="grid-data")


@grid_app.command("list", cls=_Command)
def grid_list(
    zone: Annotated[str | None, typer.Option(help="Only this zone")] = None,
    year: Annotated[int | None, typer.Option(help="Only this year")] = None,
) -> None:
    """Zone-years in the catalog with their mean, p5, p95 and daily swing (g/kWh)."""
    from sim.grid.catalog import catalog

    cat = catalog()
    if zone is not None:
        cat = cat[cat["zone"] == zone]
    if year is not None:
        cat = cat[cat["year"] == year]
    table = Table(title=f"{len(cat)} zone-years, average lifecycle intensity, gCO2e/kWh")
    columns = ("zone", "name", "year", "mean", "p5", "p95", "daily swing", "hours filled")
    for col in columns:
        table.add_column(col, justify="left" if col in ("zone", "name") else "right")
    flagged = 0
    for r in cat.itertuples(index=False):
        many = r.gaps_filled >= MANY_FILLED_HOURS
        flagged += many
        table.add_row(
            r.zone,
            r.name,
            str(r.year),
            _fmt(r.mean_g_per_kwh),
            _fmt(r.p5_g_per_kwh),
            _fmt(r.p95_g_per_kwh),
            _fmt(r.daily_swing_g_per_kwh),
            _fmt(r.gaps_filled) + (" (!)" if many else ""),
        )
    out_console.print(table)
    if flagged:
        out_console.print(
            f"(!) {flagged} zone-years have {MANY_FILLED_HOURS:,} or more hours (of 8,760) in "
            f"which missing generation data was filled (grid_data/SOURCES.md): their hourly "
            f"shape is partly interpolated"
        )


@grid_app.command("show", cls=_Command)
def grid_show(
    zone: Annotated[str, typer.Argument(help="Zone id, e.g. DE")],
    year: Annotated[int | None, typer.Option(help="Year (default: the latest)")] = None,
    variant: Annotated[str, typer.Option(help="lifecycle or direct")] = "lifecycle",
    plot: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write a figure (PNG or PDF)")
    ] = None,
) -> None:
    """One zone-year: distribution, daily profile and weekly profile."""
    from sim.grid.catalog import catalog, load_zone, zone_years
    from sim.study.plots import check_figure_file

    if plot is not None:
        check_figure_file(plot)
        _check_out_file(plot, "--plot")
    year = year if year is not None else zone_years(zone)[-1]
    series = load_zone(zone, year, variant)
    row = catalog().query("zone == @zone and year == @year").iloc[0]
    local = series.tz_convert(row["timezone"])
    q = series.quantile([0.0, 0.05, 0.5, 0.95, 1.0]).to_numpy()
    out_console.print(
        f"{zone} ({row['name']}) {year}, {variant}: mean {series.mean():.1f} gCO2e/kWh; "
        f"min {q[0]:.1f}, p5 {q[1]:.1f}, median {q[2]:.1f}, p95 {q[3]:.1f}, max {q[4]:.1f}; "
        f"source {row['source']}"
    )
    table = Table(title=f"mean by hour of day ({row['timezone']}) and day of week, gCO2e/kWh")
    by_hour = local.groupby(local.index.hour).mean()
    by_day = local.groupby(local.index.day_of_week).mean()
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    for col in ("hour", "mean", " ", "hour ", "mean ", "  ", "day", "mean  "):
        table.add_column(col, justify="right")
    for i in range(12):
        day = (days[i], _fmt(by_day.iloc[i])) if i < 7 else ("", "")
        table.add_row(
            str(i), _fmt(by_hour.iloc[i]), "", str(i + 12), _fmt(by_hour.iloc[i + 12]), "", *day
        )
    out_console.print(table)
    if plot is not None:
        from sim.study.plots import zone_profile

        zone_profile(series, f"{zone} {year} ({variant})", row["timezone"], plot)
        out_console.print(f"figure written to {plot}")


@grid_app.command("build", cls=_Command)
def grid_build(
    wheels: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Folder with the source wheels")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Where to write; runs read it with DCSIM_GRID_DATA=DIR"),
    ] = None,
) -> None:
    """Regenerate the zone catalog from the generation data shipped on PyPI (see
    grid_data/SOURCES.md): into --out, else the folder runs read ($DCSIM_GRID_DATA, else
    the installed grid_data package, which in a source checkout is its grid_data/)."""
    from sim.grid.build import build
    from sim.grid.data_dir import grid_data_dir

    cat = build(out if out is not None else grid_data_dir(), wheel_dir=wheels)
    out_console.print(f"built {len(cat)} zone-years of {cat['zone'].nunique()} zones")


workload_app = typer.Typer(
    cls=_Group, no_args_is_help=True, help="Job and request traces: import and describe."
)
app.add_typer(workload_app, name="workload")


@workload_app.command("import", cls=_Command)
def workload_import(
    fmt: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="Jobs: philly, helios, pai2020, alibaba2023, swf, gaia or native; "
            "requests (docs/request-format.md): azure-llm or requests-csv",
        ),
    ],
    file: Annotated[Path, typer.Argument(help="The trace file")],
    out: Annotated[
        Path,
        typer.Option(
            metavar="FILE",
            help="Native job file to write (.parquet or .csv); for requests a .parquet file",
        ),
    ],
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option", metavar="KEY=VALUE", help="An importer option, e.g. keep_failed=true"
        ),
    ] = None,
    flex: Annotated[
        list[str] | None,
        typer.Option(
            "--flex",
            metavar="KEY=VALUE",
            help="Give jobs deadlines etc. (docs/workloads.md), e.g. deferrable_fraction=0.4",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the flexibility draws")] = 0,
    start: Annotated[
        str | None,
        typer.Option(
            metavar="TIME", help="UTC time of submit_time 0, for --flex slack=next_workday"
        ),
    ] = None,
) -> None:
    """Convert a public GPU-cluster trace to the native job format, or an LLM request trace
    to requests.parquet, and report every row."""
    from sim.serving.importers import REQUEST_FORMATS
    from sim.workload.importers import FORMATS, import_trace, write_native

    options = dict(_parse_option(o) for o in option or [])
    _check_out_file(out)
    if fmt in REQUEST_FORMATS:
        if flex:
            raise ScenarioError(f"--flex applies to job traces, not to request format {fmt}")
        _import_requests(fmt, file, out, options)
        return
    if fmt not in FORMATS:
        raise TraceError(
            f"unknown trace format {fmt!r}; job formats: {', '.join(FORMATS)}; "
            f"request formats: {', '.join(REQUEST_FORMATS)}"
        )
    frame, report = import_trace(fmt, file, **options)
    if flex:
        flex_options = dict(_parse_option(f) for f in flex)
        frame = _apply_flex(frame, flex_options, seed, start or report.trace_start)
        report.notes.append(f"flexibility: {', '.join(flex)} (seed {seed})")
    write_native(frame, out)
    out_console.print(report.render(), markup=False, highlight=False)
    out_console.print(f"{len(frame):,} jobs written to {out}")


def _import_requests(fmt: str, file: Path, out: Path, options: dict) -> None:
    from sim.serving.importers import import_requests
    from sim.serving.requests import write_requests

    if out.suffix != ".parquet":
        raise TraceError(f"{out}: requests are written as .parquet (e.g. requests.parquet)")
    table, report = import_requests(fmt, file, **options)
    meta = {"format": fmt, "source": str(file)}
    if report.trace_start:
        meta["trace_start"] = report.trace_start
    write_requests(table, out, metadata=meta)
    out_console.print(report.render(), markup=False, highlight=False)
    out_console.print(f"{len(table):,} requests written to {out}")


def _apply_flex(frame, flex: dict, seed: int, start: str | None):
    from datetime import UTC, datetime

    import numpy as np

    from sim.workload.flexibility import apply_flexibility

    try:
        t0 = datetime.fromisoformat(start) if start else datetime(2020, 1, 1, tzinfo=UTC)
    except ValueError:
        if flex.get("slack") == "next_workday":
            raise ScenarioError(
                f"--flex slack=next_workday needs --start (the trace starts at {start!r})"
            ) from None
        t0 = datetime(2020, 1, 1, tzinfo=UTC)  # only next_workday depends on the date
    if "slack_h" in flex:
        flex["slack_h"] = tuple(flex["slack_h"])
    frame = frame.assign(submit_time=frame["submit_time"].astype(float))
    try:
        return apply_flexibility(frame, start=t0, rng=np.random.default_rng(seed), **flex)
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"--flex: {e}") from None


def _parse_option(item: str) -> tuple[str, object]:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ScenarioError(f"--option {item!r}: expected key=value")
    return key.strip(), parse_value(text)


@workload_app.command("describe", cls=_Command)
def workload_describe(
    file: Annotated[Path, typer.Argument(help="A native job file or a requests.parquet")],
) -> None:
    """Counts, GPU mix, and duration and arrival histograms of a native job file; counts,
    token statistics and arrival rates of a request file."""
    from sim.serving.importers import describe_requests
    from sim.serving.requests import is_request_file
    from sim.workload.describe import describe

    for table in describe_requests(file) if is_request_file(file) else describe(file):
        out_console.print(table)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _files(out: Path) -> list[str]:
    from sim.results import FILES, OPTIONAL_FILES

    return [f for f in (*FILES, *OPTIONAL_FILES) if (out / f).exists()]


SUMMARY_GROUPS = (
    (
        "jobs",
        (
            "jobs_submitted",
            "jobs_completed",
            "jobs_rejected",
            "jobs_unfinished",
            "wait_",
            "jct_",
            "deadline_",
            "gpu_utilization",
            "slowdown_jain",
            "failures",
        ),
    ),  # fmt: skip
    ("training to a target", ("targets_reached", "time_to_accuracy", "energy_to_accuracy")),
    ("user rebound", ("rebound_",)),
    (
        "energy and carbon",
        (
            "energy_it",
            "energy_facility",
            "energy_jobs",
            "energy_idle",
            "energy_checkpoint",
            "work_lost",
            "carbon_operational",
            "carbon_embodied",
            "carbon_total",
        ),
    ),  # fmt: skip
    ("WAN", ("carbon_wan", "energy_wan", "wan_", "jobs_away")),
    ("demand response", ("dr_",)),
    (
        "inference services",
        (
            "requests_",
            "slo_",
            "ttft_",
            "tpot_",
            "tokens_",
            "energy_serving",
            "carbon_serving",
            "carbon_per_1k",
            "serving_",
        ),
    ),  # fmt: skip
    ("serverless functions", ("function_",)),
)
"""How the printed summary groups its keys (by prefix); the rest come last, under "run"."""


def _summary_group(key: str) -> str:
    for group, prefixes in SUMMARY_GROUPS:
        if key.startswith(prefixes):
            return group
    return "run"


def _print_summary(
    summary: dict, scenario: Scenario, targets: bool = False, meta: Mapping[str, Any] | None = None
) -> None:
    """The summary's keys in groups (services only when the scenario has some, training to
    a target only when a job had a target, user rebound only with `[rebound]`, serverless
    functions only with `[functions]`; keys whose value is null, of features the run does
    not use, are left out: they stay null in summary.json), with a note
    on signed quantities that read oddly, and what `meta` (meta.json) says the reader must
    know: GPUs without a price, zone-years read from another year."""
    table = Table(title=f"{scenario.name}: policy {scenario.policy.name}, seed {scenario.seed}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    groups: dict[str, list[str]] = {g: [] for g, _ in SUMMARY_GROUPS}
    groups["run"] = []
    for key in summary:
        groups[_summary_group(key)].append(key)
    if not scenario.services:
        del groups["inference services"]
    if not targets:
        del groups["training to a target"]
    if scenario.rebound is None:
        del groups["user rebound"]
    if scenario.functions is None:
        del groups["serverless functions"]
    for group, keys in groups.items():
        shown = [key for key in keys if _fmt(summary[key]) != "-"]  # null: a feature not used
        if shown:
            table.add_row(f"[bold]{group}[/bold]", "")
        for key in shown:
            table.add_row(f"  {key}", _fmt(summary[key]))
    out_console.print(table)
    notes = {
        "dr_energy_shed_kwh": "the sites drew more energy during the events than their "
        "baseline (the mean power in the hour before notice) would have",
        "dr_peak_reduction_kw": "the events' peak power was above the baseline",
    }
    for key, meaning in notes.items():
        value = summary.get(key)
        if isinstance(value, float) and value < 0:
            out_console.print(f"{key} < 0: {meaning}")
    meta = meta or {}
    unpriced = meta.get("prices", {}).get("missing", [])
    if unpriced and scenario.prices != PriceConfig():  # no [prices]: the run says nothing of cost
        out_console.print(
            f"cost_compute: unknown, no price for {', '.join(unpriced)} GPU-hours (docs/prices.md; "
            "give one in \\[prices.per_gpu_h])"
        )
    infeasible = summary.get("deadline_infeasible")
    if infeasible:
        out_console.print(
            f"deadline_infeasible: {infeasible} jobs had a deadline before their submission plus "
            f"the fastest runtime they could have; no policy meets those (ids in meta.json)"
        )
    for sub in meta.get("years", {}).get("substitutions", []):
        out_console.print(_year_substitution(sub), markup=False, highlight=False)
    for service, variants in meta.get("serving", {}).items():
        for variant, said in variants.items():
            if said["extrapolated"]:
                out_console.print(
                    f"serving model extrapolates {service} ({variant}): {'; '.join(said['why'])}",
                    markup=False,
                    highlight=False,
                )


def _headline(results: Results) -> str:
    """What the run found, in one line: with jobs at several sites, each site's operational
    carbon per GPU-hour of its jobs (kg CO2 per GPU-hour, their own energy at the site's
    grid and PUE) and how many times the dirtiest site's is the cleanest's; otherwise the
    run's total carbon (kg CO2) and facility energy (kWh)."""
    summary = results.summary
    ran = results.jobs[results.jobs["gpu_h"] > 0]
    per_site = ran.groupby("site", observed=True)[["carbon_kg", "gpu_h"]].sum()
    kg_per_gpu_h = (per_site["carbon_kg"] / per_site["gpu_h"]).sort_values(ascending=False)
    if len(kg_per_gpu_h) < 2 or kg_per_gpu_h.iloc[-1] <= 0:
        return (
            f"headline: {_fmt(summary['carbon_total_kg'])} kg CO2 in all, "
            f"{_fmt(summary['energy_facility_kwh'])} kWh of facility energy"
        )
    (dirtiest, high), (cleanest, low) = kg_per_gpu_h.iloc[[0, -1]].items()
    sites = ", ".join(f"{site} {_fmt(kg)}" for site, kg in kg_per_gpu_h.items())
    return (
        f"headline: a GPU-hour of work emits {high / low:.1f}x the carbon at {dirtiest} as at "
        f"{cleanest} (operational kg CO2 per GPU-hour of the jobs: {sites})"
    )


def _year_substitution(sub: Mapping[str, Any]) -> str:
    """One printed line for a zone-year substitution of meta.json's `years`."""
    where = "the WAN" if sub.get("wan") else f"site {sub['site']}"
    if sub.get("signal") == "decision_carbon":
        where += "'s decision_carbon"
    how = f"moved by {sub['shift_days']:+d} days"
    if sub["wrapped"]:
        how += ", repeated by whole weeks past the year's edge"
    read = ", ".join(map(str, sub["years_read"]))
    what = f"zone {sub['zone']}" + ("'s prices" if sub.get("prices") else "")
    return f"years = {sub['rule']!r}: {where} reads {what} from {read} ({how})"


def _note_mixed_kinds(carbon_signals: dict) -> None:
    """One line when the sites' signals mix average and marginal intensities (meta.json's
    `carbon_signals.mixed_kinds`): their carbon numbers are then not comparable."""
    for role in carbon_signals["mixed_kinds"]:
        kinds = {site: labels[role]["kind"] for site, labels in carbon_signals["sites"].items()}
        what = "decide on" if role == "decide" else "are charged on"
        out_console.print(
            f"carbon signals: the sites {what} different kinds of intensity "
            f"({', '.join(f'{site} {kind}' for site, kind in kinds.items())}; "
            "docs/marginal-signals.md)"
        )


SITE_HEADERS = {
    "site": "site",
    "gpus": "GPUs",
    "gpu_utilization": "utilisation",
    "energy_facility_kwh": "energy kWh",
    "carbon_operational_kg": "carbon kg",
    "carbon_operational_decision_kg": "decision carbon kg",
    "carbon_intensity_g_per_kwh": "gCO2/kWh",
    "jobs_run": "jobs",
}


def _print_sites(sites) -> None:
    table = Table(title="per site (facility energy, operational carbon)")
    for col in sites.columns:
        table.add_column(SITE_HEADERS.get(col, col), justify="left" if col == "site" else "right")
    for row in sites.itertuples(index=False):
        table.add_row(*(_fmt(v) for v in row))
    out_console.print(table)


def _fmt(value) -> str:
    """Numbers for people: thousands separators, about four significant digits."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, str):
        return value
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return f"{value:.3g}"


class _LazyProgress:
    """A progress bar that appears only once a run has lasted a few seconds."""

    def __init__(self, label: str, after_s: float = 2.0):
        self._label, self._after_s = label, after_s
        self._t0 = time.perf_counter()
        self._bar: tuple[Progress, TaskID] | None = None  # once shown: the bar, its task

    def __enter__(self) -> _LazyProgress:
        return self

    def update(self, fraction: float) -> None:
        if self._bar is None:
            if time.perf_counter() - self._t0 < self._after_s or not err_console.is_terminal:
                return
            bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            bar.start()
            self._bar = bar, bar.add_task(self._label, total=1.0)
        bar, task = self._bar
        bar.update(task, completed=fraction)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar[0].stop()


def main() -> None:
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(code) comes back here
    except DcsimError as e:
        err_console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err_console.print("aborted", markup=False)
        sys.exit(1)
    except Exception as e:
        # Usage errors of the command-line library (unknown option, missing argument): they
        # print themselves. Recognised by shape, as typer may or may not use click for them.
        show, exit_code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            sys.exit(exit_code)
        raise
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":  # python -m sim.cli, as the `dcsim` command
    main()
