"""Multi-GPU scaling: the throughput of a training job on n GPUs, per profile and scheme.

Two data files, both shipped in `sim/data` (docs/scaling.md explains the model):

- `interconnects.toml`: link kinds (NVLink, PCIe, InfiniBand, Ethernet) and the default node
  (GPUs per node, intra-node link, network) of each GPU model, each number with its source;
- `scaling_profiles.toml`: per profile, the gradient size, the compute time of one step on
  the reference GPU, the overlap of communication with compute and, for transformers, the
  shapes that tensor and pipeline parallelism need; plus the one fitted parameter `sync_s`.

One step on n GPUs takes the compute time of one GPU's share plus the communication that is
not hidden behind compute plus a synchronisation wait; the efficiency is the ideal time over
that. Compute time scales with the GPU's speed (`sim.models.hardware.speed`), communication does
not, so a faster GPU spends a larger share of its step communicating.

    data:      T = Tc + max(0, AR - overlap x Tc) + W(n)
               AR = ring(k, G, intra) + ring(N, G, network x NICs)   (hierarchical all-reduce)
    tensor:    T = Tc/t + 4 L ring(t, A, intra) + max(0, ring(N, G, network x NICs)
                   - overlap x Tc/t) + W(n)    (t GPUs per node in tensor parallel, N replicas)
    pipeline:  T = (m + p - 1)/m x Tc/p + 2 A / B_link + W(n)
    ring(m, S, link) = 2 (m-1)/m x S / (achieved bandwidth) + 2 (m-1) x latency
    W(n) = sync_s x sqrt(2 ln n)   (expected wait for the slowest of n workers)

Tc: compute time of one step on this GPU; G: gradient bytes; k, N: GPUs per node used and
nodes; t: tensor-parallel degree; L: layers; A: activation bytes of one step (tokens x
hidden x bytes); p, m: pipeline stages and micro-batches.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from sim.models import hardware, training

__all__ = [
    "INTERCONNECTS",
    "NODE_DEFAULTS",
    "SCALING_PROFILES",
    "SCHEMES",
    "SYNC_S",
    "Interconnect",
    "NodeShape",
    "ScalingPoint",
    "Workload",
    "comm_power_frac",
    "default_node",
    "profile_workload",
    "scaling",
    "scaling_of",
]

SCHEMES = ("data", "tensor", "pipeline")
_BITS_PER_BYTE = 8.0


@dataclass(frozen=True, slots=True)
class Interconnect:
    """One link kind, e.g. "NVLink3", "PCIe4", "IB-HDR", "Eth-100G"."""

    id: str
    bandwidth_gbps: float
    """One direction, Gbit/s: per GPU for intra-node links, per NIC port for networks."""
    latency_s: float
    """Latency of one step of a collective over this link, s."""
    achieved_frac: float
    """Share of `bandwidth_gbps` that a large NCCL all-reduce achieves, in (0, 1]."""
    kind: str
    """"intra" (inside a node) or "network" (between nodes)."""

    @property
    def achieved_bytes_per_s(self) -> float:
        """Bandwidth a collective achieves, bytes/s."""
        return self.bandwidth_gbps * 1e9 / _BITS_PER_BYTE * self.achieved_frac


@dataclass(frozen=True, slots=True)
class NodeShape:
    gpus_per_node: int
    intra_node: str
    """Interconnect id of the links between a node's GPUs."""
    inter_node: str
    """Interconnect id of the cluster network (one NIC port)."""
    nics_per_node: int = 1
    """Network ports of one node that carry collectives."""


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    speedup: float
    """Throughput of n GPUs relative to one GPU of the same model (<= n)."""
    efficiency: float
    """speedup / n, in (0, 1]."""
    comm_time_frac: float
    """Share of wall time the GPUs wait on (non-overlapped) communication and synchronisation."""
    nodes: int
    """Nodes the job spans."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What the model needs of one training job on one GPU model."""

    step_compute_s: float
    """Compute time of one step of the profile's batch on this GPU, s (per GPU for data
    parallel; the whole model replica's step for tensor and pipeline parallel)."""
    grad_bytes: float
    """Gradient all-reduced every step, bytes (0: no exchange, no synchronous step)."""
    overlap_frac: float
    """Share of the step's compute time behind which the gradient all-reduce can hide."""
    layers: int = 0
    hidden: int = 0
    tokens_per_step: int = 0
    bytes_per_value: int = 4
    """Bytes per activation value exchanged by tensor and pipeline parallelism."""
    micro_batches: int = 0
    """Micro-batches per step of a pipeline."""

    @property
    def activation_bytes(self) -> float:
        """Activations of one step at one layer boundary (tokens x hidden x bytes), bytes."""
        return float(self.tokens_per_step * self.hidden * self.bytes_per_value)


