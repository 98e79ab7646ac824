"""The reward's terms, read live from a running engine's own accounting (docs/gym.md,
"Reward").

`Meter.totals(now_s)` gives each term's total from the start of the run to `now_s`: the
same exact integrals the results are made of, over the power log so far (operational
carbon: IT power x PUE x carbon intensity; energy cost: facility power x the tariff's
energy price), deadline misses as they happen, and SLO misses estimated from each
service's live statistics. `Meter.final(summary)` gives the run's totals from its summary,
which the environment settles the last step's terms on: so an episode's terms add up to
the summary exactly, whatever the live estimates missed (WAN carbon is not in the carbon
term; on-site energy moves carbon between load and import; SLO misses are only estimated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sim.api import SystemState
from sim.engine.core import Engine
from sim.engine.jobs import COMPLETED, REJECTED

TERMS = ("carbon_kg", "energy_cost", "deadline_misses", "slo_misses")
"""The reward's terms, in the order of `Meter.totals`: operational carbon, kg (the summary's
`carbon_operational_kg`); the energy bill, the scenario's currency (`cost_energy`, 0 without
a tariff); jobs that missed their deadline (`deadline_misses`); requests that missed their
service's SLO (`requests_total` x (1 - `slo_attainment`))."""

DEFAULT_WEIGHTS: Mapping[str, float] = {
    "carbon_kg": 1.0,
    "energy_cost": 0.0,
    "deadline_misses": 10.0,
    "slo_misses": 0.001,
}
"""Reward = -sum(weight x term over the step). A missed deadline weighs as 10 kg of CO2
(about 60 h of an A100-80GB at 400 W and PUE 1.3 on Germany's 2020 grid, 318 g/kWh on
average); an SLO miss as 1 g. A starting point chosen here, not a calibration (docs/gym.md)."""


class Meter:
    """Cumulative reward terms of one run of `engine`, read incrementally: each call reads
    only the power log's rows added since the last (a site's last row may still change
    within its instant; a row followed by another of its site never does)."""

    def __init__(self, engine: Engine):
        self._engine = engine
        fleet = engine.fleet
        self._ci = [s.facility_ci for s in fleet.sites]
        self._prices = [None if t is None else t.energy_price for t in fleet.tariffs]
        self._deadline_s = np.asarray(engine.jobs.deadline_s, dtype=float)
        self._rows_read = 0
        self._open_row = [-1] * len(fleet.sites)
        """Per site, its last row in the power log (-1: none yet)."""
        self._closed = np.zeros(2)
        """Carbon (g x W-s per kWh) and cost (currency x W-s per kWh) of every closed row."""
        self._slo_misses = 0.0
        self._last_s = 0.0

    def totals(self, now_s: float, state: SystemState) -> np.ndarray:
        """Each term of `TERMS` from the start to `now_s` (the engine's now)."""
        log = self._engine.fleet.power_log
        for row in range(self._rows_read, len(log.time_s)):
            site = log.site[row]
            if self._open_row[site] >= 0:
                self._closed += self._integrals(self._open_row[site], log.time_s[row])
            self._open_row[site] = row
        self._rows_read = len(log.time_s)
        carbon, cost = self._closed + sum(
            (self._integrals(row, now_s) for row in self._open_row if row >= 0), np.zeros(2)
        )
        self._slo_misses += self._slo_rate_per_s(state) * (now_s - self._last_s)
        self._last_s = now_s
        return np.array(
            [carbon / 3.6e9, cost / 3.6e6, self._deadline_misses(now_s), self._slo_misses]
        )

    def _integrals(self, row: int, end_s: float) -> np.ndarray:
        """Power log row `row`'s level held until `end_s`: IT power x the integral of PUE x
        carbon intensity, and facility power x the integral of the energy price."""
        log = self._engine.fleet.power_log
        site, span_s = log.site[row], np.array([log.time_s[row], end_s])
        ci, price = self._ci[site], self._prices[site]
        carbon = log.it_w[row] * float(np.diff(ci.cumulative(span_s))[0])
        cost = (
            0.0
            if price is None
            else log.facility_w[row] * float(np.diff(price.cumulative(span_s))[0])
        )
        return np.array([carbon, cost])

    def _deadline_misses(self, now_s: float) -> float:
        """Jobs (not rejected) whose deadline has passed by `now_s` without their completion
        by it: at the horizon, the summary's `deadline_misses`."""
        book = self._engine.book
        state = np.frombuffer(book.state, dtype=np.int8)
        end = np.asarray(book.end_s, dtype=float)
        due = self._deadline_s <= now_s
        late = (state != COMPLETED) | (end > self._deadline_s)
        return float(np.count_nonzero(due & late & (state != REJECTED)))

    @staticmethod
    def _slo_rate_per_s(state: SystemState) -> float:
        """Requests per second missing their SLO now, over every service: each one's arrival
        rate x the share of its last step's requests that missed (an estimate)."""
        rate = 0.0
        for name in state.services:
            stats = state.service(name).stats
            if not math.isnan(stats.slo_attainment):
                rate += stats.rate_per_s * (1.0 - stats.slo_attainment)
        return rate

    @staticmethod
    def final(summary: Mapping[str, Any]) -> np.ndarray:
        """Each term of `TERMS` over the whole run, from its summary."""
        total = summary.get("requests_total") or 0.0
        attainment = summary.get("slo_attainment")
        return np.array(
            [
                summary["carbon_operational_kg"],
                summary.get("cost_energy") or 0.0,
                summary["deadline_misses"],
                0.0 if attainment is None else total * (1.0 - attainment),
            ],
            dtype=float,
        )
