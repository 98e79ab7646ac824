"""GPU compute prices: public cloud list prices per GPU-hour, and the currencies they convert to.

A pure module (it does not import the engine). The data, each price with its source and date,
is `sim/data/gpu_prices.toml`; docs/prices.md explains the table, its gaps and how a scenario
overrides it. In short:

- `gpu_prices()`: per GPU model of the catalog, its on-demand, 1-year reserved and spot list
  prices in USD per GPU-hour (reserved and spot where published; spot is a dated snapshot).
- `usd_rate(currency)`: units of `currency` per USD, from the ECB reference rates of one day.
- `PriceBook`: what a run prices with (the scenario's `currency`, and its `[prices]` table,
  `sim.config.market.PriceConfig`, as `PriceSettings`): `per_gpu_h(gpu_model)` is the
  scenario's override if it sets one, else the table's USD price times `usd_rate(currency)`.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator

from sim.models import hardware

__all__ = [
    "DEFAULT_CURRENCY",
    "Currency",
    "conversion_rate",
    "PRICE_KINDS",
    "GpuPrice",
    "PriceBook",
    "PriceSettings",
    "PriceTable",
    "currencies",
    "gpu_prices",
    "parse_price_table",
    "usd_rate",
]

DEFAULT_CURRENCY = "EUR"
PRICE_KINDS = ("on_demand", "reserved", "spot")
"""On-demand list price, 1-year commitment, spot (a dated snapshot)."""

_DATA_FILE = "gpu_prices.toml"
_OPTIONAL_KINDS = ("reserved", "spot")
_ENTRY_KEYS = frozenset({*PRICE_KINDS, "source", "date"})


@dataclass(frozen=True, slots=True)
class GpuPrice:
    """One GPU model's public list prices, USD per GPU-hour."""

    gpu_model: str
    on_demand_usd_per_gpu_h: float
    reserved_usd_per_gpu_h: float | None
    """1-year commitment, effective hourly price; None where none is published."""
    spot_usd_per_gpu_h: float | None
    """Spot price on `date` (spot prices float); None where none was recorded."""
    source: str
    date: str
    """The day the prices were read, YYYY-MM-DD."""

    def usd_per_gpu_h(self, kind: str) -> float | None:
        """The price of `kind` (one of PRICE_KINDS), USD per GPU-hour, or None if unlisted."""
        return {
            "on_demand": self.on_demand_usd_per_gpu_h,
            "reserved": self.reserved_usd_per_gpu_h,
            "spot": self.spot_usd_per_gpu_h,
        }[_checked_kind(kind)]


@dataclass(frozen=True, slots=True)
class PriceTable:
    """A parsed gpu_prices.toml: the prices and the exchange rates with their date and source."""

    prices: Mapping[str, GpuPrice]
    per_eur: Mapping[str, float]
    """Units of each currency per EUR (ECB reference rates)."""
    rate_date: str
    rate_source: str


def _checked_kind(kind: str) -> str:
    if kind not in PRICE_KINDS:
        raise ValueError(f"unknown price kind {kind!r}; known: {list(PRICE_KINDS)}")
    return kind


