"""The time and power of one engine iteration of an LLM replica, as the iteration level
schedules them (docs/serving.md "Iteration level"): `B` running decodes reading `C` tokens
of context between them, plus `P` prompt tokens prefilled in the same iteration (chunked
prefill mixes both, Sarathi-Serve / vLLM V1).

Nothing is refitted: it is the calibrated roofline (`sim.models.llm_roofline`, its fitted
`Params`) applied to the iteration's actual work instead of a saturated batch at mean
lengths:

    t_mem  = (f8 bpp weights(B + P) + (C + P) kv) / (n BW eta_mem)
    t_comp = 2 A B / (n F eta_compute) + 2 A P / (n F eta_pf)   (eta_pf: the roofline's
                                                              `prefill_share`)
    t      = tau_step + t_coll + (tau_seq + h tau_ssm) B + |t_mem, t_comp|_2

With P = 0 it is the roofline's decode step of B sequences of C / B context; with B = 0
it is the roofline's `prefill_s` of P tokens alone. The roofline's saturated `t_iter`
instead adds the prefill's compute to the step (amortised per output token); here a
chunk's compute overlaps the decodes' memory reads, as it does on the GPU. Power is the
roofline's, from this iteration's bandwidth and FLOP/s shares. A power cap scales the
time and power by `sim.models.hardware`'s cap model at the iteration's uncapped draw, as
`sim.models.llm_replica` does for a whole table; a MIG slice is the roofline on the
slice (`slice_gpu`) with its SM share of the power.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim.models import mig
from sim.models.hardware import GPU_CATALOG, cap_response, curve, floor_w
from sim.models.llm import PRECISION_BYTES
from sim.models.llm_memory import KvCache, kv_cache, memory_bytes
from sim.models.llm_performance import _gpu, _resolve, serving_model
from sim.models.llm_replica import ReplicaModel, slice_gpu
from sim.models.llm_roofline import GPU_MEMORY_UTILIZATION, ROOFLINE_POWER, prefill_share

__all__ = ["IterationCost", "default_batched_tokens", "iteration_cost"]

_CAP_GRID = 65
"""Points of the uncapped per-GPU draw at which a cap's response is tabulated."""


