"""Synthetic workloads: (non-homogeneous) Poisson arrivals with i.i.d. attributes, drawn from
one generator in a fixed order, so the table depends only on (config, site names, horizon,
scenario start, generator state). docs/workloads.md describes the model and its sources."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pandas as pd

from sim.config.workload import DurationDist, SyntheticWorkload
from sim.util.columns import same_value_column
from sim.workload.table import JobTable


def generate_synthetic(
    cfg: SyntheticWorkload,
    site_names: Sequence[str],
    horizon_s: float,
    rng: np.random.Generator,
    *,
    start: datetime | None = None,
) -> JobTable:
    """Poisson arrivals over [0, horizon_s) with i.i.d. job attributes drawn from `rng`.

    `horizon_s`: length of the scenario, seconds. `start`: the scenario start (a datetime
    with a UTC offset); required only when `cfg` has a daily or weekly cycle, which follows
    local time in `cfg.timezone`. The result depends only on the arguments (and the
    generator's state), never on global random state. Draws, in this order, each one
    vectorised over the n jobs:

    1. arrivals: exponential gaps of mean 1/rate in *operational time* (rate =
       `cfg.mean_arrival_rate_per_h()`), drawn in blocks until Lambda(horizon) (or
       `max_jobs` arrivals) is reached, then mapped to real time by t = Lambda^-1(s)
       (time rescaling), Lambda(t) = integral of `rate_factor` from 0 to t. Without cycles
       Lambda is the identity: the plain Poisson process;
    2. duration, hours, the wall time on `gpus` reference GPUs: exponential(`mean_h`),
       lognormal(log(`median_h`), `sigma`), or for `loguniform_mixture` two uniforms per
       job (component, then position in log space); `work_gpu_h = duration_h x gpus`;
    3. gpus: categorical over the `gpus` mix (GPU counts in increasing order);
    4. deferrable: uniform < `deferrable_fraction`;
    5. slack, hours: uniform(`slack_h`); deadline = submit + duration + slack for
       deferrable jobs (it may lie beyond the horizon), NaN for the others;
    6. interruptible: uniform < `interruptible_fraction`;
    7. origin site: categorical over `origin_sites` weights (default: uniform).

    Common random numbers: steps 2 to 7 consume the same amount of randomness whatever
    their parameters within one duration `dist` kind, so sweeping e.g. `deferrable_fraction`,
    the GPU mix, `median_h` or the origin weights leaves the other attributes of every job
    unchanged. Where it cannot hold: the number of jobs n depends on the arrival
    parameters (rate, `offered_load`, and the cycles through Lambda(horizon)), and a
    different n shifts every later draw. Sweeping `diurnal_amplitude`, `peak_hour` or
    `weekly_amplitude` keeps n and every job's attributes (only submit times move) when
    Lambda(horizon) = horizon, i.e. the horizon is whole days (daily cycle) and whole weeks
    (weekly cycle) in a zone with a whole-hour UTC offset. Changing the duration `dist`
    kind changes the draws of step 2 and thus every later step.
    `profile`, `checkpoint_gb` and `data_gb` are the configured constants; job ids are
    "j0", "j1", ... in submit order.
    """
    if not site_names:
        raise ValueError("generate_synthetic needs at least one site name")
    if not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be finite and > 0, got {horizon_s}")

    rate_per_s = cfg.mean_arrival_rate_per_h() / 3600.0
    if cfg.diurnal_amplitude == 0 and cfg.weekly_amplitude == 0:
        submit_s = _poisson_arrivals(rate_per_s, horizon_s, cfg.max_jobs, rng)
    else:
        if start is None:
            raise ValueError(
                "a synthetic workload with a daily or weekly cycle needs the scenario start "
                "(generate_synthetic(..., start=scenario.start))"
            )
        edges_s, cum_s = _operational_time(cfg, start, horizon_s)
        s = _poisson_arrivals(rate_per_s, float(cum_s[-1]), cfg.max_jobs, rng)
        submit_s = np.interp(s, cum_s, edges_s)
        # interp of increasing s is non-decreasing; keep it strictly inside the horizon
        submit_s = np.minimum(submit_s, np.nextafter(horizon_s, 0.0))
    n = len(submit_s)

    duration_h = draw_durations(cfg.duration, n, rng)

    counts = np.array(sorted(cfg.gpus), dtype=np.int64)
    gpus = counts[rng.choice(len(counts), size=n, p=_normalised([cfg.gpus[c] for c in counts]))]

    deferrable = rng.random(n) < cfg.deferrable_fraction
    slack_h = rng.uniform(cfg.slack_h[0], cfg.slack_h[1], n)
    deadline_s = np.where(deferrable, submit_s + (duration_h + slack_h) * 3600.0, np.nan)

    interruptible = rng.random(n) < cfg.interruptible_fraction

    origin = rng.choice(len(site_names), size=n, p=_origin_weights(cfg, site_names))

    return JobTable(
        job_id=_job_ids(n),
        submit_s=submit_s,
        gpus=gpus,
        work_gpu_h=duration_h * gpus,
        profile=same_value_column(n, cfg.profile, object),
        deadline_s=deadline_s,
        interruptible=interruptible,
        checkpoint_gb=same_value_column(n, float(cfg.checkpoint_gb)),
        data_gb=same_value_column(n, float(cfg.data_gb)),
        origin_site=origin.astype(np.int64),
    )


def _job_ids(n: int) -> np.ndarray:
    """ "j0" .. "j{n-1}" as a `StringDType` column, made from the numbers without a Python
    string per job (16 bytes a job, not 61)."""
    text = np.dtypes.StringDType()
    return np.strings.add(np.array("j", dtype=text), np.arange(n).astype(text))


def draw_durations(dist: DurationDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """n i.i.d. durations, hours (> 0), of `dist` (step 2 of `generate_synthetic`)."""
    if dist.dist == "exponential":
        assert dist.mean_h is not None
        duration_h = rng.exponential(dist.mean_h, n)
    elif dist.dist == "lognormal":
        assert dist.median_h is not None
        duration_h = rng.lognormal(math.log(dist.median_h), dist.sigma, n)
    else:
        assert dist.components is not None
        comp = np.asarray(dist.components, dtype=np.float64)
        cum = np.cumsum(comp[:, 0])
        cum /= cum[-1]
        which = np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(comp) - 1)
        log_lo, log_hi = np.log(comp[which, 1]), np.log(comp[which, 2])
        duration_h = np.exp(log_lo + rng.random(n) * (log_hi - log_lo))
    # a zero (probability ~2^-53) or underflowed draw would make a job of no work
    return np.maximum(duration_h, np.finfo(np.float64).tiny)


def rate_factor(cfg: SyntheticWorkload, local_hour: np.ndarray, weekday: np.ndarray) -> np.ndarray:
    """Multiplier of the mean arrival rate at local hour (float, 0..24) and weekday (0 = Mon).

    f = (1 + a_d cos(2 pi (hour - peak_hour) / 24)) x w(weekday), with w = k on Monday to
    Friday and k (1 - a_w) on Saturday and Sunday, k = 7 / (7 - 2 a_w): both factors
    average 1 over a day (sampled at hour midpoints) and a week, so the long-run mean rate
    stays `mean_arrival_rate_per_h()`.
    """
    a_d, a_w = cfg.diurnal_amplitude, cfg.weekly_amplitude
    daily = 1.0 + a_d * np.cos(2.0 * np.pi * (np.asarray(local_hour) - cfg.peak_hour) / 24.0)
    k = 7.0 / (7.0 - 2.0 * a_w)
    weekly = np.where(np.asarray(weekday) >= 5, k * (1.0 - a_w), k)
    return daily * weekly


def hourly_rate_factors(cfg: SyntheticWorkload, start: datetime, horizon_s: float) -> np.ndarray:
    """`rate_factor` of each hour [k h, (k+1) h) of the horizon (the last one may be partial).

    The rate is piecewise constant per hour, evaluated at the local time of the hour's
    midpoint (DST is followed: a local hour is a wall-clock hour of `cfg.timezone`).
    """
    if start.tzinfo is None:
        raise ValueError(f"start must carry a UTC offset, got {start}")
    n_bins = max(1, math.ceil(horizon_s / 3600.0))
    mid = pd.Timestamp(start).tz_convert("UTC") + pd.to_timedelta(
        (np.arange(n_bins) + 0.5) * 3600.0, unit="s"
    )
    local = pd.DatetimeIndex(mid).tz_convert(cfg.timezone)
    hour = local.hour + local.minute / 60.0 + local.second / 3600.0
    return rate_factor(cfg, np.asarray(hour, dtype=np.float64), np.asarray(local.day_of_week))


def _operational_time(
    cfg: SyntheticWorkload, start: datetime, horizon_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bin edges (real seconds) and Lambda at them (operational seconds), Lambda increasing."""
    factors = hourly_rate_factors(cfg, start, horizon_s)
    edges = np.minimum(np.arange(len(factors) + 1) * 3600.0, horizon_s)
    cum = np.concatenate([[0.0], np.cumsum(factors * np.diff(edges))])
    return edges, cum


def _poisson_arrivals(
    rate_per_s: float, horizon_s: float, max_jobs: int | None, rng: np.random.Generator
) -> np.ndarray:
    """Arrival times in [0, horizon_s) of a Poisson process, at most `max_jobs` of them."""
    limit = math.inf if max_jobs is None else max_jobs
    expected = rate_per_s * horizon_s
    # one block covers the horizon except with probability ~1e-9
    block = int(min(expected + 6.0 * math.sqrt(expected) + 16.0, limit))
    parts: list[np.ndarray] = []
    count, t0 = 0, 0.0
    while count < limit:
        times = t0 + np.cumsum(rng.exponential(1.0 / rate_per_s, block))
        inside = int(np.searchsorted(times, horizon_s, side="left"))
        parts.append(times[:inside])
        count += inside
        if inside < block:
            break
        t0 = float(times[-1])
        block = int(min(block, limit - count))
    out = np.concatenate(parts) if parts else np.empty(0)
    return out[: int(min(len(out), limit))]


def _normalised(weights: Sequence[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return w / w.sum()


def _origin_weights(cfg: SyntheticWorkload, site_names: Sequence[str]) -> np.ndarray:
    """Origin probabilities per site; the scenario schema has checked the weights."""
    if cfg.origin_sites is None:
        return np.full(len(site_names), 1.0 / len(site_names))
    return _normalised([cfg.origin_sites.get(name, 0.0) for name in site_names])
