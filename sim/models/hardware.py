"""GPU catalog, workload profiles, and the power-cap performance model.

Two data files, both shipped in `sim/data`:

- `gpus.toml`: the catalog, hand-curated, each number with its source;
- `power_model.toml`: the fitted power-cap parameters, written by
  `scripts/calibrate_power.py` from the Zeus power sweeps (You et al., NSDI 2023).

docs/power-model.md explains the model; in short, for one GPU running a profile whose
uncapped draw at the maximum power limit `c_max` is `P0`:

    average power   P(c) = (c^-n + D^-n)^(-1/n),  D^-n = P0^-n - c_max^-n  (so P(c_max) = P0)
    active fraction x(c) = (P(c) - F) / (P0 - F),  F = min(s * (idle_w + 2.5 W x devices), P0/2)
    throughput      r(c) = max(R_MIN, 1 - a (1 - x)^b)        (relative to r(c_max) = 1)

`n`, `a`, `b` are the three parameters fitted per (GPU, workload); `s` (the floor scale)
is one constant shared by every GPU. Pairs without measurements use a documented generic
curve whose shape depends on the catalog only.

Speed across GPUs (roofline-style, after Habitat, ATC'21): a profile spends a fraction
`compute_frac` of its reference time in compute-bound kernels, which scale with dense
FP16 throughput, and the rest in memory-bound kernels, which scale with memory bandwidth.
The reference is an A100-80GB at its maximum power limit: a job's work is in reference
GPU-hours.

A measured workload at a batch size (`resnet50@512`, `sim.models.training`) follows Zeus's power
sweep of that batch size on the GPUs Zeus measured (time per epoch and power, linear between
the measured limits), and the workload's shape with the batch size's own draw elsewhere.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from sim.models import training

__all__ = [
    "ARCHITECTURES",
    "GPU_CATALOG",
    "GPU_SOURCES",
    "POWER_MODEL",
    "PROFILES",
    "REFERENCE_GPU",
    "CapCurve",
    "Estimate",
    "GpuFieldError",
    "GpuSpec",
    "Profile",
    "cap_response",
    "curve",
    "embodied_kg_rule",
    "estimate",
    "floor_w",
    "gpu_spec_from_dict",
    "load_power_model",
    "profile_choices",
    "reference_epoch_s",
    "speed",
]

REFERENCE_GPU = "A100-80GB"
HOURS_PER_YEAR = 8760.0

MEMORY_DEVICE_W = 2.5
"""Draw of one DRAM device (GDDR chip or HBM stack) kept at full memory clock, W."""
FLOOR_CAP_FRAC = 0.5
"""The floor never exceeds this fraction of the run's uncapped draw (a light run is not
floor-limited)."""
R_MIN = 0.05
"""Lowest throughput fraction the cap curve returns (far below any measured point)."""

# Embodied-carbon rule (gpus.toml header): board term per W of TDP, carbon per die area by
# process node (kgCO2e/cm2), carbon per GB of DRAM.
_BOARD_KG_PER_W = 0.262
_CPA_KG_PER_CM2 = {16: 1.0, 12: 1.2, 8: 1.4, 7: 1.6, 5: 1.8}
_DRAM_KG_PER_GB = 0.4


@dataclass(frozen=True, slots=True)
class GpuSpec:
    id: str
    name: str
    tdp_w: float
    min_cap_w: float
    max_cap_w: float
    idle_w: float
    memory_gb: float
    memory_type: str
    memory_devices: int
    mem_bw_gbps: float
    fp16_tflops: float
    fp32_tflops: float
    die_mm2: float
    process_nm: int
    release_year: int
    embodied_kg: float
    """Embodied carbon of one GPU, kgCO2e."""
    host_embodied_kg: float
    """Share of the host server's embodied carbon per GPU, kgCO2e."""
    service_life_years: float
    architecture: str | None = None
    """GPU architecture ("Volta", "Ampere", "Hopper", "Blackwell", ...; `ARCHITECTURES`
    lists the NVIDIA ones the serving model knows kernels for). None: not given (a scenario's
    own GPU model may leave it out); the serving model then refuses quantised formats."""
    int8_tops: float | None = None
    """Dense INT8 tensor-core TOPS (no sparsity); None: no INT8 tensor cores."""
    fp8_tflops: float | None = None
    """Dense FP8 tensor-core TFLOPS (no sparsity); None: no FP8 tensor cores."""
    fp4_tflops: float | None = None
    """Dense FP4 tensor-core TFLOPS (no sparsity); None: no FP4 tensor cores."""
    min_cap_sourced: bool = True
    """False when no source gives the lowest settable power limit (gpus.toml leaves
    `min_cap_w` out): `min_cap_w` is then `max_cap_w`, and a lower cap is refused."""

    def cap_error(self, watts: float) -> str | None:
        """Why a power limit of `watts` W cannot be set on this GPU (None: it can)."""
        if not self.min_cap_sourced and watts < self.max_cap_w:
            return (
                f"{self.id} has no sourced lowest power limit (min_cap_w is missing from its "
                f"catalog entry), so only its default limit {self.max_cap_w:g} W can be set; "
                f"got {watts:g} W"
            )
        if not self.min_cap_w <= watts <= self.max_cap_w:
            return (
                f"cap {watts} W is outside {self.id}'s settable range "
                f"{self.min_cap_w:g}-{self.max_cap_w:g} W"
            )
        return None

    @property
    def embodied_kg_per_gpu_h(self) -> float:
        """Embodied carbon (GPU + host share) amortised over the service life, kg per GPU-hour."""
        return (self.embodied_kg + self.host_embodied_kg) / (
            self.service_life_years * HOURS_PER_YEAR
        )

    @property
    def active_idle_w(self) -> float:
        """Idle draw plus the memory devices at full clock: the part a cap cannot remove."""
        return self.idle_w + MEMORY_DEVICE_W * self.memory_devices


