"""Where a gang job's GPUs go among a pool's servers, and how fast it runs there.

A pool is `len(free)` servers of `gpus_per_server` GPUs each; `free[s]` is the free GPUs of
server `s`. A placement rule is a pure function of that vector: it returns an `Assignment`
(the servers the job takes and how many GPUs of each, by server index) or None. Every rule
works the same way and differs only in which server it prefers (docs/placement.md):

1. a job of at least `gpus_per_server` GPUs first takes whole free servers (the fewest
   servers a gang can have, lowest index first), as many as it fills;
2. then, while GPUs are left to place: if some server not yet taken can hold all of them,
   the rule's choice among those servers takes them; else the rule's next server in its
   spill order gives all its free GPUs and the loop goes on.

| rule             | one server that holds the rest | spill order (no server holds the rest) |
|------------------|--------------------------------|----------------------------------------|
| `first_fit`      | lowest index                   | lowest index                           |
| `best_fit`       | fewest free (pack)             | fewest free (fill the fragments)       |
| `spread`         | most free                      | most free                              |
| `fewest_servers` | fewest free (pack)             | most free (fewest servers)             |

Ties go to the lower server index, so a rule's answer depends on the vector alone. A job that
some server can hold is placed on one server by every rule, `spread` included: `spread`
spreads jobs across servers (Kubernetes' `LeastAllocated` scoring of whole pods), never one
job's GPUs, which would only buy inter-node traffic. A rule never spans more than
`max_servers` servers: if its own choice would, it takes `fewest_servers`' assignment (the
fewest servers any placement needs), and None if even that spans more. So with a limit, a
rule returns None exactly when the free GPUs are too few, or too scattered to fit on
`max_servers` servers (`sim.engine.servers.FragmentationMeter` counts the waits of the
latter). Each rule is O(servers x servers taken).

A job over several servers computes at the scaling model's speed for its GPUs laid out in
nodes of the most GPUs it holds on one server (`placed_scaling`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal

from sim.models import scaling

__all__ = [
    "RULES",
    "Assignment",
    "MaxServers",
    "PoolPlacer",
    "Rule",
    "best_fit",
    "fewest_servers",
    "first_fit",
    "placed_scaling",
    "server_limit",
    "servers_needed",
    "spread",
]

Assignment = tuple[tuple[int, int], ...]
"""The (server index, GPUs) pairs a job holds, by increasing server index, each GPUs >= 1."""

_Key = Callable[[int, int], tuple[int, int]]
"""The order of preference of a server: key(free GPUs, index), the least first."""

Rule = Callable[[Sequence[int], int, int, int | None], Assignment | None]
"""rule(free GPUs by server, the job's GPUs, GPUs per server, max_servers) -> Assignment."""


def _by_index(free: int, s: int) -> tuple[int, int]:
    return (s, 0)


def _fewest_free(free: int, s: int) -> tuple[int, int]:
    return (free, s)


def _most_free(free: int, s: int) -> tuple[int, int]:
    return (-free, s)


def _check(free: Sequence[int], gpus: int, gpus_per_server: int, max_servers: int | None) -> None:
    if gpus < 1 or gpus_per_server < 1 or (max_servers is not None and max_servers < 1):
        raise ValueError(
            f"placement needs gpus >= 1, gpus_per_server >= 1 and max_servers >= 1 (or None),"
            f" got {gpus}, {gpus_per_server} and {max_servers}"
        )
    if any(not 0 <= f <= gpus_per_server for f in free):
        raise ValueError(f"free GPUs by server must lie in [0, {gpus_per_server}], got {free}")


def _greedy(
    free: Sequence[int], gpus: int, gpus_per_server: int, pick: _Key, spill: _Key
) -> Assignment | None:
    """Steps 1 and 2 of the module's rules with the preferences `pick` and `spill`."""
    if sum(free) < gpus:
        return None
    taken: dict[int, int] = {}
    whole = [s for s, f in enumerate(free) if f == gpus_per_server]
    for s in whole[: gpus // gpus_per_server]:
        taken[s] = gpus_per_server
    rest = gpus - gpus_per_server * len(taken)
    while rest > 0:
        open_ = [(f, s) for s, f in enumerate(free) if f > 0 and s not in taken]
        holds = [(f, s) for f, s in open_ if f >= rest]
        if holds:
            taken[min(holds, key=lambda fs: pick(*fs))[1]] = rest
            break
        f, s = min(open_, key=lambda fs: spill(*fs))
        taken[s] = f
        rest -= f
    return tuple(sorted(taken.items()))


def _rule(
    free: Sequence[int],
    gpus: int,
    gpus_per_server: int,
    max_servers: int | None,
    pick: _Key,
    spill: _Key,
) -> Assignment | None:
    _check(free, gpus, gpus_per_server, max_servers)
    placed = _greedy(free, gpus, gpus_per_server, pick, spill)
    if placed is None or max_servers is None or len(placed) <= max_servers:
        return placed
    fewest = _greedy(free, gpus, gpus_per_server, _fewest_free, _most_free)
    assert fewest is not None
    return fewest if len(fewest) <= max_servers else None


def first_fit(
    free: Sequence[int], gpus: int, gpus_per_server: int, max_servers: int | None = None
) -> Assignment | None:
    """`gpus` GPUs on the lowest-indexed servers that take them (the module's rules)."""
    return _rule(free, gpus, gpus_per_server, max_servers, _by_index, _by_index)


def best_fit(
    free: Sequence[int], gpus: int, gpus_per_server: int, max_servers: int | None = None
) -> Assignment | None:
    """`gpus` GPUs packed: on the server with the fewest free GPUs that holds them; a job no
    server holds fills the smallest fragments first (the module's rules)."""
    return _rule(free, gpus, gpus_per_server, max_servers, _fewest_free, _fewest_free)


def spread(
    free: Sequence[int], gpus: int, gpus_per_server: int, max_servers: int | None = None
) -> Assignment | None:
    """`gpus` GPUs on the server with the most free GPUs (jobs spread across servers; a
    job no server holds takes the most free first) (the module's rules)."""
    return _rule(free, gpus, gpus_per_server, max_servers, _most_free, _most_free)


def fewest_servers(
    free: Sequence[int], gpus: int, gpus_per_server: int, max_servers: int | None = None
) -> Assignment | None:
    """Topology-aware: `gpus` GPUs on the fewest servers any placement needs (the servers
    with the most free GPUs first), the last of them packed (fewest free that holds the
    rest) (the module's rules)."""
    return _rule(free, gpus, gpus_per_server, max_servers, _fewest_free, _most_free)


RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "first_fit": first_fit,
        "best_fit": best_fit,
        "spread": spread,
        "fewest_servers": fewest_servers,
    }
)
"""The placement rules by name."""


