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
rounded to multiples of one power of two Q, at most 2**-50 of the largest of them, and
the limits (limit_kw x duration_s / 3600) rounded down to multiples of Q
(`_on_one_grid`): on that grid every min, sum and difference here is exact. Every flow
is non-negative.

Limits, exactly. The battery power the connection admits is found in kW
(`_admitted_battery_kw`); in kWh, rounded, its flow to the grid could still pass the
export limit, or its charge from the grid take the import over its limit, by a few Q. So
the kWh flows cut `battery_to_grid` to the export room and `grid_to_battery` to the
import room (what the load's own import leaves) and reduce the discharge or charge to
match: the export never exceeds export_limit_kw x duration_s / 3600, nor does the import
exceed import_limit_kw x duration_s / 3600 unless the load's own import (`grid_to_load`,
which the import limit admits in kW) does, by rounding. The battery's energy in the
balance (charge or discharge) is thus within Q / 2 of |battery_kw| x duration_s / 3600
(`Battery.advance`'s terminal energy), except where such a cut applies: there it is
below it, by at most 7 Q.
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


def _on_one_grid(flows: list[float], limits: list[float]) -> tuple[list[float], list[float]]:
    """`flows` (>= 0, finite) rounded to the nearest multiple of one power of two,
    Q = 2**(e - 51) where 2**e is above the largest, and `limits` (>= 0) cut to 2**(e + 1)
    (no sum of two flows reaches it) and rounded down to a multiple of Q (none passes its
    limit). Every sum or difference of two such values is then a float exactly; Q is at
    most 2**-50 of the largest flow."""
    exponent = math.frexp(max(flows))[1]
    scale = 51 - exponent

    def rounded(value: float) -> float:
        return math.ldexp(round(math.ldexp(value, scale)), -scale)

    cap = math.ldexp(2.0, exponent)

    def rounded_down(value: float) -> float:
        # (a NaN, inf x 0 s, is no limit: over 0 s every flow is 0)
        return math.ldexp(math.floor(math.ldexp(value if value < cap else cap, scale)), -scale)

    return [rounded(flow) for flow in flows], [rounded_down(limit) for limit in limits]


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


def _flows(
    load: float,
    generation: float,
    battery: float,
    import_limit: float,
    export_limit: float,
    cut_battery: bool = True,
) -> dict[str, float]:
    """The balance in one unit (all kW or all kWh; see the module). With `cut_battery`,
    the battery's flow to the grid is cut to the export room and its charge from the grid
    to the import room (the discharge or charge reduced to match); without, the battery's
    flows are as asked (so that the connection can see how far over a limit they go)."""
    flows, (import_limit, export_limit) = _on_one_grid(
        [max(battery, 0.0), max(-battery, 0.0), load, generation], [import_limit, export_limit]
    )
    charge, discharge, load, generation = flows
    (on_site, to_load, grid_to_load), _ = _shares(load, [generation, discharge, math.inf])
    to_grid = discharge - to_load
    if cut_battery and to_grid > export_limit:
        to_grid = export_limit
        discharge = to_load + to_grid
    export_room = max(export_limit - to_grid, 0.0)
    caps = [load, charge, export_room, math.inf]
    (_, from_generation, export, curtailed), _ = _shares(generation, caps)
    from_grid = charge - from_generation
    import_room = max(import_limit - grid_to_load, 0.0)
    if cut_battery and from_grid > import_room:
        from_grid = import_room
        charge = from_generation + from_grid
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
        "grid_to_battery": from_grid,
        "battery_to_grid": to_grid,
    }


class ImportLimitError(PolicyError):
    """The load alone takes more from the grid than the import limit allows (the
    scenario's connection cannot carry the site's load), as opposed to a battery power
    over a limit (a `PolicyError` about the setpoint)."""


def _battery_excess(kw: dict[str, float], connection: GridConnection) -> tuple[str, float]:
    """How far the battery's own grid flows in `kw` (kW, the battery's not cut) go over the
    connection's limits: the side ("import" or "export") and kW over (<= 0: within both).
    The import room is what the load's own import leaves; surplus generation over the
    export limit is curtailed, not the battery's."""
    room_kw = max(connection.import_limit_kw - kw["grid_to_load"], 0.0)
    over_import = kw["grid_to_battery"] - room_kw
    over_export = kw["battery_to_grid"] - connection.export_limit_kw
    return ("import", over_import) if over_import > 0 else ("export", over_export)


def battery_excess_kw(
    load_kw: float, generation_kw: float, battery_kw: float, connection: GridConnection
) -> tuple[str, float]:
    """How far a battery power `battery_kw` (kW, positive charging, as the battery applies
    it) at this load and generation (kW) takes the battery's own grid flows over the
    connection's limits: ("import" or "export", kW over; <= 0: within both). What a
    "refuse" connection refuses (`site_balance`), before an action is taken."""
    kw = _flows(
        load_kw,
        generation_kw,
        battery_kw,
        connection.import_limit_kw,
        connection.export_limit_kw,
        cut_battery=False,
    )
    return _battery_excess(kw, connection)


def _admitted_battery_kw(
    kw: dict[str, float],
    load_kw: float,
    generation_kw: float,
    battery_kw: float,
    connection: GridConnection,
    where: str,
) -> float:
    """The battery power the connection admits, given the flows in kW at `battery_kw`
    (the battery's not cut) and the load and generation they came from."""
    limit = connection.import_limit_kw
    if kw["grid_to_load"] > limit:
        raise ImportLimitError(
            f"{where}: load {kw['load']} kW exceeds on-site generation, battery "
            f"discharge and the import limit {limit} kW"
        )
    side, over = _battery_excess(kw, connection)
    if over <= 0:
        return battery_kw
    if connection.over_limit == "refuse":
        raise PolicyError(
            f"{where}: battery power {battery_kw} kW exceeds the {side} limit by {over} kW"
        )
    over_import = kw["grid_to_load"] + kw["grid_to_battery"] - limit
    # the power that fits, from the inputs (not their rounding grid, which a large request
    # makes coarse): limit + generation - load within the import limit, -(export limit +
    # the load's deficit) within the export limit; the request bounds it
    if over_import > 0:
        return min(max(limit + (generation_kw - load_kw), 0.0), battery_kw)
    deficit_kw = max(load_kw - generation_kw, 0.0)
    return max(-(connection.export_limit_kw + deficit_kw), battery_kw)


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
    kw = _flows(
        load_kw, generation_kw, battery_kw, math.inf, connection.export_limit_kw, cut_battery=False
    )
    applied_kw = _admitted_battery_kw(kw, load_kw, generation_kw, battery_kw, connection, where)

    def kwh(power_kw: float) -> float:
        return power_kw * duration_s / 3600.0

    energy = _flows(
        kwh(load_kw),
        kwh(generation_kw),
        kwh(applied_kw),
        kwh(connection.import_limit_kw),
        kwh(connection.export_limit_kw),
    )
    return SiteBalance(
        duration_s=duration_s,
        battery_kw=applied_kw,
        export_price_per_kwh=connection.export_price_per_kwh,
        **{f"{name}_kwh": value for name, value in energy.items()},
    )
