"""Transfers in flight (sim.network.Transfers): what the engine relies on when it drives
them under contention. Bytes are conserved, disjoint routes do not interact, and a transfer
stopped early is charged for the bits it sent and gives its share back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network import Wan
from tests.network.test_wan import line_wan, run_all


@pytest.fixture(scope="module")
def contended(tmp_path_factory) -> Wan:
    return line_wan(tmp_path_factory.mktemp("line"), contention=True)


def fresh(wan: Wan) -> Wan:
    """The same network with nothing in flight (routes and energies stay cached)."""
    from sim.network.transfers import Transfers

    wan.transfers = Transfers(wan)
    return wan


def test_transfers_on_disjoint_routes_do_not_slow_each_other(contended):
    wan = fresh(contended)
    # a -> b crosses a's leg, the 10 Gbit/s link and b's leg in; b -> c crosses b's leg
    # out, b-c and c's leg: no link in common.
    wan.transfers.start("a", "b", 12.5, 0.0, tag="ab")
    wan.transfers.start("b", "c", 125.0, 0.0, tag="bc")
    sent = {t.tag: t.end_s - t.propagation_s for t in run_all(wan)}
    assert sent == pytest.approx({"ab": 10.0, "bc": 10.0})  # each at its own bottleneck


def test_a_cancelled_transfer_is_charged_for_what_it_sent_and_the_others_speed_up(contended):
    wan = fresh(contended)
    x = wan.transfers.start("a", "b", 12.5, 0.0)
    wan.transfers.start("a", "b", 12.5, 0.0)
    part = wan.transfers.cancel(x, 4.0)  # 5 Gbit/s each: 20 Gbit = 2.5 GB sent
    route = wan.route("a", "b")
    alone = wan.priced(route, 2.5, 0.0, 5.0)
    assert (part.gb, part.end_s) == pytest.approx((2.5, 4.0))
    assert (part.energy_kwh, part.carbon_kg) == pytest.approx(
        (alone.energy_kwh, alone.carbon_kg), rel=1e-12
    )
    # y: 20 Gbit by 4 s, the other 80 alone at 10 Gbit/s: sent at 12 s.
    (y,) = run_all(wan)
    assert y.end_s - route.propagation_s == pytest.approx(12.0)
    with pytest.raises(KeyError, match="no transfer"):
        wan.transfers.cancel(x, 13.0)


moves = st.lists(
    st.tuples(
        st.floats(0.0, 20.0),  # gap before it starts, s
        st.sampled_from("abc"),
        st.sampled_from("abc"),
        st.floats(0.0, 30.0),  # GB
        st.booleans(),  # stopped 1 s after it starts, if still in flight
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(moves)
def test_every_byte_started_is_delivered_or_charged_as_sent_when_stopped(contended, plan):
    wan = fresh(contended)
    now, started = 0.0, {}
    stops, done, stopped = [], [], []

    def run_to(t):
        """Deliveries and stops up to `t`, in time order."""
        while True:
            due = wan.transfers.next_event_s()
            stop_s = stops[0][1] if stops else None
            if stop_s is not None and stop_s <= t and (due is None or stop_s <= due):
                tid, at = stops.pop(0)
                if tid in wan.transfers._flows:
                    stopped.append(wan.transfers.cancel(tid, at))
            elif due is not None and due <= t:
                done.extend(wan.transfers.advance(due))
            else:
                return

    for gap_s, src, dst, gb, stop in plan:
        run_to(now + gap_s)
        now += gap_s
        tid = wan.transfers.start(src, dst, gb, now)
        started[tid] = (src, dst, gb)
        if stop:
            stops.append((tid, now + 1.0))
        stops.sort(key=lambda s: s[1])
    run_to(1e9)
    assert sorted(t.id for t in done + stopped) == sorted(started)
    for t in done:
        src, dst, gb = started[t.id]
        assert t.gb == gb
        assert t.energy_kwh == pytest.approx(wan.energy_kwh(src, dst, gb), rel=1e-12, abs=1e-15)
    for t in stopped:
        src, dst, gb = started[t.id]
        assert 0.0 <= t.gb <= gb * (1 + 1e-12)
        assert t.energy_kwh == pytest.approx(wan.energy_kwh(src, dst, t.gb), rel=1e-9, abs=1e-15)
