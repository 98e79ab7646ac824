"""A golden-case policy that drives the engine's rare paths: caps and migrations of jobs
still held (nodes booting, checkpoints loading), suspensions during demand-response
events, rejections of suspended jobs while an event is on, resumes elsewhere, on a timer.

It is duck-typed (no `sim.api.Policy` base) on purpose: the engine must read its hooks
by name. Deterministic: it decides from job indices and the state alone.
"""

from __future__ import annotations

from sim.api import Action, JobView, Migrate, Reject, Resume, SetCap, Start, Suspend, SystemState


class Adversary:
    tick_s = 1800.0

    def __init__(self) -> None:
        self.capped: set[str] = set()
        self.migrated: set[str] = set()
        self.suspended_once: set[str] = set()

    def _fits(
        self,
        state: SystemState,
        free: dict[str, dict[str, int]],
        job: JobView,
        sites: list[str],
        cap_w: float | None = None,
    ) -> tuple[str, str] | None:
        for site in sites:
            if site not in job.allowed_sites:
                continue
            for model, n in free[site].items():
                spec = state.gpu_spec(model)
                cap_ok = cap_w is None or spec.min_cap_w <= cap_w <= spec.max_cap_w
                if n >= job.gpus and cap_ok:
                    return site, model
        return None

    def _take(self, free: dict[str, dict[str, int]], job: JobView, where: tuple[str, str]):
        free[where[0]][where[1]] -= job.gpus

    def decide(self, state: SystemState) -> list[Action]:
        now = state.now_s
        free = {s: dict(state.free_gpus(s)) for s in state.sites}
        active = {e.site for e in state.demand_response() if e.start_s <= now < e.end_s}
        actions: list[Action] = []
        for job in list(state.running):
            if job.held:
                if job.index % 3 == 0 and job.id not in self.capped:
                    spec = state.gpu_spec(job.gpu_model or "")
                    cap_w = spec.min_cap_w + 0.5 * (spec.max_cap_w - spec.min_cap_w)
                    actions.append(SetCap(job, cap_w))
                    self.capped.add(job.id)
                elif job.interruptible and job.index % 3 == 1 and job.id not in self.migrated:
                    others = [s for s in state.sites if s != job.site]
                    where = self._fits(state, free, job, others, job.cap_w)
                    if where:
                        self._take(free, job, where)
                        actions.append(Migrate(job, where[0], where[1]))
                        self.migrated.add(job.id)
            elif (
                (job.site in active or job.index % 7 == 0)
                and job.interruptible
                and job.index % 2 == 0
                and job.id not in self.suspended_once
            ):
                actions.append(Suspend(job))
                self.suspended_once.add(job.id)
        for job in list(state.suspended):
            if active and job.index % 4 == 0:
                actions.append(Reject(job, "rejected while suspended in an event"))
            elif not active:
                where = self._fits(state, free, job, [job.origin_site, *state.sites])
                if where:
                    self._take(free, job, where)
                    actions.append(Resume(job, where[0], None, where[1]))
        for job in list(state.pending):
            where = self._fits(state, free, job, [job.origin_site, *state.sites])
            if where:
                self._take(free, job, where)
                actions.append(Start(job, where[0], None, where[1]))
        return actions
