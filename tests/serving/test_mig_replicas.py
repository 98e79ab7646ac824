"""LLM replicas on one MIG slice: `replica_model(..., mig_profile=...)` (issue 18 part 3).

Specification: docs/mig.md ("LLM replicas on slices"). The replica is the calibrated roofline
on the slice's memory, its bandwidth share and its SM share of the FLOP/s; it draws its SM
share of the GPU's idle-to-TDP range at its load, so replicas' extra powers add up as
`sim.models.mig.gpu_power_w` says and a GPU's slices never draw more than its TDP.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.models import mig
from sim.models.hardware import GPU_CATALOG
from sim.models.llm import ModelSpec
from sim.models.llm_replica import replica_model

A100, H100 = "A100-80GB", "H100-SXM"
SMALL = ModelSpec(1.0, 1.0, "bfloat16", "Dense Transformer", None)
"""A 1B-parameter dense model (2 GB of weights): fits a 1g.10gb slice."""
LLAMA_8B = "Llama-3.1-8B-Instruct"  # 16 GB of weights in BF16
IN_TOKENS, OUT_TOKENS = 1000.0, 300.0


def replica(model, gpu: str, profile: str | None, max_batch: int = 64, cap_w=None):
    return replica_model(model, gpu, 1, max_batch, IN_TOKENS, OUT_TOKENS, cap_w, profile)


def full_tokens_per_s(r) -> float:
    return float(r.tokens_per_s(r.slots))


def load(r, gpu: str, n: int) -> float:
    """The load (in [0, 1]) that `sim.models.mig.gpu_power_w` reads off replica `r` with n
    sequences: its extra power over its SM share of the GPU's dynamic range."""
    spec = GPU_CATALOG[gpu]
    share = mig.sm_share(gpu, r.mig_profile)
    return (r.power_w[n] - r.power_w[0]) / (share * (spec.max_cap_w - spec.idle_w))


# --- power -------------------------------------------------------------------------------------


def test_seven_1g_replicas_at_full_load_add_up_to_the_mig_power_model():
    r = replica(SMALL, A100, "1g.10gb")
    full = load(r, A100, r.slots)
    assert 0.0 < full <= 1.0
    extra_w = 7 * (r.power_w[r.slots] - r.power_w[0])
    idle_w = GPU_CATALOG[A100].idle_w
    assert extra_w == pytest.approx(
        mig.gpu_power_w(A100, [("1g.10gb", full)] * 7) - idle_w, rel=1e-12
    )


def test_a_slices_idle_power_is_its_sm_share_of_the_gpus():
    r = replica(SMALL, A100, "1g.10gb")
    assert r.idle_w == r.power_w[0] == pytest.approx(GPU_CATALOG[A100].idle_w * 14 / 108)


@pytest.mark.parametrize("gpu", [A100, H100])
def test_a_mixed_gpus_slices_never_draw_more_than_its_tdp(gpu):
    layout = [s.profile for s in mig.validate_layout(gpu, ["3g.40gb", "2g.20gb", "2g.20gb"]).slices]
    replicas = [replica(LLAMA_8B, gpu, p, max_batch=256) for p in layout]
    spec = GPU_CATALOG[gpu]
    unsliced_idle_w = (1 - sum(mig.sm_share(gpu, p) for p in layout)) * spec.idle_w
    for n in range(1, min(r.slots for r in replicas) + 1):
        drawn_w = sum(float(r.power_w[n]) for r in replicas) + unsliced_idle_w
        assert drawn_w <= spec.tdp_w
        loads = [(p, load(r, gpu, n)) for p, r in zip(layout, replicas, strict=True)]
        assert drawn_w == pytest.approx(mig.gpu_power_w(gpu, loads), rel=1e-12)


# --- throughput ------------------------------------------------------------------------------


