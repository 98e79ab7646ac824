"""What a job takes of a pool, and how fast and at what power it computes there.

A job holds whole GPUs (`gpus`), a share of one shared GPU (`gpu_milli` < 1000,
`sim.engine.ledger.SharedGpus`: first fit, slowed by the jobs co-located with it,
`sim.models.sharing.speed_factor`), or one slice of a MIG-partitioned pool (`mig_profile`,
`sim.engine.ledger.MigSlices`: `sim.models.mig.slice_speed_frac` of the GPU's speed, no
interference).
Work is counted in reference GPU-seconds (A100-80GB at its maximum power limit); a job on
`g` GPUs of model `m` under cap `c` advances at g x speed(m, profile) x throughput(m,
profile, c) reference GPU-seconds per second, with `[scaling]` times the scaling
efficiency of its GPUs under its parallel scheme, and with periodic checkpoints times
the share of time they leave it computing.
"""

from __future__ import annotations

import functools
from array import array
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.config.scenario import Scenario
from sim.config.workload import ScalingConfig
from sim.engine.ledger import GpuParts, Pool, Site
from sim.errors import PolicyError, ScenarioError
from sim.models import hardware, mig, scaling, sharing
from sim.models.placement import placed_scaling

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.workload import JobTable

__all__ = ["CheckpointTiming", "Placement", "check_scaling", "check_servers", "node_of"]


class CheckpointTiming:
    """Periodic checkpoints (`workload.checkpoint_interval_h`) as they slow a run: the
    interval and the time a job's write takes at a site."""

    __slots__ = ("interval_s", "_checkpoint_gb")

    def __init__(self, scenario: Scenario, jobs: JobTable):
        interval_h = scenario.workload.checkpoint_interval_h
        self.interval_s = None if interval_h is None else interval_h * 3600.0
        """Periodic checkpoints every `interval_s` of running time (None: on suspension)."""
        self._checkpoint_gb = jobs.checkpoint_gb

    def write_s(self, j: int, site: Site) -> float:
        """Time to write `j`'s checkpoint at `site`'s storage bandwidth, s."""
        return float(self._checkpoint_gb[j]) / site.checkpoint_write_gbps

    def duty(self, j: int, site: Site) -> float:
        """Fraction of running time spent computing rather than writing periodic checkpoints."""
        if self.interval_s is None:
            return 1.0
        return self.interval_s / (self.interval_s + self.write_s(j, site))


