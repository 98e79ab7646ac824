"""The multi-GPU scaling model (sim/models/scaling.py): its catalog, its invariants, and its check
against published scaling figures (docs/scaling.md, "Check against published figures")."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from importlib import resources

import pytest

from sim.models import hardware, scaling, training
from sim.models.scaling import NodeShape, ScalingPoint, Workload, scaling_of

TOLERANCE_PP = 10.0
"""Largest allowed |model - published| efficiency, percentage points: the published figures
themselves move by about this much with software alone (NVIDIA's ResNet-50 on the same DGX
A100: 84% in mixed precision, 96.5% in TF32), and a scheduler needs the level, not the
third digit."""

# --- published configurations -----------------------------------------------------------------

DGX_A100 = NodeShape(8, "NVLink3", "IB-HDR", 8)  # DGX A100 datasheet
DGX1_V100 = NodeShape(8, "NVLink2", "IB-EDR", 4)  # DGX-1 (V100)
DGX1_P100 = NodeShape(8, "NVLink1", "IB-EDR", 4)  # DGX-1 (P100); single-node points only
BIG_BASIN = NodeShape(8, "NVLink1", "Eth-50G", 1)  # Goyal et al. 2017, sec. 5.1
HOROVOD_SERVER = NodeShape(4, "PCIe3", "Eth-25G", 1)  # Horovod docs: 4 Pascal GPUs, 25 GbE RoCE
DGX2H = NodeShape(16, "NVLink2", "IB-EDR", 8)  # Shoeybi et al. 2019, sec. 5: DGX-2H

FP32 = 4
FP16 = 2
OVERLAP = 0.5  # the profiles' overlap_frac (scaling_profiles.toml)

# Single-GPU throughputs, images/s, and batch per GPU
DLE_A100_AMP = (2470.0, 256)  # DLE ResNet-50 v1.5 PyTorch README, DGX A100 80GB, mixed precision
DLE_V100_AMP = (1200.0, 256)  # same README, DGX-1 V100 16GB, mixed precision
DLE_A100_TF32 = (938.0, 256)  # same README, DGX A100 80GB, TF32
TFB_P100 = {  # tensorflow.org benchmarks, DGX-1 P100, synthetic data, batch 64
    "inception_v3": 142.0,
    "resnet50": 219.0,
    "resnet152": 91.8,
    "vgg16": 154.0,
}
TFB_P100_RN50_BATCH32 = 195.0  # same page, "other results", batch 32
PARAMS_M = {  # torchvision model table [TV]
    "resnet50": 25.56,
    "resnet101": 44.55,
    "inception_v3": 23.83,
    "vgg16": 138.36,
}
GFLOPS = {"resnet50": 4.13, "resnet101": 7.87, "resnet152": 11.60}  # [TV]
P100_PCIE_OVER_SXM2 = 9.3 / 10.6
"""FP32 peak of the P100 PCIe over the P100 SXM2 (NVIDIA Tesla P100 datasheet): the Horovod
servers hold 4 PCIe cards (our reading of '4 Pascal GPUs' per server without NVLink), the
tensorflow.org figures are of the DGX-1's SXM2 modules."""


def cnn(images_per_s: float, batch: int, params_m: float, bytes_per_value: int = FP32) -> Workload:
    """A data-parallel CNN job whose one-GPU step is `batch` images at `images_per_s`."""
    return Workload(batch / images_per_s, params_m * 1e6 * bytes_per_value, OVERLAP)


def resnet101_p100_images_per_s() -> float:
    """P100 ResNet-101 throughput interpolated by GFLOPs between the published ResNet-50 and
    ResNet-152 per-image times (our estimate; the Horovod docs give no single-GPU figure)."""
    t50, t152 = 1 / TFB_P100["resnet50"], 1 / TFB_P100["resnet152"]
    frac = (GFLOPS["resnet101"] - GFLOPS["resnet50"]) / (GFLOPS["resnet152"] - GFLOPS["resnet50"])
    return 1.0 / (t50 + frac * (t152 - t50))


def megatron(hidden: int, layers: int, grad_params: float = 0.0) -> Workload:
    """A Megatron-LM GPT-2 configuration (Shoeybi et al. 2019, Table 1): batch 8 x 1024
    tokens; one step's compute on one GPU at the paper's single-GPU baseline of 39 TFLOP/s,
    counting 72 x layers x hidden^2 FLOPs per token (forward and backward)."""
    tokens = 8 * 1024
    flops = 72.0 * layers * hidden**2 * tokens
    return Workload(
        flops / 39e12,
        grad_params * FP16,
        0.0,
        layers=layers,
        hidden=hidden,
        tokens_per_step=tokens,
        bytes_per_value=FP16,
    )


