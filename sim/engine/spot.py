"""Spot capacity: reserved, on-demand and spot GPUs, their prices, and the evictions of spot
GPUs (`reserved` and `spot` counts of a site's `[[sites.gpus]]`, and `[spot]`).

A pool split into capacity kinds (`sim.engine.ledger.CapacityKinds`) gives a starting job its
GPUs in an order of kinds: the kinds its `Start` names (`capacity`, checked by
`check_capacity`), else reserved first (paid for anyway), then on-demand, spot last. Prices
(docs/spot-capacity.md, after GAIA's cost model, Hanafy et al., ASPLOS 2024, umassos/GAIA
`src/cluster/base_cluster.py`):

- reserved GPUs are a commitment: every reserved GPU is paid for the whole run at the
  reserved price, used or not (summary `cost_reserved`, added to `cost_compute`); a job on
  reserved GPUs pays nothing more for them;
- on-demand and spot GPUs are paid per GPU-hour held, at their kind's price (the jobs'
  `cost`).

Evictions, from a rate per spot node-hour (a node: `gpus_per_node` GPUs, one cloud
instance) held by running jobs, or from a trace: an evicted job gets the notice
(`notice_s`, AWS's two minutes). Without periodic checkpoints, if its checkpoint write fits
in the notice it writes it, holding its GPUs at idle power for the write (the checkpoint
costs, `Checkpoints.leave`), and keeps its progress; otherwise, or with periodic
checkpoints, it restarts from its last checkpoint and loses the work since
(`Checkpoints.fail`, as a failed job does). Either way it is pending again, and its spot
GPUs, once it frees them, are out of service (`Site.withdraw`) until `unavailable_h` after
the notice. Rate draws come from the run's own `spot` random stream
(`sim.util.streams.STREAMS`), so evictions move no other draw.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component, per_job
from sim.engine.failures import trace_time_site, weighted_draw
from sim.engine.ledger import CAPACITY_KINDS, Pool, Site
from sim.errors import PolicyError, ScenarioError
from sim.models import sharing
from sim.results import ResultParts
from sim.util.csv_rows import csv_rows

if TYPE_CHECKING:
    from sim.engine.checkpoints import Checkpoints
    from sim.engine.component import Core
    from sim.engine.failures import Failures
    from sim.engine.fleet import Fleet
    from sim.engine.jobs import JobBook
    from sim.engine.runs import Run, Runs

__all__ = ["EVICTION_TRACE_COLUMNS", "Spot", "read_eviction_trace"]

EVICTION_TRACE_COLUMNS = ("time_h", "site", "gpus")
"""The header of an eviction trace: hours since the scenario start, a site's name, the spot
GPUs reclaimed there."""


def read_eviction_trace(
    path: Path, site_names: list[str], spot_sites: Collection[str]
) -> list[tuple[float, int, int]]:
    """The evictions of a trace file as (time s, site index, GPUs), in time order;
    ScenarioError naming the file, the line and the value for a bad row (among them a site
    not in `spot_sites`, the sites with spot GPUs)."""
    where = f"spot.trace: {path}"
    rows = csv_rows(path, where, "eviction trace", EVICTION_TRACE_COLUMNS)
    return sorted(_trace_row(where, line, row, site_names, spot_sites) for line, row in rows)


def _trace_row(
    where: str, line: int, row: list[str], site_names: list[str], spot_sites: Collection[str]
) -> tuple[float, int, int]:
    if len(row) != len(EVICTION_TRACE_COLUMNS):
        raise ScenarioError(f"{where}:{line}: expected 3 fields (time_h,site,gpus), got {row}")
    t_s, h = trace_time_site(where, line, row, site_names)
    if site_names[h] not in spot_sites:
        with_spot = ", ".join(n for n in site_names if n in spot_sites)
        raise ScenarioError(
            f"{where}:{line}: site {site_names[h]!r} has no spot GPUs "
            f"(sites with spot GPUs: {with_spot})"
        )
    text = row[2].strip()
    if not (text.isdigit() and int(text) > 0):
        raise ScenarioError(f"{where}:{line}: gpus must be an integer > 0, got {text!r}")
    return t_s, h, int(text)


class Spot(Component):
    """Capacity kinds and spot evictions: which kinds each job holds, what they cost, and per
    job how often it was evicted and the work it lost."""

    name = "spot"
    uses = ("runs", "failures", "checkpoints", "book", "fleet")
    stream = "spot"

    __slots__ = (
        "_core",
        "_runs",
        "_failures",
        "_checkpoints",
        "_book",
        "_fleet",
        "_rng",
        "active",
        "config",
        "rate_per_node_s",
        "_trace",
        "_evicting",
        "count",
        "lost_gpu_s",
    )

    def __init__(
        self,
        core: Core,
        *,
        runs: Runs,
        failures: Failures,
        checkpoints: Checkpoints,
        book: JobBook,
        fleet: Fleet,
        rng: np.random.Generator,
    ):
        self._core = core
        self._runs = runs
        self._failures = failures
        self._checkpoints = checkpoints
        self._book = book
        self._fleet = fleet
        self._rng = rng
        config = core.scenario.spot
        self.active = fleet.has_capacity_kinds
        """Some pool is split into capacity kinds (else this component does nothing)."""
        self.config = config
        rate = None if config is None else config.eviction_rate_per_node_h
        self.rate_per_node_s = None if rate is None else rate / 3600.0
        """Evictions per spot node-second held by a running job (None: trace or none)."""
        trace = None if config is None else config.trace
        spot_sites = {
            s.name
            for s in self._fleet.sites
            if any(p.capacity is not None and p.capacity.total["spot"] for p in s.pools)
        }
        self._trace = (
            [] if trace is None else read_eviction_trace(trace, self._fleet.names, spot_sites)
        )
        """The trace's evictions, (time s, site index, GPUs) in time order."""
        self._evicting: dict[int, float] = {}
        """The notice time (s) of each evicted holding not yet freed (a checkpoint write's),
        by the `id` of its dict in `CapacityKinds.held` (a job may hold two: the write's and
        its new run's, evicted in turn)."""
        self.count: dict[int, int] = {}
        """Evictions per job that was evicted."""
        self.lost_gpu_s: dict[int, float] = {}
        """Work lost to evictions per job, reference GPU-s."""
        if self.active:
            self._check_whole_gpus()

    def _check_whole_gpus(self) -> None:
        core = self._core
        split = {s.name for s in core.scenario.sites if any(p.split for p in s.gpus)}
        for service in core.scenario.services:
            shared = sorted(split.intersection(service.sites))
            if shared:
                raise ScenarioError(
                    "sites.gpus: reserved and spot capacity take whole-GPU jobs only; service "
                    f"{service.name!r} runs at {shared[0]!r}, whose GPUs are split"
                )
        runs = self._runs
        for j in range(len(core.jobs)):
            if sharing.is_fractional(runs.milli[j]) or runs.mig_profile[j]:
                raise ScenarioError(
                    "sites.gpus: reserved and spot capacity take whole-GPU jobs only; job "
                    f"{core.jobs.job_id[j]} asks for {runs.placement.needs(j)}"
                )

    def start(self) -> None:
        if self._trace:
            self._core.env.process(self._replay())

    # --- holdings and prices ---------------------------------------------------------------

    def check_capacity(
        self, action: object, j: int, site: Site, pool: Pool, kinds: Sequence[str]
    ) -> None:
        """PolicyError naming `action` unless `j` can take its GPUs of `site`'s `pool` from
        `kinds` now: distinct kinds of `CAPACITY_KINDS`, a split pool, enough of them free."""
        if (
            isinstance(kinds, str)
            or len(set(kinds)) != len(kinds)
            or not set(kinds) <= set(CAPACITY_KINDS)
        ):
            raise PolicyError(
                f"{action}: capacity must be a tuple of distinct kinds of {CAPACITY_KINDS}, "
                f"got {kinds!r}"
            )
        capacity = pool.capacity
        if capacity is None:
            raise PolicyError(
                f"{action}: the {pool.model} GPUs of {site.name} are not split into kinds"
            )
        gpus = self._runs.gpus[j]
        if sum(capacity.free[k] for k in kinds) < gpus:
            free = ", ".join(f"{capacity.free[k]} {k}" for k in kinds) or "none"
            raise PolicyError(
                f"{action}: job {self._core.jobs.job_id[j]} needs {gpus} GPUs, {site.name} "
                f"has {free} {pool.model} free"
            )

    def idle_hooks(self) -> frozenset[str]:
        """Without a pool split into capacity kinds, runs take and free no kind."""
        return frozenset() if self.active else frozenset({"run_started", "gpus_released"})

    def run_started(self, j: int, pool: Pool, capacity: Sequence[str] | None) -> None:
        """`j` starts on `pool`; on a split pool (whole GPUs) it takes its GPUs by kind,
        from `capacity` first to last (checked by `check_capacity`; None: `CAPACITY_KINDS`),
        and with a rate, an eviction is drawn for its spot nodes."""
        if pool.capacity is None:
            return
        core = self._core
        run = self._runs.live[j]
        order = CAPACITY_KINDS if capacity is None else capacity
        taken = pool.capacity.take(j, self._runs.gpus[j], order)
        spot = taken.get("spot", 0)
        if not (spot and self.rate_per_node_s):
            return
        nodes = math.ceil(spot / pool.gpus_per_node)
        after_s = float(self._rng.exponential(1.0 / (nodes * self.rate_per_node_s)))
        if core.env.now + after_s < core.horizon_s:
            core.env.timeout(after_s).callbacks.append(lambda _e: self._evict_run(j, run))

    def gpus_released(self, j: int, site: Site, pool: Pool) -> None:
        """`j` frees its GPUs of `pool`; of a split pool, if it was evicted, its spot GPUs
        go out of service until `unavailable_h` after the notice."""
        capacity = pool.capacity
        if capacity is None:
            return
        # Two holdings while its write is under way: the run stops (its GPUs, the newest),
        # or the write ends (`Checkpoints._written` took it out of `writing`: the oldest).
        newest = len(capacity.held[j]) > 1 and self._writing_on(j, pool)
        freed = capacity.give_back(j, newest)
        notice_s = self._evicting.pop(id(freed), None)
        spot = freed.get("spot", 0)
        if notice_s is not None and spot:
            self._withdraw(site, pool, spot, notice_s)

    def _withdraw(self, site: Site, pool: Pool, gpus: int, notice_s: float) -> None:
        assert self.config is not None
        site.withdraw(pool, gpus)
        core = self._core
        back_s = notice_s + self.config.unavailable_h * 3600.0
        if back_s < core.horizon_s:
            core.env.timeout(back_s - core.env.now).callbacks.append(
                lambda _e: self._restore(site, pool, gpus)
            )

    def _restore(self, site: Site, pool: Pool, gpus: int) -> None:
        site.restore(pool, gpus)
        self._core.request_decision()  # GPUs are free

    def _writing_on(self, j: int, pool: Pool) -> bool:
        """`j`'s checkpoint write on `pool` is under way."""
        write = self._checkpoints.writing.get(j)
        return write is not None and write.pool is pool

    # --- evictions -------------------------------------------------------------------------

    def _evict_run(self, j: int, run: Run) -> None:
        """A drawn eviction: `j` is evicted if `run` is still its run (not stopped since)."""
        if self._runs.live.get(j) is run:
            self.evict(j)

    def _replay(self):
        env = self._core.env
        for t_s, h, gpus in self._trace:
            if t_s >= self._core.horizon_s:
                return
            if t_s > env.now:
                yield env.timeout(t_s - env.now)
            self._reclaim(h, gpus)

    def _reclaim(self, h: int, gpus: int) -> None:
        """`gpus` spot GPUs of site `h` are reclaimed now: running jobs holding spot GPUs
        there are evicted (drawn weighted by their run's spot GPUs, not those of a checkpoint
        write of theirs under way) until they held as many, then free spot GPUs go out of
        service for the rest."""
        core = self._core
        site = self._fleet.sites[h]
        now = core.env.now
        left = gpus
        while left > 0:
            holders = {
                j: n
                for j, run in self._runs.live.items()
                if run.site is site
                and run.pool.capacity is not None
                and (n := run.pool.capacity.holding(j, newest=True).get("spot", 0))
            }
            if not holders:
                break
            j = weighted_draw(self._rng, list(holders), list(holders.values()))
            left -= holders[j]
            self.evict(j)
        for pool in site.pools:
            capacity = pool.capacity
            if left <= 0 or capacity is None:
                continue
            n = min(left, capacity.free["spot"])
            if n:
                self._withdraw(site, pool, n, now)
                left -= n

    def evict(self, j: int) -> None:
        """Running `j`'s spot GPUs are evicted now (the notice): it writes its checkpoint
        within the notice if it can, else falls back to its last one; it is pending again
        (event `evict`, its value the work lost, reference GPU-h)."""
        assert self.config is not None
        core = self._core
        run = self._runs.live[j]
        site = run.site
        now = core.env.now
        assert run.pool.capacity is not None
        self._evicting[id(run.pool.capacity.holding(j, newest=True))] = now  # the run's
        checkpoints = self._checkpoints
        fits = checkpoints.timing.write_s(j, site) <= self.config.notice_s
        if checkpoints.timing.interval_s is None and fits:
            lost_gpu_s = 0.0
            checkpoints.leave(j)  # its GPUs are freed (`gpus_released`) when the write ends
        else:
            lost_gpu_s = checkpoints.fail(j, self._failures.restart_gpu_s.get(j))
            self.lost_gpu_s[j] = self.lost_gpu_s.get(j, 0.0) + lost_gpu_s
        self.count[j] = self.count.get(j, 0) + 1
        self._book.requeue(j)
        core.events.append(now, "evict", j, site.index, lost_gpu_s / 3600.0, detail=run.pool.model)
        core.request_decision()

    # --- results ---------------------------------------------------------------------------

    def reserved_cost(self) -> float:
        """Every reserved GPU over the whole run at the reserved price, the scenario's
        currency (NaN: a model without a reserved price)."""
        hours = self._core.horizon_s / 3600.0
        cost = 0.0
        for site in self._fleet.sites:
            for pool in site.pools:
                reserved = 0 if pool.capacity is None else pool.capacity.total["reserved"]
                if reserved:
                    cost += reserved * hours * self._core.prices.charged(pool.model, "reserved")
        return cost

    def write_results(self, out: ResultParts) -> None:
        """Without capacity kinds, the summary keys `spot_evictions`,
        `work_lost_evictions_gpu_h`, `spot_gpu_h` and `cost_reserved` are None and no column
        is added. With them: columns `evictions`, `work_lost_evictions_gpu_h` (reference
        GPU-h) and `spot_gpu_h`, their sums, and `cost_reserved`, added to `cost_compute`."""
        summary = out.summary
        if not self.active:
            for key in ("spot_evictions", "work_lost_evictions_gpu_h", "spot_gpu_h"):
                summary[key] = None
            summary["cost_reserved"] = None
            return
        n = len(self._core.jobs)
        count = per_job(n, self.count, np.int64)
        lost_gpu_h = per_job(n, self.lost_gpu_s) / 3600.0
        spot_gpu_h = per_job(n, self._runs.charges.spot_gpu_s) / 3600.0
        out.job_columns.update(
            evictions=count, work_lost_evictions_gpu_h=lost_gpu_h, spot_gpu_h=spot_gpu_h
        )
        summary["spot_evictions"] = int(count.sum())
        summary["work_lost_evictions_gpu_h"] = float(pd.Series(lost_gpu_h).sum())
        summary["spot_gpu_h"] = float(pd.Series(spot_gpu_h).sum())
        reserved = self.reserved_cost()
        summary["cost_reserved"] = None if math.isnan(reserved) else reserved
        summary["cost_compute"] += reserved
        out.meta["capacity"] = {
            "eviction": None
            if self.config is None
            else self.config.model_dump(mode="json", exclude_none=True),
        }
