"""Function invocations from a generator calibrated on the published statistics of the
Azure Functions 2019 trace (Shahrad et al., "Serverless in the Wild: Characterizing and
Optimizing the Serverless Workload at a Large Cloud Provider", USENIX ATC 2020).
docs/functions.md gives each figure and where it comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["AzureFunctions2019", "generate_invocations"]

_HOURLY_PER_DAY = 24.0
_MINUTELY_PER_DAY = 1440.0


@dataclass(frozen=True)
class AzureFunctions2019:
    """The generator's calibration, each default a published figure of Shahrad et al.

    share_at_most_hourly: share of functions invoked at most once an hour on average
    (45%, Fig. 5a). share_at_most_minutely: at most once a minute (81%, Fig. 5a). The
    daily rate is log-normal through these two quantiles. timer_share: share of
    functions with a timer trigger, periodic (CV 0) (16%, Table 2 / Fig. 2).
    share_cv_above_1: share of functions whose inter-arrival CV exceeds 1 (40%, Fig. 6).
    cv_max: the largest CV drawn for those (log-uniform on (1, cv_max]): a modelling
    choice, not a published figure. exec_log_mu, exec_log_sigma: log-normal of a
    function's mean execution time in seconds (mu -0.38, sigma 2.36, Fig. 7).
    memory_burr_c, memory_burr_k, memory_burr_lambda_mb: Burr XII of the memory an
    application allocates, MB (c 11.652, k 0.221, lambda 107.083, Fig. 8).
    """

    share_at_most_hourly: float = 0.45
    share_at_most_minutely: float = 0.81
    timer_share: float = 0.16
    share_cv_above_1: float = 0.40
    cv_max: float = 4.0
    exec_log_mu: float = -0.38
    exec_log_sigma: float = 2.36
    memory_burr_c: float = 11.652
    memory_burr_k: float = 0.221
    memory_burr_lambda_mb: float = 107.083

    def __post_init__(self) -> None:
        if not 0 < self.share_at_most_hourly < self.share_at_most_minutely < 1:
            raise ValueError(
                "need 0 < share_at_most_hourly < share_at_most_minutely < 1, got "
                f"{self.share_at_most_hourly} and {self.share_at_most_minutely}"
            )
        if (
            min(self.timer_share, self.share_cv_above_1) < 0
            or self.timer_share + self.share_cv_above_1 > 1
        ):
            raise ValueError(
                "timer_share and share_cv_above_1 must be >= 0 and sum to at most 1, got "
                f"{self.timer_share} and {self.share_cv_above_1}"
            )
        if not self.cv_max > 1:
            raise ValueError(f"cv_max must be > 1, got {self.cv_max}")

    def rate_log10_mu_sigma(self) -> tuple[float, float]:
        """(mu, sigma) of log10 of the daily invocation rate: the normal through the two
        quantiles log10(24) at `share_at_most_hourly` and log10(1440) at
        `share_at_most_minutely`."""
        from scipy.special import ndtri  # here: importing sim stays free of scipy

        z_h = float(ndtri(self.share_at_most_hourly))
        z_m = float(ndtri(self.share_at_most_minutely))
        lo, hi = math.log10(_HOURLY_PER_DAY), math.log10(_MINUTELY_PER_DAY)
        sigma = (hi - lo) / (z_m - z_h)
        return lo - z_h * sigma, sigma


_BURN_IN_GAPS = 16
"""Gaps each renewal process runs before time 0, so that time 0 is no arrival."""


def generate_invocations(
    n_functions: int,
    horizon_s: float,
    rng: np.random.Generator,
    calibration: AzureFunctions2019 | None = None,
    max_rate_per_day: float | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The functions and their invocations over [0, horizon_s), drawn from `rng` only;
    with `max_rate_per_day`, none of the functions whose mean rate is above it (invocations
    a day; the rates reach tens of millions a day, too many rows to hold for a week).

    Returns (functions, invocations). `functions`, one row per function: function_id
    (0..n-1), rate_per_day (mean invocations a day), cv (of its inter-arrival times),
    exec_s (its execution time on the reference hardware, seconds), memory_mb.
    `invocations`, sorted by arrival (ties by function): function_id, arrival_s, exec_s,
    memory_mb.

    Draws, in this order: per function (vectorised over n) the log10 rate (normal), the
    CV class (uniform), the CV of a bursty function (uniform, log scale), the execution
    time (log-normal), the memory (Burr XII by inversion); then per function in id order
    (skipping those above `max_rate_per_day`, which stay in `functions`) its gaps: gamma
    with shape 1/CV^2 and mean 1/rate (CV 1 is the Poisson process); a timer (CV 0) is
    periodic with a uniform phase. Each process runs 16 gaps before 0. A function's
    execution time is the same at every invocation.
    """
    cal = calibration or AzureFunctions2019()
    if n_functions < 0:
        raise ValueError(f"n_functions must be >= 0, got {n_functions}")
    if not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be finite and > 0, got {horizon_s}")
    if max_rate_per_day is not None and not max_rate_per_day > 0:
        raise ValueError(f"max_rate_per_day must be > 0, got {max_rate_per_day}")
    mu, sigma = cal.rate_log10_mu_sigma()
    rate_per_day = 10.0 ** rng.normal(mu, sigma, n_functions)
    u_class = rng.random(n_functions)
    bursty_cv = np.exp(rng.random(n_functions) * math.log(cal.cv_max))
    cv = np.where(
        u_class < cal.timer_share,
        0.0,
        np.where(u_class < cal.timer_share + cal.share_cv_above_1, bursty_cv, 1.0),
    )
    exec_s = rng.lognormal(cal.exec_log_mu, cal.exec_log_sigma, n_functions)
    u_mem = rng.random(n_functions)
    memory_mb = cal.memory_burr_lambda_mb * ((1.0 - u_mem) ** (-1.0 / cal.memory_burr_k) - 1.0) ** (
        1.0 / cal.memory_burr_c
    )
    functions = pd.DataFrame(
        {
            "function_id": np.arange(n_functions, dtype=np.int64),
            "rate_per_day": rate_per_day,
            "cv": cv,
            "exec_s": exec_s,
            "memory_mb": memory_mb,
        }
    )
    kept = rate_per_day <= (np.inf if max_rate_per_day is None else max_rate_per_day)
    arrivals = [
        _renewal_arrivals(86400.0 / rate_per_day[i], cv[i], horizon_s, rng)
        if kept[i]
        else np.empty(0)
        for i in range(n_functions)
    ]
    counts = np.array([len(a) for a in arrivals], dtype=np.int64)
    fid = np.repeat(np.arange(n_functions, dtype=np.int64), counts)
    arrival_s = np.concatenate(arrivals) if arrivals else np.empty(0)
    order = np.lexsort((fid, arrival_s))
    invocations = pd.DataFrame(
        {
            "function_id": fid[order],
            "arrival_s": arrival_s[order],
            "exec_s": np.repeat(exec_s, counts)[order],
            "memory_mb": np.repeat(memory_mb, counts)[order],
        }
    )
    return functions, invocations


def _renewal_arrivals(
    mean_gap_s: float, cv: float, horizon_s: float, rng: np.random.Generator
) -> np.ndarray:
    """Arrivals in [0, horizon_s) of a renewal process with gaps of mean `mean_gap_s` and
    coefficient of variation `cv` (periodic with a uniform phase when 0), started
    `_BURN_IN_GAPS` gaps before 0."""
    if cv == 0:
        first = rng.random() * mean_gap_s
        return np.arange(first, horizon_s, mean_gap_s) if first < horizon_s else np.empty(0)
    shape = 1.0 / (cv * cv)
    scale = mean_gap_s / shape
    t0 = -float(rng.gamma(shape, scale, _BURN_IN_GAPS).sum())
    parts: list[np.ndarray] = []
    block = int(min(horizon_s / mean_gap_s * 1.2 + 16.0, 1e7))
    while True:
        times = t0 + np.cumsum(rng.gamma(shape, scale, block))
        parts.append(times[(times >= 0.0) & (times < horizon_s)])
        if times[-1] >= horizon_s:
            return np.concatenate(parts)
        t0 = float(times[-1])
