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

    def extend(
        self,
        t_s: np.ndarray,
        kind: str,
        job: np.ndarray,
        site: int = -1,
        value: np.ndarray | None = None,
        detail: str = "",
    ) -> None:
        """`append` for many events of one `kind`, `site` and `detail` at once: at times
        `t_s`, of jobs `job`, with `value` (None: NaN)."""
        n = len(t_s)
        code = self._detail_code.setdefault(detail, len(self._detail_code))
        self.time_s.frombytes(np.asarray(t_s, dtype=np.float64).tobytes())
        self.kind.frombytes(np.full(n, _KIND_CODE[kind], dtype=np.int8).tobytes())
        self.job.frombytes(np.asarray(job, dtype=np.int32).tobytes())
        self.site.frombytes(np.full(n, site, dtype=np.int16).tobytes())
        values = np.full(n, math.nan) if value is None else np.asarray(value, dtype=np.float64)
        self.value.frombytes(values.tobytes())
        self.detail.frombytes(np.full(n, code, dtype=np.int32).tobytes())

    def drain_frame(
        self, job_ids: np.ndarray | pd.api.extensions.ExtensionArray, site_names: list[str]
    ) -> pd.DataFrame:
        """The log as a table in its canonical order (`in_instants`: by instant, then kind in
        `_INSTANT_RANK` order, job, site), emptying the log: the table's columns are the
        log's, sorted in place (`sort_in_instants`). Text columns are categoricals (job -1
        and site -1: missing)."""
        time_s, kind, job, site, value = (
            _take(self, name) for name in ("time_s", "kind", "job", "site", "value")
        )
        detail = _take(self, "detail")
        sort_in_instants(time_s, (_INSTANT_RANK[kind], job, site), (kind, job, site, value, detail))
        return pd.DataFrame(
            {
                "time_s": time_s,
                "kind": pd.Categorical.from_codes(kind, categories=EVENT_KINDS),
                "job": job_categorical(job, job_ids, unique=True),
                "site": pd.Categorical.from_codes(site, categories=site_names),
                "value": value,
                "detail": self._drain_detail(detail),
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )

    def _drain_detail(self, codes: np.ndarray) -> pd.Categorical:
        """The details of the drained `codes` as a categorical with its texts sorted (as
        `pd.Categorical` of the texts themselves orders them)."""
        texts = list(self._detail_code)
        order = sorted(range(len(texts)), key=texts.__getitem__)
        recode = np.empty(len(texts), dtype=np.int32)
        recode[order] = np.arange(len(texts), dtype=np.int32)
        self._detail_code = {}
        return pd.Categorical.from_codes(
            recode[codes], categories=pd.Index([texts[i] for i in order])
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

    def load_levels(
        self, site: int, t_s: np.ndarray, it_w: np.ndarray, facility_w: np.ndarray, busy: np.ndarray
    ) -> None:
        """Replace `site`'s rows (a one-site log's only) by the levels after each change at
        ascending times `t_s` (several at one time allowed): one row per instant, as
        `record` in time order makes them (a change within `INSTANT_S` of the one before
        joins its row)."""
        assert all(s == site for s in self.site)
        t_s = np.asarray(t_s, dtype=np.float64)
        first = np.ones(t_s.size, dtype=bool)
        first[1:] = np.diff(t_s) >= INSTANT_S
        rows = np.flatnonzero(first)
        last = np.append(rows[1:], t_s.size) - 1
        for name, column, code in (
            ("time_s", t_s[rows], "d"),
            ("it_w", np.asarray(it_w, dtype=np.float64)[last], "d"),
            ("facility_w", np.asarray(facility_w, dtype=np.float64)[last], "d"),
            ("busy_gpus", np.asarray(busy, dtype=np.int32)[last], "i"),
            ("site", np.full(rows.size, site, dtype=np.int16), "h"),
        ):
            setattr(self, name, array(code, column.tobytes()))
        self._last_row[site] = rows.size - 1
        self._last_s[site] = float(t_s[-1])

    def drain_frame(self, site_names: list[str]) -> pd.DataFrame:
        """The log as a table in its canonical order (`in_instants`: by instant, then site),
        emptying the log: the table's columns are the log's, sorted in place
        (`sort_in_instants`)."""
        self._last_row = [-1] * len(self._last_row)
        self._last_s = [-math.inf] * len(self._last_s)
        time_s, site, it_w, facility_w, busy_gpus = (
            _take(self, name) for name in ("time_s", "site", "it_w", "facility_w", "busy_gpus")
        )
        sort_in_instants(time_s, (site,), (site, it_w, facility_w, busy_gpus))
        return pd.DataFrame(
            {
                "time_s": time_s,
                "site": pd.Categorical.from_codes(site, categories=site_names),
                "it_w": it_w,
                "facility_w": facility_w,
                "busy_gpus": busy_gpus.astype(np.int64),
            },
            copy=False,  # the drained columns as they are, not a consolidated copy
        )


def instant_starts(times_s: np.ndarray) -> np.ndarray:
    """Which of the increasing `times_s` open an instant (are `INSTANT_S` or more after the time
    before them; the first always does, unless NaN). As `np.diff(times_s, prepend=-np.inf) >=
    INSTANT_S`, without its copy of the times."""
    new = np.empty(len(times_s), dtype=bool)
    np.greater_equal(times_s[:1] + np.inf, INSTANT_S, out=new[:1])  # t - (-inf), as diff does
    np.greater_equal(np.subtract(times_s[1:], times_s[:-1]), INSTANT_S, out=new[1:])
    return new


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


def sort_in_instants(
    times_s: np.ndarray, keys: tuple[np.ndarray, ...], columns: tuple[np.ndarray, ...]
) -> None:
    """Puts a log's rows in their canonical order (`in_instants`) in place: every one of
    `columns` (the log's columns, `keys` among them or made from them) reordered, and each
    of `times_s` replaced by its instant's time, s.

    A log whose times never decrease (as an engine logs them: at its clock) is in time
    order already; then only the instants whose rows are out of `keys` order are sorted,
    a few short runs, not the whole log with an int64 index per row and step. A log whose
    times decrease somewhere is sorted whole by `in_instants`."""
    n = len(times_s)
    if not np.all(times_s[1:] >= times_s[:-1]):  # (NaN times too)
        order, instant_s = in_instants(times_s, *keys)
        times_s[:] = instant_s
        del instant_s
        for column in columns:
            column[:] = column[order]
        return
    new = instant_starts(times_s)
    starts = np.flatnonzero(new)
    # row i + 1 comes before row i: same instant and less on the keys (the first deciding)
    before = np.zeros(max(n - 1, 0), dtype=bool)
    tied = ~new[1:]
    for key in keys:
        before |= tied & (key[1:] < key[:-1])
        tied &= key[1:] == key[:-1]
    del tied
    # each row's instant, counted from 1 (int32: 4 bytes a row, where it fits)
    instant = np.cumsum(new, dtype=np.int32) if n < 2**31 else np.cumsum(new, dtype=np.int64)
    del new
    instant -= 1
    np.take(times_s[starts], instant, out=times_s)
    del instant
    unsorted = np.unique(np.searchsorted(starts, np.flatnonzero(before) + 1, side="right") - 1)
    del before
    if len(unsorted) == 0:
        return
    ends = np.append(starts, n)[unsorted + 1]
    begins = starts[unsorted]
    del starts
    lengths = ends - begins
    instant = np.repeat(np.arange(len(unsorted)), lengths)
    rows = np.arange(len(instant)) + np.repeat(begins - (np.cumsum(lengths) - lengths), lengths)
    within = np.lexsort((rows, *(key[rows] for key in reversed(keys)), instant))
    taken = rows[within]
    for column in columns:
        column[rows] = column[taken]


def job_categorical(
    codes: np.ndarray,
    job_ids: np.ndarray | pd.Series | pd.api.extensions.ExtensionArray,
    unique: bool = False,
) -> pd.Categorical:
    """Job indices (-1: none) as a categorical of the job ids, without the lookup table that
    checking the ids are unique leaves cached on them: for text categories pandas keeps a
    Python string per id and a hash table (about 60 MB at a million jobs), which nothing
    reads afterwards. `unique`: the ids are known to be unique (a `JobTable`'s, which checks
    it), so pandas' check is skipped and its hash table (about 90 MB at a million jobs while
    it lasts) never built; else pandas checks (ValueError for a repeated id). The
    categories are unnamed (a Series' name is not taken over)."""
    categories = pd.Index(job_ids).rename(None)
    # pandas' private constructor that skips the check; if a release drops it, the check runs
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None) if unique else None
    if fast is None:
        column = pd.Categorical.from_codes(codes, categories=categories)
    else:
        column = pd.Categorical.from_codes(codes, dtype=fast(categories, ordered=False))
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
