"""Spot capacity (`reserved` and `spot` GPUs of a pool, `[spot]`): jobs take reserved GPUs
first unless their `Start` names the kinds (checked before anything changes), each kind is
priced as it should be, a policy sees the free GPUs by kind, evictions follow their rate,
an evicted job writes its checkpoint within the notice or loses its work since the last
one, and work is conserved."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import sim
from policies.run_now import RunNow
from sim.api import Start
from sim.config.market import AWS_SPOT_NOTICE_S
from sim.errors import PolicyError, ScenarioError
from sim.models.hardware import GPU_CATALOG
from sim.testing import PolicyHarness
from tests.conftest import jobs_of, make_scenario, one_line_cli_error, site, trace_file, write_jobs

H = 3600.0
OD, SPOT, RESERVED = 3.0, 0.6, 1.2
"""Prices per GPU-hour (EUR) of the tests, in GAIA's ratios: spot 0.2 x on-demand, reserved
0.4 x on-demand (umassos/GAIA src/cluster/base_cluster.py)."""
PRICES = {
    "per_gpu_h": {"A100-80GB": OD},
    "spot_per_gpu_h": {"A100-80GB": SPOT},
    "reserved_per_gpu_h": {"A100-80GB": RESERVED},
}


def pool(count: int, reserved: int = 0, spot: int = 0) -> dict:
    return {"model": "A100-80GB", "count": count, "reserved": reserved, "spot": spot}


def scenario_with(tmp_path, jobs, gpus, spot=None, **overrides):
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs))}
    extra = {} if spot is None else {"spot": spot}
    return make_scenario(
        tmp_path,
        workload=workload,
        sites=[site(gpus=[gpus])],
        prices=PRICES,
        **extra,
        **overrides,
    )


def trace(tmp_path, text: str) -> dict:
    return trace_file(tmp_path, "evictions.csv", text)


def test_jobs_take_reserved_then_on_demand_then_spot_gpus_each_at_its_price(tmp_path):
    scenario = scenario_with(tmp_path, jobs_of([1, 1, 1, 1], 2.0), pool(4, reserved=1, spot=2))
    r = sim.simulate(scenario)
    cost = r.jobs.set_index("job_id")["cost"]
    # j0 on the reserved GPU (paid by the commitment), j1 on-demand, j2 and j3 on spot.
    assert cost.tolist() == pytest.approx([0.0, 2 * OD, 2 * SPOT, 2 * SPOT])
    assert r.jobs["spot_gpu_h"].tolist() == pytest.approx([0.0, 0.0, 2.0, 2.0])
    assert r.summary["spot_gpu_h"] == pytest.approx(4.0)


def test_reserved_gpus_are_paid_for_the_whole_run_used_or_not(tmp_path):
    scenario = scenario_with(tmp_path, jobs_of([1], 2.0), pool(4, reserved=3), duration_h=24.0)
    r = sim.simulate(scenario)
    assert r.summary["cost_reserved"] == pytest.approx(3 * 24.0 * RESERVED)
    assert r.jobs["cost"].tolist() == [0.0]
    assert r.summary["cost_compute"] == pytest.approx(3 * 24.0 * RESERVED)


class StartOn(RunNow):
    """Run-now, each job's GPUs taken from the kinds `capacity` names, in that order."""

    def __init__(self, capacity: tuple[str, ...]):
        self.capacity = capacity

    def decide(self, state):
        return [replace(a, capacity=self.capacity) for a in super().decide(state)]


def test_a_start_takes_its_gpus_from_the_kinds_it_names_in_that_order(tmp_path):
    scenario = scenario_with(tmp_path, jobs_of([1, 1, 1], 1.0), pool(3, reserved=1, spot=1))
    r = sim.simulate(scenario, StartOn(("spot", "reserved", "on_demand")))
    assert r.jobs["cost"].tolist() == pytest.approx([SPOT, 0.0, OD])
    assert r.jobs["spot_gpu_h"].tolist() == pytest.approx([1.0, 0.0, 0.0])


def test_a_start_may_mix_the_kinds_it_names_and_leaves_the_others_free(tmp_path):
    # One 2-GPU job on spot then on-demand: the reserved GPU stays free.
    scenario = scenario_with(tmp_path, jobs_of([2], 6.0), pool(4, reserved=1, spot=1))
    r = sim.simulate(scenario, StartOn(("spot", "on_demand")))
    assert r.jobs["cost"].tolist() == pytest.approx([3.0 * (SPOT + OD)])
    assert r.jobs["spot_gpu_h"].tolist() == pytest.approx([3.0])


