"""The LLM catalog of the serving model: what a model is, as the performance model sees it.

A model is described by its parameter counts, the bytes per weight of its precision, its
architecture and the bytes its KV cache grows by per token of context. The catalog (the
models the ML.ENERGY leaderboard v3 measured on lm-arena-chat) is read from
`sim/data/serving_model.toml`, written by `scripts/calibrate_serving.py`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARCHITECTURES",
    "MEASURED_PRECISIONS",
    "PRECISIONS",
    "PRECISION_BYTES",
    "ModelSpec",
    "Precision",
    "check_model_spec",
]


@dataclass(frozen=True, slots=True)
class Precision:
    """A weight format as the serving model sees it (docs/serving.md "Precisions and GPUs")."""

    bytes_per_weight: float
    """Bytes one weight takes in memory, its share of the scales included."""
    tensor_format: str | None
    """The tensor-core format the GEMMs run in when the GPU has it natively ("int8", "fp8",
    "fp4"); None: 16-bit GEMMs (a weight-only format dequantises its weights to FP16/BF16)."""
    source: str


PRECISIONS: dict[str, Precision] = {
    "bfloat16": Precision(2.0, None, "2 bytes (IEEE-style 16-bit)"),
    "float16": Precision(2.0, None, "2 bytes (IEEE 754 half)"),
    "fp8": Precision(
        1.0,
        "fp8",
        "W8A8 FP8 E4M3 with per-tensor or per-channel scales (negligible per weight); vLLM "
        "docs, features/quantization/fp8 (W8A8 on Ada, Hopper, Blackwell; weight-only W8A16 "
        "through FP8 Marlin on Turing and Ampere)",
    ),
    "int8": Precision(
        1.0,
        "int8",
        "W8A8 INT8 with per-channel weight and per-token activation scales; vLLM docs, "
        "features/quantization/int8 (INT8 W8A8: Turing to Hopper, not Volta)",
    ),
    "int4": Precision(
        0.5 + 2.0 / 128,
        None,
        "W4A16 GPTQ/AWQ: 4-bit weights plus one FP16 scale per group of 128 weights (the group "
        "size of AWQ, Lin et al., MLSys 2024, and GPTQ's usual setting), dequantised to FP16 "
        "in the GEMM (vLLM docs, features/quantization/int4: W4A16)",
    ),
    "fp4": Precision(
        0.5 + 1.0 / 16,
        "fp4",
        "NVFP4: 4-bit E2M1 values plus one FP8 E4M3 scale per block of 16 (NVIDIA, "
        "'Introducing NVFP4 for efficient and accurate low-precision inference', 2025); FP4 "
        "tensor cores on Blackwell, weight-only through FP4 Marlin elsewhere (vLLM docs, "
        "Supported Hardware: Marlin GPTQ/AWQ/FP8/FP4 on Turing to Hopper)",
    ),
    "mxfp4": Precision(
        0.5 + 1.0 / 32,
        "fp4",
        "MXFP4: 4-bit E2M1 values plus one 8-bit E8M0 scale per block of 32 (OCP Microscaling "
        "Formats (MX) Specification v1.0, 2023); gpt-oss ships its MoE weights so (its model "
        "card); FP4 tensor cores on Blackwell, weight-only through Marlin on Ampere to Hopper "
        "('Turing does not support Marlin MXFP4', vLLM docs, Supported Hardware)",
    ),
}
"""Every weight format the serving model takes, by the name a scenario gives."""
PRECISION_BYTES = {name: p.bytes_per_weight for name, p in PRECISIONS.items()}
"""Bytes per weight of each precision name (the leaderboard's names among them)."""
MEASURED_PRECISIONS = ("bfloat16", "fp8")
"""The precisions of the calibration data (ML.ENERGY leaderboard v3); the others are
extrapolated through the fitted constants."""
ARCHITECTURES = ("Dense Transformer", "MoE", "Mamba-Transformer Hybrid")
"""Architecture names, as the leaderboard writes them."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """An LLM as the serving model sees it.

    `total_params_b` and `active_params_b` are billions of parameters (all of them, and
    those used per token: smaller than the total for an MoE). `precision` is the weights'
    precision (a key of `PRECISIONS`: `bfloat16`, `fp8`, `int4`, `mxfp4`, ...),
    `architecture` one of `ARCHITECTURES`.
    `kv_bytes_per_token` is the KV cache of one token of context over all layers, bytes
    (None: the rule in docs/serving.md, from the active parameters and architecture).
    """

    total_params_b: float
    active_params_b: float
    precision: str
    architecture: str
    kv_bytes_per_token: float | None = None


def finite_real(value: Any) -> float | None:
    """`value` as a finite float if it is a real number (numpy's included, bool not), else
    None (also for values too large for a float)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (OverflowError, TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _positive(value: object) -> bool:
    """True for a positive, finite real number."""
    x = finite_real(value)
    return x is not None and x > 0


def check_model_spec(spec: ModelSpec) -> None:
    """Raise ValueError naming the first bad field of `spec`."""
    for name in ("total_params_b", "active_params_b"):
        value = getattr(spec, name)
        if not _positive(value):
            raise ValueError(f"ModelSpec.{name} must be a positive number, got {value!r}")
    if float(spec.active_params_b) > float(spec.total_params_b):
        raise ValueError(
            f"ModelSpec.active_params_b must not exceed total_params_b, got "
            f"{spec.active_params_b!r} > {spec.total_params_b!r}"
        )
    if not isinstance(spec.precision, str) or spec.precision not in PRECISION_BYTES:
        raise ValueError(
            f"ModelSpec.precision must be one of {sorted(PRECISION_BYTES)}, got {spec.precision!r}"
        )
    if not isinstance(spec.architecture, str) or spec.architecture not in ARCHITECTURES:
        raise ValueError(
            f"ModelSpec.architecture must be one of {list(ARCHITECTURES)}, "
            f"got {spec.architecture!r}"
        )
    if spec.architecture == "Dense Transformer" and float(spec.active_params_b) != float(
        spec.total_params_b
    ):
        raise ValueError(
            f"ModelSpec.active_params_b must equal total_params_b for a Dense Transformer "
            f"(every weight is used per token), got {spec.active_params_b!r} != "
            f"{spec.total_params_b!r}"
        )
    kv = spec.kv_bytes_per_token
    if kv is not None and not _positive(kv):
        raise ValueError(f"ModelSpec.kv_bytes_per_token must be a positive number, got {kv!r}")
