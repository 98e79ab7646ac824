"""Scenario files: TOML -> validated, frozen `Scenario`.

All input validation of the scenario's own keys lives here. Files a scenario names
(carbon traces, job files) are read by `sim.grid` and `sim.workload`, which raise
`ScenarioError`/`TraceError` naming the key path or the file and line.

Errors name the file, the key path and the bad value, on one line:
``study.toml: sites[1].gpus[0].count: Input should be greater than 0 (got -4)``.
"""

from __future__ import annotations

import math
import re
import tomllib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import tomli_w
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from sim.config.base import HOURS_PER_DECADE, ConfigModel, TimeZoneName, check_numbers
from sim.config.services import ServiceConfig, ServingConfig, Variant
from sim.errors import ScenarioError
from sim.market.billing import Tariff
from sim.models import mig
from sim.models.hardware import (
    GPU_CATALOG,
    PROFILES,
    gpu_spec_from_dict,
    profile_choices,
    register_gpu,
)
from sim.models.hardware import speed as roofline_speed
from sim.models.llm_replica import replica_model
from sim.models.pricing import DEFAULT_CURRENCY, Currency, PriceConfig
from sim.models.scaling import INTERCONNECTS
from sim.models.sharing import SLOWDOWN_FULL
from sim.models.topologies import topohub_key
from sim.util.csv_rows import csv_rows

SCHEMA_VERSION: Final = 1

MAX_POOL_GPUS: Final = 1_000_000
"""GPUs of one pool (and of one job) at most: the largest clusters announced hold a few
hundred thousand."""
MAX_JOBS: Final = 10_000_000
"""Jobs of one synthetic workload at most: a run holds about 1.4 GB per million jobs
(docs/performance.md), so more would not fit a workstation's memory."""
MAX_PUE: Final = 10.0
"""PUE at most: surveyed datacenters average about 1.6 (Uptime Institute 2023)."""


def _known(what: str, name: str, known: dict) -> str:
    if name not in known:
        choices = profile_choices() if known is PROFILES else ", ".join(sorted(known))
        raise ValueError(f"unknown {what} {name!r}; known: {choices}")
    return name


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


class GpuPool(ConfigModel):
    model: str
    count: int = Field(gt=0, le=MAX_POOL_GPUS)
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

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        return _known("GPU model", v, GPU_CATALOG)

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
    gpus_per_node: int = Field(default=8, gt=0, le=1024)
    """GPUs per server node; a node's host overhead is host_w_per_gpu x gpus_per_node."""
    power_off: PowerOff | None = None
    """Switch idle nodes off (default: all nodes stay on)."""
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
        if self.power_off is not None:
            for p in self.gpus:
                if p.count % self.gpus_per_node:
                    raise ValueError(
                        f"power_off needs whole nodes: {p.model} count {p.count} is not a "
                        f"multiple of gpus_per_node {self.gpus_per_node}"
                    )
        for m, w in self.idle_w.items():
            if m not in models:
                raise ValueError(f"idle_w: {m!r} is not a GPU model of this site ({models})")
            if w < 0:
                raise ValueError(f"idle_w.{m} must be >= 0, got {w}")
        return self

    @property
    def max_pool_gpus(self) -> int:
        """GPUs of the site's largest pool of whole GPUs (a MIG-partitioned pool holds only
        jobs on its slices; 0 if every pool is partitioned)."""
        return max((p.count for p in self.gpus if p.mig is None), default=0)


class DurationDist(ConfigModel):
    """Wall-clock duration of a job on its reference GPUs (A100-80GB at the maximum power
    limit); its work is duration x GPU count reference GPU-hours.

    - "exponential": mean `mean_h`.
    - "lognormal": median `median_h`, shape `sigma` (std of log duration).
    - "loguniform_mixture": `components` = [[weight, low_h, high_h], ...]: with probability
      `weight` the duration is log-uniform on [low_h, high_h] (heavy-tailed, spanning
      orders of magnitude, like the published GPU-cluster traces; see docs/workloads.md).
    """

    dist: Literal["exponential", "lognormal", "loguniform_mixture"]
    mean_h: float | None = Field(default=None, gt=0)
    """Mean, for `exponential`."""
    median_h: float | None = Field(default=None, gt=0)
    """Median, for `lognormal`."""
    sigma: float = Field(default=1.0, gt=0, le=10)
    """Shape of the lognormal (std of log duration)."""
    components: list[tuple[float, float, float]] | None = None
    """[weight, low_h, high_h] per component, for `loguniform_mixture`; weights sum to 1."""

    @model_validator(mode="after")
    def _params(self) -> DurationDist:
        need = {
            "exponential": "mean_h",
            "lognormal": "median_h",
            "loguniform_mixture": "components",
        }[self.dist]
        if getattr(self, need) is None:
            raise ValueError(f"dist = {self.dist!r} needs {need}")
        if self.components is not None:
            if self.dist != "loguniform_mixture":
                raise ValueError("components is only meaningful with dist = 'loguniform_mixture'")
            if not self.components:
                raise ValueError("components must not be empty")
            for i, (w, lo, hi) in enumerate(self.components):
                if not (w >= 0 and math.isfinite(w)):
                    raise ValueError(f"components[{i}] weight must be >= 0, got {w}")
                if not (0 < lo <= hi <= HOURS_PER_DECADE):
                    raise ValueError(
                        f"components[{i}] needs 0 < low_h <= high_h <= {HOURS_PER_DECADE:g} "
                        f"(ten years), got [{lo}, {hi}]"
                    )
            total = sum(c[0] for c in self.components)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"components weights must sum to 1, got {total}")
        return self

    def expected_h(self) -> float:
        """E[duration], hours (used by `offered_load`)."""
        if self.dist == "exponential":
            assert self.mean_h is not None
            return self.mean_h
        if self.dist == "lognormal":
            assert self.median_h is not None
            return self.median_h * math.exp(self.sigma**2 / 2.0)
        assert self.components is not None
        # log-uniform on [a, b]: mean (b - a) / ln(b / a); a point mass when a == b
        return sum(
            w * ((hi - lo) / math.log(hi / lo) if hi > lo else lo) for w, lo, hi in self.components
        )


PHILLY_GPUS: dict[int, float] = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}
"""GPU-count mix of the "philly" preset. Source: the Philly job distribution sampler of
Gavel (Narayanan et al., OSDI'20; github.com/stanford-futuredata/gavel,
scheduler/utils.py `_generate_scale_factor`: 1 GPU w.p. 0.70, 2 w.p. 0.10, 4 w.p. 0.15,
8 w.p. 0.05), derived from the Microsoft Philly trace of Jeon et al., ATC'19."""

PHILLY_DURATION: dict[str, Any] = {
    "dist": "loguniform_mixture",
    "components": [
        [0.8, 10**1.5 / 60.0, 10**3 / 60.0],
        [0.2, 10**3 / 60.0, 10**4 / 60.0],
    ],
}
"""Duration of the "philly" preset: 60 x 10^U(1.5, 3) s (31.6 min to 16.7 h) w.p. 0.8 and
60 x 10^U(3, 4) s (16.7 h to 6.9 days) w.p. 0.2. Source: Gavel's `_generate_duration`
("Sample the job duration from the Philly distribution"), same file as `PHILLY_GPUS`.
Derived: median 10^2.4375 min = 4.56 h, 80th percentile 16.7 h, mean 16.8 h."""

