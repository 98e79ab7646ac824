"""A user's policy, loaded from this file by scenarios/user_policy.toml.

Start each job, in arrival order, on the site whose grid is cleanest right now among
those with enough free GPUs of one model; jobs that fit nowhere wait. Jobs with a
deadline may wait up to `max_wait_h` for a site under `clean_g_per_kwh`.
"""

from dataclasses import dataclass

from sim.api import Action, Start, SystemState


@dataclass
class CleanestSite:
    clean_g_per_kwh: float = 150.0
    """A site at or under this carbon intensity is clean enough to start on, g/kWh."""
    max_wait_h: float = 6.0
    """How long a job with a deadline may wait for a clean site, h (never past its slack)."""

    def decide(self, state: SystemState) -> list[Action]:
        if not state.pending:
            return []
        free = {site: state.free_gpus(site) for site in state.sites}
        by_carbon = sorted(state.sites, key=state.carbon_intensity)
        actions: list[Action] = []
        for job in state.pending:
            sites = by_carbon if self._may_start_anywhere(state, job) else [
                s for s in by_carbon if state.carbon_intensity(s) <= self.clean_g_per_kwh
            ]
            for site in (s for s in sites if s in job.allowed_sites):
                model = next((m for m, n in free[site].items() if n >= job.gpus), None)
                if model is not None:
                    free[site][model] -= job.gpus
                    actions.append(Start(job, site, gpu_model=model))
                    break
        return actions

    def _may_start_anywhere(self, state: SystemState, job) -> bool:
        """A job without a deadline, or one that has waited long enough, takes any site."""
        if job.deadline_s is None:
            return True
        waited_h = (state.now_s - job.submit_s) / 3600.0
        runtime_s, _ = state.estimate(job, job.origin_site)
        latest_start_s = job.deadline_s - 1.2 * runtime_s  # keep a fifth in reserve
        return waited_h >= self.max_wait_h or state.now_s >= latest_start_s
