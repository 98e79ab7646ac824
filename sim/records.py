"""Append-only, columnar logs: the event log and per-site power levels.

Levels are stored only when they change (salabim's level monitors): a site's IT power
is a step function whose integral is exact.

Columns are typed arrays (`array.array`) of the narrowest type that holds them: 8 bytes per
time or value instead of a Python float object and its list slot (32 bytes), 4 per job
index, 2 per site index, and event details as 4-byte codes into the distinct texts. At
millions of rows that is most of a run's memory. Appending to one costs about what
appending to a list does.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

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
    "fail",
    "evict",
)
_KIND_CODE = {kind: code for code, kind in enumerate(EVENT_KINDS)}


@dataclass(frozen=True, slots=True)
class DrWindow:
    """An announced demand-response event as measured: its limit, and the mean facility
    power in the hour before its notice (its baseline), kW."""

    site: int
    start_s: float
    end_s: float
    limit_kw: float
    baseline_kw: float
    rebound_h: float
    """How long after the event its rebound is looked for, h."""


@dataclass(slots=True)
class DrJobRecord:
    """What demand-response events did to one job at its site (it ran or was suspended
    during one)."""

    run_s: float = 0.0
    """Time it ran inside events, s."""
    done_gpu_s: float = 0.0
    """Work it did then, reference GPU-s."""
    uncapped_gpu_s: float = 0.0
    """Work it would have done uncapped in that time and while suspended in events,
    reference GPU-s."""
    paused_s: float = 0.0
    """Time it was suspended inside events, s."""


class EventLog:
    """One row per event: time (s), kind, job (index, -1 none), site (index, -1 none),
    value (a number whose meaning depends on the kind), detail (text).

    value: `defer` the time deferred to (s); `setcap` the cap (W, NaN = removed);
    `dr_*` the limit (kW); `wake` and `power_off` the number of nodes; `fail` the work the
    job lost (reference GPU-h).
    detail: `start`/`resume`/`migrate` the GPU model; `reject` the reason; `dr_notice` the
    event's key path."""

    __slots__ = ("time_s", "kind", "job", "site", "value", "detail", "_detail_code")

    def __init__(self) -> None:
        self.time_s = array("d")
        self.kind = array("b")
        """Codes: index into `EVENT_KINDS`."""
        self.job = array("i")
        self.site = array("h")
        self.value = array("d")
        self.detail = array("i")
        """Codes: index into the texts in `_detail_code`'s order (first seen first)."""
        self._detail_code: dict[str, int] = {}

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
        self.kind.append(_KIND_CODE[kind])
        self.job.append(job)
        self.site.append(site)
        self.value.append(value)
        code = self._detail_code.get(detail)
        if code is None:
            code = self._detail_code[detail] = len(self._detail_code)
        self.detail.append(code)

    def __len__(self) -> int:
        return len(self.time_s)

    def drain_frame(self, job_ids: np.ndarray, site_names: list[str]) -> pd.DataFrame:
        """The log as a table, emptying the log column by column as the table is built (so
        that both never coexist whole). Text columns are categoricals (job -1 and site -1:
        missing)."""
        return pd.DataFrame(
            {
                "time_s": _drain(self.time_s),
                "kind": pd.Categorical.from_codes(_drain(self.kind), categories=EVENT_KINDS),
                "job": _job_categorical(_drain(self.job), job_ids),
                "site": pd.Categorical.from_codes(_drain(self.site), categories=site_names),
                "value": _drain(self.value),
                "detail": self._drain_detail(),
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )

    def _drain_detail(self) -> pd.Categorical:
        """The details as a categorical with its texts sorted (as `pd.Categorical` of the
        texts themselves orders them), the codes emptied."""
        texts = list(self._detail_code)
        order = sorted(range(len(texts)), key=texts.__getitem__)
        recode = np.empty(len(texts), dtype=np.int32)
        recode[order] = np.arange(len(texts), dtype=np.int32)
        self._detail_code = {}
        return pd.Categorical.from_codes(
            recode[_drain(self.detail)], categories=pd.Index([texts[i] for i in order])
        )


class PowerLog:
    """Per-site IT and facility power (W) and busy GPUs, one row per change. Several changes at the
    same instant collapse into one row, the last value."""

    __slots__ = ("time_s", "site", "it_w", "facility_w", "busy_gpus", "_last_row")

    def __init__(self, n_sites: int) -> None:
        self.time_s = array("d")
        self.site = array("h")
        self.it_w = array("d")
        self.facility_w = array("d")
        self.busy_gpus = array("i")
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

    def drain_frame(self, site_names: list[str]) -> pd.DataFrame:
        """The log as a table, emptying the log column by column as the table is built."""
        self._last_row = [-1] * len(self._last_row)
        return pd.DataFrame(
            {
                "time_s": _drain(self.time_s),
                "site": pd.Categorical.from_codes(_drain(self.site), categories=site_names),
                "it_w": _drain(self.it_w),
                "facility_w": _drain(self.facility_w),
                "busy_gpus": _drain(self.busy_gpus).astype(np.int64),
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )


def _job_categorical(codes: np.ndarray, job_ids: np.ndarray) -> pd.Categorical:
    """Job indices (-1: none) as a categorical of the job ids, without the lookup table that
    checking the ids are unique leaves cached on them: for text categories pandas keeps a
    Python string per id and a hash table (about 60 MB at a million jobs), which nothing
    reads afterwards. The ids are unique (`JobTable` checks it)."""
    column = pd.Categorical.from_codes(codes, categories=pd.Index(job_ids))
    # pandas' private memo of computed properties, rebuilt on use; if a pandas release drops
    # it, nothing is cleared (tests/test_results_memory.py then says so)
    getattr(column.categories, "_cache", {}).clear()
    return column


def _drain(column: array) -> np.ndarray:
    """A copy of `column` as a numpy array of its type, then `column` emptied."""
    out = np.array(column)
    del column[:]
    return out
