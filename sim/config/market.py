"""The scenario's market sections: what a site pays for electricity (`[sites.tariff]`:
`Tariff` and its time-of-use periods), what GPU time costs (`[prices]`: `PriceConfig`),
demand-response events and the programs that pay for them (`[[demand_response]]`,
`[dr_programs]`) and the evictions of spot capacity (`[spot]`). `sim.market` and
`sim.engine` turn them into bills, settlements and evictions.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sim.config.base import ConfigModel, TimeZoneName
from sim.models import hardware
from sim.models.pricing import DEFAULT_CURRENCY, Currency

HOURS_PER_WEEK = 168


DAY_SETS = {"weekday": range(5), "weekend": range(5, 7), "all": range(7)}
"""Local days of the week (Monday = 0) a TOU period applies to. Public holidays are not
modelled: they are ordinary weekdays here."""


class TouPeriod(ConfigModel):
    """One time-of-use period: `rate_per_kwh` on local hours [start_hour, end_hour) of `days`."""

    days: Literal["weekday", "weekend", "all"] = "all"
    start_hour: int = Field(ge=0, le=23)
    end_hour: int = Field(ge=1, le=24)
    rate_per_kwh: float = Field(ge=0)
    """Bounded by its unit (`sim.config.base.UNIT_LIMITS`, "_per_kwh")."""

    @model_validator(mode="after")
    def _ordered(self) -> TouPeriod:
        if self.end_hour <= self.start_hour:
            raise ValueError(
                f"end_hour ({self.end_hour}) must be after start_hour ({self.start_hour})"
            )
        return self

    def hours_of_week(self) -> list[int]:
        """The local hours of the week (Monday 00:00 = 0) this period covers."""
        return [
            d * 24 + h for d in DAY_SETS[self.days] for h in range(self.start_hour, self.end_hour)
        ]


class Tariff(ConfigModel):
    """A site's electricity tariff (`[sites.tariff]`); amounts in `currency`."""

    kind: Literal["wholesale", "tou"]
    currency: Currency = DEFAULT_CURRENCY
    zone: str | None = None
    """wholesale: the price zone; default: the site's carbon zone."""
    year: int | None = Field(default=None, ge=1900, le=2100)
    """wholesale: the price year; default: the site's carbon `year`, else the run's start year."""
    adder_per_kwh: float = 0.0
    """wholesale: added to every hour's price (network charges, levies, margin), per kWh."""
    prices: Literal["day-ahead", "modelled"] = "day-ahead"
    """wholesale: the price source (`sim.grid.prices.PRICE_SOURCES`): the real day-ahead
    auction prices, or the modelled ones (elmada's merit-order marginal cost); never
    substituted for each other."""
    periods: list[TouPeriod] = []
    """tou: the rates; each local hour of the week in exactly one period."""
    timezone: TimeZoneName | None = None
    """IANA zone of the local hours (TOU periods, demand-charge months); default: the
    catalog time zone of the site's carbon zone (required if the site has none)."""
    demand_charge_per_kw_month: float = Field(default=0.0, ge=0, le=10_000.0)
    """Charge per kW of the month's peak interval-average facility power (0: none). US
    commercial demand charges are mostly below 50 USD/kW-month."""
    demand_interval_min: int = Field(default=15, ge=1, le=60)
    """Averaging interval of the peak, minutes; must divide a day. 15: the usual utility
    demand interval."""

    @field_validator("demand_interval_min")
    @classmethod
    def _divides_day(cls, v: int) -> int:
        if 1440 % v:
            raise ValueError(f"must divide a day (1440 min), got {v}")
        return v

    @model_validator(mode="after")
    def _kind_keys(self) -> Tariff:
        if self.kind == "tou":
            extra = [k for k in ("zone", "year") if getattr(self, k) is not None]
            if self.adder_per_kwh:
                extra.append("adder_per_kwh")
            if "prices" in self.model_fields_set:
                extra.append("prices")
            if extra:
                raise ValueError(f"{extra} apply to kind = 'wholesale', not 'tou'")
            self.rates_by_hour_of_week()  # validates the coverage
        elif self.periods:
            raise ValueError("periods apply to kind = 'tou', not 'wholesale'")
        return self

    def rates_by_hour_of_week(self) -> list[float]:
        """TOU rate (tariff currency per kWh) of each local hour of the week (Monday 00:00 =
        0). ValueError naming the first hour covered by no period or by two."""
        rate: list[float | None] = [None] * HOURS_PER_WEEK
        for i, p in enumerate(self.periods):
            for how in p.hours_of_week():
                if rate[how] is not None:
                    raise ValueError(
                        f"periods[{i}]: {_hour_name(how)} is already covered by an earlier "
                        "period; each hour of the week must be in exactly one"
                    )
                rate[how] = p.rate_per_kwh
        missing = [how for how, r in enumerate(rate) if r is None]
        if missing:
            raise ValueError(
                f"periods: {_hour_name(missing[0])} (and {len(missing) - 1} more hours of the "
                "week) is in no period; each hour of the week must be in exactly one"
            )
        return [float(r) for r in rate if r is not None]


