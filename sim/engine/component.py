"""The base of the engine's components, and what they write their results into.

A component has one responsibility (the job lifecycle, job runs, the fleet's power,
checkpoints and WAN moves, demand-response metering, ...). It owns its state, as named
per-job columns (lists and typed arrays on the component itself, declared in
`__slots__`: no Python object per job), charges its own energy and carbon as exact
integrals, and writes its own result columns and summary keys through one hook,
`write_results` (desmod's `get_result_hook`). The core calls the hooks; see
docs/architecture.md for which component owns what, and how to add one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.results import ResultParts

if TYPE_CHECKING:
    from sim.engine.ledger import Pool, Site

__all__ = ["Component", "per_job"]


class Component:
    """A part of the engine. Every hook has a default that does nothing:

    - `start()`: at time 0, start the component's SimPy processes and timers;
    - `close(now_s)`: at the horizon, close open intervals and charge what is due;
    - `segment_closed(j, site, pool, t0_s, t1_s, energy_kwh)`: a running job's segment of
      constant speed was charged (`Runs.close_segment`); a meter takes its share;
    - `write_results(out)`: add the component's per-job columns, summary keys and tables.
    """

    __slots__ = ()

    def start(self) -> None:
        """Start processes and timers at time 0."""

    def close(self, now_s: float) -> None:
        """The run reached its horizon `now_s`: charge what is still open."""

    def segment_closed(
        self, j: int, site: Site, pool: Pool, t0_s: float, t1_s: float, energy_kwh: float
    ) -> None:
        """Running job `j` computed on `pool` of `site` over [t0_s, t1_s] at constant speed
        and power, and was charged `energy_kwh` of facility energy for it. Only components
        that override this hook are called (`Engine.meters`)."""

    def write_results(self, out: ResultParts) -> None:
        """Add this component's columns, summary keys and tables to `out`."""


def per_job(n: int, by_job: Mapping[int, float], dtype: type = np.float64) -> np.ndarray:
    """A result column of `n` jobs from a component's sparse record `{job: value}` (0 for
    the jobs without one)."""
    column: np.ndarray = np.zeros(n, dtype=dtype)
    for j, value in by_job.items():
        column[j] = value
    return column
