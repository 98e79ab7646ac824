"""Token-length laws (sim/models/token_laws.py) and what they change in the replica model:
their moments, draws and in-flight context share (kappa), and `performance()` /
`replica_model()` taking a law as well as a mean (docs/serving.md "Lengths as
distributions")."""

from __future__ import annotations

import numpy as np
import pytest

from sim.models.llm_performance import serving_model
from sim.models.llm_replica import replica_model
from sim.models.token_laws import FixedLaw, HistogramLaw, LogNormalLaw
from sim.serving import performance

# Qwen3-8B on one H100 at max_num_seqs 96 on the ML.ENERGY leaderboard's GPQA task (long
# reasoning answers): its output-length histogram (51 edges from 812 to 32,768 tokens in
# steps of 639.12; 50 counts) and what vLLM 0.11.1 measured. ml-energy/leaderboard @
# 0ea52b6a, public/data/models/Qwen__Qwen3-8B__gpqa.json (Apache-2.0), the configuration
# with gpu_model H100, num_gpus 1, max_num_seqs 96. Not in ../shared/data (its copy leaves
# the gpqa files out), so the histogram is written out here.
GPQA_EDGES = np.append(812.0 + 639.12 * np.arange(50), 32768.0)
GPQA_COUNTS = [2, 6, 11, 6, 8, 9, 14, 11, 15, 7, 11, 13, 10, 9, 12, 5, 13, 5, 8, 8, 4, 5, 2]
GPQA_COUNTS += [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1] + [0] * 13
GPQA_AVG_OUTPUT = 8052.388888888889
GPQA_THROUGHPUT = 3117.4206689898256
GPQA_AVG_BATCH = 81.98511904761905
GPQA = HistogramLaw.from_edges(GPQA_EDGES, GPQA_COUNTS)

# the heavy-tailed mix: 90% of the answers 200 tokens long, 10% 30,000
HEAVY = HistogramLaw((200, 30_000), (200, 30_000), (9, 1))


# --- the laws ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "law",
    [
        LogNormalLaw.from_median(600.0, 1.1, 1, 32_768),
        LogNormalLaw(5.0, 0.8),  # unclipped above
        GPQA,
        HEAVY,
        FixedLaw(300),
    ],
    ids=["lognormal-clipped", "lognormal", "gpqa-histogram", "heavy-mix", "fixed"],
)
def test_a_laws_mean_and_second_moment_are_those_of_its_draws(law):
    """Two million draws: the sample mean and mean square within 5 standard errors of the
    law's (log-normal moments leave out the rounding to whole tokens, far inside that)."""
    x = law.sample(np.random.default_rng(7), 2_000_000).astype(float)
    se = x.std() / np.sqrt(len(x))
    assert abs(x.mean() - law.mean) <= 5 * se + 1e-9
    se2 = (x * x).std() / np.sqrt(len(x))
    assert abs((x * x).mean() - law.second_moment) <= 5 * se2 + 1e-9
    assert law.quantile(0.0) <= x.min() and law.quantile(1.0) >= x.max()


def test_kappa_is_the_mean_generated_context_of_a_sequence_in_flight():
    """One slot of a full replica serves answers of the heavy-tailed mix back to back; at
    random instants the answer in progress has generated kappa x E[L] tokens on average
    (renewal theory's mean age), not E[L] / 2: the long answers hold the slot."""
    rng = np.random.default_rng(3)
    lengths = HEAVY.sample(rng, 200_000).astype(float)
    ends = np.cumsum(lengths)
    instants = rng.uniform(0.0, ends[-1], 200_000)
    k = np.searchsorted(ends, instants, side="right")
    generated = instants - (ends[k] - lengths[k])
    assert HEAVY.in_flight_share == pytest.approx(90.036e6 / (2 * 3180.0**2))
    assert generated.mean() / HEAVY.mean == pytest.approx(HEAVY.in_flight_share, rel=0.03)
    assert FixedLaw(500).in_flight_share == 0.5


def test_a_histogram_from_float_edges_keeps_the_whole_counts_of_each_bin():
    """[0.5, 2) holds 1, [2, 2.5) holds 2, the last bin [2.5, 4] holds 3 and 4."""
    law = HistogramLaw.from_edges([0.5, 2.0, 2.5, 4.0], [3, 0, 1])
    assert (law.lows, law.highs, law.counts) == ((1, 2, 3), (1, 2, 4), (3, 0, 1))
    assert GPQA.lows[0] == 812 and GPQA.highs[-1] == 32_768
    assert sum(GPQA.counts) == sum(GPQA_COUNTS) == 198
    draws = GPQA.sample(np.random.default_rng(1), 10_000)
    assert draws.min() >= 812 and draws.max() <= 32_768
    # the law's mean is the histogram's at its bins' centres (within half a token)
    mid = (GPQA_EDGES[1:] + GPQA_EDGES[:-1]) / 2
    assert GPQA.mean == pytest.approx(np.dot(mid, GPQA_COUNTS) / 198, abs=0.5)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: HistogramLaw((1, 5), (4, 9), (0, 0)), "every count is 0"),
        (lambda: HistogramLaw((1, 4), (4, 9), (1, 1)), "bin 1 .* must increase and not overlap"),
        (lambda: HistogramLaw((5,), (4,), (1,)), "high 4 is below low 5"),
        (lambda: HistogramLaw.from_edges([1.0, 3.0], [1, 2]), "n \\+ 1 edges"),
        (lambda: HistogramLaw.from_edges([1.2, 1.5, 3.0], [1, 2]), "bin 0 .* no whole count"),
        (lambda: LogNormalLaw.from_median(-3.0, 1.0), "median must be a positive number"),
        (lambda: LogNormalLaw(1.0, 1.0, 10, 5), "min <= max"),
        (lambda: FixedLaw(-1), "tokens must be in"),
    ],
)
def test_a_bad_law_is_a_one_line_error_naming_what_is_wrong(make, message):
    with pytest.raises(ValueError, match=message) as e:
        make()
    assert "\n" not in str(e.value)


