"""`performance`: throughput, latency, power and energy per token of one LLM replica.

Reads `sim/data/serving_model.toml` (written by `scripts/calibrate_serving.py` from the
ML.ENERGY leaderboard v3 measurements): the fitted constants, the model catalog and the
specifications of the calibration GPUs that `sim/data/gpus.toml` lacks (B200). The
equations are in `sim.models.llm_roofline`; docs/serving.md explains them. A power cap lowers
the SM clock until the draw is within it (`sim.models.llm_roofline.capped_clock`): compute
slows, HBM does not, so memory-bound decode loses less than compute-bound prefill
(docs/serving.md "Power caps by phase").
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from sim.models.hardware import ARCHITECTURES, GPU_CATALOG
from sim.models.llm import PRECISION_BYTES, PRECISIONS, ModelSpec, check_model_spec, finite_real
from sim.models.llm_hardware import execution
from sim.models.llm_parallel import Layout, Plan, layout_for, plan
from sim.models.llm_roofline import Inputs, Params, capped_clock, evaluate
from sim.models.token_laws import TokenLaw

__all__ = [
    "ServingGpu",
    "ServingModel",
    "ServingPoint",
    "load_serving_model",
    "performance",
    "serving_model",
]


@dataclass(frozen=True, slots=True)
class ServingGpu:
    """What the serving model reads of a GPU (one device)."""

    id: str
    memory_gb: float
    mem_bw_gbps: float
    fp16_tflops: float
    """Dense FP16/BF16 tensor throughput, TFLOP/s."""
    tdp_w: float
    idle_w: float
    measured: bool
    """True for the GPUs of the calibration data (H100 SXM, B200)."""
    blackwell: bool = False
    """True for a Blackwell GPU (B200): its own bandwidth efficiency and active power
    floor. Every other GPU takes the Hopper constants."""


@dataclass(frozen=True, slots=True)
class CatalogModel:
    """A catalog model: its `ModelSpec` plus what the calibration data tell about it."""

    spec: ModelSpec
    hf_id: str
    expert_share: float
    """Routed experts per token / routed experts (k / E); 1 for a dense model."""
    layers: int
    moe_layers: int
    """Layers with routed experts (0 for a dense model)."""
    avg_output_tokens: float
    """Mean output length on lm-arena-chat over the model's runs, tokens."""


@dataclass(frozen=True, slots=True)
class ServingModel:
    """The contents of serving_model.toml."""

    params: Params
    models: Mapping[str, CatalogModel]
    gpus: Mapping[str, ServingGpu]
    """The calibration GPUs missing from GPU_CATALOG (B200)."""
    gpu_aliases: Mapping[str, str]
    """Names the leaderboard uses for catalog GPUs (H100 -> H100-SXM)."""
    measured_gpus: tuple[str, ...]
    rules: Mapping[str, Any]
    """Rules for a ModelSpec without catalog entry: KV bytes, layers, expert share."""
    default_output_tokens: float
    meta: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ServingPoint:
    """One replica saturated at its maximum batch size (all figures for the whole replica)."""

    model: str
    gpu: str
    num_gpus: int
    max_batch: int
    batch: float
    """Mean sequences in the batch: `max_batch`, or fewer when the KV cache is full."""
    kv_capacity_seqs: float
    """Sequences of this context the KV cache holds."""
    input_tokens: float
    output_tokens: float
    context_tokens: float
    """Mean context of a sequence in the batch (input + kappa x output), tokens (kappa: the
    output law's in-flight share, or the calibrated constant when only a mean is given)."""
    throughput_tokens_per_s: float
    """Output tokens per second of the replica."""
    itl_median_ms: float
    """Median inter-token latency (one decode iteration), ms."""
    prefill_s: float
    """Prefill of one request's input alone on the replica, s (time to first token
    without queueing and without a batch to share the GPUs with)."""
    power_w: float
    """GPU power of all GPUs of the replica, W."""
    energy_per_token_j: float
    """GPU energy per output token, J."""
    extrapolated: bool
    """True when the calibration data did not see this configuration (`extrapolated_why`
    says what): the figures come from the specifications through the fitted constants."""
    gpu_cap_w: float | None = None
    """The per-GPU power limit the point is at, W (None: the GPU's default, maximum limit).
    Below the maximum, power and speed follow the SM clock that meets it (decode iterations
    and `prefill_s` each at their own clock)."""
    extrapolated_why: tuple[str, ...] = ()
    """What the calibration data did not see: a GPU not measured, an architecture outside
    the calibrated families, a precision not measured or run weight-only, a parallel layout
    (one sentence each; empty: nothing)."""
    prefix_hit_rate: float = 0.0
    """Share of each prompt's tokens found in the prefix cache (0: no prefix caching): the
    prefill computes the others (`prefill_s`, the amortised prefill in the throughput), the
    context holds them all (`context_tokens`, `kv_capacity_seqs`)."""


