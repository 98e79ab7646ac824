"""Prefix caching (issue #33 part 7; docs/serving.md "Prefix caching"): a service's
`prefix_cache_hit_rate` h is the share of each prompt's tokens found in the cache. Prefill
computes only the others (floor(h L) of a prompt of L tokens are cached), the KV cache
still holds the whole prompt. At h = 0 a run is bit for bit a run without the option; time
to first token and serving energy fall with h at every fidelity; at the iteration level
no iteration exceeds its token budget, the KV blocks count the whole context, and the
tokens computed are the uncached prompts, the outputs and the recomputed tokens; policies
see the capacity the cache gives; a bad rate is a one-line error naming the key (exit
status 2 from the CLI)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sim
from sim.api import Policy
from sim.errors import ScenarioError
from sim.models.llm_iteration import iteration_cost
from sim.models.llm_replica import cached_tokens, replica_model
from sim.serving import performance
from tests.conftest import run_cli
from tests.engine.test_service_accounting import serving_only
from tests.engine.test_services import CHAT
from tests.golden.cases import SKIPPED_SUMMARY_KEYS
from tests.serving.test_iteration_level import Checked, crowded, make, run
from tests.serving.test_request_level import TableSource

MODEL = "Llama-3.1-8B-Instruct"
CODE = {**CHAT, "requests": {"rate_per_s": 3.0, "tokens": "azure-code"}}
"""Long prompts (the Azure code trace's law: about 2,000 tokens), short answers: prefill
is most of the work."""
FIDELITIES = ["fluid", "request", "iteration"]


def with_rate(hit_rate: float | None) -> dict:
    return CODE if hit_rate is None else {**CODE, "prefix_cache_hit_rate": hit_rate}


# --- the replica model ------------------------------------------------------------------


def test_a_prompt_computes_its_tokens_not_in_the_cache_and_keeps_its_whole_context():
    plain = performance(MODEL, "H100", 1, 128, avg_input_tokens=2000, avg_output_tokens=100)
    cached = performance(
        MODEL, "H100", 1, 128, avg_input_tokens=2000, avg_output_tokens=100, prefix_hit_rate=0.75
    )
    short = performance(MODEL, "H100", 1, 128, avg_input_tokens=500, avg_output_tokens=100)
    # Prefill alone of 2,000 tokens with 1,500 cached is that of a 500-token prompt ...
    assert cached.prefill_s == pytest.approx(short.prefill_s, rel=1e-12)
    assert cached.prefill_s < 0.5 * plain.prefill_s
    # ... but the context, and so the KV cache's capacity, is the whole prompt's.
    assert cached.context_tokens == plain.context_tokens
    assert cached.kv_capacity_seqs == plain.kv_capacity_seqs
    # Less prefill per output token: more tokens per second, less energy per token.
    assert cached.throughput_tokens_per_s > plain.throughput_tokens_per_s
    assert cached.energy_per_token_j < plain.energy_per_token_j
    assert (cached.prefix_hit_rate, plain.prefix_hit_rate) == (0.75, 0.0)


def test_a_hit_rate_of_zero_is_the_model_without_prefix_caching_bit_for_bit():
    args = (MODEL, "H100-SXM", 1, 64, 1000.0, 200.0)
    plain, zero = replica_model(*args), replica_model(*args, prefix_hit_rate=0.0)
    assert np.array_equal(plain.iter_s, zero.iter_s)
    assert np.array_equal(plain.power_w, zero.power_w)
    tokens = np.arange(0, 5000, 7)
    assert np.array_equal(plain.prefill_s(tokens), zero.prefill_s(tokens))
    assert performance(MODEL, "H100", 1, 64) == performance(MODEL, "H100", 1, 64, prefix_hit_rate=0)


def test_the_replica_models_prefill_of_a_prompt_is_that_of_its_uncached_tokens():
    args = (MODEL, "H100-SXM", 1, 64, 1000.0, 200.0)
    plain, cached = replica_model(*args), replica_model(*args, prefix_hit_rate=0.6)
    tokens = np.array([1, 2, 10, 999, 1000, 4097])
    assert cached_tokens(tokens, 0.6).tolist() == [0, 1, 6, 599, 600, 2458]
    uncached = tokens - cached_tokens(tokens, 0.6)
    assert np.array_equal(cached.prefill_s(tokens), plain.prefill_s(uncached))
    # The amortised prefill in the iteration time: shorter iterations at every batch.
    assert (cached.iter_s < plain.iter_s).all()
    assert cached.slots == plain.slots


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, math.nan, True, "0.5"])
def test_a_hit_rate_outside_zero_to_one_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=r"prefix_hit_rate must be a number in \[0, 1\)"):
        performance(MODEL, "H100", 1, 64, prefix_hit_rate=bad)
    with pytest.raises(ValueError, match="prefix_hit_rate"):
        replica_model(MODEL, "H100-SXM", 1, 64, 1000.0, 200.0, prefix_hit_rate=bad)


# --- the iteration level --------------------------------------------------------------------


def test_an_iteration_prefills_the_uncached_tokens_and_its_decodes_read_the_whole_prompt():
    m = replica_model(MODEL, "H100-SXM", 1, 256, 1000.0, 200.0, prefix_hit_rate=0.5)
    cost = iteration_cost(m, 8192)
    # One request: a 1,001-token prompt (500 of its tokens cached), 3 output tokens.
    sim_, _ = run(TableSource([0.0], [3], [1001]), m)
    t = sim_.request_table()
    t1 = cost.step(0, 0, 501)[0]  # the prefill: 501 tokens computed
    t3 = t1 + cost.step(1, 1001, 0)[0] + cost.step(1, 1002, 0)[0]  # decodes over all 1,001
    assert t["first_token_s"][0] == pytest.approx(t1, rel=1e-12)
    assert t["end_s"][0] == pytest.approx(t3, rel=1e-12)


def test_a_prompt_holds_the_kv_blocks_of_its_whole_context_cached_tokens_included():
    m = replica_model(MODEL, "H100-SXM", 1, 256, 1000.0, 200.0, prefix_hit_rate=0.5)
    # A 20,001-token prompt: 10,000 cached, 10,001 to compute, over the budget of 8,192.
    sim_, _ = make(TableSource([0.0], [3], [20_001]), m)
    sim_.configure(0.0, 0, 1, m)
    sim_.advance_to(1e-6)  # the request arrived: its first chunk is being computed
    replica = sim_._fleet.sites[0].adm[0]
    assert replica.first == (0, 8192)  # (decodes, prefill tokens): a full budget
    assert replica.pf_blocks == math.ceil((10_000 + 8192) / 16)  # cached blocks held too
    sim_.close(1e3)
    t = sim_.request_table()
    # Its decodes read all 20,001 tokens of the prompt: the second chunk (1,809 tokens),
    # then one decode over the prompt and the first output token.
    cost = iteration_cost(m, 8192)
    first = cost.step(0, 0, 8192)[0] + cost.step(0, 0, 1809)[0]
    assert t["first_token_s"][0] == pytest.approx(first, rel=1e-12)
    assert t["end_s"][0] == pytest.approx(
        first + cost.step(1, 20_001, 0)[0] + cost.step(1, 20_002, 0)[0], rel=1e-12
    )


def test_within_the_budget_and_the_cache_the_work_is_the_uncached_prompts(monkeypatch):
    """On an L4 (about 43k tokens of KV) long requests crowd the cache: with 60% of each
    prompt cached the decodes still hold blocks for their whole context, so requests are
    still preempted; every iteration keeps to the token budget and the blocks (`Checked`),
    and the tokens computed are the uncached prompts, a decode per token after the first
    and the recomputed tokens."""
    checked = Checked(monkeypatch)
    m = replica_model(MODEL, "L4", 1, 256, 1000.0, 200.0, prefix_hit_rate=0.6)
    arrival, out, inp = crowded()
    sim_, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5)
    t = sim_.request_table()
    assert (t["state"] == "served").all()
    assert sim_.summary()["requests_preempted"] > 0  # the cache was the limit
    uncached = inp - np.floor(0.6 * inp).astype(int)
    assert checked.tokens == int(
        uncached.sum() + out.sum() - len(out) + t["recomputed_tokens"].sum()
    )


# --- from a scenario, at every fidelity -----------------------------------------------------


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_a_hit_rate_of_zero_gives_the_run_without_the_option_bit_for_bit(tmp_path, fidelity):
    plain = sim.simulate(serving_only(tmp_path, services=[with_rate(None)], fidelity=fidelity))
    zero = sim.simulate(serving_only(tmp_path, services=[with_rate(0.0)], fidelity=fidelity))

    def measured(r: sim.Results) -> dict:
        return {k: v for k, v in r.summary.items() if k not in SKIPPED_SUMMARY_KEYS}

    assert measured(zero) == measured(plain)
    assert zero.services.equals(plain.services)


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_time_to_first_token_and_serving_energy_fall_with_the_hit_rate(tmp_path, fidelity):
    runs = [
        sim.simulate(serving_only(tmp_path, services=[with_rate(h)], fidelity=fidelity)).summary
        for h in (0.0, 0.5, 0.9)
    ]
    assert runs[0]["requests_served"] > 5000
    assert len({r["requests_total"] for r in runs}) == 1  # the same requests
    ttft = [r["ttft_p99_requests_ms"] for r in runs]
    energy = [r["energy_serving_kwh"] for r in runs]
    assert ttft[0] > ttft[1] > ttft[2]
    assert energy[0] > energy[1] > energy[2]


class CapacityProbe(Policy):
    """Reads the service's capacity per replica at time 0."""

    tick_s = 60.0
    capacity_rps: float | None = None

    def decide(self, state):
        if self.capacity_rps is None:
            self.capacity_rps = state.service("chat").capacity_rps("a")
        return []


def test_policies_see_the_capacity_the_cache_gives(tmp_path):
    capacity = []
    for h in (0.0, 0.5):
        probe = CapacityProbe()
        sim.simulate(serving_only(tmp_path, services=[with_rate(h)], fidelity="fluid"), probe)
        capacity.append(probe.capacity_rps)
    assert capacity[1] > 1.5 * capacity[0]


@pytest.mark.parametrize("bad", [1.0, -0.2, "high"])
def test_a_bad_hit_rate_is_a_one_line_error_naming_the_key_and_value(tmp_path, bad):
    with pytest.raises(ScenarioError) as err:
        serving_only(tmp_path, services=[with_rate(bad)])
    text = str(err.value)
    assert "services[0].prefix_cache_hit_rate" in text and repr(bad) in text
    assert "\n" not in text


def test_the_cli_refuses_a_bad_hit_rate_with_exit_status_2(tmp_path, capsys):
    toml = tmp_path / "prefix.toml"
    toml.write_text(
        'name = "x"\nstart = 2020-06-01T00:00:00Z\nduration_h = 1\n[[sites]]\nname = "a"\n'
        "lat = 0\nlon = 0\ncarbon = { constant_g_per_kwh = 1 }\n"
        'gpus = [{ model = "H100-SXM", count = 1 }]\n'
        '[[services]]\nname = "chat"\nmodel = "Llama-3.1-8B-Instruct"\ngpu = "H100-SXM"\n'
        'sites = ["a"]\nslo = { ttft_ms = 1000, tpot_ms = 100 }\n'
        "requests = { rate_per_s = 1.0 }\nprefix_cache_hit_rate = 1.2\n"
    )
    code, out = run_cli(["run", str(toml), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert "services[0].prefix_cache_hit_rate" in out.err and "1.2" in out.err
    assert len(out.err.strip().splitlines()) == 1
