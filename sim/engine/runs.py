"""Job runs: where each running job computes, how fast, at what power, and what it costs.

Progress is exact under changing speed: a running job's speed is constant between
changes (start, cap change, suspend, migrate), so at each change the run closes a
segment, subtracts speed x duration from the work left, charges the segment's energy and
carbon (`sim.engine.run_charges`: power x the exact integral of PUE, and of PUE x carbon
intensity), and schedules the completion from the work left. A completion is one timeout
carrying a callback, cancelled by giving the job's run a new token (or by ending the run).

How fast a job computes and at what power, and what it takes of a pool (whole GPUs, a
share of a shared GPU, a MIG slice), is `sim.engine.run_placement`. When a job joins or
leaves a shared GPU, the jobs computing on it are re-timed here.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component
from sim.engine.jobs import RUNNING
from sim.engine.ledger import Pool, Site
from sim.engine.run_charges import RunCharges
from sim.engine.run_placement import Placement, check_scaling
from sim.models import sharing
from sim.results import ResultParts, ideal_runtime_s

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.engine.jobs import JobBook

__all__ = ["Run", "Runs"]


def _typed(code: str, values: np.ndarray) -> array:
    """`values` as a typed array of type `code` ("i": int32, "d": float64, ...), copied
    without a Python object per value."""
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=np.dtype(code)).tobytes())
    return out


class Run:
    """What changes while one job runs: where, how fast, at what draw, since when. Kept
    for running (and held) jobs only, which are few next to all jobs."""

    __slots__ = ("site", "pool", "rate", "draw_w", "seg_start_s", "token")

    def __init__(self, site: Site, pool: Pool, rate: float, draw_w: float, seg_start_s: float):
        self.site = site
        self.pool = pool
        self.rate = rate
        """Progress, reference GPU-seconds per second (0 while held)."""
        self.draw_w = draw_w
        """Active power of one of the job's GPUs, W."""
        self.seg_start_s = seg_start_s
        """Start of the current segment (the last change of speed or power), s."""
        self.token = -1
        """The scheduled completion or end of hold that is still valid (a callback
        carrying another token does nothing)."""


