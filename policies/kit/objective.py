"""What a carbon- or cost-aware policy minimises: carbon, the electricity price, or both.

`Objective(kind, carbon_price_per_t)`; the signal it gives a site is a step function like
`state.forecast`'s, in its own unit per kWh:

- `"carbon"`: the carbon intensity, g/kWh (`forecast_from_now`: the value now measured,
  the later steps forecast): the default, and bit for bit what the policies used before;
- `"cost"`: the energy price of the site's tariff, the scenario's currency per kWh
  (`state.electricity_price`, `state.price_forecast`: perfect, docs/electricity-costs.md);
- `"weighted"`: price + intensity x `carbon_price_per_t` / 1e6 (currency per tonne CO2e,
  1 t = 1e6 g), currency per kWh: carbon priced at a stated exchange rate.

`objective_forecast` and `objective_now` are the one place policies read that signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sim.api import SystemState

__all__ = ["OBJECTIVES", "Objective", "forecast_from_now", "objective_forecast", "objective_now"]

OBJECTIVES = ("carbon", "cost", "weighted")
_G_PER_T = 1e6


@dataclass(frozen=True, slots=True)
class Objective:
    kind: Literal["carbon", "cost", "weighted"] = "carbon"
    carbon_price_per_t: float = 0.0
    """With "weighted": the scenario's currency per tonne CO2e (>= 0)."""

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ValueError(f"objective must be one of {list(OBJECTIVES)}, got {self.kind!r}")
        rate = self.carbon_price_per_t
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f"carbon_price_per_t must be finite and >= 0, got {rate}")
        if rate and self.kind != "weighted":
            raise ValueError(
                f"carbon_price_per_t applies to objective 'weighted', not {self.kind!r}"
            )

    @property
    def per_g_co2(self) -> float:
        """What one gram of CO2e weighs in the objective's unit (x kWh): 1 for carbon
        (g), 0 for cost, carbon_price_per_t / 1e6 for weighted (currency)."""
        return {"carbon": 1.0, "cost": 0.0}.get(self.kind, self.carbon_price_per_t / _G_PER_T)

    @property
    def per_kg_co2(self) -> float:
        """What one kg of CO2e adds to a score (kg for carbon, the currency otherwise)."""
        return {"carbon": 1.0, "cost": 0.0}.get(self.kind, self.carbon_price_per_t / 1000.0)

    @property
    def per_score(self) -> float:
        """Signal x kWh per unit of score: 1000 g per kg for carbon, 1 for the currency."""
        return 1000.0 if self.kind == "carbon" else 1.0

    @property
    def unit(self) -> str:
        return "g/kWh" if self.kind == "carbon" else "currency/kWh"

    def meta(self) -> dict[str, Any]:
        """For meta.json."""
        return {
            "objective": self.kind,
            "carbon_price_per_t": self.carbon_price_per_t if self.kind == "weighted" else None,
            "unit": self.unit,
        }


CARBON = Objective()


def forecast_from_now(
    state: SystemState, site: str, horizon_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """`state.forecast(site, horizon_s)` with the current step's value replaced by the
    intensity measured now (`state.carbon_intensity`): what holds now is known, only the
    later steps are forecast."""
    times, values = state.forecast(site, max(horizon_s, 0.0))
    if values.size:
        values[0] = state.carbon_intensity(site)
    return times, values


def objective_now(state: SystemState, site: str, objective: Objective) -> float:
    """`site`'s objective signal now (see the module docstring for its unit)."""
    if objective.kind == "carbon":
        return state.carbon_intensity(site)
    price = state.electricity_price(site)
    if objective.kind == "cost":
        return price
    return price + state.carbon_intensity(site) * objective.per_g_co2


def objective_forecast(
    state: SystemState, site: str, horizon_s: float, objective: Objective
) -> tuple[np.ndarray, np.ndarray]:
    """`site`'s objective signal from now over `horizon_s`, as a step function (start times
    s, values), the current step's value what holds now. For "weighted", the breakpoints
    of both the carbon forecast and the price."""
    if objective.kind == "carbon":
        return forecast_from_now(state, site, horizon_s)
    p_times, p_values = state.price_forecast(site, max(horizon_s, 0.0))
    if objective.kind == "cost" or not p_times.size:
        return p_times, p_values
    c_times, c_values = forecast_from_now(state, site, horizon_s)
    times = np.union1d(p_times, c_times)  # both start now and end at the same time
    at_p = np.searchsorted(p_times, times, side="right") - 1
    at_c = np.searchsorted(c_times, times, side="right") - 1
    return times, p_values[at_p] + c_values[at_c] * objective.per_g_co2
