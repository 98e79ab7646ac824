"""The scenario's training-job sections: the jobs (`[workload]`: a synthetic generator or a
job file), how fast they run (`[throughput]` measured speeds, `[scaling]` over GPUs,
`[sharing]` of fractional GPUs), the GPU quotas of virtual clusters, users who resubmit
slowed jobs (`[rebound]`) and the error of the runtimes policies are told
(`[prediction_error]`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from sim.config.base import HOURS_PER_DECADE, ConfigModel, TimeZoneName, known_name
from sim.config.sites import MAX_POOL_GPUS
from sim.errors import ScenarioError
from sim.models.hardware import GPU_CATALOG, PROFILES
from sim.models.hardware import speed as roofline_speed
from sim.models.scaling import INTERCONNECTS
from sim.models.sharing import SLOWDOWN_FULL
from sim.util.csv_rows import csv_rows

MAX_JOBS: Final = 10_000_000
"""Jobs of one synthetic workload at most: a run holds about 1.4 GB per million jobs
(docs/performance.md), so more would not fit a workstation's memory."""


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
        return known_name("profile", v, PROFILES)

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
    """At most one of a synthetic generator or a job file (native CSV/Parquet format);
    neither: no training jobs (a serving-only scenario, which needs `[[services]]`)."""

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
        if self.synthetic is not None and self.file is not None:
            raise ValueError("give one of [workload.synthetic] or workload.file, not both")
        return self

    @property
    def has_jobs(self) -> bool:
        """Whether the workload names a source of jobs (a generator or a file)."""
        return self.synthetic is not None or self.file is not None


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
        try:
            known_name(what, name, known)
        except ValueError as e:
            raise ScenarioError(f"{where}:{line}: {e}") from None
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


MAX_NICS_PER_NODE = 64
"""Most network ports a node may have (a sanity bound: an 8-GPU node has 8 to 10)."""


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
    nics_per_node: int | None = Field(default=None, ge=1, le=MAX_NICS_PER_NODE)
    """Network ports of a node that carry collectives, for every pool; None: the GPU model's
    default node's (e.g. 8 HDR ports of a DGX A100), or one port where `inter_node` names
    another network than that node's (docs/scaling.md)."""

    @field_validator("intra_node", "inter_node")
    @classmethod
    def _known_link(cls, v: str | None) -> str | None:
        if v is not None:
            known_name("interconnect", v, dict(INTERCONNECTS))
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
            known_name("GPU model", gpu, GPU_CATALOG)
        return v

    def sigma(self, gpu: str) -> float:
        """Log-standard deviation of the runtime factors on `gpu`."""
        if self.sigma_frac == "habitat":
            return HABITAT_AVERAGE_ERROR
        if isinstance(self.sigma_frac, dict):
            return self.sigma_frac.get(gpu, 0.0)
        return float(self.sigma_frac)
