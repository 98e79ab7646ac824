"""On-site energy: each site's solar, wind, battery and grid connection, the site's energy
balance over the run, and what it does to the site's carbon (docs/onsite-energy.md).

The balance is solved on the site's facility power as the run logged it (the power table,
with the services' power added: every change of IT power or PUE is a row), at every
whole UTC hour (a step of the generation profiles) and wherever the battery reaches a
bound (`sim.energy.dispatch.SiteEnergy`), after the run, with the battery setpoints the
policy set (`SetBattery`, kept per site as a step function): the result is the exact
balance of the run. During the run each site's balance is also advanced, when a policy
asks (`battery_now`), over the site's facility power up to now as the power table will
have it (the power log with the services' extra power added, the services advanced to
now): settled up to the last change before now's instant (cut where the whole run's
integration cuts, so its state there is the same bit for bit), then integrated on a copy
from there to now.

The grid meter. What the utility meters at a site with on-site equipment is its grid
import (and export), not its facility power: the balance's import and export kW on each
of its intervals, a step function (`grid_import_steps`; `metered_power` puts it in the
power table's place). The bill (energy cost and demand charge, `Fleet.write_costs`) and
the demand-response events (`DemandResponseMeter`) are measured on it; during the run
the live balance keeps it too (the last `LIVE_METER_S`), for the demand-response
baseline at an event's notice (`mean_import_kw`) and the month's running peak
(`month_peak_import_kw`).

Carbon attribution. A site with on-site equipment emits location-based carbon on its
grid import only (the energy from the grid, to the load and to the battery, at the grid's
intensity of its hour): its `carbon_operational_kg` in the `sites` table and the
summary. The jobs and services keep their gross figures (their facility energy at the
grid's intensity, as without on-site energy), which add up to the site's
`carbon_load_kg`; the difference `carbon_load_kg - carbon_operational_kg` is the carbon
the on-site supply avoided (net of any grid charging of the battery), reported per site,
not shared among jobs.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.config.sites import Site as SiteConfig
from sim.energy import Battery, BatteryState, GridConnection, amortised_embodied_kg
from sim.energy.balance import ImportLimitError, battery_excess_kw
from sim.energy.dispatch import EnergyInterval, SiteEnergy, hour_edges_s
from sim.engine.component import Component
from sim.engine.contracts import (
    SiteContracts,
    account,
    grid_carbon_free_share,
    grid_only_cfe_kwh,
    on_hours,
    site_contracts,
)
from sim.engine.service_power import site_rows_with_extra
from sim.errors import PolicyError, ScenarioError
from sim.grid import CarbonSignal
from sim.grid.renewables import NRMSE_24H, forecast_capacity_factors, profile_on_run_clock
from sim.market.billing import running_month_peak_kw
from sim.results import ResultParts
from sim.results.columns import ONSITE_SUMMARY_KEYS
from sim.util.records import INSTANT_S

if TYPE_CHECKING:
    from datetime import datetime

    from sim.api import OnsiteReading, SetBattery
    from sim.config.scenario import Scenario
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.engine.ledger import Site
    from sim.engine.service_replicas import Deployment
    from sim.engine.services import Services
    from sim.util.records import PowerLog

__all__ = ["LIVE_METER_S", "ONSITE_COLUMNS", "OnsiteEnergy", "SiteEquipment", "site_equipment"]

LIVE_METER_S = 32 * 86400.0
"""How far back the live grid meter reaches, s: longer than a calendar month and its
daylight-saving hour, so the month's running peak is always in it."""

_FLOWS = (
    "load_kwh",
    "generation_kwh",
    "on_site_used_kwh",
    "battery_charge_kwh",
    "battery_discharge_kwh",
    "battery_to_load_kwh",
    "grid_to_load_kwh",
    "generation_to_battery_kwh",
    "generation_export_kwh",
    "curtailed_kwh",
    "grid_to_battery_kwh",
    "battery_to_grid_kwh",
)
"""The `SiteBalance` flows the `onsite` table sums per hour."""

ONSITE_COLUMNS = (
    "site",
    "start_s",
    "end_s",
    *_FLOWS,
    "grid_import_kwh",
    "export_kwh",
    "carbon_free_to_load_kwh",
    "carbon_import_kg",
    "soc",
    "ppa_kwh",
    "carbon_free_kwh",
)
"""The columns of onsite.parquet: one row per site with on-site energy and hour (UTC hours;
the first and last may be partial): energies in kWh over [start_s, end_s),
`carbon_free_to_load_kwh` the part of the load met by on-site carbon-free supply (on-site
used + the carbon-free share of the battery's discharge to it), `carbon_import_kg` the
location-based carbon of the grid import, `soc` the battery's state of charge at the
hour's end (NaN without a battery), `ppa_kwh` the contracted PPA supply, `carbon_free_kwh`
the load met by carbon-free energy of any source (the 24/7 CFE numerator,
`sim.engine.contracts.account`)."""


