"""Checkpoints and WAN moves: what suspending, resuming and migrating a job costs.

Suspending a job costs a checkpoint write (its GPUs held at idle power meanwhile),
resuming it a read, at the site's storage bandwidth. With periodic checkpoints
(`workload.checkpoint_interval_h`) a job stops at once and falls back to its last
checkpoint, losing the work since; the writes themselves slow it by the fraction of time
they stall it. A start away from the job's origin moves its data over the WAN, a resume or
migration away from its checkpoint moves the checkpoint: time, energy and carbon of the
route (`sim.network.Wan`), charged to the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.cluster import Pool, Site
from sim.engine.component import Component
from sim.network import Wan
from sim.results import ResultParts

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["CheckpointWrite", "Checkpoints", "WanMoves"]


@dataclass(slots=True)
class CheckpointWrite:
    """A checkpoint being written on the GPUs a suspended or migrated job left."""

    site: Site
    pool: Pool
    since_s: float
    until_s: float


@dataclass(slots=True)
class PeriodicCheckpoint:
    """A running job's progress since its last periodic checkpoint."""

    running_s: float
    """Running time since the last checkpoint, s."""
    remaining_gpu_s: float
    """Work left at that checkpoint, reference GPU-s."""


@dataclass(slots=True)
class WanMoves:
    """What one job moved over the WAN in all: GB, energy (kWh) and carbon (kg)."""

    gb: float = 0.0
    energy_kwh: float = 0.0
    carbon_kg: float = 0.0