def _catalog_model(m: Mapping[str, Any], avg_output_tokens: float) -> CatalogModel:
    """A catalog entry from its toml table (serving_model.toml's `[models.*]`, or
    llm_shapes.toml's `[catalog.*]`)."""
    spec = ModelSpec(
        m["total_params_b"],
        m["active_params_b"],
        m["precision"],
        m["architecture"],
        m["kv_bytes_per_token"],
    )
    return CatalogModel(
        spec, m["hf_id"], m["expert_share"], m["layers"], m["moe_layers"], avg_output_tokens
    )


def load_serving_model(path: Path | None = None) -> ServingModel:
    """The serving model from `path` (default: the shipped serving_model.toml), its catalog
    completed by the models the calibration data lack (`sim/data/llm_shapes.toml`
    `[catalog]`: gpt-oss, at the default output length)."""
    if path is None:
        text = resources.files("sim").joinpath("data/serving_model.toml").read_text("utf-8")
    else:
        text = path.read_text("utf-8")
    raw = tomllib.loads(text)
    models = {mid: _catalog_model(m, m["avg_output_tokens"]) for mid, m in raw["models"].items()}
    extra = tomllib.loads(
        resources.files("sim").joinpath("data/llm_shapes.toml").read_text("utf-8")
    )["catalog"]
    for mid, m in extra.items():
        models.setdefault(mid, _catalog_model(m, raw["rules"]["default_output_tokens"]))
    gpus = {
        gid: ServingGpu(
            gid,
            g["memory_gb"],
            g["mem_bw_gbps"],
            g["fp16_tflops"],
            g["tdp_w"],
            g["idle_w"],
            True,
            g.get("architecture") == "Blackwell",
        )
        for gid, g in raw["calibration_gpus"].items()
    }
    return ServingModel(
        params=Params(**raw["parameters"]),
        models=MappingProxyType(models),
        gpus=MappingProxyType(gpus),
        gpu_aliases=MappingProxyType(dict(raw["gpu_aliases"])),
        measured_gpus=tuple(raw["measured_gpus"]),
        rules=MappingProxyType(dict(raw["rules"])),
        default_output_tokens=raw["rules"]["default_output_tokens"],
        meta=MappingProxyType({k: raw[k] for k in ("source", "generated_by") if k in raw}),
    )


@cache
def serving_model() -> ServingModel:
    """The shipped serving model, read on first use."""
    return load_serving_model()


def _gpu(sm: ServingModel, gpu: str) -> ServingGpu:
    known = sorted({*GPU_CATALOG, *sm.gpus, *sm.gpu_aliases})
    if not isinstance(gpu, str):
        raise ValueError(f"gpu must be one of {known}, got {gpu!r}")
    gid = sm.gpu_aliases.get(gpu, gpu)
    if gid in sm.gpus:
        return sm.gpus[gid]
    if gid in GPU_CATALOG:
        g = GPU_CATALOG[gid]
        return ServingGpu(
            gid,
            g.memory_gb,
            g.mem_bw_gbps,
            g.fp16_tflops,
            g.tdp_w,
            g.idle_w,
            gid in sm.measured_gpus,
            g.architecture == "Blackwell",
        )
    raise ValueError(f"gpu must be one of {known}, got {gpu!r}")


def _catalog_entry(
    sm: ServingModel, model: str | ModelSpec, precision: str | None = None
) -> tuple[str, CatalogModel]:
    """The model's name and its catalog entry (rules fill in what a ModelSpec lacks), its
    weights in `precision` (None: the model's own)."""
    if precision is not None and (not isinstance(precision, str) or precision not in PRECISIONS):
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    name, entry = _named_entry(sm, model)
    if precision is None or precision == entry.spec.precision:
        return name, entry
    return name, replace(entry, spec=replace(entry.spec, precision=precision))


