"""Job runs: where each running job computes, how fast, at what power, and what it costs.

Progress is exact under changing speed: a running job's speed is constant between
changes (start, cap change, suspend, migrate), so at each change the run closes a
segment, subtracts speed x duration from the work left, charges the segment's energy and
carbon (power x the exact integral of PUE, and of PUE x carbon intensity), and schedules
the completion from the work left. A completion is one timeout carrying a callback,
cancelled by giving the job's run a new token (or by ending the run).

Work is counted in reference GPU-seconds (A100-80GB at its maximum power limit); a job on
`g` GPUs of model `m` under cap `c` advances at g x speed(m, profile) x throughput(m,
profile, c) reference GPU-seconds per second. A fractional job (`gpu_milli` < 1000) holds
share s = milli / 1000 of one GPU, shared first fit with other fractional jobs
(`sim.engine.ledger.SharedGpus`): it advances at s x speed x the interference factor of its
co-located jobs (`sim.models.sharing.speed_factor`), draws s x its active power (and s of the
host's), and is charged for that; when a job joins or leaves a shared GPU, the jobs
computing on it are re-timed. A MIG job (`mig_profile`) holds one slice of a partitioned
pool (`sim.engine.ledger.MigSlices`): it advances at speed x `sim.models.mig.slice_speed_frac` (no
interference: MIG isolates SMs and memory), and draws and is charged the slice's SM share
of its active power and of the host's, as a fractional job its share.
"""

from __future__ import annotations

import functools
import itertools
import math
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.config.scenario import ScalingConfig, Scenario
from sim.engine.component import Component
from sim.engine.jobs import RUNNING
from sim.engine.ledger import GpuParts, Pool, Site
from sim.errors import PolicyError, ScenarioError
from sim.models import hardware, mig, scaling, sharing
from sim.results import ResultParts, ideal_runtime_s

if TYPE_CHECKING:
    from sim.engine.core import Engine
    from sim.workload import JobTable

__all__ = ["Run", "Runs", "WS_PER_KWH"]

