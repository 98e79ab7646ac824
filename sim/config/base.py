"""The base of every table of a scenario file: unknown keys are refused, the values are
frozen, and every number is finite and of a magnitude someone could mean.

A NaN or an infinity is refused in every numeric field, also inside lists, tuples and
tables, and in free-form tables such as a policy's `params`. A number's largest meaningful
magnitude comes from its unit, which dcsim's field names carry (`duration_h`, `idle_w`,
`limit_kw`, ...): `UNIT_LIMITS` bounds each unit once, so a field gains its bound by being
named for its unit, and so does a key of a free-form table (`params.margin_s`). A numeric
field whose name carries no unit bounds itself with `le`/`lt` (tests/test_scenario_numbers.py
checks that every numeric field of the scenario schema is bounded one way or the other).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator

from sim.models.hardware import PROFILES, profile_choices

HOURS_PER_DECADE = 10 * 8784.0
"""Ten leap years of hours: no simulated horizon, job or notice is meant to be longer."""


def known_timezone(name: str) -> str:
    """`name` if it is an IANA time zone; ValueError naming it."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown IANA time zone {name!r}, e.g. 'Europe/Berlin'") from None
    return name


def known_name(what: str, name: str, known: Mapping) -> str:
    """`name` if it is a key of `known`; ValueError naming `what`, `name` and the known ones
    (the job profiles of `sim.models.hardware.PROFILES` with their descriptions)."""
    if name not in known:
        choices = profile_choices() if known is PROFILES else ", ".join(sorted(known))
        raise ValueError(f"unknown {what} {name!r}; known: {choices}")
    return name


TimeZoneName = Annotated[str, AfterValidator(known_timezone)]
"""A scenario key naming an IANA time zone."""


class UnitLimit(NamedTuple):
    """The largest magnitude a value in `unit` can be meant to have, and why."""

    suffix: str
    """Field names ending in this carry the unit."""
    unit: str
    max_abs: float
    reason: str


UNIT_LIMITS: tuple[UnitLimit, ...] = (
    UnitLimit(
        "_g_per_kwh",
        "g/kWh",
        5_000.0,
        "lignite, the most carbon-intensive generation, emits about 1,100 g/kWh "
        "(IPCC AR5 WGIII Annex III)",
    ),
    UnitLimit(
        "_per_kwh",
        "per kWh",
        100.0,
        "no energy price comes near 100 of any listed currency per kWh (the EU day-ahead "
        "price cap was 4 EUR/kWh in 2023; Japanese retail rates are about 30 JPY/kWh)",
    ),
    UnitLimit("_km_per_s", "km/s", 299_792.458, "the speed of light"),
    UnitLimit("_w_per_gpu", "W", 100_000.0, "100 kW is a whole rack, not one GPU's host"),
    UnitLimit(
        "per_gpu_h",
        "per GPU-hour",
        1e6,
        "a million of any currency per GPU-hour is beyond every list price (an H100 rents for "
        "about a thousand yen)",
    ),
    UnitLimit("_per_h", "per hour", 1e7, "ten million an hour is beyond any cluster trace"),
    UnitLimit("_per_s", "per second", 1e7, "ten million a second is beyond any service"),
    UnitLimit("_kwh", "kWh", 1e6, "a gigawatt-hour"),
    UnitLimit("_kw", "kW", 1e7, "10 GW, several times the largest datacenter campus"),
    UnitLimit("_w", "W", 100_000.0, "100 kW is a whole rack, not one device"),
    UnitLimit("_gbps", "Gbit/s", 1e6, "1 Pbit/s, beyond any single fibre system"),
    UnitLimit("_gb", "GB", 1e7, "10 PB for one job"),
    UnitLimit("_km", "km", 40_075.0, "the Earth's circumference"),
    UnitLimit("_ms", "ms", 3_600_000.0, "an hour"),
    UnitLimit("_h", "h", HOURS_PER_DECADE, "ten years"),
    UnitLimit("_s", "s", HOURS_PER_DECADE * 3600.0, "ten years"),
)
"""Longest suffix first, so `_g_per_kwh` is matched before `_kwh` and `_per_h` before `_h`."""


def unit_limit(field_name: str) -> UnitLimit | None:
    """The limit of the unit `field_name` carries, or None if it carries none."""
    return next((u for u in UNIT_LIMITS if field_name.endswith(u.suffix)), None)


def check_numbers(value: Any, name: str, path: str = "") -> None:
    """Raise ValueError if a number in `value` (itself, or inside lists, tuples and tables)
    is NaN or infinite, or beyond the limit of its unit. A number's unit is that of the
    nearest name around it that carries one: a table's key (`params.margin_s`), else the
    field's name (`idle_w.A100-80GB`). `path` locates the number inside the field."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        limit = unit_limit(name)
        where = f"{path} = " if path else ""
        if not math.isfinite(value):
            raise ValueError(f"{where}{value} is not a finite number")
        if limit is not None and abs(value) > limit.max_abs:
            raise ValueError(
                f"{where}{value:g} {limit.unit} cannot be meant: at most {limit.max_abs:g} "
                f"{limit.unit} ({limit.reason})"
            )
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_numbers(item, name, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = str(key) if unit_limit(str(key)) else name
            check_numbers(item, inner, f"{path}.{key}" if path else str(key))


class ConfigModel(BaseModel):
    """A table of a scenario file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _finite_and_meaningful(cls, value: Any, info: ValidationInfo) -> Any:
        check_numbers(value, info.field_name or "")
        return value