PRESETS: dict[str, dict[str, Any]] = {
    "philly": {"gpus": PHILLY_GPUS, "duration": PHILLY_DURATION},
}
"""Preset name -> default keys of `SyntheticWorkload` (explicit keys override them)."""


class SyntheticWorkload(ConfigModel):
    """Poisson arrivals over the horizon with i.i.d. job attributes.

    The arrival rate is either `arrival_rate_per_h` or set by `offered_load`; it may be
    modulated by a daily and a weekly cycle (non-homogeneous Poisson process, see
    `rate_factor`). `preset = "philly"` fills `gpus` and `duration` with a published
    Philly-derived distribution (see `PRESETS`) unless given. docs/workloads.md.
    """

    preset: Literal["philly"] | None = None
    """Defaults for `gpus` and `duration` from a published trace (explicit keys win)."""
    arrival_rate_per_h: float | None = Field(default=None, gt=0)
    """Mean arrival rate, jobs per hour (the long-run mean when modulated)."""
    offered_load: float | None = Field(default=None, gt=0, le=100)
    """Target utilisation of `offered_load_gpus` GPUs (e.g. 0.7): sets the mean arrival
    rate to offered_load x offered_load_gpus / E[gpus x duration_h] per hour."""
    offered_load_gpus: int | None = Field(default=None, gt=0, le=MAX_POOL_GPUS)
    """GPU count the offered load refers to (e.g. the scenario's total GPUs)."""
    max_jobs: int | None = Field(default=None, gt=0, le=MAX_JOBS)
    """Stop generating after this many jobs (default: until the horizon)."""
    duration: DurationDist
    gpus: dict[int, float] = {1: 1.0}
    """GPU count -> probability; a job's work is duration x GPU count."""
    diurnal_amplitude: float = Field(default=0.0, ge=0, le=1)
    """Daily cycle: the rate is multiplied by 1 + a cos(2 pi (h - peak_hour) / 24) at
    local hour h of `timezone` (0: none)."""
    peak_hour: float = Field(default=15.0, ge=0, lt=24)
    """Local hour of the daily peak of arrivals (a modelling choice, not a published value)."""
    weekly_amplitude: float = Field(default=0.0, ge=0, le=1)
    """Weekly cycle: Saturday and Sunday (local) get (1 - a) times the weekday rate,
    normalised so that the weekly mean rate is unchanged (0: none)."""
    timezone: TimeZoneName = "UTC"
    """IANA time zone of the submitters' local time (daily and weekly cycles)."""
    profile: str = "mixed"
    deferrable_fraction: float = Field(default=0.0, ge=0, le=1)
    """Share of jobs with a deadline; the others must run as soon as possible."""
    slack_h: tuple[float, float] = (6.0, 24.0)
    """Deadline = submit + runtime + uniform(slack_h) for deferrable jobs."""
    interruptible_fraction: float = Field(default=0.0, ge=0, le=1)
    checkpoint_gb: float = Field(default=0.0, ge=0)
    data_gb: float = Field(default=0.0, ge=0)
    origin_sites: dict[str, float] | None = None
    """Site name -> relative weight of a job originating there (default: uniform)."""

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") in PRESETS:
            data = PRESETS[data["preset"]] | data
        return data

    @field_validator("gpus")
    @classmethod
    def _gpu_mix(cls, v: dict[int, float]) -> dict[int, float]:
        for n, p in v.items():
            if not 0 < n <= MAX_POOL_GPUS:
                raise ValueError(f"GPU counts must be in [1, {MAX_POOL_GPUS}], got {n}")
            if p < 0:
                raise ValueError(f"probability of {n} GPUs must be >= 0, got {p}")
        if not v or abs(sum(v.values()) - 1.0) > 1e-6:
            raise ValueError(f"probabilities must sum to 1, got {sum(v.values())}")
        return v

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        return _known("profile", v, PROFILES)

    @field_validator("slack_h")
    @classmethod
    def _slack(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= v[0] <= v[1]:
            raise ValueError(f"must be [low, high] with 0 <= low <= high, got {list(v)}")
        return v

    @model_validator(mode="after")
    def _one_rate(self) -> SyntheticWorkload:
        if (self.arrival_rate_per_h is None) == (self.offered_load is None):
            raise ValueError("give exactly one of arrival_rate_per_h or offered_load")
        if (self.offered_load is None) != (self.offered_load_gpus is None):
            raise ValueError("offered_load and offered_load_gpus go together")
        return self

    def mean_gpus(self) -> float:
        """E[gpus] of the GPU-count mix."""
        return sum(n * p for n, p in self.gpus.items()) / sum(self.gpus.values())

    def mean_arrival_rate_per_h(self) -> float:
        """The long-run mean arrival rate, jobs per hour: `arrival_rate_per_h`, or
        offered_load x offered_load_gpus / (E[gpus] x E[duration_h]) (gpus and duration
        are independent, so E[gpus x duration] = E[gpus] E[duration])."""
        if self.arrival_rate_per_h is not None:
            return self.arrival_rate_per_h
        assert self.offered_load is not None and self.offered_load_gpus is not None
        return (
            self.offered_load
            * self.offered_load_gpus
            / (self.mean_gpus() * self.duration.expected_h())
        )


class Workload(ConfigModel):
    """Exactly one of a synthetic generator or a job file (native CSV/Parquet format)."""

    synthetic: SyntheticWorkload | None = None
    file: Path | None = None
    oversized: Literal["error", "reject"] = "error"
    """A job needing more GPUs than the largest pool of any site: an input error, or
    rejected at arrival with a reason (for replaying a trace on a smaller cluster)."""
    checkpoint_interval_h: float | None = Field(default=None, gt=0)
    """Jobs checkpoint every this many hours of running, each write stalling them for
    checkpoint_gb / the site's write bandwidth; a suspended or migrated job then restarts
    from its last checkpoint, losing the work since. None: no periodic checkpoints; a job
    writes a checkpoint when it is suspended or migrated and loses nothing."""
    residency: dict[str, list[str]] | None = None
    """Data residency by origin: jobs submitted at site K may run only on the sites
    `residency[K]` lists (K's own jobs anywhere if K is not a key). A job file's
    `allowed_sites` column narrows this further, per job."""

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if (self.synthetic is None) == (self.file is None):
            raise ValueError("give exactly one of [workload.synthetic] or workload.file")
        return self


class ForecastConfig(ConfigModel):
    """Error model of `state.forecast` (see `sim.grid.forecast` and docs/forecasts.md).

    - "perfect": the truth.
    - "gaussian": i.i.d. noise of sigma = `sigma_frac` x the signal's mean (required).
    - "calibrated": horizon-dependent, autocorrelated error fitted on real issued forecasts;
      `scale` multiplies its size (default 1; 0 gives the truth).
    - "persistence": the value 24 h earlier.
    """

    model: Literal["perfect", "gaussian", "calibrated", "persistence"] = "perfect"
    sigma_frac: float | None = Field(default=None, ge=0, le=100)
    """Noise sigma as a fraction of the signal's mean intensity; only for model "gaussian"."""
    scale: float | None = Field(default=None, ge=0, le=100)
    """Multiplier of the calibrated error's size; only for model "calibrated"."""

    @model_validator(mode="after")
    def _keys_fit_the_model(self) -> ForecastConfig:
        for key, owner in (("sigma_frac", "gaussian"), ("scale", "calibrated")):
            value = getattr(self, key)
            if value is not None and self.model != owner:
                raise ValueError(
                    f'{key} is only meaningful with model = "{owner}", not "{self.model}" '
                    f"(got {key} = {value}); remove it or change the model"
                )
        if self.model == "gaussian" and self.sigma_frac is None:
            raise ValueError('sigma_frac is required with model = "gaussian" (e.g. 0.1)')
        return self


class WanConfig(ConfigModel):
    """The wide-area network between the sites (`sim.network`, docs/wan.md): a backbone graph,
    routes between the sites, and the time, energy and carbon of moving data along them.

    Exactly one graph source: a topohub `topology` or a `topology_file`. Each site attaches
    to the graph's nearest node (great-circle distance).
    """

    topology: str | None = None
    """A topohub topology: a backbone map by bare name ("world", "europe", "north_america",
    "europe_nosc", ...; `_nosc`: without submarine cables), or any geographic topohub key,
    "topozoo/NAME" (Internet Topology Zoo, e.g. "topozoo/Geant2012"), "sndlib/NAME"
    (e.g. "sndlib/polska"), "caida/2024-08/ASN"."""
    topology_file: Path | None = None
    """A GraphML (.graphml) or GML (.gml) graph, relative to the scenario file. Nodes need
    lat/lon (or Latitude/Longitude) attributes; edge length in km from `length_km` or
    `dist`, else the great-circle distance; capacity from `capacity_gbps` (or the Topology
    Zoo's `LinkSpeedRaw`, bit/s)."""
    max_attach_km: float = Field(default=1000.0, gt=0)
    """Largest great-circle distance from a site to its attachment node, km."""
    k_paths: int = Field(default=1, ge=1, le=16)
    """Routes `Wan.routes` offers per site pair (k shortest loop-free paths by length), for
    policies that compare or spread over alternatives; transfers use the shortest."""
    link_gbps: float = Field(default=100.0, gt=0)
    """Capacity of a link whose topology gives none, and of each site's attachment leg,
    Gbit/s (default: one 100G wavelength)."""
    flow_gbps: float | None = Field(default=None, gt=0)
    """Largest rate of a single transfer (e.g. the storage or TCP limit), Gbit/s; None: the
    route's bottleneck alone limits it."""
    contention: bool = False
    """Concurrent transfers share link capacity max-min fairly (`Wan.transfers`); false:
    each transfer gets its route's whole bottleneck bandwidth."""
    fibre_km_per_s: float = Field(default=204_190.0, gt=0)
    """Signal speed in fibre, km/s: c / 1.4682, the group index of standard single-mode
    fibre (ITU-T G.652, Corning SMF-28) at 1550 nm."""
    energy_model: Literal["path", "per_gb", "none"] = "path"
    """"path": per-device model along the route (iGDB intensities, W/Gbps); "per_gb": one
    electricity intensity per GB (Aslan et al. 2018); "none": transfers cost no energy."""
    network_pue: float | None = Field(default=None, ge=1, le=MAX_PUE)
    """Facility overhead (cooling, power conversion) of network sites; "path" only,
    default 1.5."""
    redundancy: float | None = Field(default=None, ge=1, le=10)
    """Multiplier for protection equipment powered alongside the working path; "path" only,
    default 2 (1+1 protection)."""
    per_gb_kwh: float | None = Field(default=None, ge=0)
    """Electricity intensity of data transmission, kWh/GB; "per_gb" only. Default: 0.06 in
    2015, halving every two years, at the scenario start's year (Aslan et al. 2018)."""
    zone_max_km: float = Field(default=1000.0, ge=0)
    """A network device is charged at the carbon intensity of the nearest catalog zone
    within this great-circle distance, km; farther ones at `fallback_g_per_kwh`."""
    fallback_g_per_kwh: float = Field(default=436.0, ge=0)
    """Carbon intensity of devices with no catalog zone near, g/kWh (world average of 2022,
    Ember, Global Electricity Review 2023)."""
    variant: Literal["lifecycle", "direct"] = "lifecycle"
    """Emission factors of the zone traces that network devices are charged at."""

    @field_validator("topology")
    @classmethod
    def _known_topology(cls, v: str | None) -> str | None:
        if v is not None:
            topohub_key(v)  # ValueError naming the value and the known names
        return v

    @model_validator(mode="after")
    def _one_graph(self) -> WanConfig:
        given = [k for k in ("topology", "topology_file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of topology, topology_file (got {given or 'none'})")
        owners = {"network_pue": "path", "redundancy": "path", "per_gb_kwh": "per_gb"}
        for key, owner in owners.items():
            value = getattr(self, key)
            if value is not None and self.energy_model != owner:
                raise ValueError(
                    f'{key} is only meaningful with energy_model = "{owner}", not '
                    f'"{self.energy_model}" (got {key} = {value}); remove it or change the model'
                )
        return self


LLAMA3_FAILURES_PER_GPU_H: Final = 419 / (16_384 * 54 * 24)
"""Unexpected job interruptions per GPU-hour in Meta's Llama 3 405B pre-training (Dubey et
al. 2024, "The Llama 3 Herd of Models", section 3.3.4): 419 in a 54-day snapshot on up to
16,384 H100 GPUs, so 419 / (16,384 x 54 x 24 h) = 1.97e-5 per GPU-hour (one per 51,000
GPU-hours; a lower bound, as not every GPU ran the whole snapshot)."""


MAX_FAILURES_PER_GPU_H: Final = 1.0
"""Failures per GPU-hour at most: measured rates are about 1e-5; far higher ones would
interrupt large jobs faster than time advances."""


class FailuresConfig(ConfigModel):
    """GPU and node failures that interrupt running jobs (`sim.engine.failures`): exactly
    one of a rate or a trace. A failed job loses its work since its last checkpoint, frees
    its GPUs and is pending again; the policy places it anew."""

    rate_per_gpu_h: float | Literal["llama3"] | None = None
    """Failures per GPU-hour of a running job's GPUs (a job on n GPUs fails at n x this
    rate, memoryless), at most `MAX_FAILURES_PER_GPU_H`; "llama3":
    `LLAMA3_FAILURES_PER_GPU_H`."""
    trace: Path | None = None
    """A CSV file, relative to the scenario file, with a header `time_h,site` and one row
    per failure: hours since the scenario start, and the site whose running jobs it may
    hit (one of them, drawn weighted by GPUs)."""

    @field_validator("rate_per_gpu_h")
    @classmethod
    def _not_negative(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, float) and not 0 <= v <= MAX_FAILURES_PER_GPU_H:
            raise ValueError(f'must be in [0, {MAX_FAILURES_PER_GPU_H:g}] or "llama3", got {v}')
        return v

    @model_validator(mode="after")
    def _one_source(self) -> FailuresConfig:
        if (self.rate_per_gpu_h is None) == (self.trace is None):
            raise ValueError("give exactly one of rate_per_gpu_h or trace")
        return self

    def rate(self) -> float | None:
        """Failures per GPU-hour of a running job's GPUs (None: from the trace)."""
        if self.rate_per_gpu_h == "llama3":
            return LLAMA3_FAILURES_PER_GPU_H
        return self.rate_per_gpu_h


AWS_SPOT_NOTICE_S: Final = 120.0
"""AWS's Spot Instance interruption notice: "a warning that is issued two minutes before
Amazon EC2 stops or terminates your Spot Instance" (EC2 User Guide, "Spot Instance
interruption notices", docs.aws.amazon.com/AWSEC2/latest/UserGuide/
spot-instance-termination-notices.html)."""

MAX_EVICTIONS_PER_NODE_H: Final = 1.0
"""Evictions per spot node-hour at most: AWS Spot Instance Advisor's worst band, ">20%" of
instances interrupted a month, is about 3e-4 per instance-hour."""


class SpotConfig(ConfigModel):
    """Evictions of spot capacity (`sim.engine.spot`, docs/spot-capacity.md): exactly one of
    a rate or a trace. A job whose spot GPUs are evicted writes its checkpoint within the
    notice if it can (else it restarts from its last checkpoint) and is pending again; the
    evicted GPUs are unavailable for `unavailable_h`."""

    eviction_rate_per_node_h: float | None = None
    """Evictions per spot node-hour (a node: `gpus_per_node` GPUs, one cloud instance) held
    by a running job; a job on spot GPUs spanning n nodes is evicted at n x this rate,
    memoryless. AWS's Spot Instance Advisor bands of monthly interruption frequency (<5%,
    5-10%, 10-15%, 15-20%, >20%) are -ln(1 - f) / 730 h: 7.0e-5 at 5%, 3.1e-4 at 20%."""
    trace: Path | None = None
    """A CSV file, relative to the scenario file, with a header `time_h,site,gpus`: at each
    time (hours since the start), `gpus` spot GPUs of the site are reclaimed (the running
    jobs holding spot GPUs there first, drawn weighted by their spot GPUs, then free ones)."""
    notice_s: float = Field(default=AWS_SPOT_NOTICE_S, ge=0)
    """Warning before an evicted GPU is gone, s (`AWS_SPOT_NOTICE_S`): a job whose
    checkpoint write fits in it writes one and keeps its progress."""
    unavailable_h: float = Field(default=1.0, gt=0)
    """How long evicted GPUs stay unavailable, h (an assumption: set your own)."""

    @field_validator("eviction_rate_per_node_h")
    @classmethod
    def _rate_in_range(cls, v: float | None) -> float | None:
        if v is not None and not 0 <= v <= MAX_EVICTIONS_PER_NODE_H:
            raise ValueError(f"must be in [0, {MAX_EVICTIONS_PER_NODE_H:g}], got {v}")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> SpotConfig:
        if (self.eviction_rate_per_node_h is None) == (self.trace is None):
            raise ValueError("give exactly one of eviction_rate_per_node_h or trace")
        if self.unavailable_h * 3600.0 < self.notice_s:
            raise ValueError(
                f"unavailable_h ({self.unavailable_h} h) must be at least notice_s "
                f"({self.notice_s} s)"
            )
        return self


THROUGHPUT_COLUMNS = ("profile", "gpu_model", "speed")
"""The header of a throughput table (`ThroughputConfig`)."""

MAX_MEASURED_SPEED: Final = 1000.0
"""A measured speed at most, reference GPU-s per second of one GPU: a thousand reference
GPUs' work on one GPU is beyond any accelerator."""


class ThroughputConfig(ConfigModel):
    """Measured throughput per (job profile, GPU model), as in Gavel (Narayanan et al.,
    OSDI 2020), overriding the roofline `sim.models.hardware.speed` for the pairs it lists
    (unlisted pairs keep the roofline).

    `file`: a CSV file, relative to the scenario file, with a header `profile,gpu_model,
    speed` and one row per pair. `speed` is in the unit of `sim.models.hardware.speed(gpu_model,
    profile)`: reference GPU-seconds of work (A100-80GB at its maximum power limit) done per
    second by one GPU of `gpu_model` at its maximum power limit, i.e. the measured
    throughput of `gpu_model` on the profile divided by the reference GPU's. A job on g GPUs
    under a cap then advances at g x speed x the cap model's throughput fraction.
    """

    file: Path
    _speeds: dict[tuple[str, str], float] | None = PrivateAttr(default=None)

    def speeds(self) -> dict[tuple[str, str], float]:
        """{(gpu model, profile): speed} of the file, read on the first call."""
        if self._speeds is None:
            self._speeds = read_throughput_table(self.file)
        return self._speeds

    def speed(self, gpu: str, profile: str) -> float:
        """Speed of one `gpu` on `profile` at its maximum power limit, reference GPU-s per
        second: the table's, else the roofline's."""
        measured = self.speeds().get((gpu, profile))
        return roofline_speed(gpu, profile) if measured is None else measured


def read_throughput_table(path: Path) -> dict[tuple[str, str], float]:
    """{(gpu model, profile): speed} of a throughput table file; ScenarioError naming the
    file, the line and the value for a bad row."""
    where = f"throughput.file: {path}"
    speeds: dict[tuple[str, str], float] = {}
    for line, row in csv_rows(path, where, "throughput table", THROUGHPUT_COLUMNS):
        key, value = _throughput_row(where, line, row)
        if key in speeds:
            raise ScenarioError(f"{where}:{line}: {key[1]} on {key[0]} is listed twice")
        speeds[key] = value
    return speeds


def _throughput_row(where: str, line: int, row: list[str]) -> tuple[tuple[str, str], float]:
    """One row of a throughput table as ((gpu model, profile), speed)."""
    if len(row) != len(THROUGHPUT_COLUMNS):
        raise ScenarioError(
            f"{where}:{line}: expected 3 fields ({','.join(THROUGHPUT_COLUMNS)}), got {row}"
        )
    profile, gpu, text = (c.strip() for c in row)
    for what, name, known in (("profile", profile, PROFILES), ("gpu_model", gpu, GPU_CATALOG)):
        if name not in known:
            choices = profile_choices() if known is PROFILES else ", ".join(sorted(known))
            raise ScenarioError(f"{where}:{line}: unknown {what} {name!r}; known: {choices}")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_MEASURED_SPEED):
        raise ScenarioError(
            f"{where}:{line}: speed must be a number in (0, {MAX_MEASURED_SPEED:g}], got {text!r}"
        )
    return (gpu, profile), value


HABITAT_AVERAGE_ERROR: Final = 0.118
"""Habitat's average error of predicted training iteration times across six GPU
architectures: "an average error of 11.8%" (Yu et al., "Habitat: A Runtime-Based
Computational Performance Predictor for Deep Neural Network Training", USENIX ATC 2021,
abstract; https://www.usenix.org/conference/atc21/presentation/yu)."""

MAX_PREDICTION_SIGMA: Final = 2.0
"""Log-standard deviation of a prediction error at most: at 2, one sigma is a factor of
7.4, far beyond any reported predictor's error."""

PredictionSigma = Annotated[float, Field(ge=0, le=MAX_PREDICTION_SIGMA)]


class ScalingConfig(ConfigModel):
    """Multi-GPU scaling of training jobs (`sim.models.scaling`, docs/scaling.md): a job on more
    than one GPU runs at the scaling model's efficiency (gradient all-reduce over the node's
    interconnect and, across nodes, the cluster network, plus the wait for the slowest
    worker), and its GPUs draw their communication power for that share of the time. Without
    the table, speed is linear in the GPU count (as before). Nodes hold each pool's
    `gpus_per_node` GPUs; links are each GPU model's catalog default unless given here.
    Each job's parallel scheme is its job-file column `parallelism` (data by default)."""

    intra_node: str | None = None
    """Link between the GPUs of a node for every pool (e.g. "NVLink3", "PCIe4"); None: each
    GPU model's default."""
    inter_node: str | None = None
    """Network between nodes for every pool (e.g. "IB-HDR", "Eth-100G"); None: each GPU
    model's default."""

    @field_validator("intra_node", "inter_node")
    @classmethod
    def _known_link(cls, v: str | None) -> str | None:
        if v is not None:
            _known("interconnect", v, dict(INTERCONNECTS))
        return v


class SharingConfig(ConfigModel):
    """GPU sharing of fractional jobs (job column `gpu_milli`, docs/gpu-sharing.md)."""

    slowdown_full: float = Field(default=SLOWDOWN_FULL, ge=0, le=10)
    """Slowdown of a job by neighbours that hold the rest of its GPU: it runs at
    1 / (1 + slowdown_full) of its speed alone (Gandiva's measured 0.19 by default; 0: no
    interference), less in proportion to the share they hold."""


class VirtualClustersConfig(ConfigModel):
    """GPU quotas of virtual clusters: the running jobs of a virtual cluster (job column
    `vc`, kept by the Philly and Helios importers) hold at most its quota of GPUs at once,
    over all sites (a job counts its `gpus`; a fractional or MIG job its one GPU; a suspended
    job, even while it writes its checkpoint, none). The engine refuses a start or resume
    beyond it; the policy kit's placement waits instead. Jobs of a
    virtual cluster without a quota, or of none, are not limited."""

    quota_gpus: dict[str, Annotated[int, Field(ge=1, le=1 << 20)]]
    """Virtual cluster name -> the most GPUs its running jobs hold at once."""


class ReboundConfig(ConfigModel):
    """A closed-loop user model (`sim.workload.rebound`, docs/rebound.md): when a completed job took
    longer than it would have alone at full power (its turnaround over its ideal runtime,
    d = jct / ideal > 1: slowed by caps, deferred, queued), its user submits a follow-up job
    with probability min(1, resubmit_elasticity x (d - 1)), `think_time_s` after it ended,
    asking (1 + gpus_elasticity x (d - 1)) times its GPUs and, for a job of fixed work,
    (1 + work_elasticity x (d - 1)) times its work. No default elasticity: no published
    figure was found (docs/rebound.md)."""

    resubmit_elasticity: float = Field(ge=0, le=1000)
    """Probability of a follow-up per unit of relative delay (d - 1)."""
    gpus_elasticity: float = Field(default=0.0, ge=0, le=1000)
    """Relative increase of the follow-up's GPUs per unit of relative delay; 0: the same."""
    work_elasticity: float = Field(default=0.0, ge=0, le=1000)
    """Relative increase of the follow-up's work per unit of relative delay; 0: the same."""
    think_time_s: float = Field(default=0.0, ge=0)
    """Time between a job's end and its follow-up's submission, s."""
    max_generations: int = Field(default=1, ge=1, le=10)
    """How many follow-ups of follow-ups a job may lead to (1: follow-ups do not rebound)."""
    max_iterations: int = Field(default=30, ge=1, le=1000)
    """Runs at most to find the closed loop (each run with the follow-ups of the last)."""


class PredictionErrorConfig(ConfigModel):
    """The error of the runtimes a policy is told (`state.estimate`, `state.runtime_s`,
    `state.expected_ends`; `sim.engine.prediction`); the run itself stays true.

    For each (job, GPU model) a factor f = exp(sigma x z), z ~ N(0, 1), is drawn once from
    the run's `prediction` random stream: lognormal, median 1, log-standard deviation
    sigma (about the relative error for small sigma). `sigma_frac`: sigma for every GPU
    model, "habitat" (`HABITAT_AVERAGE_ERROR`), or a table {GPU model: sigma}, where models
    not listed get no error.
    """

    sigma_frac: PredictionSigma | Literal["habitat"] | dict[str, PredictionSigma] = "habitat"

    @field_validator("sigma_frac")
    @classmethod
    def _known_models(cls, v: float | str | dict[str, float]) -> float | str | dict[str, float]:
        for gpu in v if isinstance(v, dict) else ():
            _known("GPU model", gpu, GPU_CATALOG)
        return v

    def sigma(self, gpu: str) -> float:
        """Log-standard deviation of the runtime factors on `gpu`."""
        if self.sigma_frac == "habitat":
            return HABITAT_AVERAGE_ERROR
        if isinstance(self.sigma_frac, dict):
            return self.sigma_frac.get(gpu, 0.0)
        return float(self.sigma_frac)


class PolicyConfig(ConfigModel):
    name: str = "run_now"
    """Registry name (see `policies.REGISTRY`) or `module:Class` / `path/to/file.py:Class`."""
    params: dict[str, Any] = {}


MAX_RATE_PER_KWH: Final = 1_000.0
"""Our bound on a program's rates per kWh, in any currency: far beyond the UK Demand
Flexibility Service's guaranteed price of 3 GBP/kWh (2022/23) and every wholesale price cap."""
MAX_RATE_PER_KW_MONTH: Final = 10_000.0
"""Our bound on a capacity rate per kW-month, in any currency (AbLaV 2016 capped it at about
2.2 EUR/kW-month)."""


class DrProgram(ConfigModel):
    """The money of a demand-response program (`[dr_programs.NAME]`, docs/demand-response-
    programs.md): a capacity payment per committed kW and month of the run, an energy payment
    per kWh shed against a settlement `baseline`, a penalty per kWh above an event's limit.
    Rates are in the program's `currency`, converted to the scenario's."""

    currency: Currency = DEFAULT_CURRENCY
    capacity_per_kw_month: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KW_MONTH)
    """Paid per kW of `committed_kw` per month (730.485 h) of the run, events or not."""
    committed_kw: float | None = Field(default=None, gt=0)
    """The load reduction the site is contracted to make available, kW (capacity only)."""
    pay_per_kwh_shed: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KWH)
    """Paid per kWh shed: max(0, baseline energy - facility energy) over each event."""
    penalty_per_kwh_over: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KWH)
    """Charged per kWh of facility energy above an event's limit (its `overshoot_kwh`)."""
    baseline: Literal["previous_hour", "weekdays_10", "constant"] = "previous_hour"
    """Settlement baseline: the mean facility power in the hour before the notice; the
    mean over the same hours of the last 10 event-free weekdays; or `baseline_kw`."""
    baseline_kw: float | None = Field(default=None, ge=0)
    """The stated baseline of `baseline = "constant"`, kW."""

    @model_validator(mode="after")
    def _keys_that_apply(self) -> DrProgram:
        if (self.baseline == "constant") != (self.baseline_kw is not None):
            raise ValueError(
                'baseline_kw is required for baseline = "constant" and applies to it only '
                f"(baseline = {self.baseline!r}, baseline_kw = {self.baseline_kw})"
            )
        if (self.capacity_per_kw_month > 0) != (self.committed_kw is not None):
            raise ValueError(
                "committed_kw is required with capacity_per_kw_month > 0 and applies to it only "
                f"(capacity_per_kw_month = {self.capacity_per_kw_month}, "
                f"committed_kw = {self.committed_kw})"
            )
        return self