# --- catalog -------------------------------------------------------------------------------


def _read(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("sim").joinpath(f"data/{name}").read_text("utf-8"))


def _interconnect(iid: str, f: Mapping[str, Any]) -> Interconnect:
    link = Interconnect(iid, f["bandwidth_gbps"], f["latency_s"], f["achieved_frac"], f["kind"])
    if not (link.bandwidth_gbps > 0 and link.latency_s >= 0 and 0 < link.achieved_frac <= 1):
        raise ValueError(
            f"interconnects.toml: interconnect {iid!r} needs bandwidth_gbps > 0, latency_s >= 0"
            f" and achieved_frac in (0, 1], got {link.bandwidth_gbps}, {link.latency_s},"
            f" {link.achieved_frac}"
        )
    if link.kind not in ("intra", "network"):
        raise ValueError(
            f"interconnects.toml: interconnect {iid!r} kind must be intra or network,"
            f" got {link.kind!r}"
        )
    return link


def _node(f: Mapping[str, Any]) -> NodeShape:
    return NodeShape(f["gpus_per_node"], f["intra_node"], f["inter_node"], f["nics_per_node"])


_CATALOG = _read("interconnects.toml")
INTERCONNECTS: Mapping[str, Interconnect] = MappingProxyType(
    {iid: _interconnect(iid, f) for iid, f in _CATALOG["interconnects"].items()}
)
NODE_DEFAULTS: Mapping[str, NodeShape] = MappingProxyType(
    {gid: _node(f) for gid, f in _CATALOG["nodes"].items()}
)
_PROFILE_DATA = _read("scaling_profiles.toml")
SCALING_PROFILES: Mapping[str, Mapping[str, Any]] = MappingProxyType(_PROFILE_DATA["profiles"])
SYNC_S: float = _PROFILE_DATA["model"]["sync_s"]
"""Fitted: scale of the wait for the slowest worker, s (docs/scaling.md, 'The fit')."""


def interconnect(iid: str) -> Interconnect:
    """The catalog's link `iid`; ValueError naming it if unknown."""
    try:
        return INTERCONNECTS[iid]
    except KeyError:
        raise ValueError(f"unknown interconnect {iid!r}; known: {sorted(INTERCONNECTS)}") from None


def default_node(gpu_model: str) -> NodeShape:
    """The catalog's default node for `gpu_model`; ValueError naming the model if unknown."""
    try:
        return NODE_DEFAULTS[gpu_model]
    except KeyError:
        raise ValueError(
            f"no default node for GPU model {gpu_model!r}; known: {sorted(NODE_DEFAULTS)}"
        ) from None


def _check_node(node: NodeShape) -> None:
    if node.gpus_per_node < 1 or node.nics_per_node < 1:
        raise ValueError(
            f"node needs gpus_per_node >= 1 and nics_per_node >= 1, got {node.gpus_per_node}"
            f" and {node.nics_per_node}"
        )
    interconnect(node.intra_node)
    interconnect(node.inter_node)


def _base(profile: str) -> tuple[str, Mapping[str, Any], int]:
    """(base profile id, its scaling data, batch size) of `profile`; a batch-size profile
    (`resnet50@512`) shares its workload's data at its own batch size."""
    split = training.split_batch_profile(profile)
    base = split[0] if split else profile
    try:
        data = SCALING_PROFILES[base]
    except KeyError:
        raise ValueError(
            f"unknown profile {profile!r}; known: {hardware.profile_choices()}"
        ) from None
    if split:
        return base, data, split[1]
    batch = hardware.PROFILES[base].zeus_batch_size or data.get("batch_size", 1)
    return base, data, batch


def reference_step_s(profile: str) -> float:
    """Compute time of one step of `profile` on the reference GPU at its maximum limit, s.

    Measured workloads: Zeus's time per epoch at the GPU's maximum limit on the first of
    `measured_gpus` with a sweep at that batch size, over the steps of an epoch, converted
    to the reference GPU with `sim.models.hardware.speed`.
    """
    base, data, batch = _base(profile)
    if "step_s" in data:
        return float(data["step_s"])
    for gpu in data["measured_gpus"]:
        sweep = training.POWER_SWEEPS.get((gpu, base, batch))
        if sweep is not None:
            step_s = sweep.epoch_s[-1] / (data["samples_per_epoch"] / batch)
            return step_s * hardware.speed(gpu, profile)
    raise ValueError(f"profile {profile!r}: Zeus measured no time per epoch at batch {batch}")