def harness_of(tmp_path, gpus: dict) -> PolicyHarness:
    h = PolicyHarness(scenario_with(tmp_path, jobs_of([2], 1.0), gpus))
    h.advance(0.0)
    return h


@pytest.mark.parametrize(
    ("capacity", "fragment"),
    [
        (("reserved", "preemptible"), "capacity must be a tuple of distinct kinds of"),
        (("spot", "spot"), "capacity must be a tuple of distinct kinds of"),
        ("spot", "capacity must be a tuple of str or None, got 'spot' (str)"),  # sim.api's type
        (("reserved",), "job j0 needs 2 GPUs, a has 1 reserved A100-80GB free"),
        (("spot", "reserved"), "job j0 needs 2 GPUs, a has 0 spot, 1 reserved A100-80GB free"),
        ((), "job j0 needs 2 GPUs, a has none A100-80GB free"),
    ],
)
def test_a_start_naming_unknown_or_too_few_free_kinds_is_refused_and_changes_nothing(
    tmp_path, capacity, fragment
):
    h = harness_of(tmp_path, pool(4, reserved=1))
    start = Start(h.job("j0"), "a", gpu_model="A100-80GB", capacity=capacity)
    with pytest.raises(PolicyError) as e:
        h.apply([start])
    assert f"{start}: " in str(e.value) and fragment in str(e.value)
    assert h.job("j0").state == "pending"
    assert h.state.free_gpus_by_kind("a", "A100-80GB") == {
        "reserved": 1,
        "on_demand": 3,
        "spot": 0,
    }


def test_a_start_naming_kinds_on_an_unsplit_pool_is_refused(tmp_path):
    h = harness_of(tmp_path, pool(4))
    start = Start(h.job("j0"), "a", gpu_model="A100-80GB", capacity=("on_demand",))
    with pytest.raises(PolicyError, match="the A100-80GB GPUs of a are not split into kinds"):
        h.apply([start])
    assert h.job("j0").state == "pending" and h.state.free_gpus(site="a") == {"A100-80GB": 4}
    assert h.state.free_gpus_by_kind("a", "A100-80GB") == {}


def test_free_gpus_by_kind_follows_starts_evictions_and_ends(tmp_path):
    seen: dict[float, dict[str, int]] = {}

    class Reader(RunNow):
        tick_s = 1800.0

        def decide(self, state):
            free = state.free_gpus_by_kind("a", "A100-80GB")
            assert sum(free.values()) == state.free_gpus("a")["A100-80GB"]
            seen[state.now_s / H] = free
            return super().decide(state)

    # j0 (2 GPUs, 2 h) takes the reserved and the on-demand GPU, j1 (4 h) a spot one; at 1 h
    # the trace evicts j1 (its 1,000 GB checkpoint does not fit in the notice): it restarts
    # at once on the other spot GPU, the evicted one out of service until 3 h; j0 ends at
    # 2 h, j1 at 5 h.
    spot = {**trace(tmp_path, "time_h,site,gpus\n1,a,1\n"), "unavailable_h": 2.0}
    jobs = jobs_of([2, 1], 4.0, checkpoint_gb=1000.0)
    sim.simulate(scenario_with(tmp_path, jobs, pool(4, reserved=1, spot=2), spot), Reader())

    def free(reserved: int, on_demand: int, spot: int) -> dict[str, int]:
        return {"reserved": reserved, "on_demand": on_demand, "spot": spot}

    assert seen[0.0] == free(1, 1, 2)  # before the first starts
    assert seen[0.5] == free(0, 0, 1)
    assert seen[1.5] == free(0, 0, 0)
    assert seen[2.5] == free(1, 1, 0)
    assert seen[3.5] == free(1, 1, 1)
    assert seen[5.5] == free(1, 1, 2)


def test_free_gpus_by_kind_names_a_missing_pool(tmp_path):
    h = harness_of(tmp_path, pool(4, spot=1))
    with pytest.raises(PolicyError, match="free_gpus_by_kind: site a has no H100-SXM GPUs"):
        h.state.free_gpus_by_kind("a", "H100-SXM")


