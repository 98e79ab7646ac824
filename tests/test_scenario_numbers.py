"""Every number in a scenario file is finite and of a magnitude someone could mean.

The specification walks the scenario schema itself, so a numeric field added later is
covered (or the first test says how to cover it): each numeric field is bounded by its
unit or by its own `le`/`lt`, and a NaN, an infinity or a value ten times its bound in
any of them is a one-line `ScenarioError` naming the key path.
"""

from __future__ import annotations

import copy
import math
import tomllib
import types
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel

from sim.config.base import UNIT_LIMITS, unit_limit
from sim.config.loading import scenario_from_dict
from sim.config.overrides import set_value
from sim.config.scenario import Scenario
from sim.errors import ScenarioError

CHECKED_BY_VALIDATORS = {
    "Scenario.seed": "any non-negative integer seeds numpy's generators",
    "Site.pue": "Site._pue: 1 <= PUE <= MAX_PUE",
    "DurationDist.components": "DurationDist._params: low_h and high_h at most ten years",
    "SyntheticWorkload.gpus": "_gpu_mix: counts at most MAX_POOL_GPUS, probabilities sum to 1",
    "SyntheticWorkload.origin_sites": "relative weights; only their ratios matter",
    "ServiceConfig.replicas": "Scenario._check_services: replicas must fit the site's pool",
    "PoolConfig.replicas": "Scenario._check_services: a pool's replicas must fit the site's",
    "PredictionErrorConfig.sigma_frac": "PredictionSigma: 0 <= sigma <= MAX_PREDICTION_SIGMA",
    "VirtualClustersConfig.quota_gpus": "each quota: 1 <= GPUs <= 1,048,576 (Annotated Field)",
    "Site.max_servers": "1 <= servers <= MAX_POOL_GPUS (Annotated Field), or a word",
}
"""Numeric fields without a unit or an `le`/`lt` bound, and what bounds them instead."""

