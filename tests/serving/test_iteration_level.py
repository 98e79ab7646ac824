"""The iteration level (`sim.serving.iteration_level`): vLLM V1's scheduler iteration by
iteration. Two requests follow the cost model iteration by iteration; a prompt longer than
the token budget is prefilled in chunks; a request arriving mid-iteration waits for that
iteration's end; one sequence at a time makes it an M/G/1 queue (Pollaczek-Khinchine);
TTFT rises with load and falls with more replicas; no iteration exceeds its token budget
and the KV blocks never exceed the cache; a preempted request is served in full with its
recomputation counted; a request too long for the replica is refused and counted; every
request ends in exactly one state; a scale-down drains by the time it announced."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sim.config.services import SchedulerConfig, SloConfig
from sim.models.llm_iteration import iteration_cost
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.iteration_level import IterationLevel, fleet
from sim.serving.iteration_level.replicas import _DECODE, _IDLE
from sim.serving.service_sim import ServiceContext
from sim.util.native import pure_module
from tests.serving.test_request_level import NEVER_S, PowerLog, TableSource

MODEL = "Llama-3.1-8B-Instruct"
SLO = SloConfig(ttft_ms=500.0, tpot_ms=50.0)


def model(gpu: str = "H100-SXM", max_batch: int = 256) -> ReplicaModel:
    return replica_model(MODEL, gpu, 1, max_batch, 1000.0, 200.0)


class Power(PowerLog):
    """The `on_power` callback, many changes per call flattened into `calls`."""

    def __call__(self, site, t_s, extra_w, idle) -> None:
        changes = zip(np.atleast_1d(t_s), np.atleast_1d(extra_w), np.atleast_1d(idle), strict=True)
        for t, w, i in changes:
            super().__call__(site, float(t), float(w), int(i))


def make(source, m: ReplicaModel, *, sites=1, timeout_s=NEVER_S, horizon_s=1e6, **sched):
    """An iteration level over `source` with vLLM's defaults for `m` unless `sched` says."""
    log = Power()
    cfg = SchedulerConfig(**sched).resolved(m.gpu, None, 256)
    ctx = ServiceContext("chat", source, np.zeros(sites), SLO, timeout_s, 60.0, horizon_s, log)
    sim = IterationLevel(ctx, [cfg] * sites)
    return sim, log


def run(source, m, replicas=1, horizon_s=1e6, **kw):
    sim, log = make(source, m, horizon_s=horizon_s, **kw)
    sim.configure(0.0, 0, replicas, m)
    sim.close(horizon_s)
    return sim, log


# --- iteration by iteration ---------------------------------------------------------------


def test_two_requests_follow_the_cost_model_iteration_by_iteration():
    m = model()
    cost = iteration_cost(m, 8192)
    # A: 100 prompt tokens, 3 output tokens; B: 50 and 2; both at t = 0, A first.
    sim, _ = run(TableSource([0.0, 0.0], [3, 2], [100, 50]), m)
    t = sim.request_table()
    # Iteration 1 starts at A's arrival on the idle replica: A's prompt, its first token.
    t1 = cost.step(0, 0, 100)[0]
    # Iteration 2: A's decode over its 100 tokens of context and B's prompt (B waited for
    # the iteration in progress): A's second token, B's first.
    t2 = t1 + cost.step(1, 100, 50)[0]
    # Iteration 3: both decode, over 101 + 50 tokens: A's third and B's second, the last.
    t3 = t2 + cost.step(2, 151, 0)[0]
    assert t["first_token_s"].tolist() == pytest.approx([t1, t2], rel=1e-12)
    assert t["end_s"].tolist() == pytest.approx([t3, t3], rel=1e-12)
    assert t["ttft_ms"].tolist() == pytest.approx([1e3 * t1, 1e3 * t2], rel=1e-12)
    assert t["tpot_ms"].tolist() == pytest.approx([1e3 * (t3 - t1) / 2, 1e3 * (t3 - t2)])


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks_beside_the_decodes():
    m = model()
    cost = iteration_cost(m, 8192)
    # A (10 prompt tokens, 1000 out) runs; B's 10,000-token prompt arrives with it.
    sim, _ = run(TableSource([0.0, 0.0], [1000, 5], [10, 10_000]), m)
    t = sim.request_table()
    # Iteration 1: A's prompt alone. Iteration 2: A's decode and 8,191 of B's prompt (the
    # budget of 8,192 less the decode); iteration 3: A's decode and B's last 1,809 tokens:
    # B's first token at its end.
    t1 = cost.step(0, 0, 10)[0]
    t2 = t1 + cost.step(1, 10, 8191)[0]
    t3 = t2 + cost.step(1, 11, 1809)[0]
    assert t["first_token_s"][0] == pytest.approx(t1, rel=1e-12)
    assert t["first_token_s"][1] == pytest.approx(t3, rel=1e-12)