def _hour_name(how: int) -> str:
    day = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")[how // 24]
    return f"{day} {how % 24:02d}:00"


class PriceConfig(ConfigModel):
    """The scenario's `[prices]` table: which list price a run pays, and per-model overrides."""

    kind: Literal["on_demand", "reserved", "spot"] = "on_demand"
    per_gpu_h: dict[str, float] = {}
    """GPU model -> price per GPU-hour in the scenario's currency; wins over the table."""
    reserved_per_gpu_h: dict[str, float] = {}
    """GPU model -> price per GPU-hour of reserved capacity (a site's `reserved` GPUs,
    docs/spot-capacity.md), the scenario's currency; wins over `per_gpu_h` and the table."""
    spot_per_gpu_h: dict[str, float] = {}
    """GPU model -> price per GPU-hour of spot capacity (a site's `spot` GPUs), the
    scenario's currency; wins over `per_gpu_h` and the table."""

    @field_validator("per_gpu_h", "reserved_per_gpu_h", "spot_per_gpu_h")
    @classmethod
    def _known_models_and_prices(
        cls, value: dict[str, float], info: ValidationInfo
    ) -> dict[str, float]:
        for gpu_model, price in value.items():
            if gpu_model not in hardware.GPU_CATALOG:
                raise ValueError(
                    f"{info.field_name}.{gpu_model}: unknown GPU model; known: "
                    f"{sorted(hardware.GPU_CATALOG)}"
                )
            if price < 0:
                raise ValueError(f"{info.field_name}.{gpu_model} must be >= 0, got {price}")
        return value


MAX_RATE_PER_KWH: Final = 1_000.0
"""Our bound on a program's rates per kWh, in any currency: far beyond the UK Demand
Flexibility Service's guaranteed price of 3 GBP/kWh (2022/23) and every wholesale price cap."""


MAX_RATE_PER_KW_MONTH: Final = 10_000.0
"""Our bound on a capacity rate per kW-month, in any currency (AbLaV 2016 capped it at about
2.2 EUR/kW-month)."""


class DrProgram(ConfigModel):
    """The money of a demand-response program (`[dr_programs.NAME]`, docs/demand-response-
    programs.md): a capacity payment per committed kW and month of the run, an energy payment
    per kWh shed against a settlement `baseline`, a penalty per kWh above an event's limit.
    Rates are in the program's `currency`, converted to the scenario's."""

    currency: Currency = DEFAULT_CURRENCY
    capacity_per_kw_month: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KW_MONTH)
    """Paid per kW of `committed_kw` per month (730.485 h) of the run, events or not."""
    committed_kw: float | None = Field(default=None, gt=0)
    """The load reduction the site is contracted to make available, kW (capacity only)."""
    pay_per_kwh_shed: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KWH)
    """Paid per kWh shed: max(0, baseline energy - facility energy) over each event."""
    penalty_per_kwh_over: float = Field(default=0.0, ge=0, le=MAX_RATE_PER_KWH)
    """Charged per kWh of facility energy above an event's limit (its `overshoot_kwh`)."""
    baseline: Literal["previous_hour", "weekdays_10", "constant"] = "previous_hour"
    """Settlement baseline: the mean facility power in the hour before the notice; the
    mean over the same hours of the last 10 event-free weekdays; or `baseline_kw`."""
    baseline_kw: float | None = Field(default=None, ge=0)
    """The stated baseline of `baseline = "constant"`, kW."""

    @model_validator(mode="after")
    def _keys_that_apply(self) -> DrProgram:
        if (self.baseline == "constant") != (self.baseline_kw is not None):
            raise ValueError(
                'baseline_kw is required for baseline = "constant" and applies to it only '
                f"(baseline = {self.baseline!r}, baseline_kw = {self.baseline_kw})"
            )
        if (self.capacity_per_kw_month > 0) != (self.committed_kw is not None):
            raise ValueError(
                "committed_kw is required with capacity_per_kw_month > 0 and applies to it only "
                f"(capacity_per_kw_month = {self.capacity_per_kw_month}, "
                f"committed_kw = {self.committed_kw})"
            )
        return self