def _named_entry(sm: ServingModel, model: str | ModelSpec) -> tuple[str, CatalogModel]:
    """The model's name and its catalog entry, in the model's own precision."""
    if isinstance(model, str):
        if model not in sm.models:
            raise ValueError(
                f"model must be one of {sorted(sm.models)} or a ModelSpec, got {model!r}"
            )
        return model, sm.models[model]
    if not isinstance(model, ModelSpec):
        raise ValueError(f"model must be a catalog id or a ModelSpec, got {model!r}")
    check_model_spec(model)
    r = sm.rules
    arch = model.architecture
    total = float(model.total_params_b)
    active = float(model.active_params_b)
    kv = model.kv_bytes_per_token
    if kv is None:
        kv = r["kv_bytes_per_sqrt_b"][arch] * math.sqrt(active)
    share = 1.0
    if active < total:
        share = active / total
    layers = max(1, round(r["layers_per_cbrt_b"] * total ** (1.0 / 3.0)))
    moe_layers = layers if arch == "MoE" else 0
    spec = ModelSpec(total, active, model.precision, arch, float(kv))
    entry = CatalogModel(spec, "", share, layers, moe_layers, sm.default_output_tokens)
    return "ModelSpec", entry


def _positive(name: str, value: Any, *, integer: bool = False, minimum: float = 0.0) -> float:
    x = finite_real(value)
    ok = x is not None and (x >= minimum if minimum > 0 else x > 0)
    if ok and integer:
        ok = float(x).is_integer()  # type: ignore[arg-type]
    if not ok:
        kind = "a positive integer" if integer else "a positive number"
        if minimum > 0:
            kind = f"a number >= {minimum:g}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    assert x is not None
    return x


def _cap(g: ServingGpu, cap_w: Any) -> float:
    """`cap_w` checked against the settable power-limit range of `g` (a catalog GPU)."""
    if g.id not in GPU_CATALOG:
        raise ValueError(
            f"cap_w={cap_w!r}: power caps need a GPU of sim.models.hardware.GPU_CATALOG (its "
            f"settable power-limit range and cap-model floor); {g.id} has none, run it "
            f"with cap_w=None"
        )
    spec = GPU_CATALOG[g.id]
    cap = finite_real(cap_w)
    if cap is not None and not spec.min_cap_sourced and cap < spec.max_cap_w:
        raise ValueError(f"cap_w={cap_w!r}: {spec.cap_error(cap)}")
    if cap is None or not spec.min_cap_w <= cap <= spec.max_cap_w:
        raise ValueError(
            f"cap_w must be within {g.id}'s settable power-limit range "
            f"{spec.min_cap_w:g}-{spec.max_cap_w:g} W, got {cap_w!r}"
        )
    return cap


def _resolve(
    sm: ServingModel,
    model: str | ModelSpec,
    gpu: str,
    num_gpus: int,
    max_batch: int,
    avg_input_tokens: float | TokenLaw | None,
    avg_output_tokens: float | TokenLaw | None,
    precision: str | None = None,
) -> tuple[str, CatalogModel, ServingGpu, float, float, float, float]:
    """The arguments of `performance`, checked: (model name, catalog entry, GPU, GPUs,
    maximum batch, mean input tokens, mean output tokens). ValueError naming the precision
    and the GPU when the GPU cannot run the model's precision
    (`sim.models.llm_hardware.execution`)."""
    name, entry = _catalog_entry(sm, model, precision)
    g = _gpu(sm, gpu)
    execution(g.id, entry.spec.precision)
    n = _positive("num_gpus", num_gpus, integer=True)
    b = _positive("max_batch", max_batch, integer=True)
    l_in = sm.params.input_tokens if avg_input_tokens is None else _mean(avg_input_tokens)
    l_out = entry.avg_output_tokens if avg_output_tokens is None else _mean(avg_output_tokens)
    l_in = _positive("avg_input_tokens", l_in)
    l_out = _positive("avg_output_tokens", l_out, minimum=1.0)  # at least one token
    return name, entry, g, n, b, l_in, l_out


def _mean(tokens: float | TokenLaw) -> float:
    """The mean of a token count given as a number or a law."""
    return tokens.mean if isinstance(tokens, TokenLaw) else tokens


def _kappa(output_tokens: float | TokenLaw | None) -> np.ndarray | None:
    """The roofline's `kappa` input: the output law's in-flight context share (None without
    a law: the calibrated constant)."""
    return (
        np.asarray(output_tokens.in_flight_share) if isinstance(output_tokens, TokenLaw) else None
    )


