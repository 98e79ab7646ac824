"""Exact keep-alive simulation of serverless functions, engine-free: which invocations run
warm or cold-start, on which generation, the memory held warm, the energy and the carbon
(operational and embodied).

Per function, in arrival order: an invocation at t runs warm on an idle instance whose
execution ended at e <= t < e + w (w: that instance's keep-alive window, chosen by the
policy when its execution ends); otherwise it cold-starts a new instance on the generation
the policy chooses (so an invocation while every warm instance is busy opens a new one).
A cold invocation executes after the generation's cold start; a warm one at once.
Functions share nothing. docs/functions.md describes the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from sim.functions.generations import Generation
from sim.grid.signal import CarbonSignal

__all__ = ["FunctionState", "KeepAlivePolicy", "KeepAliveResult", "simulate_keep_alive"]

J_PER_KWH = 3.6e6
MB_PER_GB = 1024.0


@dataclass(frozen=True)
class FunctionState:
    """What a keep-alive policy knows of a function at a decision: the time `now_s`
    (seconds), the memory an instance holds (`memory_gb`), its execution time on the
    reference hardware (`exec_s`, seconds) and its recent inter-arrival gaps (`gaps_s`,
    seconds, oldest first; those that had arrived by `now_s`)."""

    now_s: float
    memory_gb: float
    exec_s: float
    gaps_s: np.ndarray


class KeepAlivePolicy(Protocol):
    """What a keep-alive policy decides, from a function's `FunctionState`."""

    def choose_generation(self, state: FunctionState) -> str:
        """The generation a cold start at `state.now_s` opens its instance on."""
        ...

    def choose_window_s(self, generation: Generation, state: FunctionState) -> float:
        """Seconds an instance of `generation` whose execution ends at `state.now_s` stays
        warm."""
        ...


@dataclass(frozen=True)
class KeepAliveResult:
    """`invocations`: one row per invocation in the input's order: function_id,
    arrival_s, cold, generation, instance (per function, 0, 1, ... in opening order),
    start_s and end_s of its execution, energy_j of its cold start and execution, their
    carbon_g (operational + embodied) and embodied_g (the embodied part). `summary`:
    function_invocations, function_cold_starts, function_warm_gb_h (memory held by idle
    warm instances, GB-hours, exact), function_energy_kwh, function_embodied_kg and
    function_carbon_kg (operational + embodied; executions, cold starts and idle warm
    instances)."""

    invocations: pd.DataFrame
    summary: dict[str, float]  # the two counts are ints


@dataclass
class _Instance:
    generation: Generation
    busy_until_s: float
    window_s: float | None = None  # decided when its execution ends


def simulate_keep_alive(
    invocations: pd.DataFrame,
    policy: KeepAlivePolicy,
    generations: Mapping[str, Generation],
    signal: CarbonSignal,
    horizon_s: float,
    *,
    history: int = 20,
) -> KeepAliveResult:
    """Run every function of `invocations` (columns function_id, arrival_s, exec_s on the
    reference hardware, memory_mb) under `policy`.

    Idle warm memory and power count until `horizon_s`; executions count in full, so
    `signal` (g/kWh) must cover [0, max(horizon_s, last execution end)]. `history`: how
    many of a function's latest inter-arrival gaps the policy sees (EcoLife's window
    size, 20). ValueError naming the column, key or time for bad input.
    """
    for col in ("function_id", "arrival_s", "exec_s", "memory_mb"):
        if col not in invocations.columns:
            raise ValueError(f"invocations: missing column {col!r}")
    if not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be finite and > 0, got {horizon_s}")
    if history < 1:
        raise ValueError(f"history must be >= 1, got {history}")
    n = len(invocations)
    out = {
        "cold": np.zeros(n, dtype=bool),
        "generation": np.empty(n, dtype=object),
        "instance": np.zeros(n, dtype=np.int64),
        "start_s": np.zeros(n),
        "end_s": np.zeros(n),
        "energy_j": np.zeros(n),
        "carbon_g": np.zeros(n),
        "embodied_g": np.zeros(n),
    }
    idle = _IdleTotals(signal, horizon_s)
    fids = invocations["function_id"].to_numpy()
    for fid in pd.unique(fids):
        rows = np.flatnonzero(fids == fid)
        rows = rows[np.argsort(invocations["arrival_s"].to_numpy()[rows], kind="stable")]
        _run_function(invocations, rows, policy, generations, signal, history, idle, out)
    frame = pd.DataFrame(
        {
            "function_id": fids,
            "arrival_s": invocations["arrival_s"].to_numpy(dtype=np.float64),
            **out,
        }
    )
    energy_j = float(out["energy_j"].sum()) + idle.energy_j
    embodied_g = float(out["embodied_g"].sum()) + idle.embodied_g
    carbon_g = float(out["carbon_g"].sum()) + idle.carbon_g + idle.embodied_g
    summary = {
        "function_invocations": n,
        "function_cold_starts": int(out["cold"].sum()),
        "function_warm_gb_h": idle.gb_s / 3600.0,
        "function_energy_kwh": energy_j / J_PER_KWH,
        "function_embodied_kg": embodied_g / 1000.0,
        "function_carbon_kg": carbon_g / 1000.0,
    }
    return KeepAliveResult(frame, summary)


