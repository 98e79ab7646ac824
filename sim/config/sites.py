"""The scenario's `[[sites]]`: where a site is, its carbon signal (`CarbonConfig`), its GPU
pools (`GpuPool`: models, MIG layouts, reserved and spot capacity), powering idle nodes off
(`PowerOff`), a replayed forecast archive (`SiteForecast`), its electricity tariff, and
its on-site energy equipment (`OnsiteGeneration`, `BatteryConfig`, `GridConnectionConfig`;
docs/onsite-energy.md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from sim.config.base import ConfigModel, TimeZoneName, known_name
from sim.config.market import Tariff
from sim.energy.battery import (
    LI_ION_FADE_PER_CYCLE,
    LI_ION_LIFETIME_YEARS,
    LI_ION_ROUND_TRIP_EFFICIENCY,
    LI_ION_SELF_DISCHARGE_PER_DAY,
)
from sim.energy.embodied import (
    LI_ION_EMBODIED_KG_PER_KWH,
    PV_EMBODIED_KG_PER_KWP,
    PV_LIFETIME_YEARS,
    WIND_EMBODIED_KG_PER_KW,
    WIND_LIFETIME_YEARS,
)
from sim.models import mig
from sim.models.hardware import GPU_CATALOG
from sim.models.servers import SERVER_CATALOG

MAX_POOL_GPUS: Final = 1_000_000
"""GPUs of one pool (and of one job) at most: the largest clusters announced hold a few
hundred thousand."""
MIN_PURCHASE_YEAR: Final = 1990
MAX_PURCHASE_YEAR: Final = 2100
"""The range of a pool's `purchase_year`: GPU datacenters, and a margin for what-ifs."""
MAX_POOL_LIFETIME_YEARS: Final = 50.0
"""The longest `lifetime_years` a pool may give (a typo guard; servers last 3-6 years)."""


MAX_PUE: Final = 10.0
"""PUE at most: surveyed datacenters average about 1.6 (Uptime Institute 2023)."""


class CarbonConfig(ConfigModel):
    """Where a site's carbon-intensity signal comes from, and optional what-if transforms.

    Exactly one source: a catalog `zone` (see `dcsim grid-data list`), a trace `file` in one
    of the formats of `docs/trace-formats.md`, or `constant_g_per_kwh`. Then, in this order:
    blend with `blend_zone`, multiply by `scale`, add `offset_g_per_kwh`.
    """

    zone: str | None = None
    """Zone id in the `grid_data` catalog (e.g. "DE", "US-CAL")."""
    year: int | None = Field(default=None, ge=1900, le=2100)
    """Year of the zone's trace; default: the scenario start's year if the catalog has it,
    else its latest year. A trace of another year is aligned to keep weekday and hour."""
    variant: Literal["lifecycle", "direct"] = "lifecycle"
    """Emission factors of zone traces (and of `entsoe`/`electricitymaps` files). Average
    zone traces only: a zone's marginal series has the emission factors of its method."""
    file: Path | None = None
    """Trace file, relative to the scenario file."""
    format: Literal["csv", "electricitymaps", "watttime", "entsoe", "uk-api"] = "csv"
    column: str = "carbon_intensity"
    """Value column of a `csv` file."""
    time_column: str = "timestamp"
    """Timestamp column of a `csv` file."""
    unit: Literal["g/kWh", "kg/kWh", "lbs/MWh"] = "g/kWh"
    """Unit of a `csv` file's values."""
    timezone: str = "UTC"
    """Time zone of naive timestamps in a `csv` file (IANA name)."""
    constant_g_per_kwh: float | None = Field(default=None, ge=0)
    kind: Literal["average", "marginal"] | None = None
    """Average or marginal intensity; default: marginal for `watttime` files, else average.
    A catalog `zone` with kind = "marginal" reads the zone's marginal series
    (`grid_data/catalog_marginal.csv`, docs/marginal-signals.md)."""
    blend_zone: str | None = None
    """Second catalog zone (same year rule) mixed in with weight `blend_weight`."""
    blend_weight: float = Field(default=0.5, ge=0, le=1)
    scale: float = Field(default=1.0, ge=0, le=1000)
    offset_g_per_kwh: float = 0.0

    @model_validator(mode="after")
    def _one_source(self) -> CarbonConfig:
        given = [k for k in ("zone", "file", "constant_g_per_kwh") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of zone, file, constant_g_per_kwh (got {given or 'none'})"
            )
        if self.zone is not None and self.kind == "marginal" and "variant" in self.model_fields_set:
            raise ValueError(
                "variant applies to average zone traces; a marginal zone series has the "
                "emission factors of its method (drop variant)"
            )
        if self.blend_zone is not None and self.zone is None:
            raise ValueError("blend_zone blends two catalog zones: give zone too")
        return self

    @property
    def signal_kind(self) -> str:
        """The kind of intensity this source gives."""
        if self.kind is not None:
            return self.kind
        return "marginal" if self.file is not None and self.format == "watttime" else "average"