@dataclass(frozen=True)
class SiteEquipment:
    """One site's on-site equipment for a run."""

    config: SiteConfig
    edges_s: np.ndarray
    """0 and every whole UTC hour of the run, s: the generation profile's steps."""
    generation_kw: np.ndarray
    """On-site generation on each of `edges_s`' intervals, kW."""
    battery: Battery | None
    connection: GridConnection
    embodied_kg: float
    """Embodied carbon of the PV, wind and battery the run carries (each amortised over
    its lifetime, `sim.energy.amortised_embodied_kg`), kgCO2e."""
    contracts: SiteContracts | None
    grid_carbon_free_share: np.ndarray
    """The grid's carbon-free share (0..1) on each hour of `edges_s`."""


def _generation_kw(
    site: SiteConfig,
    key: str,
    start: datetime,
    edges_s: np.ndarray,
    horizon_s: float,
    years: str | None,
) -> np.ndarray:
    """The site's on-site generation on each hour of `edges_s`, kW; ScenarioError naming
    `key` for a zone-year without a profile."""
    onsite = site.onsite
    total = np.zeros(len(edges_s))
    if onsite is None:
        return total
    zone = onsite.profile.zone if onsite.profile is not None else site.carbon.zone
    year = onsite.profile.year if onsite.profile is not None else site.carbon.year
    assert zone is not None  # the scenario refuses a default from a non-zone carbon signal
    for technology, kw in onsite.capacities_kw.items():
        try:
            cf = profile_on_run_clock(zone, technology, start, horizon_s, year, years)
        except ScenarioError as e:
            raise ScenarioError(f"{key}: {e}") from None
        total += kw * on_hours(cf, start, edges_s, key)
    return total


def _run_hours_s(start: datetime, horizon_s: float) -> np.ndarray:
    """0 and every whole UTC hour of a run from `start` lasting `horizon_s`, s."""
    first_hour_s = -(start.minute * 60 + start.second + start.microsecond / 1e6) % 3600.0
    return hour_edges_s(first_hour_s, horizon_s)


def _equipment(
    site: SiteConfig, i: int, start: datetime, horizon_s: float, years: str | None
) -> SiteEquipment:
    """Site `i`'s equipment from its scenario keys."""
    edges = _run_hours_s(start, horizon_s)
    key = f"sites[{i}].onsite.profile" if site.onsite and site.onsite.profile else None
    generation = _generation_kw(
        site, key or f"sites[{i}].onsite (profile: the carbon zone)", start, edges, horizon_s, years
    )
    b = site.battery
    battery = (
        None
        if b is None
        else Battery(
            capacity_kwh=b.capacity_kwh,
            power_kw=b.power_kw,
            charge_efficiency=b.charge_efficiency,
            discharge_efficiency=b.discharge_efficiency,
            soc_min=b.soc_min,
            soc_max=b.soc_max,
            self_discharge_per_day=b.self_discharge_per_day,
            fade_per_cycle=b.fade_per_cycle,
            embodied_kg_per_kwh=b.embodied_kg_per_kwh,
            lifetime_years=b.lifetime_years,
        )
    )
    g = site.grid_connection
    connection = (
        GridConnection()
        if g is None
        else GridConnection(
            math.inf if g.import_limit_kw is None else g.import_limit_kw,
            math.inf if g.export_limit_kw is None else g.export_limit_kw,
            g.mode,
            g.export_price_per_kwh,
        )
    )
    embodied = 0.0 if battery is None else battery.embodied_kg(horizon_s)
    onsite = site.onsite
    if onsite is not None:
        pv_kg = onsite.pv_kwp * onsite.pv_embodied_kg_per_kwp
        embodied += amortised_embodied_kg(pv_kg, onsite.pv_lifetime_years, horizon_s)
        wind_kw = onsite.wind_kw + onsite.wind_offshore_kw
        wind_kg = wind_kw * onsite.wind_embodied_kg_per_kw
        embodied += amortised_embodied_kg(wind_kg, onsite.wind_lifetime_years, horizon_s)
    contracts = site_contracts(site, i, start, edges, horizon_s, years)
    share = grid_carbon_free_share(site, start, edges, horizon_s, years)
    return SiteEquipment(site, edges, generation, battery, connection, embodied, contracts, share)


_FORECAST_LEAD_H = 24.0
"""The lead of the on-site generation forecast, h: day-ahead (`forecast_capacity_factors`)."""


