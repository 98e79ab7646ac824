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
    "scale",
    "replica_ready",
    "replica_drained",
    "route",
    "directive",
)
"""Every kind an event can be; a new kind is appended, so the codes of the others keep
their index."""
_KIND_CODE = {kind: code for code, kind in enumerate(EVENT_KINDS)}
_INSTANT_RANK = np.array(
    [
        (
            "dr_end",
            "finish",
            "fail",
            "evict",
            "replica_drained",
            "suspend",
            "checkpoint",
            "transfer",
            "power_off",
            "submit",
            "ready",
            "defer",
            "reject",
            "dr_notice",
            "dr_start",
            "setcap",
            "scale",
            "route",
            "directive",
            "start",
            "replica_ready",
            "resume",
            "migrate",
            "wake",
            "unfinished",
        ).index(kind)
        for kind in EVENT_KINDS
    ],
    dtype=np.int8,
)
"""Each kind's rank among the events of one instant (by kind code): what ends and what frees
GPUs (a service's drained replicas), then what arrives, then what changes limits (and a
service's replicas, routing, directive), then what starts (and a service's replicas that
finished their cold start, the nodes a start wakes), then what the horizon leaves
unfinished."""

INSTANT_S = 1e-6
"""Times of a level log closer than this, s, are one instant: a state that lasted less is not
a row. The same time computed by different float sums differs in its last bits across CPUs
and library builds (5.8e-11 s at t = 39,600 s has been seen); this tolerance keeps the
structure of every result file independent of such differences. It lies far above them at
any horizon (float64 spacing is 3.7e-9 s at a year) and far below anything modelled."""