@dataclass(frozen=True, slots=True)
class Profile:
    id: str
    power_frac: float
    """Uncapped average power draw as a fraction of the GPU's maximum power limit."""
    compute_frac: float
    """Fraction of reference time spent in compute-bound kernels (the rest memory-bound)."""
    description: str
    zeus_batch_size: int | None = None
    """For a measured workload: the Zeus default batch size the profile stands for."""


@dataclass(frozen=True, slots=True)
class CapCurve:
    """How one (GPU, workload) responds to a power cap: the three fitted parameters."""

    n: float
    """Sharpness of the average-power roll-off below the uncapped draw."""
    a: float
    b: float
    """Throughput shape: r = 1 - a (1 - x)^b of the active power fraction x."""
    source: str = "measured"
    """'measured' (fitted on this pair), 'workload' (the workload's shape across the
    measured GPUs), or 'generic'."""


@dataclass(frozen=True, slots=True)
class Estimate:
    throughput_fraction: float
    """Throughput relative to the same GPU at its maximum power limit, in (0, 1]."""
    power_w: float
    """Average power draw of one GPU, W."""


# --- catalog -------------------------------------------------------------------------------

_OPTIONAL_FIELDS = frozenset(
    {"embodied_kg", "architecture", "int8_tops", "fp8_tflops", "fp4_tflops", "min_cap_w"}
)
"""Catalog fields an entry may leave out (`min_cap_w`: when no source gives it)."""
_SPEC_FIELDS = frozenset(GpuSpec.__slots__) - {"id", "min_cap_sourced"} - _OPTIONAL_FIELDS
"""Catalog fields every entry gives."""
_INT_FIELDS = ("memory_devices", "release_year", "process_nm")
_TEXT_FIELDS = ("name", "memory_type", "architecture")
ARCHITECTURES = ("Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
"""The NVIDIA architectures of the catalog, oldest first (docs/serving.md "Precisions and
GPUs"). A scenario's own GPU model may name another (e.g. "CDNA3"): the serving model then
calls it outside its calibrated families."""


class GpuFieldError(ValueError):
    """A bad field of a GPU catalog entry: `field` and what was expected of it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _check_fields(fields: Mapping[str, Any]) -> None:
    """GpuFieldError naming the first field of a catalog entry of the wrong type or range."""
    for key, value in fields.items():
        if key in _TEXT_FIELDS:
            if not isinstance(value, str) or not value:
                raise GpuFieldError(key, f"expected a non-empty string, got {value!r}")
        elif key in _INT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise GpuFieldError(key, f"expected a positive integer, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise GpuFieldError(key, f"expected a positive number, got {value!r}")
    nm = fields.get("process_nm")
    if nm is not None and nm not in _CPA_KG_PER_CM2:
        raise GpuFieldError(
            "process_nm",
            f"expected one of {sorted(_CPA_KG_PER_CM2)} (the process nodes of the "
            f"embodied-carbon rule; a 4 nm class node is 5, as the H100's TSMC 4N), got {nm!r}",
        )
    if "min_cap_w" in fields and not fields["min_cap_w"] <= fields["max_cap_w"]:
        raise GpuFieldError(
            "min_cap_w",
            f"expected at most max_cap_w ({fields['max_cap_w']!r}), got {fields['min_cap_w']!r}",
        )


def embodied_kg_rule(tdp_w: float, die_mm2: float, process_nm: int, memory_gb: float) -> float:
    """Embodied carbon of one GPU by the catalog's rule (gpus.toml header), kgCO2e."""
    return (
        _BOARD_KG_PER_W * tdp_w
        + _CPA_KG_PER_CM2[process_nm] * die_mm2 / 100.0
        + _DRAM_KG_PER_GB * memory_gb
    )


def gpu_spec_from_dict(gid: str, fields: Mapping[str, Any]) -> GpuSpec:
    """A GpuSpec from catalog fields (as in gpus.toml); `embodied_kg` defaults to the rule,
    a `min_cap_w` left out (no source) to `max_cap_w` with `min_cap_sourced` False.
    GpuFieldError naming the first unknown, missing or bad field and what it expects."""
    if not isinstance(fields, Mapping):
        raise ValueError(f"expected a table of fields as in sim/data/gpus.toml, got {fields!r}")
    fields = dict(fields)
    fields.pop("sources", None)
    unknown = sorted(set(fields) - _SPEC_FIELDS - _OPTIONAL_FIELDS)
    if unknown:
        raise GpuFieldError(
            unknown[0],
            f"unknown field; expected fields: {sorted(_SPEC_FIELDS | _OPTIONAL_FIELDS)}",
        )
    missing = sorted(_SPEC_FIELDS - set(fields))
    if missing:
        raise GpuFieldError(missing[0], "missing (fields as in sim/data/gpus.toml)")
    _check_fields(fields)
    if "min_cap_w" not in fields:
        fields["min_cap_w"] = fields["max_cap_w"]
        fields["min_cap_sourced"] = False
    if "embodied_kg" not in fields:
        fields["embodied_kg"] = embodied_kg_rule(
            fields["tdp_w"], fields["die_mm2"], fields["process_nm"], fields["memory_gb"]
        )
    return GpuSpec(id=gid, **fields)


def register_gpu(spec: GpuSpec) -> None:
    """Add a GPU model to the catalog (a scenario's `gpu_models`). Registering the same spec
    again is a no-op; a different spec under a catalog id is a ValueError."""
    known = GPU_CATALOG.get(spec.id)
    if known is not None and known != spec:
        kind = "a built-in GPU" if spec.id in GPU_SOURCES else "already defined differently"
        raise ValueError(f"GPU id {spec.id!r} is {kind}; choose another id")
    GPU_CATALOG[spec.id] = spec


def _read(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("sim").joinpath(f"data/{name}").read_text("utf-8"))


def _load_catalog() -> tuple[dict[str, GpuSpec], dict[str, Mapping[str, str]]]:
    raw = _read("gpus.toml")
    specs = {gid: gpu_spec_from_dict(gid, f) for gid, f in raw.items()}
    sources: dict[str, Mapping[str, str]] = {
        gid: MappingProxyType(dict(f.get("sources", {}))) for gid, f in raw.items()
    }
    return specs, sources


GPU_CATALOG: dict[str, GpuSpec]
GPU_SOURCES: dict[str, Mapping[str, str]]
"""Per GPU: field (or field group) -> source key / note, as in gpus.toml."""
GPU_CATALOG, GPU_SOURCES = _load_catalog()


# --- power model parameters ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PowerModel:
    floor_scale: float
    generic: CapCurve
    workloads: Mapping[str, CapCurve]
    workload_power_frac: Mapping[str, float]
    workload_batch_size: Mapping[str, int]
    pairs: Mapping[tuple[str, str], CapCurve]
    pair_uncapped_w: Mapping[tuple[str, str], float]
    meta: Mapping[str, Any] = field(default_factory=dict)


def load_power_model(path: Path | None = None) -> _PowerModel:
    """The power-cap parameters from `path` (default: the shipped power_model.toml)."""
    raw = _read("power_model.toml") if path is None else tomllib.loads(path.read_text("utf-8"))
    g = raw["generic"]
    workloads, frac, batch = {}, {}, {}
    for wid, w in raw["workloads"].items():
        workloads[wid] = CapCurve(w["n"], w["a"], w["b"], "workload")
        frac[wid] = w["power_frac"]
        batch[wid] = w["batch_size"]
    pairs, uncapped = {}, {}
    for gid, per_gpu in raw["pairs"].items():
        for wid, p in per_gpu.items():
            pairs[gid, wid] = CapCurve(p["n"], p["a"], p["b"], "measured")
            uncapped[gid, wid] = p["uncapped_w"]
    return _PowerModel(
        floor_scale=raw["floor_scale"],
        generic=CapCurve(g["n"], g["a"], g["b"], "generic"),
        workloads=MappingProxyType(workloads),
        workload_power_frac=MappingProxyType(frac),
        workload_batch_size=MappingProxyType(batch),
        pairs=MappingProxyType(pairs),
        pair_uncapped_w=MappingProxyType(uncapped),
        meta=MappingProxyType({k: raw[k] for k in ("source", "generated_by") if k in raw}),
    )


POWER_MODEL = load_power_model()


# --- profiles --------------------------------------------------------------------------------

_ZEUS_PROFILES = (
    ("shufflenetv2", 0.3, "ShuffleNet-v2 on CIFAR-100 (Zeus): small convolutions, memory-bound"),
    ("resnet50", 0.7, "ResNet-50 on ImageNet (Zeus): convolutional, mostly compute-bound"),
    ("deepspeech2", 0.5, "DeepSpeech2 on LibriSpeech (Zeus): convolution + recurrent layers"),
    ("ncf", 0.2, "NCF on MovieLens-1M (Zeus): embedding lookups, host/memory-bound"),
    ("bert-squad", 0.8, "BERT-base fine-tuned on SQuAD (Zeus): transformer, compute-bound"),
    ("bert-sentiment140", 0.8, "BERT-base fine-tuned on Sentiment140 (Zeus): transformer"),
)

PROFILES: dict[str, Profile] = {
    p.id: p
    for p in (
        *(
            Profile(
                wid,
                POWER_MODEL.workload_power_frac[wid],
                cf,
                desc,
                POWER_MODEL.workload_batch_size[wid],
            )
            for wid, cf, desc in _ZEUS_PROFILES
        ),
        Profile("compute-bound", 0.95, 0.9, "large dense models, tensor-core bound"),
        Profile("memory-bound", 0.70, 0.2, "embedding-heavy and small-batch training"),
        Profile("mixed", 0.85, 0.6, "typical CNN/transformer training"),
        Profile("inference", 0.60, 0.4, "batched inference serving"),
    )
}


def _batch_profiles() -> dict[str, Profile]:
    """A profile per measured workload and batch size with a power sweep (`sim.models.training`):
    `power_frac` the median over the measured GPUs of the draw at their maximum limit."""
    out = {}
    for wid in training.TRAINING_WORKLOADS:
        base = PROFILES[wid]
        for b in training.measured_batch_sizes(wid):
            fracs = [
                s.power_w[-1] / s.cap_w[-1]
                for (_, w, batch), s in training.POWER_SWEEPS.items()
                if (w, batch) == (wid, b)
            ]
            pid = training.batch_profile(wid, b)
            out[pid] = Profile(
                pid,
                float(np.median(fracs)),
                base.compute_frac,
                f"{base.description}, batch size {b}",
                b,
            )
    return out


PROFILES.update(_batch_profiles())


def profile_choices() -> str:
    """The profile ids in words, for error messages: the batch-size profiles as a pattern."""
    plain = [p for p in PROFILES if training.split_batch_profile(p) is None]
    return (
        f"{', '.join(plain)}, or a measured workload at a batch size Zeus measured, "
        f"WORKLOAD{training.BATCH_SEPARATOR}BATCH (e.g. resnet50@128; docs/power-model.md)"
    )


# --- the model -------------------------------------------------------------------------------


def floor_w(gpu: str | GpuSpec) -> float:
    """The GPU's power floor F_g (before the P0/2 bound): floor_scale x active idle, W."""
    spec = gpu if isinstance(gpu, GpuSpec) else GPU_CATALOG[gpu]
    return POWER_MODEL.floor_scale * spec.active_idle_w


def cap_response(cap_w, uncapped_w, max_cap_w, floor_w, n, a, b):
    """(throughput fraction, average power W) under `cap_w`; vectorised over numpy arrays.

    `uncapped_w` is the run's average draw at `max_cap_w`; `floor_w` is the GPU's floor
    F_g; `n`, `a`, `b` the curve. Throughput is relative to the same run at `max_cap_w`.
    Caps at or above `max_cap_w` return exactly (1, uncapped_w).
    """
    cap, p0, cmax = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (cap_w, uncapped_w, max_cap_w))
    )
    p0 = np.minimum(p0, cmax)
    c = np.minimum(cap, cmax)
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        d = np.maximum(p0**-n - cmax**-n, 0.0)
        power = (c**-n + d) ** (-1.0 / n)
        floor = np.minimum(floor_w, FLOOR_CAP_FRAC * p0)
        x = np.clip((power - floor) / (p0 - floor), 0.0, 1.0)
        r = np.maximum(R_MIN, 1.0 - np.asarray(a) * (1.0 - x) ** np.asarray(b))
    full = cap >= cmax
    r = np.where(full, 1.0, np.minimum(r, 1.0))
    power = np.where(full, p0, np.minimum(power, c))
    if r.ndim == 0:
        return float(r), float(power)
    return r, power


