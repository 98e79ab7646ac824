"""On-site energy: the physics of a site's own energy equipment and its balance with the
grid, engine-free. `battery` (a battery with exact piecewise-constant-power dynamics:
efficiencies, state-of-charge bounds and the time it reaches one, self-discharge, ageing
by throughput), `balance` (one interval's site energy balance: on-site use, battery,
grid import and export, curtailment, the connection limit, with exact identities),
`dispatch` (a site's balance over a run: self-consumption, a power setpoint or an import
cap, re-solved at every change), `embodied` (embodied carbon of batteries, PV and wind,
amortised over a lifetime) and `market` (market-based carbon with contracts, 24/7 CFE).
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
