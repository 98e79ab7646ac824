"""The fleet-renewal what-if: extend an old pool or replace it with new hardware
(docs/servers.md, "Extend or replace").

The scenario runs twice: "extend", as given (the old pool keeps running; past its lifetime
it is fully amortised and charges no embodied carbon), and "replace", with the chosen pool
replaced by a new GPU or server model bought in the scenario's start year (the same GPUs,
rounded up to whole servers, or a count given). Each run covers the scenario's period; a
horizon of N years repeats that period: the operational energy (facility, kWh) and carbon
(kg) of each horizon year are the run's times 8766 h / the run's hours (the same workload
and grid every year). Embodied carbon is the installed hardware's, whole fleet, used or
not, counted two ways:

- amortised: each pool's straight-line share within each horizon year, within its lifetime
  window (`sim.engine.lifetimes`): the accounting a run reports;
- upfront: the new hardware's whole embodied carbon in the year it is bought, nothing for
  hardware already owned (sunk): what the atmosphere sees because of the decision.

The break-even year is the first horizon year at whose end replacing has emitted no more
in total (embodied + operational, cumulative) than extending; None if not within the
horizon.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from sim.config.loading import scenario_from_dict
from sim.config.scenario import Scenario
from sim.config.sites import GpuPool
from sim.energy.embodied import SECONDS_PER_YEAR
from sim.engine.build import simulate
from sim.engine.lifetimes import pool_installed_kg, pool_whole_kg
from sim.errors import ScenarioError
from sim.models.hardware import GPU_CATALOG
from sim.models.servers import SERVER_CATALOG
from sim.util.atomic import write_atomic

__all__ = [
    "OPTIONS",
    "RenewalYear",
    "break_even_year",
    "fleet_renewal",
    "replaced_scenario",
    "write_renewal",
]

OPTIONS = ("extend", "replace")
HOURS_PER_YEAR = SECONDS_PER_YEAR / 3600.0
"""A Julian year, h: the unit of the horizon."""


@dataclass(frozen=True, slots=True)
class RenewalYear:
    """One option's figures in one horizon year (kgCO2e, kWh)."""

    option: str
    year: int
    """Calendar year: the scenario's start year + the horizon year's index."""
    energy_kwh: float
    operational_kg: float
    embodied_amortised_kg: float
    embodied_upfront_kg: float
    total_amortised_kg: float
    """Cumulative to the year's end: operational + amortised embodied."""
    total_upfront_kg: float
    """Cumulative to the year's end: operational + upfront embodied."""

    def row(self) -> dict[str, Any]:
        return asdict(self)


def _site_index(scenario: Scenario, site: str | None) -> int:
    names = scenario.site_names()
    if site is None:
        return 0
    if site not in names:
        raise ScenarioError(f"--site {site!r}: not a site of {scenario.name} (sites: {names})")
    return names.index(site)


def replaced_scenario(
    scenario: Scenario, site: str | None, pool: int, replace_with: str, count: int | None
) -> Scenario:
    """`scenario` with pool `pool` of site `site` (None: the first) replaced by
    `replace_with` (a server model of servers.toml or a GPU model of gpus.toml) bought in
    the start year: `count` servers or GPUs, or (None) the old pool's GPUs, in whole servers."""
    i = _site_index(scenario, site)
    pools = scenario.sites[i].gpus
    if not 0 <= pool < len(pools):
        raise ScenarioError(
            f"--pool {pool}: site {scenario.sites[i].name!r} has pools 0..{len(pools) - 1}"
        )
    if count is not None and count <= 0:
        raise ScenarioError(f"--count {count}: must be a positive number of GPUs or servers")
    new: dict[str, Any] = {"purchase_year": scenario.start.year}
    if replace_with in SERVER_CATALOG:
        server = SERVER_CATALOG[replace_with]
        servers = count or math.ceil(pools[pool].count / server.gpus)
        new |= {"model": server.gpu_model, "servers": {"model": replace_with, "count": servers}}
    elif replace_with in GPU_CATALOG:
        new |= {"model": replace_with, "count": count or pools[pool].count}
    else:
        raise ScenarioError(
            f"--replace-with {replace_with!r}: not a server model ({sorted(SERVER_CATALOG)}) "
            f"or a GPU model ({sorted(GPU_CATALOG)})"
        )
    raw = scenario.model_dump(mode="json", exclude_none=True)
    raw["sites"][i]["gpus"][pool] = new
    if all("servers" in p for p in raw["sites"][i]["gpus"]):
        # a site of servers only: its servers give the host power and GPUs per server
        for key in ("host_w_per_gpu", "gpus_per_node"):
            raw["sites"][i].pop(key, None)
    return scenario_from_dict(raw, source=f"{scenario.name} (--replace-with {replace_with})")