def curve(gpu: str, profile: str) -> tuple[CapCurve, float]:
    """The cap curve of (gpu, profile) and the uncapped draw P0 it applies to, W.

    Measured pairs use their own fit and the measured draw at the profile's batch size; a
    measured workload on another GPU uses the workload's shape across the measured GPUs;
    the generic profiles use the generic shape. Without a measured draw, P0 is the
    profile's `power_frac` x the GPU's maximum power limit.
    """
    spec, prof = GPU_CATALOG[gpu], PROFILES[profile]
    pm = POWER_MODEL
    if (gpu, profile) in pm.pairs:
        return pm.pairs[gpu, profile], pm.pair_uncapped_w[gpu, profile]
    batch = training.split_batch_profile(profile)
    shape = pm.workloads.get(profile if batch is None else batch[0], pm.generic)
    return shape, prof.power_frac * spec.max_cap_w


def _sweep(gpu: str, profile: str) -> training.PowerSweep | None:
    """Zeus's power sweep of a batch-size profile on `gpu`, if measured."""
    batch = training.split_batch_profile(profile)
    return None if batch is None else training.POWER_SWEEPS.get((gpu, *batch))


# Measured GPUs in the order their sweep anchors a batch size's reference epoch time: the
# newest first (the roofline's step to the A100 reference is shortest from it).
_ANCHOR_GPUS = ("A40", "V100", "RTX6000", "P100")


