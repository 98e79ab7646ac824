"""A site's contracts (PPAs, certificates) and its grid's carbon-free share on the hours
of the run, and what they make of the site's hourly energy: the 24/7 CFE per hour and the
market-based carbon (`sim.energy.market`; docs/onsite-energy.md, "Accounting:
market-based carbon and 24/7 CFE")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from sim.config.sites import Site as SiteConfig
from sim.energy.embodied import SECONDS_PER_YEAR
from sim.energy.market import Matching, hourly_cfe_kwh, market_based_kg
from sim.errors import ScenarioError
from sim.grid.catalog import carbon_free_series
from sim.grid.renewables import profile_on_run_clock

__all__ = [
    "SiteContracts",
    "account",
    "grid_carbon_free_share",
    "grid_only_cfe_kwh",
    "on_hours",
    "site_contracts",
]


@dataclass(frozen=True)
class SiteContracts:
    """A site's contracts for a run."""

    ppa_kw: np.ndarray
    """Contracted PPA supply on each hour of the run's `edges_s`, kW."""
    certificates_kwh: float
    """The run's share of the year's certificates, kWh."""
    matching: Matching


def on_hours(series: pd.Series, start: datetime, edges_s: np.ndarray, key: str) -> np.ndarray:
    """An hourly series (UTC hour starts, the run's clock) on each interval of `edges_s`
    (s from `start`): the value of the hour each starts in; ScenarioError naming `key` if
    the series starts after the run."""
    at = pd.DatetimeIndex([start + timedelta(seconds=float(t)) for t in edges_s])
    rows = series.index.searchsorted(at, side="right") - 1
    if rows.min() < 0:
        raise ScenarioError(f"{key}: the {series.name} series starts after the run")
    return series.to_numpy(dtype=float)[rows]


def _zone_year(site: SiteConfig, profile_zone: str | None, profile_year: int | None):
    if profile_zone is not None:
        return profile_zone, profile_year
    return site.carbon.zone, site.carbon.year


def site_contracts(
    site: SiteConfig,
    i: int,
    start: datetime,
    edges_s: np.ndarray,
    horizon_s: float,
    years: str | None,
) -> SiteContracts | None:
    """Site `i`'s contracts on the hours of `edges_s` (None: it has none); the PPA
    profiles are read here, so a zone-year without one is refused before the run with a
    one-line ScenarioError naming the key."""
    contracts = site.contracts
    if contracts is None:
        return None
    ppa_kw = np.zeros(len(edges_s))
    for k, ppa in enumerate(contracts.ppa):
        key = f"sites[{i}].contracts.ppa[{k}]"
        if ppa.mwh_per_year is not None:
            ppa_kw += ppa.mwh_per_year * 1000.0 / (SECONDS_PER_YEAR / 3600.0)
            continue
        assert ppa.technology is not None and ppa.kw is not None  # PpaConfig checks it
        p = ppa.profile
        zone, year = _zone_year(site, p.zone if p else None, p.year if p else None)
        assert zone is not None  # Site refuses a default from a non-zone carbon signal
        try:
            cf = profile_on_run_clock(zone, ppa.technology, start, horizon_s, year, years)
        except ScenarioError as e:
            raise ScenarioError(f"{key}: {e}") from None
        ppa_kw += ppa.kw * on_hours(cf, start, edges_s, key)
    certificates_kwh = contracts.certificates_mwh * 1000.0 * horizon_s / SECONDS_PER_YEAR
    return SiteContracts(ppa_kw, certificates_kwh, contracts.matching)


def grid_carbon_free_share(
    site: SiteConfig, start: datetime, edges_s: np.ndarray, horizon_s: float, years: str | None
) -> np.ndarray:
    """The carbon-free share (0..1) of the site's grid on each hour of `edges_s`: its
    carbon `zone`'s mix, from the zone-years its carbon trace reads; 0 where the carbon
    signal is not a catalog zone (a file or a constant: no fuel mix to tell)."""
    zone = site.carbon.zone
    if zone is None:
        return np.zeros(len(edges_s))
    share = carbon_free_series(zone, start, horizon_s, site.carbon.year, years)
    share.name = "carbon-free share"
    return on_hours(share, start, edges_s, "carbon.zone")


def account(
    hourly: pd.DataFrame, contracts: SiteContracts | None, grid_share: np.ndarray
) -> float | None:
    """Add to one site's hourly energy (the `onsite` table's rows of the site) the
    contracted PPA supply `ppa_kwh` and the load met by carbon-free energy
    `carbon_free_kwh` (`sim.energy.market.hourly_cfe_kwh`); return the site's market-based
    carbon, kg (None without contracts: it is the location-based carbon)."""
    hours_h = (hourly["end_s"] - hourly["start_s"]).to_numpy() / 3600.0
    ppa_kwh = np.zeros(len(hourly)) if contracts is None else contracts.ppa_kw * hours_h
    hourly["ppa_kwh"] = ppa_kwh
    hourly["carbon_free_kwh"] = hourly_cfe_kwh(
        hourly["carbon_free_to_load_kwh"].to_numpy(),
        hourly["grid_to_load_kwh"].to_numpy(),
        ppa_kwh,
        grid_share,
    )
    if contracts is None:
        return None
    return market_based_kg(
        hourly["grid_import_kwh"].to_numpy(),
        hourly["carbon_import_kg"].to_numpy(),
        ppa_kwh,
        contracts.certificates_kwh,
        contracts.matching,
    )


def grid_only_cfe_kwh(
    times_s: np.ndarray,
    facility_kw: np.ndarray,
    edges_s: np.ndarray,
    horizon_s: float,
    grid_share: np.ndarray,
) -> float:
    """The load met by carbon-free energy at a site without on-site energy or contracts,
    kWh: its facility energy of each hour of `edges_s` (the power `facility_kw[k]` from
    `times_s[k]` on, a step function from 0 to `horizon_s`) times the grid's carbon-free
    share of the hour."""
    t = np.union1d(times_s, edges_s)
    t = np.append(t[t < horizon_s], horizon_s)
    power_kw = facility_kw[np.searchsorted(times_s, t[:-1], side="right") - 1]
    hour = np.searchsorted(edges_s, t[:-1], side="right") - 1
    energy_kwh = np.bincount(hour, weights=power_kw * np.diff(t) / 3600.0, minlength=len(edges_s))
    return float(energy_kwh @ grid_share)
