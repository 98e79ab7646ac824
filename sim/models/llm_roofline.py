"""The equations of the serving model, vectorised over numpy arrays.

One replica of `n` GPUs serves a model with continuous batching at its maximum batch
size (docs/serving.md has the derivation and the sources). Per decode iteration of the
batch `B`:

    ctx        = L_in + kappa L_out                         tokens in context, per sequence
                                                            (kappa: the output law's, else
                                                            the calibrated constant)
    B          = softmin(max_batch, KV capacity / (ctx kv)) sequences in the batch
    weights    = bpp (A - R s + R (1 - (1 - s)^B))          bytes read (MoE: experts touched)
    t_mem      = (f8 weights + B ctx kv) / (n BW eta_mem)    (f8: fp8_read_factor for FP8;
                                                             eta_mem_blackwell on Blackwell)
    t_compute  = 2 A B / (n F eta_compute)
    t_coll     = (tau_coll L + tau_ep L_moe) log2(n)         collectives: per layer (tensor
                                                             parallel) and per MoE layer
                                                             (expert-parallel dispatch/combine)
    t_net      = c_0 + c_tok tokens                          a replica spanning nodes: the
                                                             inter-node collectives
                                                             (sim.models.llm_parallel; 0 on
                                                             one node), added to t_step with
                                                             B tokens, to the prefill with L_pf
    t_step     = tau_step + t_coll + (tau_seq + h tau_ssm) B + |t_mem, t_compute|_2
    t_prefill  = 2 A L_pf / (n F eta_pf)                    per request, compute only;
                                                            L_pf = L_in - cached: the prompt's
                                                            tokens not in the prefix cache
                                                            (eta_pf: eta_prefill_moe for
                                                            an MoE, else eta_prefill)
    t_iter     = t_step + (B / L_out) t_prefill             prefill interleaved (chunked)
    throughput = B / t_iter,   ITL median = t_step
    ITL p90    = t_step + max(1, B / L_out) t_prefill  if B / L_out > 0.1, else t_step
                                                            (B / L_out prompts join per
                                                            iteration: a share min(1, B / L_out)
                                                            of the iterations carries them)
    prefill_s  = tau_step + t_coll + |t_mem_pf, t_prefill|_2   one prompt alone (reported)
    t_mem_pf   = (f8 bpp weights(L_pf) + L_pf kv) / (n BW eta_mem)
                                                            weights(L_pf): the weights term
                                                            above with L_pf tokens for B
    P_gpu      = P_idle + (TDP - P_idle) (1 - exp(-z)),  z = pi_0 + pi_mem u_mem
                 + pi_compute u_compute + pi_seq u_seq      (pi_0_blackwell on Blackwell)
    P_prefill  = the same with the utilisations of one prompt alone (prefill_s)

Under a power limit the SM clock runs at a share f <= 1 of its maximum (`Inputs.sm_clock`,
`capped_clock` solves it) and HBM at its own clock: t_compute and t_prefill stretch by
1 / f, t_mem and the fixed and per-sequence (host-side) times do not, and
z = pi_mem u_mem + f^2 pi_compute u_compute + f^3 (pi_0 + pi_seq u_seq) (dynamic power
C V^2 f with the voltage following the clock: energy per operation ~ f^2, clocked power ~ f^3).

with u_mem, u_compute the shares of peak bandwidth and peak FLOP/s achieved over the
iteration and u_seq its share in per-sequence work ((tau_seq + h tau_ssm) B). T, A: total
and active parameters; bpp: bytes per parameter; kv: KV bytes per token; L: layers;
s = k / E: the share of routed experts one token uses and R = (T - A) / (1 - s) the
routed parameters (dense: s = 1, R = 0); L_moe: the layers with routed experts (dense: 0);
h: 1 for a hybrid, else 0; BW: memory bandwidth; F: dense FP16 FLOP/s;
|a, b|_2 = sqrt(a^2 + b^2), a smooth roofline maximum.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

__all__ = [
    "ASSUMED",
    "FITTED",
    "Inputs",
    "Outputs",
    "Params",
    "capped_clock",
    "evaluate",
    "prefill_share",
]

SOFTMIN_POWER = 8.0
"""Sharpness of the soft minimum between the maximum batch and the KV-cache capacity.
A modelling choice (not fitted, not from a source): sharp enough that the batch follows
`max_batch` until close to the capacity (1.2% below the smaller of the two when they
differ by a third, 8% below where they are equal), smooth so the fit's gradients exist."""
ROOFLINE_POWER = 2.0
"""Sharpness of the soft maximum of memory and compute time (the roofline's corner).
A modelling choice (not fitted, not from a source): an L2 combination, 41% above the
larger term where the two are equal, since memory and compute overlap only partly."""
ITL_P90_SHARE = 0.1
"""The share of iterations above which those carrying a prefill set the 90th percentile of
the inter-token latency (the definition of a 90th percentile, not a fitted value)."""
GPU_MEMORY_UTILIZATION = 0.9
"""Share of GPU memory vLLM takes for weights, activations and the KV cache: vLLM's default
`gpu_memory_utilization` (`EngineArgs.gpu_memory_utilization` defaults to
`CacheConfig.gpu_memory_utilization`, `Field(default=0.9, gt=0, le=1)` in
vllm/config/cache.py, vllm-project/vllm commit c1d86421174a). Taken as the leaderboard's
setting: its data do not record the value used."""