@functools.lru_cache(maxsize=1024)
def reference_epoch_s(workload: str, batch_size: int) -> float:
    """Time per epoch of `workload` at `batch_size` on the reference GPU at its maximum
    limit, s: the measured time on the first of A40, V100, RTX 6000, P100 that Zeus measured
    at that batch size, times that GPU's roofline speed (Zeus did not measure an A100).
    ValueError if no GPU was measured at the batch size."""
    for gpu in _ANCHOR_GPUS:
        sweep = training.POWER_SWEEPS.get((gpu, workload, batch_size))
        if sweep is not None:
            return sweep.epoch_s[-1] * _roofline_speed(gpu, workload)
    sizes = ", ".join(map(str, training.measured_batch_sizes(workload)))
    raise ValueError(
        f"{workload}: batch size {batch_size} has no power sweep on any GPU; measured: {sizes}"
    )


def speed(gpu: str, profile: str) -> float:
    """Speed of one `gpu` at its maximum power limit relative to the reference GPU: for a
    batch-size profile on a GPU Zeus measured, the measured time per epoch against the
    reference's (`reference_epoch_s`); else the roofline."""
    sweep = _sweep(gpu, profile)
    if sweep is not None:
        workload, batch_size = training.split_batch_profile(profile)  # type: ignore[misc]
        return reference_epoch_s(workload, batch_size) / sweep.epoch_s[-1]
    return _roofline_speed(gpu, profile)