def test_a_request_arriving_mid_iteration_waits_for_its_end_before_its_prefill():
    m = model()
    cost = iteration_cost(m, 8192)
    t1 = cost.step(0, 0, 100)[0]
    d = cost.step(1, 100, 0)[0]
    arrive = t1 + 0.5 * d  # in A's first decode iteration
    sim, _ = run(TableSource([0.0, arrive], [1000, 2], [100, 100]), m)
    t = sim.request_table()
    boundary = t1 + d
    assert t["first_token_s"][1] == pytest.approx(boundary + cost.step(1, 101, 100)[0])
    assert t["ttft_ms"][1] > 1e3 * (cost.step(0, 0, 100)[0] + 0.4 * d)


# --- queueing -----------------------------------------------------------------------------

PK_SEEDS = 12
PK_REQUESTS = 4000


def test_one_sequence_at_a_time_is_an_mg1_queue_with_the_pollaczek_khinchine_mean_wait():
    """max_num_seqs = 1: a request waits for the one before it to finish (FCFS), then takes
    its prefill and decodes alone: an M/G/1 queue. Its wait (TTFT less its own prefill
    alone) averages lambda E[S^2] / (2 (1 - rho)) over the service times S it measured."""
    m = model()
    cost = iteration_cost(m, 8192)
    rng0 = np.random.default_rng(99)
    inp0 = rng0.integers(100, 2000, 10_000)
    out0 = rng0.integers(1, 200, 10_000)
    mean_s = float(np.mean([cost.step(0, 0, int(i))[0] for i in inp0[:500]]))
    mean_s += float(np.mean(out0)) * cost.step(1, 1100, 0)[0]
    lam = 0.6 / mean_s
    gaps = []
    for seed in range(PK_SEEDS):
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(rng.exponential(1 / lam, PK_REQUESTS))
        inp = rng.integers(100, 2000, PK_REQUESTS)
        out = rng.integers(1, 200, PK_REQUESTS)
        horizon_s = arrival[-1] + 1e4
        sim, _ = run(TableSource(arrival, out, inp), m, horizon_s=horizon_s, max_num_seqs=1)
        t = sim.request_table()
        assert (t["state"] == "served").all()
        prefill = np.array([cost.step(0, 0, int(i))[0] for i in inp])
        start = t["first_token_s"].to_numpy() - prefill
        wait = start - arrival
        service = t["end_s"].to_numpy() - start
        rho = lam * service.mean()
        gaps.append(wait.mean() - lam * np.mean(service**2) / (2 * (1 - rho)))
    g = np.array(gaps)
    half = stats.t.ppf(0.995, PK_SEEDS - 1) * g.std(ddof=1) / math.sqrt(PK_SEEDS)
    assert abs(g.mean()) <= half, (g.mean(), half)


def poisson_chat(rate_per_s: float, n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate_per_s, n))
    inp = np.minimum(rng.lognormal(np.log(1000), 0.6, n).astype(int) + 1, 8000)
    out = np.minimum(rng.lognormal(np.log(130), 0.9, n).astype(int) + 1, 1000)
    return arrival, out, inp


def test_ttft_rises_with_load_below_saturation_and_falls_with_more_replicas():
    m = model()
    ttft = {}
    for rate in (2.0, 6.0, 12.0):
        arrival, out, inp = poisson_chat(rate, 6000)
        sim, _ = run(TableSource(arrival, out, inp), m, horizon_s=arrival[-1] + 1e3)
        t = sim.request_table()
        assert (t["state"] == "served").all()  # below saturation: nothing queues for long
        ttft[rate] = (t["ttft_ms"].mean(), t["ttft_ms"].quantile(0.99))
    assert ttft[2.0][0] < ttft[6.0][0] < ttft[12.0][0]
    assert ttft[2.0][1] < ttft[6.0][1] < ttft[12.0][1]
    arrival, out, inp = poisson_chat(12.0, 6000)
    two, _ = run(TableSource(arrival, out, inp), m, replicas=2, horizon_s=arrival[-1] + 1e3)
    t2 = two.request_table()
    assert t2["ttft_ms"].quantile(0.99) < ttft[12.0][1]
    assert t2["ttft_ms"].mean() < ttft[12.0][0]


