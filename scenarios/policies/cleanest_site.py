"""A user's policy, loaded from this file by scenarios/user_policy.toml.

Start each job, in arrival order, on the site whose grid is cleanest right now among
those with enough free GPUs of one model; jobs that fit nowhere wait. Jobs with a
deadline may wait up to `max_wait_h` for a site under `clean_g_per_kwh`.
"""

from dataclasses import dataclass

from policies.kit import FreeGpus
from sim.api import Action, JobView, Policy, SystemState


@dataclass
class CleanestSite(Policy):
    clean_g_per_kwh: float = 150.0
    """A site at or under this carbon intensity is clean enough to start on, g/kWh."""
    max_wait_h: float = 6.0
    """How long a job with a deadline may wait for a clean site, h (never past its slack)."""

    def decide(self, state: SystemState) -> list[Action]:
        if not state.pending:
            return []
        free = FreeGpus(state)  # free GPUs per site and model, less those handed out below
        by_carbon = sorted(state.sites, key=state.carbon_intensity)
        clean = [s for s in by_carbon if state.carbon_intensity(s) <= self.clean_g_per_kwh]
        actions: list[Action] = []
        for job in state.pending:
            sites = by_carbon if self._may_start_anywhere(state, job) else clean
            start = free.place(job, sites)  # on the first of `sites` it may use and fits on
            if start is not None:
                actions.append(start)
        return actions

    def _may_start_anywhere(self, state: SystemState, job: JobView) -> bool:
        """A job without a deadline, or one that has waited long enough, takes any site."""
        if job.deadline_s is None:
            return True
        waited_h = (state.now_s - job.submit_s) / 3600.0
        runtime_s, _ = state.estimate(job, job.origin_site)
        latest_start_s = job.deadline_s - 1.2 * runtime_s  # keep a fifth in reserve
        return waited_h >= self.max_wait_h or state.now_s >= latest_start_s
