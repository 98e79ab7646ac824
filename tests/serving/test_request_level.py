"""The request level (`sim.serving.request_level`): a replica under continuous batching is a
processor-sharing server, one slot makes it an M/G/1 queue (Pollaczek-Khinchine), every
request ends in exactly one state, timeouts and missing replicas drop requests, a
scale-down drains at the time it announced, shares route by smooth weighted round-robin,
the power callback is the extra-power step function, and the same input gives the same
tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.request_level import RequestLevel
from sim.serving.requests import RequestTable
from sim.serving.service_sim import STEP_COLUMNS, ServiceContext
from sim.serving.sources import RequestSource

MODEL = "Llama-3.1-8B-Instruct"
GPU = "H100-SXM"
SLO = SloConfig(ttft_ms=500.0, tpot_ms=50.0)
NEVER_S = 1e12
"""A timeout no request reaches."""


def model(max_batch: int) -> ReplicaModel:
    return replica_model(MODEL, GPU, 1, max_batch, 100.0, 100.0)


class TableSource(RequestSource):
    """Exactly these requests (times as given, no shift)."""

    def __init__(self, arrival_s, output_tokens, input_tokens=None):
        n = len(arrival_s)
        inp = np.full(n, 100) if input_tokens is None else input_tokens
        self.table = RequestTable(
            np.asarray(arrival_s, float), np.asarray(inp), np.asarray(output_tokens)
        )

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        t = self.table
        lo, hi = np.searchsorted(t.arrival_s, [t0_s, t1_s], side="left")
        return RequestTable(t.arrival_s[lo:hi], t.input_tokens[lo:hi], t.output_tokens[lo:hi])


class PowerLog:
    """The `on_power` callback: every call, per site."""

    def __init__(self):
        self.calls: list[tuple[int, float, float]] = []
        self.idle: list[int | None] = []
        """The idle replicas each call reported."""

    def __call__(self, site: int, t_s: float, extra_w: float, idle: int | None = None) -> None:
        self.calls.append((site, t_s, extra_w))
        self.idle.append(idle)

    def energy_j(self, site: int, until_s: float) -> float:
        """Integral of the site's extra power (a step function from 0 W at 0) up to until_s."""
        steps = [(t, w) for s, t, w in self.calls if s == site]
        times = [t for t, _ in steps] + [until_s]
        return sum(w * (times[k + 1] - t) for k, (t, w) in enumerate(steps))


def make(source, *, sites=1, rtt_s=None, timeout_s=NEVER_S, step_s=60.0, horizon_s=1e6):
    log = PowerLog()
    rtt = np.zeros(sites) if rtt_s is None else np.asarray(rtt_s, float)
    sim = RequestLevel(ServiceContext("chat", source, rtt, SLO, timeout_s, step_s, horizon_s, log))
    return sim, log


def wait_s(table: pd.DataFrame, m: ReplicaModel, rtt_s=0.0) -> np.ndarray:
    """Admission - arrival of each request, from its time to first token."""
    return table["ttft_ms"].to_numpy() / 1e3 - m.prefill_s(table["input_tokens"]) - rtt_s


# --- M/G/1: Pollaczek-Khinchine ---------------------------------------------------------------

PK_SEEDS = 20
PK_REQUESTS = 20_000
PK_MAX_OUT = 200
"""Output tokens uniform on 1..PK_MAX_OUT."""


def test_one_slot_is_an_mg1_queue_with_the_pollaczek_khinchine_mean_wait():
    m = model(1)
    assert m.slots == 1
    it = float(m.iter_s[1])
    mean_out = (PK_MAX_OUT + 1) / 2
    mean_out2 = (PK_MAX_OUT + 1) * (2 * PK_MAX_OUT + 1) / 6
    rho = 0.6
    lam = rho / (mean_out * it)
    pk_wait_s = lam * mean_out2 * it**2 / (2 * (1 - rho))

    means = []
    for seed in range(PK_SEEDS):
        rng = np.random.default_rng(seed)
        arrival_s = np.cumsum(rng.exponential(1 / lam, PK_REQUESTS))
        out = rng.integers(1, PK_MAX_OUT + 1, PK_REQUESTS)
        horizon_s = arrival_s[-1] + 1e4
        sim, _ = make(TableSource(arrival_s, out), horizon_s=horizon_s)
        sim.configure(0.0, 0, 1, m)
        sim.close(horizon_s)
        table = sim.request_table()
        assert (table["state"] == "served").all()
        means.append(wait_s(table, m).mean())
    means_a = np.array(means)
    half = stats.t.ppf(0.995, PK_SEEDS - 1) * means_a.std(ddof=1) / math.sqrt(PK_SEEDS)
    assert abs(means_a.mean() - pk_wait_s) <= half, (means_a.mean(), pk_wait_s, half)