KITCHEN_SINK = """
name = "every table"
start = 2020-06-01T00:00:00Z
duration_h = 48

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
pue = 1.2
idle_w = { A100-80GB = 60 }
power_off = { idle_s = 900, wake_s = 300, off_w = 10 }
host_w_per_gpu = 50
gpus_per_node = 8
checkpoint_write_gbps = 2
checkpoint_read_gbps = 2
carbon.zone = "DE"
carbon.year = 2020
carbon.blend_zone = "FR"
carbon.blend_weight = 0.5
carbon.scale = 1.0
carbon.offset_g_per_kwh = 0
decision_carbon.zone = "DE"
decision_carbon.year = 2020
decision_carbon.kind = "marginal"
decision_carbon.blend_zone = "FR"
decision_carbon.blend_weight = 0.5
decision_carbon.scale = 1.0
decision_carbon.offset_g_per_kwh = 0
gpus = [{ model = "A100-80GB", count = 16, reserved = 4, spot = 4, purchase_year = 2019 }]
tariff.kind = "wholesale"
tariff.year = 2018
tariff.adder_per_kwh = 0.05
tariff.demand_charge_per_kw_month = 10
tariff.demand_interval_min = 15
onsite.pv_kwp = 100
onsite.wind_kw = 50
onsite.wind_offshore_kw = 10
onsite.profile = { zone = "DE", year = 2019 }
onsite.pv_embodied_kg_per_kwp = 1836
onsite.pv_lifetime_years = 30
onsite.wind_embodied_kg_per_kw = 700
onsite.wind_lifetime_years = 25
battery.capacity_kwh = 200
battery.power_kw = 50
battery.charge_efficiency = 0.95
battery.discharge_efficiency = 0.95
battery.soc_min = 0.1
battery.soc_max = 0.9
battery.initial_soc = 0.5
battery.self_discharge_per_day = 0.001
battery.fade_per_cycle = 0.00005
battery.embodied_kg_per_kwh = 83.5
battery.lifetime_years = 15
grid_connection.import_limit_kw = 5000
grid_connection.export_limit_kw = 100
grid_connection.export_price_per_kwh = 0.04
contracts.matching = "hourly"
contracts.certificates_mwh = 100
contracts.ppa = [{ technology = "wind_onshore", kw = 400, profile = { zone = "DE", year = 2019 } }]

[[sites]]
name = "b"
lat = 48.9
lon = 2.4
carbon = { constant_g_per_kwh = 50 }
gpus = [{ model = "A100-80GB", count = 16 }]
tariff.kind = "tou"
tariff.timezone = "UTC"
tariff.periods = [{ start_hour = 0, end_hour = 24, rate_per_kwh = 0.1 }]
contracts.ppa = [{ mwh_per_year = 1000 }]

[[sites]]
name = "c"
lat = 40.4
lon = -3.7
carbon = { constant_g_per_kwh = 100 }
gpus = [{ model = "A100-80GB", servers = { model = "DGX-A100", count = 2 }, lifetime_years = 5 }]
placement = "spread"
max_servers = 2

[workload]
checkpoint_interval_h = 1

[workload.synthetic]
offered_load = 0.5
offered_load_gpus = 32
max_jobs = 50
gpus = { 1 = 1.0 }
origin_sites = { a = 1, b = 1 }
diurnal_amplitude = 0.3
peak_hour = 15
weekly_amplitude = 0.2
deferrable_fraction = 0.5
slack_h = [6, 24]
interruptible_fraction = 0.5
checkpoint_gb = 10
data_gb = 10
duration = { dist = "lognormal", median_h = 1.0, sigma = 1.0 }

[forecast]
model = "gaussian"
sigma_frac = 0.1

[wan]
topology = "europe"
flow_gbps = 10
max_attach_km = 1000
k_paths = 2
link_gbps = 100
fibre_km_per_s = 204190
zone_max_km = 1000
fallback_g_per_kwh = 436

[[demand_response]]
site = "a"
generator = "daily_peak"
hour = 17
duration_h = 2
limit_kw = 20
notice_h = 1
rebound_h = 2
program = "p"

[[demand_response]]
site = "b"
generator = "high_carbon"
percentile = 90
min_duration_h = 1
reduction_pct = 10

[dr_programs.p]
capacity_per_kw_month = 2.174
committed_kw = 5
pay_per_kwh_shed = 0.4
penalty_per_kwh_over = 0.4
baseline = "constant"
baseline_kw = 30

[[services]]
name = "chat"
model = "Llama-3.1-8B-Instruct"
gpu = "A100-80GB"
sites = ["a"]
gpus_per_replica = 1
max_batch = 64
timeout_s = 60
replicas = { a = 1 }
slo = { ttft_ms = 500, tpot_ms = 100, percentile = 99 }
quality = 48.3
quality_floor = 40
budget_per_h = 10
prefix_cache_hit_rate = 0.5
parallel = { tp = 1, ep = 1 }
directives = [{ name = "normal", output_factor = 1.0, quality_penalty = 0.0 }]
scheduler = { max_num_batched_tokens = 2048, max_num_seqs = 64, max_model_len = 8192 }

[[services.variants]]
name = "s"
model = "Qwen3-8B"
gpus_per_replica = 1
max_batch = 32
quality = 45
scheduler = { max_num_batched_tokens = 1024, max_num_seqs = 32, max_model_len = 4096 }

[services.requests]
rate_per_s = 1.0
daily_amplitude = 0.3
weekly_amplitude = 0.1
daily_peak_hour = 14
tokens.input = { law = "fixed", tokens = 200 }
tokens.output = { law = "lognormal", median = 300, sigma = 1.0, min = 1, max = 8000 }

[[services]]
name = "split"
model = "Llama-3.1-8B-Instruct"
gpu = "A100-80GB"
sites = ["a"]
slo = { ttft_ms = 500, tpot_ms = 100 }
requests = { rate_per_s = 1.0 }

[services.disaggregation]
link = "IB-HDR"
prefill = { gpus_per_replica = 1, max_batch = 64, cap_w = 300, replicas = { a = 1 } }
decode = { gpus_per_replica = 1, max_batch = 64, cap_w = 300, replicas = { a = 1 } }

[prices]
per_gpu_h = { "A100-80GB" = 3.0 }
spot_per_gpu_h = { "A100-80GB" = 0.6 }
reserved_per_gpu_h = { "A100-80GB" = 1.2 }

[spot]
eviction_rate_per_node_h = 2e-4
notice_s = 120
unavailable_h = 1

[serving]
fidelity = "iteration"
step_s = 60

[failures]
rate_per_gpu_h = 2e-5

[virtual_clusters]
quota_gpus = { vcA = 8 }

[sharing]
slowdown_full = 0.19

[scaling]
nics_per_node = 4

[rebound]
resubmit_elasticity = 0.5
gpus_elasticity = 0.2
work_elasticity = 0.1
think_time_s = 600
max_generations = 2
max_iterations = 30

[functions]
site = "a"
functions = 10
max_rate_per_day = 1000
history = 20
keep_alive = { name = "carbon_aware", window_s = 600, max_window_s = 1800, window_step_s = 60 }
"""

