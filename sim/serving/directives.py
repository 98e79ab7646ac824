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

import numpy as np

from sim.serving.requests import RequestTable
from sim.serving.sources import RequestSource

__all__ = ["DirectedSource"]


class DirectedSource(RequestSource):
    """`base`'s requests with the output factor in force at each arrival (1 until set)."""

    def __init__(self, base: RequestSource):
        self.base = base
        self.tokens = base.tokens
        """The base source's token counts (before any directive)."""
        self._from_s: list[float] = [0.0]
        """Times the factor changed, s (increasing; the first is 0)."""
        self._factor: list[float] = [1.0]

    def set_factor(self, t_s: float, factor: float) -> None:
        """From `t_s` (not before the last change), answers are `factor` x as long."""
        if t_s < self._from_s[-1]:
            raise ValueError(f"directive changes must come in time order, got {t_s} s")
        if t_s == self._from_s[-1]:
            self._factor[-1] = factor
        else:
            self._from_s.append(t_s)
            self._factor.append(factor)

    def output_factor(self, t_s: float) -> float:
        return self._factor[bisect_right(self._from_s, t_s) - 1]

    def changes(self) -> tuple[np.ndarray, np.ndarray]:
        """(times s, factors) of the schedule, the first at 0."""
        return np.asarray(self._from_s), np.asarray(self._factor)

    def requests_between(self, t0_s: float, t1_s: float) -> RequestTable:
        table = self.base.requests_between(t0_s, t1_s)
        if all(f == 1.0 for f in self._factor) or not len(table.arrival_s):
            return table
        k = np.searchsorted(self._from_s, table.arrival_s, side="right") - 1
        factor = np.asarray(self._factor)[k]
        out = np.maximum(1, np.rint(table.output_tokens * factor)).astype(np.int64)
        return RequestTable(table.arrival_s, table.input_tokens, out)

    def step_sums(self, edges_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        edges = np.asarray(edges_s, dtype=float)
        if all(f == 1.0 for f in self._factor) or len(edges) < 2:
            return self.base.step_sums(edges)
        inner = [t for t in self._from_s[1:] if edges[0] < t < edges[-1]]
        fine = np.union1d(edges, inner)
        arrivals, inputs, outputs = self.base.step_sums(fine)
        k = np.searchsorted(self._from_s, fine[:-1], side="right") - 1
        outputs = outputs * np.asarray(self._factor)[k]
        starts = np.searchsorted(fine, edges[:-1])
        reduce = np.add.reduceat
        return reduce(arrivals, starts), reduce(inputs, starts), reduce(outputs, starts)
