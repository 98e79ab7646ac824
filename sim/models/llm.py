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

__all__ = ["ARCHITECTURES", "PRECISION_BYTES", "ModelSpec", "check_model_spec"]

PRECISION_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0}
"""Bytes per weight of each precision name, as the leaderboard writes them."""
ARCHITECTURES = ("Dense Transformer", "MoE", "Mamba-Transformer Hybrid")
"""Architecture names, as the leaderboard writes them."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """An LLM as the serving model sees it.

    `total_params_b` and `active_params_b` are billions of parameters (all of them, and
    those used per token: smaller than the total for an MoE). `precision` is the weights'
    precision (`bfloat16`, `fp8`), `architecture` one of `ARCHITECTURES`.
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
