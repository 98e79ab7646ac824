"""The iteration level's per-request records: the request level's (`_Requests`, read from
the source a chunk at a time) plus what an engine iteration schedule adds: the time of the
first token, the output tokens generated so far, the preemptions and the refusals.

Latencies, computed when a table is asked for (vLLM's benchmark definitions):
`ttft_s` = first token - arrival + `rtt_s[site]`, the first token coming at the end of the
iteration that computed the prompt's last chunk; `tpot_s` = (end - first token) /
(output tokens - 1), 0 for a one-token answer (it has no token after the first).
"""

from __future__ import annotations

from array import array

import numpy as np

from sim.models.llm_replica import ReplicaModel
from sim.serving.request_level.records import _Requests
from sim.serving.sources import RequestSource


class _IterRequests(_Requests):
    """The service's requests and their records (the replicas read and write the arrays)."""

    def __init__(self) -> None:
        super().__init__()
        self.first_s = array("d")
        """End of the iteration that produced the first token, s (NaN before)."""
        self.gen = array("q")
        """Output tokens generated, as of the request's last prefill or preemption."""
        self.preempted = array("i")
        """Times the request was preempted (its KV cache freed, recomputed later)."""
        self.refused = array("b")
        """1: refused at arrival, its context longer than the replica accepts (dropped)."""
        self.recomputed = array("q")
        """Tokens prefilled again after preemptions (work the preemptions cost)."""
        self.swapped = array("q")
        """Tokens of context whose KV waits in host memory (swap preemption; 0: none)."""

    def _extra(self) -> tuple[array, ...]:
        return (
            self.first_s,
            self.gen,
            self.preempted,
            self.refused,
            self.recomputed,
            self.swapped,
        )

    def fetch(self, source: RequestSource, horizon_s: float) -> None:
        super().fetch(source, horizon_s)
        m = len(self.arrival_s) - len(self.first_s)
        self.first_s.frombytes(np.full(m, np.nan).tobytes())
        self.gen.frombytes(np.zeros(m, np.int64).tobytes())
        self.preempted.frombytes(np.zeros(m, np.intc).tobytes())
        self.refused.frombytes(np.zeros(m, np.int8).tobytes())
        self.recomputed.frombytes(np.zeros(m, np.int64).tobytes())
        self.swapped.frombytes(np.zeros(m, np.int64).tobytes())

    def forget_from(self, t_s: float) -> None:
        first = self.base + self.k
        super().forget_from(t_s)
        for records in self._extra():
            del records[first:]

    def columns(
        self, lo: int, hi: int, models: list[ReplicaModel], rtt_s: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The request level's records (`_Requests.records`) with the iteration level's
        latencies and records (`models` unused: the latencies come from the schedule)."""
        rec = self.records(lo, hi)
        rec["first_token_s"] = self._col(self.first_s, np.float64, lo, hi)
        rec["preemptions"] = self._col(self.preempted, np.intc, lo, hi)
        rec["refused"] = self._col(self.refused, np.int8, lo, hi).astype(bool)
        rec["recomputed_tokens"] = self._col(self.recomputed, np.int64, lo, hi)
        return _with_latencies(rec, rtt_s)

    def live_columns(self, lo: int, hi: int, rtt_s: np.ndarray) -> dict[str, np.ndarray]:
        """What `_Statistics.last_step` reads of requests lo..hi-1 (arrivals, states,
        latencies): five columns, not `columns`' twelve (live statistics come every step)."""
        rec = {
            "arrival_s": self._col(self.arrival_s, np.float64, lo, hi),
            "output_tokens": self._col(self.output, np.int64, lo, hi),
            "site": self._col(self.site, np.intc, lo, hi),
            "end_s": self._col(self.end_s, np.float64, lo, hi),
            "state": self._col(self.state, np.int8, lo, hi),
            "first_token_s": self._col(self.first_s, np.float64, lo, hi),
        }
        return _with_latencies(rec, rtt_s)

    @staticmethod
    def _col(a: array, dtype: type, lo: int, hi: int) -> np.ndarray:
        return np.frombuffer(a, dtype, hi - lo, lo * a.itemsize).copy()


def _with_latencies(rec: dict[str, np.ndarray], rtt_s: np.ndarray) -> dict[str, np.ndarray]:
    """`rec` with `ttft_ms` and `tpot_ms` (module docstring) from its arrivals, sites, first
    tokens, ends and output tokens; `rtt_s` by site."""
    first = rec["first_token_s"]
    site_rtt_s = rtt_s[np.maximum(rec["site"], 0)]
    rec["ttft_ms"] = (first - rec["arrival_s"] + site_rtt_s) * 1e3
    after_first = np.maximum(rec["output_tokens"] - 1, 1)
    tpot = (rec["end_s"] - first) / after_first * 1e3
    rec["tpot_ms"] = np.where(rec["output_tokens"] > 1, tpot, np.where(np.isnan(tpot), np.nan, 0.0))
    return rec
