"""Quality defaults: published scores per catalog model and the directive levels
(docs/serving-quality.md)."""

from __future__ import annotations

import pytest

from sim.models.llm_quality import (
    QUALITY_BENCHMARK,
    default_directives,
    model_quality,
    quality_scores,
)
from sim.serving import MODELS


def test_the_benchmark_is_mmlu_pro():
    assert QUALITY_BENCHMARK == "MMLU-Pro"


def test_every_score_is_a_percentage_of_a_catalog_model_with_a_source():
    scores = quality_scores()
    assert scores, "no default scores shipped"
    for model, entry in scores.items():
        assert model in MODELS and entry.model == model
        assert 0.0 < entry.score <= 100.0
        assert entry.source.strip() and entry.note.strip()


def test_the_models_without_a_score_are_the_nemotron_nanos_gpt_oss_and_the_fim_coders():
    missing = sorted(m for m in MODELS if model_quality(m) is None)
    assert missing == [
        "NVIDIA-Nemotron-Nano-12B-v2",
        "NVIDIA-Nemotron-Nano-9B-v2",
        # catalog models of the sourcegraph-fim validation (issue 33): not looked up
        "Qwen3-Coder-30B-A3B-Instruct",
        "Qwen3-Coder-480B-A35B-Instruct",
        "Qwen3-Coder-480B-A35B-Instruct-FP8",
        "gpt-oss-120b",  # its model card reports MMLU, not MMLU-Pro
        "gpt-oss-20b",
    ]


@pytest.mark.parametrize(
    "family",
    [
        ("Llama-3.1-8B-Instruct", "Llama-3.1-70B-Instruct", "Llama-3.1-405B-Instruct"),
        ("Qwen3-8B", "Qwen3-14B", "Qwen3-32B"),
        ("gemma-3-12b-it", "gemma-3-27b-it"),
    ],
)
def test_a_larger_model_of_a_family_scores_higher(family):
    scores = [model_quality(m) for m in family]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)


def test_the_published_values_are_the_ones_shipped():
    assert model_quality("Llama-3.1-8B-Instruct") == 48.3
    assert model_quality("Llama-3.1-70B-Instruct") == 66.4
    assert model_quality("Llama-3.1-405B-Instruct") == 73.3
    assert model_quality("DeepSeek-V3.1") == 83.7


@pytest.mark.parametrize(
    "fp8, bf16",
    [
        ("Llama-3.1-405B-Instruct-FP8", "Llama-3.1-405B-Instruct"),
        ("Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen3-235B-A22B-Instruct-2507"),
    ],
)
def test_an_fp8_variant_carries_its_bf16_score_and_says_so(fp8, bf16):
    assert model_quality(fp8) == model_quality(bf16)
    assert "BF16 score used" in quality_scores()[fp8].note


def test_directives_start_at_normal_and_get_shorter_and_worse():
    directives = default_directives()
    assert [d.name for d in directives] == ["normal", "brief", "very_brief"]
    assert (directives[0].output_factor, directives[0].quality_penalty) == (1.0, 0.0)
    factors = [d.output_factor for d in directives]
    penalties = [d.quality_penalty for d in directives]
    assert factors == sorted(factors, reverse=True) and len(set(factors)) == len(factors)
    assert penalties == sorted(penalties) and len(set(penalties)) == len(penalties)
    assert all(0.0 < f <= 1.0 for f in factors)
    assert all(d.source.strip() for d in directives)


def test_estimated_directive_values_are_marked_est():
    for d in default_directives()[1:]:
        assert d.source.startswith("EST.")


def test_an_unknown_model_is_a_one_line_error_naming_it_and_the_catalog():
    with pytest.raises(ValueError) as err:
        model_quality("Llama-9-1T")
    message = str(err.value)
    assert "\n" not in message
    assert "'Llama-9-1T'" in message
    assert all(m in message for m in MODELS)
