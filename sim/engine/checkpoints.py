"""Checkpoints and WAN moves: what suspending, resuming and migrating a job costs.

Suspending a job costs a checkpoint write (its GPUs held at idle power meanwhile),
resuming it a read, at the site's storage bandwidth. With periodic checkpoints
(`workload.checkpoint_interval_h`) a job stops at once and falls back to its last
checkpoint, losing the work since; the writes themselves slow it by the fraction of time
they stall it. A start away from the job's origin moves its data over the WAN, a resume or
migration away from its checkpoint moves the checkpoint: time, energy and carbon of the
route (`sim.network.Wan`), charged to the job. With `wan.contention`, the moves share link
capacity (`sim.network.Transfers`, max-min fair): a move's end is known only when it
arrives, so the job is held until then, and it is charged exactly for its actual rates.

A job held at a site (its data or checkpoint on the way, being read, or its nodes booting)
has not computed there. If it leaves before its bytes arrive, the move is stopped: it pays
for the bits sent so far, its data or checkpoint still lies where it came from, and the
next move goes from there (one move charged, not one to the site it left and another on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component
from sim.engine.ledger import Pool, Site
from sim.network import Transfer, Wan
from sim.results import ResultParts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.engine.runs import Runs

__all__ = ["CheckpointWrite", "Checkpoints", "Inbound", "WanMoves"]


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
class Inbound:
    """The move of a job's data or checkpoint to the site that holds it until they arrive."""

    src: Site
    dest: Site
    gb: float
    checkpoint: bool
    """True: the job's checkpoint (read at `dest` once it arrives); False: its input data."""
    t0_s: float
    """When sending starts (after a checkpoint write still under way), s."""
    send_s: float
    """Time to send it at its route's rate, s (inf with contention: not known in advance)."""
    deliver_s: float
    """When the last bit arrives, s (inf with contention until it has)."""
    energy_kwh: float = 0.0
    """What the job was charged for it so far, kWh."""
    carbon_kg: float = 0.0
    """What the job was charged for it so far, kg."""
    tid: int | None = None
    """With contention, its id in `wan.transfers` (None: not sending yet)."""


@dataclass(slots=True)
class WanMoves:
    """What one job moved over the WAN in all: GB, energy (kWh) and carbon (kg)."""

    gb: float = 0.0
    energy_kwh: float = 0.0
    carbon_kg: float = 0.0


