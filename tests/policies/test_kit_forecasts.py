"""A decision's forecasts (`DecisionForecast`, `DecisionForecasts`) answer with the same
bits as the exact window arithmetic of `policies.kit.windows`, and fetch each site's
forecast once per decision unless a longer horizon is asked."""

from __future__ import annotations

import numpy as np
import pytest

from policies.kit import (
    DecisionForecast,
    DecisionForecasts,
    WindowMean,
    best_window_start,
    window_means,
)
from policies.kit.time_shifting import FIRST_HORIZON_S


class _Given:
    """A state whose forecast is the given one, and whose intensity now is its first value."""

    def __init__(self, times: np.ndarray, values: np.ndarray) -> None:
        self.now_s, self._times, self._values = float(times[0]), times, values

    def forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        return self._times.copy(), self._values.copy()

    def carbon_intensity(self, site: str) -> float:
        return float(self._values[0])

    def forecast_version(self, site: str) -> int:
        return 0


def forecast_of(times: np.ndarray, values: np.ndarray, horizon_s: float) -> DecisionForecast:
    """A `DecisionForecast` of exactly `times`, `values`."""
    return DecisionForecast(_Given(times, values), "a", horizon_s)  # type: ignore[arg-type]


def _forecast(seed: int, steps: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """A forecast issued at an odd time between hourly breakpoints, with noisy values."""
    rng = np.random.default_rng(seed)
    now_s = 1234.5678 + 3600.0 * seed
    times = np.concatenate(([now_s], 3600.0 * (np.arange(1, steps) + seed)))
    return times, rng.uniform(20.0, 800.0, steps)


@pytest.mark.parametrize("seed", range(5))
def test_window_means_are_the_same_bits_as_window_mean(seed: int) -> None:
    times, values = _forecast(seed)
    priced, reference = forecast_of(times, values, 86400.0), WindowMean(times, values)
    rng = np.random.default_rng(100 + seed)
    for start, length in zip(
        times[0] + rng.uniform(0.0, 40 * 3600.0, 200),
        rng.uniform(0.0, 30 * 3600.0, 200),
        strict=True,
    ):
        start, length = float(start), float(length)
        assert priced.mean_per_kwh(start, length) == reference(start, length)
    assert priced.mean_per_kwh(float(times[3]), 0.0) == values[3]


@pytest.mark.parametrize("seed", range(5))
def test_best_start_is_best_window_start(seed: int) -> None:
    times, values = _forecast(seed)
    priced = forecast_of(times, values, 86400.0)
    rng = np.random.default_rng(200 + seed)
    for _ in range(100):
        earliest = float(times[0] + rng.uniform(0.0, 5 * 3600.0))
        latest = float(earliest + rng.uniform(-3600.0, 30 * 3600.0))
        length = float(rng.choice([0.0, 1800.0, rng.uniform(1.0, 20 * 3600.0)]))
        assert priced.best_start(earliest, latest, length) == best_window_start(
            times, values, earliest, latest, length
        )


def test_best_start_picks_the_earliest_of_tied_windows() -> None:
    times = np.array([0.0, 3600.0, 7200.0, 10800.0])
    values = np.array([500.0, 100.0, 500.0, 100.0])
    start, mean = forecast_of(times, values, 86400.0).best_start(0.0, 10800.0, 3600.0)
    assert (start, mean) == (3600.0, 100.0)
    assert mean == window_means(times, values, np.array([start]), 3600.0)[0]


class _State:
    """The three reads `DecisionForecasts` makes of a `SystemState`, counting forecasts."""

    now_s = 100.0

    def __init__(self) -> None:
        self.asked: list[tuple[str, float]] = []

    def forecast(self, site: str, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        self.asked.append((site, horizon_s))
        times = np.concatenate(([self.now_s], np.arange(3600.0, self.now_s + horizon_s, 3600.0)))
        return times, np.full(times.size, 300.0)

    def carbon_intensity(self, site: str) -> float:
        return 250.0

    def forecast_version(self, site: str) -> int:
        return 0


def test_a_site_is_fetched_once_per_decision_unless_a_longer_horizon_is_asked() -> None:
    state = _State()
    forecasts = DecisionForecasts(state)  # type: ignore[arg-type]
    first = forecasts.until("a", 100.0 + 3600.0)
    assert forecasts.until("a", 100.0 + FIRST_HORIZON_S) is first
    assert state.asked == [("a", FIRST_HORIZON_S)]
    assert first.values[0] == 250.0  # the current step is the intensity measured now
    longer = forecasts.until("a", 100.0 + FIRST_HORIZON_S + 1.0)
    assert state.asked[-1] == ("a", 2 * FIRST_HORIZON_S)  # at least twice the last
    assert longer.times.size > first.times.size
    forecasts.until("b", 200.0)
    assert [site for site, _ in state.asked] == ["a", "a", "b"]


def test_a_forecast_is_clear_around_a_time_with_no_breakpoint_near_it() -> None:
    """`clear_around(t, pad)`: cut anywhere within `pad` of t, the forecast is the same (no
    breakpoint there, and it reaches past t + pad), so a cut that rounding moves by less
    than `pad` is the same cut."""
    times, values = _forecast(0, steps=10)  # breakpoints on the hour, fetched for 6 h
    forecast = forecast_of(times, values, 6 * 3600.0)
    assert forecast.clear_around(2.5 * 3600.0, 1.0)
    assert not forecast.clear_around(3 * 3600.0, 1e-9)  # a breakpoint at t
    assert not forecast.clear_around(3 * 3600.0 - 0.5, 1.0)  # ... within pad
    assert not forecast.clear_around(forecast.end_s(6 * 3600.0) - 0.5, 1.0)  # past its end
