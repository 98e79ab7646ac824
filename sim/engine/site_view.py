"""Read-only views of the site ledger, as policies see it through `sim.api.StateQueries.site`.

A view reads its site or pool live (nothing is copied per decision) but offers no way to
change it: its attributes are read-only properties, and what it hands out is a value or a
fresh copy (a dict, a list), never a ledger object (`sim.engine.ledger.Site`, `Pool`,
their shared GPUs, MIG slices or capacity kinds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.api import MigGpuState
    from sim.engine.ledger import Pool, Site
    from sim.models.placement import PoolPlacer

__all__ = ["PoolView", "SiteView"]


class PoolView:
    """One GPU pool of a site (the GPUs of one model), read-only."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Pool):
        self._pool = pool

    @property
    def model(self) -> str:
        """The GPU model."""
        return self._pool.model

    @property
    def count(self) -> int:
        """Installed GPUs."""
        return self._pool.count

    @property
    def free(self) -> int:
        """Free GPUs, powered on or off (a GPU fractional jobs share is not free)."""
        return self._pool.free

    @property
    def idle_w(self) -> float:
        """Idle power of one GPU, W."""
        return self._pool.idle_w

    @property
    def powered_off_gpus(self) -> int:
        """GPUs on powered-off nodes."""
        p = self._pool
        return (p.nodes - p.nodes_on) * p.gpus_per_node

    def free_by_kind(self) -> dict[str, int] | None:
        """Free GPUs by capacity kind (a copy), None if the pool is not split into kinds."""
        capacity = self._pool.capacity
        return None if capacity is None else dict(capacity.free)

    def shared_milli(self) -> list[int]:
        """The milli held on each GPU fractional jobs share, in first-fit order (a copy)."""
        return self._pool.shared.used_milli()

    def free_mig_slices(self) -> dict[str, int] | None:
        """Free MIG slices per profile (a copy), None if the pool is not partitioned."""
        mig = self._pool.mig
        return None if mig is None else mig.free_slices()

    def free_by_server(self) -> list[int] | None:
        """Free GPUs of each server, by index (a copy), None if the pool has no servers."""
        servers = self._pool.servers
        return None if servers is None else list(servers.ledger.free_by_server())

    @property
    def placer(self) -> PoolPlacer | None:
        """Where the engine puts a job's GPUs on the pool's servers (a frozen value: the
        site's rule and `max_servers`), None if the pool has no servers."""
        servers = self._pool.servers
        return None if servers is None else servers.place

    def mig_layouts(self) -> list[MigGpuState] | None:
        """Every GPU's layout, slices held and ready time (frozen records), None if the pool
        is not partitioned."""
        mig = self._pool.mig
        return None if mig is None else mig.gpus()


class SiteView:
    """One site of the fleet, read-only: its pools, host power, PUE and site-wide cap."""

    __slots__ = ("_site", "_pools", "_server_pools")

    def __init__(self, site: Site):
        self._site = site
        self._pools = tuple(PoolView(p) for p in site.pools)
        self._server_pools = tuple(p for p in self._pools if p.placer is not None)

    @property
    def pools(self) -> tuple[PoolView, ...]:
        """The site's GPU pools, in the scenario's order."""
        return self._pools

    @property
    def server_pools(self) -> tuple[PoolView, ...]:
        """The site's pools declared as servers, in the scenario's order (empty: none)."""
        return self._server_pools

    @property
    def name(self) -> str:
        return self._site.name

    def pool(self, model: str) -> PoolView | None:
        """The pool of `model` GPUs, None if the site has none."""
        return next((p for p in self.pools if p.model == model), None)

    @property
    def host_w_per_gpu(self) -> float:
        """Host power (CPU, memory, network) per installed GPU, W, drawn always."""
        return self._site.host_w_per_gpu

    @property
    def cap_w(self) -> float | None:
        """The site-wide GPU cap set with `SetCap(site, watts)`, W, or None."""
        return self._site.cap_w

    def pue_at(self, t_s: float) -> float:
        """The site's PUE at `t_s`, s since the scenario start."""
        return self._site.pue.value_at(t_s)
