"""Generation directives: a service's answers shortened from a point in time on.

A directive level (Sprout: Li et al., "Sprout: Green Generative AI with Carbon-Efficient
LLM Inference", EMNLP 2024) asks the model for shorter answers; its `output_factor` scales
the output tokens of every request that arrives while it is in force. `DirectedSource`
wraps a service's `RequestSource` with the directive schedule: the request level reads each
request's output tokens as `max(1, round(tokens x factor))`, the fluid level the steps'
output-token sums times the factor (its expected value, without the rounding). A change
applies to the requests arriving at or after its time; the fidelity is told
(`ServiceSim.source_changed`) so it reads them again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from sim.serving.requests import RequestTable
from sim.serving.sources import RequestSource

__all__ = ["DirectedSource"]


class DirectedSource(RequestSource):
    """`base`'s requests answered at the directive level in force at each arrival: level
    `d` makes them `factors[d]` x as long; level 0 is in force until another is set."""

    def __init__(self, base: RequestSource, factors: Sequence[float]):
        self.base = base
        self.tokens = base.tokens
        """The base source's token counts (before any directive)."""
        self._factors = np.asarray(factors, dtype=float)
        self.from_s: list[float] = [0.0]
        """Times the level changed, s (increasing; the first is 0)."""
        self.levels: list[int] = [0]
        """The level from each of those times."""

    @property
    def level(self) -> int:
        """The level in force now (the last one set)."""
        return self.levels[-1]

    def set_level(self, t_s: float, level: int) -> None:
        """From `t_s` (not before the last change), answers are at `level`."""
        if t_s < self.from_s[-1]:
            raise ValueError(f"directive changes must come in time order, got {t_s} s")
        if t_s == self.from_s[-1]:
            self.levels[-1] = level
        else:
            self.from_s.append(t_s)
            self.levels.append(level)

    def output_factor(self, t_s: float) -> float:
        return float(self._factors[self.levels[bisect_right(self.from_s, t_s) - 1]])

    def _factors_at(self, t_s: np.ndarray) -> np.ndarray:
        """The factor in force at each time (a change applies from its time on)."""
        k = np.searchsorted(self.from_s, t_s, side="right") - 1
        return self._factors[np.asarray(self.levels)[k]]

    def _plain(self) -> bool:
        """True while every level set so far leaves the answers as they are."""
        return bool(np.all(self._factors[self.levels] == 1.0))

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        table = self.base.requests_between(t0_s, t1_s)
        if self._plain() or not len(table.arrival_s):
            return table
        factor = self._factors_at(table.arrival_s)
        out = np.maximum(1, np.rint(table.output_tokens * factor)).astype(np.int64)
        return RequestTable(table.arrival_s, table.input_tokens, out)

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        edges = np.asarray(edges_s, dtype=float)
        if self._plain() or len(edges) < 2:
            return self.base.step_sums(edges)
        inner = [t for t in self.from_s[1:] if edges[0] < t < edges[-1]]
        fine = np.union1d(edges, inner)
        arrivals, inputs, outputs = self.base.step_sums(fine)
        outputs = outputs * self._factors_at(fine[:-1])
        starts = np.searchsorted(fine, edges[:-1])
        reduce = np.add.reduceat
        return reduce(arrivals, starts), reduce(inputs, starts), reduce(outputs, starts)
