"""Time logs have a structure that last-bit float differences cannot move: a state that lasted
less than `INSTANT_S` is not a row, and the rows of one instant come in a canonical order."""

from __future__ import annotations

import numpy as np
import pytest

from sim.util.records import INSTANT_S, EventLog, PowerLog, in_instants
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
