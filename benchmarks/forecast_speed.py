"""Speed of one policy-facing forecast: `Forecaster.forecast` of a 24 h window on an hourly
signal of a year, per forecast model, in microseconds (target: under 50 us each).

    python benchmarks/forecast_speed.py

Timings are measured here, not asserted in tests: the machines are shared and noisy.
The best of 5 repeats of 200 calls at successive times is reported.
"""

from __future__ import annotations

import timeit

import numpy as np

from sim.config.runtime import ForecastConfig
from sim.grid import CarbonSignal, Forecaster

HOUR_S, DAY_S = 3600.0, 86400.0
TARGET_US = 50.0


def forecast_us(model: str) -> float:
    """Best time of one 24 h forecast with `model`, microseconds."""
    times = np.arange(24 * 365) * HOUR_S
    signal = CarbonSignal(times, np.full(times.size, 300.0), end_s=times[-1] + HOUR_S)
    extra = {"sigma_frac": 0.1} if model == "gaussian" else {}
    forecaster = Forecaster(ForecastConfig(model=model, **extra), np.random.default_rng(0))
    at = iter(np.arange(100_000) * 61.0)
    forecaster.forecast(signal, 0.5, DAY_S)  # the first call builds the per-signal state
    best_s = min(
        timeit.repeat(lambda: forecaster.forecast(signal, next(at), DAY_S), number=200, repeat=5)
    )
    return best_s / 200 * 1e6


def main() -> None:
    for model in ("perfect", "gaussian", "calibrated", "persistence"):
        us = forecast_us(model)
        verdict = "met" if us < TARGET_US else "missed"
        print(f"{model:12s} {us:7.1f} us per 24 h forecast (target {TARGET_US:g} us: {verdict})")


if __name__ == "__main__":
    main()