class PoolServers(ConfigModel):
    """The servers a pool is made of (docs/placement.md, "In a run"): `count` servers of a
    catalog `model` (`sim/data/servers.toml`), whose GPUs per server give the pool's GPUs."""

    model: str
    """A server model of the catalog (e.g. "DGX-A100")."""
    count: int = Field(gt=0, le=MAX_POOL_GPUS)
    """Servers in the pool."""

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        return known_name("server model", v, SERVER_CATALOG)

    @property
    def gpus_per_server(self) -> int:
        return SERVER_CATALOG[self.model].gpus


class GpuPool(ConfigModel):
    model: str
    count: int = Field(gt=0, le=MAX_POOL_GPUS)
    """GPUs in the pool; with `servers`, servers x the server model's GPUs (implied)."""
    servers: PoolServers | None = None
    """The pool's servers: jobs are placed on them by the site's `placement` rule (None:
    the pool is a count of GPUs, in nodes of the site's `gpus_per_node`)."""
    mig: tuple[str, ...] | None = None
    """A MIG layout every GPU of the pool is partitioned into, profile names of `model`
    (`sim.models.mig`, docs/mig.md), e.g. ["3g.40gb", "2g.20gb", "2g.20gb"]: the pool then runs only
    jobs with a `mig_profile`, one per slice. None: whole GPUs."""

    reserved: int = Field(default=0, ge=0, le=MAX_POOL_GPUS)
    """GPUs of the pool that are reserved capacity: committed for the whole run, paid for
    whether used or not (docs/spot-capacity.md)."""
    spot: int = Field(default=0, ge=0, le=MAX_POOL_GPUS)
    """GPUs of the pool that are spot capacity: cheap, evicted by `[spot]`. The rest of
    `count` is on-demand capacity."""
    purchase_year: int | None = Field(
        default=None, ge=MIN_PURCHASE_YEAR, le=MAX_PURCHASE_YEAR, strict=True
    )
    """The year the pool's hardware was bought (its amortisation starts on 1 January):
    its embodied carbon is charged only within [purchase_year, purchase_year + lifetime)
    (`sim.engine.lifetimes`, docs/servers.md, "Lifetimes"); a run starting before it is an
    error. None: charged throughout the run (no lifetime window)."""
    lifetime_years: float | None = Field(default=None, gt=0, le=MAX_POOL_LIFETIME_YEARS)
    """The pool's lifetime, years, over which all its embodied carbon (every component of
    its servers, or its GPUs with their host share) is amortised, in place of the catalog
    lifetimes. None: the catalog's (`GpuSpec.service_life_years`; for servers, per
    component, `sim.models.servers.lifetimes_years`)."""

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        return known_name("GPU model", v, GPU_CATALOG)

    @model_validator(mode="before")
    @classmethod
    def _count_of_servers(cls, data: object) -> object:
        """With `servers`, count = servers x the server model's GPUs (a `count` given too,
        as a saved scenario.toml has it, must be that)."""
        if not isinstance(data, dict) or data.get("servers") is None:
            return data
        try:
            servers = PoolServers.model_validate(data["servers"])
        except ValidationError:  # reported by the field's own validation, at its key
            return {"count": 1, **data}
        gpus = servers.count * servers.gpus_per_server
        if data.get("count", gpus) != gpus:
            raise ValueError(
                f"count {data['count']} is not servers.count x {servers.model}'s GPUs"
                f" ({servers.count} x {servers.gpus_per_server} = {gpus}): give servers alone"
            )
        return {**data, "servers": servers, "count": gpus}

    @model_validator(mode="after")
    def _capacity_split(self) -> GpuPool:
        if self.reserved + self.spot > self.count:
            raise ValueError(
                f"{self.model}: reserved ({self.reserved}) + spot ({self.spot}) exceeds count "
                f"({self.count})"
            )
        if self.mig is not None and self.split:
            raise ValueError(
                f"{self.model}: a MIG-partitioned pool cannot be split into "
                "reserved or spot capacity"
            )
        if self.servers is not None:
            server_gpu = SERVER_CATALOG[self.servers.model].gpu_model
            if server_gpu != self.model:
                raise ValueError(
                    f"servers.model: {self.servers.model!r} holds {server_gpu} GPUs, not "
                    f"{self.model}"
                )
            for key, given in (("mig", self.mig is not None), ("reserved or spot", self.split)):
                if given:
                    raise ValueError(
                        f"{self.model}: {key} on a pool of servers is not supported yet"
                    )
        return self

    @property
    def split(self) -> bool:
        """The pool has reserved or spot GPUs (else all of it is the scenario's one kind)."""
        return self.reserved > 0 or self.spot > 0

    @property
    def on_demand(self) -> int:
        """GPUs of the pool that are on-demand capacity."""
        return self.count - self.reserved - self.spot

    def check_mig(self, site: str) -> None:
        """ValueError naming `site`, the model and the layout unless `mig` is a valid MIG
        layout of the model (`sim.models.mig.validate_layout`)."""
        if self.mig is None:
            return
        try:
            if not self.mig:
                raise ValueError(
                    f"{self.model}: list at least one profile (omit mig for whole GPUs)"
                )
            mig.validate_layout(self.model, self.mig)
        except ValueError as e:
            raise ValueError(f"site {site!r}: mig layout {list(self.mig)}: {e}") from None


