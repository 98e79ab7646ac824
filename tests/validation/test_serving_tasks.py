"""Validation of the serving model on the ML.ENERGY leaderboard v3 data in ../shared/data
(skipped without it), recomputed from the data, not read from serving_model.toml:

- leave one task out: constants fitted on lm-arena-chat predict sourcegraph-fim within 15%
  MAPE on throughput, energy per token and median ITL (docs/serving.md "Leave one task
  out"), with the FIM prompt length the benchmark's own (1,374 tokens), not fitted; the
  reverse direction (2 MoE models predicting 18) is reported, not asserted;
- leave one model out over both tasks: throughput, energy per token and median ITL within
  15% MAPE.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def calibration():
    data = SHARED_DATA / "mlenergy-leaderboard"
    if not data.is_dir():
        pytest.skip(f"ML.ENERGY leaderboard data not found at {data}")
    spec = importlib.util.spec_from_file_location(
        "calibrate_serving", ROOT / "scripts" / "calibrate_serving.py"
    )
    assert spec is not None and spec.loader is not None
    cs = importlib.util.module_from_spec(spec)
    sys.modules["calibrate_serving"] = cs
    spec.loader.exec_module(cs)
    f, catalog = cs.load_tasks(data)
    return cs, f, catalog


@pytest.fixture(scope="module")
def chat_to_fim(calibration):
    cs, f, catalog = calibration
    loto = cs.leave_one_task_out(f, catalog, kappa=0.9753)
    return loto[(loto["direction"] == "chat -> fim") & loto["in_scope"]]


def test_every_fim_configuration_is_predicted_and_only_attention_dp_is_out_of_scope(calibration):
    cs, f, _ = calibration
    fim = f[f["task"] == cs.FIM]
    assert len(fim) == 50
    outside = fim[~cs.in_scope(fim)]
    assert set(outside["model"]) == {"Qwen3-Coder-480B-A35B-Instruct-FP8"}
    assert (outside["data_parallel"] > 1).all() and len(outside) == 16
    assert fim["prompt_tokens"].eq(cs.PROMPT_TOKENS[cs.FIM]).all()  # from a source, not fitted


@pytest.mark.parametrize("score", ["throughput_ape", "energy_ape", "itl_ape"])
def test_chat_fit_predicts_fim_within_15_percent(chat_to_fim, score):
    assert len(chat_to_fim) == 34
    assert chat_to_fim[score].mean() <= 0.15


@pytest.fixture(scope="module")
def lomo(calibration):
    cs, f, catalog = calibration
    return cs.leave_one_model_out(f, catalog, kappa=0.9753)


@pytest.mark.parametrize("score", ["throughput_ape", "energy_ape", "itl_ape"])
def test_leave_one_model_out_within_15_percent(lomo, score):
    assert lomo["model"].nunique() == 20
    assert lomo[score].mean() <= 0.15


def test_fim_runs_alone_leave_the_dense_gemm_share_to_a_prior(calibration):
    """fim -> chat (reported, not asserted): fitted freely on the two FIM MoE models,
    eta_compute stands for their grouped expert GEMMs (below 0.1) and would make every
    dense chat model compute-bound; the fit holds it at Vidur's 0.70 instead."""
    cs, f, catalog = calibration
    fim = f[(f["task"] == cs.FIM) & cs.in_scope(f)]
    assert cs.fit(fim, catalog, kappa=0.9753).eta_compute < 0.1
    held = cs.UNIDENTIFIED_BY[cs.CHAT]
    assert cs.fit(fim, catalog, kappa=0.9753, held=held).eta_compute == held["eta_compute"]
