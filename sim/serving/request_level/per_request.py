"""`PerRequestSim`: the `ServiceSim` contract of a fidelity that follows every request (the
request level and the iteration level), all but serving them; times in s.

A subclass builds, in `setup` after this class's, its records `_requests` (`_Requests` or
a subclass: `n`, `between`, `forget_from`, `columns`) and its `_fleet` (`configure`,
`admitting`, `queued`, `in_flight`, `drop_overdue`, `models`), and serves the requests in
`advance_to`, keeping `_now_s` (the time served up to). This class routes (`_Router`) and
reads the records into the step table, totals and request table (`_Statistics`).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import pandas as pd

from sim.models.llm_replica import ReplicaModel
from sim.serving.request_level.records import _Requests
from sim.serving.request_level.routing import _Router
from sim.serving.request_level.stats import _request_table, _Statistics
from sim.serving.service_sim import LiveStats, ServiceSim


class _Replicas(Protocol):
    """What `PerRequestSim` asks of a fidelity's replicas (its `_fleet`)."""

    models: list[ReplicaModel]

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float: ...
    def admitting(self) -> list[int]: ...
    def queued(self) -> int: ...
    def in_flight(self) -> int: ...
    def drop_overdue(self, t_s: float) -> None: ...


class PerRequestSim(ServiceSim):
    """A fidelity with a record per request (module docstring)."""

    _requests: _Requests
    _fleet: _Replicas

    def setup(self) -> None:
        self._router = _Router(len(self.rtt_s))
        self._stats = _Statistics(self.slo, self.step_s, self.n_steps)
        self._now_s = 0.0
        """Time served up to, s."""

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        self.advance_to(t_s)
        free_s = self._fleet.configure(t_s, site, ready, model)
        self._router.reweight(self._fleet.admitting())
        return free_s

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        self.advance_to(t_s)
        self._router.set_shares(shares)
        self._router.reweight(self._fleet.admitting())

    def source_changed(self, t_s: float) -> None:
        """Forget the arrivals read ahead from `t_s` on (their records too), to read them
        again from the source."""
        self.advance_to(t_s)
        self._requests.forget_from(t_s)

    def live(self) -> LiveStats:
        """The last completed step's requests as far as known now (`_Statistics.last_step`);
        queue and batch now."""
        queued = float(self._fleet.queued())
        in_flight = float(self._fleet.in_flight())
        k = math.floor(self._now_s / self.step_s) - 1
        if k < 0:
            return LiveStats(0.0, queued, in_flight, math.nan, math.nan, math.nan, 0.0)
        lo, hi = self._requests.between(k * self.step_s, (k + 1) * self.step_s)
        return self._stats.last_step(self._live_columns(lo, hi), queued, in_flight)

    def close(self, horizon_s: float) -> None:
        self.advance_to(horizon_s)
        self._fleet.drop_overdue(horizon_s)

    def step_table(self) -> pd.DataFrame:
        return self._stats.step_table(self._columns(0, self._requests.n))

    def summary(self) -> dict[str, float]:
        return self._stats.summary(self._columns(0, self._requests.n))

    def served_by_site(self) -> np.ndarray:
        return self._stats.served_by_site(self._columns(0, self._requests.n), len(self.rtt_s))

    def request_table(self) -> pd.DataFrame:
        """One row per arrived request: `service`, `arrival_s`, `site` (-1: none), token
        counts, `state` ('served', 'dropped', 'unfinished'; before `close`, unfinished means
        still in progress), `ttft_ms` (NaN if never admitted), `tpot_ms` and `end_s` (NaN
        unless served)."""
        return _request_table(self.name, self._columns(0, self._requests.n))

    def _columns(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The records of requests lo..hi-1 and their latencies (`_Requests.columns`)."""
        return self._requests.columns(lo, hi, self._fleet.models, self.rtt_s)

    def _live_columns(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """What `live` reads of requests lo..hi-1 (by default `_columns`)."""
        return self._columns(lo, hi)
