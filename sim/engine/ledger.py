"""A datacenter site: GPU pools, its power level, its PUE, and idle-energy bookkeeping.

IT power = sum over pools of (installed GPUs x host overhead per GPU)
         + free GPUs x idle power + sum over running jobs of GPUs x active power,
where a fractional job (`sim.models.sharing`) counts its share of one GPU and a job on a MIG slice
(`sim.models.mig`) its slice's SM share of one, and the part of a shared or partitioned GPU that
no job holds draws idle power.
Facility power = IT power x PUE(t), PUE constant or an hourly profile (UTC hours).

Energy and carbon of a stretch of constant IT power P over [t0, t1] are exact:
P x integral of PUE, and P x integral of PUE x carbon intensity (`facility_ci`, a step
function on the merged breakpoints of both). Free GPUs (with their host share)
accumulate "idle energy" on their own (with the unheld shares of shared GPUs), so that
site energy = sum of job energy + idle energy can be checked independently. Pools are
plain counters: a large pool costs O(1) per allocation (no simpy.Resource).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sim.api import MigGpuState
from sim.config.sites import PoolServers
from sim.config.sites import Site as SiteConfig
from sim.engine.lifetimes import EmbodiedRate, pool_embodied_rate
from sim.engine.server_power import ServerPower
from sim.engine.servers import ServerBooks
from sim.grid import CarbonSignal
from sim.grid.pue import PueProfile
from sim.models import mig
from sim.models.hardware import GPU_CATALOG, GpuSpec
from sim.models.placement import PoolPlacer
from sim.models.servers import SERVER_CATALOG
from sim.models.sharing import MILLI_PER_GPU, share
from sim.util.records import PowerLog


class SharedGpus:
    """The GPUs of one pool that fractional jobs share (`sim.models.sharing`): per GPU, its jobs and
    the milli-GPUs each holds. A GPU is here from the start of its first job to the end of
    its last one (busy in the pool's books meanwhile); jobs are placed first fit, in the
    order the GPUs became shared."""

    __slots__ = ("_jobs", "_used", "_ready_s", "_gpu_of", "_used_total")

    def __init__(self) -> None:
        self._jobs: list[dict[int, int]] = []
        """Per shared GPU: its jobs (engine indices) and the milli each holds."""
        self._used: list[int] = []
        """Per shared GPU: the milli its jobs hold."""
        self._ready_s: list[float] = []
        """Per shared GPU: when it can compute (its node up), s."""
        self._gpu_of: dict[int, int] = {}
        """Per job here: the index of its GPU in `_jobs`."""
        self._used_total = 0

    def __len__(self) -> int:
        """The number of shared GPUs."""
        return len(self._jobs)

    def __contains__(self, j: object) -> bool:
        return j in self._gpu_of

    def used_milli(self) -> list[int]:
        """The milli held on each shared GPU, in first-fit order."""
        return list(self._used)

    def spare_milli(self) -> int:
        """Milli of the shared GPUs that no job holds (idle power)."""
        return len(self._jobs) * MILLI_PER_GPU - self._used_total

    def fit(self, milli: int) -> int | None:
        """The shared GPU a job of `milli` would join (first fit); None: none has room."""
        room = MILLI_PER_GPU - milli
        return next((g for g, used in enumerate(self._used) if used <= room), None)

    def ready_s(self, g: int) -> float:
        """When shared GPU `g` can compute (after the boot of the node it woke), s."""
        return self._ready_s[g]

    def milli_of(self, j: int) -> int:
        return self._jobs[self._gpu_of[j]][j]

    def share_of(self, j: int) -> float:
        """The share of its GPU that job `j` holds (its milli / 1000)."""
        return share(self.milli_of(j))

    def others_milli(self, j: int) -> int:
        """Milli held by the jobs co-located with `j`."""
        g = self._gpu_of[j]
        return self._used[g] - self._jobs[g][j]

    def co_located(self, j: int) -> list[int]:
        """The other jobs on `j`'s GPU."""
        return [k for k in self._jobs[self._gpu_of[j]] if k != j]

    def join(self, j: int, milli: int, ready_s: float = 0.0) -> bool:
        """Place job `j` of `milli` first fit; True if it opened a new shared GPU (taken from
        the pool's free GPUs by the caller), which can compute from `ready_s`."""
        g = self.fit(milli)
        opened = g is None
        if g is None:
            g = len(self._jobs)
            self._jobs.append({})
            self._used.append(0)
            self._ready_s.append(ready_s)
        self._jobs[g][j] = milli
        self._used[g] += milli
        self._used_total += milli
        self._gpu_of[j] = g
        return opened

    def leave(self, j: int) -> bool:
        """Job `j` leaves its GPU; True if no job is left on it (it is free again)."""
        g = self._gpu_of.pop(j)
        milli = self._jobs[g].pop(j)
        self._used[g] -= milli
        self._used_total -= milli
        if self._jobs[g]:
            return False
        del self._jobs[g], self._used[g], self._ready_s[g]
        for k, h in self._gpu_of.items():
            if h > g:
                self._gpu_of[k] = h - 1
        return True


@dataclass(frozen=True, slots=True)
class _Layout:
    """One MIG layout of a GPU model, as the ledger reads it."""

    placement: mig.Placement
    slots: dict[str, list[int]]
    """Per profile: the indices of its slices in `placement.slices`."""
    sm_count: list[int]
    """Per slice: its SMs."""

    @classmethod
    def of(cls, gpu_model: str, profiles: Sequence[str]) -> _Layout:
        """The layout of `profiles` (ValueError from `sim.models.mig.validate_layout` if
        invalid)."""
        placement = mig.validate_layout(gpu_model, profiles)
        gpu = mig.mig_gpu(gpu_model)
        slots: dict[str, list[int]] = {}
        for i, s in enumerate(placement.slices):
            slots.setdefault(s.profile, []).append(i)
        sm_count = [gpu.profiles[s.profile].sm_count for s in placement.slices]
        return cls(placement, slots, sm_count)


class MigSlices:
    """The slices of one partitioned pool (`sim.models.mig`, NVIDIA MIG): per GPU (index 0 to
    `count - 1`) its layout, and which holder holds which of its slices.

    Every GPU starts with the pool's layout (the scenario's `mig`); `repartition` gives free
    GPUs another one, and they offer no slice until `reconfigured` (after
    `sim.models.mig.reconfiguration_s`). A GPU is busy in the pool's books from the start of its
    first held slice to the end of its last one's, and while it is reconfigured. A holder
    takes a free slice of its profile on the first busy GPU that has one (in the order they
    became busy), else on the lowest-index free GPU whose layout has one.

    Holders are opaque hashable keys: a job is its engine index (an int). Anything else that
    holds a slice, such as an LLM replica, passes a key no job uses (e.g. `("replica",
    service, site, k)`) to `Site.allocate_part` with `active_w=pool.idle_w` (the slice is
    held at idle power; what the replica draws above idle is the caller's) and frees it with
    `Site.release_part`, exactly as a job does.
    """

    __slots__ = (
        "gpu_model",
        "count",
        "repartitions",
        "_sm_full",
        "_kinds",
        "_layout",
        "_held",
        "_busy",
        "_ready_s",
        "_available_s",
        "_reconfiguring",
        "_idle",
        "_gpus_of",
        "_where",
        "_held_sm",
    )

    def __init__(self, gpu_model: str, layout: Sequence[str], count: int):
        self.gpu_model = gpu_model
        self.count = count
        """GPUs of the pool."""
        self.repartitions = 0
        """GPUs reconfigured so far (one per GPU a `repartition` changed)."""
        self._sm_full = mig.mig_gpu(gpu_model).sm_full
        first = _Layout.of(gpu_model, layout)
        key = first.placement.profiles
        self._kinds: dict[tuple[str, ...], _Layout] = {key: first}
        """The layouts seen so far, by their profiles (in the order first seen)."""
        self._layout: list[tuple[str, ...]] = [key] * count
        """Per GPU: its layout."""
        self._held: list[dict[int, Hashable]] = [{} for _ in range(count)]
        """Per GPU: the holder of each held slice (by its index in the layout)."""
        self._busy: dict[int, None] = {}
        """The GPUs with a slice held, in the order they became busy."""
        self._ready_s: dict[int, float] = {}
        """Per busy GPU: when it can compute (its node up), s."""
        self._available_s = [0.0] * count
        """Per GPU: when its layout became (or becomes) usable, s."""
        self._reconfiguring: dict[int, None] = {}
        """The GPUs being reconfigured (busy in the pool's books, no slice can be taken)."""
        self._idle: dict[tuple[str, ...], list[int]] = {key: list(range(count))}
        """Per layout: heap of its GPUs that nothing holds and are not reconfigured."""
        self._gpus_of: dict[tuple[str, ...], int] = {key: count}
        """Per layout: the GPUs that have it."""
        self._where: dict[Hashable, tuple[int, int]] = {}
        """Per holder: its GPU and its slice's index in the GPU's layout."""
        self._held_sm = 0
        """SMs of the held slices, over all GPUs."""

    def __len__(self) -> int:
        """The number of busy GPUs (a slice held, or being reconfigured)."""
        return len(self._busy) + len(self._reconfiguring)

    def __contains__(self, holder: object) -> bool:
        return holder in self._where

    def has(self, profile: str) -> bool:
        """True if some GPU's layout (or the one it is being reconfigured to) has a slice of
        `profile`."""
        return any(n and profile in self._kinds[k].slots for k, n in self._gpus_of.items())

    def _free_slot(self, g: int, profile: str) -> int | None:
        """The first free slice of `profile` on GPU `g` (its index in the layout), or None."""
        held = self._held[g]
        slots = self._kinds[self._layout[g]].slots.get(profile, ())
        return next((i for i in slots if i not in held), None)

    def fit(self, profile: str) -> int | None:
        """The busy GPU (its index) whose free slice of `profile` a holder would take (first
        fit); None: no busy GPU has one (the holder takes a free GPU, if any has one)."""
        return next((g for g in self._busy if self._free_slot(g, profile) is not None), None)

    def _idle_gpu(self, profile: str) -> int | None:
        """The lowest-index free GPU whose layout has `profile`, or None."""
        heads = [h[0] for k, h in self._idle.items() if h and profile in self._kinds[k].slots]
        return min(heads, default=None)

    def fits(self, profile: str) -> bool:
        """True if a holder of `profile` can take a slice now."""
        return self.fit(profile) is not None or self._idle_gpu(profile) is not None

    def ready_s(self, g: int) -> float:
        """When busy GPU `g` can compute (after the boot of the node it woke), s."""
        return self._ready_s[g]

    def free_slices(self) -> dict[str, int]:
        """Free slices per profile of the GPUs' layouts (0 for a profile only GPUs being
        reconfigured have), over the whole pool: the busy GPUs' and the free GPUs'."""
        free: dict[str, int] = {}
        for k, n in self._gpus_of.items():
            if n:
                for p, slots in self._kinds[k].slots.items():
                    free[p] = free.get(p, 0) + len(self._idle.get(k, ())) * len(slots)
        for g in self._busy:
            held = self._held[g]
            for p, slots in self._kinds[self._layout[g]].slots.items():
                free[p] += sum(i not in held for i in slots)
        return free

    def gpus(self) -> list[MigGpuState]:
        """Every GPU of the pool, by index: its layout, slices held and when it is usable."""
        return [
            MigGpuState(self._layout[g], len(self._held[g]), self._available_s[g])
            for g in range(self.count)
        ]

    def join(self, holder: Hashable, profile: str, ready_s: float = 0.0) -> bool:
        """`holder` takes a free slice of `profile` (first fit); True if it is the first on
        its GPU (taken from the pool's unheld GPUs by the caller), which can compute from
        `ready_s`. ValueError if no slice of `profile` is free (the caller checks `fits`)."""
        g = self.fit(profile)
        opened = g is None
        if g is None:
            g = self._idle_gpu(profile)
            if g is None:
                raise ValueError(f"no free {profile} slice (free: {self.free_slices()})")
            heapq.heappop(self._idle[self._layout[g]])
            self._busy[g] = None
            self._ready_s[g] = ready_s
        i = self._free_slot(g, profile)
        assert i is not None
        self._held[g][i] = holder
        self._where[holder] = (g, i)
        self._held_sm += self._kinds[self._layout[g]].sm_count[i]
        return opened

    def _sm_of(self, holder: Hashable) -> int:
        g, i = self._where[holder]
        return self._kinds[self._layout[g]].sm_count[i]

    def share_of(self, holder: Hashable) -> float:
        """The SM share of the GPU that `holder`'s slice holds (`sim.models.mig.sm_share`)."""
        return self._sm_of(holder) / self._sm_full

    def leave(self, holder: Hashable) -> bool:
        """`holder` leaves its slice; True if no slice of its GPU is held (it is free
        again)."""
        self._held_sm -= self._sm_of(holder)
        g, i = self._where.pop(holder)
        held = self._held[g]
        del held[i]
        if held:
            return False
        del self._busy[g], self._ready_s[g]
        heapq.heappush(self._idle[self._layout[g]], g)
        return True

    def spare_gpus(self) -> float:
        """GPUs' worth of the busy GPUs that no slice holds (idle power): their SMs outside
        held slices, over the whole GPU's SMs (MIG mode leaves some SMs in no slice), and the
        GPUs being reconfigured."""
        return len(self) - self._held_sm / self._sm_full

    def repartition(self, profiles: Sequence[str], gpus: int, ready_s: float) -> list[int]:
        """Give `gpus` free GPUs with another layout the layout `profiles`, usable from
        `ready_s` (s); the lowest-index ones. Returns their indices (busy in the pool's books
        until `reconfigured`). ValueError with one line, before anything changes, if the
        layout is invalid or empty or too few GPUs are free with another layout."""
        if not profiles:
            raise ValueError("a layout lists at least one profile")
        kind = _Layout.of(self.gpu_model, profiles)
        key = kind.placement.profiles
        candidates = sorted(g for k, heap in self._idle.items() if k != key for g in heap)
        if len(candidates) < gpus:
            same = len(self._idle.get(key, ()))
            raise ValueError(
                f"needs {gpus} free {self.gpu_model} GPU(s) with another layout, "
                f"{len(candidates)} of {self.count} are ({len(self._busy)} hold a slice and "
                f"must be drained first, {len(self._reconfiguring)} are being reconfigured, "
                f"{same} free ones already have it)"
            )
        self._kinds.setdefault(key, kind)
        self._idle.setdefault(key, [])
        chosen = candidates[:gpus]
        for g in chosen:
            old = self._layout[g]
            self._idle[old].remove(g)
            heapq.heapify(self._idle[old])
            self._gpus_of[old] -= 1
            self._gpus_of[key] = self._gpus_of.get(key, 0) + 1
            self._layout[g] = key
            self._available_s[g] = ready_s
            self._reconfiguring[g] = None
        self.repartitions += gpus
        return chosen

    def reconfigured(self, g: int) -> None:
        """GPU `g` has its new layout: free, its slices can be taken."""
        del self._reconfiguring[g]
        heapq.heappush(self._idle[self._layout[g]], g)


class GpuParts(Protocol):
    """A ledger of GPUs whose parts jobs hold: `SharedGpus` (milli; holders are job indices)
    or `MigSlices` (a profile; holders are hashable keys, job indices for jobs)."""

    def fit(self, need: Any) -> int | None: ...

    def ready_s(self, g: int) -> float: ...

    def join(self, j: Any, need: Any, ready_s: float = 0.0) -> bool: ...

    def leave(self, j: Any) -> bool: ...

    def share_of(self, j: Any) -> float: ...


CAPACITY_KINDS = ("reserved", "on_demand", "spot")
"""The kinds of capacity a pool's GPUs may be (docs/spot-capacity.md), in the order a job
takes them unless its policy says otherwise (`sim.engine.spot`): reserved first (paid for
anyway), then on-demand, spot last (it may be evicted)."""


class CapacityKinds:
    """The GPUs of a pool split into reserved, on-demand and spot capacity: how many of each
    kind are free, which kinds each job holds, and the spot GPUs evicted (out of service
    until they are restored). Whole-GPU jobs only: its free GPUs add up to the pool's."""

    __slots__ = ("total", "free", "held", "withdrawn")

    def __init__(self, reserved: int, on_demand: int, spot: int):
        self.total = {"reserved": reserved, "on_demand": on_demand, "spot": spot}
        """GPUs of each kind installed."""
        self.free = dict(self.total)
        """GPUs of each kind nothing holds and not evicted."""
        self.held: dict[int, list[dict[str, int]]] = {}
        """Per job holding GPUs of the pool, its GPUs by kind (kinds it holds none of left
        out); two holdings, oldest first, while a job that left the pool still writes its
        checkpoint on GPUs there and has started on it again."""
        self.withdrawn = 0
        """Spot GPUs evicted and not yet restored."""

    def take(self, j: int, gpus: int, order: Sequence[str]) -> dict[str, int]:
        """Job `j` takes `gpus` free GPUs, of the kinds in `order` first to last (a job may
        hold several kinds); returns them by kind. The caller has checked that they are
        free."""
        taken: dict[str, int] = {}
        need = gpus
        for kind in order:
            n = min(need, self.free[kind])
            if n:
                taken[kind] = n
                self.free[kind] -= n
                need -= n
        assert need == 0, f"job {j}: {gpus} GPUs asked, {sum(self.free.values())} free"
        self.held.setdefault(j, []).append(taken)
        return taken

    def holding(self, j: int, newest: bool = False) -> dict[str, int]:
        """The GPUs by kind job `j` holds: its oldest holding (a checkpoint write's while it
        lasts), or with `newest`, the one it took last (its run's)."""
        return self.held[j][-1 if newest else 0]

    def give_back(self, j: int, newest: bool = False) -> dict[str, int]:
        """Job `j` frees the GPUs it took first (with `newest`: last); returns them by
        kind."""
        holdings = self.held[j]
        taken = holdings.pop(-1 if newest else 0)
        if not holdings:
            del self.held[j]
        for kind, n in taken.items():
            self.free[kind] += n
        return taken


class Pool:
    """The GPUs of one model at one site, in nodes of `gpus_per_node`.

    With `power_off`, nodes are tracked under perfect packing: busy GPUs occupy
    ceil(busy / gpus_per_node) nodes; the other powered nodes are idle, queued with the
    time they became idle (oldest first), and switch off after `idle_s`. A start takes the
    most recently idled nodes first, then wakes powered-off ones.

    A partitioned pool (`mig`: a MIG layout per GPU, the scenario's at the start) runs only
    holders of MIG slices: none of its GPUs is ever `free` for whole-GPU or fractional jobs
    or replicas; a GPU with a slice held, or being reconfigured, is busy (`held`).

    A pool of servers (`servers`; its nodes are the servers) places each job's GPUs on
    them by the site's rule (`sim.engine.servers.ServerBooks`): its free GPUs are the
    servers' (`free` is their sum).
    """

    __slots__ = (
        "model",
        "spec",
        "count",
        "free",
        "held",
        "idle_w",
        "host_w",
        "gpus_per_node",
        "nodes",
        "nodes_on",
        "off_w",
        "idle_since",
        "jobs",
        "shared",
        "mig",
        "capacity",
        "servers",
        "embodied",
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
        mig_layout: Sequence[str] = (),
        capacity: CapacityKinds | None = None,
        servers: ServerBooks | None = None,
        embodied: EmbodiedRate | None = None,
    ):
        self.model = model
        self.spec: GpuSpec = GPU_CATALOG[model]
        self.count = count
        self.mig = MigSlices(model, mig_layout, count) if mig_layout else None
        """The slices of a partitioned pool and who holds them (None: not partitioned)."""
        self.free = 0 if self.mig is not None else count
        """GPUs a whole-GPU or fractional job or a replica can take: those nothing holds,
        none in a partitioned pool."""
        self.held = 0
        """Busy GPUs: held by jobs (whole, shared or sliced) or replicas."""
        self.idle_w = idle_w
        self.host_w = host_w
        self.gpus_per_node = gpus_per_node
        self.nodes = self.nodes_on = math.ceil(count / gpus_per_node)
        self.off_w = off_w
        self.idle_since: deque[float] = deque([0.0] * self.nodes)
        """Idle-since times (s) of the powered nodes with no busy GPU, oldest first."""
        self.jobs: dict[int, None] = {}
        """The running jobs on this pool (engine indices, in start order); the engine keeps it."""
        self.shared = SharedGpus()
        """The GPUs fractional jobs share (busy GPUs: not in `free`)."""
        self.capacity = capacity
        """Its GPUs by capacity kind (None: not split; all of the scenario's price kind)."""
        self.servers = servers
        """Its servers and the jobs placed on them (None: a count of GPUs)."""
        self.embodied = embodied or EmbodiedRate(((self.spec.embodied_kg_per_gpu_h, math.inf),))
        """Allocated embodied carbon (`sim.engine.lifetimes`): the GPU catalog's (GPU + host
        share) or, on a pool of servers, the servers', within the pool's lifetime."""
        self._pue = pue
        self._idle_wh = 0.0
        self._since_s = 0.0

    def idle_it_w(self) -> float:
        """IT power of the pool's GPUs nothing holds: powered ones at idle + host, off nodes
        at off_w; and of the parts of shared or partitioned GPUs no job holds, at idle +
        host. On a pool of servers: its standing power (`ServerPower.standing_w`) less the
        held GPUs' idle power and host share (which their jobs pay)."""
        if self.servers is not None:  # jobs pay host_w per GPU held: the hosts' rest
            return self.servers.power.standing_w - self.held * (self.idle_w + self.host_w)
        powered = min(self.nodes_on * self.gpus_per_node, self.count)
        powered_unheld = powered - self.held
        off_nodes = self.nodes - self.nodes_on
        idle_w = powered_unheld * (self.idle_w + self.host_w) + off_nodes * self.off_w
        if len(self.shared):
            idle_w += share(self.shared.spare_milli()) * (self.idle_w + self.host_w)
        if self.mig is not None and len(self.mig):
            idle_w += self.mig.spare_gpus() * (self.idle_w + self.host_w)
        return idle_w

    @property
    def node_w(self) -> float:
        """IT power saved by switching one idle node (or server) off, W."""
        if self.servers is not None:
            power = self.servers.power
            return self.gpus_per_node * self.idle_w + power.host_w_by_held[0] - self.off_w
        return self.gpus_per_node * (self.idle_w + self.host_w) - self.off_w

    def busy_nodes(self, busy_gpus: int) -> int:
        return math.ceil(busy_gpus / self.gpus_per_node)

    def nodes_taken(self, gpus: int) -> int:
        """Nodes that `gpus` more busy GPUs add to the busy ones (perfect packing)."""
        return self.busy_nodes(self.held + gpus) - self.busy_nodes(self.held)

    def nodes_to_wake(self, gpus: int) -> int:
        """Powered-off nodes that `gpus` more busy GPUs need (idle powered nodes go first);
        on a pool of servers, the servers off where the placement would put them."""
        if self.servers is not None:
            return self.servers.to_wake(gpus)
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
        self.pools = []
        for p in config.gpus:
            idle_w = config.idle_w.get(p.model, GPU_CATALOG[p.model].idle_w)
            books = None if p.servers is None else _server_books(config, p.servers, idle_w)
            self.pools.append(
                Pool(
                    p.model,
                    p.count,
                    idle_w,
                    config.host_w_per_gpu if p.servers is None else host_share_w(p.servers.model),
                    self.pue,
                    config.gpus_per_node if p.servers is None else p.servers.gpus_per_server,
                    off_w,
                    p.mig or (),
                    CapacityKinds(p.reserved, p.on_demand, p.spot) if p.split else None,
                    books,
                    pool_embodied_rate(p, start),
                )
            )
        if any(p.servers is not None for p in config.gpus):
            self.host_w_per_gpu = math.fsum(p.count * p.host_w for p in self.pools) / sum(
                p.count for p in self.pools
            )
            """With pools of servers, the GPU-weighted mean of the pools' host power a job
            pays per GPU held (a server's full-load host over its GPUs, `host_share_w`), W."""
        self.cap_w: float | None = None
        """Site-wide GPU power cap, W, for jobs without a cap of their own."""
        self.runtime_version = 0
        """Changes whenever a job that has not run yet may get another runtime estimate
        here: when the cap changes, and with power-off, at every allocation, release and
        switch-off (they change which starts need a node woken)."""
        self.total_gpus = sum(p.count for p in self.pools)
        self.busy_gpus = 0
        self.it_w = sum(
            p.count * (p.idle_w + p.host_w) if p.servers is None else p.servers.power.standing_w
            for p in self.pools
        )
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

    def allocate(self, now_s: float, pool: Pool, gpus: int, active_w: float, job: int = -1) -> int:
        """Take `gpus` free GPUs of `pool`, now drawing `active_w` W each (for `job`, which
        a pool of servers places). Returns the number of powered-off nodes this wakes up
        (the caller then holds the job for `wake_s`)."""
        pool._accrue(now_s)
        if pool.servers is None:
            woken = self._take(pool, gpus)
        else:
            power = pool.servers.power
            standing_w = power.standing_w
            woken = pool.servers.take(now_s, job, gpus)
            self._count_servers(pool, gpus, power.standing_w - standing_w)
        self.it_w += gpus * (active_w - pool.idle_w)
        self.log_power(now_s)
        return woken

    def allocate_part(
        self,
        now_s: float,
        pool: Pool,
        parts: GpuParts,
        j: Hashable,
        need: int | str,
        active_w: float,
        ready_s: float,
    ) -> int:
        """Job `j` takes part of a GPU of `pool` from `parts` (`need`: milli of a shared GPU,
        first fit; a profile: a MIG slice), drawing its share of `active_w` W; a GPU nothing
        held becomes busy, computing from `ready_s`. Returns the powered-off nodes woken.
        A MIG slice may be held by another holder than a job (an LLM replica: see
        `MigSlices`), at `active_w=pool.idle_w`."""
        pool._accrue(now_s)
        self.runtime_version += 1  # co-located jobs' speeds depend on it
        woken = self._take(pool, 1) if parts.join(j, need, ready_s) else 0
        self.it_w += parts.share_of(j) * (active_w - pool.idle_w)
        self.log_power(now_s)
        return woken

    def _take(self, pool: Pool, gpus: int) -> int:
        """Move `gpus` free GPUs of `pool` to busy (nodes under perfect packing); returns the
        powered-off nodes woken."""
        woken = 0
        if self.power_off is not None:
            self.runtime_version += 1
            woken = pool.nodes_to_wake(gpus)
            for _ in range(pool.nodes_taken(gpus) - woken):
                pool.idle_since.pop()  # the most recently idled node
            pool.nodes_on += woken
            self.it_w += woken * pool.node_w
        if pool.mig is None:
            pool.free -= gpus
        pool.held += gpus
        self.busy_gpus += gpus
        return woken

    def release(self, now_s: float, pool: Pool, gpus: int, active_w: float, job: int = -1) -> int:
        """Return `gpus` GPUs drawing `active_w` W each (`job`'s, on a pool of servers) to
        `pool`'s free GPUs; nodes left with no busy GPU join the idle queue; returns how
        many did."""
        pool._accrue(now_s)
        if pool.servers is None:
            freed = self._give_back(now_s, pool, gpus)
        else:
            power = pool.servers.power
            standing_w = power.standing_w
            freed = pool.servers.give_back(now_s, job)
            self._count_servers(pool, -gpus, power.standing_w - standing_w)
        self.it_w -= gpus * (active_w - pool.idle_w)
        self.log_power(now_s)
        return freed

    def release_part(
        self, now_s: float, pool: Pool, parts: GpuParts, j: Hashable, active_w: float
    ) -> int:
        """Job `j` drawing its share of `active_w` W leaves its part of a GPU of `pool` in
        `parts`; the GPU is free again if no job is left on it; returns the nodes this left
        idle."""
        pool._accrue(now_s)
        self.runtime_version += 1
        held_share = parts.share_of(j)
        freed = self._give_back(now_s, pool, 1) if parts.leave(j) else 0
        self.it_w -= held_share * (active_w - pool.idle_w)
        self.log_power(now_s)
        return freed

    def _count_servers(self, pool: Pool, gpus: int, standing_dw: float) -> None:
        """`gpus` more busy GPUs of a pool of servers (fewer if negative), whose standing
        power changed by `standing_dw` W (`ServerPower`)."""
        assert pool.servers is not None
        if self.power_off is not None:
            self.runtime_version += 1
        pool.nodes_on = pool.servers.power.servers_on
        pool.free -= gpus
        pool.held += gpus
        self.busy_gpus += gpus
        self.it_w += standing_dw

    def _give_back(self, now_s: float, pool: Pool, gpus: int) -> int:
        """Move `gpus` busy GPUs of `pool` to free; returns the nodes left with no busy GPU
        (queued as idle since `now_s`)."""
        busy = pool.held
        freed = 0
        if self.power_off is not None:
            self.runtime_version += 1
            freed = pool.busy_nodes(busy) - pool.busy_nodes(busy - gpus)
            pool.idle_since.extend([now_s] * freed)
        if pool.mig is None:
            pool.free += gpus
        pool.held -= gpus
        self.busy_gpus -= gpus
        return freed

    def repartition(
        self, now_s: float, pool: Pool, layout: Sequence[str], gpus: int, ready_s: float
    ) -> list[int]:
        """Give `gpus` free GPUs of partitioned `pool` the MIG `layout` (`MigSlices.repartition`),
        usable from `ready_s`; they are busy in the pool's books until `reconfigured`, at idle
        power (taking powered idle nodes first, then waking powered-off ones, as a start does).
        Returns their indices. ValueError, before anything changes, as `MigSlices` raises it."""
        assert pool.mig is not None
        pool._accrue(now_s)
        chosen = pool.mig.repartition(layout, gpus, ready_s)
        self.runtime_version += 1
        self._take(pool, len(chosen))
        self.log_power(now_s)
        return chosen

    def reconfigured(self, now_s: float, pool: Pool, g: int) -> int:
        """GPU `g` of partitioned `pool` has its new layout and is free; returns the nodes
        this left idle."""
        assert pool.mig is not None
        pool._accrue(now_s)
        pool.mig.reconfigured(g)
        self.runtime_version += 1
        freed = self._give_back(now_s, pool, 1)
        self.log_power(now_s)
        return freed

    def withdraw(self, pool: Pool, gpus: int) -> None:
        """`gpus` free spot GPUs of `pool` are evicted: out of service (no longer free),
        still installed and drawing idle power (idle energy, as free GPUs do)."""
        capacity = pool.capacity
        assert capacity is not None and capacity.free["spot"] >= gpus
        capacity.free["spot"] -= gpus
        capacity.withdrawn += gpus
        pool.free -= gpus
        self.runtime_version += 1

    def restore(self, pool: Pool, gpus: int) -> None:
        """`gpus` evicted spot GPUs of `pool` are in service again: free."""
        capacity = pool.capacity
        assert capacity is not None and capacity.withdrawn >= gpus
        capacity.withdrawn -= gpus
        capacity.free["spot"] += gpus
        pool.free += gpus
        self.runtime_version += 1

    def switch_off_idle(self, now_s: float) -> int:
        """Switch off every node idle for at least `power_off.idle_s`; returns how many."""
        assert self.power_off is not None
        off = 0
        for pool in self.pools:
            pool._accrue(now_s)
            if pool.servers is not None:
                power = pool.servers.power
                standing_w = power.standing_w
                off += power.switch_off_idle(now_s)
                pool.nodes_on = power.servers_on
                self.it_w += power.standing_w - standing_w
                continue
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


def host_share_w(server_model: str) -> float:
    """The host power a job pays per GPU it holds on a server of catalog `server_model`, W:
    the host's full-load draw (`ServerModel.host_peak_w`) shared by the server's GPUs (a
    full server's jobs pay its host; the rest of a part-full or idle host's power is idle
    energy)."""
    model = SERVER_CATALOG[server_model]
    return model.host_peak_w / model.gpus


def _server_books(config: SiteConfig, servers: PoolServers, gpu_idle_w: float) -> ServerBooks:
    """The books of a pool of `servers` at site `config`: its placement and its servers'
    power (host by utilisation; whole-server power-off with the site's `power_off`)."""
    model = SERVER_CATALOG[servers.model]
    return ServerBooks(
        servers.count,
        PoolPlacer(config.placement, servers.gpus_per_server, config.max_servers),
        ServerPower(model, servers.count, gpu_idle_w, config.power_off),
    )