class PowerOff(ConfigModel):
    """Power idle nodes off: a node whose GPUs have all been free for `idle_s` switches off
    and draws `off_w`; a start that needs it waits `wake_s` for it to boot, its GPUs held at
    idle power meanwhile."""

    idle_s: float = Field(default=900.0, ge=0)
    wake_s: float = Field(default=300.0, ge=0)
    off_w: float = Field(default=10.0, ge=0)
    """Residual draw of a powered-off node (management controller), W."""


class SiteForecast(ConfigModel):
    """A real archive of issued forecasts replayed as the site's forecast
    (`sim.grid.issued_forecasts`, docs/forecasts.md "Replayed forecasts")."""

    file: Path
    """CSV (or .csv.gz) with rows issued_at,target_start,<column>; relative to the scenario."""
    format: Literal["issued"] = "issued"
    column: str = "value"
    """Value column."""
    unit: Literal["g/kWh", "kg/kWh", "lbs/MWh"] = "g/kWh"
    fallback: Literal["error", "model"] = "error"
    """Where the archive does not cover a forecast asked for: "error", or the `[forecast]`
    model fills that part (counted in meta.json's `forecast_replay`)."""


MAX_INSTALLED_KW: Final = 1e7
"""Installed on-site generation at most, kWp or kW: 10 GW, the `_kw` bound of every power."""

MAX_CONTRACT_MWH_PER_YEAR: Final = MAX_INSTALLED_KW * 8766.0 / 1000.0
"""A contract's or certificates' energy at most, MWh a year: `MAX_INSTALLED_KW` for a
Julian year (8766 h), 8.8e7 MWh."""

MAX_LIFETIME_YEARS: Final = 100.0
"""An equipment lifetime at most, years."""


class ProfileZoneYear(ConfigModel):
    """Which zone-year's generation profile (`sim.grid.renewables.capacity_factors`) a site's
    on-site generation follows."""

    zone: str = Field(min_length=1)
    year: int | None = Field(default=None, ge=1900, le=2100)
    """Default: the scenario start's year if the zone has a profile for it, else its latest
    (read under the scenario's `years` rule, as the carbon trace)."""


