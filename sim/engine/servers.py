"""A pool's servers: which job holds which GPUs of which server, the free GPUs by server
over time, and the waits that fragmentation causes. Engine-free (no SimPy, no scenario):
the engine's components drive it with times and jobs (docs/placement.md).

- `ServerLedger`: N servers of G GPUs; per server its free GPUs, per job the
  (server, GPUs) it holds; a job never holds more GPUs of a server than the server has,
  and no server has fewer than 0 or more than G free.
- `FreeGpuLog`: the free GPUs by server as a compact log of changes (time_s, server,
  free_gpus), one row per server and instant.
- `FragmentationMeter`: per waiting job, the time during which the pool had enough free
  GPUs in total but the placement could not place it (`fragmentation_wait_h`).
- `ServerBooks`: the three of one pool in a run, as `sim.engine.ledger.Pool` keeps them.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass

from sim.energy import amortised_embodied_kg
from sim.engine.server_power import ServerPower
from sim.models.placement import Assignment, PoolPlacer, Rule
from sim.models.servers import (
    COMPONENTS,
    EMBODIED_GROUPS,
    SERVER_CATALOG,
    embodied_kg_by_component,
    lifetimes_years,
)
from sim.util.records import INSTANT_S

__all__ = ["FragmentationMeter", "FreeGpuLog", "Placer", "ServerBooks", "ServerLedger"]

Placer = Callable[[Sequence[int], int], Assignment | None]
"""place(free GPUs by server, the job's GPUs) -> where it goes, or None: a rule of
`sim.models.placement` bound to a pool's server size and a limit on the servers a job spans."""


class ServerLedger:
    """The GPUs of `servers` servers of `gpus_per_server` GPUs each, and the jobs holding
    them. Every change is checked before anything moves (ValueError naming the job): a job
    holds at least one GPU of each server it lists, never more than the server has free,
    and each job holds one assignment at a time. O(servers a job spans) per change."""

    __slots__ = ("gpus_per_server", "total_free", "_free", "_held")

    def __init__(self, servers: int, gpus_per_server: int):
        if servers < 1 or gpus_per_server < 1:
            raise ValueError(
                f"a server pool needs servers >= 1 and gpus_per_server >= 1,"
                f" got {servers} and {gpus_per_server}"
            )
        self.gpus_per_server = gpus_per_server
        self._free = [gpus_per_server] * servers
        self.total_free = servers * gpus_per_server
        """Free GPUs of all the servers."""
        self._held: dict[Hashable, Assignment] = {}

    @property
    def servers(self) -> int:
        return len(self._free)

    def free(self, server: int) -> int:
        """Free GPUs of `server`."""
        return self._free[server]

    def free_by_server(self) -> tuple[int, ...]:
        """Free GPUs of each server, by index (a snapshot)."""
        return tuple(self._free)

    def held(self, job: Hashable) -> Assignment:
        """The (server, GPUs) `job` holds; () if none."""
        return self._held.get(job, ())

    def place(
        self, job: Hashable, gpus: int, rule: Rule, max_servers: int | None = None
    ) -> Assignment | None:
        """Allocate `gpus` GPUs to `job` where `rule` puts them (on at most `max_servers`
        servers); returns the assignment, or None (nothing changes) if the rule finds none."""
        assignment = rule(self._free, gpus, self.gpus_per_server, max_servers)
        if assignment is not None:
            self.allocate(job, assignment)
        return assignment

    def allocate(self, job: Hashable, assignment: Assignment) -> None:
        """`job` takes the GPUs of `assignment` (by increasing server index, each >= 1 and
        at most the server's free GPUs); ValueError, before anything changes, otherwise or
        if `job` already holds GPUs."""
        if job in self._held:
            raise ValueError(f"job {job!r} already holds GPUs {self._held[job]}")
        servers = [s for s, _ in assignment]
        if not servers or servers != sorted(set(servers)):
            raise ValueError(
                f"job {job!r}: an assignment lists one or more servers by increasing index,"
                f" got {assignment}"
            )
        for s, gpus in assignment:
            if not (0 <= s < len(self._free) and 1 <= gpus <= self._free[s]):
                raise ValueError(
                    f"job {job!r} cannot take {gpus} GPUs of server {s}: it has"
                    f" {self._free[s] if 0 <= s < len(self._free) else 'no such server'} free"
                )
        for s, gpus in assignment:
            self._free[s] -= gpus
            self.total_free -= gpus
        self._held[job] = tuple(assignment)

    def release(self, job: Hashable) -> Assignment:
        """`job` gives back every GPU it holds; returns them. ValueError if it holds none."""
        assignment = self._held.pop(job, None)
        if assignment is None:
            raise ValueError(f"job {job!r} holds no GPUs")
        for s, gpus in assignment:
            self._free[s] += gpus
            self.total_free += gpus
        return assignment


class FreeGpuLog:
    """Free GPUs by server over time, one row per change: `time_s` (s), `server` (index),
    `free_gpus` after the change. Every server has all its GPUs free at time 0 (no row).
    Changes of one server at one instant (within `sim.util.records.INSTANT_S` of its last
    change) collapse into its row, with the last value (as `PowerLog` does per site)."""

    __slots__ = ("time_s", "server", "free_gpus", "_last_row", "_last_s")

    def __init__(self, servers: int):
        self.time_s = array("d")
        self.server = array("i")
        self.free_gpus = array("i")
        self._last_row = [-1] * servers
        self._last_s = [-math.inf] * servers

    def record(self, t_s: float, ledger: ServerLedger, assignment: Assignment) -> None:
        """The servers of `assignment` (just allocated or released at `t_s`, s) have their
        free GPUs of `ledger` now."""
        for s, _ in assignment:
            free = ledger.free(s)
            last_s, self._last_s[s] = self._last_s[s], t_s
            if t_s - last_s < INSTANT_S:
                self.free_gpus[self._last_row[s]] = free
                continue
            self._last_row[s] = len(self.time_s)
            self.time_s.append(t_s)
            self.server.append(s)
            self.free_gpus.append(free)


@dataclass(slots=True)
class _SizeClass:
    """The waiting jobs of one GPU count, which fragmentation blocks or not together."""

    jobs: int = 0
    """Jobs of this count waiting."""
    blocked: bool = False
    """Whether the free GPUs suffice in total but the placement finds none."""
    since_s: float = 0.0
    """When `blocked` last became True, s."""
    clock_s: float = 0.0
    """Blocked time before `since_s`, s."""

    def clock_at(self, t_s: float) -> float:
        """Blocked time of this class up to `t_s`, s."""
        return self.clock_s + (t_s - self.since_s if self.blocked else 0.0)

    def set_blocked(self, t_s: float, blocked: bool) -> None:
        if blocked and not self.blocked:
            self.since_s = t_s
        elif self.blocked and not blocked:
            self.clock_s += t_s - self.since_s
        self.blocked = blocked


class FragmentationMeter:
    """Fragmentation waits of one server pool: per job, the time it waited while the pool's
    free GPUs were at least its GPUs in total but `place` found no assignment for it (too
    few on `place`'s allowed servers). Exact: the state is constant between the calls,
    which say when a job starts and stops waiting (`wait`, `leave`) and when the ledger
    changed (`changed`), in non-decreasing time. Jobs of one GPU count are blocked
    together, so a ledger change costs one `place` per GPU count waiting."""

    __slots__ = ("_ledger", "_place", "_classes", "_waiting", "_waited_s", "_now_s")

    def __init__(self, ledger: ServerLedger, place: Placer):
        self._ledger = ledger
        self._place = place
        self._classes: dict[int, _SizeClass] = {}
        self._waiting: dict[Hashable, tuple[int, float]] = {}
        """Per waiting job: its GPUs and its class's clock when it began waiting."""
        self._waited_s: dict[Hashable, float] = {}
        """Per job that stopped waiting: its fragmentation wait, s (summed over waits)."""
        self._now_s = -math.inf

    def _at(self, t_s: float) -> None:
        if t_s < self._now_s:
            raise ValueError(f"time runs back: {t_s} s after {self._now_s} s")
        self._now_s = t_s

    def _blocked(self, gpus: int, free: Sequence[int]) -> bool:
        """Whether a job of `gpus` GPUs is blocked by fragmentation on `free` by server."""
        return self._ledger.total_free >= gpus and self._place(free, gpus) is None

    def wait(self, t_s: float, job: Hashable, gpus: int) -> None:
        """`job` of `gpus` GPUs starts waiting at `t_s`, s (ValueError if it is waiting)."""
        self._at(t_s)
        if job in self._waiting:
            raise ValueError(f"job {job!r} is already waiting")
        size = self._classes.get(gpus)
        if size is None:
            size = self._classes[gpus] = _SizeClass()
            size.set_blocked(t_s, self._blocked(gpus, self._ledger.free_by_server()))
        size.jobs += 1
        self._waiting[job] = (gpus, size.clock_at(t_s))

    def leave(self, t_s: float, job: Hashable) -> None:
        """`job` stops waiting at `t_s`, s (started, or gone); ValueError if it was not."""
        self._at(t_s)
        entry = self._waiting.pop(job, None)
        if entry is None:
            raise ValueError(f"job {job!r} is not waiting")
        gpus, joined_s = entry
        size = self._classes[gpus]
        self._waited_s[job] = self._waited_s.get(job, 0.0) + size.clock_at(t_s) - joined_s
        size.jobs -= 1
        if size.jobs == 0:
            del self._classes[gpus]

    def changed(self, t_s: float) -> None:
        """The ledger's free GPUs changed at `t_s`, s."""
        self._at(t_s)
        free = self._ledger.free_by_server()
        for gpus, size in self._classes.items():
            size.set_blocked(t_s, self._blocked(gpus, free))

    def close(self, t_s: float) -> None:
        """Every job still waiting stops waiting at `t_s`, s (the end of the run)."""
        for job in list(self._waiting):
            self.leave(t_s, job)

    def wait_s(self, job: Hashable) -> float:
        """`job`'s fragmentation wait over the waits it finished, s (0 if none)."""
        return self._waited_s.get(job, 0.0)

    def fragmentation_wait_h(self) -> float:
        """The summary `fragmentation_wait_h`: the finished waits' fragmentation, summed
        over jobs, h."""
        return math.fsum(self._waited_s.values()) / 3600.0


class ServerBooks:
    """The servers of one pool in a run: the ledger, the placement that fills it, the
    free-GPU log and the fragmentation meter, kept in step. A job's GPUs are one holding
    per start, keyed (job, n): a job that left the pool and still writes its checkpoint on
    GPUs there may start on it again meanwhile (two holdings, the oldest given back first,
    as `sim.engine.ledger.CapacityKinds` does). `power` keeps each server's power state
    (`sim.engine.server_power`): with power-off, a job goes on powered servers if the rule
    finds room there, else where it finds room among all (waking those off)."""

    __slots__ = ("ledger", "place", "log", "meter", "power", "_holdings", "_taken")

    def __init__(self, servers: int, place: PoolPlacer, power: ServerPower):
        self.ledger = ServerLedger(servers, place.gpus_per_server)
        self.place = place
        """Where a job's GPUs go: the site's rule under its `max_servers`."""
        self.log = FreeGpuLog(servers)
        self.meter = FragmentationMeter(self.ledger, place)
        self.power = power
        self._holdings: dict[int, list[tuple[int, int]]] = {}
        self._taken = 0
        """Holdings taken so far (the n of the keys)."""

    def fit(self, gpus: int) -> Assignment | None:
        """Where a job of `gpus` GPUs would go now (on powered servers if it fits there);
        None: it does not fit."""
        free = self.ledger.free_by_server()
        if self.power.power_off is not None:
            on_powered = self.place(self.power.powered(free), gpus)
            if on_powered is not None:
                return on_powered
        return self.place(free, gpus)

    def wake_s(self, now_s: float, gpus: int) -> float:
        """Time before a job of `gpus` GPUs could compute if it started now, s: the boot
        of the servers it would take (`ServerPower.wake_s`)."""
        assignment = self.fit(gpus)
        return 0.0 if assignment is None else self.power.wake_s(now_s, [s for s, _ in assignment])

    def to_wake(self, gpus: int) -> int:
        """Servers off that a job of `gpus` GPUs would wake if it started now."""
        assignment = self.fit(gpus)
        return 0 if assignment is None else self.power.to_wake([s for s, _ in assignment])

    def layout(self, j: int, gpus: int) -> Assignment:
        """The servers job `j` of `gpus` GPUs runs on: those it holds, else where it would
        go now, else where it would go in the empty pool (its speed estimate while it
        cannot start), else one server (a job larger than the pool never runs)."""
        holdings = self._holdings.get(j)
        if holdings:
            return self.ledger.held(holdings[-1])
        empty = (self.place.gpus_per_server,) * self.ledger.servers
        return self.fit(gpus) or self.place(empty, gpus) or ((0, gpus),)

    def take(self, t_s: float, j: int, gpus: int) -> int:
        """Job `j` takes `gpus` GPUs where the placement puts them at `t_s`, s (the caller
        has checked that they fit); returns the servers off this wakes."""
        assignment = self.fit(gpus)
        assert assignment is not None, f"job {j}: {gpus} GPUs do not fit the servers"
        key = (j, self._taken)
        self._taken += 1
        self.ledger.allocate(key, assignment)
        self._holdings.setdefault(j, []).append(key)
        self._changed(t_s, assignment)
        return self.power.take(t_s, assignment)

    def give_back(self, t_s: float, j: int) -> int:
        """Job `j` gives back the GPUs it took first, at `t_s`, s; returns the servers this
        left with no GPU held."""
        holdings = self._holdings[j]
        assignment = self.ledger.release(holdings.pop(0))
        if not holdings:
            del self._holdings[j]
        self._changed(t_s, assignment)
        return self.power.give_back(t_s, assignment)

    def _changed(self, t_s: float, assignment: Assignment) -> None:
        self.log.record(t_s, self.ledger, assignment)
        self.meter.changed(t_s)


def server_embodied_kg_by_group(
    model: str,
    servers: int,
    duration_s: float | Mapping[str, float],
    lifetimes: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The embodied carbon (kgCO2e) that `servers` servers of catalog `model` carry over
    `duration_s` seconds (or, per component of `COMPONENTS`, its own duration), by group of
    `EMBODIED_GROUPS` (cpu, dram, storage, gpu, other): each component amortised over its
    lifetime, `lifetimes` (Julian years per component; None: the catalog's,
    `sim.models.servers.lifetimes_years`; `sim.energy.amortised_embodied_kg`;
    docs/servers.md, "In a run")."""
    spec = SERVER_CATALOG[model]
    lifetimes = lifetimes_years(spec) if lifetimes is None else lifetimes
    embodied = embodied_kg_by_component(spec)
    durations_s = (
        duration_s if isinstance(duration_s, Mapping) else dict.fromkeys(embodied, duration_s)
    )
    parts = {
        c: amortised_embodied_kg(kg, lifetimes[c], durations_s[c]) for c, kg in embodied.items()
    }
    return {
        group: servers * sum(parts[c] for c in components)
        for group, components in EMBODIED_GROUPS.items()
    }


def server_embodied_kg_per_gpu_h(
    model: str,
    lifetimes: Mapping[str, float] | None = None,
    components: Collection[str] = COMPONENTS,
) -> float:
    """A server of catalog `model`'s amortised embodied carbon per hour (of its
    `components` alone; `lifetimes` as `server_embodied_kg_by_group`), shared equally by
    its GPUs: kgCO2e per GPU-hour (allocated embodied carbon on a pool of servers)."""
    hours = {c: 3600.0 if c in components else 0.0 for c in COMPONENTS}
    per_h = sum(server_embodied_kg_by_group(model, 1, hours, lifetimes).values())
    return per_h / SERVER_CATALOG[model].gpus
