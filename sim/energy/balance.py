"""A site's energy balance over one interval of constant facility load, on-site
generation and battery power.

The order is fixed: the facility load (IT x PUE) is met by on-site generation first,
then by the battery's discharge, then by the grid; generation left over charges the
battery (as much of the battery's charge as it can), then is exported up to the export
limit, and the rest is curtailed. A battery charge the surplus does not cover comes from
the grid; a discharge the load does not take goes to the grid. The battery's power is
the policy's (`Battery.applied_power_kw` first limits it to the battery's rating and
state of charge); the grid connection limits import and export (`GridConnection`): a
battery power that would exceed a limit is refused (`PolicyError`) or reduced to fit
(`over_limit = "curtail"`); surplus generation beyond the export limit is always
curtailed; a load the generation, the battery and the import limit cannot meet together
is refused in either mode.

Exactness. The flows are computed in kWh (each power x duration_s / 3600) so that these
identities hold exactly in floating point, each summed left to right as written:

    load       = on_site_used + battery_to_load + grid_to_load
    generation = on_site_used + generation_to_battery + generation_export + curtailed
    charge     = generation_to_battery + grid_to_battery
    discharge  = battery_to_load + battery_to_grid

In each, the flows are shares taken in order, each the smaller of what it can take and
what is left, and the last (`grid_to_load`, `curtailed`, `grid_to_battery`,
`battery_to_grid`) is the remainder. A remainder computed by float subtraction can miss
the total by an ulp (and some totals no float closes), so the four energies are first
rounded to multiples of one power of two Q, at most 2**-50 of the largest of them
(`_on_one_grid`): on that grid every min, sum and difference here is exact. The battery's
energy in the balance can thus differ from `Battery.advance`'s by at most Q / 2. Every
flow is non-negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sim.errors import PolicyError, ScenarioError


def _shares(total: float, caps: list[float]) -> tuple[list[float], float]:
    """Split `total` over `caps` in order, each share the smaller of its cap and what is
    left; and what no cap took."""
    shares = []
    left = total
    for cap in caps:
        share = min(cap, left)
        shares.append(share)
        left -= share
    return shares, left


def _on_one_grid(flows: list[float], limit: float) -> tuple[list[float], float]:
    """`flows` (>= 0, finite) rounded to the nearest multiple of one power of two,
    Q = 2**(e - 51) where 2**e is above the largest, and `limit` cut to 2**e (no flow is
    above it) and rounded likewise. Every sum or difference of two such values is then a
    float exactly; Q is at most 2**-50 of the largest flow."""
    exponent = math.frexp(max(flows))[1]
    top = math.ldexp(1.0, exponent)

    def rounded(value: float) -> float:
        return math.ldexp(round(math.ldexp(min(value, top), 51 - exponent)), exponent - 51)

    return [rounded(flow) for flow in flows], rounded(limit)


@dataclass(frozen=True)
class GridConnection:
    """A site's grid connection: import and export limits (kW; `math.inf` for none),
    what happens to a battery power that would exceed one (`over_limit`: "refuse" raises
    `PolicyError`, "curtail" reduces the battery's power to fit), and the export credit
    per kWh a tariff pays (None: exported energy earns nothing)."""

    import_limit_kw: float = math.inf
    export_limit_kw: float = math.inf
    over_limit: Literal["refuse", "curtail"] = "refuse"
    export_price_per_kwh: float | None = None

    def __post_init__(self) -> None:
        for name in ("import_limit_kw", "export_limit_kw"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ScenarioError(f"grid connection: {name} = {value!r} must be >= 0")
        if self.over_limit not in ("refuse", "curtail"):
            raise ScenarioError(
                f"grid connection: over_limit = {self.over_limit!r} is not 'refuse' or 'curtail'"
            )


@dataclass(frozen=True)
class SiteBalance:
    """Where every kWh of one interval went (see the module for the identities). Flows are
    kWh over `duration_s`; `battery_kw` is the battery power applied (after the
    connection's limits), positive charging."""

    duration_s: float
    battery_kw: float
    load_kwh: float
    generation_kwh: float
    battery_charge_kwh: float
    battery_discharge_kwh: float
    on_site_used_kwh: float
    battery_to_load_kwh: float
    grid_to_load_kwh: float
    generation_to_battery_kwh: float
    generation_export_kwh: float
    curtailed_kwh: float
    grid_to_battery_kwh: float
    battery_to_grid_kwh: float
    export_price_per_kwh: float | None = None

    @property
    def grid_import_kwh(self) -> float:
        """Energy from the grid: to the load and to the battery."""
        return self.grid_to_load_kwh + self.grid_to_battery_kwh

    @property
    def export_kwh(self) -> float:
        """Energy to the grid: surplus generation and battery discharge."""
        return self.generation_export_kwh + self.battery_to_grid_kwh

    @property
    def export_credit(self) -> float:
        """What the export earns at the tariff's `export_price_per_kwh` (0 without one)."""
        return self.export_kwh * (self.export_price_per_kwh or 0.0)


def _flows(load: float, generation: float, battery: float, export_limit: float) -> dict[str, float]:
    """The balance in one unit (all kW or all kWh), import not limited (see the module)."""
    flows, export_limit = _on_one_grid(
        [max(battery, 0.0), max(-battery, 0.0), load, generation], export_limit
    )
    charge, discharge, load, generation = flows
    (on_site, to_load, grid_to_load), _ = _shares(load, [generation, discharge, math.inf])
    to_grid = discharge - to_load
    export_room = max(export_limit - to_grid, 0.0)
    caps = [load, charge, export_room, math.inf]
    (_, from_generation, export, curtailed), _ = _shares(generation, caps)
    return {
        "load": load,
        "generation": generation,
        "battery_charge": charge,
        "battery_discharge": discharge,
        "on_site_used": on_site,
        "battery_to_load": to_load,
        "grid_to_load": grid_to_load,
        "generation_to_battery": from_generation,
        "generation_export": export,
        "curtailed": curtailed,
        "grid_to_battery": charge - from_generation,
        "battery_to_grid": to_grid,
    }


def _admitted_battery_kw(
    kw: dict[str, float], battery_kw: float, connection: GridConnection, where: str
) -> float:
    """The battery power the connection admits, given the flows in kW at `battery_kw`."""
    limit = connection.import_limit_kw
    if kw["grid_to_load"] > limit:
        raise PolicyError(
            f"{where}: load {kw['load']} kW exceeds on-site generation, battery "
            f"discharge and the import limit {limit} kW"
        )
    over_import = kw["grid_to_load"] + kw["grid_to_battery"] - limit
    over_export = kw["battery_to_grid"] - connection.export_limit_kw
    over = max(over_import, over_export)
    if over <= 0:
        return battery_kw
    if connection.over_limit == "refuse":
        side = "import" if over_import > 0 else "export"
        raise PolicyError(
            f"{where}: battery power {battery_kw} kW exceeds the {side} limit by {over} kW"
        )
    # computed on the rounding grid, the power that fits can come out an ulp beyond the
    # request: the request bounds it
    if over_import > 0:
        return min(kw["generation_to_battery"] + (limit - kw["grid_to_load"]), battery_kw)
    return max(-(kw["battery_to_load"] + connection.export_limit_kw), battery_kw)


def site_balance(
    load_kw: float,
    generation_kw: float,
    battery_kw: float,
    duration_s: float,
    connection: GridConnection,
    where: str = "site",
) -> SiteBalance:
    """The energy balance of `duration_s` seconds of constant facility load and on-site
    generation (kW, >= 0) and battery terminal power (kW, positive charging) at a site
    behind `connection`; `where` names the site in errors."""
    for name, value in (("load_kw", load_kw), ("generation_kw", generation_kw)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{where}: {name} = {value!r} must be finite and >= 0")
    kw = _flows(load_kw, generation_kw, battery_kw, connection.export_limit_kw)
    applied_kw = _admitted_battery_kw(kw, battery_kw, connection, where)

    def kwh(power_kw: float) -> float:
        return power_kw * duration_s / 3600.0

    export_limit = kwh(connection.export_limit_kw)
    energy = _flows(kwh(load_kw), kwh(generation_kw), kwh(applied_kw), export_limit)
    return SiteBalance(
        duration_s=duration_s,
        battery_kw=applied_kw,
        export_price_per_kwh=connection.export_price_per_kwh,
        **{f"{name}_kwh": value for name, value in energy.items()},
    )