class OnsiteGeneration(ConfigModel):
    """A site's own solar PV and wind: installed capacity times the hourly capacity factor
    of a zone-year's measured fleet (docs/onsite-energy.md, "Generation profiles")."""

    pv_kwp: float = Field(default=0.0, ge=0, le=MAX_INSTALLED_KW)
    """Installed PV, kWp (peak DC rating; the zone profile's capacity factor is per kWp)."""
    wind_kw: float = Field(default=0.0, ge=0)
    """Installed onshore wind, kW."""
    wind_offshore_kw: float = Field(default=0.0, ge=0)
    """Installed offshore wind, kW (zones with an offshore fleet only)."""
    profile: ProfileZoneYear | None = None
    """The zone-year whose capacity factors the generation follows; default: the site's
    carbon `zone` and `year` (a site whose carbon is not a catalog zone must give it)."""
    pv_embodied_kg_per_kwp: float = Field(default=PV_EMBODIED_KG_PER_KWP, ge=0, le=1e5)
    """Embodied carbon of PV, kgCO2e per kWp (Hsu et al. 2012, `sim.energy.embodied`)."""
    pv_lifetime_years: float = Field(default=PV_LIFETIME_YEARS, gt=0, le=MAX_LIFETIME_YEARS)
    wind_embodied_kg_per_kw: float = Field(default=WIND_EMBODIED_KG_PER_KW, ge=0)
    """Embodied carbon of wind (onshore and offshore), kgCO2e per kW (Dolan and Heath
    2012, `sim.energy.embodied`)."""
    wind_lifetime_years: float = Field(default=WIND_LIFETIME_YEARS, gt=0, le=MAX_LIFETIME_YEARS)

    @property
    def capacities_kw(self) -> dict[str, float]:
        """Installed kW per technology of `sim.grid.renewables` (only those installed)."""
        kw = {
            "solar": self.pv_kwp,
            "wind_onshore": self.wind_kw,
            "wind_offshore": self.wind_offshore_kw,
        }
        return {t: v for t, v in kw.items() if v > 0}


class PpaConfig(ConfigModel):
    """A power purchase agreement (physical or virtual): the energy attributes of `kw` of
    a technology's measured zone profile (`sim.grid.renewables.capacity_factors`), or a
    constant `mwh_per_year` (a baseload contract, spread evenly over the hours)."""

    technology: Literal["solar", "wind_onshore", "wind_offshore"] | None = None
    kw: float | None = Field(default=None, gt=0, le=MAX_INSTALLED_KW)
    """Contracted capacity of `technology`, kW."""
    profile: ProfileZoneYear | None = None
    """The zone-year whose capacity factors the contract follows; default: the site's
    carbon `zone` and `year`."""
    mwh_per_year: float | None = Field(default=None, gt=0, le=MAX_CONTRACT_MWH_PER_YEAR)
    """A constant contract instead of a profile, MWh per (Julian) year."""

    @model_validator(mode="after")
    def _check(self) -> PpaConfig:
        by_profile = self.technology is not None or self.kw is not None
        if by_profile == (self.mwh_per_year is not None):
            raise ValueError("give either technology and kw, or mwh_per_year")
        if by_profile and (self.technology is None or self.kw is None):
            raise ValueError(f"technology {self.technology!r} and kw {self.kw!r}: give both")
        if self.mwh_per_year is not None and self.profile is not None:
            raise ValueError("profile: only a contract by technology and kw follows a profile")
        return self


class ContractsConfig(ConfigModel):
    """A site's contractual instruments for market-based carbon (GHG Protocol Scope 2) and
    the 24/7 CFE score (docs/onsite-energy.md, "Accounting: market-based carbon and 24/7
    CFE")."""

    ppa: list[PpaConfig] = []
    """Power purchase agreements."""
    certificates_mwh: float = Field(default=0.0, ge=0, le=MAX_CONTRACT_MWH_PER_YEAR)
    """Unbundled energy attribute certificates (RECs, GOs) for a year, MWh; a run covers
    its share (run length over a Julian year)."""
    matching: Literal["annual", "hourly"] = "annual"
    """How contracts cover grid import: over the whole run, or hour by hour."""


