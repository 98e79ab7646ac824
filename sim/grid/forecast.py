"""Forecasts of carbon intensity: the only window a policy has into the future.

A forecast is *issued* at a decision time `now_s` for one signal and returned as a step
function on the signal's own breakpoints. Four models (`[forecast] model = ...`):

- ``perfect``: the truth.
- ``gaussian``: every step's true value plus i.i.d. N(0, sigma) noise, with sigma =
  `sigma_frac` x the signal's mean intensity, as in Wiesner et al., "Let's Wait Awhile",
  Middleware 2021 (their `simulate.py` adds ``normal(0, error * ci.mean())``).
- ``calibrated``: an unbiased, horizon-dependent, autocorrelated relative error fitted on
  real issued forecasts (GB national 48-h forecasts, March 2023, and WattTime MOER 5-65 min
  forecasts, CAISO North, 2023; see `docs/forecasts.md` and `scripts/calibrate_forecast.py`).
  The parameters ship in `sim/data/forecast_calibration.toml`.
- ``persistence``: the value at the same time of day yesterday (t - 24 h).

Randomness is *counter-based*: the noise of a forecast is a pure function of the run's
forecast stream (one 64-bit key drawn from it when the `Forecaster` is built), the signal's
content and the issue time. So a forecast does not depend on how many forecasts were asked
before it (two policies deciding at the same instant see the same forecast, which keeps
policy comparisons paired), asking twice at one instant returns the same forecast (a policy
cannot average noise away by asking again), a longer horizon extends a shorter one, and
other components' random streams are never touched.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import tomllib
from bisect import bisect_left
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from sim.grid.signal import CarbonSignal

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd

    from sim.config.runtime import ForecastConfig
    from sim.grid.issued_forecasts import Replay

__all__ = ["Calibration", "Forecaster", "forecast_mae", "shipped_calibration"]

DAY_S = 86400.0
CALIBRATION_RESOURCE = "data/forecast_calibration.toml"
MODELS = ("perfect", "gaussian", "calibrated", "persistence")

# Philox counter word 2 separates the uses of randomness; word 3 holds the issue time's bits.
_GAUSSIAN, _ISSUE_NOISE, _TARGET_PATH = 1, 2, 3


@dataclass(frozen=True)
class Calibration:
    """Parameters of the ``calibrated`` error model (see `docs/forecasts.md`).

    The relative error of a forecast issued at time t for the step starting at T = t + h
    (lead time h > 0), as a fraction of the signal's mean intensity, is

        e(t, T) = sigma(h) * (sqrt(w) * A(T) + sqrt(1 - w) * B(t, T)),
        sigma(h) = sigma_inf * (1 - exp(-(h / lead_sat_h) ** sigma_exponent)),

    a saturating law of the form of the "stable" (powered exponential) variogram model of
    geostatistics: like sigma_inf (h / lead_sat_h) ** sigma_exponent at short leads, rising to
    sigma_inf (the error of a forecast that no longer knows more than the signal's typical
    spread) at long ones. A is a unit-variance Ornstein-Uhlenbeck process over *target* time
    with time constant `target_tau_h` (corr(A(T1), A(T2)) = exp(-|T1 - T2| / tau)), shared by
    every forecast of the same target (real forecasts issued apart are nearly identical), and
    B i.i.d. standard normal, fresh for each issue and step. w = `target_share`. So the error
    is Gaussian with mean 0 and mean absolute value sigma(h) * sqrt(2 / pi); within one
    forecast the errors of steps dT apart correlate as w * exp(-dT / tau); two forecasts of the
    same target issued at different times correlate as w.
    """

    sigma_inf: float
    lead_sat_h: float
    sigma_exponent: float
    target_share: float
    target_tau_h: float
    max_lead_h: float = math.inf
    """Longest lead time in the calibration data; beyond it sigma(h) is extrapolated."""

    def __post_init__(self) -> None:
        for name in ("sigma_inf", "sigma_exponent", "max_lead_h"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"calibration {name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.target_share <= 1:
            raise ValueError(f"calibration target_share must be in [0, 1], got {self.target_share}")
        for name in ("lead_sat_h", "target_tau_h"):
            if not getattr(self, name) > 0:
                raise ValueError(f"calibration {name} must be > 0, got {getattr(self, name)}")

    def sigma(self, lead_h: np.ndarray | float) -> np.ndarray:
        """Standard deviation of the relative error at lead time `lead_h` (hours)."""
        ratio = np.asarray(lead_h, dtype=float) / self.lead_sat_h
        return -self.sigma_inf * np.expm1(-np.power(ratio, self.sigma_exponent))

    def mae(self, lead_h: np.ndarray | float) -> np.ndarray:
        """Mean absolute relative error at lead time `lead_h` (hours)."""
        return self.sigma(lead_h) * math.sqrt(2.0 / math.pi)


@functools.cache
def shipped_calibration() -> Calibration:
    """The calibration the package ships (`sim/data/forecast_calibration.toml`)."""
    text = resources.files("sim").joinpath(CALIBRATION_RESOURCE).read_text(encoding="utf-8")
    model = tomllib.loads(text)["model"]
    return Calibration(**{k: float(v) for k, v in model.items()})


@dataclass
class _SignalState:
    """What a forecaster remembers about a signal: its key, mean and shared error path."""

    signal: CarbonSignal  # held so that id(signal) is not reused while cached
    key: int
    mean: float
    target_path: np.ndarray | None = None


class Forecaster:
    """The only window a policy has into the future. Seeded, counter-based (see module doc).

    `config.model`:
    - "perfect": the true step function.
    - "gaussian": each step's true value (the current one included) plus independent
      N(0, sigma) noise with sigma = `config.sigma_frac` x the signal's time-weighted mean
      intensity over its whole domain, clipped at 0.
    - "calibrated": the step in effect at `now_s` is the current, known value; each later
      step starting at T gets the relative error e(now_s, T) of `Calibration`, with sigma
      multiplied by `config.scale`, times the signal's mean; clipped at 0.
    - "persistence": each step takes the signal's value 24 h before its start (before the
      signal's first breakpoint: the first value). Deterministic, no randomness.

    A signal registered with `replay` is forecast instead by replaying a real archive of
    issued forecasts (`sim.grid.issued_forecasts`); the model fills in only where its fallback
    rule says so.

    `rng`: the run's forecast stream; one 64-bit key is drawn from it here and nothing later.
    `calibration`: parameters of "calibrated" (default: the shipped ones).
    """

    def __init__(
        self,
        config: ForecastConfig,
        rng: np.random.Generator,
        calibration: Calibration | None = None,
    ) -> None:
        if config.model not in MODELS:
            raise ValueError(f"unknown forecast model {config.model!r}; known: {MODELS}")
        self.config = config
        self.model: str = config.model
        self._key = int(rng.integers(0, 2**64, dtype=np.uint64))
        self._signals: dict[int, _SignalState] = {}
        self._replays: dict[int, Replay] = {}
        self.calibration: Calibration | None = None
        if self.model == "calibrated":
            self.calibration = calibration if calibration is not None else shipped_calibration()
            scale = config.scale if config.scale is not None else 1.0
            cal = self.calibration
            self._scale = float(scale)
            self._sqrt_w = math.sqrt(cal.target_share)
            self._sqrt_1mw = math.sqrt(1.0 - cal.target_share)
            self._tau_target_s = cal.target_tau_h * 3600.0
        elif self.model == "gaussian":
            self._sigma_frac = float(config.sigma_frac or 0.0)

    def replay(self, replay: Replay) -> None:
        """Forecast `replay.signal` from now on by replaying `replay` (its issued forecasts)."""
        self._replays[id(replay.signal)] = replay

    def replays(self) -> list[Replay]:
        """The registered replays, in registration order."""
        return list(self._replays.values())

    def forecast(
        self, signal: CarbonSignal, now_s: float, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forecast step function over [now_s, min(now_s + horizon_s, signal.end_s)).

        Returns (times_s, values_g_per_kwh): times_s[0] == now_s, then the signal's
        breakpoints inside the window (a replayed signal: the archive's target times);
        value i holds from times_s[i] to the next time (or the window end). Fresh arrays,
        empty when the window is empty (now_s >= signal.end_s). The same (run, signal, now_s)
        always gives the same forecast; a longer horizon extends a shorter one.
        """
        replay = self._replays.get(id(signal))
        if replay is not None and replay.signal is signal:
            return replay.forecast(now_s, horizon_s, self.model_forecast)
        return self.model_forecast(signal, now_s, horizon_s)

    def version(self, signal: CarbonSignal, now_s: float) -> int:
        """A number that changes whenever the steps that `forecast(signal, now_s, ..)` gives
        after its first one may stop being those of the forecasts issued earlier (at or after
        the number took its value): while it is unchanged, every forecast issued since has
        the same breakpoints and values after now_s up to the shorter one's end. The step in
        effect at now_s is not covered (persistence gives it yesterday's value at now_s).

        - "perfect" and "persistence": never (each step's value is a function of its start
          alone: the truth, or the truth 24 h before it);
        - a replayed archive with the "perfect" model: at each new issue (between issues the
          later steps are the latest issue's, then the truth where it falls back);
        - "gaussian", "calibrated", and replays with those or "persistence" (whose fallback
          holds the value at the issue time up to the first breakpoint): at every new issue
          time, as noise is drawn afresh per issue: the number is `now_s`'s float64 bits.
        """
        replay = self._replays.get(id(signal))
        if replay is not None and replay.signal is signal:
            if self.model == "perfect":
                return replay.issue_index(now_s) + 1
        elif self.model in ("perfect", "persistence"):
            return 0
        return int(struct.unpack("<q", struct.pack("<d", float(now_s) + 0.0))[0])

    def model_forecast(
        self, signal: CarbonSignal, now_s: float, horizon_s: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """`forecast` by the configured model, ignoring any replay."""
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
        model = self.model
        if model == "perfect":
            return times, signal.values_g_per_kwh[i:j].copy()
        if model == "persistence":
            idx = np.searchsorted(signal.times_s, times - DAY_S, side="right") - 1
            np.maximum(idx, 0, out=idx)
            return times, signal.values_g_per_kwh[idx]
        values = signal.values_g_per_kwh[i:j].copy()
        state = self._state(signal)
        if model == "gaussian":
            gen = self._generator(state.key, _GAUSSIAN, now_s)
            values += (self._sigma_frac * state.mean) * gen.standard_normal(values.size)
        elif values.size > 1 and self._scale > 0:
            values[1:] += state.mean * self._relative_error(state, i, times, now_s)
        np.clip(values, 0.0, None, out=values)
        return times, values

    # -- internals

    def _state(self, signal: CarbonSignal) -> _SignalState:
        state = self._signals.get(id(signal))
        if state is None or state.signal is not signal:
            digest = hashlib.blake2b(digest_size=8)
            digest.update(signal.times_s.tobytes())
            digest.update(signal.values_g_per_kwh.tobytes())
            digest.update(struct.pack("<d", signal.end_s))
            key = int.from_bytes(digest.digest(), "little")
            t0, t1 = float(signal.times_s[0]), signal.end_s
            state = _SignalState(signal, key, signal.integral(t0, t1) / (t1 - t0))
            self._signals[id(signal)] = state
        return state

    def _generator(self, signal_key: int, use: int, now_s: float) -> np.random.Generator:
        """The generator of one (signal, use, issue time), independent of all others: a
        Philox whose 128-bit key is (the run's key, the signal's) and whose 256-bit counter
        starts at (0, 0, use, the issue time's float64 bits)."""
        issue_bits = struct.unpack("<Q", struct.pack("<d", float(now_s) + 0.0))[0]
        bits = np.random.Philox(
            counter=np.array([0, 0, use, issue_bits], dtype=np.uint64),
            key=np.array([self._key, signal_key], dtype=np.uint64),
        )
        return np.random.Generator(bits)

    def _relative_error(
        self, state: _SignalState, i: int, times: np.ndarray, now_s: float
    ) -> np.ndarray:
        """Relative errors of steps 1.. of a forecast issued at now_s (step i of the signal)."""
        if state.target_path is None:
            gen = self._generator(state.key, _TARGET_PATH, 0.0)
            eps = gen.standard_normal(len(state.signal))
            state.target_path = ou_path(state.signal.times_s, eps, self._tau_target_s)
        lead_s = times[1:] - now_s
        gen = self._generator(state.key, _ISSUE_NOISE, now_s)
        issue = gen.standard_normal(lead_s.size)
        z = self._sqrt_w * state.target_path[i + 1 : i + times.size] + self._sqrt_1mw * issue
        assert self.calibration is not None
        return (self._scale * self.calibration.sigma(lead_s / 3600.0)) * z


def forecast_mae(
    model: str,
    actual: pd.Series,
    leads_h: Iterable[float],
    seed: int = 0,
    *,
    sigma_frac: float | None = None,
    scale: float | None = None,
) -> dict[float, float]:
    """Mean absolute error (g/kWh) of forecast `model` on the series `actual`, by lead time.

    `actual`: intensities (g/kWh) on a sorted, unique, UTC DatetimeIndex; each value holds
    until the next timestamp, the last one for the series' last interval. The simulator's own
    `Forecaster` (model "perfect", "gaussian" with `sigma_frac`, "calibrated" with optional
    `scale`, or "persistence"; the keys of `[forecast]`, checked the same way) forecasts this
    series as the truth, issuing a forecast at every timestamp of the series (seeded by
    `seed`). For lead L (hours, >= 0) every issue time t whose target t + L is at or before the
    last timestamp contributes |forecast(t + L) - actual(t + L)|, the values of the steps
    containing t + L. Returns {L: MAE} in the order of `leads_h`. Raises ValueError for a
    series that is not a non-empty, finite, non-negative, sorted, unique UTC series, an
    unknown model, bad model keys, or a lead with no target inside the series.
    """
    import pandas as pd
    from pydantic import ValidationError

    from sim.config.runtime import ForecastConfig

    leads = [float(x) for x in leads_h]
    if not leads or not all(math.isfinite(x) and x >= 0 for x in leads):
        raise ValueError(f"forecast_mae: leads_h must be finite hours >= 0, got {leads}")
    if model not in MODELS:
        raise ValueError(f"forecast_mae: unknown forecast model {model!r}; known: {MODELS}")
    try:
        config = ForecastConfig(model=model, sigma_frac=sigma_frac, scale=scale)  # type: ignore[arg-type]
    except ValidationError as e:
        raise ValueError(f"forecast_mae: {e.errors()[0]['msg']}") from None
    if not isinstance(actual, pd.Series) or not isinstance(actual.index, pd.DatetimeIndex):
        raise ValueError("forecast_mae: actual must be a pandas Series with a DatetimeIndex")
    if actual.index.tz is None or str(actual.index.tz) != "UTC":
        raise ValueError(f"forecast_mae: actual's index must be in UTC, got tz {actual.index.tz}")
    if len(actual) < 2:
        raise ValueError(f"forecast_mae: actual needs at least 2 values, got {len(actual)}")
    values = actual.to_numpy(dtype=float)
    if not np.isfinite(values).all() or (values < 0).any():
        bad = actual.index[int(np.argmax(~(np.isfinite(values) & (values >= 0))))]
        raise ValueError(f"forecast_mae: actual at {bad} is NaN, infinite or negative")
    t = (actual.index - actual.index[0]).total_seconds().to_numpy(dtype=float)
    if not (np.diff(t) > 0).all():
        bad = actual.index[int(np.argmax(np.diff(t) <= 0)) + 1]
        raise ValueError(f"forecast_mae: actual's index must be sorted and unique (at {bad})")
    signal = CarbonSignal(t, values, end_s=t[-1] + (t[-1] - t[-2]))
    forecaster = Forecaster(config, np.random.default_rng(seed))
    lead_s = np.array(leads) * 3600.0
    errors: list[list[float]] = [[] for _ in leads]
    for now_s in t:
        times, fv = forecaster.forecast(signal, now_s, float(lead_s.max()) + 1.0)
        for k, target_s in enumerate(now_s + lead_s):
            if target_s <= t[-1]:
                step = np.searchsorted(times, target_s, side="right") - 1
                errors[k].append(abs(fv[step] - signal.value_at(target_s)))
    out = {}
    for lead, err in zip(leads, errors, strict=True):
        if not err:
            raise ValueError(f"forecast_mae: lead {lead} h reaches past the series' end")
        out[lead] = float(np.mean(err))
    return out


def ou_path(t: np.ndarray, eps: np.ndarray, tau: float) -> np.ndarray:
    """A stationary, unit-variance Ornstein-Uhlenbeck process sampled at ascending times `t`.

    x[0] = eps[0]; x[k] = phi x[k-1] + sqrt(1 - phi^2) eps[k] with phi = exp(-(t[k] -
    t[k-1]) / tau), for standard normal `eps`; so corr(x[j], x[k]) = exp(-|t[k] - t[j]| / tau).
    Vectorised as x[k] = exp(-u[k]) cumsum(exp(u) g eps)[k], u = (t - t_block) / tau, in blocks
    short enough (u <= 500) that exp(u) stays finite.
    """
    n = t.size
    g = np.empty(n)
    if n == 0:
        return g
    g[0] = 1.0
    g[1:] = np.sqrt(-np.expm1(-2.0 * np.diff(t) / tau))
    w = g * eps
    u = (t - t[0]) / tau
    if u[-1] <= 500.0:
        ex = np.exp(u)
        return np.cumsum(ex * w) / ex
    out = np.empty(n)
    blocks = np.flatnonzero(np.diff(np.floor(u / 500.0))) + 1
    carry = 0.0
    for s, e in zip(np.r_[0, blocks], np.r_[blocks, n], strict=True):
        ub = u[s:e] - u[s]
        ex = np.exp(ub)
        head = carry * math.exp(-(u[s] - u[s - 1])) if s else 0.0
        out[s:e] = (head + np.cumsum(ex * w[s:e])) / ex
        carry = out[e - 1]
    return out
