"""The project's zone catalog (`grid_data/`) and the signal of a scenario's site.

`grid_data/catalog.csv` lists one row per zone-year; each zone-year is an hourly Parquet
file of average carbon intensity (g/kWh, UTC, hour starts) in two variants of emission
factors, `lifecycle` and `direct`. `dcsim grid-data build` derives them; see
`grid_data/SOURCES.md`. `grid_data/catalog_marginal.csv` lists the zone-years that also
have a marginal series (one column, g/kWh, labelled with its `method`;
`sim.grid.build_marginal` derives them, docs/marginal-signals.md).

Years (`years` of a scenario; docs/grid-years.md). A run reads each zone's trace of its own
years. When it needs a zone-year the catalog lacks (its start year, a `year` other than the
run's, or a horizon that spills into a missing next year), the scenario must choose a rule:

- ``years = "align"``: a trace of another year is moved by a whole number of days so that
  the scenario start falls on the same weekday and hour of the day as in the trace, within
  three days of the same day of the year (weekly and daily cycles stay where they were,
  seasons move by at most three days); a horizon past the end of the trace's year continues
  into the catalog's next year of the same zone (an error if it has none).
- ``years = "wrap"``: moved the same way, but the run never leaves the trace's year: a time
  past its end (or before its start) is read whole weeks (364 days) earlier (later), so
  weekday and hour stay.

Without a rule no substitution is made: a run that needs one is an error naming the rule to
choose. Every substitution is a `YearPlan`, recorded in meta.json and printed by `dcsim run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sim.errors import ScenarioError
from sim.grid.data_dir import grid_data_dir, read_catalog_csv
from sim.grid.factors import VARIANTS
from sim.grid.loaders import load_trace
from sim.grid.signal import SERIES_NAME, CarbonSignal

if TYPE_CHECKING:
    from sim.config.sites import CarbonConfig, Site


KINDS = ("average", "marginal")
_CATALOG_FILES = {"average": "catalog.csv", "marginal": "catalog_marginal.csv"}
_BUILDERS = {"average": "dcsim grid-data build", "marginal": "python -m sim.grid.build_marginal"}


def catalog(kind: str = "average") -> pd.DataFrame:
    """One row per zone-year of `kind`'s catalog. Average (`catalog.csv`): zone, name,
    region, source, year, lat, lon, timezone, file, data-cleaning counts and summary
    statistics (g/kWh, lifecycle variant). Marginal (`catalog_marginal.csv`): zone, year,
    method, source, file, hours, gaps_filled, statistics (g/kWh) and the build's notes."""
    return read_catalog_csv(grid_data_dir() / _CATALOG_FILES[kind], f"{kind} zone", _BUILDERS[kind])


def available_zones(kind: str = "average") -> list[tuple[str, int]]:
    """(zone, year) pairs in `kind`'s catalog, sorted."""
    cat = catalog(kind)
    return sorted(zip(cat["zone"], cat["year"].astype(int), strict=True))


def zone_years(zone: str, kind: str = "average") -> list[int]:
    """The years of `zone` in `kind`'s catalog; ScenarioError if there is none: a zone of
    no catalog is unknown (naming the zones), a zone without a marginal series says so
    (naming the zones that have one)."""
    cat = catalog(kind)
    years = sorted(int(y) for y in cat.loc[cat["zone"] == zone, "year"])
    if not years:
        average = set(catalog("average")["zone"])
        if kind == "marginal" and zone in average:
            known = ", ".join(sorted(set(cat["zone"])))
            raise ScenarioError(f"zone {zone!r} has no marginal series; zones with one: {known}")
        known = ", ".join(sorted(average | set(cat["zone"])))
        raise ScenarioError(f"unknown zone {zone!r}; zones: {known} (see `dcsim grid-data list`)")
    return years


def _row(zone: str, year: int, kind: str) -> pd.Series:
    cat = catalog(kind)
    return cat[(cat["zone"] == zone) & (cat["year"] == year)].iloc[0]