class BatteryConfig(ConfigModel):
    """A site's battery (`sim.energy.Battery`; defaults: lithium-ion, cited in
    docs/onsite-energy.md, "Batteries")."""

    capacity_kwh: float = Field(gt=0)
    """Nominal usable energy when new, kWh."""
    power_kw: float = Field(gt=0)
    """Power rating, charge and discharge, kW."""
    charge_efficiency: float = Field(default=math.sqrt(LI_ION_ROUND_TRIP_EFFICIENCY), gt=0, le=1)
    discharge_efficiency: float = Field(default=math.sqrt(LI_ION_ROUND_TRIP_EFFICIENCY), gt=0, le=1)
    soc_min: float = Field(default=0.0, ge=0, le=1)
    soc_max: float = Field(default=1.0, gt=0, le=1)
    initial_soc: float = Field(default=0.5, ge=0, le=1)
    """State of charge at the start of the run, a fraction of the nominal capacity."""
    self_discharge_per_day: float = Field(default=LI_ION_SELF_DISCHARGE_PER_DAY, ge=0, lt=1)
    fade_per_cycle: float = Field(default=LI_ION_FADE_PER_CYCLE, ge=0, lt=1)
    embodied_kg_per_kwh: float = Field(default=LI_ION_EMBODIED_KG_PER_KWH, ge=0, le=1e4)
    lifetime_years: float = Field(default=LI_ION_LIFETIME_YEARS, gt=0, le=MAX_LIFETIME_YEARS)

    @model_validator(mode="after")
    def _check(self) -> BatteryConfig:
        if self.soc_min >= self.soc_max:
            raise ValueError(f"soc_min {self.soc_min} must be below soc_max {self.soc_max}")
        if not self.soc_min <= self.initial_soc <= self.soc_max:
            raise ValueError(
                f"initial_soc {self.initial_soc} must be within [soc_min {self.soc_min}, "
                f"soc_max {self.soc_max}]"
            )
        return self


class GridConnectionConfig(ConfigModel):
    """A site's grid connection (`sim.energy.GridConnection`): import and export limits and
    what happens to battery power over one."""

    import_limit_kw: float | None = Field(default=None, ge=0)
    """None: no limit."""
    export_limit_kw: float | None = Field(default=None, ge=0)
    """None: no limit; 0: the site may not export (surplus is curtailed)."""
    mode: Literal["refuse", "curtail"] = "refuse"
    """Battery power that would exceed a limit: "refuse" (an error) or "curtail" (reduced
    to fit)."""
    export_price_per_kwh: float | None = Field(default=None, ge=0)
    """What exported energy earns per kWh, the scenario's currency (None: nothing)."""


