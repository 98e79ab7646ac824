"""The policy kit: what more than one policy uses. A policy imports shared tools from here
(and `sim.api`, numpy, the standard library), never from another policy's module.

- `FreeGpus`: the free-GPU ledger of one decision; `first_come_first_served`: `run_now`'s
  placement of the pending queue on it (`gpus.py`).
- `Adjuster`: the base of the policies that amend a scheduler's plan; `job_of`: the job an
  action concerns (`adjuster.py`).
- `Objective`, `objective_forecast`, `objective_now`, `forecast_from_now`: what a carbon-
  or cost-aware policy minimises (carbon, the energy price, or price + priced carbon) as a
  step function of the forecast (`objective.py`).
- `TimeShifter`, `PlannedStart`: the bases of the schedulers that defer jobs, with
  `runtime_s`, `latest_start_s`, `DecisionForecast` (a site's forecast
  of one decision with its prefix sums: window means and best starts on it),
  `DecisionForecasts` (every site's, each fetched once per decision), and `ranked_starts`
  (`time_shifting.py`).
- `OperatingPoints`, `cap_grid`: the hardware model's throughput and power over a cap grid,
  once per (GPU model, profile) (`operating_points.py`).
- `Bookings`: the GPUs of a pool over time, running jobs and planned runs (`PlannedRun`,
  `Run`), to plan starts that fit the installed GPUs (`bookings.py`).
- Exact arithmetic on carbon-intensity forecasts: `window_means`, `WindowMean`,
  `best_window_start`, `best_window_plan`, `start_now_until`, `window_candidates`,
  `prefix_integrals`, `cheapest_slots`, `forecast_slots`, `time_weighted_percentile`,
  `SLIVER_S`, and `MIN_DEFER_S`, the shortest deferral worth a decision (`windows.py`).
"""

from policies.kit.adjuster import Adjuster, job_of
from policies.kit.bookings import Bookings, PlannedRun, Run
from policies.kit.gpus import FreeGpus, first_come_first_served
from policies.kit.objective import (
    OBJECTIVES,
    Objective,
    forecast_from_now,
    objective_forecast,
    objective_now,
)
from policies.kit.operating_points import OperatingPoints, cap_grid
from policies.kit.time_shifting import (
    DecisionForecast,
    DecisionForecasts,
    PlannedStart,
    Planning,
    TimeShifter,
    latest_start_s,
    ranked_starts,
    runtime_s,
)
from policies.kit.windows import (
    MIN_DEFER_S,
    SLIVER_S,
    WindowMean,
    best_window_plan,
    best_window_start,
    cheapest_slots,
    forecast_slots,
    prefix_integrals,
    start_now_until,
    time_weighted_percentile,
    window_candidates,
    window_means,
)

__all__ = [
    "MIN_DEFER_S",
    "OBJECTIVES",
    "SLIVER_S",
    "Adjuster",
    "Bookings",
    "DecisionForecast",
    "DecisionForecasts",
    "FreeGpus",
    "Objective",
    "OperatingPoints",
    "PlannedRun",
    "PlannedStart",
    "Planning",
    "Run",
    "TimeShifter",
    "WindowMean",
    "best_window_plan",
    "best_window_start",
    "cap_grid",
    "cheapest_slots",
    "first_come_first_served",
    "forecast_from_now",
    "forecast_slots",
    "job_of",
    "latest_start_s",
    "objective_forecast",
    "objective_now",
    "prefix_integrals",
    "ranked_starts",
    "runtime_s",
    "start_now_until",
    "time_weighted_percentile",
    "window_candidates",
    "window_means",
]