WS_PER_KWH = 3.6e6
_GS_PER_KGH = 3.6e9  # (g/kWh x W x s) -> kg


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
    """Per-job run state and charges: columns indexed by job, and the hot state of the
    running jobs (`live`)."""

    __slots__ = (
        "_core",
        "_book",
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
        "site_of",
        "energy_kwh",
        "carbon_kg",
        "embodied_kg",
        "gpu_s",
        "cost",
        "_speeds",
    )

    def __init__(self, core: Engine):
        self._core = core
        self._book = core.book
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
        self.site_of = array("h", [-1]) * n
        """The index of the site the job last ran on (-1: never ran)."""
        self.energy_kwh = array("d", [0.0]) * n
        """Facility energy of the job's GPUs and their host share, kWh."""
        self.carbon_kg = array("d", [0.0]) * n
        """Operational carbon of that energy, kg."""
        self.embodied_kg = array("d", [0.0]) * n
        """Embodied carbon of the GPU-hours the job held (allocated accounting), kg."""
        self.gpu_s = array("d", [0.0]) * n
        self.cost = array("d", [0.0]) * n
        """Each job's compute cost, the scenario's currency (NaN: a GPU model without price)."""
        """GPU-seconds the job held (computing, held, or writing a checkpoint), s."""
        self._speeds: dict[tuple[str, str, float | None, int, str, int], tuple[float, float]] = {}
        if core.scenario.scaling is not None:
            check_scaling(jobs, [p for s in core.fleet.sites for p in s.pools], core.scenario)

    # --- speed and power -------------------------------------------------------------------

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

    @staticmethod
    def effective_cap(site: Site, own_cap: float | None) -> float | None:
        """The cap a job's GPUs run under, W: its own, else the site's (None: uncapped)."""
        return own_cap if own_cap is not None else site.cap_w

    def speed(self, j: int, pool: Pool, cap: float | None) -> tuple[float, float]:
        """(reference GPU-s per s of one of job `j`'s GPUs of `pool`, active W of one),
        cached: the speed at the maximum power limit (the scenario's `[throughput]` table's,
        else the roofline `hardware.speed`) x the cap model's throughput fraction; with
        `[scaling]`, x the scaling efficiency of the job's GPUs under its parallel scheme,
        and the draw is the mix of computing and communicating power over the
        communication's share of time."""
        profile, gpus = self.profile[j], self.gpus[j]
        scaled = self._core.scenario.scaling is not None and gpus > 1
        scheme = self.parallelism[j] if scaled else ""
        key = (pool.model, profile, cap, gpus if scaled else 1, scheme, pool.gpus_per_node)
        hit = self._speeds.get(key)
        if hit is None:
            est = hardware.estimate(pool.model, profile, cap)
            full = self._core.scenario.speed(pool.model, profile)
            hit = (full * est.throughput_fraction, est.power_w)
            if scaled:
                hit = self._scaled(pool, profile, gpus, scheme, *hit)
            self._speeds[key] = hit
        return hit

    def _scaled(
        self, pool: Pool, profile: str, gpus: int, scheme: str, speed: float, draw_w: float
    ) -> tuple[float, float]:
        """(speed, draw W) of one GPU of a `gpus`-GPU job of `scheme` on `pool`."""
        config = self._core.scenario.scaling
        assert config is not None
        point = scaling.scaling(profile, pool.model, gpus, scheme, node_of(pool, config))
        comm_w = draw_w * scaling.comm_power_frac(pool.model, profile)
        return (
            speed * point.efficiency,
            draw_w * (1.0 - point.comm_time_frac) + comm_w * point.comm_time_frac,
        )

    def rate_and_draw(
        self, j: int, site: Site, pool: Pool, cap: float | None
    ) -> tuple[float, float]:
        """(progress in reference GPU-s per s, active W per GPU) of `j` on `pool` under its
        own `cap` or the site's; periodic checkpoint writes slow progress by the fraction
        of time they stall the job (a fluid model of the stalls). A fractional job computes
        with its share of one GPU, slowed by the jobs co-located with it (where it runs, or
        on the GPU it would join now); a MIG job with its slice (`sim.models.mig.slice_speed_frac`),
        under the cap of the whole GPU."""
        cap = self.effective_cap(site, cap)
        per_gpu, draw_w = self.speed(j, pool, cap)
        milli = self.milli[j]
        if self.mig_profile[j]:
            gpus = self._slice_gpus(j, pool)
        elif sharing.is_fractional(milli):
            gpus = self._shared_gpus(j, pool)
        else:
            gpus = self.gpus[j]
        checkpoints = self._core.checkpoints
        if checkpoints.interval_s is None:
            return gpus * per_gpu, draw_w
        return gpus * per_gpu * checkpoints.duty(j, site), draw_w

    def _shared_gpus(self, j: int, pool: Pool) -> float:
        """The GPUs fractional `j` computes with on `pool`: its share x the interference of
        the jobs co-located with it (those of the GPU it would join, if it is not there)."""
        milli, shared = self.milli[j], pool.shared
        if j in shared:
            others = shared.others_milli(j)
        else:
            g = shared.fit(milli)
            others = 0 if g is None else shared.used_milli()[g]
        slowdown = self._core.scenario.sharing.slowdown_full
        return sharing.share(milli) * sharing.speed_factor(milli, others, slowdown)

    def _slice_gpus(self, j: int, pool: Pool) -> float:
        """The GPUs' worth MIG job `j` computes with on a slice of `pool`'s model; PolicyError
        if the model has no slice of its profile (a query about a pool it cannot run on)."""
        try:
            return _slice_speed_frac(pool.model, self.mig_profile[j], self.profile[j])
        except ValueError as e:
            raise PolicyError(f"job {self._core.jobs.job_id[j]} cannot run on {e}") from None

    def _parts(self, j: int, pool: Pool) -> tuple[GpuParts, int | str] | None:
        """The ledger of GPU parts of `pool` that `j` takes a part of, and what it asks: a
        fractional job's milli of a shared GPU, a MIG job's profile of a slice (of a
        partitioned pool); None for whole GPUs."""
        if self.mig_profile[j] and pool.mig is not None:
            return pool.mig, self.mig_profile[j]
        milli = self.milli[j]
        return (pool.shared, milli) if sharing.is_fractional(milli) else None

    def share_on(self, j: int, pool: Pool) -> float:
        """GPUs `j` is charged for on `pool`: its GPUs, a fractional job's share of one, a
        MIG job's slice (its SM share of the GPU, `sim.models.mig.sm_share`)."""
        if self.mig_profile[j] and pool.mig is not None:
            return mig.sm_share(pool.model, self.mig_profile[j])
        return self.gpu_share[j]

    def new_gpus(self, j: int, pool: Pool) -> int:
        """Free GPUs of `pool` that `j` takes if it starts there now: its `gpus`; for a
        fractional or MIG job, 0 if a shared GPU has room for it (a busy partitioned GPU a
        free slice of its profile), else 1."""
        parts = self._parts(j, pool)
        if parts is None:
            return self.gpus[j]
        return 0 if parts[0].fit(parts[1]) is not None else 1

    def wake_s(self, j: int, site: Site, pool: Pool) -> float:
        """Boot time before `j` can compute on `pool` if it starts now, s: of the powered-off
        node it needs, or, joining a shared (or partitioned) GPU whose node is booting, the
        rest of that boot."""
        parts = self._parts(j, pool)
        g = None if parts is None else parts[0].fit(parts[1])
        if parts is None or g is None:
            return self._core.fleet.wake_s(site, pool, self.new_gpus(j, pool))
        return max(0.0, parts[0].ready_s(g) - self._core.env.now)

    def fits(self, j: int, pool: Pool) -> bool:
        """True if `j` can start on `pool` now: enough free GPUs, or room on a shared one; a
        MIG job, a free slice of its profile (never on whole GPUs, and no other job on a
        partitioned pool, which has no free GPUs)."""
        profile = self.mig_profile[j]
        if profile:
            return pool.mig is not None and pool.mig.fits(profile)
        return pool.free >= self.new_gpus(j, pool)

    def needs(self, j: int) -> str:
        """What `j` asks for, for messages: "4 GPUs", "250 milli-GPU" or "a 1g.10gb MIG
        slice"."""
        milli = self.milli[j]
        if self.mig_profile[j]:
            return f"a {self.mig_profile[j]} MIG slice"
        if sharing.is_fractional(milli):
            return f"{milli} milli-GPU"
        return f"{self.gpus[j]} GPUs"

    def uncapped_rate(self, j: int, pool: Pool) -> float:
        """Progress of running `j` on `pool` with no cap (periodic checkpoint stalls
        included)."""
        return self.rate_and_draw(j, self.live[j].site, pool, math.inf)[0]

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
        self.cap_w[j] = cap
        if hold_s > 0.0:
            self.loading.add(j)
        wake_s = self.wake_s(j, site, pool)
        hold_s = max(hold_s, wake_s)
        if hold_s > 0.0:
            rate, draw_w = 0.0, pool.idle_w
        else:
            rate, draw_w = self.rate_and_draw(j, site, pool, cap)
        parts = self._parts(j, pool)
        if parts is None:
            woken = site.allocate(now, pool, self.gpus[j], draw_w)
        else:
            ledger, need = parts
            woken = site.allocate_part(now, pool, ledger, j, need, draw_w, now + wake_s)
            self.gpu_share[j] = ledger.share_of(j)
        self._book.run(j, now)
        pool.jobs[j] = None
        run = self.live[j] = Run(site, pool, rate, draw_w, now)
        self.site_of[j], self.model[j] = site.index, pool.model
        if core.checkpoints.interval_s is not None:
            core.checkpoints.started(j)
        if core.failures.active or core.spot.active:
            core.failures.started(j, run)
        if pool.capacity is not None:
            core.spot.started(j, run, capacity)
        cap_w = self.effective_cap(site, cap)
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
        if j in pool.shared:
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
        self._core.checkpoints.arrived(j)

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
        core.events.append(core.env.now, "finish", j, self.site_of[j])
        core.request_decision()

    def retime(self, j: int) -> None:
        """The cap of running job `j` changed (or its hold ended): new speed and power from
        now on."""
        now = self._core.env.now
        self.close_segment(j, now)
        run = self.live[j]
        rate, draw_w = self.rate_and_draw(j, run.site, run.pool, self.cap_w[j])
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
            now, "setcap", j, self.site_of[j], math.nan if watts is None else watts
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
        self._book.stop_running(j)
        del run.pool.jobs[j]
        if core.checkpoints.interval_s is not None:
            core.checkpoints.stopped(j)

    def release(self, j: int, site: Site, pool: Pool, draw_w: float) -> None:
        """Free the GPUs (or the share of one, or the MIG slice) that `j`, no longer running,
        held on `pool` drawing `draw_w` W each; jobs still co-located with it speed up."""
        fleet = self._core.fleet
        if j in pool.shared:
            co_located = pool.shared.co_located(j)
            fleet.release_part(site, pool, pool.shared, j, draw_w)
            self._retime_co_located(co_located)
        elif pool.mig is not None and j in pool.mig:
            fleet.release_part(site, pool, pool.mig, j, draw_w)
        else:
            fleet.release(site, pool, self.gpus[j], draw_w)
            if pool.capacity is not None:
                self._core.spot.released(j, site, pool)

    def set_down(self, j: int) -> None:
        """Running `j` stops computing but keeps its GPUs at idle power (a checkpoint
        write follows): its run is closed and its completion cancelled."""
        core = self._core
        now = core.env.now
        self.close_segment(j, now)
        run = self.live.pop(j)  # cancels the pending completion
        run.site.change_power(now, self.gpu_share[j] * (run.pool.idle_w - run.draw_w))
        self._book.stop_running(j)
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
        energy_kwh = self.charge(j, site, pool, run.draw_w, t0, now)
        run.seg_start_s = now
        for meter in self._core.meters:
            meter.segment_closed(j, site, pool, t0, now, energy_kwh)

    def charge(
        self,
        j: int,
        site: Site,
        pool: Pool,
        draw_w: float,
        t0: float,
        t1: float,
        *,
        write: bool = False,
    ) -> float:
        """Charge `j` for its GPUs (a fractional job: its share of one; a MIG job: its
        slice's SM share of one) on `pool` drawing `draw_w` W each over [t0, t1], with their
        host share: energy, carbon, GPU time, its price, embodied carbon. Returns the facility
        energy, kWh. With `write`, the GPUs its checkpoint write holds (of a split pool: the
        set it took first), else its run's (the set it took last; `CapacityKinds.holding`)."""
        # a MIG job writing its checkpoint on a pool it left: its slice there, not the next
        gpus = pool.mig.share_of(j) if pool.mig is not None and j in pool.mig else self.gpu_share[j]
        it_w = gpus * (draw_w + pool.host_w)
        energy_kwh = it_w * site.pue.integral(t0, t1) / WS_PER_KWH
        self.energy_kwh[j] += energy_kwh
        self.carbon_kg[j] += it_w * site.facility_ci.integral(t0, t1) / _GS_PER_KGH
        self.gpu_s[j] += gpus * (t1 - t0)
        if t1 > t0 and pool.capacity is None:
            self.cost[j] += gpus * (t1 - t0) / 3600.0 * self._core.charged(pool.model)
        elif t1 > t0:  # reserved, on-demand and spot GPUs: each kind at its price
            assert pool.capacity is not None
            held = pool.capacity.holding(j, newest=not write)
            spot = self._core.spot
            self.cost[j] += (t1 - t0) / 3600.0 * spot.cost_per_h(pool, held)
            spot.charged(j, held, t1 - t0)
        self.embodied_kg[j] += gpus * (t1 - t0) / 3600.0 * pool.spec.embodied_kg_per_gpu_h
        return energy_kwh

    def close(self, now_s: float) -> None:
        for j in self._book.running:
            self.close_segment(j, now_s)

    # --- results -----------------------------------------------------------------------------

    def write_results(self, out: ResultParts) -> None:
        """Columns `gpus`, `profile`, `work_gpu_h` (as the job ran), `site`, `gpu_model`,
        `gpu_milli`, `mig_profile`, `gpu_h`, `cost`, `energy_kwh`, `carbon_kg`, `embodied_kg` and
        `slowdown` = (end - first start) / the uninterrupted, uncapped runtime on the GPU
        model the job finished on (a fractional job's: alone at its share; a MIG job's: on
        its slice; > 1 from caps, suspensions and co-located jobs; a job migrated to a slower
        model can show < 1); the jobs' energy, allocated embodied carbon, the share of jobs
        that ran away from their origin."""
        core = self._core
        jt = core.jobs
        names = core.fleet.names
        model = np.asarray(self.model, dtype=object)
        site = pd.Categorical.from_codes(self.site_of, categories=names)
        profile = np.asarray(self.profile, dtype=object)
        work = np.asarray(self.work_gpu_h)
        gpus = self._ideal_gpus(model, profile)
        ideal_s = ideal_runtime_s(work, gpus, model, profile, core.scenario.speed)
        cols = out.job_columns
        energy = np.asarray(self.energy_kwh)
        embodied = np.asarray(self.embodied_kg)
        cols.update(
            gpus=np.asarray(self.gpus, dtype=np.int64),
            profile=pd.Categorical(profile),
            work_gpu_h=work,
            gpu_milli=np.asarray(jt.gpu_milli),
            mig_profile=np.asarray(self.mig_profile, dtype=object),
            site=site,
            gpu_model=pd.Categorical(model),
            gpu_h=np.asarray(self.gpu_s) / 3600.0,
            cost=np.asarray(self.cost),
            energy_kwh=energy,
            carbon_kg=np.asarray(self.carbon_kg),
            embodied_kg=embodied,
            slowdown=(cols["end_s"] - cols["start_s"]) / ideal_s,
        )
        out.summary["energy_jobs_kwh"] = float(pd.Series(energy).sum())
        out.summary["cost_compute"] = float(np.sum(self.cost))  # NaN: a model without price
        if core.scenario.embodied == "allocated":
            out.summary["carbon_embodied_kg"] = float(pd.Series(embodied).sum())
        ran = pd.Series(site).notna()
        origin = np.array(names, dtype=object)[jt.origin_site]
        away = ran & (pd.Series(site) != origin)
        out.summary["jobs_away_share"] = float(away.sum() / ran.sum()) if ran.any() else None

    def _ideal_gpus(self, model: np.ndarray, profile: np.ndarray) -> np.ndarray:
        """Per job, the GPUs' worth of its ideal run: its GPUs (with `[scaling]`, times their
        scaling efficiency on the pool it last ran on: communication is not a slowdown), a
        fractional job's share (alone), a MIG job's slice speed on the model it last ran on."""
        gpus = np.array(self.gpu_share)
        sliced = np.flatnonzero(np.asarray(self.mig_profile, dtype=object) != "")
        for j in sliced.tolist():
            if model[j] is not None:
                gpus[j] = _slice_speed_frac(model[j], self.mig_profile[j], profile[j])
        config = self._core.scenario.scaling
        if config is not None:
            multi = np.flatnonzero((np.asarray(self.gpus) > 1) & (np.asarray(self.site_of) >= 0))
            sites = self._core.fleet.sites
            for j in multi.tolist():
                pool = sites[self.site_of[j]].pool(model[j])
                assert pool is not None
                point = scaling.scaling(
                    profile[j], model[j], self.gpus[j], self.parallelism[j], node_of(pool, config)
                )
                gpus[j] *= point.efficiency
        return gpus