# --- budget, KV cache, preemption, refusal -------------------------------------------------


class Checked:
    """Wraps `_Replica.schedule`: every iteration a schedule starts within the token budget
    and the sequences, and the KV blocks of the epoch's last iteration within the cache;
    counts the tokens computed (prefill chunks and decodes) iteration by iteration. The
    replicas are a pure-Python copy's (a compiled class's methods cannot be wrapped)."""

    def __init__(self, monkeypatch):
        self.iterations = 0
        self.tokens = 0
        self.open: dict[int, tuple[int, int, int, int]] = {}
        replica = pure_module("sim.serving.iteration_level.replicas")._Replica
        monkeypatch.setattr(fleet, "_Replica", replica)
        original = replica.schedule
        original_event = replica.event
        checked = self

        def event(r, t):
            checked.close(r, r.ev_k if r.mode == _DECODE else r.k + 1)
            return original_event(r, t)

        def schedule(r, t):
            out = original(r, t)
            lim = r.lim
            b, p = r.first
            assert b + p <= lim.batched_tokens
            assert b + len(r.pf) <= lim.max_seqs
            last = r.ev_k - 1 if r.mode == _DECODE else r.k
            bs = lim.block_size
            used = sum(-(-(v + last + 1) // bs) for v in r.base.values()) + r.pf_blocks
            assert used <= lim.blocks, (used, lim.blocks)
            assert r.b <= lim.max_seqs <= lim.batched_tokens
            if r.mode:
                checked.open[id(r)] = (r.k, b, p, r.b)
            return out

        monkeypatch.setattr(replica, "schedule", schedule)
        monkeypatch.setattr(replica, "event", event)

    def close(self, r, k_end: int) -> None:
        """The epoch opened at `k` ends at boundary `k_end`: its iterations' tokens."""
        k, b, p, b_after = self.open.pop(id(r))
        self.iterations += k_end - k
        self.tokens += b + p + (k_end - k - 1) * b_after


def crowded(n: int = 120, seed: int = 4):
    """Long prompts and answers at once on an L4 (a 24 GB GPU: about 43k tokens of KV)."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 5, n))
    inp = rng.integers(500, 3000, n)
    out = rng.integers(200, 1500, n)
    return arrival, out, inp


def test_no_event_reaches_an_idle_replica(monkeypatch):
    """A replica that an arrival wakes and that empties before the next arrival leaves no
    calendar entry behind (once, a stale entry served an idle replica an event)."""
    replica = pure_module("sim.serving.iteration_level.replicas")._Replica
    monkeypatch.setattr(fleet, "_Replica", replica)
    original_event = replica.event

    def event(r, t):
        assert r.mode != _IDLE, t
        return original_event(r, t)

    monkeypatch.setattr(replica, "event", event)
    m = replica_model(MODEL, "L4", 1, 256, 1000.0, 200.0, prefix_hit_rate=0.6)
    arrival, out, inp = crowded()
    sim, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5)
    assert (sim.request_table()["state"] == "served").all()


def test_no_iteration_exceeds_its_budget_and_kv_blocks_never_exceed_the_cache(monkeypatch):
    checked = Checked(monkeypatch)
    m = model("L4")
    arrival, out, inp = crowded()
    sim, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5)
    assert checked.iterations > 1000
    assert sim.summary()["requests_preempted"] > 0  # the cache was the limit


def test_a_preempted_request_is_served_in_full_and_its_recomputation_is_counted(monkeypatch):
    checked = Checked(monkeypatch)
    m = model("L4")
    arrival, out, inp = crowded()
    sim, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5)
    t = sim.request_table()
    assert (t["state"] == "served").all()
    preempted = t["preemptions"] > 0
    assert preempted.sum() > 0
    assert (t["recomputed_tokens"][preempted] > 0).all()
    assert (t["recomputed_tokens"][~preempted] == 0).all()
    assert sim.summary()["tokens_generated"] == out.sum()
    # Work: a prompt's tokens once, a decode per token after the first, plus every token
    # whose KV a preemption discarded.
    assert checked.tokens == int(inp.sum() + out.sum() - len(out) + t["recomputed_tokens"].sum())


def test_swap_preemption_moves_a_decodes_kv_cache_out_and_back(monkeypatch):
    checked = Checked(monkeypatch)
    m = model("L4")
    arrival, out, inp = crowded()
    swap, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5, preemption="swap")
    t = swap.request_table()
    assert (t["state"] == "served").all()
    assert (t["preemptions"] > 0).sum() > 0
    # Only a prompt preempted before its prefill ends is recomputed (its partial KV freed).
    lost = int(t["recomputed_tokens"].sum())
    assert checked.tokens == int(inp.sum() + out.sum() - len(out)) + lost
    recompute, _ = run(TableSource(arrival, out, inp), m, horizon_s=1e5)
    assert lost < 0.2 * recompute.request_table()["recomputed_tokens"].sum()
    # The transfers over PCIe take time of their own: the runs differ.
    assert not np.array_equal(t["end_s"], recompute.request_table()["end_s"])


def test_a_request_too_long_for_the_replica_is_refused_and_counted():
    m = model()
    sim, _ = run(
        TableSource([0.0, 1.0, 2.0], [200, 2000, 10], [900, 100, 10]), m, max_model_len=1500
    )
    t = sim.request_table()
    assert t["state"].tolist() == ["served", "dropped", "served"]
    assert t["refused"].tolist() == [False, True, False]
    s = sim.summary()
    assert (s["requests_refused"], s["requests_dropped"]) == (1.0, 1.0)
    # Chunked prefill off: a prompt over the token budget is refused too.
    sim, _ = run(
        TableSource([0.0], [5], [3000]), m, chunked_prefill=False, max_num_batched_tokens=2048
    )
    assert sim.summary()["requests_refused"] == 1.0


def test_without_chunked_prefill_a_prompt_waits_for_a_budget_that_holds_it_whole():
    m = model()
    cost = iteration_cost(m, 2048)
    sim, _ = run(
        TableSource([0.0, 0.0], [3, 3], [1500, 1000]),
        m,
        chunked_prefill=False,
        max_num_batched_tokens=2048,
    )
    t = sim.request_table()
    t1 = cost.step(0, 0, 1500)[0]
    # B arrived during A's prefill; beside A's decode 2,047 tokens are left: B whole.
    assert t["first_token_s"][0] == pytest.approx(t1, rel=1e-12)
    assert t["first_token_s"][1] == pytest.approx(t1 + cost.step(1, 1500, 1000)[0], rel=1e-12)


# --- states, drains, power ----------------------------------------------------------------


def overloaded(horizon_s: float):
    """One replica of 16 sequences under 30 requests/s, a 5 s timeout: drops and queues."""
    m = model(max_batch=16)
    arrival, out, inp = poisson_chat(30.0, 3000, seed=3)
    sim, log = make(TableSource(arrival, out, inp), m, timeout_s=5.0, horizon_s=horizon_s)
    sim.configure(0.0, 0, 1, m)
    return sim, log


def test_every_request_ends_in_exactly_one_state_and_the_summary_counts_them():
    sim, log = overloaded(60.0)
    sim.close(60.0)
    t = sim.request_table()
    s = sim.summary()
    counts = t["state"].value_counts()
    assert counts.sum() == len(t) == s["requests_total"]
    assert counts["served"] == s["requests_served"]
    assert counts["dropped"] == s["requests_dropped"] > 0  # overloaded: timeouts
    assert counts["unfinished"] == s["requests_unfinished"] > 0
    served = t["state"] == "served"
    assert t["end_s"][served].notna().all() and t["end_s"][~served].isna().all()
    times = [c[1] for c in log.calls]
    assert times == sorted(times)
    assert all(w >= 0 for _, _, w in log.calls)


def test_a_scale_down_drains_by_the_time_it_returned():
    m = model()
    arrival, out, inp = poisson_chat(20.0, 400, seed=5)
    sim, log = make(TableSource(arrival, out, inp), m)
    sim.configure(0.0, 0, 3, m)
    sim.advance_to(10.0)
    free_s = sim.configure(10.0, 0, 1, m)
    sim.close(1e4)
    t = sim.request_table()
    assert (t["state"] == "served").all()
    admitted_before = t["arrival_s"] < 10.0
    assert free_s > 10.0
    # The last request of the replicas that left ends exactly when announced.
    assert np.isclose(t["end_s"][admitted_before], free_s, rtol=0, atol=0).any()
    assert log.calls[-1][2] == 0.0


def test_idle_replicas_are_reported_with_every_change_of_them():
    """As at the request level: two replicas, one request: one replica is idle all along,
    the other while its request is not in flight; a replica taken out of admission leaves
    the count."""
    m = model()
    sim, log = make(TableSource([10.0], [10]), m)
    sim.configure(0.0, 0, 2, m)
    sim.advance_to(50.0)
    sim.configure(50.0, 0, 1, m)
    sim.close(100.0)
    calls = [(t, w, idle) for (_, t, w), idle in zip(log.calls, log.idle, strict=True)]
    assert calls[0] == (0.0, 0.0, 2)
    serving, done = calls[1:-2], calls[-2]
    assert serving[0][0] == 10.0 and all(w > 0.0 and idle == 1 for _, w, idle in serving)
    assert 10.0 < done[0] < 50.0 and done[1:] == (0.0, 2)
    # taking one of two idle replicas out changes no power, and is reported all the same
    assert calls[-1] == (50.0, 0.0, 1)


def test_draining_replicas_are_never_idle_ones():
    """A scale-down from 3 replicas to 1 under load: the replicas that drain are not counted
    idle, so the idle replicas never exceed the one admitting; it ends idle."""
    m = model()
    arrival, out, inp = poisson_chat(20.0, 400, seed=5)
    sim, log = make(TableSource(arrival, out, inp), m)
    sim.configure(0.0, 0, 3, m)
    sim.advance_to(10.0)
    sim.configure(10.0, 0, 1, m)
    sim.close(1e4)
    after = [idle for (_, t, _), idle in zip(log.calls, log.idle, strict=True) if t >= 10.0]
    assert max(after) == 1 and after[-1] == 1


def test_the_same_input_gives_identical_tables():
    m = model("L4")
    a = run(TableSource(*crowded()), m, horizon_s=1e5)[0].request_table()
    b = run(TableSource(*crowded()), m, horizon_s=1e5)[0].request_table()
    assert a.equals(b)


def test_live_statistics_read_the_same_latencies_as_the_tables():
    # live() reads only the columns it needs (`live_columns`); the tables read them all.
    sim, _ = overloaded(120.0)
    sim.advance_to(90.0)
    live = sim.live()
    lo, hi = sim._requests.between(0.0, 60.0)
    full = sim._stats.last_step(sim._columns(lo, hi), live.queued, live.in_flight)
    assert live.dropped > 0 and math.isfinite(live.tpot_p99_ms)
    assert live == full


# --- from a scenario ----------------------------------------------------------------------


def test_a_scenario_with_fidelity_iteration_runs_end_to_end(tmp_path):
    import sim
    from tests.engine.test_services import CHAT, serving_scenario

    svc = {**CHAT, "scheduler": {"max_num_batched_tokens": 512, "block_size": 32}}
    res = sim.simulate(serving_scenario(tmp_path, "iteration", services=[svc]))
    s = res.summary
    assert s["requests_total"] > 0
    assert s["requests_served"] + s["requests_dropped"] <= s["requests_total"]
    assert (s["requests_preempted"], s["requests_refused"]) == (0.0, 0.0)
    assert s["energy_serving_kwh"] > 0
    req = res.requests
    assert {"first_token_s", "preemptions", "recomputed_tokens", "refused"} <= set(req.columns)
    fluid = sim.simulate(serving_scenario(tmp_path, "fluid", services=[svc])).summary
    assert (fluid["requests_preempted"], fluid["requests_refused"]) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        (
            {"max_num_batched_tokens": 32},
            "max_num_batched_tokens (32) must be >= max_num_seqs (64)",
        ),
        ({"block_size": 12}, "block_size"),
        ({"preemption": "evict"}, "preemption"),
        ({"max_model_len": 0}, "max_model_len"),
    ],
)
def test_a_bad_scheduler_value_is_a_one_line_error_naming_it(tmp_path, scheduler, message):
    from sim.errors import ScenarioError
    from tests.engine.test_services import CHAT, serving_scenario

    with pytest.raises(ScenarioError) as err:
        serving_scenario(tmp_path, "iteration", services=[{**CHAT, "scheduler": scheduler}])
    text = str(err.value)
    assert message in text and "services[0]" in text and "scheduler" in text
    assert "\n" not in text


# --- against the request level ------------------------------------------------------------


def test_an_isolated_request_has_the_request_levels_time_to_first_token():
    """Alone on its replica a prompt is prefilled at once: the roofline's prefill alone,
    which is what the request level charges it."""
    from sim.serving.request_level import RequestLevel

    m = model()
    arrival = [0.0, 100.0, 200.0]
    source = TableSource(arrival, [50, 10, 1], [100, 3000, 20_000])
    it, _ = run(source, m)
    rl = RequestLevel(
        ServiceContext("chat", source, np.zeros(1), SLO, NEVER_S, 60.0, 1e6, PowerLog())
    )
    rl.configure(0.0, 0, 1, m)
    rl.close(1e6)
    iteration_ttft = it.request_table()["ttft_ms"].to_numpy()
    # To the request level's interpolation of its prefill table (160 lengths); 20,000
    # tokens take three chunks of at most 8,192: only the first two match.
    assert iteration_ttft[:2] == pytest.approx(rl.request_table()["ttft_ms"][:2], rel=1e-3)
    assert iteration_ttft[2] > rl.request_table()["ttft_ms"][2]


def test_a_cap_change_applies_from_the_next_iteration_boundary():
    m = model()
    capped = replica_model(MODEL, "H100-SXM", 1, 256, 1000.0, 200.0, 400.0)
    cost, cost_capped = iteration_cost(m, 8192), iteration_cost(capped, 8192)
    sim, _ = make(TableSource([0.0], [3], [100]), m)
    sim.configure(0.0, 0, 1, m)
    t1 = cost.step(0, 0, 100)[0]
    sim.configure(0.5 * t1, 0, 1, capped)  # during the prefill
    sim.close(1e3)
    t = sim.request_table()
    # The prefill keeps its clock; the two decodes run capped, slower.
    d = cost_capped.decode(1, 100)
    assert t["first_token_s"][0] == pytest.approx(t1, rel=1e-12)
    assert t["end_s"][0] == pytest.approx(t1 + 2 * d[0] + d[1], rel=1e-12)
    assert cost_capped.step(1, 100, 0)[0] > cost.step(1, 100, 0)[0]


# --- compiled ------------------------------------------------------------------------------


def test_a_drains_ghost_copies_every_field_of_the_replica_and_shares_no_container():
    sim, _ = run(TableSource(*crowded()), model("L4"), horizon_s=2.0)
    r = sim._fleet.sites[0].adm[0]
    assert r.b and r.waiting and r.pf  # decodes, a queue and a prompt in prefill
    site, rq = fleet._SiteState(-1, lambda *a: None), r.rq
    g = r.ghost(site, rq)
    for name in pure_module("sim.serving.iteration_level.replicas")._Replica.__slots__:
        mine, its = getattr(r, name), getattr(g, name)
        if name == "site":
            assert its is site
        elif name in ("heap", "base", "order", "waiting", "pf", "chunks"):
            assert its == mine and its is not mine, name
        else:
            assert its == mine, name
    assert all(e is not f for e, f in zip(g.pf, r.pf, strict=True))
    assert [e for e, _ in g.chunks] == [e for e, _ in r.chunks]
    assert all(any(e is f for f in g.pf) for e, _ in g.chunks)


def test_the_compiled_replica_gives_the_pure_python_ones_results_bit_for_bit(monkeypatch):
    # Compiled (setup.py, mypyc) or not, the tables are the same to the last bit; with
    # DCSIM_PURE=1 both runs are pure Python.
    m = model("L4")
    compiled = run(TableSource(*crowded()), m, horizon_s=1e5)[0].request_table()
    replica = pure_module("sim.serving.iteration_level.replicas")._Replica
    monkeypatch.setattr(fleet, "_Replica", replica)
    pure = run(TableSource(*crowded()), m, horizon_s=1e5)[0].request_table()
    assert compiled.equals(pure)
