"""What the agent of `sim.gym.DcsimEnv` observes: `SystemState` as a fixed-size vector of
named parts, each normalised to about [0, 1] (docs/gym.md, "Observation").

The parts, in order (their sizes in `Observer.sizes`; docs/gym.md has the table):
`time` (sin and cos of the hour of day and of the day of the week, UTC; the fraction of
the run elapsed), `carbon` (per site, the intensity now and its forecast mean over each
horizon, kg/kWh), `price` (per site, the energy price now, currency/kWh; 0 without a
tariff), `free_gpus` (per site, free / installed), `dr` (per site, 1 during a
demand-response event, 0.5 once one is announced), `queue` (pending and running jobs /
100), `job` (the job to decide: GPUs / 8, work left per GPU h / 24, slack to its deadline
h / 24, has a deadline, interruptible), `services` (each service's arrival rate / its
capacity), `battery` (per site, the state of charge; 0 without a battery).

Every value is clipped to [-1, 10], the bounds of the space.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from gymnasium import spaces

from sim.api import JobView, SystemState
from sim.errors import PolicyError

LOW, HIGH = -1.0, 10.0
"""The bounds of every observed value."""

FORECAST_HORIZONS_S = (3600.0, 6 * 3600.0, 24 * 3600.0)
"""The horizons of the forecast means the agent sees, s."""


class Observer:
    """Builds observations of one scenario's state."""

    def __init__(self, state: SystemState, start: datetime, horizons_s: Sequence[float]):
        self.sites = state.sites
        self.services = state.services
        self.horizons_s = tuple(horizons_s)
        self.start_s = start.timestamp()
        self.total_gpus = np.array(
            [max(1, sum(state.total_gpus(s).values())) for s in self.sites], dtype=float
        )
        self.tariffed = [_has_tariff(state, s) for s in self.sites]
        n = len(self.sites)
        self.sizes = {
            "time": 5,
            "carbon": n * (1 + len(self.horizons_s)),
            "price": n,
            "free_gpus": n,
            "dr": n,
            "queue": 2,
            "job": 5,
            "services": len(self.services),
            "battery": n,
        }

    def space(self, flat: bool) -> spaces.Space:
        """The flat Box of every part in the table's order, or a Dict of one Box per part."""

        def box(size: int) -> spaces.Box:
            return spaces.Box(LOW, HIGH, shape=(size,), dtype=np.float32)

        if flat:
            return box(sum(self.sizes.values()))
        return spaces.Dict({name: box(size) for name, size in self.sizes.items()})

    def observe(self, state: SystemState, job: JobView | None, flat: bool) -> object:
        """The observation now, about `job` (None: the head of the queue, if any)."""
        if job is None and len(state.pending):
            job = state.pending[0]
        parts = {
            "time": self._time(state),
            "carbon": self._carbon(state),
            "price": [
                state.electricity_price(s) if t else 0.0
                for s, t in zip(self.sites, self.tariffed, strict=True)
            ],
            "free_gpus": [sum(state.free_gpus(s).values()) for s in self.sites] / self.total_gpus,
            "dr": self._dr(state),
            "queue": [len(state.pending) / 100.0, len(state.running) / 100.0],
            "job": _job(state, job),
            "services": [_load(state, n) for n in self.services],
            "battery": [_soc(state, s) for s in self.sites],
        }
        arrays = {k: np.clip(np.asarray(v, dtype=np.float32), LOW, HIGH) for k, v in parts.items()}
        return np.concatenate(list(arrays.values())) if flat else arrays

    def _time(self, state: SystemState) -> list[float]:
        t = self.start_s + state.now_s
        day = 2 * math.pi * (t % 86400.0) / 86400.0
        week = 2 * math.pi * ((t / 86400.0 + 3.0) % 7.0) / 7.0  # 1970-01-01 was a Thursday
        return [
            math.sin(day),
            math.cos(day),
            math.sin(week),
            math.cos(week),
            state.now_s / state.horizon_s,
        ]

    def _carbon(self, state: SystemState) -> np.ndarray:
        """Per site, intensity now and the forecast means, kg/kWh."""
        out = np.empty((len(self.sites), 1 + len(self.horizons_s)))
        out[:, 0] = state.carbon_intensities(self.sites)
        for k, horizon_s in enumerate(self.horizons_s):
            span_s = min(horizon_s, state.horizon_s - state.now_s)
            if span_s <= 0:
                out[:, k + 1] = out[:, 0]
                continue
            times, values, offsets = state.forecasts(self.sites, span_s)
            for i in range(len(self.sites)):
                t = times[offsets[i] : offsets[i + 1]]
                v = values[offsets[i] : offsets[i + 1]]
                width = np.diff(np.append(np.maximum(t, state.now_s), state.now_s + span_s))
                out[i, k + 1] = float(np.sum(v * width) / span_s)
        return out.ravel() / 1000.0

    def _dr(self, state: SystemState) -> list[float]:
        now, level = state.now_s, dict.fromkeys(self.sites, 0.0)
        for event in state.demand_response():
            on = event.start_s <= now < event.end_s
            level[event.site] = max(level[event.site], 1.0 if on else 0.5)
        return list(level.values())


def _has_tariff(state: SystemState, site: str) -> bool:
    try:
        state.electricity_price(site)
    except PolicyError:
        return False
    return True


def _job(state: SystemState, job: JobView | None) -> list[float]:
    if job is None:
        return [0.0] * 5
    deadline = job.deadline_s
    slack_h = 0.0 if deadline is None else (deadline - state.now_s) / 3600.0
    return [
        job.gpus / 8.0,
        job.remaining_gpu_h / max(1, job.gpus) / 24.0,
        slack_h / 24.0,
        float(deadline is not None),
        float(job.interruptible),
    ]


def _load(state: SystemState, name: str) -> float:
    service = state.service(name)
    capacity = sum(service.capacity_rps(site) for site in service.sites)
    rate = service.stats.rate_per_s
    if math.isnan(rate):
        return 0.0
    return rate / capacity if capacity > 0 else HIGH


def _soc(state: SystemState, site: str) -> float:
    reading = state.onsite(site)
    if reading is None or reading.battery_soc is None:
        return 0.0
    return reading.battery_soc
