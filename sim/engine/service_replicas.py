"""The replicas of the inference services' deployments and their GPUs in the site ledger.

A deployment (service, site, variant: `Deployment`) holds `gpus_per_replica` GPUs per
replica of its site's pool (a MIG variant's: one slice of a partitioned pool, counted as
its SM share of a GPU), in the site ledger at idle power, and logs the power its GPUs draw
above idle. `Replicas` carries out the changes of replica counts (`Scale`): a cold start
takes the GPUs now and serves once the nodes are up and the weights read; a scale-down
cancels the newest cold starts first, then drains serving replicas, whose GPUs are freed
when the fidelity says their last request has finished.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim.config.services import Variant
from sim.engine.ledger import Pool, Site
from sim.errors import PolicyError
from sim.models import mig
from sim.models.llm_replica import ReplicaModel
from sim.serving.service_sim import ServiceSim

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet

__all__ = ["ColdStart", "Deployment", "Replicas", "power_callback"]


class ColdStart:
    """Replicas of one scale-up in their cold start (fewer if some were cancelled)."""

    __slots__ = ("replicas",)

    def __init__(self, replicas: int):
        self.replicas = replicas


class Deployment:
    """One deployment (service, site, variant): its replicas, their GPUs, the log of its
    power (`Services.levels` holds them per service)."""

    __slots__ = (
        "name",
        "site",
        "pool",
        "k",
        "site_k",
        "variant",
        "spec",
        "ready",
        "loading",
        "batches",
        "model",
        "fidelity_w",
        "gpus",
        "time_s",
        "extra_w",
        "gpus_log",
        "idle_gpus_log",
        "loading_w_log",
        "idle_replicas",
        "gpus_per_replica",
        "holders",
    )

    def __init__(
        self, name: str, site: Site, pool: Pool, k: int, site_k: int, variant: int, spec: Variant
    ):
        self.name = name
        """"service/variant": what the event log's rows of its replicas say (`detail`)."""
        self.site = site
        self.pool = pool
        self.k = k
        """The deployment's index (the fidelity's site index)."""
        self.site_k = site_k
        """The site's index in the service's `sites`."""
        self.variant = variant
        """The variant's index in the service's `variant_specs()`."""
        self.spec = spec
        self.ready = 0
        self.loading = 0
        self.batches: list[ColdStart] = []
        """Replicas in their cold start, per scale-up, oldest first."""
        self.model: ReplicaModel
        self.fidelity_w = 0.0
        """Extra power of the serving replicas (the fidelity's last report), W."""
        self.gpus = 0.0
        """GPUs held (serving, loading, draining); a slice counts as its SM share."""
        self.gpus_per_replica = (
            float(spec.gpus_per_replica)
            if spec.mig_profile is None
            else mig.sm_share(spec.gpu, spec.mig_profile)
        )
        """GPUs one replica holds (a slice: its SM share of the GPU)."""
        self.holders: list[tuple[str, int]] = []
        """A MIG variant's slices held, newest last (their holder keys)."""
        self.time_s = array("d")
        self.extra_w = array("d")
        """Power above the ledger's idle of all the service's GPUs here, W, from time_s."""
        self.gpus_log = array("d")
        self.idle_gpus_log = array("d")
        """GPUs of serving replicas with nothing in flight (`row`), from time_s."""
        self.loading_w_log = array("d")
        """IT power of the replicas in their cold start, W (`row`), from time_s."""
        self.idle_replicas: int | None = None
        """Serving replicas with nothing in flight, as the fidelity last reported them (None:
        it does not report them)."""

    def row(self) -> tuple[float, float, float, float]:
        """The level log's values now: (power above the ledger's idle W, GPUs held, idle
        GPUs, IT power of the loading replicas W).

        - Above idle: the serving replicas' (the fidelity's last report) and the loading
          ones' at the power of a batch of one (`ReplicaModel.load_w`).
        - Idle GPUs: those of replicas that serve (or drain) with nothing in flight: the
          fidelity's count of such replicas; from a fidelity that gives none, all the
          serving GPUs while the extra power is 0 (nothing in flight at any replica).
        - Loading: the cold-starting replicas' GPUs' idle and host share and what they draw
          above idle."""
        gpus, loading, per_replica = self.gpus, self.loading, self.gpus_per_replica
        above_w = loading_w = 0.0
        if loading:
            m = self.model
            above_w = loading * (m.load_w - float(m.power_w[0]))
            loading_w = loading * per_replica * (self.pool.idle_w + self.pool.host_w) + above_w
        serving = gpus - loading * per_replica
        if self.idle_replicas is None:
            idle_gpus = serving if self.fidelity_w == 0.0 else 0.0
        else:
            idle_gpus = min(self.idle_replicas * per_replica, serving)
        return self.fidelity_w + above_w, gpus, idle_gpus, loading_w

    def extra_now_w(self) -> float:
        """Power above the ledger's idle of the deployment's GPUs now, W (`row`)."""
        return self.row()[0]

    def record(self, t_s: float) -> None:
        """Log the power level and GPUs held from `t_s` (one row per instant)."""
        extra_w, gpus, idle_gpus, loading_w = self.row()
        if self.time_s and self.time_s[-1] == t_s:
            self.extra_w[-1] = extra_w
            self.gpus_log[-1] = gpus
            self.idle_gpus_log[-1] = idle_gpus
            self.loading_w_log[-1] = loading_w
            return
        self.time_s.append(t_s)
        self.extra_w.append(extra_w)
        self.gpus_log.append(gpus)
        self.idle_gpus_log.append(idle_gpus)
        self.loading_w_log.append(loading_w)

    def record_many(
        self, t_s: np.ndarray, fidelity_w: np.ndarray, idle: np.ndarray | None = None
    ) -> None:
        """Log the fidelity's extra power `fidelity_w` (and its idle replicas `idle`, if
        it counts them) from each of the increasing times `t_s` (loading replicas and GPUs
        held are constant over them: a fidelity is always advanced before either changes)."""
        if not len(t_s):
            return
        if self.time_s and self.time_s[-1] == t_s[0]:
            for log in self._logs():
                log.pop()
        fidelity_w = np.asarray(fidelity_w, dtype=np.float64)
        self.fidelity_w = float(fidelity_w[-1])
        if idle is not None:
            self.idle_replicas = int(idle[-1])
        above_w, gpus, _, loading_w = self.row()
        above_w -= self.fidelity_w  # the loading replicas' part
        serving = gpus - self.loading * self.gpus_per_replica
        if idle is None:
            idle_gpus = np.where(fidelity_w == 0.0, serving, 0.0)
        else:
            idle_gpus = np.minimum(np.asarray(idle, dtype=float) * self.gpus_per_replica, serving)
        n = len(t_s)
        # frombytes copies the arrays' memory (extend would convert element by element)
        for log, values in (
            (self.time_s, np.asarray(t_s, dtype=np.float64)),
            (self.extra_w, fidelity_w + above_w),
            (self.gpus_log, np.full(n, gpus)),
            (self.idle_gpus_log, idle_gpus),
            (self.loading_w_log, np.full(n, loading_w)),
        ):
            log.frombytes(values.astype(np.float64).tobytes())

    def _logs(self) -> tuple[array, ...]:
        """The level log's columns, one row per instant."""
        return self.time_s, self.extra_w, self.gpus_log, self.idle_gpus_log, self.loading_w_log

    def it_w(self) -> np.ndarray:
        """IT power of the service's GPUs here at each log row, W (GPU idle + host share +
        extra)."""
        gpus = np.asarray(self.gpus_log, dtype=float)
        return gpus * (self.pool.idle_w + self.pool.host_w) + np.asarray(self.extra_w)


