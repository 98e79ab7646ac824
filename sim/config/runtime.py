"""The scenario's run-time sections: what policies are told of the future (`[forecast]`),
the wide-area network between the sites (`[wan]`), failures of running jobs
(`[failures]`) and the policy that decides (`[policy]`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, field_validator, model_validator

from sim.config.base import ConfigModel
from sim.config.sites import MAX_PUE
from sim.models.topologies import topohub_key


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


class PolicyConfig(ConfigModel):
    name: str = "run_now"
    """Registry name (see `policies.REGISTRY`) or `module:Class` / `path/to/file.py:Class`."""
    params: dict[str, Any] = {}


class EngineConfig(ConfigModel):
    """Which engine runs the scenario (docs/performance.md, "the batch engine"):
    "event", the discrete-event engine (the reference); "batch", the batch engine, for runs
    whose jobs never interact (a ScenarioError names why where it does not apply); "auto",
    the batch engine where it applies, else the event engine (meta.json's `engine` says
    which ran and why the batch engine did not)."""

    kind: Literal["auto", "event", "batch"] = "auto"