@lru_cache(maxsize=64)
def _zone_frame(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path).set_index("timestamp")


def load_zone(zone: str, year: int, variant: str = "lifecycle", kind: str = "average") -> pd.Series:
    """Hourly carbon intensity (g/kWh, UTC index of hour starts) of `zone` in `year`: the
    average intensity in emission-factor `variant`, or (`kind` "marginal") the marginal
    series, which has one variant, that of its method.
    `attrs["repairs"]` holds the catalog's cleaning counts of the zone-year (whole year):
    "gaps_filled_h" (hours in which data was filled) and "negatives_clipped";
    `attrs["method"]` how the series was derived (`zone_method`)."""
    if variant not in VARIANTS:
        raise ScenarioError(f"unknown variant {variant!r}; variants: {', '.join(VARIANTS)}")
    if kind not in KINDS:
        raise ScenarioError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    years = zone_years(zone, kind)
    if year not in years:
        raise ScenarioError(f"zone {zone} has no {kind} trace for {year}; years: {_span(years)}")
    column = "marginal_g_per_kwh" if kind == "marginal" else f"{variant}_g_per_kwh"
    row = _row(zone, year, kind)
    series = (
        _zone_frame(grid_data_dir() / row["file"])[column].astype("float64").rename(SERIES_NAME)
    )
    repairs = {key: int(row[col]) if col in row else 0 for key, col in _CATALOG_REPAIRS.items()}
    series.attrs = {"repairs": repairs, "method": zone_method(zone, year, variant, kind)}
    return series


def zone_method(zone: str, year: int, variant: str = "lifecycle", kind: str = "average") -> str:
    """How a catalog series was derived: "average-mix-{variant}" (generation-weighted
    emission factors, `sim.grid.factors`), or the marginal catalog's `method` label."""
    if kind == "marginal":
        return str(_row(zone, year, kind)["method"])
    return f"average-mix-{variant}"


_CATALOG_REPAIRS = {"gaps_filled_h": "gaps_filled", "negatives_clipped": "negative_clipped"}
"""Repair count (`sim.grid.loaders.REPAIR_KEYS`) -> the catalog column that holds it (a
catalog without the column, the marginal one for negatives, counts 0)."""


def summed_repairs(*series: pd.Series) -> dict[str, int]:
    """The repair counts (`attrs["repairs"]`) of several traces, added key by key."""
    total: dict[str, int] = {}
    for s in series:
        for key, count in s.attrs.get("repairs", {}).items():
            total[key] = total.get(key, 0) + int(count)
    return total


def alignment_offset(start: datetime, trace_year: int) -> timedelta:
    """Whole days to add to times of `trace_year` so that they line up with a scenario that
    starts at `start`, keeping weekday and hour (see the module docstring)."""
    start = start.astimezone(UTC)
    if start.year == trace_year:
        return timedelta(0)
    into_year = start - datetime(start.year, 1, 1, tzinfo=UTC)
    anchor = datetime(trace_year, 1, 1, tzinfo=UTC) + into_year
    shift = (start.weekday() - anchor.weekday()) % 7
    anchor += timedelta(days=shift - 7 if shift > 3 else shift)
    return start - anchor


YEAR_RULES = ("align", "wrap")
"""The scenario's `years` choices (module docstring); None: no substitution."""

WRAP = timedelta(days=364)
"""`wrap` reads a time outside the trace's year this much earlier or later: 52 whole weeks."""


@dataclass(frozen=True)
class YearPlan:
    """Which catalog years a zone's trace is read from for a run, and how they are moved."""

    zone: str
    rule: str | None
    """The scenario's `years` (None: no substitution allowed)."""
    trace_year: int
    """The catalog year the run's start falls in once moved."""
    shift_days: int
    """Whole days added to the trace's times (0: the run's own year)."""
    years_read: tuple[int, ...]
    wrapped: bool
    """`wrap` repeated part of the trace year by whole weeks to cover the horizon."""

    @property
    def substituted(self) -> bool:
        """Whether the run sees anything but its own years' data, unmoved."""
        return self.shift_days != 0 or self.wrapped

    def meta(self) -> dict[str, object]:
        return {
            "zone": self.zone,
            "rule": self.rule,
            "trace_year": self.trace_year,
            "shift_days": self.shift_days,
            "years_read": list(self.years_read),
            "wrapped": self.wrapped,
        }


