"""The request level's per-request records: the requests read from the source a chunk at
a time, each with its records in typed arrays (`array.array`, one element per request,
index = arrival order); times in s.

The times to first token and per output token are computed from them when a table is
asked for (`ttft_s` = admission - arrival + the admitting model's
`prefill_s(input_tokens)` + `rtt_s[site]`; `tpot_s` = (end - admission) / output tokens).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

import numpy as np

from sim.models.llm_replica import ReplicaModel
from sim.serving.sources import RequestSource

STATES = ("served", "dropped", "unfinished")
"""Categories of `RequestLevel.request_table`'s `state`."""

_UNFINISHED, _SERVED, _DROPPED = 0, 1, 2
"""Codes of the per-request state array (0 also marks a request still in progress)."""
_CATEGORY_OF_CODE = np.array([2, 0, 1], dtype=np.int8)
"""State code -> index into `STATES`."""

_CHUNK_S = 3600.0
"""Arrivals are read from the source this many seconds at a time."""


class _Requests:
    """The service's requests so far, read from the source `_CHUNK_S` at a time (the event
    loop reads and writes the arrays and the chunk directly)."""

    def __init__(self) -> None:
        self.arrival_s = array("d")
        self.input = array("q")
        """Input tokens."""
        self.output = array("q")
        """Output tokens."""
        self.site = array("i")
        """Site the request was sent to, -1 if none."""
        self.admit_s = array("d")
        self.end_s = array("d")
        self.state = array("b")
        self.mid = array("i")
        """Index of the model that admitted it (`_Fleet.models`), -1 if not admitted."""
        # The chunk of arrivals being read.
        self.fetched_s = 0.0
        """Time up to which arrivals have been read, s."""
        self.chunk_t: list[float] = []
        """Arrival times of the chunk, s."""
        self.chunk_out: list[int] = []
        """Output tokens of the chunk's requests."""
        self.k = 0
        """Next arrival of the chunk."""
        self.base = 0
        """Index of the chunk's first request."""
        self.n = 0
        """Requests arrived so far."""

    def fetch(self, source: RequestSource, horizon_s: float) -> None:
        """Read the next chunk of arrivals (up to `horizon_s`) and open their records."""
        t0 = self.fetched_s
        self.fetched_s = min(t0 + _CHUNK_S, horizon_s)
        tab = source.requests_between(t0, self.fetched_s)
        m = len(tab.arrival_s)
        self.base = len(self.arrival_s)
        self.arrival_s.frombytes(np.ascontiguousarray(tab.arrival_s, np.float64).tobytes())
        self.input.frombytes(np.ascontiguousarray(tab.input_tokens, np.int64).tobytes())
        self.output.frombytes(np.ascontiguousarray(tab.output_tokens, np.int64).tobytes())
        minus_one = np.full(m, -1, np.intc).tobytes()
        nan = np.full(m, np.nan).tobytes()
        self.site.frombytes(minus_one)
        self.mid.frombytes(minus_one)
        self.admit_s.frombytes(nan)
        self.end_s.frombytes(nan)
        self.state.frombytes(np.full(m, _UNFINISHED, np.int8).tobytes())
        self.chunk_t = tab.arrival_s.tolist()
        self.chunk_out = tab.output_tokens.tolist()
        self.k = 0

    def forget_from(self, t_s: float) -> None:
        """Forget the arrivals read ahead (those not yet arrived at `t_s`, the time served
        up to) and their records, to read them again from `t_s` on."""
        first = self.base + self.k
        for records in (
            self.arrival_s,
            self.input,
            self.output,
            self.site,
            self.admit_s,
            self.end_s,
            self.state,
            self.mid,
        ):
            del records[first:]
        self.chunk_t, self.chunk_out = [], []
        self.k, self.base = 0, first
        self.fetched_s = min(self.fetched_s, t_s)

    def between(self, lo_s: float, hi_s: float) -> tuple[int, int]:
        """Indices lo..hi-1 of the requests arrived in [lo_s, hi_s)."""
        lo = bisect_left(self.arrival_s, lo_s, 0, self.n)
        return lo, bisect_left(self.arrival_s, hi_s, lo, self.n)

    def columns(
        self, lo: int, hi: int, models: list[ReplicaModel], rtt_s: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Copies of the records of requests lo..hi-1 and their latencies, ms (`models` by
        the records' model index, `rtt_s` by site)."""
        rec = self.records(lo, hi)
        prefill_s = np.full(hi - lo, np.nan)
        for mi in np.unique(rec["mid"][rec["mid"] >= 0]):
            sel = rec["mid"] == mi
            prefill_s[sel] = models[mi].prefill_s(rec["input_tokens"][sel])
        site_rtt_s = rtt_s[np.maximum(rec["site"], 0)]
        rec["ttft_ms"] = (rec["admit_s"] - rec["arrival_s"] + prefill_s + site_rtt_s) * 1e3
        rec["tpot_ms"] = (rec["end_s"] - rec["admit_s"]) / rec["output_tokens"] * 1e3
        return rec

    def records(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Copies of the records of requests lo..hi-1 (no latencies)."""

        def col(a: array, dtype: type) -> np.ndarray:
            return np.frombuffer(a, dtype, hi - lo, lo * a.itemsize).copy()

        return {
            "arrival_s": col(self.arrival_s, np.float64),
            "input_tokens": col(self.input, np.int64),
            "output_tokens": col(self.output, np.int64),
            "site": col(self.site, np.intc),
            "admit_s": col(self.admit_s, np.float64),
            "end_s": col(self.end_s, np.float64),
            "state": col(self.state, np.int8),
            "mid": col(self.mid, np.intc),
        }