class Runs(Component):
    """Per-job run state: columns indexed by job, the hot state of the running jobs (`live`),
    their holds and completions; their charges (`charges`) and speeds (`placement`)."""

    name = "runs"
    uses = ("book", "fleet")

    __slots__ = (
        "_core",
        "_book",
        "_fleet",
        "gpus",
        "milli",
        "gpu_share",
        "mig_profile",
        "profile",
        "parallelism",
        "work_gpu_h",
        "remaining_gpu_s",
        "cap_w",
        "live",
        "_tokens",
        "holding",
        "loading",
        "boot_end_s",
        "model",
        "placement",
        "charges",
    )

    def __init__(self, core: Core, *, book: JobBook, fleet: Fleet):
        self._core = core
        self._book = book
        self._fleet = fleet
        jobs = core.jobs
        n = len(jobs)
        # Per-job numbers in typed arrays of the narrowest type that holds them (not a
        # list slot and a Python object per job: memory at millions of jobs).
        self.gpus = _typed("i", jobs.gpus)
        self.milli = _typed("i", jobs.gpu_milli)
        """Thousandths of one GPU the job holds (1000: whole GPUs; `sim.models.sharing`)."""
        self.gpu_share = _typed("d", jobs.gpus * jobs.gpu_milli / sharing.MILLI_PER_GPU)
        """GPUs the job holds and is charged for: `gpus`, or a fractional job's share, or a
        MIG job's slice's SM share of its GPU (set when it starts on a pool)."""
        self.mig_profile: list[str] = jobs.mig_profile.tolist()
        """The MIG profile of the slice a job runs on ("": whole GPUs or a share of one)."""
        self.profile: list[str] = jobs.profile.tolist()
        """The job's profile; a target job's may change at its first start (`retrain`)."""
        self.parallelism: list[str] = jobs.parallelism.tolist()
        """The job's parallel scheme (`sim.models.scaling.SCHEMES`), used with `[scaling]`."""
        self.work_gpu_h = _typed("d", jobs.work_gpu_h)
        """The job's total work, reference GPU-h (a target job's follows its batch size)."""
        self.remaining_gpu_s = _typed("d", jobs.work_gpu_h * 3600.0)
        """Work left, reference GPU-seconds (as of the start of the current segment)."""
        self.cap_w: list[float | None] = [None] * n
        """The job's own cap, W (None: the site's cap, or uncapped)."""
        self.live: dict[int, Run] = {}
        """The running jobs (held ones included): their `Run`."""
        self._tokens = itertools.count()
        """Tokens of scheduled completions and ends of hold, never reused."""
        self.holding: set[int] = set()
        """Running jobs held at idle power: nodes booting for them, or a checkpoint loading."""
        self.loading: set[int] = set()
        """Held jobs whose data or checkpoint is moving or being read."""
        self.boot_end_s: dict[int, float] = {}
        """Held jobs waiting for a transfer whose end is not known yet (WAN contention):
        when their nodes are up, s. `end_hold` ends the hold."""
        # Per-job results.
        self.model: list[str | None] = [None] * n
        """The GPU model the job last ran on."""
        self.charges = RunCharges(core, self.gpu_share)
        """Per job: energy, carbon, embodied carbon, GPU time, cost."""
        self.placement = Placement(
            core,
            fleet,
            self.gpus,
            self.milli,
            self.gpu_share,
            self.mig_profile,
            self.profile,
            self.parallelism,
        )
        """Speed, draw, fit and boot of the jobs on pools (from the columns above, which
        are changed in place only)."""
        if core.scenario.scaling is not None:
            check_scaling(jobs, [p for s in self._fleet.sites for p in s.pools], core.scenario)

    # --- work ------------------------------------------------------------------------------

    def remaining_now_gpu_s(self, j: int) -> float:
        """Work left now, reference GPU-s."""
        if self._book.state[j] == RUNNING:
            run = self.live[j]
            return max(
                0.0, self.remaining_gpu_s[j] - run.rate * (self._core.env.now - run.seg_start_s)
            )
        return self.remaining_gpu_s[j]

    def retrain(self, j: int, profile: str, work_gpu_h: float) -> None:
        """Job `j`, which has not run yet, trains as `profile` with `work_gpu_h` of work
        (a target job at another batch size: `sim.workload.time_to_accuracy`)."""
        self.profile[j] = profile
        self.work_gpu_h[j] = work_gpu_h
        self.remaining_gpu_s[j] = work_gpu_h * 3600.0

    def resize(self, j: int, gpus: int) -> None:
        """Job `j`, which has not run yet, runs on `gpus` whole GPUs (a target job whose
        GPU count a policy chose: `Start.gpus`)."""
        self.gpus[j] = gpus
        self.gpu_share[j] = float(gpus)

    def rewind(self, j: int, remaining_gpu_s: float) -> None:
        """Stopped `j` falls back to a checkpoint: `remaining_gpu_s` of work left again."""
        self.remaining_gpu_s[j] = remaining_gpu_s

    def uncapped_rate(self, j: int, pool: Pool) -> float:
        """Progress of running `j` on `pool` with no cap (periodic checkpoint stalls
        included)."""
        return self.placement.rate_and_draw(j, self.live[j].site, pool, math.inf)[0]

    # --- starting, changing and stopping runs ----------------------------------------------

    def run_on(
        self,
        j: int,
        site: Site,
        pool: Pool,
        cap: float | None,
        kind: str,
        hold_s: float = 0.0,
        capacity: Sequence[str] | None = None,
    ) -> None:
        """Run `j` on `pool`; first held at idle power for `hold_s` (its data or checkpoint
        arriving; inf: until `end_hold`) or for the boot of powered-off nodes it needs,
        whichever is longer. On a pool split into capacity kinds it takes its GPUs from the
        kinds `capacity` names, first to last (checked by `Spot.check_capacity`; None: the
        default order)."""
        core = self._core
        now = core.env.now
        placement = self.placement
        self.cap_w[j] = cap
        if hold_s > 0.0:
            self.loading.add(j)
        parts = placement.parts(j, pool)
        wake_s = placement.wake_s(j, site, pool)
        hold_s = max(hold_s, wake_s)
        if hold_s > 0.0:
            rate, draw_w = 0.0, pool.idle_w
        else:
            rate, draw_w = placement.rate_and_draw(j, site, pool, cap)
        if parts is None:  # whole GPUs: no shared GPU or MIG slice to re-time
            woken = site.allocate(now, pool, self.gpus[j], draw_w, j)
        else:
            ledger, need = parts
            woken = site.allocate_part(now, pool, ledger, j, need, draw_w, now + wake_s)
            self.gpu_share[j] = ledger.share_of(j)
        self._book.run(j, now, site.index, self.gpus[j])
        pool.jobs[j] = None
        run = self.live[j] = Run(site, pool, rate, draw_w, now)
        self.model[j] = pool.model
        for component in core.hooked("run_started"):
            component.run_started(j, pool, capacity)
        cap_w = placement.effective_cap(site, cap)
        core.events.append(
            now, kind, j, site.index, math.nan if cap_w is None else cap_w, detail=pool.model
        )
        if woken:
            core.events.append(now, "wake", j, site.index, value=woken)
        if hold_s > 0.0:
            run.token = token = next(self._tokens)
            self.holding.add(j)
            if math.isinf(hold_s):
                self.boot_end_s[j] = now + wake_s
            else:
                core.env.timeout(hold_s).callbacks.append(lambda _e: self._held(j, token))
        else:
            self._schedule_finish(j)
        if parts is not None and j in pool.shared:
            self._retime_co_located(pool.shared.co_located(j))

    def _retime_co_located(self, jobs: list[int]) -> None:
        """A job joined or left the shared GPU of `jobs`: those computing there run at their
        new speed from now (held ones take it when they compute; writing ones do not run)."""
        for k in jobs:
            if k in self.live and k not in self.holding:
                self.retime(k)

    def end_hold(self, j: int, at_s: float) -> None:
        """The transfer held job `j` waited for has arrived: it computes from `at_s`, or
        once its nodes are up if that is later."""
        at_s = max(at_s, self.boot_end_s.pop(j))
        token = self.live[j].token
        env = self._core.env
        env.timeout(at_s - env.now).callbacks.append(lambda _e: self._held(j, token))

    def _valid(self, j: int, token: int) -> bool:
        """True if the callback carrying `token` is still `j`'s (it was not stopped,
        re-timed or stopped and restarted since)."""
        run = self.live.get(j)
        return run is not None and run.token == token

    def _held(self, j: int, token: int) -> None:
        if not self._valid(j, token):
            return  # stopped while held
        self.retime(j)  # charges the hold first
        self.holding.discard(j)
        self.loading.discard(j)
        for component in self._core.hooked("run_computing"):
            component.run_computing(j)

    def _schedule_finish(self, j: int) -> None:
        run = self.live[j]
        run.token = token = next(self._tokens)
        delay = self.remaining_gpu_s[j] / run.rate
        self._core.env.timeout(delay).callbacks.append(lambda _e: self._finish(j, token))

    def _finish(self, j: int, token: int) -> None:
        if not self._valid(j, token):
            return  # re-timed or stopped since this completion was scheduled
        self.stop(j)
        self.remaining_gpu_s[j] = 0.0
        core = self._core
        self._book.complete(j, core.env.now)
        core.events.append(core.env.now, "finish", j, self._book.site_of[j])
        core.request_decision()

    def retime(self, j: int) -> None:
        """The cap of running job `j` changed (or its hold ended): new speed and power from
        now on."""
        now = self._core.env.now
        self.close_segment(j, now)
        run = self.live[j]
        rate, draw_w = self.placement.rate_and_draw(j, run.site, run.pool, self.cap_w[j])
        run.site.change_power(now, self.gpu_share[j] * (draw_w - run.draw_w))
        run.draw_w = draw_w
        run.rate = rate
        self._schedule_finish(j)

    def site_cap_changed(self, site: Site) -> None:
        """`site`'s cap changed (`Fleet.set_cap`): its running jobs without a cap of their
        own run at the new one from now."""
        for j in tuple(self._book.running):
            if self.live[j].site is site and self.cap_w[j] is None and j not in self.holding:
                self.retime(j)

    def set_job_cap(self, j: int, watts: float | None) -> None:
        """Cap running job `j`'s GPUs (None: the site's cap, or uncapped)."""
        self.cap_w[j] = watts
        if j not in self.holding:  # a held job takes its cap when it starts
            self.retime(j)
        now = self._core.env.now
        self._core.events.append(
            now, "setcap", j, self._book.site_of[j], math.nan if watts is None else watts
        )

    def stop(self, j: int) -> None:
        """Close the run and free the GPUs (suspend, migrate, finish)."""
        core = self._core
        self.close_segment(j, core.env.now)
        run = self.live.pop(j)  # cancels the pending completion (or end of hold)
        self.holding.discard(j)
        self.loading.discard(j)
        self.boot_end_s.pop(j, None)
        self.release(j, run.site, run.pool, run.draw_w)
        self._book.stop_running(j, self.gpus[j])
        del run.pool.jobs[j]
        for component in core.hooked("run_stopped"):
            component.run_stopped(j)

    def release(self, j: int, site: Site, pool: Pool, draw_w: float) -> None:
        """Free the GPUs (or the share of one, or the MIG slice) that `j`, no longer running,
        held on `pool` drawing `draw_w` W each; jobs still co-located with it speed up."""
        fleet = self._fleet
        if j in pool.shared:
            co_located = pool.shared.co_located(j)
            fleet.release_part(site, pool, pool.shared, j, draw_w)
            self._retime_co_located(co_located)
        elif pool.mig is not None and j in pool.mig:
            fleet.release_part(site, pool, pool.mig, j, draw_w)
        else:
            fleet.release(site, pool, self.gpus[j], draw_w, j)
            for component in self._core.hooked("gpus_released"):
                component.gpus_released(j, site, pool)

    def set_down(self, j: int) -> None:
        """Running `j` stops computing but keeps its GPUs at idle power (a checkpoint
        write follows): its run is closed and its completion cancelled."""
        core = self._core
        now = core.env.now
        self.close_segment(j, now)
        run = self.live.pop(j)  # cancels the pending completion
        run.site.change_power(now, self.gpu_share[j] * (run.pool.idle_w - run.draw_w))
        self._book.stop_running(j, self.gpus[j])
        del run.pool.jobs[j]

    # --- charges -----------------------------------------------------------------------------

    def close_segment(self, j: int, now: float) -> None:
        """Charge the run since the last change: progress, energy, carbon, GPU time; then
        every meter (the checkpoints, the demand-response meter) takes its share."""
        run = self.live[j]
        t0 = run.seg_start_s
        dt = now - t0
        if dt <= 0.0:
            return
        site, pool = run.site, run.pool
        self.remaining_gpu_s[j] = max(0.0, self.remaining_gpu_s[j] - run.rate * dt)
        energy_kwh = self.charges.charge(j, site, pool, run.draw_w, t0, now)
        run.seg_start_s = now
        for meter in self._core.hooked("segment_closed"):
            meter.segment_closed(j, site, pool, t0, now, energy_kwh)

    def close(self, now_s: float) -> None:
        for j in self._book.running:
            self.close_segment(j, now_s)

    # --- results -----------------------------------------------------------------------------

    def write_results(self, out: ResultParts) -> None:
        """Columns `gpus`, `profile`, `work_gpu_h` (as the job ran), `site`, `gpu_model`,
        `gpu_milli`, `mig_profile`, the charges' (`RunCharges.write_results`) and
        `slowdown` = (end - first start) / the uninterrupted, uncapped runtime on the GPU
        model the job finished on (a fractional job's: alone at its share; a MIG job's: on
        its slice; > 1 from caps, suspensions and co-located jobs; a job migrated to a slower
        model can show < 1); the share of jobs that ran away from their origin."""
        core = self._core
        jt = core.jobs
        names = self._fleet.names
        model = np.asarray(self.model, dtype=object)
        site = pd.Categorical.from_codes(self._book.site_of, categories=names)
        profile = np.asarray(self.profile, dtype=object)
        work = np.asarray(self.work_gpu_h)
        gpus = self.placement.ideal_gpus(model, profile, self._book.site_of)
        ideal_s = ideal_runtime_s(work, gpus, model, profile, core.scenario.speed)
        cols = out.job_columns
        cols.update(
            gpus=np.asarray(self.gpus, dtype=np.int64),
            profile=pd.Categorical(profile),
            work_gpu_h=work,
            gpu_milli=np.asarray(jt.gpu_milli),
            mig_profile=np.asarray(self.mig_profile, dtype=object),
            site=site,
            gpu_model=pd.Categorical(model),
        )
        self.charges.write_results(out)
        cols["slowdown"] = (cols["end_s"] - cols["start_s"]) / ideal_s
        ran = pd.Series(site).notna()
        origin = np.array(names, dtype=object)[jt.origin_site]
        away = ran & (pd.Series(site) != origin)
        out.summary["jobs_away_share"] = float(away.sum() / ran.sum()) if ran.any() else None