def busy_scenario(tmp_path, rate_per_node_h, seed=1, checkpoint_gb=0.0, **spot):
    """64 spot GPUs (8 nodes of 8) kept busy for a week by 8-GPU jobs (one node each)."""
    return scenario_with(
        tmp_path,
        jobs_of([8] * 40, work_gpu_h=400.0, checkpoint_gb=checkpoint_gb),
        pool(64, spot=64),
        {"eviction_rate_per_node_h": rate_per_node_h, **spot},
        seed=seed,
        duration_h=168.0,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_evictions_follow_their_rate_per_spot_node_hour_of_running_jobs(tmp_path, seed):
    rate = 0.5
    r = sim.simulate(busy_scenario(tmp_path, rate, seed=seed, unavailable_h=0.1))
    node_h = r.summary["spot_gpu_h"] / 8  # no checkpoint to write or read: all of it running
    expected = rate * node_h
    assert expected > 300
    # A Poisson count: within its 99 % interval (2.576 sigma).
    assert abs(r.summary["spot_evictions"] - expected) < 2.576 * math.sqrt(expected)
    evicted = r.events[r.events["kind"] == "evict"]
    assert not (r.events["kind"] == "fail").any()  # evictions are not failures
    assert r.summary["spot_evictions"] == len(evicted) == r.jobs["evictions"].sum()
    assert r.summary["failures"] == 0  # evictions are not failures


def test_work_is_conserved_when_a_job_restarts_from_scratch(tmp_path):
    # 1,000 GB take 500 s to write at 2 GB/s: no checkpoint fits in the 120 s notice.
    jobs = jobs_of([1, 2, 1, 4] * 3, work_gpu_h=6.0, checkpoint_gb=1000.0)
    spot = {"eviction_rate_per_node_h": 0.2, "unavailable_h": 0.5}
    scenario = scenario_with(tmp_path, jobs, pool(8, spot=8), spot, duration_h=400.0)
    r = sim.simulate(scenario)
    done = r.jobs[r.jobs["state"] == "completed"]
    assert len(done) == len(jobs) and r.summary["spot_evictions"] > 10
    assert done["gpu_h"].to_numpy() == pytest.approx(
        (done["work_gpu_h"] + done["work_lost_evictions_gpu_h"]).to_numpy(), rel=1e-9
    )
    assert done["gpu_h"].to_numpy() == pytest.approx(done["spot_gpu_h"].to_numpy(), rel=1e-9)
    assert r.summary["work_lost_evictions_gpu_h"] == pytest.approx(
        r.jobs["work_lost_evictions_gpu_h"].sum()
    )
    assert r.summary["work_lost_failures_gpu_h"] == 0.0 and r.summary["work_lost_gpu_h"] == 0.0


def test_work_is_conserved_when_a_job_writes_its_checkpoint_within_the_notice(tmp_path):
    # 100 GB take 50 s to write at 2 GB/s: within the 120 s notice.
    jobs = jobs_of([1, 2, 1, 4] * 3, work_gpu_h=6.0, checkpoint_gb=100.0)
    spot = {"eviction_rate_per_node_h": 0.2, "unavailable_h": 0.5}
    scenario = scenario_with(tmp_path, jobs, pool(8, spot=8), spot, duration_h=400.0)
    r = sim.simulate(scenario)
    done = r.jobs[r.jobs["state"] == "completed"]
    assert len(done) == len(jobs) and r.summary["spot_evictions"] > 10
    assert r.summary["work_lost_evictions_gpu_h"] == 0.0
    # GPU time = the work + the time its GPUs idled for checkpoints: each write, and each
    # hold of a job started again before its write ended, then reading it. Those idle
    # GPU-hours are its checkpoint energy over (idle + host power) x PUE 1.5.
    idle_kw = (GPU_CATALOG["A100-80GB"].idle_w + 40.0) * 1.5 / 1000.0
    assert done["gpu_h"].to_numpy() == pytest.approx(
        (done["work_gpu_h"] + done["checkpoint_kwh"] / idle_kw).to_numpy(), rel=1e-9
    )
    # At least a write of 50 s on each GPU per eviction.
    assert (done["checkpoint_kwh"] / idle_kw >= done["evictions"] * done["gpus"] * 50 / H).all()
    assert (done.loc[done["evictions"] > 0, "checkpoint_kwh"] > 0).all()


def test_a_traced_eviction_takes_the_gpus_away_for_the_unavailable_time(tmp_path):
    spot = {**trace(tmp_path, "time_h,site,gpus\n1.5,a,1\n"), "unavailable_h": 2.0}
    scenario = scenario_with(tmp_path, jobs_of([1], 4.0, 1000.0), pool(1, spot=1), spot)
    r = sim.simulate(scenario)
    (job,) = r.jobs.to_dict("records")
    assert job["evictions"] == 1
    assert job["work_lost_evictions_gpu_h"] == pytest.approx(1.5)
    # Its only GPU is back at 3.5 h; it starts again from scratch then.
    assert job["end_s"] == pytest.approx(3.5 * H + 4 * H)
    starts = r.events[(r.events["job"] == "j0") & (r.events["kind"] == "start")]
    assert starts["time_s"].tolist() == [0.0, 3.5 * H]


def test_a_traced_eviction_hits_the_job_on_spot_not_the_one_on_demand(tmp_path):
    spot = trace(tmp_path, "time_h,site,gpus\n1,a,1\n")
    scenario = scenario_with(tmp_path, jobs_of([1, 1], 4.0), pool(2, spot=1), spot)
    r = sim.simulate(scenario)
    assert r.jobs.set_index("job_id")["evictions"].to_dict() == {"j0": 0, "j1": 1}


def test_the_default_notice_is_aws_two_minutes():
    assert AWS_SPOT_NOTICE_S == 120.0


def test_evictions_are_reproducible_by_seed_and_move_no_other_draw(tmp_path):
    a = sim.simulate(busy_scenario(tmp_path, 0.2, seed=1))
    b = sim.simulate(busy_scenario(tmp_path, 0.2, seed=1))
    c = sim.simulate(busy_scenario(tmp_path, 0.2, seed=2))
    assert a.jobs.equals(b.jobs)
    assert a.jobs["evictions"].tolist() != c.jobs["evictions"].tolist()
    syn = {
        "synthetic": {"arrival_rate_per_h": 5.0, "duration": {"dist": "exponential", "mean_h": 2.0}}
    }
    spot_site = [site(gpus=[pool(4, spot=4)])]
    with_s = sim.simulate(
        make_scenario(workload=syn, sites=spot_site, spot={"eviction_rate_per_node_h": 0.3})
    )
    without = sim.simulate(make_scenario(workload=syn))
    assert with_s.jobs["work_gpu_h"].equals(without.jobs["work_gpu_h"])
    assert with_s.summary["spot_evictions"] > 0


def test_without_capacity_kinds_the_keys_are_null_and_no_column_is_added():
    r = sim.simulate(make_scenario())
    for key in ("spot_evictions", "work_lost_evictions_gpu_h", "spot_gpu_h", "cost_reserved"):
        assert r.summary[key] is None
    assert "evictions" not in r.jobs.columns


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        (
            {"sites": [site(gpus=[pool(4, reserved=3, spot=2)])]},
            "A100-80GB: reserved (3) + spot (2) exceeds count (4)",
        ),
        ({"spot": {"eviction_rate_per_node_h": 0.1}}, "spot: no site has spot GPUs"),
        (
            {"sites": [site(gpus=[pool(4, spot=4)])], "spot": {}},
            "spot: give exactly one of eviction_rate_per_node_h or trace",
        ),
        (
            {"sites": [site(gpus=[pool(4, spot=4)])], "spot": {"eviction_rate_per_node_h": -1}},
            "spot.eviction_rate_per_node_h: must be in [0, 1], got -1",
        ),
        (
            {
                "sites": [site(gpus=[pool(4, spot=4)])],
                "spot": {"eviction_rate_per_node_h": 0.1, "unavailable_h": 0.01},
            },
            "unavailable_h (0.01 h) must be at least notice_s (120.0 s)",
        ),
        ({"sites": [site(gpus=[pool(4, spot=-1)])]}, "spot"),
        ({"prices": {"spot_per_gpu_h": {"A100-80G": 1.0}}}, "spot_per_gpu_h.A100-80G: unknown"),
        ({"prices": {"reserved_per_gpu_h": {"A100-80GB": -1.0}}}, "must be >= 0, got -1.0"),
    ],
)
def test_a_bad_capacity_split_or_spot_table_is_a_one_line_scenario_error(changes, fragment):
    with pytest.raises(ScenarioError) as e:
        make_scenario(**changes)
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("time_h,site\n1,a\n", ":1: the header must be time_h,site,gpus"),
        ("time_h,site,gpus\n1,a,0\n", ":2: gpus must be an integer > 0, got '0'"),
        ("time_h,site,gpus\nsoon,a,1\n", ":2: time_h must be a number >= 0, got 'soon'"),
        ("time_h,site,gpus\n1,z,1\n", ":2: unknown site 'z' (sites: a)"),
        ("time_h,site,gpus\n1,a\n", ":2: expected 3 fields (time_h,site,gpus)"),
    ],
)
def test_a_bad_eviction_trace_row_is_one_error_naming_the_file_the_line_and_the_value(
    tmp_path, text, fragment
):
    spot = trace(tmp_path, text)
    with pytest.raises(ScenarioError) as e:
        sim.simulate(scenario_with(tmp_path, jobs_of([1], 1.0), pool(4, spot=4), spot))
    message = str(e.value)
    assert message.startswith(f"spot.trace: {tmp_path / 'evictions.csv'}:")
    assert fragment in message and "\n" not in message