class DemandResponseEvent(ConfigModel):
    """A request to keep a site's facility power under a limit for a while: one event
    (`start`, `duration_h`), or a generator of events:

    - `generator = "daily_peak"`: every day of the run at local `hour` in `timezone`
      (default UTC) for `duration_h`, e.g. the evening peak 17:00-20:00;
    - `generator = "high_carbon"`: whenever the site's carbon intensity is above its
      `percentile` (default 90) over the run, each such stretch of at least
      `min_duration_h` one event.

    `program` names a `[dr_programs]` entry that settles the entry's events in money.
    """

    site: str
    start: datetime | None = None
    duration_h: float | None = Field(default=None, gt=0)
    generator: Literal["daily_peak", "high_carbon"] | None = None
    hour: float | None = Field(default=None, ge=0, lt=24)
    """Local start hour of a daily_peak event (e.g. 17.5 for 17:30)."""
    timezone: TimeZoneName | None = None
    """IANA time zone of `hour` (daily_peak), default UTC."""
    percentile: float | None = Field(default=None, gt=0, lt=100)
    """Events where carbon intensity is above this percentile of the run (high_carbon)."""
    min_duration_h: float | None = Field(default=None, ge=0)
    """Shortest stretch above the percentile that makes an event (high_carbon), default 0."""
    limit_kw: float | None = Field(default=None, ge=0)
    reduction_pct: float | None = Field(default=None, gt=0, le=100)
    """Limit as a percentage below the site's mean facility power in the hour before notice."""
    notice_h: float = Field(default=0.0, ge=0)
    rebound_h: float = Field(default=2.0, ge=0)
    """Hours after the event's end over which the rebound peak is measured."""
    program: str | None = None
    """The `[dr_programs]` entry its events are paid and penalised under; None: no money."""

    @model_validator(mode="after")
    def _one_limit(self) -> DemandResponseEvent:
        if (self.limit_kw is None) == (self.reduction_pct is None):
            raise ValueError("give exactly one of limit_kw or reduction_pct")
        keys = {
            None: ({"start", "duration_h"}, set()),
            "daily_peak": ({"hour", "duration_h"}, {"timezone"}),
            "high_carbon": (set(), {"percentile", "min_duration_h"}),
        }
        required, optional = keys[self.generator]
        kind = f'generator = "{self.generator}"' if self.generator else "a single event"
        for key in sorted(required):
            if getattr(self, key) is None:
                raise ValueError(f"{key} is required for {kind}")
        for key in ("start", "duration_h", "hour", "timezone", "percentile", "min_duration_h"):
            if key not in required | optional and getattr(self, key) is not None:
                raise ValueError(f"{key} does not apply to {kind} (got {getattr(self, key)!r})")
        if self.start is not None and self.start.tzinfo is None:
            raise ValueError(
                f"start must carry a UTC offset, e.g. 2020-06-01T12:00:00Z, got {self.start}"
            )
        return self

    def window(self) -> tuple[datetime, datetime]:
        """[start, end) of a single event (an entry without a generator)."""
        if self.start is None or self.duration_h is None:
            raise ValueError(f"a {self.generator} entry has no single start and duration")
        return self.start, self.start + timedelta(hours=self.duration_h)