class _IdleTotals:
    """Memory, energy, operational carbon (`carbon_g`) and embodied carbon of idle warm
    instances, each interval cut at the horizon."""

    def __init__(self, signal: CarbonSignal, horizon_s: float) -> None:
        self.signal, self.horizon_s = signal, horizon_s
        self.gb_s = self.energy_j = self.carbon_g = self.embodied_g = 0.0

    def add(self, generation: Generation, memory_gb: float, t0_s: float, t1_s: float) -> None:
        t1_s = min(t1_s, self.horizon_s)
        if t1_s <= t0_s:
            return
        power_w = generation.keep_alive_power_w(memory_gb)
        self.gb_s += memory_gb * (t1_s - t0_s)
        self.energy_j += power_w * (t1_s - t0_s)
        self.carbon_g += power_w * _integral(self.signal, t0_s, t1_s) / J_PER_KWH
        self.embodied_g += generation.keep_alive_embodied_g_per_s(memory_gb) * (t1_s - t0_s)


def _integral(signal: CarbonSignal, t0_s: float, t1_s: float) -> float:
    """The signal's integral over [t0_s, t1_s], (g/kWh) s; ValueError naming the times
    when the signal does not cover them."""
    if t0_s < signal.times_s[0] or t1_s > signal.end_s:
        raise ValueError(
            f"signal covers [{signal.times_s[0]:g}, {signal.end_s:g}] s, not [{t0_s:g}, {t1_s:g}] s"
        )
    return signal.integral(t0_s, t1_s)


def _run_function(
    invocations: pd.DataFrame,
    rows: np.ndarray,
    policy: KeepAlivePolicy,
    generations: Mapping[str, Generation],
    signal: CarbonSignal,
    history: int,
    idle: _IdleTotals,
    out: dict[str, np.ndarray],
) -> None:
    arrivals = invocations["arrival_s"].to_numpy(dtype=np.float64)[rows]
    exec_ref = invocations["exec_s"].to_numpy(dtype=np.float64)[rows]
    memory_gb = invocations["memory_mb"].to_numpy(dtype=np.float64)[rows] / MB_PER_GB
    instances: list[_Instance] = []
    live: list[int] = []  # instances not yet expired

    def state(t_s: float, mem_gb: float, ref_s: float) -> FunctionState:
        known = int(np.searchsorted(arrivals, t_s, side="right"))
        return FunctionState(
            t_s, mem_gb, ref_s, np.diff(arrivals[max(0, known - history - 1) : known])
        )

    def settle(t_s: float, mem_gb: float, ref_s: float) -> None:
        """Decide the windows of executions ended by t_s; close the expired instances."""
        for i in list(live):
            inst = instances[i]
            if inst.busy_until_s > t_s:
                continue
            if inst.window_s is None:
                end = inst.busy_until_s
                window = policy.choose_window_s(inst.generation, state(end, mem_gb, ref_s))
                if not (math.isfinite(window) and window >= 0):
                    raise ValueError(f"policy window_s must be finite and >= 0, got {window}")
                inst.window_s = window
            if t_s >= inst.busy_until_s + inst.window_s:
                idle.add(
                    inst.generation, mem_gb, inst.busy_until_s, inst.busy_until_s + inst.window_s
                )
                live.remove(i)

    for k, row in enumerate(rows):
        t = float(arrivals[k])
        settle(t, float(memory_gb[k]), float(exec_ref[k]))
        warm = [i for i in live if instances[i].busy_until_s <= t]
        if warm:
            i = max(warm, key=lambda j: (instances[j].busy_until_s, -j))
            inst = instances[i]
            idle.add(inst.generation, float(memory_gb[k]), inst.busy_until_s, t)
            inst.window_s = None
            start, cold_energy_j, cold_carbon_g = t, 0.0, 0.0
        else:
            name = policy.choose_generation(state(t, float(memory_gb[k]), float(exec_ref[k])))
            if name not in generations:
                raise ValueError(
                    f"policy chose generation {name!r}, not one of {sorted(generations)}"
                )
            inst = _Instance(generations[name], t)
            instances.append(inst)
            i = len(instances) - 1
            live.append(i)
            start = t + inst.generation.cold_start_s
            cold_energy_j = inst.generation.cold_start_energy_j
            cold_carbon_g = _spread_carbon_g(signal, cold_energy_j, t, start)
        gen = inst.generation
        end = start + gen.exec_s(float(exec_ref[k]))
        exec_energy_j = gen.exec_power_w * (end - start)
        inst.busy_until_s = end
        out["cold"][row] = not warm
        out["generation"][row] = gen.name
        out["instance"][row] = i
        out["start_s"][row] = start
        out["end_s"][row] = end
        out["energy_j"][row] = cold_energy_j + exec_energy_j
        embodied_g = gen.busy_embodied_g_per_s(float(memory_gb[k])) * (end - t)
        operational_g = cold_carbon_g + _spread_carbon_g(signal, exec_energy_j, start, end)
        out["carbon_g"][row] = operational_g + embodied_g
        out["embodied_g"][row] = embodied_g
    if len(rows):
        settle(math.inf, float(memory_gb[-1]), float(exec_ref[-1]))


def _spread_carbon_g(signal: CarbonSignal, energy_j: float, t0_s: float, t1_s: float) -> float:
    """Carbon, g, of `energy_j` drawn at constant power over [t0_s, t1_s] (at t0_s if the
    interval is empty)."""
    if t1_s <= t0_s:
        _integral(signal, t0_s, t0_s)  # the domain check
        return energy_j * signal.value_at(t0_s) / J_PER_KWH
    return energy_j / (t1_s - t0_s) * _integral(signal, t0_s, t1_s) / J_PER_KWH
