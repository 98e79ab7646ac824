"""On-site energy: the physics of a site's own energy equipment and its balance with the
grid, engine-free. `battery` (a battery with exact piecewise-constant-power dynamics:
efficiencies, state-of-charge bounds and the time it reaches one, self-discharge, ageing
by throughput), `balance` (one interval's site energy balance: on-site use, battery,
grid import and export, curtailment, the connection limit, with exact identities) and
`embodied` (embodied carbon of batteries and PV, amortised over a lifetime).
They take numbers, never a `Scenario`, and import only `sim.util` and `sim.errors`.
"""

from sim.energy.balance import GridConnection, SiteBalance, site_balance
from sim.energy.battery import Battery, BatteryInterval, BatteryState
from sim.energy.embodied import amortised_embodied_kg

__all__ = [
    "Battery",
    "BatteryInterval",
    "BatteryState",
    "GridConnection",
    "SiteBalance",
    "amortised_embodied_kg",
    "site_balance",
]
