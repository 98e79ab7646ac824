"""Compiled pricing of a job's options on every site at once (`sim.api.kernel`: numba).

`price_options` does, for all (site, GPU model) options of one job in one call, what
`Outlook.options` did per option with `policies.kit.windows`: the forecast's prefix sums
(`prefix_integrals`), the window mean of a run that starts now (`WindowMean`), or the best
start before a latest one and its mean (`best_window_start`), and the option's score. The
forecasts of the sites come as one block (`ForecastBlock`: flat arrays and offsets). Every
operation is the one `windows` does, in the same order, on the same float64 values (numba
compiles without fast-math), so the compiled kernel, its Python reference (`.py_func`) and
`windows`' functions give the same bits (tests/policies/test_option_kernels.py).
"""

from __future__ import annotations

import math

import numpy as np

from policies.kit.windows import REL_TIE
from sim.api import helper, kernel

__all__ = ["price_options"]


@helper
def _integral_to(t: np.ndarray, v: np.ndarray, cum: np.ndarray, x: float) -> float:
    """The forecast's integral from t[0] to x (>= t[0]), g/kWh x s: `WindowMean`'s."""
    i = np.searchsorted(t, x, side="right") - 1
    return cum[i] + v[i] * (x - t[i])


@helper
def _prefix(t: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`prefix_integrals(t, v)`: one sequential sum, as `np.cumsum` adds."""
    cum = np.empty(t.size)
    if t.size:
        cum[0] = 0.0
    acc = 0.0
    for k in range(t.size - 1):
        term = v[k] * (t[k + 1] - t[k])
        acc = term if k == 0 else acc + term  # np.cumsum starts from its first term
        cum[k + 1] = acc
    return cum


@helper
def _mean(t: np.ndarray, v: np.ndarray, cum: np.ndarray, start_s: float, length_s: float) -> float:
    """`WindowMean(t, v)(start_s, length_s)`, g/kWh."""
    if length_s <= 0.0:
        return v[np.searchsorted(t, start_s, side="right") - 1]
    return (
        _integral_to(t, v, cum, start_s + length_s) - _integral_to(t, v, cum, start_s)
    ) / length_s


@helper
def _best_start(
    t: np.ndarray,
    v: np.ndarray,
    cum: np.ndarray,
    earliest_s: float,
    latest_s: float,
    length_s: float,
) -> tuple[float, float]:
    """`best_window_start(t, v, earliest_s, latest_s, length_s)`: (start s, mean g/kWh)."""
    n = t.size
    cand = np.empty(2 + 2 * n)
    cand[0] = earliest_s
    cand[1] = max(earliest_s, latest_s)
    m = 2
    for k in range(n):  # `window_candidates`: breakpoints met by the window's start or end
        a = t[k]
        if earliest_s < a < latest_s:
            cand[m] = a
            m += 1
    for k in range(n):
        a = t[k] - length_s
        if earliest_s < a < latest_s:
            cand[m] = a
            m += 1
    cand = np.sort(cand[:m])
    starts = np.empty(m)
    means = np.empty(m)
    best = math.inf
    count = 0
    for k in range(m):  # np.unique: one of each value
        if k == 0 or cand[k] != cand[k - 1]:
            starts[count] = cand[k]
            means[count] = _mean(t, v, cum, cand[k], length_s)
            best = min(best, means[count])
            count += 1
    cut = best + REL_TIE * max(1.0, abs(best))
    k = 0
    while means[k] > cut:  # `_first_within`: the earliest within the tie tolerance
        k += 1
    return starts[k], means[k]


@kernel
def price_options(
    times: np.ndarray,
    values: np.ndarray,
    offsets: np.ndarray,
    site: np.ndarray,
    move_s: np.ndarray,
    runtime_s: np.ndarray,
    run_kwh: np.ndarray,
    fixed: np.ndarray,
    now_s: float,
    shift_until_s: float,
    min_defer_s: float,
    per_score: float,
) -> np.ndarray:
    """For each option k (a GPU pool of site `site[k]`, whose forecast is
    times/values[offsets[s]:offsets[s + 1]], from now): (start s, end s, score) of running
    the job there, as `Outlook.options` prices it. The run begins once the data is there
    (now + move_s[k]) and lasts runtime_s[k]; with `shift_until_s` (NaN: none) and at least
    `min_defer_s` of room before its latest start, shift_until_s - runtime_s[k], it begins
    at the best start instead (`best_window_start`). score = run_kwh x mean / per_score +
    fixed (the transfer's and the held GPUs' score)."""
    out = np.empty((site.size, 3))
    prefix_of = -1
    cum = np.empty(0)
    for k in range(site.size):
        s = site[k]
        t = times[offsets[s] : offsets[s + 1]]
        v = values[offsets[s] : offsets[s + 1]]
        if s != prefix_of:  # options of one site come together
            cum = _prefix(t, v)
            prefix_of = s
        length_s = runtime_s[k]
        run_s = now_s + move_s[k]
        latest_run_s = -math.inf if math.isnan(shift_until_s) else shift_until_s - length_s
        if not math.isnan(shift_until_s) and latest_run_s - run_s >= min_defer_s:
            run_s, mean = _best_start(t, v, cum, run_s, latest_run_s, length_s)
        else:
            mean = _mean(t, v, cum, run_s, length_s)
        out[k, 0] = run_s - move_s[k]
        out[k, 1] = run_s + length_s
        out[k, 2] = run_kwh[k] * mean / per_score + fixed[k]
    return out
