"""The free-GPU ledger of one decision, and first-come-first-served placement on it."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from sim.api import Action, JobView, Migrate, PoolPlacer, Resume, Scale, Start, SystemState

__all__ = ["FreeGpus", "first_come_first_served"]


_MILLI_PER_GPU = 1000
"""`JobView.gpu_milli` of a job on whole GPUs."""


class FreeGpus:
    """Free GPUs per site and model as actions are planned within one decision: read from
    the state when a site is first needed, then decremented by each planned start. A
    fractional job (`gpu_milli` < 1000) is placed as the engine places it: on the first
    shared GPU with room (`state.shared_gpus`), else on a free GPU that becomes shared. A job
    on a MIG slice (`mig_profile`) takes a free slice of its profile in a partitioned pool
    (`state.free_mig_slices`). On a pool of servers, whole GPUs are taken where the engine
    places them (`state.servers`): a job fits only if the site's rule places it within its
    server limit. A job of a virtual cluster with a quota starts only while the
    quota has room (`JobView.vc_room`, less what this decision's starts took). Place a job
    with `place` or `take_job`, which do all of this; `take` counts whole GPUs only."""

    __slots__ = ("_free", "_shared", "_slices", "_servers", "_vc_taken", "_order", "_state")

    def __init__(self, state: SystemState):
        self._state = state
        self._free: dict[str, dict[str, int]] = {}
        self._shared: dict[str, dict[str, list[int]]] = {}
        """Per site and model: the milli held on each shared GPU, after the planned starts."""
        self._slices: dict[str, dict[str, dict[str, int]]] = {}
        """Per site and partitioned model: free MIG slices per profile, after the planned starts."""
        self._servers: dict[str, dict[str, tuple[PoolPlacer, list[int]]]] = {}
        """Per site and model of a pool of servers: its placement and free GPUs by server,
        after the planned starts."""
        self._vc_taken: dict[str, int] = {}
        """GPUs this decision's starts took per virtual cluster with a quota."""
        self._order: dict[str, tuple[str, ...]] = {}
        """Per origin site: the sites in the order jobs from there try them."""

    def at(self, site: str) -> dict[str, int]:
        """Free GPUs per model at `site`, after the starts planned so far."""
        site_free = self._free.get(site)
        if site_free is None:
            site_free = self._free[site] = self._state.free_gpus(site)
        return site_free

    def place(self, job: JobView, sites: Iterable[str] | None = None) -> Start | None:
        """A `Start` of `job` on the first of `sites` (default: its origin, then the others in
        order) that the job may use and that has a pool of enough free GPUs of a model it may
        run on (of a constrained job: its models in the order it lists them), taking them;
        None if none fits (or its virtual cluster's quota has no room for it)."""
        room = self._quota_room(job)
        if room < job.gpus:
            return None
        if sites is None:
            origin = job.origin_site
            sites = self._order.get(origin)
            if sites is None:
                others = (s for s in self._state.sites if s != origin)
                sites = self._order[origin] = (origin, *others)
        allowed = job.allowed_sites
        models = job.allowed_gpu_models or (None,)
        for site in sites:
            if site not in allowed:
                continue
            for wanted in models:
                model = self.take_for(job, site, wanted)
                if model is not None:
                    self._count_quota(job, room, job.gpus)
                    return Start(job, site, gpu_model=model)
        return None

    def vc_fits(self, job: JobView, gpus: int | None = None) -> bool:
        """Whether `job`'s virtual cluster has room for its GPUs (or `gpus`) under its quota,
        after the starts planned so far (True without a quota)."""
        return self._quota_room(job) >= (job.gpus if gpus is None else gpus)

    def _quota_room(self, job: JobView) -> float:
        """GPUs `job`'s virtual cluster may still start after this decision's planned
        starts (inf without a quota)."""
        room = job.vc_room
        return room if room == math.inf else room - self._vc_taken.get(job.vc, 0)

    def _count_quota(self, job: JobView, room: float, gpus: int) -> None:
        """A planned start of `gpus` GPUs of `job`, whose quota room was `room`."""
        if room != math.inf:
            self._vc_taken[job.vc] = self._vc_taken.get(job.vc, 0) + gpus

    def book(self, action: Action) -> bool:
        """Book the GPUs `action` places a job on, or that new replicas of a service take
        (`Scale` up); False if they are not free (GPUs a suspension, migration or scale-down
        leaves are not counted free: a checkpoint write or draining requests hold them)."""
        if isinstance(action, Scale):
            return self._book_replicas(action)
        if not isinstance(action, Start | Resume | Migrate):
            return True
        if isinstance(action, Migrate):  # a migrating job already counts in its quota
            return self.take_for(action.job, action.site, action.gpu_model) is not None
        return self.take_job(action.job, action.site, action.gpu_model) is not None

    def _book_replicas(self, action: Scale) -> bool:
        """Book the GPUs (or MIG slices) the new replicas of `action`'s variant take."""
        svc, site, variant = action.service, action.site, action.variant
        more = action.replicas - svc.replicas(site, variant) - svc.starting(site, variant)
        if more <= 0:
            return True
        spec = next(v for v in svc.variants if v.name == (variant or svc.variants[0].name))
        if spec.mig_profile is not None:
            return all(
                self._take_slice(site, spec.gpu, spec.mig_profile) is not None for _ in range(more)
            )
        return self.take(site, spec.gpu, more * spec.gpus_per_replica) is not None

    def can_take(self, job: JobView, site: str, model: str) -> bool:
        """Whether `take_job(job, site, model)` would succeed now (taking nothing)."""
        if not self.vc_fits(job):
            return False
        if job.mig_profile:
            slices = self._slices.get(site)
            if slices is None:
                slices = self._slices[site] = self._state.free_mig_slices(site)
            return slices.get(model, {}).get(job.mig_profile, 0) >= 1
        if job.gpu_milli >= _MILLI_PER_GPU:
            return self.at(site).get(model, 0) >= job.gpus and self._placed(site, model, job.gpus)
        shared = self._shared.get(site)
        if shared is None:
            shared = self._shared[site] = self._state.shared_gpus(site)
        room = any(used + job.gpu_milli <= _MILLI_PER_GPU for used in shared.get(model, []))
        return room or self.at(site).get(model, 0) >= 1

    def take_job(
        self, job: JobView, site: str, model: str | None, gpus: int | None = None
    ) -> str | None:
        """Take what starting `job` at `site` on `model` (None: the first pool where it
        fits) needs, on `gpus` GPUs (None: its own): its virtual cluster's quota room and
        its GPUs, shared room or MIG slice (`take_for`); returns the model, or None."""
        own = job.gpus
        n = own if gpus is None else gpus
        room = self._quota_room(job)
        if room < n:
            return None
        taken = self.take_for(job, site, model) if n == own else self.take(site, model, n)
        if taken is not None:
            self._count_quota(job, room, n)
        return taken

    def take_for(self, job: JobView, site: str, model: str | None) -> str | None:
        """Take what `job` needs at `site` of `model` (None: of the first pool where it
        fits): its GPUs, or a fractional job's room on a shared GPU or one free GPU; returns
        the model taken, or None if it does not fit (a MIG job: a free slice of its profile
        in a partitioned pool)."""
        if job.mig_profile:
            return self._take_slice(site, model, job.mig_profile)
        milli = job.gpu_milli
        if milli >= _MILLI_PER_GPU:
            return self.take(site, model, job.gpus)
        shared = self._shared.get(site)
        if shared is None:
            shared = self._shared[site] = self._state.shared_gpus(site)
        for m, n in self.at(site).items():
            if model is not None and m != model:
                continue
            held = shared[m]
            g = next((g for g, used in enumerate(held) if used + milli <= _MILLI_PER_GPU), None)
            if g is not None:
                held[g] += milli
                return m
            if n >= 1:
                self._free[site][m] = n - 1
                held.append(milli)
                return m
        return None

    def _take_slice(self, site: str, model: str | None, profile: str) -> str | None:
        """Take a free `profile` MIG slice at `site` of `model` (None: of the first
        partitioned pool with one); returns the model taken, or None."""
        slices = self._slices.get(site)
        if slices is None:
            slices = self._slices[site] = self._state.free_mig_slices(site)
        for m, free in slices.items():
            if (model is None or m == model) and free.get(profile, 0) >= 1:
                free[profile] -= 1
                return m
        return None

    def take(self, site: str, model: str | None, gpus: int) -> str | None:
        """Take `gpus` free GPUs of `model` at `site` (None: of the first pool with enough);
        returns the model taken, or None if they are not free."""
        site_free = self.at(site)
        for m, n in site_free.items():
            if (model is None or m == model) and n >= gpus and self._placed(site, m, gpus, True):
                site_free[m] = n - gpus
                return m
        return None

    def _placed(self, site: str, model: str, gpus: int, take: bool = False) -> bool:
        """Whether `gpus` whole GPUs of `model` at `site` can be placed on its servers after
        the starts planned so far (True for a pool without servers); with `take`, they
        are taken."""
        servers = self._servers.get(site)
        if servers is None:
            servers = self._servers[site] = self._state.servers(site)
        if model not in servers:
            return True
        place, free = servers[model]
        assignment = place(free, gpus)
        if assignment is not None and take:
            for s, g in assignment:
                free[s] -= g
        return assignment is not None


def first_come_first_served(
    state: SystemState,
    backfill: bool = False,
    place: Callable[[FreeGpus, JobView], Start | None] = FreeGpus.place,
) -> list[Action]:
    """Start the pending jobs now, in queue order, each where `place(free, job)` puts it
    (default: the first site with a pool of enough free GPUs, the job's origin first),
    taking its GPUs from one ledger `free`. A job that fits nowhere waits, and so do the
    jobs behind it unless `backfill` (greedy backfilling without reservations: small jobs
    can delay a large head job). A job its virtual cluster's quota holds back waits without
    holding back the others (each virtual cluster queues on its own)."""
    if not state.pending:
        return []
    free = FreeGpus(state)
    actions: list[Action] = []
    for job in state.pending:
        if not free.vc_fits(job):
            continue
        placed = place(free, job)
        if placed is not None:
            actions.append(placed)
        elif not backfill:
            break
    return actions