def year_plan(
    zone: str,
    start: datetime,
    horizon_s: float,
    year: int | None,
    rule: str | None,
    kind: str = "average",
) -> YearPlan:
    """The years `zone`'s trace of `kind` is read from to cover [start, start + horizon_s]
    under `rule` (module docstring). ScenarioError naming the missing years and the rules."""
    return plan_years(zone, zone_years(zone, kind), start, horizon_s, year, rule)


def plan_years(
    zone: str,
    years: list[int],
    start: datetime,
    horizon_s: float,
    year: int | None,
    rule: str | None,
    what: str = "trace",
) -> YearPlan:
    """`year_plan` for any yearly data of `zone` whose available `years` are given (the
    carbon catalog's trace, the wholesale prices); `what` names the data in errors."""
    if rule is not None and rule not in YEAR_RULES:
        raise ScenarioError(f"years must be one of {', '.join(YEAR_RULES)}, got {rule!r}")
    start = start.astimezone(UTC)
    first = year if year is not None else start.year if start.year in years else years[-1]
    if first not in years:
        raise ScenarioError(f"zone {zone} has no data for {first}; years: {_span(years)}")
    offset = alignment_offset(start, first)
    t0 = start - offset
    t1 = t0 + timedelta(seconds=horizon_s)
    needed = tuple(range(t0.year, t1.year + 1))
    if rule is None and first != start.year:
        raise ScenarioError(
            f"zone {zone}: the run starts in {start.year} but reads the {what} of {first} "
            f'(available: {_span(years)}); choose how in the scenario: years = "align" '
            f'(moved by whole days, keeping weekday and hour) or years = "wrap" (and '
            f"repeated by whole weeks within that year); see docs/grid-years.md"
        )
    if rule == "wrap":
        return YearPlan(zone, rule, first, offset.days, (first,), needed != (first,))
    missing = [y for y in needed if y not in years]
    if missing:
        raise ScenarioError(
            f"zone {zone}: the scenario needs its {what} from {t0:%Y-%m-%d %H:%M} to "
            f"{t1:%Y-%m-%d %H:%M} UTC (from {first}), but the catalog has "
            f'{_span(years)}, not {", ".join(map(str, missing))}; years = "wrap" stays '
            f"within {first} (docs/grid-years.md)"
        )
    return YearPlan(zone, rule, first, offset.days, needed, False)


def zone_series(
    zone: str,
    start: datetime,
    horizon_s: float,
    year: int | None = None,
    variant: str = "lifecycle",
    rule: str | None = None,
    kind: str = "average",
) -> pd.Series:
    """`zone`'s hourly trace of `kind` covering [start, start + horizon_s] on the run's clock
    (UTC), read as `year_plan` says; its `attrs["repairs"]` adds up those of the zone-years
    read, `attrs["method"]` joins their methods, `attrs["year_plan"]` is the plan."""
    plan = year_plan(zone, start, horizon_s, year, rule, kind)
    parts = [load_zone(zone, y, variant, kind) for y in plan.years_read]
    series = on_run_clock(plan, parts, start, horizon_s)
    series.attrs = {
        "repairs": summed_repairs(*parts),
        "method": joined_methods(*parts),
        "year_plan": plan,
    }
    return series


def on_run_clock(
    plan: YearPlan, parts: Sequence[pd.Series], start: datetime, horizon_s: float
) -> pd.Series:
    """The yearly series `parts` (one per year of `plan.years_read`) joined and moved onto
    the run's clock as `plan` says (wrapped by whole weeks, shifted by whole days)."""
    series = pd.concat(parts)
    if plan.wrapped:
        series = wrapped_series(series, start - timedelta(days=plan.shift_days), horizon_s)
    series.index = series.index + pd.Timedelta(days=plan.shift_days)
    return series