class Scenario(ConfigModel):
    """A complete, validated study input. Times inside the engine are seconds since `start`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=0)
    start: datetime
    duration_h: float = Field(gt=0)
    years: Literal["align", "wrap"] | None = None
    """How a run that needs a catalog zone-year the catalog lacks reads another year
    (docs/grid-years.md): "align" moves a trace of another year by whole days (keeping
    weekday and hour) and continues into its next year, "wrap" also stays within that year;
    None: no substitution, such a run is an error. Recorded in meta.json."""
    sites: list[Site] = Field(min_length=1)
    workload: Workload
    forecast: ForecastConfig = ForecastConfig()
    policy: PolicyConfig = PolicyConfig()
    demand_response: list[DemandResponseEvent] = []
    dr_programs: dict[str, DrProgram] = {}
    """Demand-response programs by name, referred to by `demand_response[*].program`."""
    gpu_models: dict[str, dict[str, Any]] = {}
    """GPU models this scenario adds to the catalog, fields as in `sim/data/gpus.toml`."""
    embodied: Literal["allocated", "installed"] = "allocated"
    """Charge GPUs' embodied carbon per allocated GPU-hour (to the jobs that use them) or per
    installed GPU-hour (the whole fleet over the horizon, used or not)."""
    wan: WanConfig | None = None
    """The wide-area network between the sites (docs/wan.md); None: no WAN model."""
    services: list[ServiceConfig] = []
    """LLM inference services (docs/serving.md)."""
    serving: ServingConfig = ServingConfig()
    failures: FailuresConfig | None = None
    """GPU and node failures of running jobs; None: none."""
    spot: SpotConfig | None = None
    """Evictions of the sites' spot GPUs (`GpuPool.spot`); None: spot GPUs are never
    evicted."""
    throughput: ThroughputConfig | None = None
    """Measured speeds per (profile, GPU model) overriding the roofline; None: the roofline."""
    prediction_error: PredictionErrorConfig | None = None
    """The error of the runtimes policies are told; None: exact."""
    scaling: ScalingConfig | None = None
    """Multi-GPU scaling of training jobs; None: linear in the GPU count."""
    rebound: ReboundConfig | None = None
    """Users who resubmit when their jobs are slowed; None: they do not."""
    sharing: SharingConfig = SharingConfig()
    """GPU sharing of fractional jobs: the interference of co-located jobs."""
    virtual_clusters: VirtualClustersConfig | None = None
    """GPU quotas of virtual clusters (job column `vc`); None: no quotas."""
    currency: Currency = DEFAULT_CURRENCY
    """The currency of every price and cost of the run (docs/prices.md): prices from the
    default table are converted at its fixed exchange rate, recorded in meta.json."""
    prices: PriceConfig = PriceConfig()
    """GPU-hour prices: the kind charged (on-demand, reserved, spot) and overrides."""

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError(f"must carry a UTC offset, e.g. 2020-06-01T00:00:00Z, got {v}")
        return v

    @model_validator(mode="after")
    def _known_dr_programs(self) -> Scenario:
        for i, ev in enumerate(self.demand_response):
            if ev.program is not None and ev.program not in self.dr_programs:
                raise ValueError(
                    f"demand_response[{i}].program: unknown program {ev.program!r} "
                    f"(dr_programs: {sorted(self.dr_programs)})"
                )
        return self

    @model_validator(mode="after")
    def _spot_capacity(self) -> Scenario:
        if self.spot is not None and not any(p.spot for s in self.sites for p in s.gpus):
            raise ValueError("spot: no site has spot GPUs (give sites.gpus a `spot` count)")
        return self

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        if self.rebound is not None and self.prediction_error is not None:
            raise ValueError(
                "rebound and prediction_error cannot be combined yet: prediction errors are "
                "drawn per job index, which the follow-up jobs would move"
            )
        names = [s.name for s in self.sites]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"site names must be unique, repeated: {dupes}")
        largest = max(s.max_pool_gpus for s in self.sites)
        syn = self.workload.synthetic
        if syn is not None and self.workload.oversized == "error":
            too_big = [n for n, p in syn.gpus.items() if p > 0 and n > largest]
            if too_big:
                raise ValueError(
                    f"workload.synthetic.gpus: jobs of {max(too_big)} GPUs fit on no site "
                    f"(largest GPU pool has {largest})"
                )
            origins = syn.origin_sites or {}
            for s, w in origins.items():
                if s not in names:
                    raise ValueError(f"workload.synthetic.origin_sites: unknown site {s!r}")
                if not (math.isfinite(w) and w >= 0):
                    raise ValueError(f"workload.synthetic.origin_sites.{s} must be >= 0, got {w}")
            if origins and sum(origins.values()) <= 0:
                raise ValueError("workload.synthetic.origin_sites: weights must not all be 0")
        if syn is not None:
            expected = syn.mean_arrival_rate_per_h() * self.duration_h
            if min(expected, syn.max_jobs or math.inf) > MAX_JOBS:
                raise ValueError(
                    f"workload.synthetic: about {expected:.3g} jobs over {self.duration_h:g} h; "
                    f"a run holds at most {MAX_JOBS:,} jobs (lower the rate or set max_jobs)"
                )
        for origin, allowed in (self.workload.residency or {}).items():
            key = f"workload.residency.{origin}"
            if origin not in names:
                raise ValueError(f"{key}: unknown site {origin!r} (sites: {names})")
            unknown = [s for s in allowed if s not in names]
            if unknown or not allowed:
                raise ValueError(
                    f"{key} must list sites of the scenario ({', '.join(names)}), got {allowed}"
                )
        for i, ev in enumerate(self.demand_response):
            if ev.site not in names:
                raise ValueError(f"demand_response[{i}].site: unknown site {ev.site!r}")
            if ev.generator is not None:
                continue
            start, end = ev.window()
            if start < self.start or end > self.end:
                raise ValueError(
                    f"demand_response[{i}]: event {start.isoformat()} .. {end.isoformat()} "
                    f"is outside the scenario {self.start.isoformat()} .. {self.end.isoformat()}; "
                    f"lengthen duration_h, or drop the events with --set demand_response=[]"
                )
        self._check_services(names)
        return self

    def _check_services(self, names: list[str]) -> None:
        """Service names unique; their sites exist and have pools of their GPU; the weights
        fit a replica; the starting replicas fit the pools (with every other service's)."""

        seen = [s.name for s in self.services]
        dupes = sorted({n for n in seen if seen.count(n) > 1})
        if dupes:
            raise ValueError(f"services: names must be unique, repeated: {dupes}")
        taken: dict[tuple[str, str], int] = {}
        pools = {(s.name, p.model): p.count for s in self.sites for p in s.gpus}
        sliced = {(s.name, p.model): p.mig for s in self.sites for p in s.gpus if p.mig}
        for i, svc in enumerate(self.services):
            key = f"services[{i}]"
            for site in svc.sites:
                if site not in names:
                    raise ValueError(f"{key}.sites: unknown site {site!r} (sites: {names})")
                if (site, svc.gpu) not in pools:
                    raise ValueError(f"{key}.gpu: site {site} has no {svc.gpu!r} GPUs")
                if ((site, svc.gpu) in sliced) != (svc.mig_profile is not None):
                    kind = "whole" if svc.mig_profile is None else "MIG-partitioned"
                    raise ValueError(
                        f"{key}.gpu: the service's own model needs {kind} {svc.gpu} GPUs at "
                        f"each of its sites; site {site}'s are not"
                    )
            for k, variant in enumerate(svc.variant_specs()):
                where = key if k == 0 else f"{key}.variants[{k - 1}]"
                _check_variant(where, variant, svc.sites, pools, sliced)
            if svc.mig_profile is not None:
                continue  # its starting replicas take slices: checked as the run starts
            for site, k in svc.initial_replicas().items():
                taken[site, svc.gpu] = taken.get((site, svc.gpu), 0) + k * svc.gpus_per_replica
                if taken[site, svc.gpu] > pools[site, svc.gpu]:
                    raise ValueError(
                        f"{key}.replicas.{site}: {k} replicas of {svc.gpus_per_replica} GPUs "
                        f"do not fit {site}'s {pools[site, svc.gpu]} {svc.gpu} GPUs "
                        f"(with the services before it: {taken[site, svc.gpu]} needed)"
                    )

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.duration_h)

    @property
    def horizon_s(self) -> float:
        return self.duration_h * 3600.0

    def site_names(self) -> list[str]:
        return [s.name for s in self.sites]

    def speed(self, gpu: str, profile: str) -> float:
        """Work one `gpu` does on a `profile` job at its maximum power limit, reference GPU-s
        per s: the `[throughput]` table's, else the roofline's (`sim.models.hardware.speed`)."""
        if self.throughput is None:
            return roofline_speed(gpu, profile)
        return self.throughput.speed(gpu, profile)

    def to_toml(self) -> str:
        """The scenario as TOML (paths absolute), loadable again with `load_scenario`."""
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))


