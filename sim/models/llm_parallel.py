"""Tensor and expert parallelism of one LLM replica: the layouts a model can use, and what
a replica spanning several nodes pays per iteration (docs/serving.md "Parallelism").

A replica of `gpus` GPUs runs its attention tensor parallel over `tp` GPUs (the other
`gpus / tp` groups are data-parallel attention ranks, vLLM's DP attention) and spreads a
mixture-of-experts model's experts over `ep` GPUs (1: the experts are tensor parallel
too). Defaults follow the calibration data (ML.ENERGY leaderboard v3): a dense model is one
tensor-parallel group (`tp = gpus`), an MoE model runs `tp = 1`, `ep = gpus`.

Checks, as vLLM makes them: the attention heads divide over `tp` (vLLM's
`ModelConfig.verify_with_parallel_config`: "Total number of attention heads must be
divisible by tensor parallel size"); the KV heads divide over `tp`, or `tp` is a multiple of
them and each is replicated (vLLM's `QKVParallelLinear`); the experts divide over `ep`.

Inside a node the fitted collective terms of the roofline hold (`sim.models.llm_roofline`,
all data on one NVLink node). A replica larger than a node adds, per iteration, the
inter-node part of its collectives over the site's network (`sim/data/interconnects.toml`):

    tensor parallel across m nodes: 2 all-reduces per layer of the tokens' activations,
        2 L ring_allreduce_s(m, B/dp x hidden x 2 bytes, network), at one NIC's bandwidth
    expert parallel across m nodes, per MoE layer: the tokens' dispatch (FP8, 1 byte per
        value) and combine (BF16, 2 bytes) to the k experts of each, the share (m - 1)/m of
        them off the node, over the m nodes' NICs at the link's achieved bandwidth:
        L_moe (B k hidden (1 + 2) (m - 1)/m / (m NICs bw) + 2 latency)

One NIC, not the node's NICs together: Vidur's measured NCCL all-reduce on two DGX A100
nodes (../shared/data/vidur-profiling, `network/a100_dgx/all_reduce`, 16 workers, 8 per
node) exceeds the one-node all-reduce by about the tensor's size / 20-24 GB/s from 48 MB
up, one HDR NIC's achieved 21 GB/s, within 25%; between 0.5 and 4 MB (a decode step's
activations) the measured excess is 3.4-5.5 times the model's, which is a lower bound
there (`tests/validation/test_parallel_vidur.py`).
DeepEP (deepseek-ai/DeepEP README) measured its inter-node dispatch and combine at 43-47
GB/s per H800 over one 400 Gb/s (~50 GB/s) RDMA NIC each, 0.86-0.94 of the nominal: the
catalog's achieved share of InfiniBand (0.85) is used, and FP8 dispatch with BF16 combine
is DeepEP's setting. Both terms are linear in the batch: `Plan.comm_fixed_s` +
`Plan.comm_per_token_s` x tokens.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from sim.models.scaling import NODE_DEFAULTS, interconnect, ring_allreduce_s

__all__ = ["SHAPES", "Layout", "Plan", "Shape", "layout_for", "plan"]

_DISPATCH_COMBINE_BYTES = 1.0 + 2.0
"""Bytes per value an expert-parallel token moves: FP8 dispatch plus BF16 combine (DeepEP)."""
_ACTIVATION_BYTES = 2.0
"""Bytes per activation value a tensor-parallel all-reduce moves (BF16)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What parallelism needs of a model (`sim/data/llm_shapes.toml`)."""

    hidden_size: int
    attention_heads: int
    kv_heads: int
    experts: int = 0
    experts_per_token: int = 0
    source: str = ""


def _load() -> Mapping[str, Shape]:
    raw = tomllib.loads(resources.files("sim").joinpath("data/llm_shapes.toml").read_text("utf-8"))
    return MappingProxyType({mid: Shape(**f) for mid, f in raw["shapes"].items()})


SHAPES = _load()
"""Shapes of the catalog models by id."""


@dataclass(frozen=True, slots=True)
class Layout:
    """How a replica is laid out: the scenario's `parallel = {tp, ep}` (None: the default
    for the model) and the node it runs on (its site's `gpus_per_node`, and the GPU model's
    inter-node network and NICs, `sim.models.scaling.default_node`; None: no network known)."""

    tp: int | None = None
    ep: int | None = None
    gpus_per_node: int = 8
    inter_node: str | None = None
    nics_per_node: int = 1


def layout_for(
    gpu: str, tp: int | None = None, ep: int | None = None, gpus_per_node: int | None = None
) -> Layout:
    """The layout of a replica of `gpu` with degrees `tp`, `ep` (None: the model's default)
    on nodes of `gpus_per_node` GPUs (None: the catalog's default node of the GPU model),
    the network and NICs of the GPU model's default node (`sim/data/interconnects.toml`;
    none for a GPU model without one)."""
    node = NODE_DEFAULTS.get(gpu)
    size = node.gpus_per_node if node is not None else 8
    return Layout(
        tp,
        ep,
        size if gpus_per_node is None else gpus_per_node,
        None if node is None else node.inter_node,
        1 if node is None else node.nics_per_node,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked layout and its inter-node cost per iteration."""

    tp: int
    ep: int
    nodes: int
    """Nodes the replica spans."""
    comm_fixed_s: float
    """Inter-node collective time per iteration that does not grow with the tokens, s."""
    comm_per_token_s: float
    """Inter-node collective time per token in the iteration, s."""
    notes: tuple[str, ...]
    """What of this layout the calibration data did not see."""


def _degree(key: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def plan(model: str, moe: bool, layers: int, moe_layers: int, gpus: int, layout: Layout) -> Plan:
    """The checked layout of `model` (a catalog id; a model without a shape is only checked
    for its degrees) on a replica of `gpus` GPUs. ValueError naming the key (`parallel.tp`,
    `parallel.ep`, or `gpus_per_replica` for the default layout) and the model."""
    tp_key = "parallel.tp" if layout.tp is not None else "gpus_per_replica"
    tp = _degree("parallel.tp", layout.tp, 1 if moe else gpus)
    ep = _degree("parallel.ep", layout.ep, gpus if moe and layout.tp is None else 1)
    if gpus % tp:
        raise ValueError(f"parallel.tp = {tp} must divide gpus_per_replica = {gpus}")
    if not moe and tp != gpus:
        raise ValueError(
            f"parallel.tp = {tp}: {model} is dense, its replica is one tensor-parallel group "
            f"(tp = gpus_per_replica = {gpus}); more copies are more replicas"
        )
    if not moe and ep != 1:
        raise ValueError(f"parallel.ep = {ep}: {model} is dense (no experts to spread)")
    if moe and ep not in (1, gpus):
        raise ValueError(
            f"parallel.ep = {ep}: the experts spread over every GPU of the replica "
            f"(ep = gpus_per_replica = {gpus}) or none (ep = 1)"
        )
    if moe and ep == 1 and tp != gpus:
        raise ValueError(
            f"parallel.tp = {tp} with ep = 1: experts that are not spread are tensor parallel, "
            f"so tp must equal gpus_per_replica = {gpus}"
        )
    shape = SHAPES.get(model)
    notes = []
    if shape is not None:
        if shape.attention_heads % tp:
            raise ValueError(
                f"{tp_key} = {tp}: {model} has {shape.attention_heads} attention heads, which "
                f"tensor parallelism of {tp} does not divide"
            )
        kv = shape.kv_heads
        if (tp % kv if tp >= kv else kv % tp) != 0:
            raise ValueError(
                f"{tp_key} = {tp}: {model} has {kv} KV heads; tensor parallelism must divide "
                f"them or be a multiple of them (each then replicated)"
            )
        if moe and shape.experts % ep:
            raise ValueError(
                f"parallel.ep = {ep}: {model}'s {shape.experts} experts do not divide over "
                f"{ep} GPUs"
            )
    if moe and gpus > 1 and (tp, ep) != (1, gpus):
        notes.append(
            f"layout tp = {tp}, ep = {ep} not in the calibration data (its MoE replicas ran "
            f"tp = 1, ep = GPUs): the fitted collective terms are kept"
        )
    nodes = math.ceil(gpus / layout.gpus_per_node)
    if nodes == 1:
        return Plan(tp, ep, 1, 0.0, 0.0, tuple(notes))
    if layout.inter_node is None:
        raise ValueError(
            f"gpus_per_replica = {gpus} spans {nodes} nodes of {layout.gpus_per_node} GPUs, "
            f"but the GPU model has no inter-node network in sim/data/interconnects.toml"
        )
    link = interconnect(layout.inter_node)
    fixed = per_token = 0.0
    tp_nodes = math.ceil(tp / layout.gpus_per_node)
    if tp_nodes > 1 and shape is not None:
        one = ring_allreduce_s(tp_nodes, 1.0, link)
        latency = ring_allreduce_s(tp_nodes, 0.0, link)
        dp = gpus // tp
        fixed += 2 * layers * latency
        per_token += 2 * layers * (one - latency) * shape.hidden_size * _ACTIVATION_BYTES / dp
    ep_nodes = math.ceil(ep / layout.gpus_per_node)
    if ep_nodes > 1 and shape is not None:
        off_node = (ep_nodes - 1) / ep_nodes
        bandwidth = ep_nodes * layout.nics_per_node * link.achieved_bytes_per_s
        fixed += moe_layers * 2 * link.latency_s
        per_token += (
            moe_layers
            * shape.experts_per_token
            * shape.hidden_size
            * _DISPATCH_COMBINE_BYTES
            * off_node
            / bandwidth
        )
    notes.append(
        f"replica spans {nodes} nodes: inter-node collectives over {link.id} from the "
        f"interconnect catalog (the calibration data are one node)"
    )
    return Plan(tp, ep, nodes, fixed, per_token, tuple(notes))
