"""The paged KV cache of one LLM replica: its capacity in bytes and in blocks, and the
replication of the KV heads under tensor parallelism (docs/serving.md "Iteration level").

vLLM gives the KV cache what is left of `gpu_memory_utilization` x the device memory once
the weights and the activations of a profiling pass are in place, and cuts it into blocks
of `block_size` tokens (paged attention); a sequence holds ceil(tokens / block_size)
blocks. Here, per replica of `n` GPUs:

    budget_bytes = n (memory_bytes x GPU_MEMORY_UTILIZATION - reserve) - weights_bytes
    blocks       = floor(budget_bytes / (block_size x kv_bytes_per_token x replication))

- `memory_bytes`: the catalog's `memory_gb` is the vendor's nominal size. An HBM GPU's
  nominal size is its capacity in GiB (NVML reports 81,920 MiB on an A100 80GB, 81,559 MiB
  on an H100 80GB, 143,771 MiB on an H200 141GB), a GDDR GPU's in 1e9 bytes (46,068 MiB =
  48.3e9 bytes on an L40S 48GB, 23,034 MiB on an L4 24GB); table in "Why does an NVIDIA
  H100 80GB card offer 85.52 GB?", https://thundergolfer.com/blog/nvidia-gpu-memory-capacity
  (Modal, NVML readings). So HBM sizes are read as GiB, others as GB.
- `reserve`: the roofline's `reserve_gb` per GPU (activations and CUDA graphs; fitted,
  at its bound of 0 in the shipped calibration), so that the iteration level's budget is
  the roofline's own, in the corrected unit.
- `replication`: with tensor parallelism `tp` above the model's KV heads each rank must
  hold whole heads, so vLLM replicates them, `tp / kv_heads` copies (a GQA model with 8 KV
  heads on 16 GPUs keeps 2 copies); a multi-head latent attention model (DeepSeek) keeps
  its latent on every rank (`tp` copies). `kv_bytes_per_token` of the catalog is one copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.models.hardware import GPU_CATALOG
from sim.models.scaling import interconnect

__all__ = [
    "BLOCK_SIZE",
    "HOST_LINK",
    "KV_HEADS",
    "KvCache",
    "kv_blocks",
    "kv_cache",
    "kv_replication",
    "memory_bytes",
]

BLOCK_SIZE = 16
"""Tokens per KV block: vLLM's default on CUDA (`CacheConfig.block_size`, set to 16 by the
platform when left unset; vllm/config/cache.py and the platform's
`check_and_update_config`, vllm-project/vllm; older releases: `block_size: int = 16`)."""

KV_HEADS: dict[str, int | None] = {
    "Llama-3.1-8B-Instruct": 8,
    "Llama-3.1-70B-Instruct": 8,
    "Llama-3.3-70B-Instruct": 8,
    "Llama-3.1-405B-Instruct": 8,
    "Llama-3.1-405B-Instruct-FP8": 8,
    "Llama-4-Scout-17B-16E-Instruct": 8,
    "Llama-4-Maverick-17B-128E-Instruct-FP8": 8,
    "Qwen3-8B": 8,
    "Qwen3-14B": 8,
    "Qwen3-32B": 8,
    "Qwen3-30B-A3B-Instruct-2507": 4,
    "Qwen3-235B-A22B-Instruct-2507": 4,
    "Qwen3-235B-A22B-Instruct-2507-FP8": 4,
    "gemma-3-12b-it": 8,
    "gemma-3-27b-it": 16,
    "NVIDIA-Nemotron-Nano-9B-v2": 8,
    "NVIDIA-Nemotron-Nano-12B-v2": 8,
    "DeepSeek-V3.1": None,
}
"""KV heads of each catalog model (None: multi-head latent attention, one latent per
token). The same figures the calibration derives `kv_bytes_per_token` from
(`scripts/calibrate_serving.py` `ARCH`, each checked against the configuration in its
`ARCH_SOURCES`: meta-llama/llama-models sku_list.py, MaxText model configs, google-deepmind
gemma, NVIDIA Megatron-Bridge, deepseek-ai/DeepSeek-V3)."""


HOST_LINK = {
    "P100": "PCIe3",
    "V100": "PCIe3",
    "T4": "PCIe3",
    "RTX6000": "PCIe3",
    "A40": "PCIe4",
    "A100-40GB": "PCIe4",
    "A100-80GB": "PCIe4",
    "L4": "PCIe4",
    "L40S": "PCIe4",
    "H100-SXM": "PCIe5",
    "H100-PCIe": "PCIe5",
    "H200": "PCIe5",
    "B200": "PCIe5",
}
"""Each GPU's x16 link to its host (the PCIe links of `sim/data/interconnects.toml`), over
which a swapped KV cache moves: the NVIDIA datasheets its sources list ([DS-CARD] T4,
RTX 6000: Gen3; A40, L4, L40S: Gen4; [DS-A100] Gen4; [DS-H100] Gen5), P100 and V100 Gen3
(their datasheets, PCIe Gen3 x16); H200 and B200 taken as Gen5 like the H100 (an
assumption: their host link generation is not among those sources)."""


def host_bytes_per_s(gpu: str) -> float:
    """Bytes per second one GPU moves to or from its host (its `HOST_LINK` at the
    catalog's achieved share); ValueError naming a GPU without a known host link."""
    if gpu not in HOST_LINK:
        raise ValueError(f"no host link known for GPU {gpu!r}; known: {sorted(HOST_LINK)}")
    return interconnect(HOST_LINK[gpu]).achieved_bytes_per_s


def memory_bytes(gpu: str, memory_gb: float) -> float:
    """One GPU's memory in bytes from its nominal `memory_gb` (module docstring): GiB on an
    HBM GPU (and on a GPU outside the catalog, the B200 of the calibration: HBM3e), GB on
    the others."""
    spec = GPU_CATALOG.get(gpu)
    hbm = spec is None or spec.memory_type.upper().startswith("HBM")
    return memory_gb * (2**30 if hbm else 1e9)


def kv_replication(model: str, num_gpus: int) -> int:
    """Copies of each token's KV the replica's `num_gpus` tensor-parallel ranks hold
    (module docstring); 1 for a model whose heads are not known."""
    if model not in KV_HEADS:
        return 1
    heads = KV_HEADS[model]
    if heads is None:
        return num_gpus
    return max(1, num_gpus // heads)


@dataclass(frozen=True, slots=True)
class KvCache:
    """A replica's paged KV cache."""

    budget_bytes: float
    """Memory for the KV cache over the replica's GPUs, bytes (<= 0: the weights do not fit)."""
    bytes_per_token: float
    """KV bytes one token of context takes over the replica, replication included."""
    block_size: int
    """Tokens per block."""
    blocks: int
    """Blocks the cache holds."""

    @property
    def tokens(self) -> int:
        """Tokens of context the cache holds."""
        return self.blocks * self.block_size


def kv_cache(
    model: str,
    gpu: str,
    num_gpus: int,
    memory_gb: float,
    weights_bytes: float,
    kv_bytes_per_token: float,
    reserve_gb: float,
    gpu_memory_utilization: float,
    block_size: int = BLOCK_SIZE,
) -> KvCache:
    """The KV cache of `model` on `num_gpus` x `gpu` of `memory_gb` nominal memory each, with
    `weights_bytes` of weights over the replica, `kv_bytes_per_token` for one copy of a
    token's KV and `reserve_gb` per GPU held outside the cache (module docstring)."""
    per_gpu = memory_bytes(gpu, memory_gb) * gpu_memory_utilization - reserve_gb * 1e9
    budget = num_gpus * per_gpu - weights_bytes
    per_token = kv_bytes_per_token * kv_replication(model, num_gpus)
    return KvCache(budget, per_token, block_size, kv_blocks(budget, per_token, block_size))


def kv_blocks(budget_bytes: float, bytes_per_token: float, block_size: int) -> int:
    """Blocks of `block_size` tokens of `bytes_per_token` each in `budget_bytes` (0 if the
    budget is not positive)."""
    return max(0, math.floor(budget_bytes / (block_size * bytes_per_token)))
