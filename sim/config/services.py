"""The scenario's `[[services]]` and `[serving]` tables (validated with the scenario).

A service is one LLM deployment: a catalog model on replicas of `gpus_per_replica` GPUs
of one model, at most `max_batch` sequences in flight per replica, allowed on some sites,
with latency targets and a request source. Replicas take GPUs from the sites' pools, so
services compete with training jobs for them (docs/serving.md).

A service may declare more model `variants` (other models or precisions, other GPUs, MIG
slices), each with a quality score, and generation `directives` that shorten its answers
at a quality penalty (docs/inference-levers.md); `variant_specs()` and `directive_specs()`
resolve them, the service's own model first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, field_validator, model_validator

from sim.config.base import ConfigModel, TimeZoneName
from sim.config.tokens import TokensConfig
from sim.models.llm import PRECISIONS
from sim.models.llm_iteration import default_batched_tokens
from sim.models.llm_memory import BLOCK_SIZE
from sim.models.llm_performance import serving_model
from sim.models.llm_quality import default_directives, model_quality

__all__ = [
    "MAX_RUN_REQUESTS",
    "MAX_SERVICE_ROWS",
    "MAX_SYNTHETIC_REQUESTS",
    "SYNTHETIC_CHUNK_S",
    "Directive",
    "DirectiveConfig",
    "DisaggregationConfig",
    "ParallelConfig",
    "PoolConfig",
    "RequestSource",
    "SchedulerConfig",
    "ServiceConfig",
    "ServingConfig",
    "SloConfig",
    "Variant",
    "VariantConfig",
]

MAX_SYNTHETIC_REQUESTS: Final = 1e9
"""Most requests the synthetic generator makes at once (`sim.serving.requests.
synthetic_requests`, peak rate x duration): beyond, the columns alone would take tens of GB."""

SYNTHETIC_CHUNK_S: Final = 3600.0
"""A service's synthetic requests are drawn this many seconds at a time, each chunk from its
own seed (`sim.serving.sources`); a chunk at the cycles' peak rate is at most
`MAX_SYNTHETIC_REQUESTS`."""

MAX_SERVICE_ROWS: Final = 10_000_000
"""Rows of services.parquet at most, over all services: each service has a row per
`[serving] step_s` of the run and the run holds about 400 bytes a row (measured: 1e5 steps
of serving_only.toml take 40 MB more than 1,440), so 1e7 rows are about 4 GB."""


MAX_RUN_REQUESTS: Final = 25_000_000
"""Requests of a run at most, over all services, at the request and iteration fidelities
(which hold every request; checked as the sources are built, `sim.engine.build`): about
405 bytes a request (measured: serving_only.toml at 20 requests/s for 24 h, 1.73 million
requests, takes 632 MB more than at 2/s), so 2.5e7 are about 10 GB."""


def peak_requests(
    rate_per_s: float, daily_amplitude: float, weekly_amplitude: float, duration_s: float
) -> float:
    """Candidate requests the synthetic generator draws over `duration_s` s: the cycles'
    peak rate `rate_per_s (1 + daily_amplitude)(1 + weekly_amplitude)` times the duration."""
    return rate_per_s * (1 + daily_amplitude) * (1 + weekly_amplitude) * duration_s


class SloConfig(ConfigModel):
    """Latency targets: time to first token and time per output token, each met by
    `percentile` percent of the requests."""

    ttft_ms: float = Field(gt=0)
    """Time to first token target (queueing + prefill + network), ms."""
    tpot_ms: float = Field(gt=0)
    """Time per output token target (after the first), ms."""
    percentile: float = Field(default=99.0, gt=0, le=100)


class RequestSource(ConfigModel):
    """Where a service's requests come from: a request file (`dcsim workload import
    azure-llm ...`, docs/request-format.md), or the synthetic generator.

    `time_scale` multiplies a file's arrival times (0.5 doubles the rate; 24 stretches an
    hour over a day); `repeat` tiles the file (its span, scaled) to cover the run. The
    synthetic generator draws a Poisson process of mean `rate_per_s` with daily and weekly
    cycles and token counts from `tokens` (a preset of `sim.serving.request_presets`).
    """

    file: Path | None = None
    format: Literal["dcsim", "azure-llm", "requests-csv"] = "dcsim"
    """The file's format: "dcsim" (a request file written by `dcsim workload import`), or a
    trace imported as the run starts ("azure-llm", "requests-csv"; the rows it skips are
    counted in meta.json's `request_imports`)."""
    time_scale: float = Field(default=1.0, gt=0, le=1e6)
    repeat: bool = False
    rate_per_s: float | None = Field(default=None, ge=0)
    daily_amplitude: float = Field(default=0.0, ge=0, lt=1)
    weekly_amplitude: float = Field(default=0.0, ge=0, lt=1)
    daily_peak_hour: float = Field(default=14.0, ge=0, lt=24)
    """Local hour of the synthetic daily cycle's peak (a modelling choice, not a published
    value), in `timezone`, daylight saving time followed."""
    timezone: TimeZoneName | None = None
    """IANA time zone of `daily_peak_hour` (default: the origin site's `timezone`)."""
    tokens: str | TokensConfig = "azure-conv"
    """Token counts of the synthetic generator: a preset (`azure-conv`, `azure-code`), or a
    law per direction (`sim.config.tokens`; docs/request-format.md "Token lengths")."""
    origin: str | None = None
    """The site the requests come from (default: the service's first site); requests served
    elsewhere pay the WAN's round-trip propagation delay in their time to first token."""

    @model_validator(mode="after")
    def _one_source(self) -> RequestSource:
        if (self.file is None) == (self.rate_per_s is None):
            raise ValueError("give exactly one of file or rate_per_s")
        # keys of the other source must keep their defaults (a saved scenario.toml writes
        # every default, so "given" cannot mean "set")
        if self.file is None:
            other = {"time_scale": 1.0, "repeat": False, "format": "dcsim"}
            whose = "a request file, not to rate_per_s"
        else:
            other = {
                "daily_amplitude": 0.0,
                "weekly_amplitude": 0.0,
                "daily_peak_hour": 14.0,
                "timezone": None,
                "tokens": "azure-conv",
            }
            whose = "rate_per_s, not to a request file"
        for key, default in other.items():
            if getattr(self, key) != default:
                raise ValueError(f"{key} applies to {whose} (got {getattr(self, key)!r})")
        if self.rate_per_s is not None:
            self._check_generator_bound(self.rate_per_s)
        return self

    def _check_generator_bound(self, rate_per_s: float) -> None:
        """An hour at the cycles' peak rate is at most `MAX_SYNTHETIC_REQUESTS` requests."""
        cycles = (self.daily_amplitude, self.weekly_amplitude)
        chunk = peak_requests(rate_per_s, *cycles, SYNTHETIC_CHUNK_S)
        if chunk > MAX_SYNTHETIC_REQUESTS:
            most = MAX_SYNTHETIC_REQUESTS / peak_requests(1.0, *cycles, SYNTHETIC_CHUNK_S)
            raise ValueError(
                f"rate_per_s: {rate_per_s:g} per second asks the generator for about "
                f"{chunk:.3g} requests an hour at the cycles' peak, more than the "
                f"{MAX_SYNTHETIC_REQUESTS:.0e} it makes in memory (at most {most:.4g} per "
                "second with these amplitudes)"
            )


class SchedulerConfig(ConfigModel):
    """The engine's scheduler at the iteration level (`[serving] fidelity = "iteration"`;
    docs/serving.md "Iteration level"); the other fidelities ignore it. Defaults are
    vLLM V1's under its OpenAI-compatible server."""

    max_num_batched_tokens: int | None = Field(default=None, gt=0, le=10_000_000)
    """Most tokens (decodes + prefill chunks) in one iteration. None: vLLM's default for
    the GPU (`sim.models.llm_iteration.default_batched_tokens`: 8192 on a GPU of 70 GiB or
    more other than an A100, else 2048), raised to `max_num_seqs` if that is larger."""
    max_num_seqs: int | None = Field(default=None, gt=0, le=100_000)
    """Most sequences running on a replica. None: the service's (or variant's) `max_batch`."""
    chunked_prefill: bool = True
    """Split prompts over iterations within the token budget (vLLM V1 always does); False:
    a prompt is admitted whole, and one longer than the budget is refused."""
    block_size: Literal[1, 8, 16, 32, 64, 128, 256] = BLOCK_SIZE  # type: ignore[assignment]
    """Tokens per KV-cache block (vLLM's `BlockSize` choices; 16 by default on CUDA)."""
    preemption: Literal["recompute", "swap"] = "recompute"
    """What happens to a preempted request's KV cache: "recompute" (vLLM V1's only mode):
    freed, its tokens prefilled again on readmission; "swap" (vLLM V0's option): moved to
    host memory over the GPUs' PCIe links and back on readmission, each transfer lengthening
    the iteration it happens in."""
    max_model_len: int | None = Field(default=None, gt=0, le=100_000_000)
    """Most tokens of context (prompt + output) a request may have; longer ones are refused.
    None: what the replica's KV cache holds."""

    def resolved(self, gpu: str, mig_profile: str | None, max_batch: int) -> SchedulerConfig:
        """This configuration for replicas on `gpu` (a `mig_profile` slice) of `max_batch`,
        every limit a number (`ServiceConfig` has checked the budget against the sequences)."""
        seqs = self.max_num_seqs if self.max_num_seqs is not None else max_batch
        tokens = self.max_num_batched_tokens
        if tokens is None:
            tokens = max(default_batched_tokens(gpu, mig_profile), seqs)
        return self.model_copy(update={"max_num_batched_tokens": tokens, "max_num_seqs": seqs})


class ParallelConfig(ConfigModel):
    """How a replica's GPUs share the model (docs/serving.md "Parallelism"): `tp` GPUs per
    tensor-parallel group of the attention (the rest are data-parallel attention ranks),
    `ep` GPUs the experts of an MoE model spread over (1, or every GPU of the replica).
    Left out: the model's default (dense: tp = GPUs; MoE: tp = 1, ep = GPUs)."""

    tp: int | None = Field(default=None, gt=0, le=1024)
    ep: int | None = Field(default=None, gt=0, le=1024)


class VariantConfig(ConfigModel):
    """One more way to serve a service (`[[services]] variants = [...]`): another model or
    precision, on other GPUs or a MIG slice. `gpu`, `gpus_per_replica` and `max_batch` left
    out take the service's own (but a MIG variant's `gpus_per_replica` is 1: its replica
    holds one slice); a variant runs on whole GPUs unless it names a `mig_profile`, and its
    quality defaults to the catalog's."""

    name: str | None = Field(default=None, min_length=1)
    """The variant's name (default: its model id)."""
    model: str
    """A serving catalog id (`sim.serving.MODELS`)."""
    gpu: str | None = None
    gpus_per_replica: int | None = Field(default=None, gt=0, le=1024)
    max_batch: int | None = Field(default=None, gt=0, le=100_000)
    mig_profile: str | None = None
    """Each replica on one MIG slice of this profile (`sim.models.mig`) of a partitioned pool."""
    quality: float | None = Field(default=None, ge=0, le=100)
    """Quality score, 0-100 (default: the catalog's, `sim.models.llm_quality`)."""
    scheduler: SchedulerConfig | None = None
    """The iteration level's scheduler for this variant (default: the service's)."""
    precision: str | None = None
    """The weights' format, a key of `sim.models.llm.PRECISIONS` (None: the model's own);
    refused when the GPU cannot run it (docs/serving.md "Precisions and GPUs")."""


class PoolConfig(ConfigModel):
    """The prefill or the decode replicas of a disaggregated service
    (`[services.disaggregation.prefill]`, `.decode`): keys left out take the service's own."""

    gpu: str | None = None
    gpus_per_replica: int | None = Field(default=None, gt=0, le=1024)
    max_batch: int | None = Field(default=None, gt=0, le=100_000)
    cap_w: float | None = Field(default=None, gt=0)
    """Per-GPU power cap of the pool's GPUs, W (None: the site's; a policy's `SetCap` on
    the service overrides it)."""
    replicas: dict[str, int] = {}
    """The pool's replicas per site at the start (default: one on the service's first
    site); the two pools' counts are the prefill:decode ratio."""
    scheduler: SchedulerConfig | None = None
    """The pool's scheduler (default: the service's)."""


class DisaggregationConfig(ConfigModel):
    """Prefill/decode disaggregation (Splitwise, DistServe; docs/serving.md
    "Disaggregation"): prompts are prefilled on the `prefill` replicas, then each
    request's KV cache crosses `link` to a `decode` replica at the same site, which
    generates the rest of its answer. Only at `[serving] fidelity = "iteration"`."""

    prefill: PoolConfig = PoolConfig()
    decode: PoolConfig = PoolConfig()
    link: str | None = None
    """The link the KV caches cross, an interconnect id (`sim/data/interconnects.toml`):
    "NVLink4" within a node, "IB-NDR" or "Eth-400G" between nodes of the site. None: the
    network of the prefill GPU's default node (`sim.models.scaling.default_node`)."""


class DirectiveConfig(ConfigModel):
    """A generation directive level (Sprout): the service's answers are `output_factor` times
    as long on average, at `quality_penalty` points of quality."""

    name: str = Field(min_length=1)
    output_factor: float = Field(gt=0, le=10)
    quality_penalty: float = Field(default=0.0, ge=0, le=100)


@dataclass(frozen=True, slots=True)
class Variant:
    """A resolved variant: how its replicas are built, and its quality (None: unknown)."""

    name: str
    model: str
    gpu: str
    gpus_per_replica: int
    max_batch: int
    mig_profile: str | None
    quality: float | None
    scheduler: SchedulerConfig
    """Its scheduler (the iteration level resolves it: `SchedulerConfig.resolved`)."""
    precision: str | None = None
    """The weights' format (None: the model's own)."""
    tp: int | None = None
    ep: int | None = None
    """Tensor- and expert-parallel degrees (None: the model's default layout)."""
    cap_w: float | None = None
    """Its GPUs' own power cap, W (a disaggregated pool's `cap_w`; None: the site's)."""


@dataclass(frozen=True, slots=True)
class Directive:
    """A resolved directive level."""

    name: str
    output_factor: float
    quality_penalty: float


class ServiceConfig(ConfigModel):
    """One `[[services]]` entry."""

    name: str = Field(min_length=1)
    model: str
    """A serving catalog id (`sim.serving.MODELS`), e.g. "Llama-3.1-8B-Instruct"."""
    gpu: str
    """The GPU model of the replicas (a pool of that model at each of its sites)."""
    gpus_per_replica: int = Field(default=1, gt=0, le=1024)
    max_batch: int = Field(default=256, gt=0, le=100_000)
    """Most sequences in flight on one replica (vLLM's max_num_seqs)."""
    sites: list[str] = Field(min_length=1)
    """Sites the service may run on."""
    replicas: dict[str, int] = {}
    """Replicas per site at the start (default: one on the first site)."""
    slo: SloConfig
    requests: RequestSource
    timeout_s: float = Field(default=60.0, gt=0)
    """A request not started within this many seconds of its arrival is dropped (the
    client gave up), as is one that arrives when no replica is ready."""
    mig_profile: str | None = None
    """Each replica of the service's own model on one MIG slice of this profile."""
    quality: float | None = Field(default=None, ge=0, le=100)
    """Quality score of the service's own model, 0-100 (default: the catalog's)."""
    precision: str | None = None
    """The weights' format of the service's own model, a key of `sim.models.llm.PRECISIONS`
    ("bfloat16", "float16", "fp8", "int8", "int4", "fp4", "mxfp4"; None: the catalog
    model's own); refused naming both when the GPU cannot run it (docs/serving.md
    "Precisions and GPUs")."""
    parallel: ParallelConfig | None = None
    """Tensor/expert-parallel degrees of the service's own model's replicas (None: the
    model's default layout); checked against its heads and experts (docs/serving.md
    "Parallelism")."""
    variants: list[VariantConfig] = []
    """More variants a policy may serve (docs/inference-levers.md)."""
    directives: list[DirectiveConfig] | Literal["default"] | None = None
    """Generation directive levels, the first in force at the start; "default": the
    sourced defaults (`sim.models.llm_quality.default_directives`); None: answers as they
    come (one level, factor 1)."""

    @field_validator("directives", mode="before")
    @classmethod
    def _directives_word(cls, v: object) -> object:
        """A word other than "default" is one line, not each member of the union refused."""
        if isinstance(v, str) and v != "default":
            raise ValueError(
                f'must be "default" or a list of levels [{{ name, output_factor, '
                f"quality_penalty }}, ...], got {v!r}"
            )
        return v

    quality_floor: float | None = Field(default=None, ge=0, le=100)
    """Served quality below this counts in `served_below_floor_share`; policies keep to it."""
    budget_per_h: float | None = Field(default=None, ge=0)
    """Most the service's GPUs may cost per hour, in the scenario's currency (policies)."""
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0, lt=1)
    """Share of each prompt's tokens found in the prefix cache (vLLM's automatic prefix
    caching, SGLang's RadixAttention), the same for every prompt and every variant: prefill
    computes only the others, the KV cache holds the whole prompt (docs/serving.md "Prefix
    caching"). 0: no prefix caching."""
    scheduler: SchedulerConfig = SchedulerConfig()
    """The engine's scheduler at the iteration level (docs/serving.md "Iteration level")."""
    disaggregation: DisaggregationConfig | None = None
    """Prefill and decode on separate replicas (None: each replica does both). Its pools are
    the service's variants "prefill" and "decode" (a policy scales them apart)."""

    @model_validator(mode="after")
    def _check(self) -> ServiceConfig:
        known = sorted(serving_model().models)
        if self.model not in known:
            raise ValueError(f"model: unknown serving model {self.model!r}; known: {known}")
        for site, k in self.replicas.items():
            if site not in self.sites:
                raise ValueError(f"replicas.{site}: not one of the service's sites {self.sites}")
            if k < 0:
                raise ValueError(f"replicas.{site} must be >= 0, got {k}")
        dupes = sorted({s for s in self.sites if self.sites.count(s) > 1})
        if dupes:
            raise ValueError(f"sites: repeated {dupes}")
        if self.requests.origin is not None and self.requests.origin not in self.sites:
            raise ValueError(
                f"requests.origin: {self.requests.origin!r} is not one of the service's "
                f"sites {self.sites}"
            )
        for k, v in enumerate(self.variants):
            if v.model not in known:
                raise ValueError(
                    f"variants[{k}].model: unknown serving model {v.model!r}; known: {known}"
                )
        if self.disaggregation is not None:
            self._check_disaggregation(self.disaggregation)
        own: list[VariantConfig | None] = [None]
        for k, vc in enumerate(own + list(self.variants)):
            sched = (vc.scheduler if vc else None) or self.scheduler
            seqs = sched.max_num_seqs or (vc.max_batch if vc else None) or self.max_batch
            tokens = sched.max_num_batched_tokens
            if tokens is not None and tokens < seqs:
                where = f"variants[{k - 1}]." if vc and vc.scheduler else ""
                raise ValueError(
                    f"{where}scheduler.max_num_batched_tokens ({tokens}) must be >= "
                    f"max_num_seqs ({seqs}): each running sequence takes a token of the budget"
                )
        for where, precision in (
            ("precision", self.precision),
            *((f"variants[{k}].precision", v.precision) for k, v in enumerate(self.variants)),
        ):
            if precision is not None and precision not in PRECISIONS:
                raise ValueError(
                    f"{where}: unknown precision {precision!r}; known: {sorted(PRECISIONS)}"
                )
        names = [v.name for v in self.variant_specs()]
        if len(set(names)) != len(names):
            raise ValueError(f"variants: names must be unique, got {names}")
        levels = [d.name for d in self.directive_specs()]
        if not levels:
            raise ValueError("directives: list at least one level (or leave directives out)")
        if len(set(levels)) != len(levels):
            raise ValueError(f"directives: names must be unique, got {levels}")
        return self

    def _check_disaggregation(self, d: DisaggregationConfig) -> None:
        if self.variants or self.mig_profile is not None or self.replicas:
            raise ValueError(
                "disaggregation: not with variants, mig_profile or replicas (the pools are "
                "the service's variants; give each pool its replicas)"
            )
        for role, pool in (("prefill", d.prefill), ("decode", d.decode)):
            for site in pool.replicas:
                if site not in self.sites:
                    raise ValueError(
                        f"disaggregation.{role}.replicas.{site}: not one of the service's "
                        f"sites {self.sites}"
                    )
            sched = pool.scheduler or self.scheduler
            seqs = sched.max_num_seqs or pool.max_batch or self.max_batch
            tokens = sched.max_num_batched_tokens
            if tokens is not None and tokens < seqs:
                raise ValueError(
                    f"disaggregation.{role}.scheduler.max_num_batched_tokens ({tokens}) must "
                    f"be >= max_num_seqs ({seqs})"
                )
        if (d.decode.scheduler or self.scheduler).preemption == "swap":
            raise ValueError(
                'disaggregation.decode.scheduler.preemption: "swap" is not modelled on '
                'decode replicas (use "recompute")'
            )

    def variant_specs(self) -> tuple[Variant, ...]:
        """The service's own model first, then its `variants`, resolved; a disaggregated
        service's are its pools, "prefill" then "decode"."""
        if self.disaggregation is not None:
            d = self.disaggregation
            return tuple(
                Variant(
                    name=role,
                    model=self.model,
                    gpu=pool.gpu or self.gpu,
                    gpus_per_replica=pool.gpus_per_replica or self.gpus_per_replica,
                    max_batch=pool.max_batch or self.max_batch,
                    mig_profile=None,
                    quality=self.quality if self.quality is not None else model_quality(self.model),
                    scheduler=pool.scheduler or self.scheduler,
                    precision=self.precision,
                    tp=self.parallel.tp if self.parallel is not None else None,
                    ep=self.parallel.ep if self.parallel is not None else None,
                    cap_w=pool.cap_w,
                )
                for role, pool in (("prefill", d.prefill), ("decode", d.decode))
            )
        own = VariantConfig(
            model=self.model,
            mig_profile=self.mig_profile,
            quality=self.quality,
            precision=self.precision,
        )
        return tuple(
            Variant(
                name=v.name or v.model,
                model=v.model,
                gpu=v.gpu or self.gpu,
                # a replica on a MIG slice holds that one slice
                gpus_per_replica=v.gpus_per_replica
                or (1 if v.mig_profile else self.gpus_per_replica),
                max_batch=v.max_batch or self.max_batch,
                mig_profile=v.mig_profile,
                quality=v.quality if v.quality is not None else model_quality(v.model),
                scheduler=v.scheduler or self.scheduler,
                precision=v.precision,
                tp=layout.tp if layout is not None else None,
                ep=layout.ep if layout is not None else None,
            )
            for v, layout in ((own, self.parallel), *((v, None) for v in self.variants))
        )

    def directive_specs(self) -> tuple[Directive, ...]:
        """The directive levels, the one in force at the start first."""
        if self.directives is None:
            return (Directive("normal", 1.0, 0.0),)
        if self.directives == "default":
            return tuple(
                Directive(d.name, d.output_factor, d.quality_penalty) for d in default_directives()
            )
        return tuple(Directive(d.name, d.output_factor, d.quality_penalty) for d in self.directives)

    @property
    def origin(self) -> str:
        return self.requests.origin or self.sites[0]

    def initial_replicas(self) -> dict[str, int]:
        """Replicas per site at the start."""
        return dict(self.replicas) if self.replicas else {self.sites[0]: 1}

    def initial_deployments(self) -> list[tuple[str, str, str | None, int]]:
        """(key naming it, site, variant: None for the service's own model, replicas) of
        every deployment with replicas at the start: a disaggregated service's pools'."""
        if self.disaggregation is None:
            return [(f"replicas.{s}", s, None, n) for s, n in self.initial_replicas().items()]
        d = self.disaggregation
        return [
            (f"disaggregation.{role}.replicas.{s}", s, role, n)
            for role, pool in (("prefill", d.prefill), ("decode", d.decode))
            for s, n in (pool.replicas or {self.sites[0]: 1}).items()
        ]


class ServingConfig(ConfigModel):
    """How services are simulated (docs/serving.md).

    - "fluid": in steps of `step_s`: each step's arrivals, replicas and load give its
      served and dropped requests, latency percentiles from a queueing approximation and
      power (constant over the step, so energy is exact); fast enough for a year.
    - "request": every request is simulated: queueing, prefill, continuous batching as
      processor sharing, completion; `requests.parquet` lists them.
    - "iteration": every request through an engine's iteration schedule (vLLM V1): token
      budget, chunked prefill, paged KV cache with preemption (`SchedulerConfig`);
      `requests.parquet` lists them.
    """

    fidelity: Literal["fluid", "request", "iteration"] = "fluid"
    step_s: float = Field(default=60.0, gt=0)
    """Length of a row of services.parquet, and of a fluid step, s."""
