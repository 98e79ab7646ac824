"""One replica as both fidelities see it: iteration time and power as functions of the
number of sequences in its batch, and the prefill time of a prompt.

Under continuous batching (vLLM) every sequence in the batch gets one output token per
iteration, so a replica with `n` sequences in flight is a processor-sharing server whose
per-sequence token rate is `1 / iter_s[n]`. `iter_s[n]` and `power_w[n]` come from the
calibrated roofline (`sim.models.llm_roofline.evaluate`) at a maximum batch of `n`: the
decode step with the prefill of the batch's prompts amortised over their output tokens,
at the service's mean input and output lengths. A prompt's own prefill (the time to its
first token, `prefill_s`) is the roofline's prefill of that many input tokens alone.
With prefix caching (`prefix_hit_rate` h, docs/serving.md "Prefix caching") a prompt of
`L` tokens finds `cached_tokens(L, h)` = floor(h L) of them in the cache: its prefill, and
the amortised prefill in `iter_s` (h times the mean prompt), compute only the others,
while its context (KV cache, slots) holds all `L`.
A power cap lowers the SM clock until the replica's draw is within it, separately for the
decode iterations (memory-bound: little slower) and for a prompt's prefill (compute-bound:
slower in proportion), as in `performance` (`sim.models.llm_roofline.capped_clock`).

A replica on one MIG slice (`mig_profile`, docs/mig.md "LLM replicas on slices") is the
same roofline on a GPU with the slice's memory, its `sim.models.mig.bandwidth_share` of the
bandwidth and its `sim.models.mig.sm_share` of the dense FLOP/s; its power is its SM share of the
whole GPU's draw at that load (`sim.models.mig.gpu_power_w`'s rule), idle included.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from sim.models import mig
from sim.models.hardware import GPU_CATALOG
from sim.models.llm import PRECISION_BYTES
from sim.models.llm_parallel import Layout, layout_for
from sim.models.llm_performance import (
    ServingGpu,
    _cap,
    _hit_rate,
    _inputs,
    _kappa,
    _plan,
    _resolve,
    extrapolation,
    serving_model,
)
from sim.models.llm_roofline import GPU_MEMORY_UTILIZATION, capped_clock, evaluate
from sim.models.token_laws import TokenLaw

__all__ = ["ReplicaModel", "cached_tokens", "replica_model", "slice_gpu"]

_PREFILL_GRID_TOKENS = np.unique(np.rint(np.geomspace(1, 4e6, 160)))
"""Input lengths the prefill time is tabulated at (interpolated linearly in between)."""


@dataclass(frozen=True, eq=False)
class ReplicaModel:
    """How one replica of a service serves (all figures for the whole replica)."""

    model: str
    gpu: str
    num_gpus: int
    cap_w: float | None
    """The per-GPU power limit, W (None: the maximum)."""
    slots: int
    """Most sequences in flight: the maximum batch, or fewer when the KV cache holds fewer
    sequences of the mean context."""
    iter_s: np.ndarray
    """float64[slots + 1]: duration of one decode iteration with n sequences, s (index 0
    repeats index 1)."""
    power_w: np.ndarray
    """float64[slots + 1]: GPU power of the replica with n sequences in flight, W; index 0
    is the GPUs' idle power."""
    idle_w: float
    """Idle power of the replica's GPUs in the serving model, W (the site's pool may set
    its own idle power; the extra power over idle is what a replica adds)."""
    load_w: float
    """GPU power while loading weights at a cold start (a batch of one streams the weights
    from memory just as loading writes them), W."""
    weights_gb: float
    """The weights, GB, read from storage at a cold start."""
    _prefill_grid_s: np.ndarray
    mig_profile: str | None = None
    """The MIG profile of the slice the replica runs on (None: whole GPUs). Its power
    figures are then the slice's: its SM share of the GPU's idle and active draw."""
    extrapolated_why: tuple[str, ...] = ()
    """What the calibration data did not see of this replica (`ServingPoint.extrapolated_why`;
    empty: nothing): reported per service and variant in meta.json's `serving`."""
    prefix_hit_rate: float = 0.0
    """Share of each prompt's tokens found in the prefix cache (0: no prefix caching;
    `cached_tokens`): `iter_s`, `power_w` and `prefill_s` compute only the others."""

    @property
    def extrapolated(self) -> bool:
        """True when the calibration data did not see this replica's configuration."""
        return bool(self.extrapolated_why)

    def prefill_s(self, input_tokens: np.ndarray | float) -> np.ndarray:
        """Prefill time of prompts of `input_tokens` tokens, each alone on the replica, s:
        of their tokens not in the prefix cache (`cached_tokens`)."""
        x = np.asarray(input_tokens, dtype=float)
        x = x - cached_tokens(x, self.prefix_hit_rate)
        return np.interp(x, _PREFILL_GRID_TOKENS, self._prefill_grid_s)

    def tokens_per_s(self, n: np.ndarray | int) -> np.ndarray:
        """Output tokens per second of the replica with n sequences in flight."""
        n = np.asarray(n)
        return np.where(n > 0, n / self.iter_s[np.minimum(n, self.slots)], 0.0)