def test_a_7g_slice_serves_less_than_the_whole_a100_by_its_sms_at_most():
    whole, slice_7g = replica(LLAMA_8B, A100, None), replica(LLAMA_8B, A100, "7g.80gb")
    ratio = full_tokens_per_s(slice_7g) / full_tokens_per_s(whole)
    # 98 of 108 SMs and all 8 memory slices: only the compute-bound share slows down
    assert mig.sm_share(A100, "7g.80gb") < ratio < 1.0
    # one sequence is bandwidth-bound: the full bandwidth serves it almost as fast
    assert float(slice_7g.tokens_per_s(1) / whole.tokens_per_s(1)) == pytest.approx(1.0, abs=0.01)


def test_an_h100_7g_slice_holds_the_whole_gpu_and_serves_as_it():
    whole, slice_7g = replica(LLAMA_8B, H100, None), replica(LLAMA_8B, H100, "7g.80gb")
    np.testing.assert_allclose(slice_7g.iter_s, whole.iter_s, rtol=1e-12)
    np.testing.assert_allclose(slice_7g.power_w, whole.power_w, rtol=1e-12)


def test_throughput_grows_with_the_slice():
    rates = [
        full_tokens_per_s(replica(LLAMA_8B, A100, p)) for p in ("2g.20gb", "3g.40gb", "7g.80gb")
    ]
    assert rates == sorted(rates)


def test_an_h100_3g_slice_matches_basetens_published_claims():
    """Baseten, "Using fractional H100 GPUs for efficient model serving": an H100 3g.40gb
    instance has "about half" of a full H100 and "meets or exceeds" an A100."""
    slice_3g = full_tokens_per_s(replica(LLAMA_8B, H100, "3g.40gb"))
    assert slice_3g / full_tokens_per_s(replica(LLAMA_8B, H100, None)) == pytest.approx(
        0.5, rel=0.2
    )
    assert slice_3g >= 0.9 * full_tokens_per_s(replica(LLAMA_8B, A100, None))


def test_a_smaller_slice_holds_fewer_sequences_of_kv_cache():
    small = replica(LLAMA_8B, A100, "2g.20gb", max_batch=512)
    large = replica(LLAMA_8B, A100, "3g.40gb", max_batch=512)
    assert small.slots < large.slots


# --- refusals ----------------------------------------------------------------------------------


def test_weights_too_large_for_the_slice_are_refused_naming_the_profile_and_sizes():
    with pytest.raises(ValueError) as e:
        replica(LLAMA_8B, A100, "1g.10gb")
    assert str(e.value).startswith(
        "Llama-3.1-8B-Instruct on a 1g.10gb slice of A100-80GB: its weights (16 GB) do not "
        "fit the slice's 10 GB"
    )


@pytest.mark.parametrize(
    ("gpu", "profile", "num_gpus", "message"),
    [
        (A100, "3g.40gb", 2, r"num_gpus must be 1 on a MIG slice \(3g.40gb\), got 2"),
        (A100, "3g.20gb", 1, "3g.20gb"),  # an A100-40GB profile
        ("L40S", "1g.10gb", 1, "L40S"),  # no MIG
    ],
)
def test_a_slice_replica_needs_one_gpu_with_that_profile(gpu, profile, num_gpus, message):
    with pytest.raises(ValueError, match=message):
        replica_model(SMALL, gpu, num_gpus, 8, IN_TOKENS, OUT_TOKENS, None, profile)


def test_a_cap_applies_to_the_whole_gpu_under_the_slice():
    """The cap model sees the draw of the GPU with every slice like this one: a 7g slice of
    an H100 (the whole GPU) is capped exactly as the whole GPU."""
    capped = replica(LLAMA_8B, H100, "7g.80gb", cap_w=400.0)
    whole = replica(LLAMA_8B, H100, None, cap_w=400.0)
    np.testing.assert_allclose(capped.iter_s, whole.iter_s, rtol=1e-12)
    np.testing.assert_allclose(capped.power_w, whole.power_w, rtol=1e-12)
    assert capped.power_w.max() <= 400.0 + 1e-9