def test_an_eviction_trace_row_at_a_site_without_spot_gpus_is_one_error_naming_it(tmp_path):
    # Site b's GPUs are all on-demand: a row reclaiming spot GPUs there would do nothing.
    spot = trace(tmp_path, "time_h,site,gpus\n1,a,1\n2,b,1\n")
    sites = [site(name="a", gpus=[pool(4, spot=4)]), site(name="b", gpus=[pool(4)])]
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs_of([1], 1.0)))}
    scenario = make_scenario(tmp_path, workload=workload, sites=sites, prices=PRICES, spot=spot)
    with pytest.raises(ScenarioError) as e:
        sim.simulate(scenario)
    assert str(e.value) == (
        f"spot.trace: {tmp_path / 'evictions.csv'}:3: site 'b' has no spot GPUs "
        "(sites with spot GPUs: a)"
    )


def test_fractional_jobs_on_a_split_pool_are_refused_naming_the_job(tmp_path):
    jobs = [{**jobs_of([1], 1.0)[0], "gpu_milli": 500}]
    with pytest.raises(ScenarioError, match="whole-GPU jobs only; job j0 asks for 500 milli"):
        sim.simulate(scenario_with(tmp_path, jobs, pool(4, spot=4)))


def test_the_cli_reports_a_bad_split_on_one_line_with_exit_2(tmp_path, capsys):
    extra = "[spot]\neviction_rate_per_node_h = 0.1\n"
    line = one_line_cli_error(tmp_path, capsys, {}, extra)
    assert "spot: no site has spot GPUs" in line