def carbon_free_series(
    zone: str, start: datetime, horizon_s: float, year: int | None, rule: str | None
) -> pd.Series:
    """The carbon-free fraction (0..1) of `zone`'s hourly generation on the run's clock,
    read from the same zone-years as its average carbon trace (`year_plan`), so the two
    share their hours (`grid_data/carbon_free/`, `sim.grid.factors.carbon_free_share`)."""
    plan = year_plan(zone, start, horizon_s, year, rule)
    parts = [
        _zone_frame(grid_data_dir() / "carbon_free" / Path(_row(zone, y, "average")["file"]).name)[
            "carbon_free_share"
        ].astype("float64")
        for y in plan.years_read
    ]
    return on_run_clock(plan, parts, start, horizon_s)


def joined_methods(*series: pd.Series) -> str:
    """The distinct `attrs["method"]` of several traces, in order, joined by " + "."""
    return " + ".join(dict.fromkeys(str(s.attrs.get("method")) for s in series))


def wrapped_series(year_series: pd.Series, t0: datetime, horizon_s: float) -> pd.Series:
    """One year's hourly series extended by whole-week copies (`WRAP`) of itself until it
    covers [t0, t0 + horizon_s] (trace times): before its start its first 364 days repeat
    backwards, after its end its last 364 days repeat forwards."""
    start, end = pd.Timestamp(t0), pd.Timestamp(t0 + timedelta(seconds=horizon_s))
    wrap = pd.Timedelta(WRAP)
    lo = year_series.index[0]
    hi = year_series.index[-1] + pd.Timedelta(hours=1)
    head = year_series[year_series.index < lo + wrap]
    tail = year_series[year_series.index >= hi - wrap]
    pieces = [year_series]
    k = 1
    while lo - (k - 1) * wrap > start:
        pieces.insert(0, head.set_axis(head.index - k * wrap))
        k += 1
    k = 1
    while hi + (k - 1) * wrap <= end:
        pieces.append(tail.set_axis(tail.index + k * wrap))
        k += 1
    return pd.concat(pieces)


def site_year_plans(
    sites: Sequence[Site], start: datetime, horizon_s: float, years: str | None
) -> list[tuple[str, str, YearPlan]]:
    """(site name, "carbon" or "decision_carbon", plan) of every catalog zone the signals of
    the scenario's `sites` read (blend zones too), in site order, for a run of `horizon_s`
    from `start` with the scenario's `years` rule: what meta.json and `dcsim run` report."""
    plans = []
    for s in sites:
        for which in ("carbon", "decision_carbon"):
            c = getattr(s, which)
            for zone in () if c is None else (c.zone, c.blend_zone):
                if zone is not None:
                    plan = year_plan(zone, start, horizon_s, c.year, years, c.signal_kind)
                    plans.append((s.name, which, plan))
    return plans


def _span(years: list[int]) -> str:
    """2017-2020 for consecutive years, else a list."""
    if years == list(range(years[0], years[-1] + 1)) and len(years) > 1:
        return f"{years[0]}-{years[-1]}"
    return ", ".join(map(str, years))


def signal_for_site(
    site: Site,
    index: int,
    start: datetime,
    horizon_s: float,
    years: str | None,
    which: str = "carbon",
) -> CarbonSignal:
    """The carbon signal of `site`, the scenario's `sites[index]` (`which`: "carbon", the
    one it is charged on, or "decision_carbon", which must be given), covering [0,
    horizon_s] of a run from `start`; `years`: the scenario's rule for zone years the
    catalog lacks.

    Raises `ScenarioError` prefixed with the key path ``sites[i].carbon``; `TraceError` from
    reading a file propagates unchanged.
    """
    c = getattr(site, which)
    key = f"sites[{index}].{which}"
    try:
        signal = _base_signal(c, key, start, horizon_s, years)
        return signal.transformed(c.scale, c.offset_g_per_kwh)
    except ValueError as e:
        raise ScenarioError(f"{key}: {e}") from None