class DemandResponseEvent(ConfigModel):
    """A request to keep a site's facility power under a limit for a while: one event
    (`start`, `duration_h`), or a generator of events:

    - `generator = "daily_peak"`: every day of the run at local `hour` in `timezone`
      (default UTC) for `duration_h`, e.g. the evening peak 17:00-20:00;
    - `generator = "high_carbon"`: whenever the site's carbon intensity is above its
      `percentile` (default 90) over the run, each such stretch of at least
      `min_duration_h` one event.

    `program` names a `[dr_programs]` entry that settles the entry's events in money.
    """

    site: str
    start: datetime | None = None
    duration_h: float | None = Field(default=None, gt=0)
    generator: Literal["daily_peak", "high_carbon"] | None = None
    hour: float | None = Field(default=None, ge=0, lt=24)
    """Local start hour of a daily_peak event (e.g. 17.5 for 17:30)."""
    timezone: TimeZoneName | None = None
    """IANA time zone of `hour` (daily_peak), default UTC."""
    percentile: float | None = Field(default=None, gt=0, lt=100)
    """Events where carbon intensity is above this percentile of the run (high_carbon)."""
    min_duration_h: float | None = Field(default=None, ge=0)
    """Shortest stretch above the percentile that makes an event (high_carbon), default 0."""
    limit_kw: float | None = Field(default=None, ge=0)
    reduction_pct: float | None = Field(default=None, gt=0, le=100)
    """Limit as a percentage below the site's mean facility power in the hour before notice."""
    notice_h: float = Field(default=0.0, ge=0)
    rebound_h: float = Field(default=2.0, ge=0)
    """Hours after the event's end over which the rebound peak is measured."""
    program: str | None = None
    """The `[dr_programs]` entry its events are paid and penalised under; None: no money."""

    @model_validator(mode="after")
    def _one_limit(self) -> DemandResponseEvent:
        if (self.limit_kw is None) == (self.reduction_pct is None):
            raise ValueError("give exactly one of limit_kw or reduction_pct")
        keys = {
            None: ({"start", "duration_h"}, set()),
            "daily_peak": ({"hour", "duration_h"}, {"timezone"}),
            "high_carbon": (set(), {"percentile", "min_duration_h"}),
        }
        required, optional = keys[self.generator]
        kind = f'generator = "{self.generator}"' if self.generator else "a single event"
        for key in sorted(required):
            if getattr(self, key) is None:
                raise ValueError(f"{key} is required for {kind}")
        for key in ("start", "duration_h", "hour", "timezone", "percentile", "min_duration_h"):
            if key not in required | optional and getattr(self, key) is not None:
                raise ValueError(f"{key} does not apply to {kind} (got {getattr(self, key)!r})")
        if self.start is not None and self.start.tzinfo is None:
            raise ValueError(
                f"start must carry a UTC offset, e.g. 2020-06-01T12:00:00Z, got {self.start}"
            )
        return self

    def window(self) -> tuple[datetime, datetime]:
        """[start, end) of a single event (an entry without a generator)."""
        if self.start is None or self.duration_h is None:
            raise ValueError(f"a {self.generator} entry has no single start and duration")
        return self.start, self.start + timedelta(hours=self.duration_h)


AWS_SPOT_NOTICE_S: Final = 120.0
"""AWS's Spot Instance interruption notice: "a warning that is issued two minutes before
Amazon EC2 stops or terminates your Spot Instance" (EC2 User Guide, "Spot Instance
interruption notices", docs.aws.amazon.com/AWSEC2/latest/UserGuide/
spot-instance-termination-notices.html)."""


MAX_EVICTIONS_PER_NODE_H: Final = 1.0
"""Evictions per spot node-hour at most: AWS Spot Instance Advisor's worst band, ">20%" of
instances interrupted a month, is about 3e-4 per instance-hour."""


class SpotConfig(ConfigModel):
    """Evictions of spot capacity (`sim.engine.spot`, docs/spot-capacity.md): exactly one of
    a rate or a trace. A job whose spot GPUs are evicted writes its checkpoint within the
    notice if it can (else it restarts from its last checkpoint) and is pending again; the
    evicted GPUs are unavailable for `unavailable_h`."""

    eviction_rate_per_node_h: float | None = None
    """Evictions per spot node-hour (a node: `gpus_per_node` GPUs, one cloud instance) held
    by a running job; a job on spot GPUs spanning n nodes is evicted at n x this rate,
    memoryless. AWS's Spot Instance Advisor bands of monthly interruption frequency (<5%,
    5-10%, 10-15%, 15-20%, >20%) are -ln(1 - f) / 730 h: 7.0e-5 at 5%, 3.1e-4 at 20%."""
    trace: Path | None = None
    """A CSV file, relative to the scenario file, with a header `time_h,site,gpus`: at each
    time (hours since the start), `gpus` spot GPUs of the site are reclaimed (the running
    jobs holding spot GPUs there first, drawn weighted by their spot GPUs, then free ones)."""
    notice_s: float = Field(default=AWS_SPOT_NOTICE_S, ge=0)
    """Warning before an evicted GPU is gone, s (`AWS_SPOT_NOTICE_S`): a job whose
    checkpoint write fits in it writes one and keeps its progress."""
    unavailable_h: float = Field(default=1.0, gt=0)
    """How long evicted GPUs stay unavailable, h (an assumption: set your own)."""

    @field_validator("eviction_rate_per_node_h")
    @classmethod
    def _rate_in_range(cls, v: float | None) -> float | None:
        if v is not None and not 0 <= v <= MAX_EVICTIONS_PER_NODE_H:
            raise ValueError(f"must be in [0, {MAX_EVICTIONS_PER_NODE_H:g}], got {v}")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> SpotConfig:
        if (self.eviction_rate_per_node_h is None) == (self.trace is None):
            raise ValueError("give exactly one of eviction_rate_per_node_h or trace")
        if self.unavailable_h * 3600.0 < self.notice_s:
            raise ValueError(
                f"unavailable_h ({self.unavailable_h} h) must be at least notice_s "
                f"({self.notice_s} s)"
            )
        return self