def _forecast_kw(assets: SiteEquipment, scenario: Scenario, i: int) -> np.ndarray:
    """Site `i`'s forecast generation per hour of `assets.edges_s`, kW: the truth with a
    perfect forecast (`scenario.forecast.model`), else the site's capacity factor (its
    generation / its installed kW) with `forecast_capacity_factors`' day-ahead errors at
    the capacity-weighted `NRMSE_24H`, drawn once from a stream of the scenario's seed
    and the site (apart from the run's streams: the run is unchanged)."""
    onsite = assets.config.onsite
    if scenario.forecast.model == "perfect" or onsite is None or not onsite.capacities_kw:
        return assets.generation_kw
    capacities = onsite.capacities_kw
    total_kw = sum(capacities.values())
    nrmse = sum(kw * NRMSE_24H[t] for t, kw in capacities.items()) / total_kw
    rng = np.random.default_rng([scenario.seed, i])
    cf = forecast_capacity_factors(assets.generation_kw / total_kw, _FORECAST_LEAD_H, nrmse, rng)
    return cf * total_kw


def site_equipment(scenario: Scenario) -> list[SiteEquipment | None]:
    """Per site of `scenario`, its on-site equipment for the run (None: none); the
    generation profiles are read here, so a zone-year without one is refused before a
    run (and by `dcsim validate`) with a one-line ScenarioError naming the key."""
    return [
        _equipment(site, i, scenario.start, scenario.horizon_s, scenario.years)
        if site.has_onsite_energy
        else None
        for i, site in enumerate(scenario.sites)
    ]