def test_a_service_at_a_site_with_split_gpus_is_refused_naming_it(tmp_path):
    service = {
        "name": "chat",
        "model": "Llama-3.1-8B-Instruct",
        "gpu": "A100-80GB",
        "sites": ["a"],
        "requests": {"rate_per_s": 1.0},
        "slo": {"ttft_ms": 500, "tpot_ms": 100, "percentile": 99},
    }
    scenario = make_scenario(sites=[site(gpus=[pool(4, spot=2)])], services=[service])
    with pytest.raises(ScenarioError, match="service 'chat' runs at 'a', whose GPUs are split"):
        sim.simulate(scenario)


def test_a_missing_spot_or_reserved_price_is_named_where_cost_compute_is_unknown(tmp_path):
    # The default table has no reserved A100-80GB price.
    pool = {"model": "A100-80GB", "count": 8, "spot": 6, "reserved": 1}
    scenario = make_scenario(tmp_path, sites=[site(gpus=[pool])], duration_h=2)
    results = sim.simulate(scenario, "run_now")
    assert results.summary["cost_compute"] is None
    assert "A100-80GB reserved" in results.meta["prices"]["missing"]


# --- a job started again on the pool where its eviction write is under way ----------------


def kinds_add_up(h: PolicyHarness) -> None:
    """Per kind of every split pool: free + held (every holding) + evicted = installed."""
    for s in h.engine.fleet.sites:
        for p in s.pools:
            c = p.capacity
            if c is None:
                continue
            for kind, total in c.total.items():
                held = sum(holding.get(kind, 0) for hs in c.held.values() for holding in hs)
                evicted = c.withdrawn if kind == "spot" else 0
                assert c.free[kind] + held + evicted == total, (h.now_s, kind, c.free, c.held)