class EventLog:
    """One row per event: time (s), kind, job (index, -1 none), site (index, -1 none),
    value (a number whose meaning depends on the kind), detail (text).

    value: `defer` the time deferred to (s); `setcap` the cap (W, NaN = removed);
    `dr_*` the limit (kW); `wake` and `power_off` the number of nodes; `fail` the work the
    job lost (reference GPU-h); `scale` the replicas asked for; `replica_ready` and
    `replica_drained` the replicas that started serving or freed their GPUs; `route` the
    site's share of the service's requests (NaN: by ready replicas, site missing);
    `directive` the directive's output-token factor.
    detail: `start`/`resume`/`migrate` the GPU model; `reject` the reason; `dr_notice` the
    event's key path; `scale`, `replica_ready`, `replica_drained` "service/variant";
    `route` and a service's `setcap` (site missing) the service; `directive`
    "service/directive"."""

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
        """The log as a table in its canonical order (`in_instants`: by instant, then kind in
        `_INSTANT_RANK` order, job, site), emptying the log column by column as the table is
        built (so that both never coexist whole). Text columns are categoricals (job -1 and
        site -1: missing)."""
        order, time_s = in_instants(
            np.frombuffer(self.time_s),
            _INSTANT_RANK[np.frombuffer(self.kind, np.int8)],
            np.frombuffer(self.job, np.int32),
            np.frombuffer(self.site, np.int16),
        )
        self.time_s = array("d")
        return pd.DataFrame(
            {
                "time_s": time_s,
                "kind": pd.Categorical.from_codes(
                    _take(self, "kind")[order], categories=EVENT_KINDS
                ),
                "job": job_categorical(_take(self, "job")[order], job_ids),
                "site": pd.Categorical.from_codes(
                    _take(self, "site")[order], categories=site_names
                ),
                "value": _take(self, "value")[order],
                "detail": self._drain_detail(order),
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )

    def _drain_detail(self, rows: np.ndarray) -> pd.Categorical:
        """The details in the order of `rows` as a categorical with its texts sorted (as
        `pd.Categorical` of the texts themselves orders them), the codes emptied."""
        texts = list(self._detail_code)
        order = sorted(range(len(texts)), key=texts.__getitem__)
        recode = np.empty(len(texts), dtype=np.int32)
        recode[order] = np.arange(len(texts), dtype=np.int32)
        self._detail_code = {}
        return pd.Categorical.from_codes(
            recode[_take(self, "detail")[rows]], categories=pd.Index([texts[i] for i in order])
        )


class PowerLog:
    """Per-site IT and facility power (W) and busy GPUs, one row per change. Several changes at one
    instant (within `INSTANT_S` of the site's last row) collapse into that row, the last value."""

    __slots__ = ("time_s", "site", "it_w", "facility_w", "busy_gpus", "_last_row", "_last_s")

    def __init__(self, n_sites: int) -> None:
        self.time_s = array("d")
        self.site = array("h")
        self.it_w = array("d")
        self.facility_w = array("d")
        self.busy_gpus = array("i")
        self._last_row = [-1] * n_sites
        self._last_s = [-math.inf] * n_sites
        """The time of each site's last change, s (its row's time is its instant's first)."""

    def record(self, t_s: float, site: int, it_w: float, facility_w: float, busy_gpus: int) -> None:
        row = self._last_row[site]
        last_s, self._last_s[site] = self._last_s[site], t_s
        if t_s - last_s < INSTANT_S:
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
        """The log as a table in its canonical order (`in_instants`: by instant, then site),
        emptying the log column by column as the table is built."""
        self._last_row = [-1] * len(self._last_row)
        self._last_s = [-math.inf] * len(self._last_s)
        order, time_s = in_instants(np.frombuffer(self.time_s), np.frombuffer(self.site, np.int16))
        self.time_s = array("d")
        return pd.DataFrame(
            {
                "time_s": time_s,
                "site": pd.Categorical.from_codes(
                    _take(self, "site")[order], categories=site_names
                ),
                "it_w": _take(self, "it_w")[order],
                "facility_w": _take(self, "facility_w")[order],
                "busy_gpus": _take(self, "busy_gpus").astype(np.int64)[order],
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )


def instant_starts(times_s: np.ndarray) -> np.ndarray:
    """Which of the increasing `times_s` open an instant (are `INSTANT_S` or more after the time
    before them; the first always does)."""
    return np.diff(times_s, prepend=-np.inf) >= INSTANT_S


def in_instants(times_s: np.ndarray, *keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A log's rows in their canonical order, and each row's instant, s.

    The rows are taken in time order (ties in their logged order) and grouped into instants
    (a time within `INSTANT_S` of the one before it joins that one's instant); an instant's
    time is its first. Within an instant the rows are ordered by `keys` (the first decides
    first; rows with equal keys keep their logged order). Neither the order nor the groups
    depend on last-bit differences of the times, only the instants' times (by as much)."""
    by_time = np.argsort(times_s, kind="stable")
    t = times_s[by_time]
    new = instant_starts(t)
    instant = np.cumsum(new) - 1
    within = np.lexsort((by_time, *(np.asarray(k)[by_time] for k in reversed(keys)), instant))
    return by_time[within], t[new][instant][within]


def job_categorical(codes: np.ndarray, job_ids: np.ndarray | pd.Series) -> pd.Categorical:
    """Job indices (-1: none) as a categorical of the job ids, without the lookup table that
    checking the ids are unique leaves cached on them: for text categories pandas keeps a
    Python string per id and a hash table (about 60 MB at a million jobs), which nothing
    reads afterwards. The ids are unique (`JobTable` checks it). The categories are unnamed
    (a Series' name is not taken over)."""
    column = pd.Categorical.from_codes(codes, categories=pd.Index(job_ids).rename(None))
    # pandas' private memo of computed properties, rebuilt on use; if a pandas release drops
    # it, nothing is cleared (tests/test_results_memory.py then says so)
    getattr(column.categories, "_cache", {}).clear()
    return column


def _take(log: EventLog | PowerLog, name: str) -> np.ndarray:
    """The column `name` of `log` as a numpy array over its buffer (no copy), the log's
    column replaced by an empty one. A column is replaced, never emptied in place: resizing
    an array that a numpy view still reads raises BufferError, and a view can outlive the
    line that made it (a sampling profiler holding a frame keeps the frame's variables
    alive past its return; Dask's workers run one). The old column is freed with its last
    view."""
    column = getattr(log, name)
    setattr(log, name, array(column.typecode))
    return np.frombuffer(column, column.typecode)
