"""The serving model's per-layer times against Vidur's measured operator profiles
(../shared/data/vidur-profiling, microsoft/vidur @ 7d47513, MIT; skipped without them).

- Linear layers of Llama-2-70B (one GPU, FP16): the roofline's |t_mem, t_compute|_2 with the
  shipped, Hopper-fitted eta_mem and eta_compute, on each GPU's catalog bandwidth and dense
  FP16 peak, lies within 0.85-1.3 x the measured time on A100, A40 and H100, from 1 to 4,096
  tokens: the constants transfer to the two GPUs the ML.ENERGY data lack.
- Tensor-parallel collectives: the fitted per-layer collective time (tau_collective x
  log2 n) lies below Vidur's two NCCL all-reduces per layer at decode sizes on H100 DGX
  (between 0.1 and 1 x): vLLM's end-to-end collective cost is below a standalone NCCL call
  (docs/serving.md "Vidur profiles").
- Prefill share of peak: a Llama-2-70B layer's profiled operators (no attention kernel in the
  data), one GPU, 512-4,096 tokens, reach 0.60-0.75 of dense FP16 peak; the shipped
  eta_prefill 0.5 lies below (strict xfail, not refitted).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.models.hardware import GPU_CATALOG
from sim.models.llm_performance import serving_model
from sim.models.llm_roofline import ROOFLINE_POWER
from tests.conftest import SHARED_DATA

VIDUR = SHARED_DATA / "vidur-profiling" / "profiling"
LINEAR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
VIDUR_GPUS = {"a100": "A100-80GB", "a40": "A40", "h100": "H100-SXM"}


@pytest.fixture(scope="module")
def vidur():
    if not VIDUR.is_dir():
        pytest.skip(f"Vidur profiles not found at {VIDUR}")
    return VIDUR


def linear_layer_ms(gpu: str, tokens: int, params: float) -> float:
    """The roofline's time of one layer's linear operators (FP16, one GPU), ms."""
    p, g = serving_model().params, GPU_CATALOG[gpu]
    t_mem = 2.0 * params / (g.mem_bw_gbps * 1e9 * p.eta_mem)
    t_compute = 2.0 * params * tokens / (g.fp16_tflops * 1e12 * p.eta_compute)
    return 1e3 * (t_mem**ROOFLINE_POWER + t_compute**ROOFLINE_POWER) ** (1.0 / ROOFLINE_POWER)


@pytest.mark.parametrize("vidur_gpu", sorted(VIDUR_GPUS))
def test_linear_layers_within_band_of_vidur_profiles(vidur, vidur_gpu):
    d = pd.read_csv(vidur / "compute" / vidur_gpu / "meta-llama/Llama-2-70b-hf/mlp.csv.gz")
    d = d[d["num_tensor_parallel_workers"] == 1]
    h, ffn = int(d["n_embd"].iloc[0]), int(d["n_expanded_embd"].iloc[0])
    heads, kv_heads = int(d["n_head"].iloc[0]), int(d["n_kv_head"].iloc[0])
    head_dim = h // heads
    # QKV, output projection, gated MLP up (gate and up) and down
    params = h * (heads + 2 * kv_heads) * head_dim + h * h + 2 * h * ffn + ffn * h
    for tokens in (1, 16, 64, 256, 1024, 4096):
        row = d[d["num_tokens"] == tokens]
        measured = sum(float(row[f"time_stats.{op}.median"].iloc[0]) for op in LINEAR_OPS)
        ratio = linear_layer_ms(VIDUR_GPUS[vidur_gpu], tokens, params) / measured
        assert 0.85 <= ratio <= 1.3, (vidur_gpu, tokens, ratio)


@pytest.mark.parametrize("workers", [2, 4, 8])
def test_fitted_collective_below_standalone_nccl_all_reduce(vidur, workers):
    n = pd.read_csv(vidur / "network" / "h100_dgx" / "all_reduce.csv.gz")
    x = n[n["num_workers"] == workers].sort_values("size")
    model_us = serving_model().params.tau_collective_us * np.log2(workers)
    for batch in (8, 64, 256):
        elements = batch * 8192  # one hidden state per sequence, Llama-2-70B
        one_ms = np.interp(elements, x["size"], x["time_stats.all_reduce.median"])
        nccl_us = 2 * 1e3 * one_ms  # two all-reduces per layer (attention, MLP)
        assert 0.1 <= model_us / nccl_us <= 1.0, (workers, batch, model_us, nccl_us)


# The operators one layer's prefill runs that Vidur profiles (its block sum, one residual add);
# the attention prefill kernel is not in the shared data (README), so it is left out.
PREFILL_OPS = LINEAR_OPS + (
    "input_layernorm",
    "attn_rope",
    "post_attention_layernorm",
    "mlp_act",
    "add",
)


@pytest.mark.xfail(
    strict=True,
    reason="eta_prefill 0.5 lies below Vidur's measured prefill share of dense FP16 peak "
    "(Llama-2-70B layer without the attention kernel, one GPU, 512-4,096 tokens): "
    "0.66-0.73 A100-80GB, 0.62-0.75 A40, 0.60-0.71 H100-SXM; not refitted",
)
@pytest.mark.parametrize("vidur_gpu", sorted(VIDUR_GPUS))
def test_eta_prefill_within_vidur_prefill_share(vidur, vidur_gpu):
    d = pd.read_csv(vidur / "compute" / vidur_gpu / "meta-llama/Llama-2-70b-hf/mlp.csv.gz")
    d = d[d["num_tensor_parallel_workers"] == 1]
    h, ffn = int(d["n_embd"].iloc[0]), int(d["n_expanded_embd"].iloc[0])
    heads, kv_heads = int(d["n_head"].iloc[0]), int(d["n_kv_head"].iloc[0])
    params = h * (heads + 2 * kv_heads) * (h // heads) + h * h + 3 * h * ffn
    peak = GPU_CATALOG[VIDUR_GPUS[vidur_gpu]].fp16_tflops * 1e12
    shares = []
    for tokens in (512, 1024, 2048, 4096):
        row = d[d["num_tokens"] == tokens]
        ms = sum(float(row[f"time_stats.{op}.median"].iloc[0]) for op in PREFILL_OPS)
        shares.append(2.0 * params * tokens / (ms * 1e-3) / peak)
    assert min(shares) <= serving_model().params.eta_prefill <= max(shares), (vidur_gpu, shares)