ALTERNATIVE_KEYS = {
    "CarbonConfig.constant_g_per_kwh": "sites[1].carbon.constant_g_per_kwh",
    "SyntheticWorkload.arrival_rate_per_h": "workload.synthetic.arrival_rate_per_h",
    "DurationDist.mean_h": "workload.synthetic.duration.mean_h",
    "DurationDist.components": "workload.synthetic.duration.components",
    "ForecastConfig.scale": "forecast.scale",
    "WanConfig.network_pue": "wan.network_pue",
    "WanConfig.redundancy": "wan.redundancy",
    "WanConfig.per_gb_kwh": "wan.per_gb_kwh",
    "RequestSource.time_scale": "services[0].requests.time_scale",
    "DemandResponseEvent.reduction_pct": "demand_response[0].reduction_pct",
    "DemandResponseEvent.percentile": "demand_response[1].percentile",
    "DemandResponseEvent.min_duration_h": "demand_response[1].min_duration_h",
    "PredictionErrorConfig.sigma_frac": "prediction_error.sigma_frac",  # not with [rebound]
    # a pool of servers has no MIG, reserved or spot GPUs and no power_off: the third site's
    "PoolServers.count": "sites[2].gpus[0].servers.count",
    "Site.max_servers": "sites[2].max_servers",
    "GpuPool.lifetime_years": "sites[2].gpus[0].lifetime_years",
    # dr_programs is a table of named programs: the sink's is "p"
    "DrProgram.capacity_per_kw_month": "dr_programs.p.capacity_per_kw_month",
    "DrProgram.committed_kw": "dr_programs.p.committed_kw",
    "DrProgram.pay_per_kwh_shed": "dr_programs.p.pay_per_kwh_shed",
    "DrProgram.penalty_per_kwh_over": "dr_programs.p.penalty_per_kwh_over",
    "DrProgram.baseline_kw": "dr_programs.p.baseline_kw",
    # a PPA is either by technology and kw or by mwh_per_year: the sink's second site has one
    "PpaConfig.mwh_per_year": "sites[1].contracts.ppa[0].mwh_per_year",
    "TouPeriod.start_hour": "sites[1].tariff.periods[0].start_hour",  # not with wholesale
    "TouPeriod.end_hour": "sites[1].tariff.periods[0].end_hour",
    "TouPeriod.rate_per_kwh": "sites[1].tariff.periods[0].rate_per_kwh",
    # each direction of `tokens` holds one law: the sink's input is fixed, its output lognormal
    "FixedTokens.tokens": "services[0].requests.tokens.input.tokens",
    "LogNormalTokens.median": "services[0].requests.tokens.output.median",
    "LogNormalTokens.sigma": "services[0].requests.tokens.output.sigma",
    "LogNormalTokens.min": "services[0].requests.tokens.output.min",
    "LogNormalTokens.max": "services[0].requests.tokens.output.max",
    # a disaggregated service (services[1]) has no variants: its pools' keys there, and
    # every scheduler's at the service's own (one class: the same checks)
    **{
        f"PoolConfig.{k}": f"services[1].disaggregation.prefill.{k}"
        for k in ("gpus_per_replica", "max_batch", "cap_w", "replicas")
    },
    **{
        f"SchedulerConfig.{k}": f"services[0].scheduler.{k}"
        for k in ("max_num_batched_tokens", "max_num_seqs", "max_model_len")
    },
}
"""Fields the kitchen sink cannot hold next to their alternatives; their key paths."""


