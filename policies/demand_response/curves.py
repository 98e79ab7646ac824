"""Operating-point curves of GPUs under caps, from the hardware model (`state.operating_point`)."""

from __future__ import annotations

import math

import numpy as np

from sim.api import SystemState

__all__ = ["TOL_W", "Curve", "Curves"]

TOL_W = 1e-6
"""Power comparisons tolerate this much, W (floating-point sums of draws)."""


class Curve:
    """Operating points of one GPU of `model` running `profile`, from the model's lowest
    settable cap up to a ceiling: caps (W, ascending), average power (W) and throughput
    fraction (relative to uncapped), all non-decreasing in the cap. Index -1 is the ceiling."""

    __slots__ = ("_steps", "caps_w", "frac", "power_w", "top")

    def __init__(self, caps_w: np.ndarray, power_w: np.ndarray, frac: np.ndarray):
        self.caps_w = caps_w
        self.power_w = power_w
        self.frac = frac
        self.top = len(caps_w) - 1
        self._steps: dict[float, tuple[list[int], list[float]]] = {}

    def index_at_cap(self, cap_w: float) -> int:
        """Index of the highest cap at or below `cap_w` (the lowest if none)."""
        k = int(np.searchsorted(self.caps_w, cap_w + TOL_W, side="right")) - 1
        return min(max(k, 0), self.top)

    def index_at_fraction(self, f: float) -> int:
        """Index of the lowest cap giving at least throughput fraction `f` (the top if none)."""
        return min(int(np.searchsorted(self.frac, f, side="left")), self.top)

    def steps(self, step_w: float) -> tuple[list[int], list[float]]:
        """For each index i > 0: the index one step of `step_w` below (at least one grid
        point lower, and saving power), and the step's throughput fraction lost per watt
        saved (inf if it saves none). Computed once per step width."""
        hit = self._steps.get(step_w)
        if hit is None:
            caps, power, frac = self.caps_w, self.power_w, self.frac
            below = np.searchsorted(caps, caps - step_w + TOL_W, side="right") - 1
            nxt, price = [0], [math.inf]
            for i in range(1, len(caps)):
                k = min(max(int(below[i]), 0), i - 1)
                while k > 0 and power[i] - power[k] <= TOL_W:
                    k -= 1
                saved_w = float(power[i] - power[k])
                nxt.append(k)
                price.append(float(frac[i] - frac[k]) / saved_w if saved_w > TOL_W else math.inf)
            hit = self._steps[step_w] = (nxt, price)
        return hit


class Curves:
    """Curves per (model, profile, ceiling), on a 1 W grid from `state.operating_point`;
    each (model, profile) table is computed once per policy."""

    __slots__ = ("_ceilings", "_curves", "_tables")

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], Curve] = {}
        self._curves: dict[tuple[str, str, float], Curve] = {}
        self._ceilings: dict[tuple[str, str, float | None, float | None], Curve] = {}

    def of_job(
        self,
        state: SystemState,
        model: str,
        profile: str,
        own_w: float | None,
        site_cap_w: float | None,
    ) -> Curve:
        """The curve of a `profile` job on `model` GPUs whose ceiling is its own cap
        `own_w`, else the site's cap `site_cap_w`, else the model's maximum, clipped into
        the model's settable range."""
        key = (model, profile, own_w, site_cap_w)
        curve = self._ceilings.get(key)
        if curve is None:
            spec = state.gpu_spec(model)
            ceiling = (
                own_w
                if own_w is not None
                else site_cap_w
                if site_cap_w is not None
                else spec.max_cap_w
            )
            ceiling = min(max(float(ceiling), spec.min_cap_w), spec.max_cap_w)
            curve = self._ceilings[key] = self.curve(state, model, profile, ceiling)
        return curve

    def table(self, state: SystemState, model: str, profile: str) -> Curve:
        """The whole curve of `model` on `profile`, up to the model's maximum cap."""
        key = (model, profile)
        hit = self._tables.get(key)
        if hit is None:
            spec = state.gpu_spec(model)
            lo, hi = float(spec.min_cap_w), float(spec.max_cap_w)
            caps = np.unique(np.concatenate([[lo], np.arange(math.ceil(lo), hi), [hi]]))
            caps = caps[(caps >= lo) & (caps <= hi)]
            points = [state.operating_point(model, profile, float(c)) for c in caps]
            hit = self._tables[key] = Curve(
                caps,
                np.array([p.power_w for p in points]),
                np.array([p.throughput_fraction for p in points]),
            )
        return hit

    def curve(self, state: SystemState, model: str, profile: str, ceiling_w: float) -> Curve:
        """The curve of `model` on `profile` up to `ceiling_w` (its own top point if the
        ceiling is off the 1 W grid)."""
        key = (model, profile, ceiling_w)
        hit = self._curves.get(key)
        if hit is None:
            t = self.table(state, model, profile)
            k = int(np.searchsorted(t.caps_w, ceiling_w + TOL_W, side="right"))
            if k > 0 and abs(t.caps_w[k - 1] - ceiling_w) <= TOL_W:
                hit = Curve(t.caps_w[:k], t.power_w[:k], t.frac[:k])
            else:  # a ceiling off the grid (e.g. 237.5 W): its own point on top
                p = state.operating_point(model, profile, ceiling_w)
                hit = Curve(
                    np.append(t.caps_w[:k], ceiling_w),
                    np.append(t.power_w[:k], p.power_w),
                    np.append(t.frac[:k], p.throughput_fraction),
                )
            self._curves[key] = hit
        return hit
