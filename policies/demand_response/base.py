"""`DemandResponse`: the base of the demand-response policies, an `Adjuster` that applies
the rules of docs/policies-demand-response.md ("How they work") and leaves to each
strategy the hooks below: `solve` (how the site's jobs share the power, rules 2-3 and 5),
`admit` and `late_index` (which starts run, rule 4), `prepare` (what it needs of a job)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.demand_response.curves import Curves
from policies.demand_response.memory import Memory
from policies.demand_response.onsite import OnsiteFirst
from policies.demand_response.planner import (
    Amendment,
    Entry,
    SitePlan,
    SitePlanner,
    active_limits,
)
from policies.kit import Adjuster
from sim.api import Action, SetBattery, SystemState

__all__ = ["DemandResponse"]


@dataclass
class DemandResponse(Adjuster):
    margin_pct: float = 1.0
    """Safety margin below the limit, % of the limit (0 to < 50): target facility power =
    limit x (1 - margin_pct / 100)."""
    redirect: bool = True
    """Send a start held at a site under an event to another site without an active event
    that has enough free GPUs (the first in the scenario's order), instead of holding it."""
    onsite_first: bool = True
    """At a site with on-site energy (metered on its grid import), serve an event from the
    battery and the site's generation first and slow the jobs only for the rest
    (`policies.demand_response.onsite`); False: the workload alone meets the limit, the
    battery left as it was."""

    def __post_init__(self) -> None:
        if not (isinstance(self.margin_pct, int | float) and 0.0 <= self.margin_pct < 50.0):
            raise ValueError(f"margin_pct must be in [0, 50), got {self.margin_pct!r}")
        self.curves = Curves()
        self._mem = Memory(None)
        self._battery_sites: set[str] = set()

    # ---- the strategy's hooks ----

    def solve(self, planner: SitePlanner, entries: list[Entry], budget_w: float) -> SitePlan:
        """How `entries` (the site's running jobs, then the starts `admit` chose) share
        `budget_w`, the IT power their GPUs may draw, W: a curve index per entry, at most
        its ceiling (rule 3), and the jobs to suspend, resume or hold; infeasible if even
        the lowest caps do not fit (rule 5)."""
        raise NotImplementedError

    def admit(self, planner: SitePlanner) -> list[tuple[int, Entry]]:
        """The plan's starts at the site (`planner.arriving`) to size together with the running
        jobs in `solve`, as (index in the plan, `planner.arrival(...)`); default: none."""
        return []

    def late_index(self, entry: Entry, level: float | None) -> int | None:
        """A start `admit` left out, at a site that does not hold its starts: the curve
        index it runs at on the running jobs' terms (`level` of their `SitePlan`), if the
        power left allows; None: hold it (the default)."""
        return None

    def prepare(self, planner: SitePlanner, entry: Entry) -> None:
        """Fill what the strategy needs of an entry beyond its curve (default: nothing)."""

    # ---- the shared procedure ----

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        if self._mem.state is not state:  # a new run
            self._mem = Memory(state)
            self._battery_sites = set()
        limits = active_limits(state)
        workload_kw = dict(limits)
        onsite = OnsiteFirst(state, self._battery_sites)
        if self.onsite_first:
            taken = {a.site for a in actions if isinstance(a, SetBattery)}
            onsite.plan(limits, self.margin_pct, taken)
            workload_kw.update(onsite.limits_kw)
            ours = {a.site for a in onsite.actions}
            actions = [a for a in actions if not (isinstance(a, SetBattery) and a.site in ours)]
        plan = Amendment(state, self._mem, limits, actions)
        plan.forget_taken_over()
        front = plan.resume_paused()
        plan.walk()
        for site, limit_kw in workload_kw.items():
            SitePlanner(self, plan, site, limit_kw).plan()
        if self.redirect:
            plan.redirect_held()
        return front + plan.kept() + plan.restores() + plan.tail + onsite.actions