@dataclass(frozen=True, slots=True)
class Params:
    """The model's constants: fitted ones (`FITTED`) and those set from the data."""

    eta_mem: float
    """Achieved share of peak memory bandwidth while reading weights and KV cache (Hopper
    and every GPU that is not Blackwell)."""
    eta_mem_blackwell: float
    """The same on a Blackwell GPU (B200): its own kernels and dual-die memory system."""
    eta_compute: float
    """Achieved share of dense FP16 peak in the decode GEMMs."""
    eta_prefill: float
    """Achieved share of dense FP16 peak in prefill (dense and hybrid models)."""
    eta_prefill_moe: float
    """The same for an MoE (routed experts: grouped expert GEMMs and, over several GPUs,
    the expert dispatch and combine of every prompt token)."""
    tau_step_ms: float
    """Fixed time per decode iteration (scheduling, kernel launches, sampling), ms."""
    tau_collective_us: float
    """Time per iteration per layer per doubling of the GPU count (collectives), us."""
    tau_expert_parallel_us: float
    """MoE on several GPUs (expert parallel): time per iteration per MoE layer per doubling
    of the GPU count (token dispatch and combine), us."""
    tau_seq_us: float
    """Time per iteration per sequence in the batch (host-side bookkeeping), us."""
    tau_ssm_seq_us: float
    """Hybrid models only: time per iteration per sequence for the Mamba layers' state
    update (small kernels bound neither by bandwidth nor by FLOP/s), us."""
    fp8_read_factor: float
    """Time to stream an FP8 weight, in units of one byte at the achieved bandwidth (1: as
    fast as its size; more: the FP8 kernels reach less bandwidth than BF16 ones). Power
    sees the bytes actually read."""
    reserve_gb: float
    """GPU memory per GPU held by activations and CUDA graphs, outside the KV cache, GB."""
    pi_0: float
    pi_0_blackwell: float
    pi_mem: float
    pi_compute: float
    pi_seq: float
    """Power: the dynamic share (1 - exp(-z)) of TDP - idle, z = pi_0 + pi_mem u_mem +
    pi_compute u_compute + pi_seq u_seq (u_seq: the share of time in per-sequence work;
    pi_0_blackwell replaces pi_0 on a Blackwell GPU: its floor when active)."""
    kappa: float
    """In-flight context per sequence = input + kappa x mean output tokens (from the
    output-length histograms: E[L^2] / (2 E[L]^2); 1 for an exponential distribution)."""
    input_tokens: float
    """Mean input tokens of an lm-arena-chat request (the default prompt length)."""


ASSUMED = ("kappa", "eta_prefill", "eta_prefill_moe")
"""The parameters set from the data or a source, not fitted."""
FITTED = tuple(f.name for f in fields(Params) if f.name not in ASSUMED)
"""The parameters the calibration fits, in the order of its parameter vector."""


@dataclass(frozen=True, slots=True)
class Inputs:
    """One or many configurations (scalars or equal-length arrays)."""

    total_params_b: np.ndarray
    active_params_b: np.ndarray
    bytes_per_param: np.ndarray
    kv_bytes_per_token: np.ndarray
    expert_share: np.ndarray
    """MoE: routed experts per token / routed experts (k / E); dense: 1."""
    layers: np.ndarray
    moe_layers: np.ndarray
    """Layers with routed experts (dense: 0)."""
    hybrid: np.ndarray
    """1 for a Mamba-Transformer hybrid, else 0."""
    num_gpus: np.ndarray
    memory_gb: np.ndarray
    """Memory of one GPU, GB."""
    mem_bw_gbps: np.ndarray
    """Memory bandwidth of one GPU, GB/s."""
    fp16_tflops: np.ndarray
    """Dense FP16/BF16 tensor throughput of one GPU, TFLOP/s."""
    tdp_w: np.ndarray
    idle_w: np.ndarray
    blackwell: np.ndarray
    """1 for a Blackwell GPU (B200), else 0 (Hopper constants)."""
    max_batch: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    kappa: np.ndarray | None = None
    """In-flight context share of the output lengths' law, E[L^2] / (2 E[L]^2)
    (`sim.models.token_laws`); None: the calibrated `Params.kappa`."""
    sm_clock: np.ndarray | None = None
    """SM clock as a share of its maximum under a power limit (`capped_clock`); None: 1."""
    comm_fixed_s: np.ndarray | float = 0.0
    """Inter-node collective time per iteration of a replica spanning nodes, s (0: one
    node; `sim.models.llm_parallel.plan`)."""
    comm_per_token_s: np.ndarray | float = 0.0
    """Inter-node collective time per token of an iteration (decode or prefill), s."""
    cached_tokens: np.ndarray | float = 0.0
    """Tokens of each prompt found in the prefix cache (automatic prefix caching), at most
    `input_tokens`: in the context (the KV cache holds and reads them), not computed in
    prefill (no FLOPs, no KV written, no inter-node traffic). 0: no prefix caching."""


