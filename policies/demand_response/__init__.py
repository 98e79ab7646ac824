"""Demand-response policies: `dr_uniform_cap`, `dr_fair_slowdown`, `dr_complementary`, `dr_pause`.

A demand-response (DR) event asks a site to keep its facility power under `limit_kw` during
[start_s, end_s) (`state.demand_response(site)`). All four policies are adjusters
(`policies.kit.Adjuster`): alone they adjust what `run_now` plans, in a `chain` they come
last and have the final word on the plan of the members before them. They follow the same
rules (target, prediction, caps, starts, infeasible limits, after the event: written once,
in docs/policies-demand-response.md, "How they work") and differ only in how they bring
the running jobs of a site under the limit:

- `dr_uniform_cap`: one equal per-GPU power cap for every running GPU of the site;
- `dr_fair_slowdown`: one equal throughput fraction (relative slowdown) for every job;
- `dr_complementary`: caps first the jobs that lose least work per watt saved;
- `dr_pause`: checkpoints and suspends interruptible jobs, resumes them after the event.

Modules: `base` (`DemandResponse`: the parameters, the strategy hooks, the procedure),
`planner` (one decision's plan and the per-site planner that applies the rules),
`strategies` (the four policies), `curves` (operating-point curves from the hardware
model), `memory` (what a policy remembers across decisions).
"""

from policies.demand_response.strategies import (
    DrComplementary,
    DrFairSlowdown,
    DrPause,
    DrUniformCap,
)

__all__ = ["DrComplementary", "DrFairSlowdown", "DrPause", "DrUniformCap"]