# --- loading -----------------------------------------------------------------------------


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read a TOML scenario, apply `key.path=value` overrides, validate.

    Relative file paths in the scenario are resolved against the scenario's folder.
    Raises `ScenarioError` naming the file, the key path and the bad value.
    """
    path = Path(path)
    raw = read_scenario_toml(path)
    for item in overrides:
        apply_override(raw, item)
    return scenario_from_dict(raw, source=path)


def read_scenario_toml(path: Path) -> dict[str, Any]:
    """The parsed TOML of a scenario file, not yet validated; ScenarioError naming the file
    if it cannot be read, is not UTF-8 text or is not TOML."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario file ({e.strerror})") from None
    try:
        return tomllib.loads(_scenario_text(path, data))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: invalid TOML: {e}") from None


def _scenario_text(path: Path, data: bytes) -> str:
    """The text of a scenario file: UTF-8, with or without a byte-order mark (TOML is
    UTF-8); ScenarioError naming the file and what it looks like for anything else."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScenarioError(f"{path}: scenario files are UTF-8 text; this one is UTF-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = data[e.start : e.start + 1].hex()
        raise ScenarioError(
            f"{path}: scenario files are UTF-8 text; byte {e.start} is 0x{bad}, not UTF-8 "
            f"(Latin-1 or a binary file? save it as UTF-8)"
        ) from None


def scenario_from_dict(raw: dict[str, Any], source: str | Path = "<scenario>") -> Scenario:
    """Validate a scenario given as a dict (as parsed from TOML)."""
    source = Path(source)
    _resolve_paths(raw, source.parent.resolve())
    _register_gpu_models(raw.get("gpu_models"), source)
    try:
        return Scenario.model_validate(raw)
    except ValidationError as e:
        raise ScenarioError(f"{source}: {_first_error(e)}") from None


def _register_gpu_models(models: Any, source: Path) -> None:
    """Add the scenario's own GPU models to the catalog before its pools are validated."""
    if not isinstance(models, dict):
        return  # the schema reports a wrong type
    for gid, fields in models.items():
        try:
            check_numbers(fields, "")
            register_gpu(gpu_spec_from_dict(gid, fields))
        except (ValueError, TypeError, KeyError) as e:
            raise ScenarioError(f"{source}: gpu_models.{gid}: {e}") from None


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for site in raw.get("sites", []) if isinstance(raw.get("sites"), list) else []:
        for key in ("carbon", "decision_carbon", "forecast"):  # the site's own files
            table = site.get(key) if isinstance(site, dict) else None
            if isinstance(table, dict) and isinstance(table.get("file"), str):
                table["file"] = str(base / table["file"])
    wl = raw.get("workload")
    if isinstance(wl, dict) and isinstance(wl.get("file"), str):
        wl["file"] = str(base / wl["file"])
    for svc in raw.get("services", []) if isinstance(raw.get("services"), list) else []:
        src = svc.get("requests") if isinstance(svc, dict) else None
        if isinstance(src, dict) and isinstance(src.get("file"), str):
            src["file"] = str(base / src["file"])
    wan = raw.get("wan")
    if isinstance(wan, dict) and isinstance(wan.get("topology_file"), str):
        wan["topology_file"] = str(base / wan["topology_file"])
    failures = raw.get("failures")
    if isinstance(failures, dict) and isinstance(failures.get("trace"), str):
        failures["trace"] = str(base / failures["trace"])
    spot = raw.get("spot")
    if isinstance(spot, dict) and isinstance(spot.get("trace"), str):
        spot["trace"] = str(base / spot["trace"])
    throughput = raw.get("throughput")
    if isinstance(throughput, dict) and isinstance(throughput.get("file"), str):
        throughput["file"] = str(base / throughput["file"])
    _resolve_policy_file(raw.get("policy"), base)


