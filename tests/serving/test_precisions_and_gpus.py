"""Precisions and GPUs of the serving model (issue 33, part 4).

Specification: docs/serving.md "Precisions and GPUs". A precision runs natively on tensor
cores of its format, or weight-only where vLLM has a kernel for it, or not at all: then it
is a one-line error naming the precision and the GPU, from `performance`, at scenario load
and from the CLI (exit 2). Every GPU the serving model knows (B200 included) can serve in a
scenario. What the calibration did not see is said (`extrapolated_why`).
"""

from __future__ import annotations

import json

import pytest
import tomli_w

import sim
from sim.models.hardware import GPU_CATALOG
from sim.models.llm import PRECISIONS
from sim.models.llm_hardware import execution
from sim.models.llm_performance import performance, serving_model
from sim.models.llm_replica import replica_model
from tests.conftest import SMALL_SCENARIO_TOML, make_scenario, one_line_cli_error, run_cli
from tests.serving.conftest import service, service_toml, sites

LLAMA_8B = "Llama-3.1-8B-Instruct"


# --- which GPU runs which precision ------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "precision", "native"),
    [
        ("H100-SXM", "fp8", True),
        ("L40S", "fp8", True),
        ("A100-80GB", "fp8", False),  # FP8 Marlin, weight-only
        ("T4", "fp8", False),
        ("A100-80GB", "int8", True),
        ("T4", "int8", True),
        ("V100", "int4", False),  # GPTQ
        ("H100-SXM", "int4", False),
        ("B200", "fp4", True),
        ("B200", "mxfp4", True),
        ("H100-SXM", "mxfp4", False),
        ("A100-80GB", "fp4", False),
    ],
)
def test_a_precision_runs_natively_or_weight_only_where_vllm_has_the_kernel(gpu, precision, native):
    assert execution(gpu, precision).native is native


@pytest.mark.parametrize(
    ("gpu", "precision"),
    [
        ("V100", "fp8"),
        ("P100", "fp8"),
        ("V100", "int8"),
        ("P100", "int4"),
        ("V100", "fp4"),
        ("T4", "mxfp4"),
    ],
)
def test_a_precision_the_gpu_cannot_run_is_one_line_naming_both(gpu, precision):
    with pytest.raises(ValueError, match=f"precision '{precision}' cannot run on {gpu} ") as e:
        performance(LLAMA_8B, gpu, 1, 8, precision=precision)
    assert "\n" not in str(e.value)


def test_a_catalog_fp8_model_is_refused_on_volta():
    fp8_models = [m for m, e in serving_model().models.items() if e.spec.precision == "fp8"]
    assert fp8_models
    with pytest.raises(ValueError, match="precision 'fp8' cannot run on V100"):
        performance(fp8_models[0], "V100", 8, 8)


def test_smaller_weights_serve_more_tokens_per_joule_at_small_batch():
    """At batch 1 decode reads the weights: fewer bytes per weight, less time and energy."""
    by = {
        p: performance(LLAMA_8B, "H100", 1, 1, 1000, 200, precision=p)
        for p in ("bfloat16", "fp8", "int4")
    }
    assert (
        by["int4"].throughput_tokens_per_s
        > by["fp8"].throughput_tokens_per_s
        > by["bfloat16"].throughput_tokens_per_s
    )
    assert by["int4"].energy_per_token_j < by["bfloat16"].energy_per_token_j


def test_fp4_runs_on_blackwells_fp4_tensor_cores_at_twice_the_8_bit_rate():
    b200 = GPU_CATALOG["B200"]
    assert execution("B200", "fp4").compute_factor == b200.fp4_tflops / b200.fp8_tflops == 2.0
    assert execution("B200", "fp8").compute_factor == 1.0  # as the calibration fitted FP8


def test_bytes_per_weight_include_the_scales():
    assert PRECISIONS["int4"].bytes_per_weight == 0.5 + 2 / 128  # FP16 scale per 128
    assert PRECISIONS["fp4"].bytes_per_weight == 0.5 + 1 / 16  # FP8 scale per 16 (NVFP4)
    assert PRECISIONS["mxfp4"].bytes_per_weight == 0.5 + 1 / 32  # E8M0 scale per 32


# --- what the calibration did not see ----------------------------------------------------


def test_extrapolated_says_what_the_calibration_did_not_see():
    assert performance(LLAMA_8B, "H100", 1, 8).extrapolated_why == ()
    assert not performance(LLAMA_8B, "B200", 1, 8).extrapolated
    why = performance(LLAMA_8B, "A100-80GB", 1, 8, precision="fp8").extrapolated_why
    assert why[0].startswith("GPU A100-80GB not measured")
    assert "fp8 on A100-80GB (Ampere) runs weight-only" in why[1]
    assert performance(LLAMA_8B, "B200", 1, 8, precision="mxfp4").extrapolated_why == (
        "precision mxfp4 not measured",
    )
    model = replica_model(LLAMA_8B, "H100", 1, 8, 1000.0, 200.0, None, None, "int4")
    assert model.extrapolated and "precision int4 not measured" in model.extrapolated_why