def evicted_and_restarted(tmp_path, rows: str, duration_h: float = 24.0, gpus=None):
    """j0 (1 GPU, 4 h, a 100 GB checkpoint: 50 s to write and 50 s to read) starts on a
    spot GPU of `gpus` (default: 1 spot and 1 on-demand); the trace evicts it at 1 h; it
    writes its checkpoint within the notice and is started again at once on the same pool,
    in the default order (on-demand, then the other spot GPU: the first is still writing).
    Returns the harness run to the horizon and closed, the kinds checked to add up after
    every step."""
    spot = {**trace(tmp_path, rows), "unavailable_h": 0.5}
    gpus = pool(2, spot=1) if gpus is None else gpus
    scenario = scenario_with(tmp_path, jobs_of([1], 4.0, 100.0), gpus, spot, duration_h=duration_h)
    h = PolicyHarness(scenario)
    h.advance(0.0).apply([Start(h.job("j0"), "a", gpu_model="A100-80GB", capacity=("spot",))])
    env = h.engine.env
    while env.peek() <= H:
        env.step()
        kinds_add_up(h)
    assert h.job("j0").state == "pending"  # evicted, writing
    h.apply([Start(h.job("j0"), "a", gpu_model="A100-80GB")])
    kinds_add_up(h)
    while env.peek() < h.engine.horizon_s:
        env.step()
        kinds_add_up(h)
    env.run(until=h.engine.horizon_s)
    for component in h.engine.components:
        component.close(h.engine.horizon_s)
    return h


def test_a_job_started_again_during_its_eviction_write_pays_each_run_at_its_kinds(tmp_path):
    h = evicted_and_restarted(tmp_path, "time_h,site,gpus\n1,a,1\n")
    j = h.job("j0").index
    # Spot: 1 h running + the 50 s write; on-demand: the 100 s hold (the write's last 50 s,
    # then the read) + the 3 h left.
    assert h.engine.spot.count[j] == 1 and h.job("j0").state == "completed"
    assert h.engine.runs.charges.cost[j] == pytest.approx(
        SPOT * (H + 50) / H + OD * (100 + 3 * H) / H
    )
    assert h.engine.runs.charges.spot_gpu_s[j] == pytest.approx(H + 50)


def test_a_run_cut_by_the_horizon_during_the_eviction_write_pays_its_own_kind(tmp_path):
    # The run ends 20 s into the write: 20 s on-demand for the new run, 20 s of write on spot.
    h = evicted_and_restarted(tmp_path, "time_h,site,gpus\n1,a,1\n", duration_h=1 + 20 / H)
    j = h.job("j0").index
    assert h.engine.runs.charges.cost[j] == pytest.approx(SPOT * (H + 20) / H + OD * 20 / H)
    assert h.engine.runs.charges.spot_gpu_s[j] == pytest.approx(H + 20)


def test_a_second_reclaim_during_the_write_spares_the_new_run_on_demand(tmp_path):
    # At 1 h + 20 s a second row reclaims 1 spot GPU of a: the only one is the evicted one,
    # still writing; the new run holds none, so it is not evicted again.
    h = evicted_and_restarted(tmp_path, "time_h,site,gpus\n1,a,1\n1.0055555555555555,a,1\n")
    j = h.job("j0").index
    assert h.engine.spot.count[j] == 1 and h.job("j0").state == "completed"
    assert h.engine.runs.charges.cost[j] == pytest.approx(
        SPOT * (H + 50) / H + OD * (100 + 3 * H) / H
    )


def test_a_new_run_evicted_during_the_write_frees_its_own_gpus_and_both_leave_service(tmp_path):
    # Two spot GPUs: j0 restarts on the second while writing on the first; at 1 h + 20 s the
    # second row evicts the new run (held: it stops at once). Each frees its own spot GPU,
    # and both are out of service at the horizon (1.2 h: back at 1.5 h and 1.5 h + 20 s).
    rows = "time_h,site,gpus\n1,a,1\n1.0055555555555555,a,1\n"
    h = evicted_and_restarted(tmp_path, rows, duration_h=1.2, gpus=pool(2, spot=2))
    j = h.job("j0").index
    capacity = h.engine.fleet.sites[0].pools[0].capacity
    assert capacity is not None
    assert h.engine.spot.count[j] == 2 and h.job("j0").state == "pending"
    assert capacity.withdrawn == 2 and capacity.free["spot"] == 0 and capacity.held == {}
    assert h.engine.runs.charges.cost[j] == pytest.approx(SPOT * (H + 50 + 20) / H)
