"""Which weight precisions a GPU runs, and how (docs/serving.md "Precisions and GPUs").

A precision (`sim.models.llm.PRECISIONS`) runs on a GPU either natively, its GEMMs on the
GPU's tensor cores of that format (`int8_tops`, `fp8_tflops`, `fp4_tflops` in
`sim/data/gpus.toml`), or weight-only: its weights are stored small and dequantised to
FP16/BF16 in the GEMM (vLLM's Marlin and GPTQ kernels), so only the bytes read shrink. Where
neither exists the precision cannot run and `execution` raises a one-line ValueError naming
both the precision and the GPU.

Which architecture has which weight-only kernel is vLLM's "Supported Hardware" table
(docs.vllm.ai, features/quantization): GPTQ (W4A16) on Volta and later; Marlin
(GPTQ/AWQ/FP8/FP4 weight-only) on Turing to Hopper, except MXFP4 on Turing; FP8 models "run
on compute capability >= 7.5 (Turing) as weight-only W8A16, utilizing FP8 Marlin" (vLLM
docs, features/quantization/fp8). BF16 needs compute capability 8.0 (Ampere): an older GPU
runs a bfloat16 model's weights as float16 (same bytes and rate), which `execution` notes.

The roofline's compute term counts dense FP16 FLOP/s, and the calibration fitted FP8 models
at that rate (decode is memory-bound: the data cannot tell the FP8 rate from it). So every
8- and 16-bit format keeps the FP16 rate (`compute_factor` 1), and native FP4 runs at its
tensor rate over the 8-bit one (2 on the B200: 9,000 against 4,500 dense TFLOPS).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.models.hardware import ARCHITECTURES, GPU_CATALOG, GpuSpec
from sim.models.llm import MEASURED_PRECISIONS, PRECISIONS

__all__ = ["WEIGHT_ONLY_FROM", "Execution", "execution"]

WEIGHT_ONLY_FROM = {"fp8": "Turing", "int4": "Volta", "fp4": "Turing", "mxfp4": "Ampere"}
"""The oldest architecture with a weight-only kernel of each precision (vLLM's Supported
Hardware table: GPTQ from Volta, Marlin FP8/FP4 from Turing, Marlin MXFP4 from Ampere).
INT8 has no weight-only path in that table: W8A8 only."""
_BF16_FROM = "Ampere"
"""BF16 tensor cores from Ampere (compute capability 8.0) on."""
_TENSOR_NEED = {
    "int8": "INT8 tensor cores (W8A8; vLLM: Turing to Hopper, not Volta)",
    "fp8": "FP8 tensor cores (Ada, Hopper, Blackwell) or FP8 Marlin weight-only (Turing on)",
    "int4": "a W4A16 kernel (vLLM's GPTQ: Volta on)",
    "fp4": "FP4 tensor cores (Blackwell) or FP4 Marlin weight-only (Turing on)",
    "mxfp4": "FP4 tensor cores (Blackwell) or MXFP4 Marlin weight-only (Ampere on)",
}


@dataclass(frozen=True, slots=True)
class Execution:
    """How a precision runs on a GPU."""

    precision: str
    native: bool
    """True: the GEMMs run in the precision's tensor format; False: 16-bit GEMMs."""
    compute_factor: float
    """Multiplies the GPU's dense FP16 FLOP/s in the roofline's compute terms."""
    notes: tuple[str, ...]
    """What about this pairing the calibration data did not see (empty: nothing)."""


def _rate(spec: GpuSpec, tensor_format: str) -> float | None:
    """The GPU's dense tensor rate of `tensor_format`, TFLOP/s (None: no such tensor cores)."""
    return {"int8": spec.int8_tops, "fp8": spec.fp8_tflops, "fp4": spec.fp4_tflops}[tensor_format]


def _at_least(arch: str | None, oldest: str) -> bool:
    """`arch` is a known NVIDIA architecture no older than `oldest`."""
    return arch in ARCHITECTURES and ARCHITECTURES.index(arch) >= ARCHITECTURES.index(oldest)


def execution(gpu: str, precision: str) -> Execution:
    """How `precision` runs on one `gpu` (a GPU_CATALOG id). ValueError naming both when the
    GPU has neither tensor cores of the format nor a weight-only kernel for it, or naming
    the precision when it is unknown."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    spec = GPU_CATALOG[gpu]
    arch = spec.architecture
    fmt = PRECISIONS[precision].tensor_format
    notes = [] if precision in MEASURED_PRECISIONS else [f"precision {precision} not measured"]
    if fmt is None and PRECISIONS[precision].bytes_per_weight == 2.0:
        if precision == "bfloat16" and arch in ARCHITECTURES and not _at_least(arch, _BF16_FROM):
            notes.append(
                f"bfloat16 on {gpu} ({arch}, no BF16 tensor cores) runs as float16 (vLLM "
                f'refuses bfloat16 below compute capability 8.0: set precision = "float16")'
            )
        return Execution(precision, True, 1.0, tuple(notes))
    rate = None if fmt is None else _rate(spec, fmt)
    if rate is not None and fmt is not None:
        eight_bit = spec.fp8_tflops or spec.int8_tops or rate
        return Execution(precision, True, rate / eight_bit if fmt == "fp4" else 1.0, tuple(notes))
    oldest = WEIGHT_ONLY_FROM.get(precision)
    if oldest is not None and _at_least(arch, oldest):
        size = PRECISIONS[precision].bytes_per_weight
        notes.append(
            f"{precision} on {gpu} ({arch}) runs weight-only: {size:g} bytes per weight "
            f"read, dequantised to 16-bit GEMMs"
        )
        return Execution(precision, False, 1.0, tuple(notes))
    raise ValueError(
        f"precision {precision!r} cannot run on {gpu} ({arch or 'no architecture given'}): it "
        f"needs {_TENSOR_NEED[precision]}"
    )