# --- processor sharing --------------------------------------------------------------------------


def test_two_requests_share_the_replica_token_by_token():
    m = model(8)
    sim, _ = make(TableSource([0.0, 0.0], [10, 20]))
    sim.configure(0.0, 0, 1, m)
    sim.close(100.0)
    end = sim.request_table()["end_s"].to_numpy()
    first = 10 * m.iter_s[2]
    assert end[0] == pytest.approx(first, rel=1e-12)
    assert end[1] == pytest.approx(first + 10 * m.iter_s[1], rel=1e-12)
    tpot = sim.request_table()["tpot_ms"].to_numpy()
    assert tpot[0] == pytest.approx(m.iter_s[2] * 1e3, rel=1e-12)


def test_a_request_joining_a_running_batch_slows_it_from_its_arrival():
    m = model(8)
    it1, it2 = m.iter_s[1], m.iter_s[2]
    sim, _ = make(TableSource([0.0, 5 * it1], [20, 10]))
    sim.configure(0.0, 0, 1, m)
    sim.close(100.0)
    end = sim.request_table()["end_s"].to_numpy()
    # The first gets 5 tokens alone, 10 alongside the second, its last 5 alone again.
    assert end[1] == pytest.approx(5 * it1 + 10 * it2, rel=1e-12)
    assert end[0] == pytest.approx(5 * it1 + 10 * it2 + 5 * it1, rel=1e-12)


def test_a_full_batch_queues_the_next_request_until_a_slot_frees():
    m = model(2)
    sim, _ = make(TableSource([0.0, 0.0, 0.0], [10, 20, 5]))
    sim.configure(0.0, 0, 1, m)
    sim.close(100.0)
    table = sim.request_table()
    first_end = 10 * m.iter_s[2]
    assert wait_s(table, m)[2] == pytest.approx(first_end, rel=1e-9)
    # The third joins the second: 5 more tokens each at batch 2, then the second alone.
    assert table["end_s"][2] == pytest.approx(first_end + 5 * m.iter_s[2], rel=1e-12)
    assert table["end_s"][1] == pytest.approx(first_end + 5 * m.iter_s[2] + 5 * m.iter_s[1])


# --- conservation and determinism -----------------------------------------------------------------


def busy_run(seed: int = 7):
    """Two sites, overload, timeouts, shares, a scale-up, a scale-down, a cap change and a
    horizon with requests still in progress."""
    rng = np.random.default_rng(seed)
    n = 6_000
    arrival_s = np.sort(rng.uniform(0.0, 600.0, n))
    out = rng.integers(1, 400, n)
    inp = rng.integers(0, 2_000, n)
    sim, log = make(
        TableSource(arrival_s, out, inp),
        sites=2,
        rtt_s=[0.0, 0.03],
        timeout_s=5.0,
        step_s=30.0,
        horizon_s=600.0,
    )
    small, capped = model(8), replica_model(MODEL, GPU, 1, 8, 100.0, 100.0, 350.0)
    sim.configure(0.0, 0, 2, small)
    sim.configure(0.0, 1, 1, small)
    sim.set_shares(100.0, np.array([0.3, 0.7]))
    sim.configure(150.0, 1, 4, small)
    sim.configure(200.0, 0, 1, capped)
    sim.configure(300.0, 1, 1, small)
    sim.set_shares(350.0, None)
    sim.configure(400.0, 0, 0, capped)
    lives = [sim.live()]
    sim.advance_to(500.0)
    lives.append(sim.live())
    sim.close(600.0)
    return sim, log, lives