def _hit_rate(prefix_hit_rate: Any) -> float:
    """`prefix_hit_rate` checked: a share of a prompt's tokens, 0 <= rate < 1 (a prompt's
    last token is always computed, to give the first output token)."""
    x = finite_real(prefix_hit_rate)
    if x is None or not 0.0 <= x < 1.0:
        raise ValueError(f"prefix_hit_rate must be a number in [0, 1), got {prefix_hit_rate!r}")
    return x


def _plan(name: str, entry: CatalogModel, n: float, layout: Layout) -> Plan:
    """The checked parallel layout of `entry` on `n` GPUs (`sim.models.llm_parallel.plan`)."""
    moe = entry.spec.architecture == "MoE"
    return plan(name, moe, entry.layers, entry.moe_layers, int(n), layout)


def _inputs(
    entry: CatalogModel,
    g: ServingGpu,
    n: float,
    max_batch: np.ndarray,
    l_in: float,
    l_out: float,
    kappa: np.ndarray | None = None,
    comm: Plan | None = None,
    cached_tokens: float = 0.0,
) -> Inputs:
    """The roofline's inputs for `entry` on `n` x `g`, at one or many maximum batch sizes
    (`kappa`: the output law's, None for the calibrated constant), with `comm`'s
    inter-node collectives (None: none) and `cached_tokens` of each prompt in the prefix
    cache."""
    spec = entry.spec
    assert spec.kv_bytes_per_token is not None
    return Inputs(
        total_params_b=np.asarray(spec.total_params_b),
        active_params_b=np.asarray(spec.active_params_b),
        bytes_per_param=np.asarray(PRECISION_BYTES[spec.precision]),
        kv_bytes_per_token=np.asarray(spec.kv_bytes_per_token),
        expert_share=np.asarray(entry.expert_share),
        layers=np.asarray(entry.layers),
        moe_layers=np.asarray(entry.moe_layers),
        hybrid=np.asarray(float(spec.architecture == "Mamba-Transformer Hybrid")),
        num_gpus=np.asarray(n),
        memory_gb=np.asarray(g.memory_gb),
        mem_bw_gbps=np.asarray(g.mem_bw_gbps),
        fp16_tflops=np.asarray(g.fp16_tflops * execution(g.id, spec.precision).compute_factor),
        tdp_w=np.asarray(g.tdp_w),
        idle_w=np.asarray(g.idle_w),
        blackwell=np.asarray(float(g.blackwell)),
        max_batch=max_batch,
        input_tokens=np.asarray(l_in),
        output_tokens=np.asarray(l_out),
        kappa=kappa,
        comm_fixed_s=0.0 if comm is None else comm.comm_fixed_s,
        comm_per_token_s=0.0 if comm is None else comm.comm_per_token_s,
        cached_tokens=cached_tokens,
    )


def extrapolation(
    sm: ServingModel, entry: CatalogModel, g: ServingGpu, layout: Plan
) -> tuple[str, ...]:
    """What the calibration data did not see of `entry` on `g` in `layout`
    (`ServingPoint.extrapolated_why`): the GPU, its architecture family, the precision and
    how it runs there, the parallel layout."""
    why = []
    if not g.measured:
        why.append(
            f"GPU {g.id} not measured (the fit saw {', '.join(sm.measured_gpus)}): from its "
            f"specifications"
        )
    arch = GPU_CATALOG[g.id].architecture
    families = sorted({str(GPU_CATALOG[m].architecture) for m in sm.measured_gpus})
    if arch not in ARCHITECTURES:
        why.append(
            f"GPU {g.id} ({arch or 'no architecture given'}) is outside the calibrated "
            f"families ({', '.join(families)}): modelled as an NVIDIA GPU running vLLM on CUDA"
        )
    why.extend(execution(g.id, entry.spec.precision).notes)
    why.extend(layout.notes)
    return tuple(why)