@dataclass(frozen=True)
class Published:
    name: str
    source: str
    workload: Workload
    gpus: int
    node: NodeShape
    published: float
    """Published efficiency (throughput over linear scaling), fraction."""
    scheme: str = "data"
    baseline_gpus: int = 1
    """The GPU count the published efficiency is relative to."""
    fitted: bool = False

    def model(self) -> float:
        e = scaling_of(self.workload, self.gpus, self.node, self.scheme).efficiency
        if self.baseline_gpus > 1:
            e /= scaling_of(self.workload, self.baseline_gpus, self.node, self.scheme).efficiency
        return e


FIT_POINTS = (
    Published(
        "ResNet-50 AMP, DGX A100, 8 GPUs",
        "DLE ResNet-50 v1.5 PyTorch README, Training performance: DGX A100 (8x A100 80GB)",
        cnn(*DLE_A100_AMP, PARAMS_M["resnet50"]),
        8,
        DGX_A100,
        6.72 / 8,
        fitted=True,
    ),
    Published(
        "ResNet-50 AMP, DGX-1 V100, 8 GPUs",
        "DLE ResNet-50 v1.5 PyTorch README, Training performance: DGX-1 16GB (8x V100 16GB)",
        cnn(*DLE_V100_AMP, PARAMS_M["resnet50"]),
        8,
        DGX1_V100,
        6.93 / 8,
        fitted=True,
    ),
)

CHECK_POINTS = (
    Published(
        "ResNet-50 TF32, DGX A100, 8 GPUs",
        "DLE ResNet-50 v1.5 PyTorch README, Training performance: DGX A100 (8x A100 80GB)",
        cnn(*DLE_A100_TF32, PARAMS_M["resnet50"]),
        8,
        DGX_A100,
        7.72 / 8,
    ),
    Published(
        "ResNet-50, DGX-1 P100, 8 GPUs",
        "tensorflow.org Benchmarks, DGX-1 (P100), training synthetic data, batch 64",
        cnn(TFB_P100["resnet50"], 64, PARAMS_M["resnet50"]),
        8,
        DGX1_P100,
        1734 / (8 * TFB_P100["resnet50"]),
    ),
    Published(
        "Inception V3, DGX-1 P100, 8 GPUs",
        "tensorflow.org Benchmarks, DGX-1 (P100), training synthetic data, batch 64",
        cnn(TFB_P100["inception_v3"], 64, PARAMS_M["inception_v3"]),
        8,
        DGX1_P100,
        1131 / (8 * TFB_P100["inception_v3"]),
    ),
    Published(
        "VGG-16, DGX-1 P100, 8 GPUs",
        "tensorflow.org Benchmarks, DGX-1 (P100), training synthetic data, batch 64",
        cnn(TFB_P100["vgg16"], 64, PARAMS_M["vgg16"]),
        8,
        DGX1_P100,
        1081 / (8 * TFB_P100["vgg16"]),
    ),
    Published(
        "ResNet-50, 32 Big Basin servers (256 P100), 50 GbE, vs 8 GPUs",
        "Goyal et al. 2017, 'Accurate, Large Minibatch SGD', abstract (~90% from 8 to 256 GPUs)",
        cnn(TFB_P100_RN50_BATCH32, 32, PARAMS_M["resnet50"]),
        256,
        BIG_BASIN,
        0.90,
        baseline_gpus=8,
    ),
    Published(
        "Inception V3, 128 servers x 4 Pascal, 25 GbE RoCE",
        "Horovod docs/benchmarks.md (Sergeev & Del Balso 2018): 512 GPUs, 90%",
        cnn(TFB_P100["inception_v3"] * P100_PCIE_OVER_SXM2, 64, PARAMS_M["inception_v3"]),
        512,
        HOROVOD_SERVER,
        0.90,
    ),
    Published(
        "ResNet-101, 128 servers x 4 Pascal, 25 GbE RoCE",
        "Horovod docs/benchmarks.md (Sergeev & Del Balso 2018): 512 GPUs, 90%",
        cnn(resnet101_p100_images_per_s() * P100_PCIE_OVER_SXM2, 64, PARAMS_M["resnet101"]),
        512,
        HOROVOD_SERVER,
        0.90,
    ),
    Published(
        "VGG-16, 128 servers x 4 Pascal, 25 GbE RoCE",
        "Horovod docs/benchmarks.md (Sergeev & Del Balso 2018): 512 GPUs, 68%",
        cnn(TFB_P100["vgg16"] * P100_PCIE_OVER_SXM2, 64, PARAMS_M["vgg16"]),
        512,
        HOROVOD_SERVER,
        0.68,
    ),
    Published(
        "GPT-2 2.5B, 2-way tensor parallel, DGX-2H",
        "Shoeybi et al. 2019 (Megatron-LM), Figure 5 / Table 1: weak scaling 96%",
        megatron(1920, 54),
        2,
        DGX2H,
        0.96,
        scheme="tensor",
    ),
    Published(
        "GPT-2 4.2B, 4-way tensor parallel, DGX-2H",
        "Shoeybi et al. 2019 (Megatron-LM), Figure 5 / Table 1: weak scaling 82%",
        megatron(2304, 64),
        4,
        DGX2H,
        0.82,
        scheme="tensor",
    ),
    Published(
        "GPT-2 8.3B, 8-way tensor parallel, DGX-2H",
        "Shoeybi et al. 2019 (Megatron-LM), sec. 5.1 / Figure 5: 77% of linear scaling",
        megatron(3072, 72),
        8,
        DGX2H,
        0.77,
        scheme="tensor",
    ),
)