class Site(ConfigModel):
    name: str = Field(min_length=1)
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)
    carbon: CarbonConfig
    """The carbon signal the site is charged on: its operational carbon in the results."""
    decision_carbon: CarbonConfig | None = None
    """A separate carbon signal the site's decisions see (`state.carbon_intensity`,
    `state.forecast`, the signal steps that wake policies, cost estimates); its carbon is
    reported as `carbon_operational_decision_kg`. None: decisions see `carbon`."""
    gpus: list[GpuPool] = Field(min_length=1)
    pue: float | list[float] = 1.2
    """Facility power / IT power: a constant, or 24 values by UTC hour of the day."""
    host_w_per_gpu: float = Field(default=50.0, ge=0)
    """Host (CPU, memory, NIC, fans) power per installed GPU, always drawn."""
    idle_w: dict[str, float] = {}
    """Overrides of the catalog's idle power per GPU model, W."""
    timezone: TimeZoneName = "UTC"
    """IANA time zone of the site's local time (the daily cycle of synthetic requests
    coming from it, `services[].requests.daily_peak_hour`)."""
    gpus_per_node: int = Field(default=8, gt=0, le=1024)
    """GPUs per server node; a node's host overhead is host_w_per_gpu x gpus_per_node."""
    power_off: PowerOff | None = None
    """Switch idle nodes off (default: all nodes stay on)."""
    placement: Literal["fewest_servers", "first_fit", "best_fit", "spread"] = "fewest_servers"
    """Where a job's GPUs go among the servers of a pool with `servers` (the rules of
    `sim.models.placement`, docs/placement.md)."""
    max_servers: Annotated[int, Field(ge=1, le=MAX_POOL_GPUS)] | Literal["strict", "unlimited"] = (
        "strict"
    )
    """The servers a job may span in a pool with `servers`: "strict" (locality: the fewest
    that can hold it, ceil(GPUs / GPUs per server)), a number >= 1, or "unlimited"."""
    checkpoint_write_gbps: float = Field(default=2.0, gt=0)
    checkpoint_read_gbps: float = Field(default=2.0, gt=0)
    """Storage bandwidth one job writes (suspend, migrate) and reads (resume) its checkpoint
    at, GB/s; the job holds its GPUs at idle power meanwhile. 2 GB/s is an assumption (a
    parallel file system client, or a local NVMe drive): set your site's."""
    forecast: SiteForecast | None = None
    """Replay a real archive of issued forecasts as this site's forecast (default: the
    `[forecast]` model)."""
    tariff: Tariff | None = None
    """What the site pays for electricity (docs/electricity-costs.md); None: not billed."""
    onsite: OnsiteGeneration | None = None
    """On-site solar and wind (docs/onsite-energy.md); None: none."""
    battery: BatteryConfig | None = None
    """An on-site battery; None: none."""
    grid_connection: GridConnectionConfig | None = None
    """Import and export limits of the site's grid connection; None: unlimited."""
    contracts: ContractsConfig | None = None
    """PPAs and certificates (market-based carbon, CFE score); None: none."""

    @field_validator("pue")
    @classmethod
    def _pue(cls, v: float | list[float]) -> float | list[float]:
        values = v if isinstance(v, list) else [v]
        if isinstance(v, list) and len(v) != 24:
            raise ValueError(f"an hourly PUE profile needs 24 values (UTC hours), got {len(v)}")
        bad = [x for x in values if not (math.isfinite(x) and 1.0 <= x <= MAX_PUE)]
        if bad:
            raise ValueError(f"PUE values must be in [1, {MAX_PUE:g}], got {bad[0]}")
        return v

    @model_validator(mode="after")
    def _check(self) -> Site:
        models = [p.model for p in self.gpus]
        if len(set(models)) != len(models):
            raise ValueError(f"gpus: each GPU model may appear once per site, got {models}")
        for p in self.gpus:
            p.check_mig(self.name)
        if "host_w_per_gpu" in self.model_fields_set and all(p.servers for p in self.gpus):
            raise ValueError(
                f"host_w_per_gpu = {self.host_w_per_gpu:g}: pools of servers draw their "
                "catalog host power (docs/servers.md, 'Host power in a run'); leave it out"
            )
        if "gpus_per_node" in self.model_fields_set and all(p.servers for p in self.gpus):
            raise ValueError(
                f"gpus_per_node = {self.gpus_per_node}: pools of servers take their GPUs per "
                "server from the server model (docs/servers.md); leave it out"
            )
        if self.power_off is not None:
            for p in self.gpus:
                if p.servers is None and p.count % self.gpus_per_node:
                    raise ValueError(
                        f"power_off needs whole nodes: {p.model} count {p.count} is not a "
                        f"multiple of gpus_per_node {self.gpus_per_node}"
                    )
        for m, w in self.idle_w.items():
            if m not in models:
                raise ValueError(f"idle_w: {m!r} is not a GPU model of this site ({models})")
            if w < 0:
                raise ValueError(f"idle_w.{m} must be >= 0, got {w}")
        if self.onsite is not None and self.onsite.profile is None and self.carbon.zone is None:
            raise ValueError(
                "onsite.profile: give {zone, year} (the carbon signal is not a catalog zone "
                "to default to)"
            )
        for k, ppa in enumerate(self.contracts.ppa if self.contracts else []):
            if ppa.kw is not None and ppa.profile is None and self.carbon.zone is None:
                raise ValueError(
                    f"contracts.ppa[{k}].profile: give {{zone, year}} (the carbon signal is "
                    "not a catalog zone to default to)"
                )
        return self

    @property
    def has_onsite_energy(self) -> bool:
        """The site has on-site generation, a battery, a limited grid connection or
        contracts (the last change no energy, only its accounting)."""
        return any(
            x is not None for x in (self.onsite, self.battery, self.grid_connection, self.contracts)
        )

    @property
    def max_pool_gpus(self) -> int:
        """GPUs of the site's largest pool of whole GPUs (a MIG-partitioned pool holds only
        jobs on its slices; 0 if every pool is partitioned)."""
        return max((p.count for p in self.gpus if p.mig is None), default=0)
