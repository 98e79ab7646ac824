"""Embodied carbon of on-site energy equipment, amortised over a stated lifetime.

A piece of equipment's embodied carbon (kgCO2e, made once, when it is manufactured) is
charged to a run in proportion to the time the run uses it: an interval of `duration_s`
carries `embodied_kg * duration_s / lifetime_s`, so a run as long as the lifetime carries
all of it. A year is 365.25 days.

Cited defaults:

- Lithium-ion batteries, `LI_ION_EMBODIED_KG_PER_KWH` = 83.5 kgCO2e per kWh of capacity:
  the midpoint of the 61-106 kgCO2e/kWh that IVL estimated for producing NMC cells and
  packs (Emilsson and Dahllöf, "Lithium-Ion Vehicle Battery Production: Status 2019 on
  Energy Use, CO2 Emissions, Use of Metals, Products Environmental Footprint, and
  Recycling", IVL report C 444, 2019; summarised at
  https://www.electrive.com/study-guide/lithium-ion-vehicle-battery-production/).
- Crystalline-silicon PV, `PV_EMBODIED_KG_PER_KWP` = 1836 kgCO2e per kWp: derived from
  the harmonised median life-cycle emissions of 45 gCO2e/kWh of Hsu et al., "Life Cycle
  Greenhouse Gas Emissions of Crystalline Silicon Photovoltaic Electricity Generation:
  Systematic Review and Harmonization", J. Industrial Ecology 16 (2012), times the
  lifetime yield under that study's own harmonisation parameters (irradiation 1700
  kWh/m2/yr, performance ratio 0.80 for ground-mounted systems, 30 years): 1700 x 0.80 x
  30 = 40 800 kWh per kWp, and 0.045 x 40 800 = 1836 kg. It is a life-cycle figure, so it
  includes the small operation and end-of-life shares (an upper bound on manufacturing).
- Onshore wind, `WIND_EMBODIED_KG_PER_KW` = 578 kgCO2e per kW: derived, as the PV figure,
  from the harmonised median life-cycle emissions of utility-scale onshore wind, 11
  gCO2e/kWh, of Dolan and Heath, "Life Cycle Greenhouse Gas Emissions of Utility-Scale
  Wind Power: Systematic Review and Harmonization", J. Industrial Ecology 16 (2012),
  S136-S154 (NREL's LCA Harmonization Project; reported e.g. at
  https://www.evwind.es/2012/05/10/nrel-unveils-energy-project-emissions-calculator/18407),
  times the lifetime yield under that study's harmonisation parameters (capacity factor
  0.30, 20 years): 0.30 x 8760 x 20 = 52 560 kWh per kW, and 0.011 x 52 560 = 578 kg. The
  same figure is used for offshore wind (the study's offshore median, 12 gCO2e/kWh, is
  within its spread). Carbon Explorer (Acun et al., ASPLOS 2023) uses 12 gCO2e/kWh for
  wind farms, from the same NREL harmonisation.
"""

from __future__ import annotations

import math

from sim.errors import ScenarioError

SECONDS_PER_YEAR = 365.25 * 86400.0
"""A Julian year in seconds: the unit of every lifetime here."""

LI_ION_EMBODIED_KG_PER_KWH = 83.5
"""kgCO2e per kWh of lithium-ion capacity (IVL C 444, 2019: midpoint of 61-106)."""

PV_EMBODIED_KG_PER_KWP = 0.045 * 1700.0 * 0.80 * 30.0
"""kgCO2e per kWp of crystalline-silicon PV (Hsu et al. 2012, harmonised; see the module)."""

PV_LIFETIME_YEARS = 30.0
"""The lifetime Hsu et al. (2012) harmonised to, over which `PV_EMBODIED_KG_PER_KWP` is spread."""

WIND_EMBODIED_KG_PER_KW = 0.011 * 0.30 * 8760.0 * 20.0
"""kgCO2e per kW of wind turbines (Dolan and Heath 2012, harmonised; see the module)."""

WIND_LIFETIME_YEARS = 20.0
"""The lifetime Dolan and Heath (2012) harmonised to, over which `WIND_EMBODIED_KG_PER_KW`
is spread."""


def amortised_embodied_kg(embodied_kg: float, lifetime_years: float, duration_s: float) -> float:
    """The share (kgCO2e) of `embodied_kg` that an interval of `duration_s` seconds carries
    when the equipment lasts `lifetime_years` (Julian years): linear in time."""
    if not (math.isfinite(lifetime_years) and lifetime_years > 0):
        raise ScenarioError(f"lifetime_years = {lifetime_years!r}: must be a positive number")
    return embodied_kg * duration_s / (lifetime_years * SECONDS_PER_YEAR)