class Checkpoints(Component):
    """Checkpoint writes and reads, periodic checkpoints, and WAN moves, per job."""

    name = "checkpoints"
    uses = ("runs", "fleet")

    __slots__ = (
        "_core",
        "_runs",
        "_fleet",
        "wan",
        "contention",
        "inbound",
        "left_behind",
        "_wake_s",
        "timing",
        "writing",
        "since_last",
        "stored_at",
        "checkpoint_kwh",
        "work_lost_gpu_s",
        "wan_moves",
    )

    def __init__(self, core: Core, *, runs: Runs, fleet: Fleet, wan: Wan | None):
        self._core = core
        self._runs = runs
        self._fleet = fleet
        self.wan = wan
        """The WAN data and checkpoints cross between sites (None: moves are free)."""
        self.contention = wan is not None and bool(wan.config.contention)
        """Moves share link capacity in `wan.transfers` (else each has its route alone)."""
        self.inbound: dict[int, Inbound] = {}
        """Held jobs whose data or checkpoint is moving (or was moved) to where they are held."""
        self.left_behind: dict[int, Inbound] = {}
        """Jobs that left a site before their data or checkpoint arrived there: what still
        has to move (from `stored_at`) to wherever they run next."""
        self._wake_s = math.inf
        """With contention, the earliest wake-up scheduled for `wan.transfers`, s."""
        self.timing = runs.placement.timing
        """Periodic checkpoints: their interval and the stalls of their writes."""
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

    def idle_hooks(self) -> frozenset[str]:
        """Without periodic checkpoints, starts and stops are none of its business."""
        if self.timing.interval_s is None:
            return frozenset({"run_started", "run_stopped"})
        return frozenset()

    def run_started(self, j: int, pool: Pool, capacity: Sequence[str] | None) -> None:
        """With periodic checkpoints: `j` starts running (or computing again)."""
        self.since_last[j] = PeriodicCheckpoint(0.0, self._runs.remaining_gpu_s[j])

    def run_stopped(self, j: int) -> None:
        """With periodic checkpoints: `j` stopped running."""
        self.since_last.pop(j, None)

    def add_kwh(self, j: int, kwh: float) -> None:
        if kwh > 0.0:
            self.checkpoint_kwh[j] = self.checkpoint_kwh.get(j, 0.0) + kwh

    def segment_closed(
        self, j: int, site: Site, pool: Pool, t0_s: float, t1_s: float, energy_kwh: float
    ) -> None:
        """A loading hold's energy is all checkpoint energy; a computing segment with
        periodic checkpoints gives the writes their share (`periodic_segment`)."""
        runs = self._runs
        if j in runs.loading:
            self.add_kwh(j, energy_kwh)
        elif self.timing.interval_s is not None and j not in runs.holding:
            self.periodic_segment(j, site, energy_kwh, t1_s - t0_s)

    def periodic_segment(self, j: int, site: Site, energy_kwh: float, dt: float) -> None:
        """A computing segment of `dt` s with periodic checkpoints: the writes' share of its
        energy; the running time since the last checkpoint advances, and when one (or more)
        fell in the segment, the last is that many seconds before now."""
        assert self.timing.interval_s is not None
        self.add_kwh(j, energy_kwh * (1.0 - self.timing.duty(j, site)))
        since = self.since_last[j]
        since.running_s += dt
        if since.running_s >= self.timing.interval_s:
            since.running_s %= self.timing.interval_s
            runs = self._runs
            since.remaining_gpu_s = runs.remaining_gpu_s[j] + runs.live[j].rate * since.running_s

    def work_since_checkpoint(self, j: int, now: float) -> float:
        """With periodic checkpoints: work running job `j` did since its last checkpoint,
        reference GPU-s (what it loses if it stops now)."""
        assert self.timing.interval_s is not None
        runs = self._runs
        since = self.since_last[j]  # every running job has one
        since_s, at_ckpt = since.running_s, since.remaining_gpu_s
        if j not in runs.holding:
            run = runs.live[j]
            since_s += now - run.seg_start_s
            if since_s >= self.timing.interval_s:
                return run.rate * (since_s % self.timing.interval_s)
        return max(0.0, at_ckpt - runs.remaining_now_gpu_s(j))

    def leave(self, j: int) -> None:
        """A running job stops to be suspended or migrated. With periodic checkpoints, it
        falls back to its last one (the work since is lost); else it writes a checkpoint
        now, holding its GPUs at idle power for the write."""
        core, runs = self._core, self._runs
        now = core.env.now
        run = runs.live[j]
        site, pool = run.site, run.pool
        self._store(j, site, now)
        if self.timing.interval_s is not None:
            lost = self._fall_back(j)
            if lost > 0.0:
                self.work_lost_gpu_s[j] = self.work_lost_gpu_s.get(j, 0.0) + lost
            runs.stop(j)
            return
        write_s = self.timing.write_s(j, site)
        if write_s <= 0.0 or j in runs.holding:
            runs.stop(j)  # nothing to write, or it never ran since its last checkpoint
            return
        runs.set_down(j)
        self.writing[j] = CheckpointWrite(site, pool, now, now + write_s)
        core.events.append(now, "checkpoint", j, site.index, value=write_s)
        core.env.timeout(write_s).callbacks.append(lambda _e: self._written(j))

    def fail(self, j: int, restart_gpu_s: float | None) -> float:
        """Running job `j` fails: it falls back to its last checkpoint (the last periodic
        one; without periodic checkpoints the one it last started from, `restart_gpu_s` of
        work left) and frees its GPUs at once, writing nothing. Back at the start of its
        work, it has no checkpoint to read. Returns the work lost, reference GPU-s."""
        runs = self._runs
        now = self._core.env.now
        self._store(j, runs.live[j].site, now)
        lost = self._fall_back(j, restart_gpu_s)
        runs.stop(j)
        if runs.remaining_gpu_s[j] >= runs.work_gpu_h[j] * 3600.0:
            self.stored_at.pop(j)
            self.left_behind.pop(j, None)
        return lost

    def _store(self, j: int, site: Site, now: float) -> None:
        """Running `j` leaves `site`: its checkpoint lies there, or, if it was held before
        its bytes arrived, the move stops and they lie where they came from."""
        self.stored_at[j] = site
        inbound = self.inbound.pop(j, None)
        if inbound is not None and now < inbound.deliver_s:  # held: its bytes not there yet
            self._stop_move(j, inbound, now)
            self.stored_at[j] = inbound.src
            self.left_behind[j] = inbound

    def _fall_back(self, j: int, restart_gpu_s: float | None = None) -> float:
        """Running `j`'s run is charged up to now and its work left set back to its last
        checkpoint's: the last periodic one, else `restart_gpu_s`. Returns the work lost,
        reference GPU-s."""
        runs = self._runs
        runs.close_segment(j, self._core.env.now)  # may pass a periodic checkpoint
        if self.timing.interval_s is not None:
            restart_gpu_s = self.since_last.pop(j).remaining_gpu_s
        assert restart_gpu_s is not None
        lost = restart_gpu_s - runs.remaining_gpu_s[j]
        if lost > 0.0:
            runs.rewind(j, restart_gpu_s)
        return lost

    def _written(self, j: int) -> None:
        """`j`'s checkpoint is written: charge the write, free the GPUs it held."""
        core = self._core
        w = self.writing.pop(j)
        kwh = self._runs.charges.charge(
            j, w.site, w.pool, w.pool.idle_w, w.since_s, w.until_s, write=True
        )
        self.add_kwh(j, kwh)
        self._runs.release(j, w.site, w.pool, w.pool.idle_w)
        core.request_decision()  # GPUs are free

    def departure(self, j: int) -> tuple[Site, float, bool]:
        """What running job `j` would move if it left now: from which site, GB, and whether
        it is its checkpoint (read on arrival) or its input data. A job held before its bytes
        arrived sends them from where they still lie."""
        runs = self._runs
        inbound = self.inbound.get(j)
        if inbound is not None and self._core.env.now < inbound.deliver_s:
            return inbound.src, inbound.gb, inbound.checkpoint
        return runs.live[j].site, float(self._core.jobs.checkpoint_gb[j]), True

    def write_left_s(self, j: int) -> float:
        """The rest of `j`'s checkpoint write under way, s (0: none)."""
        writing = self.writing.get(j)
        return max(0.0, writing.until_s - self._core.env.now) if writing else 0.0

    def start_s(self, j: int, dest: Site) -> float:
        """Time before pending `j` computes on `dest`: the move and read of its checkpoint
        if it failed after one (`load_s`), else the move of its input data from its
        origin (charged to the job), s."""
        if j in self.stored_at:
            return self.load_s(j, dest, move=True)
        core = self._core
        origin = self._fleet.sites[core.jobs.origin_site[j]]
        return self.move(j, origin, dest, float(core.jobs.data_gb[j]), core.env.now)

    def load_s(self, j: int, dest: Site, move: bool = False) -> float:
        """Time before a suspended or migrating job runs on `dest`: the rest of its checkpoint
        write, its transfer over the WAN from where it was written (charged to the job if
        `move`), then the read at `dest`'s bandwidth, s (inf with contention if `move`: the
        hold ends when the transfer arrives). A job that left a site before its bytes
        arrived moves them from where they lie instead (input data is not read)."""
        left_s = self.write_left_s(j)
        behind = self.left_behind.pop(j, None) if move else self.left_behind.get(j)
        if behind is None:
            gb, checkpoint = float(self._core.jobs.checkpoint_gb[j]), True
        else:
            gb, checkpoint = behind.gb, behind.checkpoint
        src = self.stored_at.get(j, dest)
        now = self._core.env.now
        move_s = self.move(j, src, dest, gb, now + left_s, charge=move, checkpoint=checkpoint)
        return left_s + move_s + (gb / dest.checkpoint_read_gbps if checkpoint else 0.0)

    def move(
        self,
        j: int,
        src: Site,
        dest: Site,
        gb: float,
        t0_s: float,
        charge: bool = True,
        checkpoint: bool = False,
    ) -> float:
        """Move `gb` GB of job `j`'s data (`checkpoint`: its checkpoint) from `src` to `dest`
        over the WAN, sending from `t0_s`; returns the time until it arrives, s. If `charge`,
        the job pays for it and `dest` holds the job until it arrives: without contention
        the move is priced now at its route's rate; with contention it joins
        `wan.transfers` at `t0_s` and is charged when it arrives, and the time returned is
        inf (the hold ends at the delivery). Without `charge`, the time alone (an estimate
        with contention)."""
        wan = self.wan
        if wan is None or src is dest or gb <= 0.0:
            return 0.0
        if not charge:
            return wan.totals(src.name, dest.name, gb, t0_s)[0]
        core = self._core
        now = core.env.now
        if self.contention:
            inbound = Inbound(src, dest, gb, checkpoint, t0_s, math.inf, math.inf)
            self.inbound[j] = inbound
            if t0_s > now:  # after the checkpoint write
                core.env.timeout(t0_s - now).callbacks.append(lambda _e: self._send(j, inbound))
            else:
                self._send(j, inbound)
            duration_s = math.inf
        else:
            duration_s, energy_kwh, carbon_kg = wan.totals(src.name, dest.name, gb, t0_s)
            self._charge(j, gb, energy_kwh, carbon_kg)
            send_s = duration_s - wan.route(src.name, dest.name).propagation_s
            self.inbound[j] = Inbound(
                src, dest, gb, checkpoint, t0_s, send_s, t0_s + duration_s, energy_kwh, carbon_kg
            )
        core.events.append(now, "transfer", j, dest.index, gb, detail=src.name)
        return duration_s

    def run_computing(self, j: int) -> None:
        """Held job `j` computes now: what moved to it is no longer in question."""
        self.inbound.pop(j, None)

    def _charge(self, j: int, gb: float, energy_kwh: float, carbon_kg: float) -> None:
        moved = self.wan_moves.get(j)
        if moved is None:
            moved = self.wan_moves[j] = WanMoves()
        moved.gb += gb
        moved.energy_kwh += energy_kwh
        moved.carbon_kg += carbon_kg

    def _stop_move(self, j: int, inbound: Inbound, now: float) -> None:
        """Held `j` leaves before `inbound` arrived: it pays only for the bits sent by now."""
        wan = self.wan
        assert wan is not None
        if self.contention:
            if inbound.tid is not None:  # else: still writing, nothing sent
                sent = wan.transfers.cancel(inbound.tid, now)
                self._charge(j, sent.gb, sent.energy_kwh, sent.carbon_kg)
                self._wake_transfers()  # the others speed up
            return
        share = min(1.0, max(0.0, (now - inbound.t0_s) / inbound.send_s))
        src, dst = inbound.src.name, inbound.dest.name
        _, kwh, kg = wan.totals(src, dst, inbound.gb * share, inbound.t0_s)
        gb_unsent = 0.0 if share == 1.0 else inbound.gb * (1.0 - share)
        self._charge(j, -gb_unsent, kwh - inbound.energy_kwh, kg - inbound.carbon_kg)

    # --- contention: driving wan.transfers -------------------------------------------------

    def _send(self, j: int, inbound: Inbound) -> None:
        """Start sending `inbound` now, unless its job has left meanwhile."""
        if self.inbound.get(j) is not inbound:
            return
        assert self.wan is not None
        inbound.t0_s = now = self._core.env.now
        inbound.tid = self.wan.transfers.start(
            inbound.src.name, inbound.dest.name, inbound.gb, now, tag=j
        )
        self._wake_transfers()

    def _wake_transfers(self) -> None:
        """Schedule a wake-up at the transfers' next event (a delivery or a rate change),
        unless one is already due by then; stale wake-ups find nothing to do."""
        assert self.wan is not None
        t = self.wan.transfers.next_event_s()
        if t is None or t >= self._wake_s:
            return
        self._wake_s = t
        env = self._core.env
        env.timeout(max(0.0, t - env.now)).callbacks.append(lambda _e: self._transfers_due(t))

    def _transfers_due(self, t: float) -> None:
        assert self.wan is not None
        if t == self._wake_s:
            self._wake_s = math.inf
        now = self._core.env.now
        for sent in self.wan.transfers.advance(now):
            j = sent.tag
            inbound = self._delivered(j, sent)
            read_s = inbound.gb / inbound.dest.checkpoint_read_gbps if inbound.checkpoint else 0.0
            self._runs.end_hold(j, now + read_s)
        self._wake_transfers()

    def _delivered(self, j: int, sent: Transfer) -> Inbound:
        """`j`'s transfer arrived: charge its final record (energy and exact carbon)."""
        inbound = self.inbound[j]
        inbound.deliver_s = sent.end_s
        inbound.energy_kwh, inbound.carbon_kg = sent.energy_kwh, sent.carbon_kg
        self._charge(j, sent.gb, sent.energy_kwh, sent.carbon_kg)
        return inbound

    def _close_transfers(self, now_s: float) -> None:
        """With contention, at the horizon: moves still under way are charged whole, as
        they would end at the current rates (as moves are without contention)."""
        wan = self.wan
        assert wan is not None
        for sent in wan.transfers.advance(now_s):
            self._delivered(sent.tag, sent)
        for j, inbound in self.inbound.items():
            if inbound.deliver_s != math.inf:
                continue
            if inbound.tid is None:  # still writing: priced alone from when it would start
                src, dst = inbound.src.name, inbound.dest.name
                _, kwh, kg = wan.totals(src, dst, inbound.gb, inbound.t0_s)
                self._charge(j, inbound.gb, kwh, kg)
            else:
                sent = wan.transfers.estimate(inbound.tid)
                self._charge(j, sent.gb, sent.energy_kwh, sent.carbon_kg)

    def close(self, now_s: float) -> None:
        charges = self._runs.charges
        if self.contention:
            self._close_transfers(now_s)
        for j, w in self.writing.items():
            until_s = min(w.until_s, now_s)
            kwh = charges.charge(j, w.site, w.pool, w.pool.idle_w, w.since_s, until_s, write=True)
            self.add_kwh(j, kwh)

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