def signal_label(
    c: CarbonConfig, start: datetime, horizon_s: float, years: str | None
) -> dict[str, object]:
    """What meta.json records of a site's signal `c` in a run of `horizon_s` from `start`:
    its source ("zone DE 2020", "file path", "constant"), kind and method (`zone_method`; a
    file's format; "constant")."""
    kind = c.signal_kind
    if c.zone is not None:
        zones = [c.zone] if c.blend_zone is None else [c.zone, c.blend_zone]
        zone_years_ = [
            (z, year_plan(z, start, horizon_s, c.year, years, kind).trace_year) for z in zones
        ]
        source = " blended with ".join(f"zone {z} {y}" for z, y in zone_years_)
        method = " + ".join(
            dict.fromkeys(zone_method(z, y, c.variant, kind) for z, y in zone_years_)
        )
    elif c.file is not None:
        source, method = f"file {c.file}", f"file ({c.format})"
    else:
        source = method = "constant"
    if c.scale != 1.0 or c.offset_g_per_kwh != 0.0:
        method += f", x {c.scale:g} + {c.offset_g_per_kwh:g} g/kWh"
    return {"source": source, "kind": kind, "method": method}


def _base_signal(
    c: CarbonConfig, key: str, start: datetime, horizon_s: float, years: str | None
) -> CarbonSignal:
    if c.constant_g_per_kwh is not None:
        return CarbonSignal.constant(c.constant_g_per_kwh, horizon_s, kind=c.signal_kind)
    if c.zone is not None:
        kind = c.signal_kind
        try:
            series = zone_series(c.zone, start, horizon_s, c.year, c.variant, years, kind)
            what = f"{key} (zone {c.zone})"
            if c.blend_zone is not None:
                other = zone_series(c.blend_zone, start, horizon_s, c.year, c.variant, years, kind)
                both = pd.concat([series, other], axis=1, join="inner")
                attrs = {
                    "repairs": summed_repairs(series, other),
                    "method": joined_methods(series, other),
                }
                series = (1 - c.blend_weight) * both.iloc[:, 0] + c.blend_weight * both.iloc[:, 1]
                series.attrs = attrs
                what = f"{key} (zone {c.zone} blended with {c.blend_zone})"
        except ScenarioError as e:
            raise ScenarioError(f"{key}.zone: {e}") from None
    elif c.file is not None:
        series = load_trace(
            c.file,
            format=c.format,
            column=c.column,
            time_column=c.time_column,
            unit=c.unit,
            timezone=c.timezone,
            variant=c.variant,
        )
        what = f"{key} (file {c.file})"
    else:  # CarbonConfig._one_source requires exactly one of the three
        raise ValueError("one of zone, file or constant_g_per_kwh is required")
    return CarbonSignal.from_series(series, start, horizon_s, what=what, kind=c.signal_kind)


def signals_meta(
    sites: Sequence[Site], start: datetime, horizon_s: float, years: str | None
) -> dict[str, object]:
    """meta.json's `carbon_signals` of a run of `horizon_s` from `start` (`years`: the
    scenario's rule for zone years): per site the signal it is charged on ("account") and
    the one its decisions see ("decide", its `decision_carbon` or else the same), each as
    `signal_label`; and `mixed_kinds`, the roles ("decide", "account") in which the sites
    do not all have the same kind of intensity (average at one, marginal at another)."""
    labels_by_site: dict[str, dict[str, dict[str, object]]] = {}
    for site in sites:
        account = signal_label(site.carbon, start, horizon_s, years)
        decide = (
            account
            if site.decision_carbon is None
            else signal_label(site.decision_carbon, start, horizon_s, years)
        )
        labels_by_site[site.name] = {"account": account, "decide": decide}
    mixed = [
        role
        for role in ("decide", "account")
        if len({labels[role]["kind"] for labels in labels_by_site.values()}) > 1
    ]
    return {"sites": labels_by_site, "mixed_kinds": mixed}
