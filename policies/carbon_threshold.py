"""`carbon_threshold`: start a flexible job when the grid is clean enough, else wait.

The threshold rule of carbon-aware schedulers: Souza et al., "Ecovisor: A Virtual Energy
System for Carbon-Efficient Applications", ASPLOS 2023, run work while the intensity is
below a threshold; GAIA's artifact (Hanafy et al., ASPLOS 2024, github.com/umassos/GAIA,
`suspend_scheduling_policy.py`, `compute_schedule_threshold`) runs a job while the
intensity is below the 30th percentile of the next 24 h, and regardless once its waiting
budget is spent. Here a pending job with a deadline starts if the carbon intensity at its
origin site now is at or below the threshold, either

- `threshold_g_per_kwh`, fixed, or
- `percentile` (0-100) of the forecast over the job's window [now, deadline], weighted by
  time (the smallest value the forecast stays at or below for that share of the window;
  recomputed at each decision, as the window shrinks);

exactly one of the two. Otherwise the job is deferred until the earlier of the next
forecast step (when the intensity may change) and its latest start, deadline - runtime -
`margin_s`, where it starts whatever the intensity. Once started, a job runs to the end.
Jobs without a deadline run as `run_now` would.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.kit import (
    MIN_DEFER_S,
    TimeShifter,
    latest_start_s,
    objective_forecast,
    objective_now,
    runtime_s,
    time_weighted_percentile,
)
from sim.api import JobView, SystemState

__all__ = ["CarbonThreshold"]


@dataclass
class CarbonThreshold(TimeShifter):
    threshold_g_per_kwh: float | None = None
    """Start when the intensity now is at or below this, g/kWh (or give `percentile`)."""
    percentile: float | None = None
    """Start when the intensity now is at or below this percentile (0-100) of the forecast
    over [now, deadline] (or give `threshold_g_per_kwh`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.threshold_g_per_kwh is None) == (self.percentile is None):
            raise ValueError(
                "give exactly one of threshold_g_per_kwh or percentile, got "
                f"threshold_g_per_kwh={self.threshold_g_per_kwh}, percentile={self.percentile}"
            )
        if self.threshold_g_per_kwh is not None and not self.threshold_g_per_kwh >= 0.0:
            raise ValueError(
                f"threshold_g_per_kwh must be >= 0 g/kWh, got {self.threshold_g_per_kwh}"
            )
        if self.percentile is not None and not 0.0 <= self.percentile <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {self.percentile}")
        if self.threshold_g_per_kwh is not None and self.goal.kind != "carbon":
            raise ValueError(
                f"objective {self.goal.kind!r} needs percentile: threshold_g_per_kwh is carbon"
            )

    def threshold(self, state: SystemState, job: JobView) -> float:
        """The threshold for `job` now, in the objective's unit (carbon: g/kWh)."""
        if self.threshold_g_per_kwh is not None:
            return self.threshold_g_per_kwh
        assert self.percentile is not None and job.deadline_s is not None
        now = state.now_s
        times, values = objective_forecast(state, job.origin_site, job.deadline_s - now, self.goal)
        return time_weighted_percentile(times, values, job.deadline_s, self.percentile)

    def defer_until(self, state: SystemState, job: JobView) -> float | None:
        now = state.now_s
        latest = latest_start_s(state, job, runtime_s(state, job), self.margin_s)
        if latest - now < MIN_DEFER_S:
            return None
        site = job.origin_site
        if objective_now(state, site, self.goal) <= self.threshold(state, job):
            return None
        times, _ = objective_forecast(state, site, latest - now, self.goal)
        later = times[times >= now + MIN_DEFER_S]
        return min(float(later[0]), latest) if later.size else latest