def performance(
    model: str | ModelSpec,
    gpu: str,
    num_gpus: int,
    max_batch: int,
    avg_input_tokens: float | TokenLaw | None = None,
    avg_output_tokens: float | TokenLaw | None = None,
    cap_w: float | None = None,
    precision: str | None = None,
    layout: Layout | None = None,
    prefix_hit_rate: float = 0.0,
) -> ServingPoint:
    """Throughput, latency and power of one replica saturated at `max_batch`.

    `model`: a catalog id (`sim.serving.MODELS`) or a `ModelSpec`. `gpu`: a GPU id of
    `sim.models.hardware.GPU_CATALOG`, `B200`, or `H100` (the H100 SXM). `num_gpus`: GPUs of
    the replica (tensor or expert parallel). `max_batch`: the maximum number of sequences in
    flight (vLLM's `max_num_seqs`). `avg_input_tokens` / `avg_output_tokens`: mean prompt
    and answer lengths, tokens (None: the lm-arena-chat figures, the model's own mean output
    length for a catalog model), or their laws (`sim.models.token_laws`): a law counts by
    its mean, and an output law also by its in-flight context share (kappa, in place of the
    calibrated constant; docs/serving.md "Lengths as distributions"). `cap_w`: a per-GPU
    power limit, W, within the GPU's settable range (None: the default, maximum limit; a
    catalog GPU only, not B200): power, throughput, ITL, prefill and energy per token follow
    the SM clock that meets it; a cap at the maximum gives the uncapped figures exactly.
    `precision`: the weights' format, a key of `sim.models.llm.PRECISIONS` (None: the
    model's own), refused naming both when the GPU cannot run it (docs/serving.md
    "Precisions and GPUs"). `layout`: tensor/expert-parallel degrees and the node (None:
    the model's default layout on the GPU's default node, `sim.models.llm_parallel.layout_for`),
    checked against the model's heads and experts; a replica larger than a node pays
    inter-node collectives (docs/serving.md "Parallelism"). `prefix_hit_rate`: the share of
    each prompt's tokens found in the prefix cache, 0 <= rate < 1 (docs/serving.md "Prefix
    caching"): prefill computes only the others, the KV cache holds the whole prompt.
    Raises ValueError naming a bad argument (`avg_output_tokens` must be >= 1: a request
    generates at least one token), when the weights do not fit in the replica's memory
    (`num_gpus` too small), and when they fit but one sequence's context does not fit the KV
    cache (naming the token counts).
    """
    sm = serving_model()
    name, entry, g, n, b, l_in, l_out = _resolve(
        sm, model, gpu, num_gpus, max_batch, avg_input_tokens, avg_output_tokens, precision
    )
    cap = None if cap_w is None else _cap(g, cap_w)
    hit = _hit_rate(prefix_hit_rate)
    comm = _plan(name, entry, n, layout_for(g.id) if layout is None else layout)
    why = extrapolation(sm, entry, g, comm)
    kappa = _kappa(avg_output_tokens)
    x = _inputs(entry, g, n, np.asarray(b), l_in, l_out, kappa, comm, hit * l_in)
    prefill_x = x  # the prefill alone runs at its own clock under a cap
    if cap is not None and cap < GPU_CATALOG[g.id].max_cap_w:
        prefill_x = replace(x, sm_clock=capped_clock(sm.params, x, cap, phase="prefill"))
        x = replace(x, sm_clock=capped_clock(sm.params, x, cap))
    o = evaluate(sm.params, x)
    capacity = float(o.kv_capacity_seqs)
    ctx = float(o.context_tokens)
    if capacity <= 0.0:
        raise ValueError(
            f"num_gpus={num_gpus!r}: the weights of {name} do not fit on {int(n)} x {g.id}"
        )
    if capacity < 1.0:
        raise ValueError(
            f"avg_input_tokens={l_in:g}, avg_output_tokens={l_out:g}: one sequence of "
            f"{ctx:.0f} tokens of context does not fit the KV cache of {name} on {int(n)} x "
            f"{g.id}, which holds {capacity * ctx:.0f} tokens"
        )
    throughput = float(o.throughput_tokens_per_s)
    power = float(o.power_w)
    prefill_s = float(o.prefill_s if prefill_x is x else evaluate(sm.params, prefill_x).prefill_s)
    return ServingPoint(
        model=name,
        gpu=g.id,
        num_gpus=int(n),
        max_batch=int(b),
        batch=float(o.batch),
        kv_capacity_seqs=float(o.kv_capacity_seqs),
        input_tokens=l_in,
        output_tokens=l_out,
        context_tokens=float(o.context_tokens),
        throughput_tokens_per_s=throughput,
        itl_median_ms=float(o.itl_median_ms),
        prefill_s=prefill_s,
        power_w=power,
        energy_per_token_j=power / throughput,
        extrapolated=bool(why),
        extrapolated_why=why,
        gpu_cap_w=cap,
        prefix_hit_rate=hit,
    )
