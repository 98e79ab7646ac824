"""heterogeneous_pool's `best_mix`: every mix enumerated up to `MAX_ENUMERATED_MIXES`, integer
programs (`scipy.optimize.milp`) above; both choose what a brute force over every mix the
pools allow chooses, ties and all, and seven deployments of up to 20 replicas each take a
fraction of a second and a few MB instead of 86 million rows."""

from __future__ import annotations

import itertools
import math
import time
import tracemalloc

import numpy as np
import pytest

import policies.heterogeneous_pool as pool
from policies.heterogeneous_pool import Deployment, best_mix

TIE = 1e-6
"""Values within TIE x max(1, |best|) of a criterion's best tie (the policy's docs page)."""


def brute_force(deployments, demand_rps, budget_per_h, rooms, min_replicas):
    """The rule as documented, over every mix the pools allow: within the budget and the
    pools; at least `min_replicas` replicas if any such mix; then the most served load, the
    lowest price (if every deployment has one), the fewest GPUs, the fewest replicas
    changed, the fewest of the first deployment, of the second, ... each within TIE.
    Unpriced deployments cost nothing (there is no budget then)."""
    priced = not any(math.isnan(d.price_per_h) for d in deployments)

    def total(mix, per_replica):
        return sum(n * per_replica(d) for n, d in zip(mix, deployments, strict=True) if n)

    def price(mix):
        return total(mix, lambda d: d.price_per_h) if priced else 0.0

    def fits(mix):
        return price(mix) <= budget_per_h + 1e-9 and all(
            total(mix, lambda d, p=p: d.gpus * ((d.site, d.gpu) == p)) <= room
            for p, room in rooms.items()
        )

    ranges = [range(rooms[d.site, d.gpu] // d.gpus + 1) for d in deployments]
    mixes = [m for m in itertools.product(*ranges) if fits(m)]
    mixes = [m for m in mixes if sum(m) >= min_replicas] or mixes
    criteria = [
        lambda m: -min(total(m, lambda d: d.capacity_rps), demand_rps),
        *([price] if priced else []),
        lambda m: total(m, lambda d: d.gpus),
        lambda m: sum(abs(n - d.have) for n, d in zip(m, deployments, strict=True)),
        *[lambda m, i=i: m[i] for i in range(len(deployments))],
    ]
    for value in criteria:
        best = min(value(m) for m in mixes)
        mixes = [m for m in mixes if value(m) <= best + TIE * max(1.0, abs(best))]
    (mix,) = mixes
    return list(mix)


def random_instance(rng: np.random.Generator):
    """A few deployments on two sites and two GPU models, capacities and prices from short
    lists of round numbers (so that ties, and ties but for rounding such as 0.1 + 0.2 vs
    0.3, are frequent), sometimes without a budget and then sometimes unpriced."""
    budget = float(rng.choice([math.inf, 0.0, 0.6, 1.0, 2.0, 3.0, rng.uniform(0, 4)]))
    deployments = []
    for _ in range(int(rng.integers(1, 5))):
        price = float(rng.choice([0.1, 0.2, 0.3, 0.5, 1.0, 1.5]))
        if budget == math.inf and rng.random() < 0.2:
            price = math.nan
        deployments.append(
            Deployment(
                site=str(rng.choice(["a", "b"])),
                variant=None,
                gpu=str(rng.choice(["H100", "A100"])),
                gpus=int(rng.integers(1, 3)),
                capacity_rps=float(rng.choice([0.1, 0.2, 0.3, 1.0, 1.5, 2.0, 3.0])),
                price_per_h=price,
                have=int(rng.integers(0, 4)),
                ready=0,
            )
        )
    rooms = {(d.site, d.gpu): int(rng.integers(0, 9)) for d in deployments}
    demand = float(rng.choice([0.0, 0.3, 1.0, 2.5, 6.0, rng.uniform(0, 10)]))
    return deployments, demand, budget, rooms, int(rng.integers(0, 4))


@pytest.mark.parametrize("seed", range(8))
def test_enumeration_and_integer_programs_choose_the_brute_force_mix(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        instance = random_instance(rng)
        expected = brute_force(*instance)
        assert best_mix(*instance) == expected
        with monkeypatch.context() as m:
            m.setattr(pool, "MAX_ENUMERATED_MIXES", 0)
            assert best_mix(*instance) == expected


def test_served_loads_equal_but_for_rounding_tie_and_the_cheaper_mix_wins(monkeypatch):
    # One replica per site; the budget buys the first two or the third. 0.1 + 0.2 rps is
    # 0.30000000000000004 in floating point, 0.3 is 0.3: they serve the same, and the third
    # costs less.
    deployments = [
        Deployment(site, None, "H100", 1, capacity, price, have=0, ready=0)
        for site, capacity, price in (("a", 0.1, 0.5), ("b", 0.2, 1.5), ("c", 0.3, 1.9))
    ]
    one_each = {(d.site, d.gpu): 1 for d in deployments}
    instance = (deployments, 1.0, 2.0, one_each, 1)
    assert best_mix(*instance) == [0, 0, 1]
    monkeypatch.setattr(pool, "MAX_ENUMERATED_MIXES", 0)
    assert best_mix(*instance) == [0, 0, 1]


def test_seven_deployments_of_up_to_20_replicas_are_solved_fast_in_little_memory():
    # 21^7 = 1.8e9 mixes (enumerated, one array per count of the first: 86 million rows,
    # about 5 GB). Every replica serves 1 rps; the cheapest deployment covers the demand.
    prices = [3.0, 2.5, 2.0, 1.25, 4.0, 1.5, 3.5]
    deployments = [
        Deployment(f"site{i}", None, "H100", 1, 1.0, price, have=i % 3, ready=0)
        for i, price in enumerate(prices)
    ]
    rooms = {(d.site, d.gpu): 20 for d in deployments}
    assert math.prod(min(20, r) + 1 for r in rooms.values()) > pool.MAX_ENUMERATED_MIXES
    tracemalloc.start()
    began = time.perf_counter()
    mix = best_mix(deployments, 20.0, 100.0, rooms, 1)
    took_s = time.perf_counter() - began
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert mix == [0, 0, 0, 20, 0, 0, 0]
    assert took_s < 5.0
    assert peak_bytes < 10e6