def test_every_request_ends_in_exactly_one_state_and_the_tables_agree():
    sim, _, _ = busy_run()
    table = sim.request_table()
    summary = sim.summary()
    steps = sim.step_table()
    state = table["state"]
    assert list(state.cat.categories) == ["served", "dropped", "unfinished"]
    assert not state.isna().any()
    counts = state.value_counts()
    assert counts.sum() == len(table) == summary["requests_total"] == 6_000
    assert counts["served"] == summary["requests_served"] > 0
    assert counts["dropped"] == summary["requests_dropped"] > 0
    assert counts["unfinished"] == summary["requests_unfinished"] > 0
    served = table[state == "served"]
    assert summary["tokens_generated"] == served["output_tokens"].sum()
    # Served: finished after arriving, at least one iteration per token; others: no end.
    assert (served["end_s"] > served["arrival_s"]).all()
    assert (served["tpot_ms"] >= model(8).iter_s[1] * 1e3 * (1 - 1e-9)).all()
    assert table.loc[state != "served", ["end_s", "tpot_ms"]].isna().all().all()
    assert (table.loc[state == "dropped", "ttft_ms"].isna()).all()
    # The step table: one row per step, its sums the totals, its percentiles numpy's.
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert steps["step"].tolist() == list(range(sim.n_steps))
    assert steps["arrived"].sum() == len(table)
    assert steps["served"].sum() == counts["served"]
    assert steps["dropped"].sum() == counts["dropped"]
    assert steps["tokens"].sum() == summary["tokens_generated"]
    assert steps["slo_met"].sum() == summary["slo_met"]
    step_of = (served["arrival_s"] // sim.step_s).astype(int)
    for k in (0, 7, 19):
        sel = served[step_of == k]
        row = steps.iloc[k]
        assert row["ttft_p99_ms"] == pytest.approx(np.percentile(sel["ttft_ms"], 99), rel=1e-12)
        assert row["tpot_p50_ms"] == pytest.approx(np.percentile(sel["tpot_ms"], 50), rel=1e-12)
    assert summary["ttft_p99_ms"] == pytest.approx(np.percentile(served["ttft_ms"], 99))


def test_the_same_input_gives_identical_tables():
    a, log_a, live_a = busy_run()
    b, log_b, live_b = busy_run()
    pd.testing.assert_frame_equal(a.request_table(), b.request_table())
    pd.testing.assert_frame_equal(a.step_table(), b.step_table())
    assert log_a.calls == log_b.calls
    assert live_a == live_b


def test_power_is_reported_in_time_order_and_never_below_zero():
    _, log, _ = busy_run()
    for site in (0, 1):
        calls = [(t, w) for s, t, w in log.calls if s == site]
        assert calls
        assert all(t1 <= t2 for (t1, _), (t2, _) in zip(calls, calls[1:], strict=False))
        assert min(w for _, w in calls) >= 0.0
    # Site 0 has no replica after 400 s, and drains within the last request's service.
    last_t, last_w = [(t, w) for s, t, w in log.calls if s == 0][-1]
    assert last_w == 0.0 and last_t < 500.0


# --- drops ----------------------------------------------------------------------------------------


def test_a_request_not_admitted_within_the_timeout_is_dropped():
    m = model(1)
    it = m.iter_s[1]
    # A holds the slot for 500 iterations (~4.1 s); when it frees B has waited 1.2 s, too
    # long, C 0.9 s. D holds the slot past the horizon (10 s), where E and F wait within
    # the timeout.
    arrival = [0.0, 2.9, 3.2, 5.0, 9.5, 9.6]
    out = [500, 10, 10, 1_000_000, 10, 10]
    sim, _ = make(TableSource(arrival, out), timeout_s=1.0, horizon_s=10.0)
    sim.configure(0.0, 0, 1, m)
    sim.close(10.0)
    table = sim.request_table()
    assert table["state"].tolist() == [
        "served",
        "dropped",
        "served",
        "unfinished",  # admitted at once (the slot was free), in service at the horizon
        "unfinished",  # waited 0.5 s
        "unfinished",  # waited 0.4 s
    ]
    a_end = 500 * it
    assert table["end_s"][0] == pytest.approx(a_end)
    assert wait_s(table, m)[2] == pytest.approx(a_end - 3.2)
    assert math.isnan(table["ttft_ms"][1]) and table["site"][1] == 0

    # At the horizon a queued request that waited more than the timeout is dropped.
    sim, _ = make(TableSource([0.0, 1.0, 9.5], [10**6, 5, 5]), timeout_s=5.0, horizon_s=10.0)
    sim.configure(0.0, 0, 1, m)
    sim.close(10.0)
    assert sim.request_table()["state"].tolist() == ["unfinished", "dropped", "unfinished"]


def test_without_a_ready_replica_a_request_is_dropped_at_its_arrival():
    m = model(8)
    sim, _ = make(TableSource([1.0, 2.0, 3.0, 4.0], [5, 5, 5, 5]), sites=2, horizon_s=10.0)
    sim.advance_to(1.5)  # nothing configured yet
    sim.configure(1.5, 1, 1, m)
    sim.set_shares(1.5, np.array([1.0, 0.0]))  # the share of a site without replicas moves
    sim.configure(2.5, 1, 0, m)
    sim.close(10.0)
    table = sim.request_table()
    assert table["state"].tolist() == ["dropped", "served", "dropped", "dropped"]
    assert table["site"].tolist() == [-1, 1, -1, -1]
    assert sim.summary()["requests_dropped"] == 3


# --- scale-down ---------------------------------------------------------------------------------


def test_a_scale_down_drains_its_batch_by_the_time_it_returns():
    m = model(2)
    # Two replicas, two slots each: a, c -> R0; b, d -> R1; e queues on R0, f on R1.
    arrival = [0.0, 1e-6, 2e-6, 3e-6, 4e-6, 5e-6]
    out = [10, 20, 30, 40, 50, 60]
    sim, log = make(TableSource(arrival, out))
    sim.configure(0.0, 0, 2, m)
    free_s = sim.configure(0.01, 0, 1, m)  # equal loads: the newest (R1) leaves
    sim.close(100.0)
    table = sim.request_table()
    assert (table["state"] == "served").all()
    end = table["end_s"].to_numpy()
    # R1 drains b and d with no more admissions: exactly the time announced.
    assert free_s == max(end[1], end[3])
    assert free_s == pytest.approx(20 * m.iter_s[2] + 20 * m.iter_s[1], abs=1e-5)
    # f went back to R0, behind e: e is admitted when a ends, f when c ends.
    assert wait_s(table, m)[4] == pytest.approx(end[0], abs=1e-5)
    assert wait_s(table, m)[5] == pytest.approx(end[2], abs=1e-5)
    assert log.calls[-1][2] == 0.0


def test_a_scale_down_to_no_replica_drops_the_queue_and_drains_the_batch():
    m = model(1)
    sim, _ = make(TableSource([0.0, 0.1, 0.2], [100, 5, 5]))
    sim.configure(0.0, 0, 1, m)
    free_s = sim.configure(0.3, 0, 0, m)
    sim.close(100.0)
    table = sim.request_table()
    assert table["state"].tolist() == ["served", "dropped", "dropped"]
    assert free_s == table["end_s"][0]


# --- routing --------------------------------------------------------------------------------------


def test_shares_route_by_smooth_weighted_round_robin():
    m = model(256)
    n = 500
    sim, _ = make(TableSource(np.arange(n) * 0.01, np.full(n, 5)), sites=2, rtt_s=[0.0, 0.05])
    sim.configure(0.0, 0, 1, m)
    sim.configure(0.0, 1, 1, m)
    sim.set_shares(0.0, np.array([1.0, 3.0]))
    sim.advance_to(2.0)
    sim.configure(2.0, 1, 2, m)
    sim.set_shares(2.0, None)  # proportional to the ready replicas: 1 to 2
    sim.close(100.0)
    table = sim.request_table()
    first, then = table[table["arrival_s"] < 2.0], table[table["arrival_s"] >= 2.0]
    assert first["site"].tolist()[:4] == [1, 0, 1, 1]  # credits 1:3, ties to the lowest
    assert (first["site"] == 1).sum() == 3 * (first["site"] == 0).sum() == 150
    assert (then["site"] == 1).sum() == 2 * (then["site"] == 0).sum() == 200
    # Away from the origin a request pays the round trip in its time to first token.
    away = table[table["site"] == 1]
    assert wait_s(away, m, rtt_s=0.05) == pytest.approx(0.0, abs=1e-12)


def test_within_a_site_a_request_joins_the_replica_with_the_fewest_requests():
    m = model(4)
    sim, _ = make(TableSource([0.0, 0.0, 0.0, 0.0, 0.0], [30, 10, 20, 10, 10]))
    sim.configure(0.0, 0, 3, m)
    sim.close(100.0)
    end = sim.request_table()["end_s"].to_numpy()
    # Replicas 0, 1, 2 get one each, then 0 and 1 a second: the batch of 2 sets their pace.
    assert end[2] == pytest.approx(20 * m.iter_s[1])
    assert end[3] == pytest.approx(10 * m.iter_s[2])
    assert end[4] == pytest.approx(10 * m.iter_s[2])


# --- power and live statistics ------------------------------------------------------------------


def test_power_callback_is_the_extra_power_step_function():
    m = model(8)
    sim, log = make(TableSource([0.0, 0.0], [10, 20]))
    sim.configure(0.0, 0, 1, m)
    sim.close(100.0)
    dw = m.power_w - m.power_w[0]
    expected_j = dw[2] * 10 * m.iter_s[2] + dw[1] * 10 * m.iter_s[1]
    assert log.energy_j(0, 100.0) == pytest.approx(expected_j, rel=1e-12)
    # the replica configured empty, then one request, two, one, none
    assert [w for _, _, w in log.calls] == pytest.approx([0.0, dw[1], dw[2], dw[1], 0.0])
    assert log.calls[-1][2] == 0.0  # idle: exactly none, whatever the rounding
    assert log.idle == [1, 0, 0, 0, 1]


def test_idle_replicas_are_reported_with_every_change_of_them():
    """Two replicas, one request: one replica is idle all along, the other while its
    request is not in flight; a replica taken out of service leaves the count."""
    m = model(8)
    sim, log = make(TableSource([10.0], [10]))
    sim.configure(0.0, 0, 2, m)
    sim.advance_to(50.0)
    sim.configure(50.0, 0, 1, m)
    sim.close(100.0)
    done_s = 10.0 + 10 * m.iter_s[1]
    assert [t for _, t, _ in log.calls] == pytest.approx([0.0, 10.0, done_s, 50.0])
    # taking one of two idle replicas out changes no power, and is reported all the same
    assert log.idle == [2, 1, 2, 1]


def test_an_idle_site_draws_exactly_no_extra_power():
    # Busy periods of a few overlapping requests, then idle: the running sum of power steps
    # must not leave rounding residue (some 1e-13 W, either sign) when the batch empties.
    # Two replicas: their power steps interleave in the sum.
    rng = np.random.default_rng(3)
    arrival_s = np.cumsum(rng.exponential(0.2, 5_000))
    sim, log = make(TableSource(arrival_s, rng.integers(1, 300, 5_000)))
    sim.configure(0.0, 0, 2, model(8))
    sim.close(arrival_s[-1] + 100.0)
    w = np.array([w for _, _, w in log.calls])
    assert np.count_nonzero(w == 0.0) >= 10
    assert np.all((w == 0.0) | (w > 1.0))


def test_a_cap_change_slows_the_batch_from_its_time():
    fast = model(8)
    slow = replica_model(MODEL, GPU, 1, 8, 100.0, 100.0, 300.0)
    assert slow.iter_s[1] > fast.iter_s[1]
    sim, log = make(TableSource([0.0], [100]))
    sim.configure(0.0, 0, 1, fast)
    t_s = 40 * fast.iter_s[1]
    sim.configure(t_s, 0, 1, slow)
    sim.close(100.0)
    assert sim.request_table()["end_s"][0] == pytest.approx(t_s + 60 * slow.iter_s[1])
    # calls: the replica configured (idle), the arrival, the cap change, the completion
    assert log.calls[2] == (0, t_s, pytest.approx(slow.power_w[1] - slow.power_w[0]))


def test_live_reports_the_last_completed_step():
    m = model(1)
    # Step 10 s. Step 1 ([10, 20)): three arrivals, the second and third wait behind the
    # first (1000 tokens, ~8 s); at 25 s the third is still queued behind the second.
    arrival = [11.0, 12.0, 13.0, 21.0]
    out = [1000, 1500, 10, 10]
    sim, _ = make(TableSource(arrival, out), timeout_s=NEVER_S, step_s=10.0, horizon_s=100.0)
    sim.configure(0.0, 0, 1, m)
    sim.advance_to(25.0)
    live = sim.live()
    assert live.rate_per_s == pytest.approx(0.3)
    assert live.in_flight == 1 and live.queued == 2
    assert live.ttft_p99_ms == pytest.approx(
        np.percentile(sim.request_table()["ttft_ms"].to_numpy()[:2], 99)
    )
    assert live.slo_attainment == 1.0  # the first: served, within both targets
    assert live.dropped == 0.0
    assert live.tpot_p99_ms == pytest.approx(m.iter_s[1] * 1e3)