MaxServers = int | Literal["strict", "unlimited"]
"""A site's `max_servers` key: a number of servers, "strict" (locality: the fewest that can
hold the job) or "unlimited"."""


def server_limit(max_servers: MaxServers, gpus: int, gpus_per_server: int) -> int | None:
    """The servers a job of `gpus` GPUs may span under `max_servers` (None: any number);
    "strict" is ceil(gpus / gpus_per_server), the fewest servers that can hold it."""
    if max_servers == "strict":
        return math.ceil(gpus / gpus_per_server)
    return None if max_servers == "unlimited" else max_servers


@dataclasses.dataclass(frozen=True, slots=True)
class PoolPlacer:
    """A pool's placement: the rule `rule` (a name of `RULES`) on servers of
    `gpus_per_server` GPUs under the site's `max_servers`. Called as place(free GPUs by
    server, the job's GPUs) -> its assignment, or None (the job does not fit now)."""

    rule: str
    gpus_per_server: int
    max_servers: MaxServers = "strict"

    def __call__(self, free: Sequence[int], gpus: int) -> Assignment | None:
        limit = server_limit(self.max_servers, gpus, self.gpus_per_server)
        return RULES[self.rule](free, gpus, self.gpus_per_server, limit)


def servers_needed(assignment: Assignment) -> int:
    """The servers `assignment` spans (the nodes its job's collectives cross)."""
    return len(assignment)


def placed_scaling(
    profile: str,
    gpu_model: str,
    assignment: Assignment,
    scheme: str = "data",
    node: scaling.NodeShape | None = None,
) -> scaling.ScalingPoint:
    """The scaling point (`sim.models.scaling.scaling`) of a job of `profile` holding the GPUs
    of `assignment` on servers of `gpu_model` with the links of `node` (None: the model's
    catalog node): nodes of the most GPUs it holds on one server, as many as its servers.

    The hierarchical all-reduce then has the job's largest intra-server ring and a ring over
    all its servers, so an uneven split such as 4 + 2 + 2 is 3 nodes of at most 4. Tensor
    parallelism over servers needs equal shares (ValueError from the scaling model otherwise).
    """
    shape = scaling.default_node(gpu_model) if node is None else node
    gpus = sum(g for _, g in assignment)
    per_server = max(g for _, g in assignment)
    laid_out = dataclasses.replace(shape, gpus_per_node=per_server)
    return scaling.scaling(profile, gpu_model, gpus, scheme, laid_out, len(assignment))
