"""Forecasts of carbon intensity: the only window a policy has into the future."""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

import numpy as np

from sim.grid.signal import CarbonSignal

if TYPE_CHECKING:
    from sim.scenario import ForecastConfig


class Forecaster:
    """The only window a policy has into the future. Seeded.

    `config.model`:
    - "perfect": the true step function.
    - "gaussian": each step's true value plus independent N(0, sigma) noise with
      sigma = `config.sigma_frac` x the true mean intensity over the forecast window,
      clipped at 0. Noise is drawn from `rng` at call time, so a run is reproducible from its
      seed, and two forecasts of the same hour made at different times differ.
    """

    def __init__(self, config: ForecastConfig, rng: np.random.Generator) -> None:
        if config.model not in ("perfect", "gaussian"):
            raise ValueError(f"unknown forecast model {config.model!r}")
        self.config = config
        self.rng = rng

    def forecast(
        self, signal: CarbonSignal, now_s: float, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forecast step function over [now_s, min(now_s + horizon_s, signal.end_s)).

        Returns (times_s, values_g_per_kwh): times_s[0] == now_s, then the signal's
        breakpoints inside the window; value i holds from times_s[i] to the next time (or the
        window end). Fresh arrays, empty when the window is empty (now_s >= signal.end_s).
        """
        if horizon_s < 0:
            raise ValueError(f"forecast horizon must be >= 0 s, got {horizon_s}")
        end_s = min(now_s + horizon_s, signal.end_s)
        if now_s >= end_s:
            if now_s > signal.end_s or now_s < signal.times_s[0]:
                signal.value_at(now_s)  # raises the domain error
            return np.empty(0), np.empty(0)
        i = signal.step_index(now_s)
        j = bisect_left(signal._t, end_s)
        times = np.empty(j - i)
        times[0] = now_s
        times[1:] = signal.times_s[i + 1 : j]
        values = np.array(signal.values_g_per_kwh[i:j], dtype=np.float64)
        if self.config.model == "gaussian":
            sigma = self.config.sigma_frac * signal.mean(now_s, end_s)
            values += self.rng.normal(0.0, sigma, size=values.size)
            np.clip(values, 0.0, None, out=values)
        return times, values