def power_callback(levels: list[Deployment]) -> Callable[..., None]:
    """The callback a service's fidelity reports its deployments' extra power with:
    `on_power(k, t_s, extra_w[, idle])` logs it in `levels[k]`."""

    def on_power(k: int, t_s, extra_w, idle=None) -> None:
        """One change (floats), or many (increasing times and powers, numpy arrays); `idle`:
        the replicas with nothing in flight, from a fidelity that counts them."""
        level = levels[k]
        if isinstance(t_s, np.ndarray):
            level.record_many(t_s, extra_w, idle)
            return
        level.fidelity_w = extra_w
        if idle is not None:
            level.idle_replicas = idle
        level.record(t_s)

    return on_power


class Replicas:
    """Changes of the services' replica counts, and the GPUs (or slices) replicas hold in
    the site ledger, at idle power. `advance(i)` brings service `i`'s fidelity up to now
    (before any change, so the power logs stay in time order); `replicas_changed(i)` is
    told when service `i`'s ready replicas changed (its routing follows them)."""

    __slots__ = ("_core", "_fleet", "_advance", "_replicas_changed", "_serial")

    def __init__(
        self,
        core: Core,
        fleet: Fleet,
        advance: Callable[[int], ServiceSim],
        replicas_changed: Callable[[int], None],
    ):
        self._core = core
        self._fleet = fleet
        self._advance = advance
        self._replicas_changed = replicas_changed
        self._serial = itertools.count()
        """Numbers the slices replicas hold (their holder keys: ("replica", n))."""

    def room(self, level: Deployment, more: int) -> str | None:
        """None if `more` replicas of `level` fit now, else why not."""
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            need, free, what = more * level.spec.gpus_per_replica, pool.free, f"{pool.model} GPUs"
        else:
            assert pool.mig is not None
            need, free = more, pool.mig.free_slices().get(profile, 0)
            what = f"{profile} slices of {pool.model}"
        if need <= free:
            return None
        return (
            f"{more} more replicas of {level.spec.name} need {need} {what}, "
            f"{level.site.name} has {free} free"
        )

    def take_gpus(self, level: Deployment, replicas: int) -> None:
        """`replicas` more replicas of `level` take their GPUs (or slices) now, at idle."""
        now = self._core.env.now
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            level.site.allocate(now, pool, replicas * level.spec.gpus_per_replica, pool.idle_w)
        else:
            assert pool.mig is not None  # checked with the scenario
            for _ in range(replicas):
                holder = ("replica", next(self._serial))
                level.site.allocate_part(now, pool, pool.mig, holder, profile, pool.idle_w, now)
                level.holders.append(holder)
        level.gpus += replicas * level.gpus_per_replica

    def _free_gpus(
        self, level: Deployment, replicas: int, held: list[tuple[str, int]] | None = None
    ) -> None:
        """`replicas` replicas of `level` give back their GPUs (or slices: `held`, else
        the newest)."""
        fleet, pool = self._fleet, level.pool
        if level.spec.mig_profile is None:
            fleet.release(level.site, pool, replicas * level.spec.gpus_per_replica, pool.idle_w)
        else:
            assert pool.mig is not None
            for _ in range(replicas):
                holder = held.pop() if held else level.holders.pop()
                fleet.release_part(level.site, pool, pool.mig, holder, pool.idle_w)
        level.gpus -= replicas * level.gpus_per_replica
        level.record(self._core.env.now)

    def _drained(
        self, i: int, level: Deployment, replicas: int, held: list[tuple[str, int]]
    ) -> None:
        """Draining replicas of service `i` finished their last requests: their GPUs are
        free (the fidelity advanced first, so the power log stays in time order)."""
        self._advance(i)
        self._free_gpus(level, replicas, held)
        self._log("replica_drained", level, replicas)

    def _log(self, kind: str, level: Deployment, replicas: int) -> None:
        """An event row of `kind` for `replicas` replicas of `level` now."""
        now, site = self._core.env.now, level.site.index
        self._core.events.append(now, kind, site=site, value=replicas, detail=level.name)

    def scale(self, i: int, level: Deployment, replicas: int, asker: object) -> None:
        """Run `replicas` replicas of service `i` at `level`'s site from now; PolicyError
        naming `asker` if the new ones do not fit."""
        have = level.ready + level.loading
        if replicas > have:
            why = self.room(level, replicas - have)
            if why is not None:
                raise PolicyError(f"{asker}: {why}")
        sim = self._advance(i)
        now = self._core.env.now
        self._log("scale", level, replicas)
        if replicas > have:
            self._cold_start(i, level, replicas - have)
            return
        cancel = have - replicas
        while cancel and level.batches:  # the most recent cold starts go first
            batch = level.batches[-1]
            n = min(cancel, batch.replicas)
            batch.replicas -= n
            level.loading -= n
            cancel -= n
            if batch.replicas == 0:
                level.batches.pop()
            self._free_gpus(level, n)
        if cancel:
            level.ready -= cancel
            free_at_s = sim.configure(now, level.k, level.ready, level.model)
            self._replicas_changed(i)
            if free_at_s <= now:
                self._free_gpus(level, cancel)
                self._log("replica_drained", level, cancel)
            else:  # the drained replicas' own slices, whatever scales up meanwhile
                held = [level.holders.pop() for _ in range(cancel)] if level.holders else []
                timer = self._core.env.timeout(free_at_s - now)
                timer.callbacks.append(lambda _e: self._drained(i, level, cancel, held))

    def _cold_start(self, i: int, level: Deployment, n: int) -> None:
        """`n` new replicas of service `i` at `level` take their GPUs now and serve after
        the boot of the powered-off nodes they need and the read of the weights."""
        core = self._core
        pool, profile = level.pool, level.spec.mig_profile
        if profile is None:
            wake_s = self._fleet.wake_s(level.site, pool, n * level.spec.gpus_per_replica)
        else:  # a slice on a GPU nothing holds may need its node booted
            assert pool.mig is not None
            wake_s = (
                self._fleet.wake_s(level.site, pool, 1) if pool.mig.fit(profile) is None else 0.0
            )
        load_s = level.model.weights_gb / level.site.checkpoint_read_gbps
        self.take_gpus(level, n)
        level.loading += n
        batch = ColdStart(n)
        level.batches.append(batch)
        level.record(core.env.now)
        timer = core.env.timeout(wake_s + load_s)
        timer.callbacks.append(lambda _e: self._loaded(i, level, batch))

    def _loaded(self, i: int, level: Deployment, batch: ColdStart) -> None:
        """The replicas of `batch` still wanted finished their cold start: they serve."""
        n = batch.replicas
        if n == 0:
            return  # cancelled while loading
        level.batches = [b for b in level.batches if b is not batch]
        sim = self._advance(i)
        level.loading -= n
        level.ready += n
        sim.configure(self._core.env.now, level.k, level.ready, level.model)
        self._replicas_changed(i)
        level.record(self._core.env.now)
        self._log("replica_ready", level, n)
        self._core.request_decision()
