"""A pool's servers: the ledger, the free-GPU log and fragmentation waits
(sim/engine/servers.py, docs/placement.md)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.servers import FragmentationMeter, FreeGpuLog, ServerLedger
from sim.models.placement import RULES, Assignment, fewest_servers


def test_allocate_and_release_move_gpus_between_jobs_and_servers():
    ledger = ServerLedger(3, 4)
    ledger.allocate("a", ((0, 3), (2, 1)))
    assert ledger.free_by_server() == (1, 4, 3)
    assert ledger.total_free == 8
    assert ledger.held("a") == ((0, 3), (2, 1))
    assert ledger.release("a") == ((0, 3), (2, 1))
    assert ledger.free_by_server() == (4, 4, 4)
    assert ledger.held("a") == ()


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (((0, 5),), "cannot take 5 GPUs of server 0: it has 4 free"),
        (((0, 2), (3, 1)), "server 3: it has no such server free"),
        (((1, 0),), "cannot take 0 GPUs"),
        (((1, 1), (0, 1)), "increasing index"),
        (((1, 1), (1, 1)), "increasing index"),
        ((), "increasing index"),
    ],
)
def test_a_bad_allocation_is_refused_before_anything_changes(assignment, message):
    ledger = ServerLedger(3, 4)
    with pytest.raises(ValueError, match=message):
        ledger.allocate("a", assignment)
    assert ledger.free_by_server() == (4, 4, 4)
    assert ledger.held("a") == ()


def test_a_job_holds_one_assignment_and_releases_only_what_it_holds():
    ledger = ServerLedger(2, 4)
    ledger.allocate("a", ((0, 1),))
    with pytest.raises(ValueError, match="already holds"):
        ledger.allocate("a", ((1, 1),))
    with pytest.raises(ValueError, match="holds no GPUs"):
        ledger.release("b")
    assert ledger.free_by_server() == (3, 4)


def test_place_allocates_where_the_rule_says_or_nothing():
    ledger = ServerLedger(3, 8)
    assert ledger.place("a", 12, fewest_servers) == ((0, 8), (1, 4))
    assert ledger.place("b", 10, fewest_servers, max_servers=1) is None  # 0 + 4 + 8 free
    assert ledger.held("b") == ()
    assert ledger.place("b", 10, fewest_servers) == ((1, 2), (2, 8))
    assert ledger.free_by_server() == (0, 2, 0)


ops = st.lists(
    st.tuples(st.booleans(), st.integers(0, 5), st.integers(1, 20), st.sampled_from(sorted(RULES))),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops=ops)
def test_a_job_never_holds_gpus_of_a_server_beyond_its_count(ops):
    """Random placements and releases: each server's GPUs held by jobs plus its free GPUs
    are its count, never fewer than 0 free, and the total follows."""
    servers, per_server = 4, 8
    ledger = ServerLedger(servers, per_server)
    holding: dict[int, Assignment] = {}
    for place, job, gpus, rule in ops:
        if place and job not in holding:
            placed = ledger.place(job, gpus, RULES[rule])
            if placed is not None:
                holding[job] = placed
        elif not place and job in holding:
            assert ledger.release(job) == holding.pop(job)
        held = [0] * servers
        for assignment in holding.values():
            for s, g in assignment:
                held[s] += g
        free = ledger.free_by_server()
        assert all(0 <= f <= per_server for f in free)
        assert [h + f for h, f in zip(held, free, strict=True)] == [per_server] * servers
        assert ledger.total_free == sum(free)
        for job_, assignment in holding.items():
            assert ledger.held(job_) == assignment


def test_the_free_gpu_log_has_one_row_per_server_and_instant():
    ledger = ServerLedger(2, 4)
    log = FreeGpuLog(2)
    ledger.allocate("a", ((0, 3), (1, 1)))
    log.record(0.0, ledger, ((0, 3), (1, 1)))
    log.record(10.0, ledger, ledger.release("a"))
    ledger.allocate("b", ((1, 2),))
    log.record(10.0 + 1e-9, ledger, ((1, 2),))  # the same instant as the release
    assert list(log.time_s) == [0.0, 0.0, 10.0, 10.0]
    assert list(log.server) == [0, 1, 0, 1]
    assert list(log.free_gpus) == [1, 3, 4, 2]


HOUR_S = 3600.0


def strict_locality(gpus_per_server: int):
    """A job may span only the fewest servers its GPUs need (Philly's strict locality)."""
    return lambda free, gpus: fewest_servers(
        free, gpus, gpus_per_server, math.ceil(gpus / gpus_per_server)
    )


def test_fragmentation_wait_counted_exactly_on_a_hand_built_case():
    """Two servers of 4 GPUs, jobs on one server each.

    0 h    a (3 GPUs) on server 0, b (2) on server 1: free (1, 2)
           c (3 GPUs) waits: 3 free in total, but no server has 3      -> blocked
           d (8 GPUs) waits: never 8 free in total                     -> never counted
    1 h    b ends: free (1, 4); c could start                          -> c unblocked
    1.5 h  c starts on server 1 (the scheduler held it half an hour more): free (1, 1)
           e (2 GPUs) waits: 2 free in total, on no one server         -> blocked
    3 h    a ends: free (4, 1); e could start                          -> e unblocked
    3.25 h e starts on server 0: free (2, 1)
    4 h    the run ends with d waiting

    c waited 1 h of fragmentation, e 1.5 h, d none: 2.5 h.
    """
    ledger = ServerLedger(2, 4)
    meter = FragmentationMeter(ledger, strict_locality(4))
    ledger.allocate("a", ((0, 3),))
    ledger.allocate("b", ((1, 2),))
    meter.changed(0.0)
    meter.wait(0.0, "c", 3)
    meter.wait(0.0, "d", 8)
    ledger.release("b")
    meter.changed(1.0 * HOUR_S)
    ledger.allocate("c", ((1, 3),))
    meter.changed(1.5 * HOUR_S)
    meter.leave(1.5 * HOUR_S, "c")
    meter.wait(1.5 * HOUR_S, "e", 2)
    ledger.release("a")
    meter.changed(3.0 * HOUR_S)
    ledger.allocate("e", ((0, 2),))
    meter.changed(3.25 * HOUR_S)
    meter.leave(3.25 * HOUR_S, "e")
    meter.close(4.0 * HOUR_S)
    assert meter.wait_s("c") == 1.0 * HOUR_S
    assert meter.wait_s("e") == 1.5 * HOUR_S
    assert meter.wait_s("d") == 0.0
    assert meter.fragmentation_wait_h() == 2.5


def test_waits_of_one_job_add_up_and_jobs_of_one_size_are_blocked_together():
    """Two servers of 4 with 2 free on each: 3-GPU jobs are blocked (strict locality)."""
    ledger = ServerLedger(2, 4)
    meter = FragmentationMeter(ledger, strict_locality(4))
    ledger.allocate("x", ((0, 2), (1, 2)))
    meter.changed(0.0)
    meter.wait(0.0, "p", 3)
    meter.wait(100.0, "q", 3)
    meter.leave(300.0, "p")  # 300 s blocked
    meter.wait(500.0, "p", 3)  # back in the queue
    ledger.release("x")
    meter.changed(600.0)  # from here 3 GPUs fit on one server
    meter.leave(700.0, "p")  # 100 s more
    meter.leave(700.0, "q")  # 500 s
    assert meter.wait_s("p") == 400.0
    assert meter.wait_s("q") == 500.0
    assert meter.fragmentation_wait_h() == 900.0 / HOUR_S


def test_without_a_limit_on_servers_no_wait_is_fragmentation():
    """A rule with no server limit spills a job over servers whenever enough GPUs are free
    in total, so fragmentation blocks nothing (it slows the job instead: placed_scaling)."""
    ledger = ServerLedger(2, 4)
    meter = FragmentationMeter(ledger, lambda free, gpus: fewest_servers(free, gpus, 4))
    ledger.allocate("x", ((0, 2), (1, 2)))
    meter.changed(0.0)
    meter.wait(0.0, "p", 3)
    meter.close(HOUR_S)
    assert meter.fragmentation_wait_h() == 0.0


def test_the_meter_refuses_time_running_back_and_unknown_jobs():
    meter = FragmentationMeter(ServerLedger(1, 4), strict_locality(4))
    meter.wait(10.0, "p", 1)
    with pytest.raises(ValueError, match="time runs back"):
        meter.changed(5.0)
    with pytest.raises(ValueError, match="already waiting"):
        meter.wait(10.0, "p", 1)
    with pytest.raises(ValueError, match="not waiting"):
        meter.leave(10.0, "q")