def profile_workload(profile: str, gpu_model: str) -> Workload:
    """The workload of `profile` on one `gpu_model` at its maximum power limit."""
    _, p, batch = _base(profile)
    if gpu_model not in hardware.GPU_CATALOG:
        raise ValueError(f"unknown GPU model {gpu_model!r}")
    return Workload(
        step_compute_s=reference_step_s(profile) / hardware.speed(gpu_model, profile),
        grad_bytes=p["params_m"] * 1e6 * p["bytes_per_value"],
        overlap_frac=p["overlap_frac"],
        layers=p.get("layers", 0),
        hidden=p.get("hidden", 0),
        tokens_per_step=batch * p.get("seq_len", 0),
        bytes_per_value=p["bytes_per_value"],
        micro_batches=p.get("micro_batches", 0),
    )


# --- the model -------------------------------------------------------------------------------


def ring_allreduce_s(members: int, size_bytes: float, link: Interconnect, lanes: int = 1) -> float:
    """Time of a ring all-reduce of `size_bytes` among `members` over `link`, s.

    `lanes` parallel links share the bytes (a node's NIC ports). One member: 0.
    """
    if members <= 1:
        return 0.0
    steps = members - 1
    volume_bytes = 2.0 * steps / members * size_bytes
    return volume_bytes / (lanes * link.achieved_bytes_per_s) + 2.0 * steps * link.latency_s


def sync_wait_s(gpus: int) -> float:
    """Expected wait of a synchronous step of `gpus` workers for the slowest one, s.

    The expected maximum of n draws of a normal step-time jitter exceeds the mean by about
    sigma x sqrt(2 ln n); `SYNC_S` plays sigma and is fitted (docs/scaling.md).
    """
    return SYNC_S * math.sqrt(2.0 * math.log(gpus)) if gpus > 1 else 0.0


def _data_comm_s(w: Workload, gpus: int, node: NodeShape, nodes: int) -> float:
    """Exposed all-reduce time per step of data parallelism over `nodes` nodes, s: the
    largest node's ring, then the ring over the nodes."""
    k = min(gpus, node.gpus_per_node)
    allreduce_s = ring_allreduce_s(k, w.grad_bytes, interconnect(node.intra_node)) + (
        ring_allreduce_s(nodes, w.grad_bytes, interconnect(node.inter_node), node.nics_per_node)
    )
    return max(0.0, allreduce_s - w.overlap_frac * w.step_compute_s)


def _tensor_comm_s(w: Workload, gpus: int, node: NodeShape) -> tuple[float, float]:
    """(compute per GPU, exposed communication per step) of tensor parallelism inside a
    node, with data parallelism across nodes beyond one node."""
    degree = min(gpus, node.gpus_per_node)
    if gpus > node.gpus_per_node and gpus % node.gpus_per_node:
        raise ValueError(
            f"tensor parallel beyond one node needs a multiple of gpus_per_node"
            f" ({node.gpus_per_node}) GPUs, got {gpus}"
        )
    nodes = gpus // degree
    compute_s = w.step_compute_s / degree
    tensor_s = (
        4 * w.layers * ring_allreduce_s(degree, w.activation_bytes, interconnect(node.intra_node))
    )
    replica_allreduce_s = ring_allreduce_s(
        nodes, w.grad_bytes, interconnect(node.inter_node), node.nics_per_node
    )
    data_s = max(0.0, replica_allreduce_s - w.overlap_frac * compute_s)
    return compute_s, tensor_s + data_s


def _pipeline_comm_s(w: Workload, gpus: int, node: NodeShape, nodes: int) -> tuple[float, float]:
    """(compute per GPU, bubble plus point-to-point time per step) of a pipeline of `gpus`
    stages, one per GPU, over `nodes` nodes."""
    link = interconnect(node.inter_node if nodes > 1 else node.intra_node)
    compute_s = w.step_compute_s / gpus
    bubble_s = (gpus - 1) / w.micro_batches * compute_s
    p2p_s = 2.0 * w.activation_bytes / link.achieved_bytes_per_s + (
        2 * w.micro_batches * link.latency_s
    )
    return compute_s, bubble_s + p2p_s