def test_a_scaled_law_keeps_its_kappa():
    brief = GPQA.scaled(0.5)
    assert brief.mean == pytest.approx(0.5 * GPQA.mean)
    assert brief.in_flight_share == pytest.approx(GPQA.in_flight_share)
    assert GPQA.scaled(1.0) is GPQA


# --- performance() and replica_model() ----------------------------------------------------


def test_a_mean_alone_keeps_the_calibrated_kappa():
    """Given only means, the context is input + the calibrated kappa x output, as before
    laws existed (the results of scenarios without laws do not move)."""
    pt = performance("Qwen3-8B", "H100", 1, 96, avg_output_tokens=8052)
    kappa = serving_model().params.kappa
    assert pt.context_tokens == pytest.approx(serving_model().params.input_tokens + kappa * 8052)
    assert pt.throughput_tokens_per_s == pytest.approx(1_521, rel=1e-3)


def test_long_reasoning_answers_hold_more_sequences_with_their_histogram():
    """Qwen3-8B on one H100, max_num_seqs 96, GPQA answers (mean 8,052 tokens): vLLM
    measured 3,117 tokens/s at 82 sequences in flight. With the mean alone the model's
    calibrated kappa (0.975, chat answers) puts 7,971 tokens of context in each sequence:
    48 fit, 1,521 tokens/s (-51%). The GPQA histogram's kappa (0.63: the answers spread
    less than chat's, relative to their mean) gives 5,181 tokens: 72 fit, 2,224 tokens/s
    (-29%). Still low: the iteration reads the KV cache at the bandwidth share fitted on
    chat's short contexts and counts the memory in GB where the GPU has GiB (the iteration
    level's paged KV cache counts GiB: docs/serving.md "Iteration level")."""
    mean_only = performance("Qwen3-8B", "H100", 1, 96, avg_output_tokens=8052)
    law = GPQA.scaled(GPQA_AVG_OUTPUT / GPQA.mean)
    with_law = performance("Qwen3-8B", "H100", 1, 96, avg_output_tokens=law)
    assert law.in_flight_share == pytest.approx(0.629, abs=0.001)
    assert with_law.output_tokens == pytest.approx(GPQA_AVG_OUTPUT)
    assert with_law.batch == pytest.approx(72.4, abs=0.5)
    assert mean_only.batch < with_law.batch < GPQA_AVG_BATCH
    assert with_law.throughput_tokens_per_s == pytest.approx(2_224, rel=0.01)
    error = abs(with_law.throughput_tokens_per_s / GPQA_THROUGHPUT - 1)
    assert error < 0.30 < abs(mean_only.throughput_tokens_per_s / GPQA_THROUGHPUT - 1)


def test_a_heavy_tail_holds_fewer_sequences_than_its_mean_says():
    """90% of answers at 200 tokens, 10% at 30k: mean 3,180, but a sequence in flight is
    most likely one of the long ones (kappa 4.45): 14,270 tokens of context instead of the
    3,213 the calibrated kappa gives. Llama-3.1-8B on one H100 at max_batch 256: the mean
    alone fits 133 sequences, the law 30, at about a quarter of the throughput. (No
    measurement of such a mix exists to check the figure against.)"""
    mean_only = performance("Llama-3.1-8B-Instruct", "H100", 1, 256, avg_output_tokens=3180)
    with_law = performance("Llama-3.1-8B-Instruct", "H100", 1, 256, avg_output_tokens=HEAVY)
    assert with_law.context_tokens == pytest.approx(
        serving_model().params.input_tokens + 4.4517 * 3180, rel=1e-3
    )
    assert with_law.kv_capacity_seqs == pytest.approx(
        mean_only.kv_capacity_seqs * mean_only.context_tokens / with_law.context_tokens
    )
    assert with_law.throughput_tokens_per_s < 0.5 * mean_only.throughput_tokens_per_s


def test_a_replica_model_takes_a_law_and_caches_it_by_value():
    law = LogNormalLaw.from_median(300.0, 1.0, 1, 4096)
    a = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1000.0, law)
    b = replica_model(
        "Llama-3.1-8B-Instruct",
        "H100-SXM",
        1,
        256,
        1000.0,
        LogNormalLaw.from_median(300.0, 1.0, 1, 4096),
    )
    assert a is b
    mean = replica_model("Llama-3.1-8B-Instruct", "H100-SXM", 1, 256, 1000.0, law.mean)
    # a law with kappa above the calibrated one puts more context in flight: slower steps
    assert law.in_flight_share > serving_model().params.kappa
    assert a.iter_s[256] > mean.iter_s[256]