def _positive(where: str, value: Any, unit: str = "USD per GPU-hour") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} must be a number ({unit}), got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} must be finite and > 0 ({unit}), got {value!r}")
    return float(value)


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _gpu_price(gpu_model: str, fields: Mapping[str, Any]) -> GpuPrice:
    where = f"{_DATA_FILE}: gpu.{gpu_model}"
    if gpu_model not in hardware.GPU_CATALOG:
        raise ValueError(f"{where}: not a GPU of gpus.toml")
    unknown = sorted(set(fields) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; known: {sorted(_ENTRY_KEYS)}")
    if "on_demand" not in fields:
        raise ValueError(f"{where}.on_demand is required")
    optional = {k: _positive(f"{where}.{k}", fields[k]) for k in _OPTIONAL_KINDS if k in fields}
    price = GpuPrice(
        gpu_model=gpu_model,
        on_demand_usd_per_gpu_h=_positive(f"{where}.on_demand", fields["on_demand"]),
        reserved_usd_per_gpu_h=optional.get("reserved"),
        spot_usd_per_gpu_h=optional.get("spot"),
        source=_text(f"{where}.source", fields.get("source")),
        date=_text(f"{where}.date", fields.get("date")),
    )
    reserved = price.reserved_usd_per_gpu_h
    if reserved is not None and reserved > price.on_demand_usd_per_gpu_h:
        raise ValueError(
            f"{where}.reserved = {reserved} exceeds on_demand = {price.on_demand_usd_per_gpu_h}: "
            "a 1-year commitment is never dearer than on-demand"
        )
    return price


def _per_eur(table: Mapping[str, Any]) -> dict[str, float]:
    where = f"{_DATA_FILE}: currencies.per_eur"
    rates = {c: _positive(f"{where}.{c}", r, f"{c} per EUR") for c, r in table.items()}
    for needed in ("EUR", "USD"):
        if needed not in rates:
            raise ValueError(f"{where}: {needed} is required")
    if rates["EUR"] != 1.0:
        raise ValueError(f"{where}.EUR must be 1.0 (rates are per EUR), got {rates['EUR']}")
    return rates


def parse_price_table(text: str) -> PriceTable:
    """The price table in `text` (the format of gpu_prices.toml), validated; ValueError
    naming the file and key of the first bad value."""
    raw = tomllib.loads(text)
    unknown = sorted(set(raw) - {"currencies", "gpu"})
    if unknown:
        raise ValueError(f"{_DATA_FILE}: unknown tables {unknown}; known: ['currencies', 'gpu']")
    fx = raw.get("currencies", {})
    return PriceTable(
        prices=MappingProxyType({g: _gpu_price(g, f) for g, f in raw.get("gpu", {}).items()}),
        per_eur=MappingProxyType(_per_eur(fx.get("per_eur", {}))),
        rate_date=_text(f"{_DATA_FILE}: currencies.date", fx.get("date")),
        rate_source=_text(f"{_DATA_FILE}: currencies.source", fx.get("source")),
    )


@functools.cache
def _table() -> PriceTable:
    text = resources.files("sim").joinpath(f"data/{_DATA_FILE}").read_text("utf-8")
    return parse_price_table(text)


def gpu_prices() -> Mapping[str, GpuPrice]:
    """GPU model -> its list prices (only the models that have a public price)."""
    return _table().prices


def currencies() -> tuple[str, ...]:
    """The currencies a price can be converted to, sorted."""
    return tuple(sorted(_table().per_eur))


def known_currency(currency: str) -> str:
    """`currency` if prices can be converted to it; ValueError naming the known ones."""
    if currency not in currencies():
        raise ValueError(f"unknown currency {currency!r}; known: {list(currencies())}")
    return currency


Currency = Annotated[str, AfterValidator(known_currency)]
"""A scenario key naming a currency (`currencies()`)."""


def conversion_rate(from_currency: str, to_currency: str) -> float:
    """Units of `to_currency` per unit of `from_currency`, from the fixed ECB reference
    rates (docs/prices.md)."""
    return usd_rate(to_currency) / usd_rate(from_currency)


def usd_rate(currency: str) -> float:
    """Units of `currency` per USD (ECB reference rates of one day, gpu_prices.toml)."""
    per_eur = _table().per_eur
    if currency not in per_eur:
        raise ValueError(f"unknown currency {currency!r}; known: {list(currencies())}")
    return per_eur[currency] / per_eur["USD"]


class PriceSettings(Protocol):
    """What a `PriceBook` reads of the scenario's `[prices]` table
    (`sim.config.market.PriceConfig`): the kind of list price charged, and the scenario's
    prices per GPU-hour by GPU model, in its currency (every kind's, reserved's, spot's)."""

    @property
    def kind(self) -> str: ...
    @property
    def per_gpu_h(self) -> Mapping[str, float]: ...
    @property
    def reserved_per_gpu_h(self) -> Mapping[str, float]: ...
    @property
    def spot_per_gpu_h(self) -> Mapping[str, float]: ...


class PriceBook:
    """What a run prices GPU time with: a currency, a price kind, the scenario's overrides."""

    def __init__(self, currency: str = DEFAULT_CURRENCY, config: PriceSettings | None = None):
        self.rate = usd_rate(currency)
        """Units of `currency` per USD."""
        self.currency = currency
        self.kind = _checked_kind(config.kind if config is not None else "on_demand")
        """The price kind charged unless `per_gpu_h` is asked for another."""
        self.overrides_per_gpu_h = dict(config.per_gpu_h) if config is not None else {}
        """GPU model -> the scenario's price per GPU-hour of every kind."""
        self.kind_overrides_per_gpu_h = {
            kind: dict(prices)
            for kind, prices in (
                ("reserved", config.reserved_per_gpu_h if config is not None else {}),
                ("spot", config.spot_per_gpu_h if config is not None else {}),
            )
        }
        """Kind -> GPU model -> the scenario's price per GPU-hour of that kind (reserved,
        spot), winning over `overrides_per_gpu_h`."""

    def _override(self, gpu_model: str, kind: str) -> float | None:
        """The scenario's price of a `kind` GPU-hour of `gpu_model`: the kind's own override
        (reserved, spot), else `overrides_per_gpu_h`'s (every kind); None: neither is set."""
        price = self.kind_overrides_per_gpu_h.get(kind, {}).get(gpu_model)
        return price if price is not None else self.overrides_per_gpu_h.get(gpu_model)

    def per_gpu_h(self, gpu_model: str, kind: str | None = None) -> float:
        """Price of one GPU-hour of `gpu_model` in the book's currency: the scenario's override
        if it sets one (the kind's own, else every kind's), else the table's
        `kind` price (default: the book's kind) converted from USD. ValueError naming the
        model and kind if there is neither."""
        kind = _checked_kind(kind if kind is not None else self.kind)
        override = self._override(gpu_model, kind)
        if override is not None:
            return override
        price = gpu_prices().get(gpu_model)
        usd = price.usd_per_gpu_h(kind) if price is not None else None
        if usd is None:
            raise ValueError(
                f"no {kind} price for GPU model {gpu_model!r} in {_DATA_FILE} "
                f"(see docs/prices.md); set [prices.per_gpu_h] {gpu_model!r} in the scenario"
            )
        return usd * self.rate

    def missing(self, gpu_models: Iterable[str]) -> list[str]:
        """The models of `gpu_models` this book has no price for (each once, in order)."""
        return [g for g in dict.fromkeys(gpu_models) if not self._has_price(g)]

    def _has_price(self, gpu_model: str) -> bool:
        if gpu_model in self.overrides_per_gpu_h:
            return True
        price = gpu_prices().get(gpu_model)
        return price is not None and price.usd_per_gpu_h(self.kind) is not None

    def meta(self) -> dict[str, Any]:
        """The book for meta.json: currency, kind, the rate used with its date and source,
        the overrides, and the dates of the table's prices."""
        table = _table()
        return {
            "currency": self.currency,
            "kind": self.kind,
            "usd_rate": self.rate,
            "usd_rate_date": table.rate_date,
            "usd_rate_source": table.rate_source,
            "overrides_per_gpu_h": dict(self.overrides_per_gpu_h),
            **{
                f"overrides_{k}_per_gpu_h": dict(v)
                for k, v in self.kind_overrides_per_gpu_h.items()
                if v
            },
            "table_dates": sorted({p.date for p in table.prices.values()}),
        }