@dataclass(frozen=True, eq=False)
class IterationCost:
    """One replica's iteration time and extra power (over idle) as functions of the
    iteration's work; times in s, power in W, for the whole replica."""

    fixed_s: float
    """tau_step + the collectives, s per iteration."""
    seq_s: float
    """Per running sequence, s (host bookkeeping, SSM state update)."""
    kv_s: float
    """Memory time per token of context read or written, s."""
    decode_s: float
    """Compute time per decode token, s."""
    prefill_s: float
    """Compute time per prefill token, s."""
    weights_s: tuple[float, ...]
    """Memory time of the weights the iteration's tokens touch, by tokens (the last entry
    for more tokens: a dense model reads all its weights at any count)."""
    weights_bytes: tuple[float, ...]
    """Bytes of those weights, by tokens (as `weights_s`)."""
    kv_bytes: float
    """KV bytes per token over the replica (power's bandwidth share)."""
    flop_per_token: float
    """2 A, FLOP per token."""
    bw_bytes_per_s: float
    flops_per_s: float
    pi: tuple[float, float, float, float]
    """pi_0 (or Blackwell's), pi_mem, pi_compute, pi_seq."""
    active_w: float
    """(TDP - idle) x GPUs x the slice's share, W: the range of the dynamic power."""
    num_gpus: int
    cap: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]] | None
    """Under a power cap: the uncapped per-GPU draw grid, W, the speed fraction and the
    capped per-GPU draw there, W; None uncapped."""
    idle_gpu_w: float
    share: float
    """The MIG slice's SM share of the GPU (1 on whole GPUs)."""
    kv: KvCache
    """The replica's paged KV cache at the default block size."""
    _mem_u: float = 0.0
    _comp_u: float = 0.0
    _n_weights: int = 0
    _pi_0: float = 0.0
    _pi_seq: float = 0.0

    def __post_init__(self) -> None:
        # Derived constants the hot path reads (`step`, `decode`), one by one: compiled
        # (mypyc), a dict of them would hold `_n_weights` as a float.
        pi_0, pi_mem, pi_comp, pi_seq = self.pi
        object.__setattr__(self, "_mem_u", pi_mem / self.bw_bytes_per_s)
        object.__setattr__(self, "_comp_u", pi_comp * self.flop_per_token / self.flops_per_s)
        object.__setattr__(self, "_n_weights", len(self.weights_s))
        object.__setattr__(self, "_pi_0", pi_0)
        object.__setattr__(self, "_pi_seq", pi_seq)

    def step(self, b: int, c: float, p: int) -> tuple[float, float]:
        """(duration s, extra power W) of an iteration with `b` decodes reading `c` tokens of
        context and `p` prefill tokens."""
        tokens = b + p
        wi = tokens if tokens < self._n_weights else -1
        t_mem = self.weights_s[wi] + (c + p) * self.kv_s
        seq = b * self.seq_s
        t = self.fixed_s + seq + math.hypot(t_mem, b * self.decode_s + p * self.prefill_s)
        z = (
            self._pi_0
            + (
                self._mem_u * (self.weights_bytes[wi] + (c + p) * self.kv_bytes)
                + self._comp_u * tokens
                + self._pi_seq * seq
            )
            / t
        )
        extra = self.active_w * (1.0 - math.exp(-z))
        if self.cap is None:
            return t, extra
        return self._capped(t, extra)

    def decode(self, b: int, c: float) -> tuple[float, float, float]:
        """(duration s, its growth per iteration s, extra power W) of a decode-only
        iteration of `b` sequences reading `c` tokens of context; the growth is the
        tangent as each sequence gains a token (under a cap, scaled by the speed fraction
        at `c`)."""
        wi = b if b < self._n_weights else -1
        t_mem = self.weights_s[wi] + c * self.kv_s
        seq = b * self.seq_s
        h = math.hypot(t_mem, b * self.decode_s)
        t = self.fixed_s + seq + h
        g = b * self.kv_s * t_mem / h
        z = (
            self._pi_0
            + (
                self._mem_u * (self.weights_bytes[wi] + c * self.kv_bytes)
                + self._comp_u * b
                + self._pi_seq * seq
            )
            / t
        )
        extra = self.active_w * (1.0 - math.exp(-z))
        if self.cap is None:
            return t, g, extra
        capped_t, capped_w = self._capped(t, extra)
        return capped_t, g * capped_t / t, capped_w

    def _capped(self, t: float, extra_w: float) -> tuple[float, float]:
        """An uncapped iteration's (duration, extra power) under the cap."""
        assert self.cap is not None
        grid, r, capped = self.cap
        gpus = self.num_gpus * self.share
        gpu_w = self.idle_gpu_w + extra_w / gpus
        w = _interp(gpu_w, grid, capped)
        return t / _interp(gpu_w, grid, r), (w - self.idle_gpu_w) * gpus


