"""Synthetic workloads: Poisson arrivals with i.i.d. attributes, drawn from one generator in
a fixed order, so the table depends only on (config, site names, horizon, generator state)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sim.scenario import SyntheticWorkload
from sim.workload.table import JobTable


def generate_synthetic(
    cfg: SyntheticWorkload,
    site_names: Sequence[str],
    horizon_s: float,
    rng: np.random.Generator,
) -> JobTable:
    """Poisson arrivals over [0, horizon_s) with i.i.d. job attributes drawn from `rng`.

    `horizon_s`: length of the scenario, seconds. The result depends only on the arguments
    (and the generator's state), never on global random state. Draws, in this order, each
    one vectorised over the n jobs:

    1. arrivals: exponential inter-arrival gaps of mean 1/`arrival_rate_per_h`, drawn in
       blocks until the horizon (or `max_jobs` arrivals) is reached;
    2. duration, hours, the wall time on `gpus` reference GPUs: exponential(`mean_h`) or
       lognormal(log(`median_h`), `sigma`); `work_gpu_h = duration_h x gpus`;
    3. gpus: categorical over the `gpus` mix (GPU counts in increasing order);
    4. deferrable: uniform < `deferrable_fraction`;
    5. slack, hours: uniform(`slack_h`); deadline = submit + duration + slack for
       deferrable jobs (it may lie beyond the horizon), NaN for the others;
    6. interruptible: uniform < `interruptible_fraction`;
    7. origin site: categorical over `origin_sites` weights (default: uniform).

    Steps 3 to 7 consume the same amount of randomness whatever their parameters, so
    sweeping e.g. `deferrable_fraction` or the origin weights leaves the other attributes
    of every job unchanged (common random numbers). `profile`, `checkpoint_gb` and
    `data_gb` are the configured constants; job ids are "j0", "j1", ... in submit order.
    """
    if not site_names:
        raise ValueError("generate_synthetic needs at least one site name")
    if not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be finite and > 0, got {horizon_s}")

    submit_s = _poisson_arrivals(cfg.arrival_rate_per_h / 3600.0, horizon_s, cfg.max_jobs, rng)
    n = len(submit_s)

    dist = cfg.duration
    if dist.dist == "exponential":
        duration_h = rng.exponential(dist.mean_h, n)
    else:
        duration_h = rng.lognormal(math.log(dist.median_h), dist.sigma, n)
    # a zero (probability ~2^-53) or underflowed draw would make a job of no work
    duration_h = np.maximum(duration_h, np.finfo(np.float64).tiny)

    counts = np.array(sorted(cfg.gpus), dtype=np.int64)
    gpus = counts[rng.choice(len(counts), size=n, p=_normalised([cfg.gpus[c] for c in counts]))]

    deferrable = rng.random(n) < cfg.deferrable_fraction
    slack_h = rng.uniform(cfg.slack_h[0], cfg.slack_h[1], n)
    deadline_s = np.where(deferrable, submit_s + (duration_h + slack_h) * 3600.0, np.nan)

    interruptible = rng.random(n) < cfg.interruptible_fraction

    origin = rng.choice(len(site_names), size=n, p=_origin_weights(cfg, site_names))

    return JobTable(
        job_id=np.array([f"j{i}" for i in range(n)], dtype=object),
        submit_s=submit_s,
        gpus=gpus,
        work_gpu_h=duration_h * gpus,
        profile=np.full(n, cfg.profile, dtype=object),
        deadline_s=deadline_s,
        interruptible=interruptible,
        checkpoint_gb=np.full(n, float(cfg.checkpoint_gb)),
        data_gb=np.full(n, float(cfg.data_gb)),
        origin_site=origin.astype(np.int64),
    )


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