def test_a_gpu_outside_the_calibrated_families_says_so(catalog_restored):
    mi300x = {
        "name": "AMD Instinct MI300X (example)",
        "architecture": "CDNA3",
        "tdp_w": 750,
        "max_cap_w": 750,
        "idle_w": 90,
        "memory_gb": 192,
        "memory_type": "HBM3",
        "memory_devices": 8,
        "mem_bw_gbps": 5300,
        "fp16_tflops": 1307,
        "fp32_tflops": 163,
        "fp8_tflops": 2615,
        "die_mm2": 1725,
        "process_nm": 5,
        "release_year": 2023,
        "host_embodied_kg": 312.5,
        "service_life_years": 6,
    }
    make_scenario(gpu_models={"MI300X-x": mi300x}, sites=sites("MI300X-x"))
    why = performance(LLAMA_8B, "MI300X-x", 1, 8).extrapolated_why
    assert any("outside the calibrated families (Blackwell, Hopper)" in w for w in why)
    assert performance(LLAMA_8B, "MI300X-x", 1, 8, precision="fp8").throughput_tokens_per_s > 0
    with pytest.raises(ValueError, match=r"precision 'int4' cannot run on MI300X-x \(CDNA3\)"):
        performance(LLAMA_8B, "MI300X-x", 1, 8, precision="int4")


# --- scenarios ---------------------------------------------------------------------------


def test_a_scenario_refuses_a_precision_its_gpu_cannot_run_naming_the_key():
    with pytest.raises(
        sim.ScenarioError, match=r"services\[0\]: precision 'fp8' cannot run on V100"
    ):
        make_scenario(sites=sites("V100"), services=[service("V100", precision="fp8")])
    with pytest.raises(
        sim.ScenarioError, match=r"services\[0\]: precision: unknown precision 'int3'"
    ):
        make_scenario(sites=sites("A100-80GB"), services=[service("A100-80GB", precision="int3")])


def test_the_cli_refuses_a_precision_its_gpu_cannot_run_with_one_line_and_exit_2(tmp_path, capsys):
    variant = {"model": LLAMA_8B, "name": "w8", "gpu": "A100-80GB", "precision": "int8"}
    extra = service_toml("A100-80GB", precision="mxfp4", variants=[variant])
    ok = one_line_cli_error(tmp_path, capsys, {}, extra.replace('"mxfp4"', '"fp8"') + "x = 1\n")
    assert "x: unknown key" in ok  # fp8 (weight-only on Ampere) and int8 load
    volta_site = tomli_w.dumps({"sites": [{**sites("V100")[0], "name": "b"}]})
    on_volta = service_toml("V100", precision="mxfp4", sites=["b"])
    line = one_line_cli_error(tmp_path, capsys, {}, volta_site + on_volta)
    assert "services[0]: precision 'mxfp4' cannot run on V100 (Volta)" in line


def test_b200_serves_in_a_scenario():
    scenario = make_scenario(
        sites=sites("B200"),
        services=[service("B200", precision="fp4")],
        duration_h=1.0,
    )
    r = sim.simulate(scenario, "run_now")
    assert r.summary["requests_served"] > 0 and r.summary["energy_serving_kwh"] > 0


def test_extrapolated_reaches_meta_json_and_the_printout_per_service_and_variant(tmp_path, capsys):
    extra = service_toml("A100-80GB", precision="fp8")
    path = tmp_path / "study.toml"
    path.write_text(SMALL_SCENARIO_TOML.replace("duration_h = 24", "duration_h = 1") + extra)
    code, out = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    said = meta["serving"]["chat"]["Llama-3.1-8B-Instruct"]
    assert said["extrapolated"] is True
    assert said["why"][0].startswith("GPU A100-80GB not measured")
    assert "fp8 on A100-80GB (Ampere) runs weight-only" in said["why"][1]
    assert "serving model extrapolates chat (Llama-3.1-8B-Instruct): GPU A100-80GB" in out.out


def test_a_run_on_the_calibration_data_says_nothing_is_extrapolated():
    scenario = make_scenario(
        sites=sites("H100-SXM"), services=[service("H100-SXM")], duration_h=1.0
    )
    r = sim.simulate(scenario, "run_now")
    assert r.meta["serving"] == {"chat": {LLAMA_8B: {"extrapolated": False, "why": []}}}