def _roofline_speed(gpu: str, profile: str) -> float:
    """The roofline speed of one `gpu` at its maximum limit relative to the reference."""
    g, ref, p = GPU_CATALOG[gpu], GPU_CATALOG[REFERENCE_GPU], PROFILES[profile]
    compute_ratio = g.fp16_tflops / ref.fp16_tflops
    memory_ratio = g.mem_bw_gbps / ref.mem_bw_gbps
    return 1.0 / (p.compute_frac / compute_ratio + (1.0 - p.compute_frac) / memory_ratio)


@functools.lru_cache(maxsize=65536)
def estimate(gpu: str, profile: str, cap_w: float | None = None) -> Estimate:
    """Throughput fraction and average power of one `gpu` running `profile` under `cap_w`.

    `cap_w=None` means the maximum power limit. The caller checks the cap's range; caps
    above the maximum act as the maximum. Cached: a catalog entry never changes once
    registered (`register_gpu`), and a policy may ask for the same point many times
    (`state.operating_point`, about 0.1 ms uncached).
    """
    spec = GPU_CATALOG[gpu]
    if cap_w is not None and not cap_w >= spec.max_cap_w and not 0 < cap_w < math.inf:
        raise ValueError(f"cap_w must be a positive number of watts, got {cap_w}")
    sweep = _sweep(gpu, profile)
    if sweep is not None:
        epoch_s, power_w = sweep.at(spec.max_cap_w if cap_w is None else cap_w)
        return Estimate(sweep.epoch_s[-1] / epoch_s, power_w)
    cc, p0 = curve(gpu, profile)
    if cap_w is None or cap_w >= spec.max_cap_w:
        return Estimate(1.0, p0)
    r, power = cap_response(cap_w, p0, spec.max_cap_w, floor_w(spec), cc.n, cc.a, cc.b)
    return Estimate(r, power)
