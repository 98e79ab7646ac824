"""The hardware model's operating points over a cap grid, computed once per (GPU, profile)."""

from __future__ import annotations

import math

import numpy as np

from sim.api import GpuSpec, SystemState


def cap_grid(spec: GpuSpec, resolution_w: float) -> np.ndarray:
    """The caps a policy may choose for GPU model `spec`, W, ascending: `min_cap_w`, then
    steps of `resolution_w`, and `max_cap_w` (always included)."""
    span = spec.max_cap_w - spec.min_cap_w
    steps = int(math.floor(span / resolution_w + 1e-9))
    grid = spec.min_cap_w + resolution_w * np.arange(steps + 1, dtype=float)
    grid = np.round(grid, 6)
    if grid[-1] < spec.max_cap_w - 1e-6:
        grid = np.append(grid, spec.max_cap_w)
    return np.minimum(grid, spec.max_cap_w)


class OperatingPoints:
    """Per (GPU model, profile), throughput fraction and average power over the cap grid of
    `resolution_w`, from the hardware model (`state.operating_point`); computed once per
    pair."""

    __slots__ = ("_cache", "resolution_w")

    def __init__(self, resolution_w: float):
        self.resolution_w = resolution_w
        self._cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def table(
        self, state: SystemState, model: str, profile: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(caps W, throughput fraction, power W) over `model`'s cap grid."""
        key = (model, profile)
        hit = self._cache.get(key)
        if hit is None:
            caps = cap_grid(state.gpu_spec(model), self.resolution_w)
            points = [state.operating_point(model, profile, float(c)) for c in caps]
            r = np.array([p.throughput_fraction for p in points])
            power = np.array([p.power_w for p in points])
            hit = self._cache[key] = (caps, r, power)
        return hit
