"""A datacenter site: GPU pools, its power level, its PUE, and idle-energy bookkeeping.

IT power = sum over pools of (installed GPUs x host overhead per GPU)
         + free GPUs x idle power + sum over running jobs of GPUs x active power.
Facility power = IT power x PUE(t), PUE constant or an hourly profile (UTC hours).

Energy and carbon of a stretch of constant IT power P over [t0, t1] are exact:
P x integral of PUE, and P x integral of PUE x carbon intensity (`facility_ci`, a step
function on the merged breakpoints of both). Free GPUs (with their host share)
accumulate "idle energy" on their own, so that site energy = sum of job energy + idle
energy can be checked independently. Pools are plain counters: a large pool costs O(1)
per allocation (no simpy.Resource).
"""

from __future__ import annotations

import math
from collections import deque
from datetime import UTC, datetime

import numpy as np

from sim.grid import CarbonSignal
from sim.hardware import GPU_CATALOG, GpuSpec
from sim.records import PowerLog
from sim.scenario import Site as SiteConfig

_DAY_S = 86400.0


class PueProfile:
    """PUE as a function of simulation time: constant, or 24 values by UTC hour of the day."""

    __slots__ = ("_hourly", "_offset_s", "_prefix", "constant")

    def __init__(self, pue: float | list[float], start: datetime):
        self.constant = pue if isinstance(pue, float | int) else None
        self._hourly = [float(x) for x in pue] if isinstance(pue, list) else [float(pue)] * 24
        start = start.astimezone(UTC)
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
        self._offset_s = (start - midnight).total_seconds()  # UTC seconds into the first day
        self._prefix = [0.0]
        for x in self._hourly:
            self._prefix.append(self._prefix[-1] + x * 3600.0)

    def value_at(self, t_s: float) -> float:
        return self._hourly[int(((t_s + self._offset_s) % _DAY_S) // 3600.0)]

    def _cumulative(self, t_s: float) -> float:
        """Integral of PUE from the first day's UTC midnight to `t_s`, s."""
        u = t_s + self._offset_s
        days, into = divmod(u, _DAY_S)
        hour = min(int(into // 3600.0), 23)
        return (
            days * self._prefix[24]
            + self._prefix[hour]
            + self._hourly[hour] * (into - hour * 3600.0)
        )

    def values_at(self, t_s: np.ndarray) -> np.ndarray:
        """PUE at each of the times `t_s` (s), vectorised `value_at`."""
        t = np.asarray(t_s, dtype=float)
        if self.constant is not None:
            return np.full(t.shape, float(self.constant))
        hours = (((t + self._offset_s) % _DAY_S) // 3600.0).astype(np.int64)
        return np.asarray(self._hourly)[hours]

    def cumulative(self, t_s: np.ndarray) -> np.ndarray:
        """Integral of PUE from time 0 to each of the times `t_s`, s (vectorised)."""
        t = np.asarray(t_s, dtype=float)
        if self.constant is not None:
            return self.constant * t
        u = t + self._offset_s
        days, into = np.divmod(u, _DAY_S)
        hour = np.minimum((into // 3600.0).astype(np.int64), 23)
        prefix = np.asarray(self._prefix)
        cum = (
            days * prefix[24]
            + prefix[hour]
            + np.asarray(self._hourly)[hour] * (into - hour * 3600.0)
        )
        return cum - self._cumulative(0.0)

    def integral(self, t0_s: float, t1_s: float) -> float:
        """Exact integral of PUE over [t0_s, t1_s], s."""
        if self.constant is not None:
            return self.constant * (t1_s - t0_s)
        return self._cumulative(t1_s) - self._cumulative(t0_s)

    def steps_between(self, t0_s: float, t1_s: float) -> list[float]:
        """Times (s) in (t0_s, t1_s) where the PUE changes; none for a constant PUE."""
        if self.constant is not None:
            return []
        first = math.floor((t0_s + self._offset_s) / 3600.0 + 1) * 3600.0 - self._offset_s
        return [
            t
            for t in np.arange(first, t1_s, 3600.0).tolist()
            if self.value_at(t) != self.value_at(t - 3600.0)
        ]

    def times(self, signal: CarbonSignal) -> CarbonSignal:
        """The step function PUE x carbon intensity over the signal's domain, g per IT kWh."""
        if self.constant is not None:
            return signal.transformed(scale=self.constant)
        t0 = float(signal.times_s[0])
        knots = np.union1d(signal.times_s, np.asarray(self.steps_between(t0, signal.end_s)))
        values = [signal.value_at(t) * self.value_at(t) for t in knots.tolist()]
        return CarbonSignal(knots, values, signal.end_s, kind=signal.kind)


class Pool:
    """The GPUs of one model at one site, in nodes of `gpus_per_node`.

    With `power_off`, nodes are tracked under perfect packing: busy GPUs occupy
    ceil(busy / gpus_per_node) nodes; the other powered nodes are idle, queued with the
    time they became idle (oldest first), and switch off after `idle_s`. A start takes the
    most recently idled nodes first, then wakes powered-off ones.
    """

    __slots__ = (
        "model",
        "spec",
        "count",
        "free",
        "idle_w",
        "host_w",
        "gpus_per_node",
        "nodes",
        "nodes_on",
        "off_w",
        "idle_since",
        "jobs",
        "_pue",
        "_idle_wh",
        "_since_s",
    )

    def __init__(
        self,
        model: str,
        count: int,
        idle_w: float,
        host_w: float,
        pue: PueProfile,
        gpus_per_node: int,
        off_w: float,
    ):
        self.model = model
        self.spec: GpuSpec = GPU_CATALOG[model]
        self.count = count
        self.free = count
        self.idle_w = idle_w
        self.host_w = host_w
        self.gpus_per_node = gpus_per_node
        self.nodes = self.nodes_on = math.ceil(count / gpus_per_node)
        self.off_w = off_w
        self.idle_since: deque[float] = deque([0.0] * self.nodes)
        """Idle-since times (s) of the powered nodes with no busy GPU, oldest first."""
        self.jobs: dict[int, None] = {}
        """The running jobs on this pool (engine indices, in start order); the engine keeps it."""
        self._pue = pue
        self._idle_wh = 0.0
        self._since_s = 0.0

    def idle_it_w(self) -> float:
        """IT power of the pool's free GPUs: powered ones at idle + host, off nodes at off_w."""
        powered = min(self.nodes_on * self.gpus_per_node, self.count)
        powered_free = powered - (self.count - self.free)
        off_nodes = self.nodes - self.nodes_on
        return powered_free * (self.idle_w + self.host_w) + off_nodes * self.off_w

    @property
    def node_w(self) -> float:
        """IT power saved by switching one idle node off, W."""
        return self.gpus_per_node * (self.idle_w + self.host_w) - self.off_w

    def busy_nodes(self, busy_gpus: int) -> int:
        return math.ceil(busy_gpus / self.gpus_per_node)

    def nodes_taken(self, gpus: int) -> int:
        """Nodes that `gpus` more busy GPUs add to the busy ones (perfect packing)."""
        busy = self.count - self.free
        return self.busy_nodes(busy + gpus) - self.busy_nodes(busy)

    def nodes_to_wake(self, gpus: int) -> int:
        """Powered-off nodes that `gpus` more busy GPUs need (idle powered nodes go first)."""
        return max(0, self.nodes_taken(gpus) - len(self.idle_since))

    def _accrue(self, now_s: float) -> None:
        self._idle_wh += self.idle_it_w() * self._pue.integral(self._since_s, now_s) / 3600.0
        self._since_s = now_s

    def idle_energy_kwh(self, now_s: float) -> float:
        """Facility energy of free GPUs with their host share, and of off nodes, kWh."""
        self._accrue(now_s)
        return self._idle_wh / 1000.0


class Site:
    """Runtime state of one site. The engine decides; the site keeps the books."""

    __slots__ = (
        "index",
        "name",
        "pue",
        "host_w_per_gpu",
        "signal",
        "facility_ci",
        "pools",
        "cap_w",
        "runtime_version",
        "it_w",
        "busy_gpus",
        "total_gpus",
        "power_off",
        "checkpoint_write_gbps",
        "checkpoint_read_gbps",
        "_log",
    )

    def __init__(
        self, index: int, config: SiteConfig, start: datetime, signal: CarbonSignal, log: PowerLog
    ):
        self.index = index
        self.name = config.name
        self.pue = PueProfile(config.pue, start)
        self.host_w_per_gpu = config.host_w_per_gpu
        self.signal = signal
        """Carbon intensity of the grid, g/kWh."""
        self.facility_ci = self.pue.times(signal)
        """PUE x carbon intensity: grams per kWh of IT energy."""
        self.power_off = config.power_off
        self.checkpoint_write_gbps = config.checkpoint_write_gbps
        self.checkpoint_read_gbps = config.checkpoint_read_gbps
        off_w = self.power_off.off_w if self.power_off else 0.0
        self.pools = [
            Pool(
                p.model,
                p.count,
                config.idle_w.get(p.model, GPU_CATALOG[p.model].idle_w),
                config.host_w_per_gpu,
                self.pue,
                config.gpus_per_node,
                off_w,
            )
            for p in config.gpus
        ]
        self.cap_w: float | None = None
        """Site-wide GPU power cap, W, for jobs without a cap of their own."""
        self.runtime_version = 0
        """Changes whenever a job that has not run yet may get another runtime estimate
        here: when the cap changes, and with power-off, at every allocation, release and
        switch-off (they change which starts need a node woken)."""
        self.total_gpus = sum(p.count for p in self.pools)
        self.busy_gpus = 0
        self.it_w = sum(p.count * (p.idle_w + p.host_w) for p in self.pools)
        self._log = log
        self.log_power(0.0)

    def facility_w(self, now_s: float) -> float:
        return self.it_w * self.pue.value_at(now_s)

    def log_power(self, now_s: float) -> None:
        """Record the power level now (after a change of IT power or of PUE)."""
        self._log.record(now_s, self.index, self.it_w, self.facility_w(now_s), self.busy_gpus)

    def pool(self, model: str) -> Pool | None:
        for p in self.pools:
            if p.model == model:
                return p
        return None

    def allocate(self, now_s: float, pool: Pool, gpus: int, active_w: float) -> int:
        """Take `gpus` free GPUs of `pool`, now drawing `active_w` W each. Returns the number
        of powered-off nodes this wakes up (the caller then holds the job for `wake_s`)."""
        pool._accrue(now_s)
        woken = 0
        if self.power_off is not None:
            self.runtime_version += 1
            woken = pool.nodes_to_wake(gpus)
            for _ in range(pool.nodes_taken(gpus) - woken):
                pool.idle_since.pop()  # the most recently idled node
            pool.nodes_on += woken
            self.it_w += woken * pool.node_w
        pool.free -= gpus
        self.busy_gpus += gpus
        self.it_w += gpus * (active_w - pool.idle_w)
        self.log_power(now_s)
        return woken

    def release(self, now_s: float, pool: Pool, gpus: int, active_w: float) -> int:
        """Return `gpus` GPUs drawing `active_w` W each to `pool`'s free GPUs; nodes left
        with no busy GPU join the idle queue; returns how many did."""
        pool._accrue(now_s)
        busy = pool.count - pool.free
        freed = 0
        if self.power_off is not None:
            self.runtime_version += 1
            freed = pool.busy_nodes(busy) - pool.busy_nodes(busy - gpus)
            pool.idle_since.extend([now_s] * freed)
        pool.free += gpus
        self.busy_gpus -= gpus
        self.it_w -= gpus * (active_w - pool.idle_w)
        self.log_power(now_s)
        return freed

    def switch_off_idle(self, now_s: float) -> int:
        """Switch off every node idle for at least `power_off.idle_s`; returns how many."""
        assert self.power_off is not None
        off = 0
        for pool in self.pools:
            pool._accrue(now_s)
            while pool.idle_since and pool.idle_since[0] + self.power_off.idle_s <= now_s:
                pool.idle_since.popleft()
                pool.nodes_on -= 1
                self.it_w -= pool.node_w
                off += 1
        if off:
            self.runtime_version += 1
            self.log_power(now_s)
        return off

    def change_power(self, now_s: float, delta_w: float) -> None:
        """A running job's draw changed by `delta_w` W (a new cap)."""
        self.it_w += delta_w
        self.log_power(now_s)

    def idle_energy_kwh(self, now_s: float) -> float:
        """Facility energy of the site's free GPUs (with their host share) so far, kWh."""
        return sum(p.idle_energy_kwh(now_s) for p in self.pools)