def _numeric(annotation: Any) -> bool:
    """Whether a field holds numbers (alone, or inside lists, tuples or tables)."""
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in typing.get_args(annotation) if a is not type(None))


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _is_list(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return typing.get_origin(annotation) is list


def numeric_fields(
    model: type[BaseModel] = Scenario, prefix: str = ""
) -> Iterator[tuple[str, str, Any]]:
    """(Model.field, key path in the kitchen sink, field info) of every numeric field."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        for sub in _models(info.annotation):
            yield from numeric_fields(sub, f"{key}[0]." if _is_list(info.annotation) else f"{key}.")
        if _numeric(info.annotation) and not any(True for _ in _models(info.annotation)):
            qualified = f"{model.__name__}.{name}"
            yield qualified, ALTERNATIVE_KEYS.get(qualified, key), info


def _upper_bound(info: Any) -> float | None:
    for m in info.metadata:
        if isinstance(m, annotated_types.Le):
            return float(m.le)  # type: ignore[arg-type]
        if isinstance(m, annotated_types.Lt):
            return float(m.lt)  # type: ignore[arg-type]
    return None


def _kitchen_sink() -> dict[str, Any]:
    return tomllib.loads(KITCHEN_SINK)


def _value_at(raw: Any, key: str) -> Any:
    node = raw
    for part in key.replace("[", ".").replace("]", "").split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _replace_numbers(value: Any, new: float) -> Any:
    """`value` with its first number replaced by `new` (the field's shape kept)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return new
    if isinstance(value, list):
        return [_replace_numbers(value[0], new), *value[1:]]
    if isinstance(value, dict):
        first = next(iter(value))
        return {**value, first: _replace_numbers(value[first], new)}
    raise AssertionError(f"no number in {value!r}")


def _validate_with(key: str, value: Any) -> None:
    raw = _kitchen_sink()
    current = _value_at(raw, key) if _has(raw, key) else 1.0
    set_value(raw, key, _replace_numbers(copy.deepcopy(current), value))
    scenario_from_dict(raw, "sink.toml")


def _has(raw: dict[str, Any], key: str) -> bool:
    try:
        _value_at(raw, key)
    except (KeyError, IndexError):
        return False
    return True


FIELDS = list(numeric_fields())
KEYS = [pytest.param(key, id=name) for name, key, _ in FIELDS]


def test_the_kitchen_sink_scenario_is_valid_and_holds_every_numeric_field():
    raw = _kitchen_sink()
    scenario_from_dict(copy.deepcopy(raw), "sink.toml")
    missing = [
        name
        for name, key, _ in FIELDS
        if name not in ALTERNATIVE_KEYS and not _has(raw, key) and name != "Scenario.seed"
    ]
    assert not missing, f"add these fields to KITCHEN_SINK: {missing}"


def test_every_numeric_field_is_bounded_by_its_unit_its_own_limit_or_a_validator():
    unbounded = [
        name
        for name, _, info in FIELDS
        if unit_limit(name.split(".")[1]) is None
        and _upper_bound(info) is None
        and name not in CHECKED_BY_VALIDATORS
    ]
    assert not unbounded, (
        f"name these fields for their unit ({', '.join(u.suffix for u in UNIT_LIMITS)}), "
        f"give them le/lt, or say in CHECKED_BY_VALIDATORS what bounds them: {unbounded}"
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("key", KEYS)
def test_a_non_finite_number_in_any_field_is_an_error_naming_the_key(key: str, bad: float):
    with pytest.raises(ScenarioError) as e:
        _validate_with(key, bad)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("sink.toml: ")
    assert key.split(".")[-1].split("[")[0] in message


@pytest.mark.parametrize(
    ("key", "limit"),
    [
        pytest.param(key, unit_limit(name.split(".")[1]).max_abs, id=name)  # type: ignore[union-attr]
        for name, key, _ in FIELDS
        if unit_limit(name.split(".")[1]) is not None
    ],
)
def test_ten_times_a_units_limit_cannot_be_meant(key: str, limit: float):
    with pytest.raises(ScenarioError, match="cannot be meant") as e:
        _validate_with(key, 10 * limit)
    assert key.split(".")[-1].split("[")[0] in str(e.value)


@pytest.mark.parametrize(
    "override",
    [
        "policy.params={margin_s=nan}",
        "policy.params={policies=[{name='run_now', params={watts=inf}}]}",
        "gpu_models={X={tdp_w=nan}}",
    ],
)
def test_free_form_tables_refuse_non_finite_numbers_too(override: str):
    raw = _kitchen_sink()
    from sim.config.overrides import apply_override

    apply_override(raw, override)
    with pytest.raises(ScenarioError, match="is not a finite number"):
        scenario_from_dict(raw, "sink.toml")


def test_a_policy_parameter_named_for_its_unit_is_bounded_by_it():
    raw = _kitchen_sink()
    set_value(raw, "policy.params", {"margin_s": 1e20})
    with pytest.raises(ScenarioError, match=r"policy\.params: margin_s = 1e\+20 s cannot be meant"):
        scenario_from_dict(raw, "sink.toml")


def test_a_synthetic_workload_of_more_jobs_than_a_run_can_hold_is_refused():
    raw = _kitchen_sink()
    del raw["workload"]["synthetic"]["max_jobs"]
    set_value(raw, "workload.synthetic.offered_load", 100.0)
    set_value(raw, "workload.synthetic.duration.median_h", 1e-6)
    with pytest.raises(ScenarioError, match="jobs over 48 h; a run holds at most 10,000,000"):
        scenario_from_dict(raw, "sink.toml")


def test_a_nan_in_a_union_field_names_the_item_not_the_union_member():
    raw = _kitchen_sink()
    set_value(raw, "sites[0].pue", [1.2] * 23 + [math.nan])
    with pytest.raises(ScenarioError, match=r"sites\[0\]\.pue\[23\]: Input should be a finite"):
        scenario_from_dict(raw, "sink.toml")