def _embodied_by_year(
    scenario: Scenario, years: int, bought: GpuPool | None
) -> tuple[list[float], list[float]]:
    """Per horizon year: the fleet's amortised installed embodied carbon, and the upfront
    carbon of the pool `bought` (in year 0), kgCO2e."""
    pools = [p for s in scenario.sites for p in s.gpus]
    amortised = [
        math.fsum(
            pool_installed_kg(p, scenario.start, y * SECONDS_PER_YEAR, (y + 1) * SECONDS_PER_YEAR)
            for p in pools
        )
        for y in range(years)
    ]
    upfront = [0.0] * years
    if bought is not None:
        upfront[0] = pool_whole_kg(bought)
    return amortised, upfront


def break_even_year(extend: list[float], replace: list[float], first_year: int) -> int | None:
    """The first calendar year at whose end the cumulative `replace` total is at most the
    `extend` one (lists of cumulative kg per horizon year from `first_year`); None: never."""
    for y, (e, r) in enumerate(zip(extend, replace, strict=True)):
        if r <= e:
            return first_year + y
    return None


def fleet_renewal(
    scenario: Scenario,
    replace_with: str,
    horizon_years: int = 5,
    site: str | None = None,
    pool: int = 0,
    count: int | None = None,
) -> tuple[list[RenewalYear], dict[str, Any]]:
    """Run the what-if: rows per option and horizon year, and a summary (totals per option
    over the horizon, break-even years under both embodied accountings, the scaling)."""
    if not (isinstance(horizon_years, int) and 1 <= horizon_years <= 50):
        raise ScenarioError(f"--horizon-years {horizon_years!r}: must be a whole 1..50")
    replaced = replaced_scenario(scenario, site, pool, replace_with, count)
    i = _site_index(scenario, site)
    first = scenario.start.year
    scale = HOURS_PER_YEAR / scenario.duration_h
    rows: list[RenewalYear] = []
    for option, variant in zip(OPTIONS, (scenario, replaced), strict=True):
        summary = simulate(variant).summary
        energy_kwh = summary["energy_facility_kwh"] * scale
        operational_kg = summary["carbon_operational_kg"] * scale
        bought = variant.sites[i].gpus[pool] if option == "replace" else None
        amortised, upfront = _embodied_by_year(variant, horizon_years, bought)
        total_a = total_u = 0.0
        for y in range(horizon_years):
            total_a += operational_kg + amortised[y]
            total_u += operational_kg + upfront[y]
            rows.append(
                RenewalYear(
                    option,
                    first + y,
                    energy_kwh,
                    operational_kg,
                    amortised[y],
                    upfront[y],
                    total_a,
                    total_u,
                )
            )
    by = {o: [r for r in rows if r.option == o] for o in OPTIONS}
    summary_out: dict[str, Any] = {
        "scenario": scenario.name,
        "site": scenario.sites[i].name,
        "pool": pool,
        "old": scenario.sites[i].gpus[pool].model_dump(mode="json", exclude_none=True),
        "new": replaced.sites[i].gpus[pool].model_dump(mode="json", exclude_none=True),
        "horizon_years": horizon_years,
        "run_hours": scenario.duration_h,
        "scale_per_year": scale,
        "break_even_year_amortised": break_even_year(
            [r.total_amortised_kg for r in by["extend"]],
            [r.total_amortised_kg for r in by["replace"]],
            first,
        ),
        "break_even_year_upfront": break_even_year(
            [r.total_upfront_kg for r in by["extend"]],
            [r.total_upfront_kg for r in by["replace"]],
            first,
        ),
    }
    for option, option_rows in by.items():
        summary_out[option] = {
            "energy_kwh": math.fsum(r.energy_kwh for r in option_rows),
            "operational_kg": math.fsum(r.operational_kg for r in option_rows),
            "embodied_amortised_kg": math.fsum(r.embodied_amortised_kg for r in option_rows),
            "embodied_upfront_kg": math.fsum(r.embodied_upfront_kg for r in option_rows),
            "total_amortised_kg": option_rows[-1].total_amortised_kg,
            "total_upfront_kg": option_rows[-1].total_upfront_kg,
        }
    return rows, summary_out


def write_renewal(out: Path, rows: list[RenewalYear], summary: dict[str, Any]) -> None:
    """`out`/fleet_renewal.csv (one row per option and horizon year) and
    `out`/fleet_renewal.json (the summary), each written atomically."""

    def write_csv(tmp: Path) -> None:
        with tmp.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, [x.name for x in fields(RenewalYear)])
            writer.writeheader()
            writer.writerows(r.row() for r in rows)

    write_atomic(out / "fleet_renewal.csv", write_csv)
    text = json.dumps(summary, indent=2) + "\n"
    write_atomic(out / "fleet_renewal.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))
