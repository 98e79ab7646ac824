"""The request level's statistics from its per-request records (`_Requests.columns`): the
step table, the run's totals, the requests served per step and site, the last completed
step as a policy sees it and the request table; latencies in ms.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.config.services import SloConfig
from sim.serving.request_level.records import (
    _CATEGORY_OF_CODE,
    _DROPPED,
    _SERVED,
    _UNFINISHED,
    STATES,
)
from sim.serving.service_sim import STEP_COLUMNS, LiveStats


class _Statistics:
    """Tables and totals of requests' records (`rec`, the columns of
    `_Requests.columns`) against the SLO, a request belonging to the step (`step_s`
    long, `n_steps` of them) it arrived in."""

    def __init__(self, slo: SloConfig, step_s: float, n_steps: int):
        self.slo = slo
        self.step_s = step_s
        self.n_steps = n_steps

    def met(self, ttft_ms: np.ndarray, tpot_ms: np.ndarray) -> np.ndarray:
        """Which requests met the SLO (both latencies within target)."""
        return (ttft_ms <= self.slo.ttft_ms) & (tpot_ms <= self.slo.tpot_ms)

    def last_step(self, rec: dict[str, np.ndarray], queued: float, in_flight: float) -> LiveStats:
        """`LiveStats` of the requests of the last completed step as far as known now
        (`rec`): the time to first token of those admitted, the time per output token of
        those served, the SLO attainment over those served or dropped (NaN with none);
        `queued` and `in_flight` now."""
        served = rec["state"] == _SERVED
        decided = served | (rec["state"] == _DROPPED)
        ttft_ms, tpot_ms = rec["ttft_ms"], rec["tpot_ms"]
        admitted = np.isfinite(ttft_ms)
        met = int(np.count_nonzero(self.met(ttft_ms[served], tpot_ms[served])))
        n_decided = int(np.count_nonzero(decided))
        return LiveStats(
            rate_per_s=len(rec["arrival_s"]) / self.step_s,
            queued=queued,
            in_flight=in_flight,
            ttft_p99_ms=_p99(ttft_ms[admitted]),
            tpot_p99_ms=_p99(tpot_ms[served]),
            slo_attainment=met / n_decided if n_decided else math.nan,
            dropped=float(np.count_nonzero(rec["state"] == _DROPPED)),
        )

    def step_table(self, rec: dict[str, np.ndarray]) -> pd.DataFrame:
        """One row per step, `STEP_COLUMNS`."""
        n = self.n_steps
        step = np.clip(np.floor(rec["arrival_s"] / self.step_s), 0, n - 1).astype(np.int64)
        served = rec["state"] == _SERVED
        s_step = step[served]
        ttft, tpot = rec["ttft_ms"][served], rec["tpot_ms"][served]
        met = self.met(ttft, tpot)
        ttft_p = _grouped_percentiles(s_step, ttft, n, (50.0, 99.0))
        tpot_p = _grouped_percentiles(s_step, tpot, n, (50.0, 99.0))
        columns = (
            np.arange(n),
            np.bincount(step, minlength=n),
            np.bincount(s_step, minlength=n),
            np.bincount(step[rec["state"] == _DROPPED], minlength=n),
            np.bincount(s_step, weights=rec["output_tokens"][served], minlength=n).astype(np.int64),
            ttft_p[0],
            ttft_p[1],
            tpot_p[0],
            tpot_p[1],
            np.bincount(s_step[met], minlength=n),
        )
        return pd.DataFrame(dict(zip(STEP_COLUMNS, columns, strict=True)))

    def summary(self, rec: dict[str, np.ndarray]) -> dict[str, float]:
        """The run's totals (`ServiceSim.summary`)."""
        served = rec["state"] == _SERVED
        ttft, tpot = rec["ttft_ms"][served], rec["tpot_ms"][served]
        return {
            "requests_total": float(len(rec["arrival_s"])),
            "requests_served": float(np.count_nonzero(served)),
            "requests_dropped": float(np.count_nonzero(rec["state"] == _DROPPED)),
            "requests_unfinished": float(np.count_nonzero(rec["state"] == _UNFINISHED)),
            "slo_met": float(np.count_nonzero(self.met(ttft, tpot))),
            "tokens_generated": float(rec["output_tokens"][served].sum()),
            "ttft_p99_ms": _p99(ttft),
            "tpot_p99_ms": _p99(tpot),
        }

    def served_by_site(self, rec: dict[str, np.ndarray], sites: int) -> np.ndarray:
        """float64[n_steps, sites]: requests served per step (of arrival) and site."""
        served = rec["state"] == _SERVED
        step = np.clip(np.floor(rec["arrival_s"][served] / self.step_s), 0, self.n_steps - 1)
        flat = step.astype(np.int64) * sites + rec["site"][served]
        counts = np.bincount(flat, minlength=self.n_steps * sites)
        return counts.reshape(self.n_steps, sites).astype(float)


def _request_table(name: str, rec: dict[str, np.ndarray]) -> pd.DataFrame:
    """`RequestLevel.request_table` of the records `rec` of service `name`."""
    m = len(rec["arrival_s"])
    return pd.DataFrame(
        {
            "service": pd.Categorical.from_codes(np.zeros(m, np.int8), [name]),
            "arrival_s": rec["arrival_s"],
            "site": rec["site"],
            "input_tokens": rec["input_tokens"],
            "output_tokens": rec["output_tokens"],
            "state": pd.Categorical.from_codes(_CATEGORY_OF_CODE[rec["state"]], STATES),
            "ttft_ms": rec["ttft_ms"],
            "tpot_ms": rec["tpot_ms"],
            "end_s": rec["end_s"],
        }
    )


def _p99(x: np.ndarray) -> float:
    """99th percentile (linear interpolation, as `np.percentile`), NaN when empty."""
    if not len(x):
        return math.nan
    xs = np.sort(x)
    h = (len(xs) - 1) * 0.99
    lo = int(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def _grouped_percentiles(
    group: np.ndarray, x: np.ndarray, n_groups: int, qs: tuple[float, ...]
) -> list[np.ndarray]:
    """Percentiles `qs` of `x` within each group 0..n_groups-1 (linear interpolation, as
    `np.percentile`; NaN for an empty group)."""
    # Sorted by group then value; the NaN at the end is what an empty group reads.
    xs = np.append(x[np.lexsort((x, group))], np.nan)
    counts = np.bincount(group, minlength=n_groups)
    starts = np.where(counts > 0, np.cumsum(counts) - counts, len(x))
    last = np.maximum(counts - 1, 0)
    out = []
    for q in qs:
        h = last * (q / 100.0)
        lo = np.floor(h).astype(np.int64)
        a, b = xs[starts + lo], xs[starts + np.minimum(lo + 1, last)]
        out.append(a + (h - lo) * (b - a))
    return out
