"""The fluid level (`sim.serving.fluid`): every request is served, dropped or unfinished; a
light load waits for nothing; an overload builds a backlog that drops what exceeds the
timeout; the power of a piece lies between idle and the power at the mean batch (power is
concave); the settled batch obeys Little's law; pieces split by a configure add up to the
step; one slot with exponential (or deterministic) output is M/M/1 (M/D/1, Pollaczek-
Khinchine); shares route the load; the same input gives the same tables; a bursty
source is served by the request level's engine."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.fluid import LOAD_GRID, Fluid, pool_table
from sim.serving.fluid import fluid as fluid_level
from sim.serving.request_level import RequestLevel
from sim.serving.requests import RequestTable
from sim.serving.service_sim import STEP_COLUMNS, ServiceContext, ServiceSim
from sim.serving.sources import FileSource, RequestSource, TokenStats

MODEL = "Llama-3.1-8B-Instruct"
GPU = "H100-SXM"
SLO = SloConfig(ttft_ms=2000.0, tpot_ms=100.0)
STEP_S = 60.0


def model(max_batch: int = 256) -> ReplicaModel:
    return replica_model(MODEL, GPU, 1, max_batch, 1000.0, 200.0)


def capacity_per_s(m: ReplicaModel, out: float, replicas: int = 1) -> float:
    """Requests per second that keep every slot busy."""
    return replicas * m.slots / (out * m.iter_s[m.slots])


class SteadySource(RequestSource):
    """A constant rate, each interval's expected arrivals (a Poisson process seen by the
    fluid level), tokens from the given samples."""

    def __init__(self, rate_per_s: float, input_tokens: np.ndarray, output_tokens: np.ndarray):
        self.rate_per_s = rate_per_s
        inp, out = np.asarray(input_tokens), np.asarray(output_tokens)
        self.tokens = TokenStats(float(inp.mean()), float(out.mean()), inp, out)

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.rate_per_s * np.diff(np.asarray(edges_s, dtype=float))
        return n, n * self.tokens.mean_input, n * self.tokens.mean_output


def steady(rate_per_s: float, out: np.ndarray | float = 200.0, inp: float = 1000.0):
    out_sample = np.full(1000, out) if np.isscalar(out) else np.asarray(out)
    return SteadySource(rate_per_s, np.full(len(out_sample), inp), out_sample)


class PowerLog:
    """The `on_power` callback: every call, per site."""

    def __init__(self):
        self.calls: list[tuple[int, float, float]] = []

    def __call__(self, site: int, t_s, extra_w, idle=None) -> None:
        """One change (floats) or many (arrays); the idle replicas (the request level's) are
        not used."""
        times, watts = np.atleast_1d(t_s).tolist(), np.atleast_1d(extra_w).tolist()
        self.calls.extend((site, t, w) for t, w in zip(times, watts, strict=True))

    def steps(self, site: int) -> list[tuple[float, float]]:
        return [(t, w) for s, t, w in self.calls if s == site]

    def energy_j(self, site: int, until_s: float) -> float:
        steps = self.steps(site) + [(until_s, 0.0)]
        return sum(w * (t1 - t0) for (t0, w), (t1, _) in zip(steps, steps[1:], strict=False))


def fluid(source, horizon_s, sites=1, timeout_s=60.0, log=None, slo=SLO) -> ServiceSim:
    """The fluid fidelity of a service of `source` (`Fluid`, or the request level for a
    bursty source)."""
    return fluid_level(
        ServiceContext(
            "svc", source, np.zeros(sites), slo, timeout_s, STEP_S, horizon_s, log or PowerLog()
        )
    )


def test_light_load_waits_for_nothing():
    m = model()
    out = np.random.default_rng(1).geometric(1 / 200, 5000)
    inp = np.random.default_rng(2).integers(10, 4000, 5000)
    src = SteadySource(0.2 * capacity_per_s(m, out.mean()), inp, out)
    sim = Fluid(
        ServiceContext("svc", src, np.array([0.0, 0.05]), SLO, 60.0, STEP_S, 3600.0, PowerLog())
    )
    sim.configure(0.0, 1, 2, m)  # served away from the origin: 50 ms round trip
    sim.close(3600.0)
    tab = sim.step_table()
    total = sim.summary()
    q = np.sort(m.prefill_s(inp)) + 0.05
    assert total["requests_dropped"] < 1e-9
    # those in flight at the horizon are unfinished: the settled batch
    in_flight = pool_table(m, 2).batch(np.asarray(src.rate_per_s * out.mean()))
    assert total["requests_unfinished"] == pytest.approx(in_flight, rel=1e-9)
    assert total["requests_served"] + in_flight == pytest.approx(total["requests_total"])
    assert tab.ttft_p50_ms.to_numpy() == pytest.approx(1e3 * np.quantile(q, 0.5), rel=1e-9)
    assert tab.ttft_p99_ms.to_numpy() == pytest.approx(1e3 * np.quantile(q, 0.99), rel=1e-9)
    assert total["ttft_p99_ms"] == pytest.approx(1e3 * np.quantile(q, 0.99), rel=0.02)
    assert sim.live().queued == 0.0


def test_overload_builds_a_backlog_and_drops_past_the_timeout():
    m = model()
    out = 200.0
    cap = capacity_per_s(m, out)
    timeout_s = 120.0
    sim = fluid(steady(1.5 * cap, out), 3600.0, timeout_s=timeout_s)
    sim.configure(0.0, 0, 1, m)
    queued = []
    for k in range(1, 11):
        sim.advance_to(k * STEP_S)
        queued.append(sim.live().queued)
    # the backlog grows by the excess, 0.5 x capacity per second, until its oldest
    # request has waited the timeout: then it holds capacity x timeout requests
    assert np.all(np.diff(queued[:3]) > 0)
    assert queued[-1] == pytest.approx(cap * timeout_s, rel=1e-6)
    assert sim.live().dropped == pytest.approx(STEP_S * (1.5 - 1.0) * cap, rel=1e-6)
    sim.close(3600.0)
    tab = sim.step_table()
    assert tab.dropped.iloc[0] == 0.0
    late = tab.iloc[5:-3]  # past the limit: those admitted waited the timeout
    assert np.all(late.ttft_p50_ms > 1e3 * timeout_s)
    assert np.all(late.ttft_p50_ms < 1e3 * (timeout_s + 1.0))
    assert late.tpot_p50_ms.to_numpy() == pytest.approx(1e3 * m.iter_s[m.slots])
    assert sim.summary()["requests_unfinished"] > cap * timeout_s


def test_every_request_is_served_dropped_or_unfinished():
    m = model()
    out = 200.0
    cap = capacity_per_s(m, out, replicas=2)
    horizon_s = 7200.0
    src = steady(1.3 * cap, out)
    sim = fluid(src, horizon_s)
    sim.configure(0.0, 0, 2, m)
    sim.configure(1500.0, 0, 1, m)  # sheds the backlog beyond the timeout
    sim.configure(3030.0, 0, 3, m)  # mid-step: the backlog drains
    sim.configure(5000.0, 0, 1, m)
    sim.close(horizon_s)  # with a backlog: unfinished
    total = sim.summary()
    arrived = src.rate_per_s * horizon_s
    assert total["requests_total"] == pytest.approx(arrived, rel=1e-12)
    assert total["requests_unfinished"] > 0 and total["requests_dropped"] > 0
    assert total["requests_served"] + total["requests_dropped"] + total[
        "requests_unfinished"
    ] == pytest.approx(arrived, rel=1e-9)
    tab = sim.step_table()
    assert list(tab.columns) == list(STEP_COLUMNS)
    assert np.all(tab.served + tab.dropped <= tab.arrived * (1 + 1e-9))
    assert np.all(tab.slo_met <= tab.served + 1e-9)
    assert tab.tokens.sum() == pytest.approx(total["tokens_generated"])
    assert total["tokens_generated"] == pytest.approx(out * total["requests_served"])


def test_power_of_a_piece_lies_between_idle_and_the_power_at_the_mean_batch():
    m = model()
    assert np.all(np.diff(m.power_w[1:], 2) <= 1e-9)  # concave: Jensen's inequality applies
    out = 200.0
    for load in (0.02, 0.3, 0.6, 0.9):
        log = PowerLog()
        sim = fluid(steady(load * capacity_per_s(m, out), out), 1800.0, log=log)
        sim.configure(0.0, 0, 1, m)
        sim.close(1800.0)
        t, extra_w = log.steps(0)[-1]
        assert t <= 2 * STEP_S  # constant load: settled once the batch has filled
        mean_batch = pool_table(m, 1).batch(np.asarray(load * m.slots / m.iter_s[m.slots]))
        at_mean = np.interp(mean_batch, np.arange(m.slots + 1), m.power_w)
        assert m.power_w[0] < extra_w + m.power_w[0] < at_mean
        if load >= 0.3:  # a batch of ~10 or more: Poisson-like, the power curve ~ linear
            assert extra_w + m.power_w[0] > 0.98 * at_mean


def test_settled_batch_obeys_littles_law():
    m = model()
    x = LOAD_GRID[(LOAD_GRID > 0.05) & (LOAD_GRID < 0.9)] * m.slots / m.iter_s[m.slots]
    # a constant time per token: sequences in flight = arrival rate x time in service
    flat = dataclasses.replace(m, iter_s=np.full(m.slots + 1, m.iter_s[1]))
    flat_x = x * flat.iter_s[1] / m.iter_s[m.slots] * m.iter_s[1]
    assert pool_table(flat, 1).batch(flat_x) == pytest.approx(flat_x * flat.iter_s[1], rel=1e-6)
    # the real one: close to the fixed point N = lambda E[out] iter_s(N) (the chain's mode)
    n = pool_table(m, 1).batch(x)
    fixed = np.interp(x, np.arange(m.slots + 1) / m.iter_s, np.arange(m.slots + 1))
    assert n == pytest.approx(fixed, rel=0.06)
    # two replicas at twice the rate: twice the batch (balanced)
    assert pool_table(m, 2).batch(2 * x) == pytest.approx(2 * n, rel=0.02)


def test_splitting_a_step_keeps_the_totals():
    m = model()
    out = np.random.default_rng(3).geometric(1 / 200, 2000)
    src = SteadySource(0.7 * capacity_per_s(m, out.mean()), np.full(2000, 800), out)
    runs = []
    for cuts in ((), (30.0, 95.5, 100.0, 610.0, 611.0)):
        log = PowerLog()
        sim = fluid(src, 1200.0, log=log)
        sim.configure(0.0, 0, 1, m)
        for t in cuts:
            sim.configure(t, 0, 1, m)
            sim.live()
        sim.close(1200.0)
        steps = log.steps(0)
        # the power in force from 2 steps on: the level set before then and every change after
        settled = [(t, w) for t, w in steps if t >= 2 * STEP_S] + [
            next((t, w) for t, w in reversed(steps) if t < 2 * STEP_S)
        ]
        runs.append((sim.summary(), sim.step_table(), log.energy_j(0, 1200.0), settled))
    (a, tab_a, e_a, settled_a), (b, tab_b, e_b, settled_b) = runs
    for key in ("requests_total", "requests_served", "requests_dropped", "tokens_generated"):
        assert b[key] == pytest.approx(a[key], rel=1e-12)
    assert tab_b.arrived.to_numpy() == pytest.approx(tab_a.arrived.to_numpy())
    assert tab_b.ttft_p99_ms.to_numpy() == pytest.approx(tab_a.ttft_p99_ms.to_numpy(), rel=1e-3)
    # the first minute fills the batch: its pieces integrate that in their own substeps
    assert e_b == pytest.approx(e_a, rel=1e-3)
    assert {round(w, 6) for _, w in settled_b} == {round(w, 6) for _, w in settled_a}


@pytest.mark.parametrize("exponential", [True, False])
def test_one_slot_is_an_mg1_queue(exponential):
    m = model(max_batch=1)
    assert m.slots == 1
    rng = np.random.default_rng(4)
    out = rng.geometric(1 / 100, 100_000) if exponential else np.full(1000, 100)
    mean_s = out.mean() * m.iter_s[1]
    cs2 = out.var() / out.mean() ** 2
    rho = 0.7
    src = SteadySource(rho / mean_s, np.full(len(out), 100), out)
    horizon_s = 12 * 3600.0
    sim = fluid(src, horizon_s, timeout_s=1e6, slo=SloConfig(ttft_ms=1e6, tpot_ms=1e6))
    sim.configure(0.0, 0, 1, m)
    sim.close(horizon_s)
    assert pool_table(m, 1).p_wait[np.searchsorted(LOAD_GRID, rho)] == pytest.approx(
        LOAD_GRID[np.searchsorted(LOAD_GRID, rho)]
    )
    # P(wait > t) = rho exp(-theta t): the last hour's percentiles give theta, and the mean
    # wait rho / theta is Pollaczek-Khinchine's rho E[S] (1 + cs^2) / (2 (1 - rho))
    late = sim.step_table().iloc[-60:]
    q_s = float(m.prefill_s(100))
    wait99_s = late.ttft_p99_ms.to_numpy() / 1e3 - q_s
    theta = math.log(rho / 0.01) / wait99_s
    pk_s = rho * mean_s * (1 + cs2) / (2 * (1 - rho))
    assert rho / theta == pytest.approx(pk_s, rel=0.05)
    wait50_s = late.ttft_p50_ms.to_numpy() / 1e3 - q_s
    assert wait50_s == pytest.approx(math.log(rho / 0.5) / theta, rel=0.05)


def test_shares_route_the_load_and_no_replica_drops_it():
    m = model()
    out = 200.0
    src = steady(0.5 * capacity_per_s(m, out), out)
    log = PowerLog()
    sim = fluid(src, 1200.0, sites=3, log=log)
    sim.configure(0.0, 0, 1, m)
    sim.configure(0.0, 1, 2, m)
    sim.advance_to(300.0)
    power = {s: log.steps(s)[-1][1] for s in (0, 1)}
    # no shares: in proportion to the ready replicas, the same load per replica (two
    # replicas balanced by the dispatcher draw a little more: power is concave)
    load = 0.5 / 3
    expected = {r: r * np.interp(load, LOAD_GRID, pool_table(m, r).extra_w) for r in (1, 2)}
    assert power[0] == pytest.approx(expected[1], rel=1e-6)
    assert power[1] == pytest.approx(expected[2], rel=1e-6)
    sim.set_shares(300.0, np.array([0.0, 0.0, 1.0]))  # site 2 has no replica
    sim.advance_to(600.0)
    assert log.steps(1)[-1][1] == pytest.approx(power[1], rel=1e-9)
    assert all(w == 0.0 for s, _, w in log.calls if s == 2)
    sim.set_shares(600.0, np.array([1.0, 0.0, 0.0]))
    sim.advance_to(900.0)
    assert log.steps(1)[-1] == (600.0, 0.0) and log.steps(0)[-1][1] > power[0]
    sim.configure(900.0, 0, 0, m)
    sim.configure(900.0, 1, 0, m)
    sim.close(1200.0)
    tab = sim.step_table()
    no_replica = tab.iloc[15:]
    assert np.all(no_replica.dropped == no_replica.arrived)
    assert np.all(np.isnan(no_replica.ttft_p99_ms))
    assert log.steps(0)[-1] == (900.0, 0.0)


def test_bursty_arrivals_spread_the_batch():
    """A file whose requests come in bursts: more idle time (less power at the same work)
    and larger batches seen by arrivals (slower tokens) than a Poisson file of the same
    rate."""
    rng = np.random.default_rng(5)
    horizon_s = 2 * 3600.0
    n = 20_000
    poisson = np.sort(rng.uniform(0, horizon_s, n))
    bursts = np.sort(np.repeat(rng.uniform(0, horizon_s, n // 40), 40) + rng.uniform(0, 0.2, n))
    out = rng.geometric(1 / 200, n)
    m = model()
    results = []
    for times in (poisson, bursts):
        table = RequestTable(times - times[0], np.full(n, 500), out)
        log = PowerLog()
        sim = fluid(FileSource(table, horizon_s, 1.0, False), horizon_s, log=log)
        sim.configure(0.0, 0, 1, m)
        sim.close(horizon_s)
        results.append((log.energy_j(0, horizon_s), sim.summary()))
    (e_p, s_p), (e_b, s_b) = results
    assert e_b < 0.97 * e_p
    assert s_b["tpot_p99_ms"] > 1.2 * s_p["tpot_p99_ms"]
    assert s_b["requests_total"] == s_p["requests_total"] == n


def test_same_input_same_output():
    rng = np.random.default_rng(6)
    n = 5000
    times = np.sort(np.repeat(rng.uniform(0, 3000, n // 10), 10) + rng.uniform(0, 1, n))
    table = RequestTable(times - times[0], rng.integers(10, 3000, n), rng.geometric(1 / 100, n))
    m = model()
    runs = []
    for _ in range(2):
        log = PowerLog()
        sim = fluid(FileSource(table, 3600.0, 0.8, True), 3600.0, sites=2, log=log)
        sim.configure(0.0, 0, 1, m)
        sim.configure(100.0, 1, 1, m)
        sim.set_shares(1000.5, np.array([0.3, 0.7]))
        sim.configure(2000.0, 1, 0, m)
        sim.close(3600.0)
        runs.append((sim.step_table(), sim.summary(), log.calls))
    (tab_a, sum_a, calls_a), (tab_b, sum_b, calls_b) = runs
    assert tab_a.equals(tab_b)
    assert sum_a == sum_b or all(
        (math.isnan(sum_a[k]) and math.isnan(sum_b[k])) or sum_a[k] == sum_b[k] for k in sum_a
    )
    assert calls_a == calls_b


def test_bursty_arrivals_conserve_requests_across_blocks():
    """A bursty file overloading one replica, served in many `advance_to` blocks: every
    request is served, dropped (waits past the timeout) or unfinished; the same file in
    one block gives the same counts."""
    rng = np.random.default_rng(8)
    n, horizon_s = 6000, 1800.0
    times = np.sort(np.repeat(rng.uniform(0, 1500.0, n // 300), 300) + rng.uniform(0, 2, n))
    table = RequestTable(times - times[0], np.full(n, 500), rng.geometric(1 / 300, n))
    m = model()
    summaries = []
    for calls in (1, 37):
        sim = fluid(FileSource(table, horizon_s, 1.0, False), horizon_s, timeout_s=20.0)
        sim.configure(0.0, 0, 1, m)
        for t in np.linspace(0.0, horizon_s, calls + 1)[1:-1]:
            sim.advance_to(float(t))
        sim.close(horizon_s)
        s = sim.summary()
        total = s["requests_served"] + s["requests_dropped"] + s["requests_unfinished"]
        assert total == pytest.approx(s["requests_total"], rel=1e-9)
        assert s["requests_total"] == n
        assert s["requests_dropped"] > 0.01 * n
        summaries.append(s)
    one, many = summaries
    for key in ("requests_served", "requests_dropped", "slo_met"):
        assert many[key] == pytest.approx(one[key], abs=0.002 * n)


def test_a_bursty_source_is_served_by_the_request_level():
    """A file whose requests come in bursts is followed request by request at the fluid
    level with the request level's engine: the same tables, summary and power as the
    request level, at its cost; a Poisson-like source stays with the flows (`Fluid`)."""
    rng = np.random.default_rng(9)
    n, horizon_s = 4000, 1800.0
    times = np.sort(np.repeat(rng.uniform(0, 1500.0, n // 100), 100) + rng.uniform(0, 1, n))
    table = RequestTable(times - times[0], np.full(n, 500), rng.geometric(1 / 100, n))
    m = model()
    runs = []
    for build in (fluid_level, RequestLevel):
        log = PowerLog()
        source = FileSource(table, horizon_s, 1.0, False)
        sim = build(ServiceContext("svc", source, np.zeros(2), SLO, 60.0, STEP_S, horizon_s, log))
        sim.configure(0.0, 0, 2, m)
        sim.configure(600.0, 1, 1, m)
        assert sim.configure(900.0, 0, 1, m) >= 900.0
        sim.close(horizon_s)
        runs.append((sim.step_table(), sim.summary(), log.calls))
    (tab_f, sum_f, calls_f), (tab_r, sum_r, calls_r) = runs
    pd.testing.assert_frame_equal(tab_f, tab_r)
    assert sum_f == sum_r
    assert calls_f == calls_r
    assert isinstance(fluid(steady(10.0), horizon_s), Fluid)