@functools.cache
def _slice_speed_frac(gpu_model: str, mig_profile: str, profile: str) -> float:
    """`sim.models.mig.slice_speed_frac`, cached (a job's speed is asked at every change)."""
    return mig.slice_speed_frac(gpu_model, mig_profile, profile)


def node_of(pool: Pool, config: ScalingConfig) -> scaling.NodeShape:
    """The node shape of `pool` for the scaling model: its `gpus_per_node`, the links of
    `config` where given, else the GPU model's catalog default (ScenarioError naming the
    model if it has none: a model of the scenario's own `[gpu_models]`)."""
    default = scaling.NODE_DEFAULTS.get(pool.model)
    if default is None and (config.intra_node is None or config.inter_node is None):
        raise ScenarioError(
            f"scaling: GPU model {pool.model!r} has no default node (sim/data/"
            "interconnects.toml); give scaling.intra_node and scaling.inter_node"
        )
    return scaling.NodeShape(
        pool.gpus_per_node,
        config.intra_node or default.intra_node,  # type: ignore[union-attr]
        config.inter_node or default.inter_node,  # type: ignore[union-attr]
        1 if default is None else default.nics_per_node,
    )


def check_scaling(jobs: JobTable, pools: list[Pool], scenario: Scenario) -> None:
    """ScenarioError, before the run, for a pool the scaling model cannot describe (a GPU
    model with no node and no links given) or a multi-GPU job it cannot scale on a pool that
    could hold it (e.g. tensor parallelism on a profile without transformer shapes, or
    beyond a node on a GPU count that is not a multiple of the node's)."""
    config = scenario.scaling
    assert config is not None
    nodes = {id(p): node_of(p, config) for p in pools}
    multi = np.flatnonzero(jobs.gpus > 1)
    kinds = pd.DataFrame(
        {
            "profile": jobs.profile[multi],
            "gpus": jobs.gpus[multi],
            "scheme": jobs.parallelism[multi],
        }
    ).drop_duplicates()  # the first job of each kind, by its position in `multi`
    for row, profile, gpus, scheme in kinds.itertuples():
        for pool in pools:
            if pool.count < gpus:
                continue
            try:
                scaling.scaling(profile, pool.model, gpus, scheme, nodes[id(pool)])
            except ValueError as e:
                raise ScenarioError(
                    f"scaling: job {jobs.job_id[multi[row]]!r} ({profile}, {gpus} GPUs, "
                    f"{scheme} parallel) on {pool.model}: {e}"
                ) from None
