"""Market-based carbon and the 24/7 carbon-free energy (CFE) score of a site, from its
hourly energy (docs/onsite-energy.md, "Accounting: market-based carbon and 24/7 CFE").

Market-based carbon follows the GHG Protocol Scope 2 Guidance (WRI/WBCSD 2015), chapter 6,
Table 6.3 (the market-based method's emission-factor hierarchy): grid import covered by
contractual instruments (PPAs, energy attribute certificates) takes the instruments'
factor, here 0 (carbon-free generation); the rest takes the residual mix, which the grid
data does not have, so the guidance's last fallback, the grid-average factor, is used
(the hour's location-based intensity). Two ways to match contracts with import:

- "annual": the run's contracted energy (PPA supply and certificates) is subtracted from
  the run's grid import, and what is left takes the import's average factor (the Scope 2
  Guidance's annual vintage rule: certificates of the reporting year cover its use).
- "hourly": each hour's PPA supply covers that hour's import only; surplus in an hour is
  lost (not exported, not banked: it covers nothing else). Certificates carry no hour, so
  they then cover, annually, what the hourly PPAs left, at its average factor.

The CFE score is Google's: per hour, the load met by carbon-free energy, summed over
hours, over the load ("the percentage of hourly electricity consumption matched with
carbon-free energy", Google, "24/7 Carbon-Free Energy: Methodologies and Metrics",
February 2021). An hour's CFE is the on-site carbon-free supply to the load, plus the
grid draw the hour's PPA supply covers, plus the grid's carbon-free share of the grid
draw the PPAs leave. Certificates never count (they have no hour).

All energies are kWh per hour (arrays, one value per hour), carbon kg.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["MATCHING", "Matching", "hourly_cfe_kwh", "market_based_kg"]

Matching = Literal["annual", "hourly"]
MATCHING: tuple[Matching, ...] = ("annual", "hourly")


def _after_certificates(kg: float, kwh: float, certificates_kwh: float) -> float:
    """Carbon `kg` of `kwh` of import left after `certificates_kwh` cover part of it at
    its average factor (kg / kwh), kg."""
    if kwh <= 0:
        return 0.0
    return kg * max(0.0, 1.0 - certificates_kwh / kwh)


def market_based_kg(
    import_kwh: np.ndarray,
    import_kg: np.ndarray,
    ppa_kwh: np.ndarray,
    certificates_kwh: float,
    matching: Matching,
) -> float:
    """Market-based carbon of a site's grid import, kg: hour by hour its import (kWh), the
    import's location-based carbon (kg), the contracted PPA supply (kWh); certificates
    (kWh) for the whole period; `matching` as the module docstring."""
    if matching == "annual":
        return _after_certificates(
            float(import_kg.sum()), float(import_kwh.sum()), float(ppa_kwh.sum()) + certificates_kwh
        )
    if matching != "hourly":
        raise ValueError(f"matching must be one of {MATCHING}, got {matching!r}")
    left_kwh = np.maximum(import_kwh - ppa_kwh, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        left_kg = np.where(import_kwh > 0, import_kg * left_kwh / import_kwh, 0.0)
    return _after_certificates(float(left_kg.sum()), float(left_kwh.sum()), certificates_kwh)


def hourly_cfe_kwh(
    clean_to_load_kwh: np.ndarray,
    grid_to_load_kwh: np.ndarray,
    ppa_kwh: np.ndarray,
    grid_carbon_free_share: np.ndarray,
) -> np.ndarray:
    """Each hour's load met by carbon-free energy, kWh: the on-site carbon-free supply to
    the load, the grid draw to the load covered by the hour's PPA supply, and the grid's
    carbon-free share (0..1) of the rest of the grid draw. At most the hour's load (load =
    on-site used + battery to load + grid to load, and the on-site carbon-free supply is
    at most the first two), so no min(load, ...) is needed."""
    from_ppa = np.minimum(grid_to_load_kwh, ppa_kwh)
    return clean_to_load_kwh + from_ppa + grid_carbon_free_share * (grid_to_load_kwh - from_ppa)