class Checkpoints(Component):
    """Checkpoint writes and reads, periodic checkpoints, and WAN moves, per job."""

    __slots__ = (
        "_core",
        "wan",
        "interval_s",
        "writing",
        "since_last",
        "stored_at",
        "checkpoint_kwh",
        "work_lost_gpu_s",
        "wan_moves",
    )

    def __init__(self, core: Engine, wan: Wan | None):
        self._core = core
        self.wan = wan
        """The WAN data and checkpoints cross between sites (None: moves are free)."""
        interval_h = core.scenario.workload.checkpoint_interval_h
        self.interval_s = None if interval_h is None else interval_h * 3600.0
        """Periodic checkpoints every `interval_s` of running time (None: on suspension)."""
        self.writing: dict[int, CheckpointWrite] = {}
        """Suspended or migrated jobs still writing their checkpoint on the GPUs they left."""
        self.since_last: dict[int, PeriodicCheckpoint] = {}
        """With periodic checkpoints, per running job."""
        self.stored_at: dict[int, Site] = {}
        """Where each stopped job's checkpoint lies."""
        self.checkpoint_kwh: dict[int, float] = {}
        """Facility energy spent writing and loading checkpoints, per job, kWh."""
        self.work_lost_gpu_s: dict[int, float] = {}
        """Work redone after restarting from a periodic checkpoint, reference GPU-s."""
        self.wan_moves: dict[int, WanMoves] = {}
        """Per job that moved data over the WAN."""

    def started(self, j: int) -> None:
        """With periodic checkpoints: `j` starts running (or computing again)."""
        self.since_last[j] = PeriodicCheckpoint(0.0, self._core.runs.remaining_gpu_s[j])

    def stopped(self, j: int) -> None:
        """With periodic checkpoints: `j` stopped running."""
        self.since_last.pop(j, None)

    def add_kwh(self, j: int, kwh: float) -> None:
        if kwh > 0.0:
            self.checkpoint_kwh[j] = self.checkpoint_kwh.get(j, 0.0) + kwh

    def duty(self, j: int, site: Site) -> float:
        """Fraction of running time spent computing rather than writing periodic checkpoints."""
        if self.interval_s is None:
            return 1.0
        return self.interval_s / (self.interval_s + self.write_s(j, site))

    def segment_closed(
        self, j: int, site: Site, pool: Pool, t0_s: float, t1_s: float, energy_kwh: float
    ) -> None:
        """A loading hold's energy is all checkpoint energy; a computing segment with
        periodic checkpoints gives the writes their share (`periodic_segment`)."""
        runs = self._core.runs
        if j in runs.loading:
            self.add_kwh(j, energy_kwh)
        elif self.interval_s is not None and j not in runs.holding:
            self.periodic_segment(j, site, energy_kwh, t1_s - t0_s)

    def periodic_segment(self, j: int, site: Site, energy_kwh: float, dt: float) -> None:
        """A computing segment of `dt` s with periodic checkpoints: the writes' share of its
        energy; the running time since the last checkpoint advances, and when one (or more)
        fell in the segment, the last is that many seconds before now."""
        assert self.interval_s is not None
        self.add_kwh(j, energy_kwh * (1.0 - self.duty(j, site)))
        since = self.since_last[j]
        since.running_s += dt
        if since.running_s >= self.interval_s:
            since.running_s %= self.interval_s
            runs = self._core.runs
            since.remaining_gpu_s = runs.remaining_gpu_s[j] + runs.rate[j] * since.running_s

    def work_since_checkpoint(self, j: int, now: float) -> float:
        """With periodic checkpoints: work running job `j` did since its last checkpoint,
        reference GPU-s (what it loses if it stops now)."""
        assert self.interval_s is not None
        runs = self._core.runs
        since = self.since_last[j]  # every running job has one
        since_s, at_ckpt = since.running_s, since.remaining_gpu_s
        if j not in runs.holding:
            since_s += now - runs.seg_start_s[j]
            if since_s >= self.interval_s:
                return runs.rate[j] * (since_s % self.interval_s)
        return max(0.0, at_ckpt - runs.remaining_now_gpu_s(j))

    def write_s(self, j: int, site: Site) -> float:
        """Time to write `j`'s checkpoint at `site`'s storage bandwidth, s."""
        return float(self._core.jobs.checkpoint_gb[j]) / site.checkpoint_write_gbps

    def leave(self, j: int) -> None:
        """A running job stops to be suspended or migrated. With periodic checkpoints, it
        falls back to its last one (the work since is lost); else it writes a checkpoint
        now, holding its GPUs at idle power for the write."""
        core, runs = self._core, self._core.runs
        now = core.env.now
        site, pool = runs.site[j], runs.pool[j]
        assert site is not None and pool is not None
        self.stored_at[j] = site
        if self.interval_s is not None:
            runs.close_segment(j, now)
            at_ckpt = self.since_last.pop(j).remaining_gpu_s
            lost = at_ckpt - runs.remaining_gpu_s[j]
            if lost > 0.0:
                self.work_lost_gpu_s[j] = self.work_lost_gpu_s.get(j, 0.0) + lost
                runs.rewind(j, at_ckpt)
            runs.stop(j)
            return
        write_s = self.write_s(j, site)
        if write_s <= 0.0 or j in runs.holding:
            runs.stop(j)  # nothing to write, or it never ran since its last checkpoint
            return
        runs.set_down(j)
        self.writing[j] = CheckpointWrite(site, pool, now, now + write_s)
        core.events.append(now, "checkpoint", j, site.index, value=write_s)
        core.env.timeout(write_s).callbacks.append(lambda _e: self._written(j))

    def _written(self, j: int) -> None:
        """`j`'s checkpoint is written: charge the write, free the GPUs it held."""
        core = self._core
        w = self.writing.pop(j)
        self.add_kwh(j, core.runs.charge(j, w.site, w.pool, w.pool.idle_w, w.since_s, w.until_s))
        core.fleet.release(w.site, w.pool, core.runs.gpus[j], w.pool.idle_w)
        core.request_decision()  # GPUs are free

    def load_s(self, j: int, dest: Site, move: bool = False) -> float:
        """Time before a suspended or migrating job runs on `dest`: the rest of its checkpoint
        write, its transfer over the WAN from where it was written (charged to the job if
        `move`), then the read at `dest`'s bandwidth, s."""
        now = self._core.env.now
        writing = self.writing.get(j)
        left_s = max(0.0, writing.until_s - now) if writing else 0.0
        gb = float(self._core.jobs.checkpoint_gb[j])
        src = self.stored_at.get(j, dest)
        move_s = self.move(j, src, dest, gb, now + left_s, charge=move)
        return left_s + move_s + gb / dest.checkpoint_read_gbps

    def move(
        self, j: int, src: Site, dest: Site, gb: float, t0_s: float, charge: bool = True
    ) -> float:
        """Move `gb` GB of job `j`'s data from `src` to `dest` over the WAN from `t0_s`;
        returns the time it takes, s, and (if `charge`) charges its energy and carbon."""
        if self.wan is None or src is dest or gb <= 0.0:
            return 0.0
        duration_s, energy_kwh, carbon_kg = self.wan.totals(src.name, dest.name, gb, t0_s)
        if charge:
            moved = self.wan_moves.get(j)
            if moved is None:
                moved = self.wan_moves[j] = WanMoves()
            moved.gb += gb
            moved.energy_kwh += energy_kwh
            moved.carbon_kg += carbon_kg
            self._core.events.append(
                self._core.env.now, "transfer", j, dest.index, gb, detail=src.name
            )
        return duration_s

    def close(self, now_s: float) -> None:
        runs = self._core.runs
        for j, w in self.writing.items():
            self.add_kwh(
                j, runs.charge(j, w.site, w.pool, w.pool.idle_w, w.since_s, min(w.until_s, now_s))
            )

    def write_results(self, out: ResultParts) -> None:
        """Columns `checkpoint_kwh`, `wan_gb`, `wan_energy_kwh`, `wan_carbon_kg`,
        `work_lost_gpu_h`, and their sums."""
        n = len(self._core.jobs)
        checkpoint_kwh = np.zeros(n)
        for j, kwh in self.checkpoint_kwh.items():
            checkpoint_kwh[j] = kwh
        work_lost_gpu_h = np.zeros(n)
        for j, gpu_s in self.work_lost_gpu_s.items():
            work_lost_gpu_h[j] = gpu_s / 3600.0
        wan = np.zeros((n, 3))  # GB, kWh, kg
        for j, moved in self.wan_moves.items():
            wan[j] = (moved.gb, moved.energy_kwh, moved.carbon_kg)
        out.job_columns.update(
            checkpoint_kwh=checkpoint_kwh,
            wan_gb=wan[:, 0],
            wan_energy_kwh=wan[:, 1],
            wan_carbon_kg=wan[:, 2],
            work_lost_gpu_h=work_lost_gpu_h,
        )
        summary = out.summary
        summary["energy_checkpoint_kwh"] = float(pd.Series(checkpoint_kwh).sum())
        summary["work_lost_gpu_h"] = float(pd.Series(work_lost_gpu_h).sum())
        summary["carbon_wan_kg"] = float(pd.Series(wan[:, 2]).sum())
        summary["energy_wan_kwh"] = float(pd.Series(wan[:, 1]).sum())
        summary["wan_data_gb"] = float(pd.Series(wan[:, 0]).sum())
