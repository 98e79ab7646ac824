"""Scheduling policies. `REGISTRY` maps the names a scenario may use to policy classes.

Policies import only `sim.api`, the kit of shared tools `policies.kit` (and numpy), never
each other: see `sim/api.py` for the contract (`Policy`), and docs/policies.md for each
policy's parameters and source.
"""

from policies.battery import BatteryCarbon
from policies.best_config import BestConfig, OracleConfig
from policies.carbon_aware_directives import CarbonAwareDirectives
from policies.carbon_aware_routing import CarbonAwareRouting
from policies.carbon_aware_variants import CarbonAwareVariants
from policies.carbon_threshold import CarbonThreshold
from policies.chain import Chain
from policies.demand_response import DrComplementary, DrFairSlowdown, DrPause, DrUniformCap
from policies.demand_response.services import DrServices
from policies.gaia import CarbonTime, LowestWindow
from policies.gaia_cost import (
    GaiaCarbon,
    GaiaCarbonCost,
    GaiaCarbonCostSpot,
    GaiaCarbonSpot,
    GaiaCost,
)
from policies.heterogeneous_pool import HeterogeneousPool
from policies.mig_partitioner import MigPartitioner
from policies.onsite_following import OnsiteFollowing
from policies.peak_shaving import PeakShaving
from policies.power_capping import CarbonAwareCap, EnergyOptimalCap, StaticCap
from policies.run_now import RunNow
from policies.serve_autoscale import ServeAutoscale
from policies.space_shifting import ForecastSite, LowestCarbonSite, MigrateWhenWorth, SpaceTime
from policies.wait_awhile import WaitAwhile

REGISTRY: dict[str, type] = {
    "run_now": RunNow,
    "chain": Chain,
    "wait_awhile": WaitAwhile,
    "carbon_threshold": CarbonThreshold,
    "lowest_window": LowestWindow,
    "carbon_time": CarbonTime,
    "static_cap": StaticCap,
    "battery_carbon": BatteryCarbon,
    "peak_shaving": PeakShaving,
    "follow_onsite": OnsiteFollowing,
    "energy_optimal_cap": EnergyOptimalCap,
    "carbon_aware_cap": CarbonAwareCap,
    "dr_uniform_cap": DrUniformCap,
    "dr_fair_slowdown": DrFairSlowdown,
    "dr_complementary": DrComplementary,
    "dr_pause": DrPause,
    "dr_services": DrServices,
    "lowest_carbon_site": LowestCarbonSite,
    "forecast_site": ForecastSite,
    "space_time": SpaceTime,
    "migrate": MigrateWhenWorth,
    "serve_autoscale": ServeAutoscale,
    "best_config": BestConfig,
    "oracle_config": OracleConfig,
    "carbon_aware_variants": CarbonAwareVariants,
    "carbon_aware_directives": CarbonAwareDirectives,
    "heterogeneous_pool": HeterogeneousPool,
    "carbon_aware_routing": CarbonAwareRouting,
    "mig_partitioner": MigPartitioner,
    "gaia_cost": GaiaCost,
    "gaia_carbon": GaiaCarbon,
    "gaia_carbon_cost": GaiaCarbonCost,
    "gaia_carbon_spot": GaiaCarbonSpot,
    "gaia_carbon_cost_spot": GaiaCarbonCostSpot,
}

__all__ = [
    "REGISTRY",
    "BatteryCarbon",
    "BestConfig",
    "CarbonAwareCap",
    "CarbonAwareDirectives",
    "CarbonAwareRouting",
    "CarbonAwareVariants",
    "CarbonThreshold",
    "CarbonTime",
    "Chain",
    "DrComplementary",
    "DrFairSlowdown",
    "DrPause",
    "DrServices",
    "DrUniformCap",
    "EnergyOptimalCap",
    "ForecastSite",
    "GaiaCarbon",
    "GaiaCarbonCost",
    "GaiaCarbonCostSpot",
    "GaiaCarbonSpot",
    "GaiaCost",
    "HeterogeneousPool",
    "LowestCarbonSite",
    "LowestWindow",
    "MigPartitioner",
    "MigrateWhenWorth",
    "OnsiteFollowing",
    "PeakShaving",
    "OracleConfig",
    "RunNow",
    "ServeAutoscale",
    "SpaceTime",
    "StaticCap",
    "WaitAwhile",
]
