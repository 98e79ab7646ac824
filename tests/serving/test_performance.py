"""sim.models.llm_performance: what a replica of an LLM delivers, and how well it is calibrated.

The accuracy and shipped-file tests read the ML.ENERGY leaderboard data in
../shared/data/mlenergy-leaderboard and skip without it.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import asdict, fields, replace

import numpy as np
import pytest

import sim.serving as serving
from sim.models.llm_roofline import Inputs, evaluate
from sim.serving import ModelSpec, performance, serving_model
from tests.conftest import REPO, SHARED_DATA

LEADERBOARD = SHARED_DATA / "mlenergy-leaderboard"
needs_data = pytest.mark.skipif(
    not (LEADERBOARD / "README.md").exists(),
    reason=f"the ML.ENERGY leaderboard data is not in {LEADERBOARD}",
)
LOMO_TARGET = 0.15


def calibration():
    spec = importlib.util.spec_from_file_location(
        "calibrate_serving", REPO / "scripts" / "calibrate_serving.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- calibration ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lomo():
    """Leave-one-model-out predictions: one row per lm-arena-chat configuration."""
    cal = calibration()
    f, catalog = cal.load_models(LEADERBOARD)
    out = cal.leave_one_model_out(f, catalog, serving_model().params.kappa)
    assert len(out) == 328 and out["model"].nunique() == 18
    return out


@needs_data
def test_leave_one_model_out_throughput_is_within_the_target(lomo):
    """Refit without each model, predict its configurations: throughput MAPE <= 15%."""
    assert lomo["throughput_ape"].mean() <= LOMO_TARGET


@needs_data
def test_leave_one_model_out_energy_per_token_is_within_the_target(lomo):
    """Refit without each model, predict its configurations: energy per token MAPE <= 15%."""
    assert lomo["energy_ape"].mean() <= LOMO_TARGET


@needs_data
def test_shipped_parameters_are_what_the_script_fits():
    cal = calibration()
    f, catalog = cal.load_tasks(LEADERBOARD)
    shipped = serving_model().params
    refit = cal.fit(f[cal.in_scope(f)], catalog, shipped.kappa)
    for name in cal.FITTED:
        assert getattr(refit, name) == pytest.approx(getattr(shipped, name), rel=1e-3, abs=1e-3)


def test_shipped_file_loads_with_finite_parameters():
    sm = serving_model()
    assert all(math.isfinite(v) and v >= 0 for v in asdict(sm.params).values())
    assert len(serving.MODELS) == 23 and "Llama-3.1-70B-Instruct" in serving.MODELS
    assert "Qwen3-Coder-480B-A35B-Instruct" in serving.MODELS  # from sourcegraph-fim
    assert "gpt-oss-120b" in serving.MODELS  # from llm_shapes.toml, beyond the calibration data
    assert "ml-energy/leaderboard" in sm.meta["source"]


# --- behaviour --------------------------------------------------------------------------------


def test_a_point_has_consistent_units():
    pt = performance("Llama-3.1-70B-Instruct", "H100", 4, 256)
    assert pt.gpu == "H100-SXM" and not pt.extrapolated
    assert pt.energy_per_token_j == pytest.approx(pt.power_w / pt.throughput_tokens_per_s)
    assert 4 * 70 < pt.power_w <= 4 * 700
    assert pt.batch == pytest.approx(256, rel=1e-3)
    # every sequence gets one token per iteration: throughput <= batch / ITL
    assert pt.throughput_tokens_per_s <= pt.batch / (pt.itl_median_ms / 1e3)


@pytest.mark.parametrize("model", ["Llama-3.1-8B-Instruct", "Qwen3-30B-A3B-Instruct-2507"])
def test_larger_batches_raise_throughput_and_latency_and_lower_energy_per_token(model):
    points = [performance(model, "H100-SXM", 1, b) for b in (1, 8, 32, 128, 512)]
    for a, b in zip(points, points[1:], strict=False):
        assert b.throughput_tokens_per_s > a.throughput_tokens_per_s
        assert b.itl_median_ms > a.itl_median_ms
        assert b.energy_per_token_j < a.energy_per_token_j


def test_large_max_batch_saturates_at_the_kv_cache_capacity():
    big = performance("Llama-3.1-8B-Instruct", "H100-SXM", 1, 100_000)
    bigger = performance("Llama-3.1-8B-Instruct", "H100-SXM", 1, 200_000)
    assert big.batch < 0.05 * big.max_batch
    assert big.batch == pytest.approx(big.kv_capacity_seqs, rel=0.01)
    assert bigger.throughput_tokens_per_s == pytest.approx(big.throughput_tokens_per_s, rel=1e-3)


@pytest.mark.parametrize("gpu", ["H100-SXM", "B200", "A100-80GB"])
def test_longer_answers_lower_throughput_and_raise_energy_per_token(gpu):
    """At the lm-arena-chat prompt length the KV cache read per token grows with the context,
    far beyond the measured answers (370-1,460 tokens). Below ~1,000 tokens energy per token
    is roughly flat down to ~400 tokens and rises for shorter answers, which pay for their
    prefill (test_short_answers_pay_for_their_prefill)."""
    lengths = (1000, 2000, 8000, 32000)
    points = [performance("Llama-3.1-70B-Instruct", gpu, 8, 256, None, n) for n in lengths]
    for a, b in zip(points, points[1:], strict=False):
        assert math.isfinite(b.throughput_tokens_per_s) and math.isfinite(b.energy_per_token_j)
        assert b.throughput_tokens_per_s < a.throughput_tokens_per_s
        assert b.energy_per_token_j > a.energy_per_token_j
        assert b.context_tokens > a.context_tokens


@pytest.mark.parametrize("gpu", ["H100", "B200"])
@pytest.mark.parametrize("n", [4, 8])
def test_short_answers_pay_for_their_prefill(gpu, n):
    """docs/serving.md, Limits: energy per token is highest for the shortest answers, falls
    as the fitted prompt's prefill is shared by more output tokens, and is roughly flat
    (within ~3%) from about 400 to 1,000 output tokens."""

    def energy(tokens):
        return performance("Llama-3.1-70B-Instruct", gpu, n, 256, None, tokens).energy_per_token_j

    flat = [energy(t) for t in (400, 550, 700, 850, 1000)]
    assert max(flat) / min(flat) < 1.03
    assert energy(10) > 2 * max(flat)
    assert energy(10) > energy(50) > energy(100) > energy(200) > max(flat)


def test_longer_prompts_lower_throughput_and_lengthen_prefill():
    a = performance("Qwen3-8B", "H100", 1, 64, 100, 500)
    b = performance("Qwen3-8B", "H100", 1, 64, 4000, 500)
    assert b.throughput_tokens_per_s < a.throughput_tokens_per_s
    assert b.prefill_s > a.prefill_s


PREFILL_CASES = [
    ("Llama-3.1-70B-Instruct", "H100", 4),
    ("Llama-3.1-8B-Instruct", "H100", 1),
    ("gemma-3-27b-it", "B200", 1),
    ("NVIDIA-Nemotron-Nano-9B-v2", "H100", 1),
    ("Qwen3-30B-A3B-Instruct-2507", "H100", 1),
    ("Llama-3.1-405B-Instruct-FP8", "H100", 8),
    ("DeepSeek-V3.1", "B200", 8),
]


@pytest.mark.parametrize(("model", "gpu", "n"), PREFILL_CASES)
def test_a_prompt_alone_takes_at_least_about_one_decode_step(model, gpu, n):
    """A lone prefill reads all the weights too: at batch 1 it is no shorter than a decode
    step once the prompt has 100 tokens, and within 5% of it at the default prompt (the
    fitted chat prompt, 118 tokens; the decode step also reads the answer's KV and does
    per-sequence work)."""
    default = performance(model, gpu, n, 1)
    assert default.prefill_s * 1000 >= 0.95 * default.itl_median_ms
    for l_in in (100, 1000, 4000):
        pt = performance(model, gpu, n, 1, l_in)
        assert pt.prefill_s * 1000 >= pt.itl_median_ms


@pytest.mark.parametrize(("model", "gpu", "n"), PREFILL_CASES)
def test_prefill_grows_with_the_prompt(model, gpu, n):
    times = [performance(model, gpu, n, 1, l_in).prefill_s for l_in in (10, 100, 1000, 8000)]
    assert all(b > a for a, b in zip(times, times[1:], strict=False))
    # a long prompt is compute-bound: the time grows with it
    assert times[-1] > 1.5 * times[-2]


def test_blackwell_has_its_own_constants_and_other_gpus_take_hoppers():
    sm = serving_model()
    assert sm.gpus["B200"].blackwell
    p = sm.params
    assert p.eta_mem_blackwell != p.eta_mem and p.pi_0_blackwell != p.pi_0
    assert all(not performance("Qwen3-8B", g, 1, 8).extrapolated for g in ("H100", "B200"))


def _toy_moe(num_gpus: float, input_tokens: float) -> dict[str, np.ndarray]:
    """`Inputs` fields of a 100B-total, 10B-active MoE (1 of 16 experts, 48 layers) on
    H100s on one node, without `moe_layers` (the caller sets it)."""
    base = {f.name: np.asarray(1.0) for f in fields(Inputs)}
    base.update(
        total_params_b=np.asarray(100.0),
        active_params_b=np.asarray(10.0),
        bytes_per_param=np.asarray(2.0),
        kv_bytes_per_token=np.asarray(1e5),
        expert_share=np.asarray(1 / 16),
        layers=np.asarray(48.0),
        hybrid=np.asarray(0.0),
        num_gpus=np.asarray(num_gpus),
        memory_gb=np.asarray(80.0),
        mem_bw_gbps=np.asarray(3350.0),
        fp16_tflops=np.asarray(989.0),
        tdp_w=np.asarray(700.0),
        idle_w=np.asarray(70.0),
        blackwell=np.asarray(0.0),
        max_batch=np.asarray(64.0),
        input_tokens=np.asarray(input_tokens),
        output_tokens=np.asarray(500.0),
        comm_fixed_s=np.asarray(0.0),
        comm_per_token_s=np.asarray(0.0),
    )
    return base


def test_expert_parallel_moe_layers_pay_dispatch_time():
    """On several GPUs every MoE layer pays a token dispatch and combine (per doubling of
    the GPU count) on top of the per-layer collectives; Maverick has routed experts in
    every other layer only."""
    sm = serving_model()
    assert sm.models["Llama-4-Maverick-17B-128E-Instruct-FP8"].moe_layers == 24
    assert sm.models["Llama-4-Scout-17B-16E-Instruct"].moe_layers == 48
    assert sm.models["Qwen3-32B"].moe_layers == 0
    p = sm.params
    base = _toy_moe(num_gpus=8.0, input_tokens=10.0)
    itl = {
        moe: float(evaluate(p, Inputs(**{**base, "moe_layers": np.asarray(moe)})).itl_median_ms)
        for moe in (0.0, 24.0, 48.0)
    }
    step = 1e-3 * p.tau_expert_parallel_us * 24 * 3  # 24 MoE layers, log2(8) = 3, ms
    assert itl[24.0] - itl[0.0] == pytest.approx(step)
    assert itl[48.0] - itl[24.0] == pytest.approx(step)


def test_an_moe_prefill_runs_at_its_own_share_of_peak():
    """A long prompt alone is compute-bound: an MoE's takes eta_prefill / eta_prefill_moe
    (0.61 / 0.25, docs/serving.md) times as long as the same FLOPs of a dense model."""
    p = serving_model().params
    assert (p.eta_prefill, p.eta_prefill_moe) == (0.61, 0.25)
    base = _toy_moe(num_gpus=1.0, input_tokens=16384.0)
    prefill = {
        moe: float(evaluate(p, Inputs(**{**base, "moe_layers": np.asarray(moe)})).prefill_s)
        for moe in (0.0, 48.0)
    }
    assert prefill[48.0] / prefill[0.0] == pytest.approx(0.61 / 0.25, rel=0.02)


def test_other_gpus_are_extrapolated_from_their_specs():
    h100 = performance("Llama-3.1-8B-Instruct", "H100-SXM", 1, 64)
    a100 = performance("Llama-3.1-8B-Instruct", "A100-80GB", 1, 64)
    b200 = performance("Llama-3.1-8B-Instruct", "B200", 1, 64)
    assert not h100.extrapolated and not b200.extrapolated and a100.extrapolated
    assert a100.throughput_tokens_per_s < h100.throughput_tokens_per_s
    assert a100.power_w <= 400.0
    for gpu in ("A100-40GB", "L40S", "L4", "V100", "H200", "H100-PCIe"):
        pt = performance("Llama-3.1-8B-Instruct", gpu, 1, 16)
        assert pt.extrapolated and pt.throughput_tokens_per_s > 0
    assert performance("Llama-3.1-8B-Instruct", "H200", 1, 64).throughput_tokens_per_s > (
        h100.throughput_tokens_per_s
    )


def test_a_model_spec_for_a_model_not_in_the_catalog():
    dense = performance(ModelSpec(20.0, 20.0, "bfloat16", "Dense Transformer"), "H100", 1, 64)
    assert dense.model == "ModelSpec" and dense.throughput_tokens_per_s > 0
    # between the catalog's 14B and 32B dense models
    q14 = performance("Qwen3-14B", "H100", 1, 64, None, dense.output_tokens)
    q32 = performance("Qwen3-32B", "H100", 1, 64, None, dense.output_tokens)
    assert q32.throughput_tokens_per_s < dense.throughput_tokens_per_s
    assert dense.throughput_tokens_per_s < q14.throughput_tokens_per_s
    moe = performance(ModelSpec(100.0, 10.0, "fp8", "MoE"), "B200", 1, 64)
    assert moe.throughput_tokens_per_s > 0
    hybrid = ModelSpec(9.0, 9.0, "bfloat16", "Mamba-Transformer Hybrid", 16384)
    assert performance(hybrid, "L40S", 1, 8).extrapolated


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "GPT-5"}, "model must be one of"),
        ({"gpu": "TPUv5"}, "gpu must be one of"),
        ({"num_gpus": 0}, "num_gpus must be a positive integer, got 0"),
        ({"num_gpus": 1.5}, "num_gpus must be a positive integer, got 1.5"),
        ({"max_batch": -4}, "max_batch must be a positive integer, got -4"),
        ({"avg_input_tokens": float("nan")}, "avg_input_tokens must be a positive number"),
        ({"avg_output_tokens": 0}, "avg_output_tokens must be a number >= 1, got 0"),
        ({"avg_output_tokens": 0.5}, "avg_output_tokens must be a number >= 1, got 0.5"),
        ({"num_gpus": 10**400}, "num_gpus must be a positive integer, got 1000"),
        ({"max_batch": 10**400}, "max_batch must be a positive integer, got 1000"),
        ({"avg_input_tokens": 10**400}, "avg_input_tokens must be a positive number, got 1000"),
        ({"avg_output_tokens": -(10**400)}, "avg_output_tokens must be a number >= 1, got -1000"),
        ({"num_gpus": True}, "num_gpus must be a positive integer, got True"),
        ({"max_batch": np.bool_(True)}, "max_batch must be a positive integer, got "),
        ({"gpu": ["H100"]}, r"gpu must be one of .*, got \['H100'\]"),
        ({"gpu": {"H100": 1}}, "gpu must be one of"),
        ({"gpu": 100}, "gpu must be one of .*, got 100"),
        ({"gpu": "B200", "cap_w": 10**400}, "cap_w must be within B200"),
        ({"gpu": "H100", "cap_w": 10**400}, "cap_w must be within"),
        ({"model": ModelSpec(10**400, 8, "bfloat16", "MoE")}, "total_params_b must be a positive"),
        ({"model": ModelSpec(8, 8, "bfloat16", "MoE", 10**400)}, "kv_bytes_per_token must be"),
        ({"model": ModelSpec(8, 8, ["fp8"], "MoE")}, "precision must be one of"),
        ({"model": ModelSpec(8, 8, "fp8", ["MoE"])}, "architecture must be one of"),
        ({"model": ModelSpec(8, 4, "bfloat16", "Dense Transformer")}, "must equal total_params_b"),
        (
            {"model": "Llama-3.1-8B-Instruct", "avg_input_tokens": 2_000_000},
            r"avg_input_tokens=2e\+06, avg_output_tokens=.*holds \d+ tokens",
        ),
        ({"model": "Llama-3.1-405B-Instruct", "num_gpus": 2}, "num_gpus=2: "),
        ({"model": ModelSpec(8, 9, "bfloat16", "Dense Transformer")}, "active_params_b"),
        ({"model": ModelSpec(8, 8, "int3", "Dense Transformer")}, "precision must be one of"),
        ({"model": ModelSpec(8, 8, "fp8", "RNN")}, "architecture must be one of"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(kwargs, message):
    args = {"model": "Llama-3.1-8B-Instruct", "gpu": "H100", "num_gpus": 1, "max_batch": 8}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        performance(**{**args, **kwargs})


def test_numpy_numbers_are_accepted():
    ref = performance("Qwen3-8B", "H100", 2, 64, 100, 300, cap_w=500)
    pt = performance(
        "Qwen3-8B",
        "H100",
        np.int64(2),
        np.int32(64),
        np.float32(100),
        np.int64(300),
        cap_w=np.float64(500),
    )
    assert pt == ref
    assert isinstance(pt.num_gpus, int) and isinstance(pt.output_tokens, float)
    spec = ModelSpec(np.float64(20), np.int64(20), "bfloat16", "Dense Transformer", np.int64(4096))
    assert performance(spec, "H100", 1, 8) == performance(
        ModelSpec(20.0, 20.0, "bfloat16", "Dense Transformer", 4096.0), "H100", 1, 8
    )


def test_a_context_too_long_for_the_kv_cache_names_the_tokens_not_the_gpus():
    with pytest.raises(ValueError) as err:
        performance("Llama-3.1-70B-Instruct", "H100", 4, 8, 1_000_000, 1000)
    text = str(err.value)
    assert text.startswith("avg_input_tokens=1e+06, avg_output_tokens=1000: ")
    assert "num_gpus" not in text and "holds" in text


# --- power caps -------------------------------------------------------------------------------

CAP_CASE = ("Llama-3.1-70B-Instruct", "H100", 4, 64)
"""A memory-bound decode: a 70B dense model on 4 H100 at batch 64 (draws ~585 W per GPU)."""


def test_no_cap_and_a_cap_at_the_maximum_give_the_same_point():
    free = performance(*CAP_CASE)
    at_max = performance(*CAP_CASE, cap_w=700)
    assert free.gpu_cap_w is None and at_max.gpu_cap_w == 700.0
    assert replace(at_max, gpu_cap_w=None) == free  # every figure bit-identical
    assert performance(*CAP_CASE, cap_w=None) == free


def test_lower_caps_lower_power_and_throughput_and_never_exceed_the_cap():
    free = performance(*CAP_CASE)
    caps = (550, 500, 450, 400, 350, 300, 250, 200)  # all below the uncapped ~590 W per GPU
    points = [performance(*CAP_CASE, cap_w=c) for c in caps]
    for cap, pt in zip(caps, points, strict=True):
        assert pt.gpu_cap_w == cap
        assert pt.power_w / pt.num_gpus == pytest.approx(cap)  # the highest clock within it
        assert pt.energy_per_token_j == pytest.approx(pt.power_w / pt.throughput_tokens_per_s)
        assert pt.batch == free.batch and pt.kv_capacity_seqs == free.kv_capacity_seqs
    for hi, lo in zip([free, *points], points, strict=False):
        assert lo.power_w < hi.power_w
        assert lo.throughput_tokens_per_s < hi.throughput_tokens_per_s
        assert lo.itl_median_ms > hi.itl_median_ms and lo.prefill_s > hi.prefill_s


def test_memory_bound_decode_loses_less_than_compute_bound_prefill():
    """docs/serving.md, Power caps by phase: the cap lowers the SM clock; HBM keeps its own,
    so the memory-bound decode iteration (this case reads 35 GB of weights per GPU-step)
    slows far less than the prefill, whose time is compute."""
    free = performance(*CAP_CASE)
    for cap in (500, 400, 300):
        pt = performance(*CAP_CASE, cap_w=cap)
        decode_kept = free.itl_median_ms / pt.itl_median_ms
        prefill_kept = free.prefill_s / pt.prefill_s
        assert prefill_kept < decode_kept < 1.0
        assert decode_kept > 0.85  # the decode step keeps at least 85% of its speed to 300 W


def test_a_cap_above_the_decode_draw_slows_only_the_prefill():
    """The decode iterations draw ~600 W per GPU: a 620 W cap leaves them untouched, while a
    prompt's prefill alone, compute-bound near the TDP, runs at a lower clock."""
    free = performance(*CAP_CASE)
    pt = performance(*CAP_CASE, cap_w=620)
    assert free.power_w / 4 < 620
    assert pt.throughput_tokens_per_s == free.throughput_tokens_per_s
    assert pt.power_w == free.power_w and pt.itl_median_ms == free.itl_median_ms
    assert pt.prefill_s > free.prefill_s