PUBLISHED = FIT_POINTS + CHECK_POINTS


@pytest.mark.parametrize("point", PUBLISHED, ids=lambda p: p.name)
def test_model_efficiency_is_within_tolerance_of_each_published_figure(point: Published) -> None:
    error_pp = 100.0 * (point.model() - point.published)
    assert abs(error_pp) <= TOLERANCE_PP, f"{point.name}: {error_pp:+.1f} pp"


def test_the_checks_cover_multi_node_and_tensor_parallel_points() -> None:
    assert any(p.gpus > p.node.gpus_per_node for p in CHECK_POINTS)
    assert any(p.scheme == "tensor" for p in CHECK_POINTS)
    assert len(CHECK_POINTS) >= 4


def test_sync_s_is_the_fit_on_the_fit_points() -> None:
    # at the fit points the all-reduce hides behind the backward pass, so the step's
    # whole loss is the wait: Tc (1/e - 1) = sync_s x sqrt(2 ln 8)
    for p in FIT_POINTS:
        assert scaling_of(replace(p.workload, step_compute_s=1e3), 8, p.node).efficiency > 0.999
    waits_s = [p.workload.step_compute_s * (1 / p.published - 1) for p in FIT_POINTS]
    fitted_s = sum(waits_s) / len(waits_s) / math.sqrt(2 * math.log(8))
    assert scaling.SYNC_S == pytest.approx(fitted_s, abs=5e-5)


# --- invariants --------------------------------------------------------------------------------

PLAIN_PROFILES = tuple(p for p in hardware.PROFILES if training.split_batch_profile(p) is None)
PROFILES = (*PLAIN_PROFILES, "resnet50@64", "bert-squad@8", "shufflenetv2@4096")
TRANSFORMERS = ("bert-squad", "bert-sentiment140", "compute-bound")


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-SXM", "T4", "V100"])
def test_one_gpu_is_exactly_the_identity(profile: str, gpu: str) -> None:
    for scheme in ("data",) + (("tensor", "pipeline") if profile in TRANSFORMERS else ()):
        assert scaling.scaling(profile, gpu, 1, scheme) == ScalingPoint(1.0, 1.0, 0.0, 1)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-SXM", "L4"])
