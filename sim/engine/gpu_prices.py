"""GPU-hour prices as a run charges them: the scenario's price book, cached, and the
prices it lacked (meta.json's `prices.missing`)."""

from __future__ import annotations

import math

from sim.engine.ledger import Pool
from sim.models.pricing import PriceBook

__all__ = ["GpuPrices"]


class GpuPrices:
    """The run's GPU-hour prices, in the scenario's currency per GPU-hour."""

    __slots__ = ("book", "_price", "missing")

    def __init__(self, book: PriceBook):
        self.book = book
        self._price: dict[tuple[str, str | None], float] = {}
        self.missing: set[str] = set()
        """GPU models (or "model kind") charged for but without a price."""

    def per_gpu_h(self, gpu_model: str, kind: str | None = None) -> float:
        """The price of one `gpu_model` GPU-hour (of capacity `kind`; None: the book's
        kind), the scenario's currency (NaN: the price book has none)."""
        key = (gpu_model, kind)
        price = self._price.get(key)
        if price is None:
            try:
                price = self.book.per_gpu_h(gpu_model, kind)
            except ValueError:
                price = math.nan
            self._price[key] = price
        return price

    def charged(self, gpu_model: str, kind: str | None = None) -> float:
        """`per_gpu_h` of GPU-hours being charged: a price the book lacks leaves
        `cost_compute` None and is named in meta.json's `prices.missing` ("A100-80GB", or
        with a kind "A100-80GB spot")."""
        price = self.per_gpu_h(gpu_model, kind)
        if math.isnan(price):
            self.missing.add(gpu_model if kind is None else f"{gpu_model} {kind}")
        return price

    def cost_per_h(self, pool: Pool, held: dict[str, int]) -> float:
        """What `held`, GPUs by kind of split `pool` (`CapacityKinds.holding`), cost per
        hour, the scenario's currency: on-demand and spot GPUs at their price, reserved
        ones nothing (`cost_reserved`)."""
        return sum(
            n * self.charged(pool.model, kind) for kind, n in held.items() if kind != "reserved"
        )

    def meta(self) -> dict:
        """meta.json's `prices`: the book's currency and sources, and the prices missing."""
        return {**self.book.meta(), "missing": sorted(self.missing)}
