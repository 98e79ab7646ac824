"""Append-only, columnar logs: the event log and per-site power levels.

Levels are stored only when they change (salabim's level monitors): a site's IT power
is a step function whose integral is exact.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

EVENT_KINDS = (
    "submit",
    "start",
    "finish",
    "defer",
    "ready",
    "suspend",
    "resume",
    "migrate",
    "setcap",
    "reject",
    "unfinished",
    "dr_notice",
    "dr_start",
    "dr_end",
    "wake",
    "power_off",
    "checkpoint",
    "transfer",
)


class EventLog:
    """One row per event: time (s), kind, job (index, -1 none), site (index, -1 none),
    value (a number whose meaning depends on the kind), detail (text).

    value: `defer` the time deferred to (s); `setcap` the cap (W, NaN = removed);
    `dr_*` the limit (kW); `wake` and `power_off` the number of nodes.
    detail: `start`/`resume`/`migrate` the GPU model; `reject` the reason; `dr_notice` the
    event's key path."""

    __slots__ = ("time_s", "kind", "job", "site", "value", "detail")

    def __init__(self) -> None:
        self.time_s: list[float] = []
        self.kind: list[str] = []
        self.job: list[int] = []
        self.site: list[int] = []
        self.value: list[float] = []
        self.detail: list[str] = []

    def append(
        self,
        t_s: float,
        kind: str,
        job: int = -1,
        site: int = -1,
        value: float = math.nan,
        detail: str = "",
    ) -> None:
        self.time_s.append(t_s)
        self.kind.append(kind)
        self.job.append(job)
        self.site.append(site)
        self.value.append(value)
        self.detail.append(detail)

    def __len__(self) -> int:
        return len(self.time_s)

    def to_frame(self, job_ids: np.ndarray, site_names: list[str]) -> pd.DataFrame:
        job = np.asarray(self.job, dtype=np.int64)
        site = np.asarray(self.site, dtype=np.int64)
        ids = np.append(np.asarray(job_ids, dtype=object), None)  # index -1 -> None
        names = np.array([*site_names, None], dtype=object)
        return pd.DataFrame(
            {
                "time_s": np.asarray(self.time_s, dtype=np.float64),
                "kind": pd.Categorical(self.kind, categories=EVENT_KINDS),
                "job": ids[job],
                "site": names[site],
                "value": np.asarray(self.value, dtype=np.float64),
                "detail": np.asarray(self.detail, dtype=object),
            }
        )


class PowerLog:
    """Per-site IT and facility power (W) and busy GPUs, one row per change. Several changes at the
    same instant collapse into one row, the last value."""

    __slots__ = ("time_s", "site", "it_w", "facility_w", "busy_gpus", "_last_row")

    def __init__(self, n_sites: int) -> None:
        self.time_s: list[float] = []
        self.site: list[int] = []
        self.it_w: list[float] = []
        self.facility_w: list[float] = []
        self.busy_gpus: list[int] = []
        self._last_row = [-1] * n_sites

    def record(self, t_s: float, site: int, it_w: float, facility_w: float, busy_gpus: int) -> None:
        row = self._last_row[site]
        if row >= 0 and self.time_s[row] == t_s:
            self.it_w[row] = it_w
            self.facility_w[row] = facility_w
            self.busy_gpus[row] = busy_gpus
            return
        self._last_row[site] = len(self.time_s)
        self.time_s.append(t_s)
        self.site.append(site)
        self.it_w.append(it_w)
        self.facility_w.append(facility_w)
        self.busy_gpus.append(busy_gpus)

    def to_frame(self, site_names: list[str]) -> pd.DataFrame:
        site = np.asarray(self.site, dtype=np.int64)
        return pd.DataFrame(
            {
                "time_s": np.asarray(self.time_s, dtype=np.float64),
                "site": np.asarray(site_names, dtype=object)[site],
                "it_w": np.asarray(self.it_w, dtype=np.float64),
                "facility_w": np.asarray(self.facility_w, dtype=np.float64),
                "busy_gpus": np.asarray(self.busy_gpus, dtype=np.int64),
            }
        )