def test_data_parallel_efficiency_never_rises_with_gpus(profile: str, gpu: str) -> None:
    points = [scaling.scaling(profile, gpu, n) for n in range(1, 129)]
    effs = [p.efficiency for p in points]
    assert all(b <= a + 1e-12 for a, b in zip(effs, effs[1:], strict=False))
    assert all(0 < p.efficiency <= 1 and p.speedup <= n for n, p in enumerate(points, 1))
    assert all(p.comm_time_frac == pytest.approx(1 - p.efficiency) for p in points)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_faster_link_never_lowers_efficiency(profile: str) -> None:
    slow_to_fast_intra = ("PCIe3", "PCIe4", "PCIe5", "NVLink2", "NVLink3", "NVLink4")
    slow_to_fast_net = ("Eth-25G", "Eth-50G", "Eth-100G", "IB-HDR", "IB-NDR")
    for n in (4, 8, 32):
        intra = [
            scaling.scaling(profile, "A100-80GB", n, node=NodeShape(8, i, "IB-HDR")).efficiency
            for i in slow_to_fast_intra
        ]
        net = [
            scaling.scaling(profile, "A100-80GB", n, node=NodeShape(8, "NVLink3", x)).efficiency
            for x in slow_to_fast_net
        ]
        for effs in (intra, net):
            assert all(b >= a for a, b in zip(effs, effs[1:], strict=False))


def test_bandwidth_matters_when_communication_is_exposed() -> None:
    slow = scaling.scaling("compute-bound", "H100-SXM", 64, node=NodeShape(8, "NVLink4", "Eth-25G"))
    fast = scaling.scaling(
        "compute-bound", "H100-SXM", 64, node=NodeShape(8, "NVLink4", "IB-NDR", 8)
    )
    assert slow.efficiency < fast.efficiency - 0.1


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("gpu", ["V100", "H100-SXM"])
def test_spanning_nodes_never_costs_less_than_one_node_at_equal_gpus(
    profile: str, gpu: str
) -> None:
    one_node = scaling.scaling(profile, gpu, 8, node=NodeShape(8, "PCIe4", "Eth-100G"))
    two_nodes = scaling.scaling(profile, gpu, 8, node=NodeShape(4, "PCIe4", "Eth-100G"))
    assert (one_node.nodes, two_nodes.nodes) == (1, 2)
    assert two_nodes.efficiency <= one_node.efficiency


@pytest.mark.parametrize("profile", ["bert-squad", "bert-sentiment140", "compute-bound"])
def test_spanning_nodes_costs_more_once_communication_outlasts_the_overlap(profile: str) -> None:
    # on an H100 a BERT step is short enough that its all-reduce is no longer hidden (a
    # ResNet-50's 102 MB still hides behind half its step, as Goyal et al. argue)
    one_node = scaling.scaling(profile, "H100-SXM", 8, node=NodeShape(8, "PCIe4", "Eth-100G"))
    two_nodes = scaling.scaling(profile, "H100-SXM", 8, node=NodeShape(4, "PCIe4", "Eth-100G"))
    assert two_nodes.efficiency < one_node.efficiency


def test_a_faster_gpu_spends_a_larger_share_of_its_step_communicating() -> None:
    node = NodeShape(8, "PCIe4", "Eth-100G")
    by_speed = sorted(
        ["T4", "A40", "A100-80GB", "H100-SXM"], key=lambda g: hardware.speed(g, "bert-squad")
    )
    fracs = [scaling.scaling("bert-squad", g, 16, node=node).comm_time_frac for g in by_speed]
    assert fracs == sorted(fracs) and fracs[0] < fracs[-1]


def test_inference_replicas_scale_linearly() -> None:
    assert scaling.scaling("inference", "L4", 24) == ScalingPoint(24.0, 1.0, 0.0, 3)


def test_tensor_parallel_costs_more_than_data_parallel_for_a_small_model() -> None:
    data = scaling.scaling("bert-squad", "A100-80GB", 8)
    tensor = scaling.scaling("bert-squad", "A100-80GB", 8, "tensor")
    assert tensor.efficiency < data.efficiency


def test_tensor_parallel_across_nodes_runs_replicas_per_node() -> None:
    point = scaling.scaling("compute-bound", "A100-80GB", 32, "tensor")
    assert point.nodes == 4
    assert point.efficiency < scaling.scaling("compute-bound", "A100-80GB", 8, "tensor").efficiency


def test_pipeline_bubble_follows_stages_over_micro_batches() -> None:
    # no communication and no wait: efficiency m / (m + p - 1)
    w = Workload(1.0, 0.0, 0.0, layers=1, hidden=1, tokens_per_step=1, micro_batches=8)
    point = scaling_of(w, 4, NodeShape(8, "NVLink4", "IB-NDR"), "pipeline")
    wait_share = scaling.sync_wait_s(4) / 0.25
    assert point.efficiency == pytest.approx(8 / (8 + 3 + 8 * wait_share), rel=1e-3)


