"""Keep-alive policies (engine-free, `sim.functions.keepalive.KeepAlivePolicy`): the fixed
window most platforms use, and EcoLife's carbon-aware choice of window and generation as
an exhaustive search (docs/functions.md says why not its particle swarm)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from sim.functions.generations import Generation
from sim.functions.keepalive import FunctionState
from sim.grid.signal import CarbonSignal

__all__ = ["CarbonAwareKeepAlive", "FixedKeepAlive"]

_J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class FixedKeepAlive:
    """Every instance stays warm `keep_alive_s` seconds (10 minutes: the fixed policy
    Shahrad et al., ATC 2020, compare against) and opens on `generation`."""

    keep_alive_s: float = 600.0
    generation: str = "i3"

    def choose_generation(self, state: FunctionState) -> str:
        return self.generation

    def choose_window_s(self, generation: Generation, state: FunctionState) -> float:
        return self.keep_alive_s


@dataclass(frozen=True)
class CarbonAwareKeepAlive:
    """EcoLife-like: the window (of `windows_s`) and generation (of `generations`) of least
    expected carbon, operational and embodied, the expectation taken over the function's
    recent gaps.

    For a window w on generation g from `now`, each recent gap x is a possible next
    arrival at now + x: the instance idles min(x, w) (its keep-alive power times the
    signal's integral, plus its keep-alive embodied carbon for min(x, w)), and the next
    invocation runs warm (x < w: execution energy and the execution's embodied carbon) or
    cold (cold start plus execution, energy and embodied) at the intensity at now + x.
    A cold start's generation adds the current invocation's cold start and execution at
    now (`Generation.busy_embodied_g_per_s`, `keep_alive_embodied_g_per_s`). Without
    gaps (a function's first invocation): `default_window_s` on `default_generation`.
    EcoLife's windows: 0 to 30 minutes by the minute (its artifact's `kat_time`). The
    signal is read as its last value beyond its end. Ties go to the shorter window and
    the generation first in `generations`.
    """

    generations: Mapping[str, Generation]
    signal: CarbonSignal
    windows_s: tuple[float, ...] = tuple(60.0 * m for m in range(31))
    default_window_s: float = 600.0
    default_generation: str = "i3"
    _windows: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.default_generation not in self.generations:
            raise ValueError(
                f"default_generation {self.default_generation!r} is not one of "
                f"{sorted(self.generations)}"
            )
        if not self.windows_s or min(self.windows_s) < 0:
            raise ValueError(f"windows_s must be non-empty and >= 0, got {self.windows_s}")
        object.__setattr__(self, "_windows", np.asarray(self.windows_s, dtype=np.float64))

    def choose_generation(self, state: FunctionState) -> str:
        if len(state.gaps_s) == 0:
            return self.default_generation
        best_name, best_g = self.default_generation, np.inf
        now_g_per_kwh = float(self._values(np.array([state.now_s]))[0])
        for name, gen in self.generations.items():
            exec_s = gen.exec_s(state.exec_s)
            now_energy_j = gen.cold_start_energy_j + gen.exec_power_w * exec_s
            carbon_g = now_energy_j * now_g_per_kwh / _J_PER_KWH
            carbon_g += gen.busy_embodied_g_per_s(state.memory_gb) * (gen.cold_start_s + exec_s)
            carbon_g += float(np.min(self._expected_g(gen, state, self._windows)))
            if carbon_g < best_g:
                best_name, best_g = name, carbon_g
        return best_name

    def choose_window_s(self, generation: Generation, state: FunctionState) -> float:
        if len(state.gaps_s) == 0:
            return self.default_window_s
        expected = self._expected_g(generation, state, self._windows)
        return self.windows_s[int(np.argmin(expected))]

    def expected_carbon_g(
        self, generation: Generation, window_s: float, state: FunctionState
    ) -> float:
        """Expected carbon, g, of keeping an instance of `generation` warm `window_s`
        from `state.now_s` and of the function's next invocation (the class docstring)."""
        windows = np.array([window_s], dtype=np.float64)
        return float(self._expected_g(generation, state, windows)[0])

    def _expected_g(
        self, gen: Generation, state: FunctionState, windows_s: np.ndarray
    ) -> np.ndarray:
        """`expected_carbon_g` of each window of `windows_s`, g: one (window x gap) array,
        each element computed as for one window alone and each row's mean over the gaps
        in the same order, so the same bits as window by window."""
        now_s = state.now_s
        gaps = np.asarray(state.gaps_s, dtype=np.float64)[np.newaxis, :]
        windows = windows_s[:, np.newaxis]
        idle_s = np.minimum(gaps, windows)
        idle_g = (
            gen.keep_alive_power_w(state.memory_gb)
            * self._integrals(now_s, now_s + idle_s)
            / _J_PER_KWH
            + gen.keep_alive_embodied_g_per_s(state.memory_gb) * idle_s
        )
        exec_s = gen.exec_s(state.exec_s)
        cold = gaps >= windows
        next_j = gen.exec_power_w * exec_s + np.where(cold, gen.cold_start_energy_j, 0.0)
        busy_s = exec_s + np.where(cold, gen.cold_start_s, 0.0)
        next_g = (
            next_j * self._values(now_s + gaps) / _J_PER_KWH
            + gen.busy_embodied_g_per_s(state.memory_gb) * busy_s
        )
        return np.mean(idle_g + next_g, axis=1)

    def _values(self, t_s: np.ndarray) -> np.ndarray:
        """Intensity at each time, g/kWh (the last value beyond the end)."""
        sig = self.signal
        i = np.searchsorted(sig.times_s, np.clip(t_s, sig.times_s[0], None), side="right") - 1
        return sig.values_g_per_kwh[np.clip(i, 0, len(sig) - 1)]

    def _integrals(self, t0_s: float, t1_s: np.ndarray) -> np.ndarray:
        """Integral of the intensity over [t0_s, t1] for each t1, (g/kWh) s, extended by
        the last value beyond the end."""
        sig = self.signal
        end, last = sig.end_s, float(sig.values_g_per_kwh[-1])
        t1 = np.asarray(t1_s, dtype=np.float64)
        inside = np.asarray(sig.cumulative(np.minimum(t1, end))) - sig.cumulative(min(t0_s, end))
        return inside + last * (np.maximum(t1, end) - max(t0_s, end))
