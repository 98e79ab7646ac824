"""Hardware lifetimes: a pool's embodied carbon as a run charges it (docs/servers.md,
"Lifetimes").

Straight-line amortisation: a part of embodied carbon E kgCO2e and lifetime L years
charges E / L per year while the simulated time lies within [purchase, purchase + L),
purchase being 1 January of the pool's `purchase_year`; after that it is fully amortised
and charges nothing, however long it keeps running. A run starting before the purchase
year is refused when the scenario is read (`Scenario`). A pool without `purchase_year`
has no window: every simulated second charges, as before lifetimes existed.

The lifetime is the pool's `lifetime_years` for all its parts, else the catalog's: for a
pool of GPUs the GPU's `service_life_years` (GPU and host share; years of 8760 h, as
`GpuSpec.embodied_kg_per_gpu_h`), for a pool of servers each component's
(`sim.models.servers.lifetimes_years`; Julian years, as `sim.energy.embodied`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from sim.config.sites import GpuPool
from sim.energy.embodied import SECONDS_PER_YEAR
from sim.engine.servers import server_embodied_kg_by_group, server_embodied_kg_per_gpu_h
from sim.models.hardware import GPU_CATALOG, HOURS_PER_YEAR
from sim.models.servers import COMPONENTS, SERVER_CATALOG, embodied_kg, lifetimes_years

__all__ = [
    "EmbodiedRate",
    "charged_s",
    "pool_embodied_rate",
    "pool_installed_kg",
    "pool_server_kg_by_group",
    "pool_whole_kg",
]

Number = float | np.ndarray


def charged_s(t0_s: Number, t1_s: Number, until_s: float) -> Number:
    """Seconds of [t0_s, t1_s) (s since the run's start; floats or arrays) before
    `until_s` (inf: all of them)."""
    if until_s == math.inf:
        return t1_s - t0_s
    return np.minimum(t1_s, until_s) - np.minimum(t0_s, until_s)


@dataclass(frozen=True, slots=True)
class EmbodiedRate:
    """A pool's allocated embodied carbon: pieces (kgCO2e per GPU-hour, until_s), each
    charged while the simulated time (s since the run's start) is before its until_s
    (inf: always). One piece per lifetime among the pool's parts."""

    pieces: tuple[tuple[float, float], ...]

    def kg(self, gpu_s: Number, t0_s: Number, t1_s: Number) -> Number:
        """The embodied carbon, kgCO2e, that `gpu_s` GPU-seconds spread evenly over
        [t0_s, t1_s) carry (floats or arrays of one shape)."""
        if len(self.pieces) == 1 and self.pieces[0][1] == math.inf:  # no lifetime window
            return gpu_s / 3600.0 * self.pieces[0][0]
        total: Number = 0.0
        for kg_per_gpu_h, until_s in self.pieces:
            share = gpu_s
            if until_s != math.inf:
                span = np.asarray(t1_s - t0_s, dtype=float)
                within = charged_s(t0_s, t1_s, until_s)
                share = gpu_s * np.divide(within, span, out=np.zeros_like(span), where=span > 0)
            total = total + share / 3600.0 * kg_per_gpu_h
        return total


def _purchase_offset_s(pool: GpuPool, start: datetime) -> float | None:
    """Seconds from `start` to 1 January of the pool's purchase year, UTC (<= 0 in a valid
    scenario); None without `purchase_year`."""
    if pool.purchase_year is None:
        return None
    return (datetime(pool.purchase_year, 1, 1, tzinfo=UTC) - start).total_seconds()


def _until_s(offset_s: float | None, lifetime_s: float) -> float:
    return math.inf if offset_s is None else offset_s + lifetime_s


def _server_lifetimes(pool: GpuPool) -> dict[str, float]:
    assert pool.servers is not None
    if pool.lifetime_years is None:
        return lifetimes_years(SERVER_CATALOG[pool.servers.model])
    return dict.fromkeys(COMPONENTS, pool.lifetime_years)


def pool_embodied_rate(pool: GpuPool, start: datetime) -> EmbodiedRate:
    """The allocated embodied carbon of `pool` in a run starting at `start`."""
    offset_s = _purchase_offset_s(pool, start)
    if pool.servers is None:
        spec = GPU_CATALOG[pool.model]
        if pool.lifetime_years is None:
            years, rate = spec.service_life_years, spec.embodied_kg_per_gpu_h
        else:
            years = pool.lifetime_years
            rate = (spec.embodied_kg + spec.host_embodied_kg) / (years * HOURS_PER_YEAR)
        return EmbodiedRate(((rate, _until_s(offset_s, years * HOURS_PER_YEAR * 3600.0)),))
    model = pool.servers.model
    lifetimes = _server_lifetimes(pool)
    if offset_s is None:
        return EmbodiedRate(((server_embodied_kg_per_gpu_h(model, lifetimes), math.inf),))
    pieces = []
    for years in sorted(set(lifetimes.values())):
        own = [c for c, y in lifetimes.items() if y == years]
        rate = server_embodied_kg_per_gpu_h(model, lifetimes, own)
        pieces.append((rate, _until_s(offset_s, years * SECONDS_PER_YEAR)))
    return EmbodiedRate(tuple(pieces))


def pool_server_kg_by_group(
    pool: GpuPool, start: datetime, t0_s: float, t1_s: float
) -> dict[str, float]:
    """The installed embodied carbon, kgCO2e, of a pool of servers over [t0_s, t1_s) s
    after `start`, by group of `EMBODIED_GROUPS`: each component amortised over its
    lifetime, charged only within its lifetime window."""
    assert pool.servers is not None
    lifetimes = _server_lifetimes(pool)
    offset_s = _purchase_offset_s(pool, start)
    durations_s = {
        c: float(charged_s(t0_s, t1_s, _until_s(offset_s, years * SECONDS_PER_YEAR)))
        for c, years in lifetimes.items()
    }
    return server_embodied_kg_by_group(
        pool.servers.model, pool.servers.count, durations_s, lifetimes
    )


def pool_installed_kg(pool: GpuPool, start: datetime, t0_s: float, t1_s: float) -> float:
    """The installed embodied carbon, kgCO2e, of the whole `pool` (used or not) over
    [t0_s, t1_s) s after `start`, within its lifetime window."""
    if pool.servers is not None:
        return sum(pool_server_kg_by_group(pool, start, t0_s, t1_s).values())
    return float(pool_embodied_rate(pool, start).kg(pool.count * (t1_s - t0_s), t0_s, t1_s))


def pool_whole_kg(pool: GpuPool) -> float:
    """All the embodied carbon of `pool`'s hardware, kgCO2e: what buying it emits."""
    if pool.servers is not None:
        return pool.servers.count * embodied_kg(SERVER_CATALOG[pool.servers.model])
    spec = GPU_CATALOG[pool.model]
    return pool.count * (spec.embodied_kg + spec.host_embodied_kg)
