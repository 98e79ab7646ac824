"""Time logs have a structure that last-bit float differences cannot move: a state that lasted
less than `INSTANT_S` is not a row, and the rows of one instant come in a canonical order."""

from __future__ import annotations

import numpy as np
import pytest

from sim.util.records import (
    INSTANT_S,
    EventLog,
    PowerLog,
    in_instants,
    instant_starts,
    sort_in_instants,
)
from tests.golden.cases import CASES
from tests.golden.record import run_case

T = 39_600.0
T_LAST_BIT = 39_600.00000000001  # the same sum on another CPU or library build


def test_a_change_within_an_instant_updates_the_row_not_a_new_one():
    log = PowerLog(n_sites=1)
    log.record(0.0, 0, 100.0, 120.0, 0)
    log.record(T, 0, 200.0, 240.0, 31)
    log.record(T_LAST_BIT, 0, 190.0, 228.0, 30)
    power = log.drain_frame(["frankfurt"])
    assert power["time_s"].tolist() == [0.0, T]
    assert power["busy_gpus"].tolist() == [0, 30]
    assert power["it_w"].tolist() == [100.0, 190.0]


def test_changes_a_whole_instant_apart_are_rows_of_their_own():
    log = PowerLog(n_sites=1)
    log.record(T, 0, 200.0, 240.0, 31)
    log.record(T + INSTANT_S, 0, 190.0, 228.0, 30)
    assert len(log.drain_frame(["frankfurt"])) == 2


def _events(times_s: list[float], rows: list[tuple[str, int, int]]):
    log = EventLog()
    for t, (kind, job, site) in zip(times_s, rows, strict=True):
        log.append(t, kind, job, site)
    return log.drain_frame(np.array(["j0", "j1", "j2"]), ["paris", "frankfurt"])


def test_the_events_of_one_instant_come_in_one_order_whatever_the_last_bits():
    # One CPU computes j1's finish a last bit after the hour; another exactly on it, where
    # the engine then handles it before j2's start.
    this_cpu = _events([T, T, T_LAST_BIT], [("ready", 0, -1), ("start", 2, 0), ("finish", 1, 1)])
    that_cpu = _events([T, T, T], [("ready", 0, -1), ("finish", 1, 1), ("start", 2, 0)])
    for column in ("time_s", "kind", "job", "site"):
        assert this_cpu[column].tolist() == that_cpu[column].tolist()
    assert this_cpu["kind"].tolist() == ["finish", "ready", "start"]  # ends, arrivals, starts
    assert this_cpu["time_s"].tolist() == [T, T, T]


def test_rows_of_one_instant_with_equal_keys_keep_their_logged_order():
    order, instant_s = in_instants(np.array([2.0, 1.0 + 1e-11, 1.0]), np.array([0, 0, 0]))
    assert order.tolist() == [1, 2, 0]
    assert instant_s.tolist() == [1.0, 1.0, 2.0]


@pytest.mark.parametrize("name", ["space_time", "periodic_checkpoints", "serving_fluid"])
def test_a_power_table_never_holds_two_rows_for_one_site_at_one_instant(name):
    _, scenario_file, policy, overrides = next(c for c in CASES if c[0] == name)
    results = run_case(scenario_file, policy, overrides)
    for site, rows in results.power.groupby("site", observed=True):
        assert np.diff(rows["time_s"].to_numpy()).min() >= INSTANT_S, site
    assert np.all(np.diff(results.events["time_s"].to_numpy()) >= 0)


def test_logs_drain_while_something_else_still_views_their_columns():
    # Dask's sampling profiler holds frames, and with them views of the columns that
    # `in_instants` was given, past the drain: emptying a column in place then raised
    # BufferError in one sweep run out of about ten.
    events = EventLog()
    events.append(T, "start", 0, 1)
    power = PowerLog(n_sites=1)
    power.record(T, 0, 200.0, 240.0, 31)
    held = [np.frombuffer(log.time_s) for log in (events, power)]
    held += [np.frombuffer(events.job, np.int32), np.frombuffer(power.it_w)]
    assert events.drain_frame(np.array(["j0"]), ["paris", "frankfurt"])["job"].tolist() == ["j0"]
    assert power.drain_frame(["frankfurt"])["it_w"].tolist() == [200.0]
    assert len(events) == 0 and len(power.time_s) == 0
    assert [view.tolist() for view in held] == [[T], [T], [0], [200.0]]  # still the old rows


def _random_log(rng: np.random.Generator, in_time_order: bool):
    """A log of 2,000 rows in about 300 instants, some of their rows a last bit or two apart
    and some a little under `INSTANT_S` apart (chained into one instant), with keys of few
    values (ties) in random order within an instant."""
    instant_s = np.cumsum(rng.choice([INSTANT_S, 0.7, 3600.0], size=300))
    times_s = np.repeat(instant_s, rng.integers(1, 14, size=300))[:2000]
    times_s = times_s + rng.choice([0.0, 0.0, 1e-11, 2e-11, 0.9 * INSTANT_S], size=len(times_s))
    times_s = np.maximum.accumulate(times_s) if in_time_order else rng.permutation(times_s)
    n = len(times_s)
    keys = (rng.integers(0, 4, n).astype(np.int8), rng.integers(-1, 5, n).astype(np.int32))
    return times_s, keys


@pytest.mark.parametrize("in_time_order", [True, False])
def test_a_log_sorted_in_place_is_in_the_order_and_instants_in_instants_gives(in_time_order):
    rng = np.random.default_rng(34)
    for _ in range(50):
        times_s, keys = _random_log(rng, in_time_order)
        order, instant_s = in_instants(times_s, *keys)
        rows = np.arange(len(times_s), dtype=np.float64)  # a column that names each row
        columns = (*(key.copy() for key in keys), rows)
        sort_in_instants(times_s, keys, columns)
        assert times_s.tolist() == instant_s.tolist()
        assert rows.tolist() == order.tolist()
        assert [c.tolist() for c in columns[:2]] == [key[order].tolist() for key in keys]


def test_logs_as_an_engine_writes_them_need_only_their_unsorted_instants_sorted():
    # an engine logs at its clock: times never decrease; j1's finish, logged after j2's
    # start at that instant, comes first
    times_s = np.array([0.0, T, T_LAST_BIT, T + 1.0])
    kinds = np.array([9, 19, 1, 1], dtype=np.int8)  # ranks: submit, start, finish, finish
    jobs = np.array([2, 2, 1, 2], dtype=np.int32)
    sort_in_instants(times_s, (kinds, jobs), (kinds, jobs))
    assert times_s.tolist() == [0.0, T, T, T + 1.0]
    assert jobs.tolist() == [2, 1, 2, 2]
    assert kinds.tolist() == [9, 1, 19, 1]


@pytest.mark.parametrize(
    "times_s",
    [
        [],
        [5.0],
        [np.nan, 1.0],
        [-np.inf, -np.inf, 0.0],
        [0.0, 0.0, 5e-7, 1e-6, 2.5e-6, np.inf, np.inf, np.nan],
        np.sort(np.random.default_rng(3).choice([0.0, 1e-7, 1.0, 2.0], 1000).cumsum()),
    ],
    ids=["empty", "one", "nan-first", "minus-inf", "ties-and-edges", "random"],
)
def test_instant_starts_are_the_times_one_instant_or_more_after_the_one_before(times_s):
    times_s = np.asarray(times_s, dtype=float)
    with np.errstate(invalid="ignore"):  # inf - inf, as the engine's times never are
        expected = np.diff(times_s, prepend=-np.inf) >= INSTANT_S
        np.testing.assert_array_equal(instant_starts(times_s), expected)