class Placement:
    """Speed, draw, fit and boot of the jobs on pools, from their per-job columns: `Runs`'
    typed arrays and lists, which `Runs` owns and changes in place and this reads (held
    privately): `gpus` whole GPUs, `milli` thousandths of one, `gpu_share` GPUs charged,
    `mig_profile` ("": none), `profile`, `parallelism`. Speeds are cached per (model,
    profile, cap, GPUs scaled, scheme, (GPUs per node, 0)); on a pool of servers a job's
    nodes are the servers it holds (or would take now), in nodes of the most GPUs it holds
    on one (`sim.models.placement.placed_scaling`), cached per (..., (that share, servers))."""

    __slots__ = (
        "_core",
        "_fleet",
        "timing",
        "_gpus",
        "_milli",
        "_gpu_share",
        "_mig_profile",
        "_profile",
        "_parallelism",
        "_speeds",
    )

    def __init__(
        self,
        core: Core,
        fleet: Fleet,
        gpus: array,
        milli: array,
        gpu_share: array,
        mig_profile: list[str],
        profile: list[str],
        parallelism: list[str],
    ):
        self._core = core
        self._fleet = fleet
        self.timing = CheckpointTiming(core.scenario, core.jobs)
        """Periodic checkpoints: their interval and the stalls of their writes."""
        self._gpus = gpus
        self._milli = milli
        self._gpu_share = gpu_share
        self._mig_profile = mig_profile
        self._profile = profile
        self._parallelism = parallelism
        self._speeds: dict[
            tuple[str, str, float | None, int, str, tuple[int, int]], tuple[float, float]
        ] = {}

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
        profile, gpus = self._profile[j], self._gpus[j]
        scaled = self._core.scenario.scaling is not None and gpus > 1
        scheme = self._parallelism[j] if scaled else ""
        servers = pool.servers
        if scaled and servers is not None:
            layout = servers.layout(j, gpus)
            shape = (max(g for _, g in layout), len(layout))  # largest share, servers
        else:
            layout, shape = (), (pool.gpus_per_node, 0)
        key = (pool.model, profile, cap, gpus if scaled else 1, scheme, shape)
        hit = self._speeds.get(key)
        if hit is None:
            est = hardware.estimate(pool.model, profile, cap)
            full = self._core.scenario.speed(pool.model, profile)
            hit = (full * est.throughput_fraction, est.power_w)
            if scaled:
                hit = self._scaled(pool, profile, gpus, scheme, layout, *hit)
            self._speeds[key] = hit
        return hit

    def _scaled(
        self,
        pool: Pool,
        profile: str,
        gpus: int,
        scheme: str,
        layout: tuple[tuple[int, int], ...],
        speed: float,
        draw_w: float,
    ) -> tuple[float, float]:
        """(speed, draw W) of one GPU of a `gpus`-GPU job of `scheme` on `pool` (on the
        servers of `layout`, if the pool has servers)."""
        config = self._core.scenario.scaling
        assert config is not None
        node = node_of(pool, config)
        point = (
            placed_scaling(profile, pool.model, layout, scheme, node)
            if layout
            else scaling.scaling(profile, pool.model, gpus, scheme, node)
        )
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
        milli = self._milli[j]
        if self._mig_profile[j]:
            gpus = self._slice_gpus(j, pool)
        elif sharing.is_fractional(milli):
            gpus = self._shared_gpus(j, pool)
        else:
            gpus = self._gpus[j]
        if self.timing.interval_s is None:
            return gpus * per_gpu, draw_w
        return gpus * per_gpu * self.timing.duty(j, site), draw_w

    def _shared_gpus(self, j: int, pool: Pool) -> float:
        """The GPUs fractional `j` computes with on `pool`: its share x the interference of
        the jobs co-located with it (those of the GPU it would join, if it is not there)."""
        milli, shared = self._milli[j], pool.shared
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
            return _slice_speed_frac(pool.model, self._mig_profile[j], self._profile[j])
        except ValueError as e:
            raise PolicyError(f"job {self._core.jobs.job_id[j]} cannot run on {e}") from None

    def parts(self, j: int, pool: Pool) -> tuple[GpuParts, int | str] | None:
        """The ledger of GPU parts of `pool` that `j` takes a part of, and what it asks: a
        fractional job's milli of a shared GPU, a MIG job's profile of a slice (of a
        partitioned pool); None for whole GPUs."""
        if self._mig_profile[j] and pool.mig is not None:
            return pool.mig, self._mig_profile[j]
        milli = self._milli[j]
        return (pool.shared, milli) if sharing.is_fractional(milli) else None

    def share_on(self, j: int, pool: Pool) -> float:
        """GPUs `j` is charged for on `pool`: its GPUs, a fractional job's share of one, a
        MIG job's slice (its SM share of the GPU, `sim.models.mig.sm_share`)."""
        if self._mig_profile[j] and pool.mig is not None:
            return mig.sm_share(pool.model, self._mig_profile[j])
        return self._gpu_share[j]

    def new_gpus(self, j: int, pool: Pool) -> int:
        """Free GPUs of `pool` that `j` takes if it starts there now: its `gpus`; for a
        fractional or MIG job, 0 if a shared GPU has room for it (a busy partitioned GPU a
        free slice of its profile), else 1."""
        parts = self.parts(j, pool)
        if parts is None:
            return self._gpus[j]
        return 0 if parts[0].fit(parts[1]) is not None else 1

    def wake_s(self, j: int, site: Site, pool: Pool) -> float:
        """Boot time before `j` can compute on `pool` if it starts now, s: of the powered-off
        node it needs (on a pool of servers: the rest of the longest boot of those it would
        take), or, joining a shared (or partitioned) GPU whose node is booting, the
        rest of that boot."""
        parts = self.parts(j, pool)
        if pool.servers is not None:  # whole GPUs: the servers it would take
            return pool.servers.wake_s(self._core.env.now, self._gpus[j])
        if parts is None:  # whole GPUs: its own count (`new_gpus`)
            return self._fleet.wake_s(site, pool, self._gpus[j])
        g = parts[0].fit(parts[1])
        if g is None:
            return self._fleet.wake_s(site, pool, 1)
        return max(0.0, parts[0].ready_s(g) - self._core.env.now)

    def fits(self, j: int, pool: Pool) -> bool:
        """True if `j` can start on `pool` now: enough free GPUs, or room on a shared one; a
        MIG job, a free slice of its profile (never on whole GPUs, and no other job on a
        partitioned pool, which has no free GPUs)."""
        profile = self._mig_profile[j]
        if profile:
            return pool.mig is not None and pool.mig.fits(profile)
        if pool.servers is not None:  # whole GPUs only (`check_servers`)
            return pool.servers.fit(self._gpus[j]) is not None
        return pool.free >= self.new_gpus(j, pool)

    def needs(self, j: int) -> str:
        """What `j` asks for, for messages: "4 GPUs", "250 milli-GPU" or "a 1g.10gb MIG
        slice"."""
        milli = self._milli[j]
        if self._mig_profile[j]:
            return f"a {self._mig_profile[j]} MIG slice"
        if sharing.is_fractional(milli):
            return f"{milli} milli-GPU"
        return f"{self._gpus[j]} GPUs"

    def ideal_gpus(self, model: np.ndarray, profile: np.ndarray, site_of: array) -> np.ndarray:
        """Per job, the GPUs' worth of its ideal run on `model` (the GPU model it last ran
        on, at the site `site_of`; None: never ran): its GPUs (with `[scaling]`, times their
        scaling efficiency on that pool: communication is not a slowdown), a fractional
        job's share (alone), a MIG job's slice speed."""
        gpus = np.array(self._gpu_share)
        sliced = np.flatnonzero(np.asarray(self._mig_profile, dtype=object) != "")
        for j in sliced.tolist():
            if model[j] is not None:
                gpus[j] = _slice_speed_frac(model[j], self._mig_profile[j], profile[j])
        config = self._core.scenario.scaling
        if config is not None:
            multi = np.flatnonzero((np.asarray(self._gpus) > 1) & (np.asarray(site_of) >= 0))
            sites = self._fleet.sites
            for j in multi.tolist():
                pool = sites[site_of[j]].pool(model[j])
                assert pool is not None
                point = scaling.scaling(
                    profile[j], model[j], self._gpus[j], self._parallelism[j], node_of(pool, config)
                )
                gpus[j] *= point.efficiency
        return gpus


