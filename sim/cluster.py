"""A datacenter site: GPU pools, the site's IT power level, and idle-energy bookkeeping.

IT power = sum over pools of (installed GPUs x host overhead per GPU)
         + free GPUs x idle power + sum over running jobs of GPUs x active power.
Facility power = IT power x PUE.

Free GPUs (with their host share) accumulate "idle energy" on their own, so that
site energy = sum of job energy + idle energy can be checked independently.
Pools are plain counters: a large pool costs O(1) per allocation (no simpy.Resource).
"""

from __future__ import annotations

from sim.grid import CarbonSignal
from sim.hardware import GPU_CATALOG, GpuSpec
from sim.records import PowerLog
from sim.scenario import Site as SiteConfig


class Pool:
    """The GPUs of one model at one site."""

    __slots__ = ("model", "spec", "count", "free", "idle_w", "host_w", "_idle_ws", "_since_s")

    def __init__(self, model: str, count: int, idle_w: float, host_w: float):
        self.model = model
        self.spec: GpuSpec = GPU_CATALOG[model]
        self.count = count
        self.free = count
        self.idle_w = idle_w
        self.host_w = host_w
        self._idle_ws = 0.0
        self._since_s = 0.0

    def _accrue(self, now_s: float) -> None:
        self._idle_ws += self.free * (self.idle_w + self.host_w) * (now_s - self._since_s)
        self._since_s = now_s

    def idle_energy_it_kwh(self, now_s: float) -> float:
        """IT energy of free GPUs and their host share from 0 to `now_s`, kWh."""
        self._accrue(now_s)
        return self._idle_ws / 3.6e6


class Site:
    """Runtime state of one site. The engine decides; the site keeps the books."""

    __slots__ = (
        "index",
        "name",
        "pue",
        "host_w_per_gpu",
        "signal",
        "pools",
        "cap_w",
        "it_w",
        "busy_gpus",
        "total_gpus",
        "_log",
    )

    def __init__(self, index: int, config: SiteConfig, signal: CarbonSignal, log: PowerLog):
        self.index = index
        self.name = config.name
        self.pue = config.pue
        self.host_w_per_gpu = config.host_w_per_gpu
        self.signal = signal
        self.pools = [
            Pool(
                p.model,
                p.count,
                config.idle_w.get(p.model, GPU_CATALOG[p.model].idle_w),
                config.host_w_per_gpu,
            )
            for p in config.gpus
        ]
        self.cap_w: float | None = None
        """Site-wide GPU power cap, W, for jobs without a cap of their own."""
        self.total_gpus = sum(p.count for p in self.pools)
        self.busy_gpus = 0
        self.it_w = sum(p.count * (p.idle_w + p.host_w) for p in self.pools)
        self._log = log
        log.record(0.0, index, self.it_w, 0)

    def pool(self, model: str) -> Pool | None:
        for p in self.pools:
            if p.model == model:
                return p
        return None

    def allocate(self, now_s: float, pool: Pool, gpus: int, active_w: float) -> None:
        """Take `gpus` free GPUs of `pool`, now drawing `active_w` W each."""
        pool._accrue(now_s)
        pool.free -= gpus
        self.busy_gpus += gpus
        self.it_w += gpus * (active_w - pool.idle_w)
        self._log.record(now_s, self.index, self.it_w, self.busy_gpus)

    def release(self, now_s: float, pool: Pool, gpus: int, active_w: float) -> None:
        """Return `gpus` GPUs drawing `active_w` W each to `pool`'s free GPUs."""
        pool._accrue(now_s)
        pool.free += gpus
        self.busy_gpus -= gpus
        self.it_w -= gpus * (active_w - pool.idle_w)
        self._log.record(now_s, self.index, self.it_w, self.busy_gpus)

    def change_power(self, now_s: float, delta_w: float) -> None:
        """A running job's draw changed by `delta_w` W (a new cap)."""
        self.it_w += delta_w
        self._log.record(now_s, self.index, self.it_w, self.busy_gpus)

    def idle_energy_it_kwh(self, now_s: float) -> float:
        return sum(p.idle_energy_it_kwh(now_s) for p in self.pools)