def _interp(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    """Linear interpolation in the table (xs increasing), clamped at its ends."""
    i = bisect_right(xs, x)
    if i <= 0:
        return ys[0]
    if i >= len(xs):
        return ys[-1]
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


@lru_cache(maxsize=256)
def iteration_cost(rm: ReplicaModel, max_tokens: int) -> IterationCost:
    """The `IterationCost` of the replica `rm` describes (its model, GPUs, cap and MIG
    slice), tabulating the weights touched for up to `max_tokens` tokens per iteration."""
    sm = serving_model()
    p = sm.params
    _, entry, g, n, _, _, _ = _resolve(sm, rm.model, rm.gpu, rm.num_gpus, 1, None, None)
    share = 1.0
    if rm.mig_profile is not None:
        g, share = slice_gpu(g, rm.mig_profile), mig.sm_share(g.id, rm.mig_profile)
    spec = entry.spec
    assert spec.kv_bytes_per_token is not None
    bpp = PRECISION_BYTES[spec.precision]
    read_bpp = bpp * p.fp8_read_factor if bpp < 2.0 else bpp
    eta_mem = p.eta_mem_blackwell if g.blackwell else p.eta_mem
    bw = g.mem_bw_gbps * 1e9 * n
    flops = g.fp16_tflops * 1e12 * n
    total, active = spec.total_params_b * 1e9, spec.active_params_b * 1e9
    s = entry.expert_share
    routed = (total - active) / (1.0 - s) if s < 1.0 else 0.0
    tokens = np.arange(max_tokens + 1 if s < 1.0 else 1, dtype=float)
    weights = active - routed * s + routed * (1.0 - (1.0 - s) ** tokens)
    hybrid = spec.architecture == "Mamba-Transformer Hybrid"
    coll_s = 1e-6 * (
        entry.layers * p.tau_collective_us + entry.moe_layers * p.tau_expert_parallel_us
    )
    cap = None
    if rm.cap_w is not None and rm.cap_w < GPU_CATALOG[g.id].max_cap_w:
        gs = GPU_CATALOG[g.id]
        shape, _ = curve(g.id, "inference")
        grid = np.linspace(g.idle_w, g.tdp_w, _CAP_GRID)
        r, capped = cap_response(
            rm.cap_w, grid, gs.max_cap_w, floor_w(gs), shape.n, shape.a, shape.b
        )
        cap = (
            tuple(grid.tolist()),
            tuple(np.asarray(r).tolist()),
            tuple(np.asarray(capped).tolist()),
        )
    assert ROOFLINE_POWER == 2.0  # `step` takes the L2 corner with math.hypot
    return IterationCost(
        fixed_s=1e-3 * p.tau_step_ms + coll_s * math.log2(n),
        seq_s=1e-6 * (p.tau_seq_us + (p.tau_ssm_seq_us if hybrid else 0.0)),
        kv_s=spec.kv_bytes_per_token / (bw * eta_mem),
        decode_s=2.0 * active / (flops * p.eta_compute),
        prefill_s=2.0 * active / (flops * float(prefill_share(p, entry.moe_layers))),
        weights_s=tuple((read_bpp * weights / (bw * eta_mem)).tolist()),
        weights_bytes=tuple((bpp * weights).tolist()),
        kv_bytes=float(spec.kv_bytes_per_token),
        flop_per_token=2.0 * active,
        bw_bytes_per_s=bw,
        flops_per_s=flops,
        pi=(p.pi_0_blackwell if g.blackwell else p.pi_0, p.pi_mem, p.pi_compute, p.pi_seq),
        active_w=(g.tdp_w - g.idle_w) * n * share,
        num_gpus=int(n),
        cap=cap,
        idle_gpu_w=g.idle_w,
        share=share,
        kv=kv_cache(
            rm.model,
            g.id,
            int(n),
            g.memory_gb,
            total * bpp,
            spec.kv_bytes_per_token,
            p.reserve_gb,
            GPU_MEMORY_UTILIZATION,
        ),
    )


def default_batched_tokens(gpu: str, mig_profile: str | None = None) -> int:
    """vLLM's default `max_num_batched_tokens` under its OpenAI-compatible server on `gpu`
    (a MIG slice: its memory): 8192 on a GPU of at least 70 GiB that is not an A100 (H100,
    H200, B200), else 2048 (`EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py,
    vllm-project/vllm: "if device_memory >= 70 * GiB_bytes and "a100" not in device_name"
    -> {OPENAI_API_SERVER: 8192}, else {OPENAI_API_SERVER: 2048})."""
    g = _gpu(serving_model(), gpu)
    memory_gb = g.memory_gb if mig_profile is None else mig.profile(g.id, mig_profile).memory_gb
    large = memory_bytes(g.id, memory_gb) >= 70 * 2**30 and "a100" not in g.id.lower()
    return 8192 if large else 2048
