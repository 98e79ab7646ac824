"""The scenario: every section validated and frozen (sites, workload, services, market,
runtime options), their composition and cross-section checks (`Scenario`), loading a TOML
file and `--set` overrides. All input validation lives here; it imports only `sim.models`,
`sim.util` and `sim.errors`.

- base.py: `ConfigModel`, the base of every table (unknown keys refused, numbers finite and
  bounded by their unit).
- sites.py: `[[sites]]`: `Site`, its `CarbonConfig`, `GpuPool`s, `PowerOff`, `SiteForecast`.
- workload.py: `[workload]` and how jobs run: `Workload`, `SyntheticWorkload`,
  `DurationDist`, `ThroughputConfig`, `ScalingConfig`, `SharingConfig`,
  `VirtualClustersConfig`, `ReboundConfig`, `PredictionErrorConfig`.
- services.py: `[[services]]` and `[serving]`: `ServiceConfig`, `ServingConfig`.
- market.py: `Tariff`, `PriceConfig`, `DrProgram`, `DemandResponseEvent`, `SpotConfig`.
- runtime.py: `ForecastConfig`, `WanConfig`, `FailuresConfig`, `PolicyConfig`.
- functions.py: `[functions]`: `FunctionsConfig` and its keep-alive policies.
- scenario.py: `Scenario`, the sections composed and checked against each other.
- loading.py: `load_scenario`, `scenario_from_dict`, `read_scenario_toml`.
- overrides.py: `--set`: `apply_override`, `parse_value`, `set_value`.
"""

from sim.config.loading import load_scenario, read_scenario_toml, scenario_from_dict
from sim.config.market import (
    AWS_SPOT_NOTICE_S,
    MAX_EVICTIONS_PER_NODE_H,
    MAX_RATE_PER_KW_MONTH,
    MAX_RATE_PER_KWH,
    DemandResponseEvent,
    DrProgram,
    PriceConfig,
    SpotConfig,
    Tariff,
    TouPeriod,
)
from sim.config.overrides import apply_override, parse_value, set_value
from sim.config.runtime import (
    LLAMA3_FAILURES_PER_GPU_H,
    MAX_FAILURES_PER_GPU_H,
    FailuresConfig,
    ForecastConfig,
    PolicyConfig,
    WanConfig,
)
from sim.config.scenario import SCHEMA_VERSION, Scenario
from sim.config.services import ServiceConfig, ServingConfig, Variant
from sim.config.sites import (
    MAX_POOL_GPUS,
    MAX_PUE,
    CarbonConfig,
    GpuPool,
    PowerOff,
    Site,
    SiteForecast,
)
from sim.config.workload import (
    HABITAT_AVERAGE_ERROR,
    MAX_JOBS,
    MAX_MEASURED_SPEED,
    MAX_PREDICTION_SIGMA,
    PHILLY_DURATION,
    PHILLY_GPUS,
    PRESETS,
    THROUGHPUT_COLUMNS,
    DurationDist,
    PredictionErrorConfig,
    PredictionSigma,
    ReboundConfig,
    ScalingConfig,
    SharingConfig,
    SyntheticWorkload,
    ThroughputConfig,
    VirtualClustersConfig,
    Workload,
    read_throughput_table,
)

__all__ = [
    "AWS_SPOT_NOTICE_S",
    "HABITAT_AVERAGE_ERROR",
    "LLAMA3_FAILURES_PER_GPU_H",
    "MAX_EVICTIONS_PER_NODE_H",
    "MAX_FAILURES_PER_GPU_H",
    "MAX_JOBS",
    "MAX_MEASURED_SPEED",
    "MAX_POOL_GPUS",
    "MAX_PREDICTION_SIGMA",
    "MAX_PUE",
    "MAX_RATE_PER_KWH",
    "MAX_RATE_PER_KW_MONTH",
    "PHILLY_DURATION",
    "PHILLY_GPUS",
    "PRESETS",
    "SCHEMA_VERSION",
    "THROUGHPUT_COLUMNS",
    "CarbonConfig",
    "DemandResponseEvent",
    "DrProgram",
    "DurationDist",
    "FailuresConfig",
    "ForecastConfig",
    "GpuPool",
    "PolicyConfig",
    "PowerOff",
    "PredictionErrorConfig",
    "PredictionSigma",
    "PriceConfig",
    "ReboundConfig",
    "ScalingConfig",
    "Scenario",
    "ServiceConfig",
    "ServingConfig",
    "SharingConfig",
    "Site",
    "SiteForecast",
    "SpotConfig",
    "SyntheticWorkload",
    "Tariff",
    "ThroughputConfig",
    "TouPeriod",
    "Variant",
    "VirtualClustersConfig",
    "WanConfig",
    "Workload",
    "apply_override",
    "load_scenario",
    "parse_value",
    "read_scenario_toml",
    "read_throughput_table",
    "scenario_from_dict",
    "set_value",
]
