"""`run_now`: first come, first served, onto the first site with enough free GPUs.

The baseline every carbon-aware policy is compared with: no deferral, no caps. Sites are
tried in order, the job's origin site first; a job takes all its GPUs from one pool.
With `backfill = true`, jobs behind a blocked head of the queue may start if they fit
now (greedy backfilling without reservations: small jobs can delay a large head job).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.api import Action, Start, SystemState


@dataclass
class RunNow:
    backfill: bool = False
    """Let later jobs that fit start while the head of the queue waits."""

    def decide(self, state: SystemState) -> list[Action]:
        if not state.pending:
            return []
        free: dict[str, dict[str, int]] = {}  # fetched per site when first needed
        actions: list[Action] = []
        for job in state.pending:
            placed = self._place(job, free, state)
            if placed is not None:
                actions.append(placed)
            elif not self.backfill:
                break
        return actions

    @staticmethod
    def _place(job, free: dict[str, dict[str, int]], state: SystemState) -> Start | None:
        origin = job.origin_site
        for site in (origin, *(s for s in state.sites if s != origin)):
            site_free = free.get(site)
            if site_free is None:
                site_free = free[site] = state.free_gpus(site)
            for model, n in site_free.items():
                if n >= job.gpus:
                    site_free[model] = n - job.gpus
                    return Start(job, site, gpu_model=model)
        return None