@functools.cache
def _slice_speed_frac(gpu_model: str, mig_profile: str, profile: str) -> float:
    """`sim.models.mig.slice_speed_frac`, cached (a job's speed is asked at every change)."""
    return mig.slice_speed_frac(gpu_model, mig_profile, profile)


def node_of(pool: Pool, config: ScalingConfig) -> scaling.NodeShape:
    """The node shape of `pool` for the scaling model: its `gpus_per_node`, the links and
    port count of `config` where given, else the GPU model's catalog default (ScenarioError
    naming the model if it has none: a model of the scenario's own `[gpu_models]`); without
    `nics_per_node`, one port on a network other than the default node's."""
    default = scaling.NODE_DEFAULTS.get(pool.model)
    if default is None and (config.intra_node is None or config.inter_node is None):
        raise ScenarioError(
            f"scaling: GPU model {pool.model!r} has no default node (sim/data/"
            "interconnects.toml); give scaling.intra_node and scaling.inter_node"
        )
    inter_node = config.inter_node or default.inter_node  # type: ignore[union-attr]
    nics = config.nics_per_node
    if nics is None:  # the default node's ports are those of its own network
        same = default is not None and inter_node == default.inter_node
        nics = default.nics_per_node if same else 1  # type: ignore[union-attr]
    return scaling.NodeShape(
        pool.gpus_per_node,
        config.intra_node or default.intra_node,  # type: ignore[union-attr]
        inter_node,
        nics,
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


def check_servers(jobs: JobTable, scenario: Scenario) -> None:
    """ScenarioError, before the run, if a scenario with a pool of servers has jobs that
    share a GPU (`gpu_milli` < 1000): not supported on servers yet."""
    servers = any(p.servers is not None for s in scenario.sites for p in s.gpus)
    if servers and (jobs.gpu_milli < 1000).any():
        raise ScenarioError(
            "sites.gpus.servers: jobs sharing a GPU (gpu_milli < 1000) in a scenario with a "
            "pool of servers are not supported yet"
        )
