"""Placement rules on a pool's servers (sim/models/placement.py, docs/placement.md)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.models import scaling
from sim.models.placement import (
    RULES,
    best_fit,
    fewest_servers,
    first_fit,
    placed_scaling,
    servers_needed,
    spread,
)

G = 8


@pytest.mark.parametrize(
    ("free", "gpus", "expected"),
    [
        # one server holds the job: first fit takes the lowest index, best fit and the
        # topology-aware rule the fewest free that hold it, spread the most free
        (
            [3, 8, 5, 2, 8],
            2,
            {
                "first_fit": ((0, 2),),
                "best_fit": ((3, 2),),
                "spread": ((1, 2),),  # 8 free on servers 1 and 4: the lower index
                "fewest_servers": ((3, 2),),
            },
        ),
        (
            [3, 8, 5, 2, 8],
            4,
            {
                "first_fit": ((1, 4),),
                "best_fit": ((2, 4),),
                "spread": ((1, 4),),
                "fewest_servers": ((2, 4),),
            },
        ),
        # larger than a server: one whole server (the lowest free one), the rest by the rule
        (
            [3, 8, 5, 2, 8],
            12,
            {
                "first_fit": ((1, 8), (2, 4)),
                "best_fit": ((1, 8), (2, 4)),
                "spread": ((1, 8), (4, 4)),
                "fewest_servers": ((1, 8), (2, 4)),
            },
        ),
        # no server holds 8 of 12 free: the rules spill in their own order
        (
            [1, 2, 5, 4],
            8,
            {
                "first_fit": ((0, 1), (1, 2), (2, 5)),
                "best_fit": ((0, 1), (1, 2), (2, 5)),
                "spread": ((2, 5), (3, 3)),
                "fewest_servers": ((2, 5), (3, 3)),
            },
        ),
        (
            [3, 2, 5, 4, 0],
            7,
            {
                "first_fit": ((0, 3), (2, 4)),
                "best_fit": ((1, 2), (2, 5)),
                "spread": ((2, 5), (3, 2)),
                "fewest_servers": ((1, 2), (2, 5)),
            },
        ),
    ],
)
def test_each_rule_places_a_job_exactly_where_its_preference_says(free, gpus, expected):
    for name, rule in RULES.items():
        assert rule(free, gpus, G) == expected[name], name


def test_a_job_larger_than_the_free_gpus_is_not_placed():
    for rule in RULES.values():
        assert rule([3, 0, 4], 8, G) is None


def test_a_rule_over_the_server_limit_takes_the_fewest_servers_or_none():
    free = [1, 2, 5, 4]
    assert first_fit(free, 8, G, max_servers=3) == ((0, 1), (1, 2), (2, 5))
    for rule in RULES.values():
        assert rule(free, 8, G, max_servers=2) == ((2, 5), (3, 3))
        assert rule(free, 8, G, max_servers=1) is None  # 12 free, but on no one server


def test_bad_inputs_are_errors():
    with pytest.raises(ValueError, match="gpus >= 1"):
        first_fit([8], 0, G)
    with pytest.raises(ValueError, match=r"\[0, 8\]"):
        first_fit([9], 1, G)


free_vectors = st.lists(st.integers(0, G), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(free=free_vectors, gpus=st.integers(1, 3 * G), data=st.data())
def test_every_rule_gives_a_valid_gang_on_as_few_servers_as_it_can(free, gpus, data):
    limit = data.draw(st.one_of(st.none(), st.integers(1, 4)))
    ranked = sorted(free, reverse=True)
    fewest = next((k for k in range(1, len(free) + 1) if sum(ranked[:k]) >= gpus), None)
    for name, rule in RULES.items():
        placed = rule(free, gpus, G, limit)
        if fewest is None or (limit is not None and fewest > limit):
            assert placed is None, name
            continue
        assert placed is not None, name
        assert sum(g for _, g in placed) == gpus, name
        assert all(1 <= g <= free[s] for s, g in placed), name
        assert [s for s, _ in placed] == sorted({s for s, _ in placed}), name
        if limit is not None:
            assert servers_needed(placed) <= limit, name
        if fewest == 1:  # a job one server holds is on one server, whatever the rule
            assert servers_needed(placed) == 1, name
    if fewest is not None and (limit is None or fewest <= limit):
        assert servers_needed(fewest_servers(free, gpus, G, limit)) == fewest


def test_rules_depend_on_the_free_vector_alone():
    """Ties go to the lower index: the same vector, the same answer."""
    free = [4, 4, 4, 4]
    assert spread(free, 2, G) == ((0, 2),)
    assert best_fit(free, 2, G) == ((0, 2),)


def test_servers_needed_counts_the_servers_of_an_assignment():
    assert servers_needed(((0, 8), (3, 2))) == 2
    assert servers_needed(((5, 1),)) == 1


def test_a_job_on_two_whole_servers_runs_at_the_scaling_models_speed():
    """16 GPUs on two servers of 8 is the scaling model's 16-GPU point on its default node
    of 8: two nodes, paying the network between them."""
    point = placed_scaling("bert-squad", "A100-80GB", ((0, 8), (1, 8)))
    assert point == scaling.scaling("bert-squad", "A100-80GB", 16)
    assert point.nodes == 2


def test_a_job_split_over_two_servers_pays_the_inter_node_network():
    """8 GPUs as 4 + 4 on two servers run as 8 GPUs in nodes of 4 (two nodes): on servers
    joined by 25 Gbit/s Ethernet, slower than the same 8 GPUs on one server. (On the
    A100's default node, 8 HDR InfiniBand ports, bert-squad's all-reduce hides behind its
    compute on two nodes as on one.)"""
    links = scaling.NodeShape(8, "NVLink3", "Eth-25G")
    split = placed_scaling("bert-squad", "A100-80GB", ((0, 4), (5, 4)), node=links)
    in_fours = dataclasses.replace(links, gpus_per_node=4)
    assert split == scaling.scaling("bert-squad", "A100-80GB", 8, node=in_fours)
    assert split.nodes == 2
    alone = placed_scaling("bert-squad", "A100-80GB", ((2, 8),), node=links)
    assert alone == scaling.scaling("bert-squad", "A100-80GB", 8, node=links)
    assert alone.nodes == 1
    assert split.efficiency < alone.efficiency


def test_placed_scaling_uses_the_links_it_is_given():
    links = scaling.NodeShape(8, "NVLink3", "Eth-25G")
    slow = placed_scaling("bert-squad", "A100-80GB", ((0, 8), (1, 8)), node=links)
    assert slow == scaling.scaling("bert-squad", "A100-80GB", 16, node=links)
    assert slow.efficiency < placed_scaling("bert-squad", "A100-80GB", ((0, 8), (1, 8))).efficiency


def test_an_uneven_split_pays_a_ring_over_all_its_servers():
    """8 GPUs as 4 + 2 + 2 span three servers: nodes of at most 4, three of them. The
    all-reduce is the 4-GPU ring inside the largest share plus a 3-node ring over the
    network, by hand from `ring_allreduce_s`, and the split is slower than 4 + 4."""
    links = scaling.NodeShape(8, "NVLink3", "Eth-25G")
    uneven = placed_scaling("bert-squad", "A100-80GB", ((0, 4), (1, 2), (2, 2)), node=links)
    assert uneven.nodes == 3
    w = scaling.profile_workload("bert-squad", "A100-80GB")
    allreduce_s = scaling.ring_allreduce_s(
        4, w.grad_bytes, scaling.interconnect("NVLink3")
    ) + scaling.ring_allreduce_s(
        3, w.grad_bytes, scaling.interconnect("Eth-25G"), links.nics_per_node
    )
    step_s = w.step_compute_s + max(0.0, allreduce_s - w.overlap_frac * w.step_compute_s)
    step_s += scaling.sync_wait_s(8)
    assert uneven.efficiency == pytest.approx(w.step_compute_s / step_s, rel=1e-12)
    even = placed_scaling("bert-squad", "A100-80GB", ((0, 4), (1, 4)), node=links)
    assert uneven.efficiency < even.efficiency


def test_tensor_parallelism_over_an_uneven_split_is_refused():
    with pytest.raises(ValueError, match="equal shares"):
        placed_scaling("bert-squad", "A100-80GB", ((0, 4), (1, 2), (2, 2)), scheme="tensor")
