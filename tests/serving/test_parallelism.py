"""Tensor and expert parallelism of a replica (issue 33, part 5).

Specification: docs/serving.md "Parallelism". A tensor-parallel degree the model's heads
cannot take, or experts that do not divide, is a one-line error naming the key and the
model (from `performance`, at scenario load and from the CLI with exit 2). A replica larger
than a node pays inter-node collectives from the interconnect catalog.
"""

from __future__ import annotations

import pytest

import sim
from sim.models.llm_parallel import SHAPES, Layout, layout_for, plan
from sim.models.llm_performance import performance, serving_model
from sim.models.scaling import interconnect, ring_allreduce_s
from tests.conftest import make_scenario, one_line_cli_error
from tests.serving.conftest import service, service_toml, sites

LLAMA_8B, LLAMA_70B = "Llama-3.1-8B-Instruct", "Llama-3.1-70B-Instruct"
QWEN_MOE = "Qwen3-235B-A22B-Instruct-2507"


def test_every_catalog_model_has_a_shape():
    assert set(serving_model().models) <= set(SHAPES)


@pytest.mark.parametrize(
    ("model", "gpus", "parallel", "message"),
    [
        (LLAMA_8B, 3, {}, "gpus_per_replica = 3: Llama-3.1-8B-Instruct has 32 attention heads"),
        (LLAMA_70B, 6, {}, "gpus_per_replica = 6: Llama-3.1-70B-Instruct has 64 attention heads"),
        ("gemma-3-12b-it", 32, {}, "gemma-3-12b-it has 16 attention heads"),
        (LLAMA_8B, 8, {"tp": 4}, "parallel.tp = 4: Llama-3.1-8B-Instruct is dense"),
        (LLAMA_8B, 8, {"tp": 3}, "parallel.tp = 3 must divide gpus_per_replica = 8"),
        (LLAMA_8B, 8, {"ep": 8}, "parallel.ep = 8: Llama-3.1-8B-Instruct is dense"),
        (QWEN_MOE, 8, {"tp": 8, "ep": 4}, "parallel.ep = 4: the experts spread over every GPU"),
        (QWEN_MOE, 6, {}, "parallel.ep = 6: Qwen3-235B-A22B-Instruct-2507's 128 experts"),
        (
            "NVIDIA-Nemotron-Nano-9B-v2",
            5,
            {},
            "gpus_per_replica = 5: NVIDIA-Nemotron-Nano-9B-v2 has 8 KV heads",
        ),
    ],
)
def test_a_layout_the_model_cannot_use_is_one_line_naming_the_key_and_the_model(
    model, gpus, parallel, message
):
    layout = Layout(parallel.get("tp"), parallel.get("ep"), 64)
    with pytest.raises(ValueError, match=message) as e:
        performance(model, "H100", gpus, 8, layout=layout)
    assert "\n" not in str(e.value)


def test_kv_heads_are_replicated_when_tensor_parallelism_is_a_multiple_of_them():
    # 8 KV heads over 16 GPUs: each is held twice (vLLM's QKVParallelLinear)
    assert plan(LLAMA_70B, False, 80, 0, 16, Layout(gpus_per_node=16)).tp == 16


def test_a_replica_within_a_node_pays_no_inter_node_collectives():
    p = plan(LLAMA_70B, False, 80, 0, 8, layout_for("H100-SXM"))
    assert (p.nodes, p.comm_fixed_s, p.comm_per_token_s) == (1, 0.0, 0.0)


def test_tensor_parallelism_across_nodes_pays_two_ring_all_reduces_per_layer():
    node = layout_for("H100-SXM")
    assert node.nics_per_node == 8  # the NICs do not share one all-reduce
    p = plan(LLAMA_70B, False, 80, 0, 16, node)
    ib = interconnect("IB-NDR")
    tokens = 256
    expected = 2 * 80 * ring_allreduce_s(2, tokens * 8192 * 2.0, ib)  # at one NIC's bandwidth
    assert p.nodes == 2 and p.comm_fixed_s > 0
    assert p.comm_fixed_s + p.comm_per_token_s * tokens == pytest.approx(expected, rel=1e-12)


