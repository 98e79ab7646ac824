"""On-site battery dispatch against demand charges: `peak_shaving`.

An adjuster (`policies.kit.Adjuster`): it leaves the jobs and services to the scheduler it
follows (alone: `run_now`; in a `chain`: the members before it) and adds one
`SetBattery(site, import_cap_kw=cap)` per site with a battery whose cap changes. It
decides every `tick_s` and at every other decision point; between decisions the balance
itself holds the site's grid import at or below the cap at every interval (no lag).

Rule, per site with a battery: cap = max(`target_kw`, the month's running peak), at most
the connection's import limit. The running peak is `OnsiteReading.month_peak_import_kw`,
the largest mean grid import over the demand intervals (`demand_interval_min`) of the
tariff's billing month that have ended. Why the running peak: a demand charge is the
rate x the month's peak, so once a peak P is reached in the month, importing up to P in
its later intervals costs nothing more; the battery spends its energy only where the
import would go above P (and recharges from the grid below it). Below `target_kw` it is
not worth shaving (e.g. the load the site always has: a battery that empties itself on
it at the month's start only moves the peak). Before the month's first interval ends
(and at a site without a demand charge) the running peak counts as 0: the cap is then
`target_kw`, or 0, which is self-consumption (a deficit discharges the battery). The cap
being at most the import limit, the battery also keeps the site under its connection
limit while it has the energy and the rating.

docs/policies-onsite-energy.md has the parameters and an example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.kit import Adjuster
from sim.api import Action, OnsiteReading, SetBattery, SystemState

__all__ = ["PeakShaving"]


@dataclass
class PeakShaving(Adjuster):
    tick_s: float | None = 900.0
    """Decide at least this often, s (a quarter hour: the usual demand interval)."""
    target_kw: float = 0.0
    """The import the battery never shaves below, kW (>= 0)."""

    def __post_init__(self) -> None:
        if not (isinstance(self.target_kw, int | float) and 0 <= self.target_kw < math.inf):
            raise ValueError(f"peak_shaving: target_kw = {self.target_kw!r} must be >= 0")

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        out = list(actions)
        for site in state.sites:
            reading = state.onsite(site)
            if reading is None or reading.battery_power_kw is None:
                continue
            cap = self.cap_kw(reading)
            if (reading.battery_setpoint_kw, reading.battery_import_cap_kw) != (None, cap):
                out.append(SetBattery(site, import_cap_kw=cap))
        return out

    def cap_kw(self, reading: OnsiteReading) -> float:
        """The import cap this rule wants at the site now, kW."""
        peak_kw = reading.month_peak_import_kw or 0.0
        return min(max(self.target_kw, peak_kw), reading.import_limit_kw)