@dataclass(frozen=True, slots=True)
class Outputs:
    """The model's figures for `Inputs` (arrays)."""

    batch: np.ndarray
    """Mean sequences in the batch (the maximum, or fewer when the KV cache is full)."""
    kv_capacity_seqs: np.ndarray
    """Sequences of the in-flight context the KV cache holds (<= 0: the weights do not fit)."""
    context_tokens: np.ndarray
    throughput_tokens_per_s: np.ndarray
    itl_median_ms: np.ndarray
    itl_p90_ms: np.ndarray
    """90th percentile of the inter-token latency, ms: the iterations that carry a prefill
    set it once more than a tenth of the iterations carry one."""
    prefill_s: np.ndarray
    """Prefill time of one request alone on the replica, s."""
    power_w: np.ndarray
    """Power of all GPUs of the replica, W."""
    prefill_power_w: np.ndarray
    """Power of all GPUs of the replica during the prefill of one prompt alone, W."""
    mem_utilization: np.ndarray
    compute_utilization: np.ndarray


def prefill_share(p: Params, moe_layers: np.ndarray | float) -> np.ndarray:
    """The share of dense FP16 peak a prefill reaches: `eta_prefill_moe` for a model
    with routed experts (`moe_layers` > 0), else `eta_prefill`."""
    return np.where(np.asarray(moe_layers, dtype=float) > 0, p.eta_prefill_moe, p.eta_prefill)