def _needs_shapes(w: Workload, scheme: str, name: str) -> None:
    if not (w.layers > 0 and w.hidden > 0 and w.tokens_per_step > 0):
        raise ValueError(
            f"{scheme} parallel needs layers, hidden and tokens_per_step; {name} has none"
        )
    if scheme == "pipeline" and w.micro_batches < 1:
        raise ValueError(
            f"pipeline parallel needs micro_batches >= 1; {name} has {w.micro_batches}"
        )


def scaling_of(
    w: Workload,
    gpus: int,
    node: NodeShape,
    scheme: str = "data",
    name: str = "workload",
    nodes: int | None = None,
) -> ScalingPoint:
    """The scaling point of workload `w` on `gpus` GPUs laid out in nodes of shape `node`.

    `nodes` (None: ceil(gpus / node.gpus_per_node), the equal layout) is the number of nodes
    the GPUs are spread over when the shares are uneven, at most `node.gpus_per_node` GPUs
    on any one (e.g. 4 + 2 + 2: nodes of 4, 3 nodes); the inter-node all-reduce then runs
    over that many nodes. Tensor parallelism needs equal shares and takes no `nodes`.
    `name` names the workload in errors.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown parallel scheme {scheme!r}; known: {SCHEMES}")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValueError(f"gpus must be an integer >= 1, got {gpus!r}")
    _check_node(node)
    equal_nodes = math.ceil(gpus / node.gpus_per_node)
    if nodes is not None and not equal_nodes <= nodes <= gpus:
        raise ValueError(f"{gpus} GPUs in nodes of {node.gpus_per_node} span {nodes} nodes")
    if nodes is not None and nodes != equal_nodes and scheme == "tensor":
        raise ValueError("tensor parallelism over nodes needs equal shares, not uneven ones")
    nodes = equal_nodes if nodes is None else nodes
    if gpus == 1:
        return ScalingPoint(1.0, 1.0, 0.0, 1)
    if scheme == "data" and w.grad_bytes == 0:
        return ScalingPoint(float(gpus), 1.0, 0.0, nodes)
    if scheme == "data":
        compute_s = w.step_compute_s
        lost_s = _data_comm_s(w, gpus, node, nodes)
    elif scheme == "tensor":
        _needs_shapes(w, scheme, name)
        compute_s, lost_s = _tensor_comm_s(w, gpus, node)
    else:
        _needs_shapes(w, scheme, name)
        compute_s, lost_s = _pipeline_comm_s(w, gpus, node, nodes)
    lost_s += sync_wait_s(gpus)
    efficiency = compute_s / (compute_s + lost_s)
    return ScalingPoint(gpus * efficiency, efficiency, 1.0 - efficiency, nodes)


@functools.lru_cache(maxsize=65536)
def scaling(
    profile: str,
    gpu_model: str,
    gpus: int,
    scheme: str = "data",
    node: NodeShape | None = None,
    nodes: int | None = None,
) -> ScalingPoint:
    """Throughput of `gpus` GPUs of `gpu_model` running `profile` under `scheme`, relative to
    one such GPU, with the communication's share of time.

    `node=None` is the catalog's default node of `gpu_model`; `nodes` the nodes spanned by
    an uneven split (`scaling_of`; None: the equal layout). One GPU is exactly (1, 1, 0, 1).
    Unknown profile, GPU model, scheme or link: ValueError naming the value.
    """
    shape = default_node(gpu_model) if node is None else node
    workload = profile_workload(profile, gpu_model)
    return scaling_of(workload, gpus, shape, scheme, repr(profile), nodes)


def comm_power_frac(gpu_model: str, profile: str) -> float:
    """GPU power while waiting on communication relative to its power while computing.

    Assumption (docs/scaling.md): a GPU waiting on a collective draws its active idle power
    (`GpuSpec.active_idle_w`: idle plus the memory devices at full clock; NCCL kernels keep
    a few SMs busy moving bytes), against the profile's uncapped draw
    (`sim.models.hardware.curve`). Energy of a step = P_compute x compute time + P_comm x the rest.
    """
    _base(profile)
    if gpu_model not in hardware.GPU_CATALOG:
        raise ValueError(f"unknown GPU model {gpu_model!r}")
    spec = hardware.GPU_CATALOG[gpu_model]
    _, uncapped_w = hardware.curve(gpu_model, profile)
    return min(1.0, spec.active_idle_w / uncapped_w)