@lru_cache(maxsize=256)
def replica_model(
    model: str,
    gpu: str,
    num_gpus: int,
    max_batch: int,
    avg_input_tokens: float | TokenLaw,
    avg_output_tokens: float | TokenLaw,
    cap_w: float | None = None,
    mig_profile: str | None = None,
    precision: str | None = None,
    layout: Layout | None = None,
    prefix_hit_rate: float = 0.0,
) -> ReplicaModel:
    """The `ReplicaModel` of `model` on `num_gpus` x `gpu` (arguments as in
    `sim.models.llm_performance`: token counts as means or laws); cached. ValueError as
    `performance` raises it.

    `mig_profile`: the replica runs on one slice of that profile of `gpu` (`num_gpus` must
    be 1; docs/mig.md): the roofline on the slice's resources (`slice_gpu`), its power the
    slice's SM share of the whole GPU's at that load, a cap `cap_w` the whole GPU's (the cap
    model sees the draw of the GPU with every slice like this one, as for jobs on slices).
    ValueError naming the profile and the sizes if the weights do not fit the slice.
    `precision`: the weights' format (None: the model's own), `layout`: the parallel
    layout and node (None: the default), `prefix_hit_rate`: the share of each prompt's
    tokens in the prefix cache (module docstring), as in `performance`.
    """
    sm = serving_model()
    name, entry, g, n, b, l_in, l_out = _resolve(
        sm, model, gpu, num_gpus, max_batch, avg_input_tokens, avg_output_tokens, precision
    )
    comm = _plan(name, entry, n, layout_for(g.id) if layout is None else layout)
    why = extrapolation(sm, entry, g, comm)
    cap = None if cap_w is None else _cap(g, cap_w)
    hit = _hit_rate(prefix_hit_rate)
    share = 1.0
    if mig_profile is not None:
        if n != 1:
            raise ValueError(f"num_gpus must be 1 on a MIG slice ({mig_profile}), got {num_gpus!r}")
        g, share = slice_gpu(g, mig_profile), mig.sm_share(g.id, mig_profile)
    batches = np.arange(1, int(b) + 1, dtype=float)
    kappa = _kappa(avg_output_tokens)
    x = _inputs(entry, g, n, batches, l_in, l_out, kappa, comm, hit * l_in)
    grid = replace(
        _inputs(entry, g, n, np.asarray(1.0), 1.0, l_out, kappa, comm),
        input_tokens=_PREFILL_GRID_TOKENS,
    )
    if cap is not None and cap < GPU_CATALOG[g.id].max_cap_w:
        x = replace(x, sm_clock=capped_clock(sm.params, x, cap))
        grid = replace(grid, sm_clock=capped_clock(sm.params, grid, cap, phase="prefill"))
    o = evaluate(sm.params, x)
    weights_gb = float(entry.spec.total_params_b) * PRECISION_BYTES[entry.spec.precision]
    if mig_profile is not None and float(np.min(o.kv_capacity_seqs)) <= 0.0:
        raise ValueError(
            f"{name} on a {mig_profile} slice of {g.id}: its weights ({weights_gb:g} GB) do "
            f"not fit the slice's {g.memory_gb:g} GB (vLLM takes "
            f"{GPU_MEMORY_UTILIZATION:g} of it, less {sm.params.reserve_gb:g} GB reserved)"
        )
    capacity = float(np.min(o.kv_capacity_seqs))
    if capacity < 1.0:
        raise ValueError(
            f"{name} on {int(n)} x {g.id}: one sequence of {float(np.max(o.context_tokens)):.0f} "
            f"tokens of context does not fit the KV cache (or the weights do not fit)"
        )
    slots = int(min(b, np.floor(capacity)))
    iter_s = (o.batch / o.throughput_tokens_per_s)[:slots]
    power_w = o.power_w[:slots].astype(float)
    prefill = np.array(evaluate(sm.params, grid).prefill_s, dtype=float)
    idle = float(n * g.idle_w)
    return ReplicaModel(
        model=name,
        gpu=g.id,
        num_gpus=int(n),
        cap_w=cap,
        slots=slots,
        iter_s=np.concatenate([[iter_s[0]], iter_s]),
        power_w=share * np.concatenate([[idle], power_w]),
        idle_w=share * idle,
        load_w=share * float(power_w[0]),
        weights_gb=weights_gb,
        _prefill_grid_s=prefill,
        mig_profile=mig_profile,
        extrapolated_why=why,
        prefix_hit_rate=hit,
    )


def cached_tokens(input_tokens: np.ndarray | float, prefix_hit_rate: float) -> np.ndarray:
    """Tokens of prompts of `input_tokens` tokens found in the prefix cache at a hit rate
    `prefix_hit_rate` (0 <= rate < 1): floor(rate x tokens), whole tokens, so a prompt of
    at least one token computes at least one (its last, which gives the first output
    token)."""
    return np.floor(prefix_hit_rate * np.asarray(input_tokens, dtype=float))


def slice_gpu(g: ServingGpu, mig_profile: str) -> ServingGpu:
    """What the roofline reads of one `mig_profile` slice of `g` (docs/mig.md): the slice's
    memory (NVIDIA's size for the profile, GB), `sim.models.mig.bandwidth_share` of the memory
    bandwidth and `sim.models.mig.sm_share` of the dense FLOP/s; the whole GPU's TDP and idle
    power, so that the roofline's power is the GPU's draw with every slice at this load
    (the caller takes the slice's SM share of it). ValueError for a GPU without MIG or an
    unknown profile."""
    p = mig.profile(g.id, mig_profile)
    return replace(
        g,
        memory_gb=float(p.memory_gb),
        mem_bw_gbps=g.mem_bw_gbps * mig.bandwidth_share(g.id, mig_profile),
        fp16_tflops=g.fp16_tflops * mig.sm_share(g.id, mig_profile),
        measured=False,
    )