def evaluate(p: Params, x: Inputs) -> Outputs:
    """The model's throughput, latency and power for each configuration of `x`."""
    n = np.asarray(x.num_gpus, dtype=float)
    total = np.asarray(x.total_params_b, dtype=float) * 1e9
    active = np.asarray(x.active_params_b, dtype=float) * 1e9
    bpp = np.asarray(x.bytes_per_param, dtype=float)
    read_bpp = np.where(bpp < 2.0, bpp * p.fp8_read_factor, bpp)
    blackwell = np.asarray(x.blackwell, dtype=float) > 0.5
    eta_mem = np.where(blackwell, p.eta_mem_blackwell, p.eta_mem)
    kv = np.asarray(x.kv_bytes_per_token, dtype=float)
    bw = np.asarray(x.mem_bw_gbps, dtype=float) * 1e9 * n
    flops = np.asarray(x.fp16_tflops, dtype=float) * 1e12 * n
    l_in = np.asarray(x.input_tokens, dtype=float)
    l_out = np.asarray(x.output_tokens, dtype=float)
    max_batch = np.asarray(x.max_batch, dtype=float)

    kappa = p.kappa if x.kappa is None else np.asarray(x.kappa, dtype=float)
    ctx = l_in + kappa * l_out
    kv_budget = n * (np.asarray(x.memory_gb) * GPU_MEMORY_UTILIZATION - p.reserve_gb) * 1e9
    capacity = (kv_budget - total * bpp) / (ctx * kv)
    safe_capacity = np.maximum(capacity, 1e-9)
    batch = (max_batch**-SOFTMIN_POWER + safe_capacity**-SOFTMIN_POWER) ** (-1.0 / SOFTMIN_POWER)

    share = np.asarray(x.expert_share, dtype=float)
    routed = np.where(share < 1.0, (total - active) / np.maximum(1.0 - share, 1e-12), 0.0)
    touched = routed * (1.0 - (1.0 - share) ** batch)
    weights_read = active - routed * share + touched
    kv_read = batch * ctx * kv
    bytes_read = bpp * weights_read + kv_read
    flop_step = 2.0 * active * batch
    clock = 1.0 if x.sm_clock is None else np.asarray(x.sm_clock, dtype=float)
    t_mem = (read_bpp * weights_read + kv_read) / (bw * eta_mem)
    t_compute = flop_step / (flops * p.eta_compute * clock)
    layers = np.asarray(x.layers, dtype=float)
    t_seq = 1e-6 * (p.tau_seq_us + p.tau_ssm_seq_us * np.asarray(x.hybrid)) * batch
    moe_layers = np.asarray(x.moe_layers, dtype=float)
    t_coll = 1e-6 * (layers * p.tau_collective_us + moe_layers * p.tau_expert_parallel_us)
    comm_fixed = np.asarray(x.comm_fixed_s, dtype=float)
    comm_per_token = np.asarray(x.comm_per_token_s, dtype=float)
    t_step = (
        1e-3 * p.tau_step_ms
        + t_coll * np.log2(n)
        + t_seq
        + (t_mem**ROOFLINE_POWER + t_compute**ROOFLINE_POWER) ** (1.0 / ROOFLINE_POWER)
        + (comm_fixed + comm_per_token * batch)
    )
    l_pf = l_in - np.asarray(x.cached_tokens, dtype=float)  # the prompt's tokens computed
    flop_prefill = 2.0 * active * l_pf
    t_prefill = flop_prefill / (flops * prefill_share(p, moe_layers) * clock)
    joins = batch / l_out  # prompts joining the batch per iteration, in steady state
    t_iter = t_step + joins * (t_prefill + comm_per_token * l_pf)
    # One prompt alone: a step of its own that reads the weights its computed tokens touch
    # and writes their KV, against the prefill FLOPs (t_iter above keeps the fitted,
    # compute-only prefill term: in a full batch the weights are read by the decode anyway).
    touched_prefill = routed * (1.0 - (1.0 - share) ** l_pf)
    weights_prefill = active - routed * share + touched_prefill
    t_mem_prefill = (read_bpp * weights_prefill + l_pf * kv) / (bw * eta_mem)
    prefill_alone = (
        1e-3 * p.tau_step_ms
        + t_coll * np.log2(n)
        + (t_mem_prefill**ROOFLINE_POWER + t_prefill**ROOFLINE_POWER) ** (1.0 / ROOFLINE_POWER)
        + (comm_fixed + comm_per_token * l_pf)
    )

    u_mem = bytes_read / (bw * t_iter)
    u_compute = (flop_step + batch / l_out * flop_prefill) / (flops * t_iter)
    pi_0 = np.where(blackwell, p.pi_0_blackwell, p.pi_0)
    idle = np.asarray(x.idle_w, dtype=float)

    def power_of(u_m, u_c, u_s):
        z = p.pi_mem * u_m + clock**2 * p.pi_compute * u_c + clock**3 * (pi_0 + p.pi_seq * u_s)
        return n * (idle + (np.asarray(x.tdp_w) - idle) * (1.0 - np.exp(-z)))

    power = power_of(u_mem, u_compute, t_seq / t_iter)
    bytes_prefill = bpp * weights_prefill + l_pf * kv
    prefill_power = power_of(
        bytes_prefill / (bw * prefill_alone), flop_prefill / (flops * prefill_alone), 0.0
    )
    return Outputs(
        batch=batch,
        kv_capacity_seqs=capacity,
        context_tokens=ctx,
        throughput_tokens_per_s=batch / t_iter,
        itl_median_ms=1e3 * t_step,
        itl_p90_ms=1e3
        * (t_step + np.where(joins > ITL_P90_SHARE, np.maximum(joins, 1.0), 0.0) * t_prefill),
        prefill_s=prefill_alone,
        power_w=power,
        prefill_power_w=prefill_power,
        mem_utilization=u_mem,
        compute_utilization=u_compute,
    )


CLOCK_STEPS = 40
"""Bisection steps of `capped_clock` (the clock to 2^-40 of its range)."""


def capped_clock(p: Params, x: Inputs, cap_w: float, phase: str = "decode") -> np.ndarray:
    """The SM clock share (0, 1] at which each configuration of `x` draws at most `cap_w`
    per GPU in `phase` ("decode": `power_w`, the iterations with their prefill share;
    "prefill": `prefill_power_w`, one prompt alone): 1 where the uncapped draw is within the
    cap, else the highest clock within it (the draw falls monotonically with the clock)."""
    n = np.asarray(x.num_gpus, dtype=float)
    field = {"decode": "power_w", "prefill": "prefill_power_w"}[phase]

    def per_gpu(clock: np.ndarray) -> np.ndarray:
        return np.asarray(getattr(evaluate(p, replace(x, sm_clock=clock)), field)) / n

    uncapped = per_gpu(np.asarray(1.0))
    one = np.ones_like(uncapped)
    lo, hi = np.zeros_like(one), one.copy()
    within = uncapped <= cap_w
    for _ in range(CLOCK_STEPS):
        mid = 0.5 * (lo + hi)
        ok = per_gpu(mid) <= cap_w
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.where(within, 1.0, np.maximum(lo, 2.0**-CLOCK_STEPS))