def test_a_moderate_cap_lowers_energy_per_token():
    """At 60-70% of the H100's maximum limit the draw falls faster than the decode's speed
    (the clocked power falls with the clock; the memory-bound step barely slows), so energy
    per token falls, by 13-27% here, at 95-98% of the uncapped throughput."""
    free = performance(*CAP_CASE)
    for cap in (420, 455, 490):
        pt = performance(*CAP_CASE, cap_w=cap)
        saving = 1 - pt.energy_per_token_j / free.energy_per_token_j
        assert 0.13 < saving < 0.27
        assert pt.throughput_tokens_per_s > 0.94 * free.throughput_tokens_per_s


@pytest.mark.parametrize(
    ("gpu", "cap", "message"),
    [
        (
            "H100",
            150,
            "cap_w must be within H100-SXM's settable power-limit range 200-700 W, got 150",
        ),
        ("H100-SXM", 701, "range 200-700 W, got 701"),
        ("A100-80GB", 50.0, "A100-80GB's settable power-limit range 100-400 W, got 50.0"),
        ("H100", float("nan"), "cap_w must be within .* got nan"),
        ("H100", True, "cap_w must be within .* got True"),
        ("H100", "300", "cap_w must be within .* got '300'"),
        ("B200", 800, "cap_w=800: B200 has no sourced lowest power limit .* got 800 W"),
    ],
)
def test_caps_outside_the_settable_range_raise(gpu, cap, message):
    with pytest.raises(ValueError, match=message):
        performance("Llama-3.1-8B-Instruct", gpu, 1, 8, cap_w=cap)


def test_b200_runs_uncapped():
    pt = performance("Llama-3.1-8B-Instruct", "B200", 1, 8, cap_w=None)
    assert pt.gpu_cap_w is None and pt.power_w > 0
