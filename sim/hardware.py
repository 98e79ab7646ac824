"""GPU catalog, workload profiles, and the power-cap performance model.

First version: datasheet specs and a physically motivated generic cap curve (below);
the hardware issue calibrates per-(GPU, workload) parameters on the Zeus power sweeps.

Speed model (roofline-style, after Habitat, ATC'21): a profile spends a fraction
`compute_frac` of its reference time in compute-bound kernels, which scale with dense
FP16 throughput, and the rest in memory-bound kernels, which scale with memory bandwidth.
The reference is an A100-80GB at its maximum power limit: a job's work is in reference
GPU-hours.

Cap model: uncapped, a GPU draws `power_frac x max_cap_w`. Under a lower cap the clock
drops; dynamic power scales as f^3 (voltage tracks frequency), so
f/f0 = ((cap - idle) / (P0 - idle))^(1/3). Compute-bound time stretches by f0/f,
memory-bound time does not.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

REFERENCE_GPU = "A100-80GB"
HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True, slots=True)
class GpuSpec:
    id: str
    name: str
    tdp_w: float
    min_cap_w: float
    max_cap_w: float
    idle_w: float
    memory_gb: float
    mem_bw_gbps: float
    fp16_tflops: float
    fp32_tflops: float
    release_year: int
    embodied_kg: float
    """Embodied carbon of one GPU, kgCO2e."""
    host_embodied_kg: float
    """Share of the host server's embodied carbon per GPU, kgCO2e."""
    service_life_years: float

    @property
    def embodied_kg_per_gpu_h(self) -> float:
        """Embodied carbon (GPU + host share) amortised over the service life, kg per GPU-hour."""
        return (self.embodied_kg + self.host_embodied_kg) / (
            self.service_life_years * HOURS_PER_YEAR
        )


@dataclass(frozen=True, slots=True)
class Profile:
    id: str
    power_frac: float
    """Uncapped average power draw as a fraction of the GPU's maximum power limit."""
    compute_frac: float
    """Fraction of reference time spent in compute-bound kernels (the rest memory-bound)."""
    description: str


@dataclass(frozen=True, slots=True)
class Estimate:
    throughput_fraction: float
    """Throughput relative to the same GPU at its maximum power limit, in (0, 1]."""
    power_w: float
    """Average power draw of one GPU, W."""


def _load_catalog() -> dict[str, GpuSpec]:
    text = resources.files("sim").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    return {gid: GpuSpec(id=gid, **fields) for gid, fields in tomllib.loads(text).items()}


GPU_CATALOG: dict[str, GpuSpec] = _load_catalog()

PROFILES: dict[str, Profile] = {
    p.id: p
    for p in (
        Profile("compute-bound", 0.95, 0.9, "large dense models, tensor-core bound"),
        Profile("memory-bound", 0.70, 0.2, "embedding-heavy and small-batch training"),
        Profile("mixed", 0.85, 0.6, "typical CNN/transformer training"),
        Profile("inference", 0.60, 0.4, "batched inference serving"),
    )
}


def speed(gpu: str, profile: str) -> float:
    """Speed of one `gpu` at its maximum power limit relative to the reference GPU."""
    g, ref, p = GPU_CATALOG[gpu], GPU_CATALOG[REFERENCE_GPU], PROFILES[profile]
    compute_ratio = g.fp16_tflops / ref.fp16_tflops
    memory_ratio = g.mem_bw_gbps / ref.mem_bw_gbps
    return 1.0 / (p.compute_frac / compute_ratio + (1.0 - p.compute_frac) / memory_ratio)


def estimate(gpu: str, profile: str, cap_w: float | None = None) -> Estimate:
    """Throughput fraction and average power of one `gpu` running `profile` under `cap_w`.

    `cap_w=None` means the maximum power limit. The caller checks the cap's range.
    """
    g, p = GPU_CATALOG[gpu], PROFILES[profile]
    uncapped_w = p.power_frac * g.max_cap_w
    cap = g.max_cap_w if cap_w is None else cap_w
    if cap >= uncapped_w:
        return Estimate(1.0, uncapped_w)
    freq_ratio = ((cap - g.idle_w) / (uncapped_w - g.idle_w)) ** (1.0 / 3.0)
    time_stretch = p.compute_frac / freq_ratio + (1.0 - p.compute_frac)
    return Estimate(1.0 / time_stretch, cap)
