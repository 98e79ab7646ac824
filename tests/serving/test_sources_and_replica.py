"""The pieces both fidelities share: the request sources of a run and the replica model."""

from __future__ import annotations

import numpy as np
import pytest

from sim.models.llm_replica import replica_model
from sim.serving import RequestTable, performance
from sim.serving.sources import FileSource, SyntheticSource

TABLE = RequestTable(
    np.array([0.0, 10.0, 20.0, 35.0]), np.array([5, 6, 7, 8]), np.array([1, 2, 3, 4])
)


def test_a_file_scaled_in_time_and_tiled_gives_every_copy_in_order():
    """Span 35 s x 2 = 70 s, mean gap 70 / 3 s: copies start every 70 + 23.3 s."""
    src = FileSource(TABLE, 200.0, 2.0, True)
    got = src.requests_between(0.0, 200.0)
    period = 70.0 + 70.0 / 3
    want = np.concatenate([np.array([0.0, 20.0, 40.0, 70.0]) + k * period for k in range(3)])
    want = want[want < 200.0]
    assert np.allclose(got.arrival_s, want)
    assert got.input_tokens.tolist() == [5, 6, 7, 8, 5, 6, 7, 8, 5, 6][: len(want)]


def test_step_sums_count_exactly_what_requests_between_returns():
    src = FileSource(TABLE, 500.0, 1.5, True)
    edges = np.linspace(0.0, 500.0, 37)
    arrivals, inp, out = src.step_sums(edges)
    for k in range(len(edges) - 1):
        window = src.requests_between(edges[k], edges[k + 1])
        assert arrivals[k] == len(window)
        assert inp[k] == window.input_tokens.sum() and out[k] == window.output_tokens.sum()


def test_without_repeat_a_file_ends_with_its_last_request():
    src = FileSource(TABLE, 1000.0, 1.0, False)
    assert len(src.requests_between(0.0, 1000.0)) == 4
    assert src.step_sums(np.array([0.0, 30.0, 1000.0]))[0].tolist() == [3.0, 1.0]


def test_the_generator_draws_any_window_alone_and_the_same_seed_gives_the_same_requests():
    def source(seed: int) -> SyntheticSource:
        return SyntheticSource(
            3.0, 3 * 86400.0, np.random.SeedSequence(seed), 0.5, 0.2, "azure-conv"
        )

    whole = source(4).requests_between(0.0, 3 * 86400.0)
    part = source(4).requests_between(5000.5, 90000.0)
    inside = (whole.arrival_s >= 5000.5) & (whole.arrival_s < 90000.0)
    assert np.array_equal(part.arrival_s, whole.arrival_s[inside])
    assert np.array_equal(part.output_tokens, whole.output_tokens[inside])
    assert not np.array_equal(
        source(5).requests_between(0, 3600).arrival_s[:10], whole.arrival_s[:10]
    )


def test_the_generators_expected_counts_match_its_draws():
    """step_sums gives the rate's integral; over three days the draws are within a few
    standard deviations of it, step by step (6-hour steps) and in total."""
    src = SyntheticSource(3.0, 3 * 86400.0, np.random.SeedSequence(1), 0.5, 0.2, "azure-conv")
    edges = np.arange(0.0, 3 * 86400.0 + 1, 6 * 3600.0)
    expected = src.step_sums(edges)[0]
    drawn = np.histogram(src.requests_between(0.0, 3 * 86400.0).arrival_s, edges)[0]
    assert np.all(np.abs(drawn - expected) < 5 * np.sqrt(expected))
    assert abs(drawn.sum() - expected.sum()) < 4 * np.sqrt(expected.sum())


def test_a_full_replica_is_the_calibrated_point_at_its_maximum_batch():
    m = replica_model("Llama-3.1-70B-Instruct", "H100-SXM", 4, 128, 1000.0, 200.0)
    pt = performance("Llama-3.1-70B-Instruct", "H100-SXM", 4, 128, 1000.0, 200.0)
    assert m.slots == 128
    # the roofline's batch is a soft minimum of the maximum batch and the KV capacity, a
    # hair under 128 here: the replica's 128 sequences get the same iteration time
    assert m.tokens_per_s(128) == pytest.approx(pt.throughput_tokens_per_s, rel=1e-4)
    assert m.power_w[128] == pytest.approx(pt.power_w, rel=1e-12)
    assert m.prefill_s(1000.0) == pytest.approx(pt.prefill_s, rel=1e-3)


def test_a_bigger_batch_is_slower_per_token_faster_in_total_and_draws_more():
    m = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1200.0, 200.0)
    n = np.arange(1, m.slots + 1)
    assert np.all(np.diff(m.iter_s[1:]) > 0)
    assert np.all(np.diff(m.tokens_per_s(n)) > 0)
    assert np.all(np.diff(m.power_w) >= 0)
    assert m.power_w[0] == m.idle_w < m.load_w == m.power_w[1]
    assert m.weights_gb == 16.0  # 8.0 billion parameters (the catalog) x 2 bytes
    tokens = np.array([10, 100, 1000, 10000, 100000])
    assert np.all(np.diff(m.prefill_s(tokens)) > 0)


def test_a_cap_lowers_the_power_and_slows_every_batch():
    free = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1200.0, 200.0)
    capped = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1200.0, 200.0, 350.0)
    assert np.all(capped.power_w[1:] <= 350.0 + 1e-9)
    assert np.all(capped.iter_s >= free.iter_s)
    assert capped.iter_s[256] > free.iter_s[256]
    with pytest.raises(ValueError, match="cap_w must be within"):
        replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1200.0, 200.0, 50.0)


def test_a_replica_whose_kv_cache_holds_fewer_sequences_than_its_batch_has_fewer_slots():
    m = replica_model("Llama-3.1-70B-Instruct", "H100-SXM", 2, 4096, 4000.0, 1000.0)
    assert 1 <= m.slots < 4096
    assert len(m.iter_s) == len(m.power_w) == m.slots + 1