def test_expert_parallelism_across_nodes_pays_the_all_to_all():
    node = layout_for("H100-SXM")
    p = plan(QWEN_MOE, True, 94, 94, 16, node)
    ib = interconnect("IB-NDR")
    # per MoE layer: each token's 8 expert copies, half of them off the node, FP8 out and
    # BF16 back, over both nodes' 8 NICs
    per_token = 94 * 8 * 4096 * 3.0 * 0.5 / (2 * 8 * ib.achieved_bytes_per_s)
    assert p.comm_per_token_s == pytest.approx(per_token, rel=1e-12)
    assert p.comm_fixed_s == pytest.approx(94 * 2 * ib.latency_s)


def test_a_replica_spanning_nodes_is_slower_per_iteration_than_on_one_big_node():
    spanning = performance(LLAMA_70B, "H100", 16, 256, 1000, 300)
    one_node = performance(LLAMA_70B, "H100", 16, 256, 1000, 300, layout=Layout(gpus_per_node=16))
    assert spanning.itl_median_ms > one_node.itl_median_ms
    assert spanning.throughput_tokens_per_s < one_node.throughput_tokens_per_s
    assert any("spans 2 nodes" in w for w in spanning.extrapolated_why)
    assert not one_node.extrapolated


def test_more_gpus_serve_more_tokens_when_the_batch_may_grow():
    """Within a node a dense replica's throughput grows with its GPUs (more KV cache, more
    bandwidth) as long as max_batch lets the batch grow; an MoE replica's keeps growing
    across nodes (expert parallel: each GPU's own NIC)."""
    dense = [
        performance(LLAMA_70B, "H100", n, 4096, 1000, 300).throughput_tokens_per_s
        for n in (2, 4, 8)
    ]
    moe = [
        performance(QWEN_MOE, "H100", n, 4096, 1000, 300).throughput_tokens_per_s
        for n in (8, 16, 32)
    ]
    assert dense == sorted(dense) and moe == sorted(moe)


def test_tensor_parallelism_across_nodes_serves_less_than_within_one():
    """Two all-reduces per layer over one NIC (as measured, tests/validation/
    test_parallel_vidur.py) cost more than the second node's GPUs give."""
    one_node = performance(LLAMA_70B, "H100", 8, 1024, 1000, 300).throughput_tokens_per_s
    two_nodes = performance(LLAMA_70B, "H100", 16, 1024, 1000, 300).throughput_tokens_per_s
    assert two_nodes < one_node


def test_a_replica_across_nodes_of_a_gpu_without_a_network_is_refused(catalog_restored):
    with pytest.raises(ValueError, match="spans 2 nodes of 8 GPUs, but the GPU model has no"):
        plan(LLAMA_70B, False, 80, 0, 16, Layout())


# --- scenarios ---------------------------------------------------------------------------


def test_a_scenario_refuses_an_unusable_tensor_parallel_degree():
    h100 = sites("H100-SXM")
    with pytest.raises(sim.ScenarioError, match=r"services\[0\]: gpus_per_replica = 3: Llama"):
        make_scenario(sites=h100, services=[service("H100-SXM", gpus_per_replica=3)])
    with pytest.raises(sim.ScenarioError, match=r"services\[0\]: parallel.tp = 2 must divide"):
        make_scenario(
            sites=h100, services=[service("H100-SXM", gpus_per_replica=3, parallel={"tp": 2})]
        )


def test_the_cli_refuses_an_unusable_tensor_parallel_degree_with_exit_2(tmp_path, capsys):
    extra = service_toml("A100-80GB", gpus_per_replica=3)
    line = one_line_cli_error(tmp_path, capsys, {}, extra)
    assert "services[0]: gpus_per_replica = 3: Llama-3.1-8B-Instruct has 32 attention" in line


def test_a_service_spanning_the_sites_nodes_pays_the_network():
    """The site's gpus_per_node decides whether a replica spans nodes."""
    runs = {}
    for per_node in (8, 16):
        scenario = make_scenario(
            sites=sites("H100-SXM", 16, gpus_per_node=per_node),
            services=[service("H100-SXM", gpus_per_replica=16, model=LLAMA_70B)],
            duration_h=1.0,
        )
        runs[per_node] = sim.simulate(scenario, "run_now")
    spans = runs[8].meta["serving"]["chat"][LLAMA_70B]
    assert spans["extrapolated"] and "spans 2 nodes" in spans["why"][-1]
    assert runs[16].meta["serving"]["chat"][LLAMA_70B] == {"extrapolated": False, "why": []}