class OnsiteEnergy(Component):
    """The sites' on-site energy: equipment built at the start (a zone-year without a
    profile is refused before the run), balances and results at the end."""

    name = "onsite"
    uses = ("fleet", "services")

    __slots__ = (
        "_core",
        "_fleet",
        "_forecast_kw",
        "_live",
        "_meters",
        "_services",
        "_setpoints",
        "assets",
    )

    def __init__(self, core: Core, *, fleet: Fleet, services: Services):
        self._core = core
        self._fleet = fleet
        self._services = services
        self.assets = site_equipment(core.scenario)
        """Per site, its on-site equipment (None: none)."""
        self._setpoints: list[tuple[list[float], list[float], list[float]]] = [
            ([], [], []) for _ in self.assets
        ]
        """Per site, the battery setpoints' times (s), powers (kW; NaN: none) and import caps
        (kW; NaN: none; neither: self-consumption)."""
        self._live = [
            None if a is None else self._new_live(i, a) for i, a in enumerate(self.assets)
        ]
        """Per site, its balance as advanced during the run (`battery_now`)."""
        self._meters: list[_GridMeter | None] = [None for _ in self.assets]
        """Per site with on-site equipment, its grid meter over the run (after
        `write_results`)."""
        self._forecast_kw = [
            None if a is None else _forecast_kw(a, core.scenario, i)
            for i, a in enumerate(self.assets)
        ]

    def equipment(self, name: str, action: object) -> tuple[int, SiteEquipment]:
        """Site `name`'s index and equipment; PolicyError naming `action` for an unknown
        site or one without on-site energy."""
        i = self._fleet.site(name, action).index
        assets = self.assets[i]
        if assets is None:
            raise PolicyError(f"{action!r}: site {name!r} has no on-site energy")
        return i, assets

    def take(self, a: SetBattery, reading: Callable[[str], OnsiteReading | None]) -> None:
        """Carry out `a` (docs/writing-a-policy.md, `SetBattery`), `reading(site)` giving a
        site's on-site state now; PolicyError naming `a` where it cannot be taken."""
        i, assets = self.equipment(a.site, a)
        battery, power, cap = assets.battery, a.power_kw, a.import_cap_kw
        if battery is None:
            raise PolicyError(f"{a!r}: site {a.site!r} has no battery")
        if power is not None and cap is not None:
            raise PolicyError(f"{a!r}: give power_kw or import_cap_kw, not both")
        if cap is not None and not (math.isfinite(cap) and cap >= 0):
            raise PolicyError(f"{a!r}: import_cap_kw = {cap} must be finite and >= 0")
        if power is not None:
            if not math.isfinite(power) or abs(power) > battery.power_kw:
                raise PolicyError(
                    f"{a!r}: power_kw = {power} is over the battery's rating {battery.power_kw} kW"
                )
            c = assets.connection
            if c.over_limit == "refuse":
                now, state = reading(a.site), self.battery_now(i)
                assert now is not None and state is not None
                applied_kw = battery.applied_power_kw(state, power)
                side, over_kw = battery_excess_kw(now.load_kw, now.generation_kw, applied_kw, c)
                if over_kw > 0:
                    raise PolicyError(
                        f"{a!r}: power_kw = {power} takes the battery's {side} over the "
                        f"connection's limit by {over_kw:.6g} kW now (import limit "
                        f"{c.import_limit_kw} kW, export limit {c.export_limit_kw} kW)"
                    )
        self.set_battery(i, power, cap)

    def set_battery(self, i: int, power_kw: float | None, import_cap_kw: float | None) -> None:
        """Hold site `i`'s battery at `power_kw` (kW, positive charging), else hold its grid
        import at or below `import_cap_kw` (kW), from now on (neither: self-consumption);
        the last setpoint of an instant wins."""
        times, powers, caps = self._setpoints[i]
        now = float(self._core.env.now)
        power = math.nan if power_kw is None else float(power_kw)
        cap = math.nan if import_cap_kw is None else float(import_cap_kw)
        if not (times and times[-1] == now):
            times.append(now)
            powers.append(power)
            caps.append(cap)
        powers[-1], caps[-1] = power, cap

    def setpoint_kw(self, i: int) -> float | None:
        """Site `i`'s battery power setpoint now, kW (None: none)."""
        return _held(self._setpoints[i][1])

    def import_cap_kw(self, i: int) -> float | None:
        """Site `i`'s import cap now, kW (None: none)."""
        return _held(self._setpoints[i][2])

    def generation_kw(self, i: int, t_s: float) -> float:
        """Site `i`'s on-site generation at `t_s`, kW."""
        assets = self.assets[i]
        assert assets is not None
        k = int(np.searchsorted(assets.edges_s, t_s, side="right")) - 1
        return float(assets.generation_kw[max(k, 0)])

    def generation_forecast(self, i: int, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Site `i`'s forecast on-site generation from now over `horizon_s`: the start
        times (s; the first is now) and kW of its hourly steps (perfect with a perfect
        forecast; else the profile with `forecast_capacity_factors`' errors)."""
        assets, forecast = self.assets[i], self._forecast_kw[i]
        assert assets is not None and forecast is not None
        now = float(self._core.env.now)
        edges = assets.edges_s
        k = max(int(np.searchsorted(edges, now, side="right")) - 1, 0)
        end = int(np.searchsorted(edges, now + horizon_s, side="left"))
        times = edges[k : max(end, k + 1)].copy()
        times[0] = now
        return times, forecast[k : k + len(times)].copy()

    def battery_now(self, i: int) -> BatteryState | None:
        """Site `i`'s battery state now (None without one): its balance advanced over the
        site's facility power up to now as the power table will have it, the services'
        extra power included (`_Live.load`), and the setpoints."""
        live = self._live[i]
        assert live is not None
        if live.energy.battery is None:
            return None
        return self._advanced(i)[0]

    def grid_import_so_far(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Site `i`'s grid import during the run, from the live balance (`battery_now`'s):
        the start times (s) and kW of its steps over the last `LIVE_METER_S` (or from 0)
        up to now, the last holding until now."""
        live = self._live[i]
        assert live is not None
        ahead = self._advanced(i)[1]
        times = np.concatenate((live.meter.times_s, ahead.times_s))
        return times, np.concatenate((live.meter.import_kw, ahead.import_kw))

    def mean_import_kw(self, i: int, t0_s: float) -> float:
        """Site `i`'s mean grid import over [t0_s, now] (t0_s clipped at 0 and to
        `LIVE_METER_S` back), kW (`grid_import_so_far`). Over an empty window (now is 0),
        the facility power now less the generation, at least 0 (no interval is metered
        yet)."""
        times, import_kw = self.grid_import_so_far(i)
        now = float(self._core.env.now)
        if not times.size:
            site = self._fleet.sites[i]
            extra_w = self._services.extra_w(site) * site.pue.value_at(now)
            facility_kw = (site.facility_w(now) + extra_w) / 1000.0
            return max(facility_kw - self.generation_kw(i, now), 0.0)
        t0_s = max(t0_s, float(times[0]))
        if now <= t0_s:
            return float(import_kw[-1])
        knots = np.append(times, now)
        kwh = np.concatenate(([0.0], np.cumsum(import_kw * np.diff(knots))))
        e0, e1 = np.interp([t0_s, now], knots, kwh)
        return float(e1 - e0) / (now - t0_s)

    def month_peak_import_kw(self, i: int) -> float | None:
        """Site `i`'s demand-charge peak so far: the largest mean grid import over the
        completed demand intervals of its tariff's present billing month
        (`sim.market.billing.running_month_peak_kw` on `grid_import_so_far`), kW; None
        without a tariff with a demand charge, or before the month's first interval ends."""
        tariff = self._fleet.tariffs[i]
        if tariff is None or tariff.demand_charge_per_kw_month == 0:
            return None
        times, import_kw = self.grid_import_so_far(i)
        return running_month_peak_kw(
            times,
            import_kw * 1000.0,
            float(self._core.env.now),
            self._core.scenario.start,
            tariff.timezone,
            tariff.config.demand_interval_min,
        )

    def _advanced(self, i: int) -> tuple[BatteryState | None, _GridMeter]:
        """Site `i`'s balance advanced over its facility power up to now (`_Live.load`) and
        the setpoints: settled up to the last change before now's instant, then
        integrated on a copy from there to now. The battery state now and the copy's grid
        meter (from the settled time to now; empty when now is settled)."""
        assets, live = self.assets[i], self._live[i]
        assert assets is not None and live is not None
        site = self._fleet.sites[i]
        times, facility_w = live.load(self._fleet.power_log, site, self._services.at_site(site))
        now = float(self._core.env.now)
        # commit to the last change before now's instant (every row before it is final)
        settled = now - INSTANT_S
        changes = np.concatenate((times, assets.edges_s, self._setpoints[i][0]))
        changes = changes[(changes > live.settled_s) & (changes <= settled)]
        if changes.size:
            to_s = float(changes.max())
            self._run(live.energy, i, assets, times, facility_w, to_s, live.settled_s)
            live.meter.drop_before(now - LIVE_METER_S)
            keep = max(int(np.searchsorted(times, to_s, side="right")) - 1, 0)
            live.settled_s, live.from_s = to_s, float(times[keep])
            times, facility_w = times[keep:], facility_w[keep:]
        meter = _GridMeter()
        if now <= live.settled_s:
            return live.energy.state, meter
        ahead = dataclasses.replace(live.energy, sink=meter.add)
        self._run(ahead, i, assets, times, facility_w, now, live.settled_s)
        return ahead.state, meter

    def _new_live(self, i: int, assets: SiteEquipment) -> _Live:
        """Site `i`'s live balance at the start, its intervals going to its live meter."""
        meter = _GridMeter()
        return _Live(self._energy(i, assets, meter.add), meter)

    def _energy(
        self, i: int, assets: SiteEquipment, sink: Callable[[EnergyInterval], None]
    ) -> SiteEnergy:
        """Site `i`'s balance at the start, its intervals going to `sink`."""
        battery, cfg = assets.battery, assets.config.battery
        return SiteEnergy(
            assets.connection,
            battery,
            None if battery is None or cfg is None else battery.new(cfg.initial_soc),
            where=f"site {self._fleet.names[i]}",
            sink=sink,
        )

    def _run(
        self,
        energy: SiteEnergy,
        i: int,
        assets: SiteEquipment,
        times_s: np.ndarray,
        facility_w: np.ndarray,
        until_s: float,
        start_s: float = 0.0,
    ) -> None:
        """Integrate site `i`'s balance over [start_s, until_s] from its facility power
        rows (from the last at or before `start_s` on); a load over the import limit:
        ScenarioError naming the key."""
        set_times, set_kw, set_cap_kw = self._setpoints[i]
        try:
            energy.run(
                times_s,
                facility_w / 1000.0,
                assets.edges_s,
                assets.generation_kw,
                until_s,
                np.asarray(set_times, dtype=float),
                np.asarray(set_kw, dtype=float),
                start_s,
                np.asarray(set_cap_kw, dtype=float),
            )
        except ImportLimitError as e:
            raise ScenarioError(f"sites[{i}].grid_connection.import_limit_kw: {e}") from None
        except PolicyError as e:  # a held setpoint over a limit of a "refuse" connection
            raise PolicyError(
                f"SetBattery at site {self._fleet.names[i]}, held since it was set: {e} "
                "(the load or generation changed; grid_connection.mode 'curtail' reduces it)"
            ) from None

    def _hourly(self, i: int, assets: SiteEquipment, power: pd.DataFrame) -> pd.DataFrame:
        """Site `i`'s balance over the run, from its rows of the power table, summed per
        hour of `assets.edges_s` as it goes (`_HourlySums`: the intervals are not kept) and
        metered (`grid_import_steps`)."""
        rows = power[power["site"] == self._fleet.names[i]]
        sums = _HourlySums(assets.edges_s, self._fleet.sites[i].signal)
        meter = self._meters[i] = _GridMeter()

        def sink(x: EnergyInterval) -> None:
            sums.add(x)
            meter.add(x)

        energy = self._energy(i, assets, sink)
        self._run(
            energy,
            i,
            assets,
            rows["time_s"].to_numpy(),
            rows["facility_w"].to_numpy(),
            self._core.horizon_s,
        )
        end = np.append(assets.edges_s[1:], self._core.horizon_s)
        return pd.DataFrame(
            {"site": self._fleet.names[i], "start_s": assets.edges_s, "end_s": end, **sums.columns}
        )

    def grid_import_steps(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Site `i`'s grid meter over the run (after `write_results`): the start times (s)
        of the balance's intervals and the grid import and export on each, kW (the last
        holding until the horizon): exact, the intervals' energies over their lengths."""
        meter = self._meters[i]
        assert meter is not None, "the balance is solved in write_results"
        return meter.times_s, meter.import_kw, meter.export_kw

    def metered_power(self, power: pd.DataFrame) -> pd.DataFrame:
        """What the utility meters, in the power table's form (`time_s`, `site`,
        `facility_w`): a site with on-site equipment's rows replaced by its grid import
        steps (`grid_import_steps`, W), the others' rows as in `power` (after
        `write_results`; `power` itself in a run without on-site equipment)."""
        columns = ["time_s", "site", "facility_w"]
        names = self._fleet.names
        metered = [n for n, m in zip(names, self._meters, strict=True) if m is not None]
        if not metered:
            return power
        parts = [power.loc[~power["site"].isin(metered), columns]]
        for name, meter in zip(names, self._meters, strict=True):
            if meter is not None:
                frame = {"time_s": meter.times_s, "facility_w": meter.import_kw * 1000.0}
                parts.append(pd.DataFrame(frame).assign(site=name)[columns])
        frame = pd.concat(parts, ignore_index=True)
        frame["site"] = pd.Categorical(frame["site"], categories=names)
        return frame

    def write_results(self, out: ResultParts) -> None:
        """The `onsite` table (hourly balance per site with on-site energy), the sites'
        grid-import carbon and columns, the bills re-metered on grid import
        (`Fleet.write_costs` on `metered_power`), and the on-site summary keys (None in a
        run without on-site energy)."""
        tables = []
        market_kg: dict[str, float] = {}
        for i, assets in enumerate(self.assets):
            if assets is not None:
                hourly = self._hourly(i, assets, out.power)
                kg = account(hourly, assets.contracts, assets.grid_carbon_free_share)
                if kg is not None:
                    market_kg[self._fleet.names[i]] = kg
                tables.append(hourly)
        if tables:
            out.tables["onsite"] = pd.concat(tables, ignore_index=True)
            self._sites(out, market_kg, self._grid_only_cfe_kwh(out.power))
            if any(t is not None for t in self._fleet.tariffs):
                self._fleet.write_costs(out, out.tables["sites"], self.metered_power(out.power))
        _summary(out, self.assets)

    def _grid_only_cfe_kwh(self, power: pd.DataFrame) -> dict[str, float]:
        """Per site without on-site energy or contracts, the load its grid's carbon-free
        share met, kWh (`sim.engine.contracts.grid_only_cfe_kwh`)."""
        scenario, horizon_s = self._core.scenario, self._core.horizon_s
        edges = _run_hours_s(scenario.start, horizon_s)
        out = {}
        for i, assets in enumerate(self.assets):
            if assets is None:
                name = self._fleet.names[i]
                rows = power[power["site"] == name]
                share = grid_carbon_free_share(
                    scenario.sites[i], scenario.start, edges, horizon_s, scenario.years
                )
                out[name] = grid_only_cfe_kwh(
                    rows["time_s"].to_numpy(),
                    rows["facility_w"].to_numpy() / 1000.0,
                    edges,
                    horizon_s,
                    share,
                )
        return out

    def _sites(
        self, out: ResultParts, market_kg: dict[str, float], grid_only_cfe_kwh: dict[str, float]
    ) -> None:
        """The `sites` table of a run with on-site energy: a site with it emits on its grid
        import (`carbon_operational_kg`), its load's gross carbon moves to `carbon_load_kg`;
        columns `energy_grid_import_kwh`, `energy_onsite_generation_kwh`, `export_credit`
        (NaN where no price), `cfe_score` (a site without on-site energy or contracts:
        `grid_only_cfe_kwh` over its energy), `carbon_market_based_kg` (`market_kg` per site
        with contracts, else its location-based `carbon_operational_kg`)."""
        sites = out.tables["sites"]
        table = out.tables["onsite"]
        by_site = table.groupby("site", sort=False)[
            ["grid_import_kwh", "generation_kwh", "export_kwh", "carbon_free_kwh"]
            + ["carbon_import_kg"]
        ].sum()
        has = sites["site"].isin(by_site.index).to_numpy()
        sites["carbon_load_kg"] = sites["carbon_operational_kg"]

        def per_site(column: str, otherwise: pd.Series | float) -> np.ndarray:
            values = sites["site"].map(by_site[column]).to_numpy(dtype=float)
            fallback = np.broadcast_to(np.asarray(otherwise, dtype=float), values.shape)
            return np.where(has, values, fallback)

        sites["carbon_operational_kg"] = per_site("carbon_import_kg", sites["carbon_load_kg"])
        contracted = sites["site"].isin(market_kg.keys()).to_numpy()
        sites["carbon_market_based_kg"] = np.where(
            contracted,
            sites["site"].map(market_kg).to_numpy(dtype=float),
            sites["carbon_operational_kg"],
        )
        sites["energy_grid_import_kwh"] = per_site("grid_import_kwh", sites["energy_facility_kwh"])
        sites["energy_onsite_generation_kwh"] = per_site("generation_kwh", 0.0)
        prices = [
            (a.connection.export_price_per_kwh or 0.0) if a is not None else np.nan
            for a in self.assets
        ]
        priced = [
            a is not None and a.connection.export_price_per_kwh is not None for a in self.assets
        ]
        sites["export_credit"] = np.where(priced, per_site("export_kwh", 0.0) * prices, np.nan)
        energy = sites["energy_facility_kwh"].to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            sites["cfe_score"] = np.where(
                energy > 0,
                per_site("carbon_free_kwh", sites["site"].map(grid_only_cfe_kwh)) / energy,
                np.nan,
            )
            sites["carbon_intensity_g_per_kwh"] = np.where(
                energy > 0, sites["carbon_operational_kg"] * 1000.0 / energy, np.nan
            )


def _held(values: list[float]) -> float | None:
    """The last of a site's setpoint values (None: none yet, or NaN)."""
    return None if not values or math.isnan(values[-1]) else values[-1]


class _GridMeter:
    """A site's grid import and export, kW, on each balance interval (start times, s), in
    time order: the interval's energy over its length."""

    def __init__(self) -> None:
        self._times_s = array("d")
        self._import_kw = array("d")
        self._export_kw = array("d")

    def add(self, x: EnergyInterval) -> None:
        b = x.balance
        per_h = 3600.0 / b.duration_s if b.duration_s > 0 else 0.0
        self._times_s.append(x.t0_s)
        self._import_kw.append(b.grid_import_kwh * per_h)
        self._export_kw.append(b.export_kwh * per_h)

    def drop_before(self, t_s: float) -> None:
        """Forget the steps that end at or before `t_s`."""
        k = int(np.searchsorted(self.times_s, t_s, side="right")) - 1
        if k > 0:
            del self._times_s[:k], self._import_kw[:k], self._export_kw[:k]

    # copies: a view would keep the arrays from growing
    @property
    def times_s(self) -> np.ndarray:
        return np.array(self._times_s, dtype=float)

    @property
    def import_kw(self) -> np.ndarray:
        return np.array(self._import_kw, dtype=float)

    @property
    def export_kw(self) -> np.ndarray:
        return np.array(self._export_kw, dtype=float)


@dataclass
class _Live:
    """A site's balance advanced during the run: `energy` is integrated over [0,
    `settled_s`], `settled_s` a change of its load, generation or setpoint (so the
    intervals are those of the whole run's integration, cut where it cuts them), its
    intervals metered by `meter`. Its load
    is read from `from_s` on, the time of the power table's row in force at `settled_s`:
    `rows` are the power log's rows of the site from the last before `from_s` on,
    `cursor` the log's length when they were last read, `starts` per deployment at the
    site its level log's first row read (the last before `from_s`)."""

    energy: SiteEnergy
    meter: _GridMeter
    settled_s: float = 0.0
    from_s: float = 0.0
    rows: list[int] = field(default_factory=list)
    cursor: int = 0
    starts: list[int] = field(default_factory=list)

    def load(
        self, log: PowerLog, site: Site, levels: list[Deployment]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The site's facility power from `from_s` to now as the power table will have it
        (times s, W): the log's rows of the site with the extra power of the services'
        deployments `levels` (their logs complete up to now) added as `with_extra_power`
        adds it, to the same floats. Read from the last row before `from_s` of each log on:
        `from_s` opens an instant of the table's times, so its instants from there on are
        the table's (`site_rows_with_extra`)."""
        sites = np.frombuffer(log.site, dtype=np.int16)
        self.rows.extend(
            (np.flatnonzero(sites[self.cursor :] == site.index) + self.cursor).tolist()
        )
        self.cursor = len(sites)
        rows = np.asarray(self.rows, dtype=np.intp)
        rows = rows[_first_read(np.frombuffer(log.time_s)[rows], self.from_s) :]
        del self.rows[: len(self.rows) - len(rows)]
        table = {
            name: np.frombuffer(getattr(log, name), getattr(log, name).typecode)[rows]
            for name in ("time_s", "it_w", "facility_w", "busy_gpus")
        }
        self.starts += [0] * (len(levels) - len(self.starts))
        logs = []
        for k, level in enumerate(levels):
            tail = level.time_s[self.starts[k] :]  # a copy: the log grows after the read
            first = _first_read(np.frombuffer(tail), self.from_s)
            self.starts[k] += first
            logs.append(
                (np.frombuffer(tail)[first:], np.frombuffer(level.extra_w[self.starts[k] :]))
            )
        if logs:
            table = site_rows_with_extra(table, site, logs)
        times = table["time_s"]
        first = int(np.searchsorted(times, self.from_s, side="left"))
        return times[first:], table["facility_w"][first:]


def _first_read(times_s: np.ndarray, from_s: float) -> int:
    """The index of the row in force just before `from_s` among the increasing `times_s`
    (0: none is before it)."""
    return max(int(np.searchsorted(times_s, from_s, side="left")) - 1, 0)


class _HourlySums:
    """The intervals of one site's balance, in time order, summed per hour of `edges_s`
    (the `onsite` table's columns after `site`, `start_s`, `end_s`)."""

    def __init__(self, edges_s: np.ndarray, signal: CarbonSignal):
        self.edges_s = edges_s
        self.signal = signal
        self.hour = 0
        n = len(edges_s)
        names = (*_FLOWS, "grid_import_kwh", "export_kwh", "carbon_free_to_load_kwh")
        self.columns: dict[str, np.ndarray] = {name: np.zeros(n) for name in names}
        self.columns["carbon_import_kg"] = np.zeros(n)
        self.columns["soc"] = np.full(n, np.nan)

    def add(self, x: EnergyInterval) -> None:
        """Add interval `x` to its hour (the last hour that starts at or before it)."""
        edges, h = self.edges_s, self.hour
        while h + 1 < len(edges) and edges[h + 1] <= x.t0_s:
            h += 1
        self.hour = h
        c, b = self.columns, x.balance
        for flow in _FLOWS:
            c[flow][h] += getattr(b, flow)
        import_kwh = b.grid_import_kwh
        c["grid_import_kwh"][h] += import_kwh
        c["export_kwh"][h] += b.export_kwh
        c["carbon_free_to_load_kwh"][h] += x.carbon_free_to_load_kwh
        if import_kwh > 0:  # import x the mean intensity over the interval, g -> kg
            mean_ci = self.signal.integral(x.t0_s, x.t1_s) / (x.t1_s - x.t0_s)
            c["carbon_import_kg"][h] += import_kwh * mean_ci / 1000.0
        if x.battery is not None:
            c["soc"][h] = x.battery.soc


def _summary(out: ResultParts, assets: list[SiteEquipment | None]) -> None:
    """The on-site summary keys from the `onsite` table and the `sites` table (which
    `OnsiteEnergy._sites` completed): None where no site has the equipment."""
    summary = out.summary
    summary.update(dict.fromkeys(ONSITE_SUMMARY_KEYS))
    table = out.tables.get("onsite")
    if table is None:
        return
    sites = out.tables["sites"]
    summary["exported_kwh"] = float(table["export_kwh"].sum())
    summary["grid_import_kwh"] = float(sites["energy_grid_import_kwh"].sum())
    load_kwh = float(sites["energy_facility_kwh"].sum())
    clean_kwh = float(np.nansum(sites["cfe_score"] * sites["energy_facility_kwh"]))
    summary["cfe_score"] = clean_kwh / load_kwh if load_kwh > 0 else None
    summary["carbon_market_based_kg"] = float(sites["carbon_market_based_kg"].sum())
    summary["carbon_operational_kg"] = float(sites["carbon_operational_kg"].sum())
    summary["carbon_embodied_kg"] += sum(a.embodied_kg for a in assets if a is not None)
    if any(a is not None and a.config.onsite is not None for a in assets):
        summary["onsite_generation_kwh"] = float(table["generation_kwh"].sum())
        summary["onsite_used_kwh"] = float(table["on_site_used_kwh"].sum())
        summary["curtailed_kwh"] = float(table["curtailed_kwh"].sum())
    batteries = [a.battery for a in assets if a is not None and a.battery is not None]
    if batteries:
        summary["battery_charge_kwh"] = float(table["battery_charge_kwh"].sum())
        discharge_kwh = float(table["battery_discharge_kwh"].sum())
        summary["battery_discharge_kwh"] = discharge_kwh
        summary["battery_cycles"] = discharge_kwh / sum(b.capacity_kwh for b in batteries)