def test_ring_allreduce_moves_twice_the_buffer() -> None:
    link = scaling.interconnect("IB-HDR")
    t = scaling.ring_allreduce_s(1000, 1e9, link)
    assert t == pytest.approx(2 * 0.999 * 1e9 / (200e9 / 8 * 0.85) + 2 * 999 * link.latency_s)
    assert scaling.ring_allreduce_s(1, 1e9, link) == 0.0


def test_comm_power_is_a_fraction_of_compute_power() -> None:
    for gpu in ("A100-80GB", "H100-SXM", "T4"):
        for profile in PROFILES:
            assert 0 < scaling.comm_power_frac(gpu, profile) <= 1


def test_reference_step_of_resnet50_matches_nvidia_a100_tf32_throughput() -> None:
    # derived from Zeus's V100 epoch time; NVIDIA measured 938 img/s at batch 256 [DLE-RN50]
    assert scaling.reference_step_s("resnet50") == pytest.approx(256 / 938, rel=0.05)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: scaling.scaling("gpt9", "A100-80GB", 8), "'gpt9'"),
        (lambda: scaling.scaling("resnet50", "A100-80GB", 8, "expert"), "'expert'"),
        (
            lambda: scaling.scaling("resnet50", "B300", 8, node=NodeShape(8, "NVLink4", "IB-NDR")),
            "'B300'",
        ),
        (lambda: scaling.scaling("resnet50", "A100-80GB", 0), "0"),
        (
            lambda: scaling.scaling(
                "resnet50", "A100-80GB", 8, node=NodeShape(8, "NVLink9", "IB-HDR")
            ),
            "'NVLink9'",
        ),
        (
            lambda: scaling.scaling(
                "resnet50", "A100-80GB", 8, node=NodeShape(8, "NVLink3", "IB-XDR")
            ),
            "'IB-XDR'",
        ),
        (
            lambda: scaling.scaling(
                "resnet50", "A100-80GB", 8, node=NodeShape(0, "NVLink3", "IB-HDR")
            ),
            "0",
        ),
        (lambda: scaling.scaling("resnet50", "A100-80GB", 8, "tensor"), "'resnet50'"),
        (lambda: scaling.scaling("compute-bound", "A100-80GB", 12, "tensor"), "12"),
        (lambda: scaling.default_node("B300"), "'B300'"),
    ],
)
def test_bad_input_raises_value_error_naming_the_value(call, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        call()


# --- catalog -----------------------------------------------------------------------------------


def _toml(name: str) -> dict:
    return tomllib.loads(resources.files("sim").joinpath(f"data/{name}").read_text("utf-8"))


def test_every_interconnect_number_has_a_source() -> None:
    for iid, f in _toml("interconnects.toml")["interconnects"].items():
        numbers = {k for k, v in f.items() if isinstance(v, int | float)}
        assert numbers <= set(f["sources"]), iid
        assert all(f["sources"][k].strip() for k in numbers), iid


def test_every_gpu_model_has_a_sourced_default_node_on_catalog_links() -> None:
    nodes = _toml("interconnects.toml")["nodes"]
    assert set(nodes) == set(hardware.GPU_CATALOG)
    for gid, f in nodes.items():
        assert f["source"].strip(), gid
        node = scaling.default_node(gid)
        assert scaling.interconnect(node.intra_node).kind == "intra", gid
        assert scaling.interconnect(node.inter_node).kind == "network", gid


def test_every_profile_has_scaling_numbers_with_sources() -> None:
    profiles = _toml("scaling_profiles.toml")["profiles"]
    assert set(profiles) == set(PLAIN_PROFILES)
    for pid, f in profiles.items():
        numbers = {k for k, v in f.items() if isinstance(v, int | float)} - {"bytes_per_value"}
        assert numbers <= set(f["sources"]), pid
        assert ("step_s" in f) != ("measured_gpus" in f), pid


def test_every_measured_batch_size_has_a_reference_step() -> None:
    for profile in hardware.PROFILES:
        assert scaling.reference_step_s(profile) > 0, profile


def test_a_larger_batch_takes_longer_steps_and_scales_better() -> None:
    small, large = "resnet50@64", "resnet50@512"
    assert scaling.reference_step_s(small) < scaling.reference_step_s(large)
    assert (
        scaling.scaling(small, "H100-SXM", 64).efficiency
        < scaling.scaling(large, "H100-SXM", 64).efficiency
    )