def _resolve_policy_file(policy: Any, base: Path) -> None:
    """A policy `path/to/file.py:Class` is found next to the scenario file when it is there
    (else relative to the working directory), and so are a chain's members'."""
    if not isinstance(policy, dict):
        return
    name = policy.get("name")
    if isinstance(name, str) and ".py:" in name:
        path, _, cls = name.rpartition(":")
        if (base / path).is_file():
            policy["name"] = f"{base / path}:{cls}"
    params = policy.get("params")
    members = params.get("policies") if isinstance(params, dict) else None
    for member in members if isinstance(members, list) else []:
        _resolve_policy_file(member, base)


def _first_error(e: ValidationError) -> str:
    errs = e.errors()
    err = _most_telling(errs)
    loc = _loc_to_path(err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    text = f"{loc}: {msg}" if loc else msg
    if err["type"] not in ("missing", "value_error") and "input" in err:
        text += f" (got {err['input']!r})"
    if len(errs) > 1:
        text += f" [and {len(errs) - 1} more error(s)]"
    return text


def _most_telling(errs: list[Any]) -> Any:
    """The error to report: the first, unless it only says a value did not match one member
    of a union (`pue = [1, nan]` is "not a number" and "item 1 not finite"): then the first
    error about the same key that says what is wrong with the value."""
    first = errs[0]
    if not first["type"].endswith("_type"):
        return first
    key = _loc_to_path(first["loc"][:1])
    same_key = (e for e in errs if _loc_to_path(e["loc"][:1]) == key)
    return next((e for e in same_key if not e["type"].endswith("_type")), first)


_UNION_MEMBER = re.compile(r"^(float|int|str|bool|(list|dict|tuple)\[.*\])$")
"""How pydantic names the member of a union (`float | list[float]`) in an error's location."""


def _loc_to_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union")) or _UNION_MEMBER.match(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply one `key.path=value` override to a parsed scenario dict, in place.

    The value is parsed with `parse_value`. List items are addressed as `sites[0].pue` or
    `sites.0.pue`.
    """
    key, sep, value_text = item.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {item!r}: expected key.path=value")
    set_value(raw, key, parse_value(value_text))


def parse_value(text: str) -> Any:
    """A value as written on the command line: a TOML value (`3`, `1.5`, `true`, `"x"`,
    `[1, 2]`, `{name = "x"}`), or else the plain string."""
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def set_value(raw: dict[str, Any], key: str, value: Any, origin: str = "--set") -> None:
    """Set `key` (a path like `sites[0].pue` or `policy.params.watts`) in a parsed scenario
    dict, in place, creating tables on the way. Raises ScenarioError naming `origin` (where
    the key was given, e.g. "--set" or "--grid") and the key."""
    parts = key.strip().replace("[", ".").replace("]", "").split(".")
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError(
                    f"{origin} {key}: no list item {part!r} at {where} (length {len(node)})"
                )
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ScenarioError(f"{origin} {key}: {'.'.join(parts[:i])} is a value, not a table")


def _check_variant(
    where: str,
    variant: Variant,
    sites: list[str],
    pools: dict[tuple[str, str], int],
    sliced: dict[tuple[str, str], tuple[str, ...]],
) -> None:
    """ValueError naming `where` unless some site of the service has the variant's GPUs of
    its kind (a MIG variant: partitioned; else whole) and a replica holds its weights."""
    profile = variant.mig_profile
    kind = "partitioned into MIG slices (gpus[].mig)" if profile else "as whole GPUs"
    if not any(
        (site, variant.gpu) in pools and ((site, variant.gpu) in sliced) == (profile is not None)
        for site in sites
    ):
        raise ValueError(
            f"{where}.gpu: none of the service's sites {sites} has {variant.gpu!r} GPUs {kind}"
        )
    try:
        if profile is not None and variant.gpus_per_replica != 1:
            raise ValueError(
                f"a replica on a MIG slice takes one slice (gpus_per_replica = 1), got "
                f"{variant.gpus_per_replica}"
            )
        # the weights and one short sequence must fit (the run uses the requests' lengths)
        replica_model(
            variant.model,
            variant.gpu,
            variant.gpus_per_replica,
            variant.max_batch,
            1.0,
            1.0,
            None,
            profile,
        )
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
