"""Statistics over a sweep's summary table: means with confidence intervals across seeds, and
paired differences against a baseline.

Confidence intervals are Student-t intervals of the mean over the seeds (the runs of one
parameter combination are independent replications). Paired differences compare runs that
share every other parameter and the seed, so they see the same jobs and the same forecast
errors; their interval is the t interval of the mean difference, usually much narrower
than the difference of two unpaired intervals. The relative change (the mean difference as a
percentage of the baseline's mean, a ratio of means) gets a paired bootstrap interval over
the seeds (`change_interval`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

DEFAULT_METRICS = ("carbon_total_kg", "energy_facility_kwh", "wait_mean_h", "jct_mean_h")
BOOTSTRAP_RESAMPLES = 9999
"""Resamples of the seeds in each paired bootstrap (scipy's default)."""
BOOTSTRAP_SEED = 0
"""Seed of the generator (numpy's PCG64) that draws each bootstrap's resamples, fresh for every
comparison: an interval depends only on its own pairs, not on the machine or on which other
comparisons the table holds (for given numpy and scipy versions)."""
BOOTSTRAP_METHODS = ("BCa", "percentile")
"""Bootstrap intervals tried in turn: bias-corrected and accelerated where scipy can compute it,
else percentile (BCa is undefined when every resample gives the same change)."""


def mean_ci(
    summary: pd.DataFrame,
    by: Sequence[str],
    metrics: Sequence[str] = DEFAULT_METRICS,
    level: float = 0.95,
) -> pd.DataFrame:
    """One row per combination of the `by` columns, over the runs that finished: `runs`,
    and for each metric `<metric>_mean`, `<metric>_ci_low`, `<metric>_ci_high` (the
    `level` t interval of the mean; NaN with fewer than two values)."""
    ok = _finished(summary, metrics)
    rows = []
    for key, group in ok.groupby(list(by), sort=False, dropna=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row["runs"] = len(group)
        for m in metrics:
            mean, low, high = _t_interval(group[m].dropna().to_numpy(float), level)
            row |= {f"{m}_mean": mean, f"{m}_ci_low": low, f"{m}_ci_high": high}
        rows.append(row)
    return pd.DataFrame(rows)


def paired_differences(
    summary: pd.DataFrame,
    metric: str,
    factor: str = "policy",
    baseline: object = "run_now",
    pair_on: Sequence[str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Each level of `factor` against `baseline`, run by run: the difference of `metric`
    (level minus baseline) on runs equal in every `pair_on` column (default: the seed and
    every grid parameter but `factor`, from `summary.attrs["params"]`), and its mean.

    One row per level of `factor` (baseline excluded) and combination of the other
    parameters: `pairs`, `diff_mean`, `diff_ci_low`, `diff_ci_high` (the `level` t interval
    of the mean difference), `baseline_mean`, `change_pct` (mean difference as a
    percentage of the baseline's mean over the same pairs: negative is a saving), and its
    `level` paired bootstrap interval over the pairs, `change_pct_low`, `change_pct_high`,
    with the bootstrap method that gave it, `change_pct_method` (`change_interval`). The
    frame's `attrs["change_pct_interval"]` says how the intervals were drawn."""
    if factor not in summary.columns:
        raise ValueError(f"no column {factor!r} in the summary")
    if pair_on is None:
        params = summary.attrs.get("params", [])
        pair_on = ["seed", *[p for p in params if p != factor]]
    pair_on = list(pair_on)
    ok = _finished(summary, [metric])[[*pair_on, factor, metric]]
    base = ok[ok[factor] == baseline]
    if base.empty:
        raise ValueError(f"no finished runs with {factor} = {baseline!r} to compare against")
    base = base.drop(columns=factor).rename(columns={metric: "baseline"})
    paired = ok[ok[factor] != baseline].merge(base, on=pair_on, how="inner")
    paired["diff"] = paired[metric] - paired["baseline"]
    groups = [factor, *[c for c in pair_on if c != "seed"]]
    rows = []
    for key, group in paired.groupby(groups, sort=False, dropna=False):
        row = dict(zip(groups, key if isinstance(key, tuple) else (key,), strict=True))
        valid = group.dropna(subset=["diff"])
        other, base = valid[metric].to_numpy(float), valid["baseline"].to_numpy(float)
        mean, low, high = _t_interval(valid["diff"].to_numpy(float), level)
        change_low, change_high, method = change_interval(other, base, level)
        row |= {
            "pairs": len(valid),
            "diff_mean": mean,
            "diff_ci_low": low,
            "diff_ci_high": high,
            "baseline_mean": float(base.mean()) if len(valid) else float("nan"),
            "change_pct": float(change_pct(other, base)) if len(valid) else float("nan"),
            "change_pct_low": change_low,
            "change_pct_high": change_high,
            "change_pct_method": method,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["change_pct_interval"] = {
        "level": level,
        "kind": "paired bootstrap over seeds of the ratio of means",
        "methods": list(BOOTSTRAP_METHODS),
        "resamples": BOOTSTRAP_RESAMPLES,
        "seed": BOOTSTRAP_SEED,
    }
    return table


def change_pct(other: np.ndarray, baseline: np.ndarray, axis: int = -1) -> np.ndarray:
    """The relative change of `other` against `baseline`, percent, along `axis`:
    100 * (mean(other) - mean(baseline)) / mean(baseline), that is the mean paired difference
    over the baseline's mean (a ratio of means, not a mean of per-seed ratios); NaN where the
    baseline's mean is zero."""
    base = np.mean(baseline, axis=axis)
    diff_pct = 100.0 * (np.mean(other, axis=axis) - base)
    return np.divide(diff_pct, base, out=np.full_like(diff_pct, np.nan), where=base != 0)


def change_interval(
    other: np.ndarray, baseline: np.ndarray, level: float = 0.95
) -> tuple[float, float, str | None]:
    """The two-sided `level` paired bootstrap interval of `change_pct(other, baseline)`, with
    the method that gave it: `scipy.stats.bootstrap` resamples the pairs (`other[i]`,
    `baseline[i]`, one seed's runs) together, `BOOTSTRAP_RESAMPLES` times with a generator
    seeded with `BOOTSTRAP_SEED`, and tries `BOOTSTRAP_METHODS` in turn.

    With fewer than two pairs, or a baseline whose mean is zero, there is no interval (NaN,
    NaN, None); when some resample's baseline mean is zero the interval is NaN too. When every
    pair shows the same relative change, every resample does: BCa is undefined, and the
    percentile interval has zero width (to rounding)."""
    nan = float("nan")
    if len(other) < 2 or not np.isfinite(change_pct(other, baseline)):
        return nan, nan, None
    from scipy import stats as scipy_stats  # here: importing sim stays free of scipy

    for method in BOOTSTRAP_METHODS:
        with warnings.catch_warnings():  # scipy warns, then returns NaN, where BCa is undefined
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
            low, high = scipy_stats.bootstrap(
                (other, baseline),
                change_pct,
                n_resamples=BOOTSTRAP_RESAMPLES,
                vectorized=True,
                paired=True,
                confidence_level=level,
                method=method,
                random_state=np.random.default_rng(BOOTSTRAP_SEED),
            ).confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return float(low), float(high), method
    return nan, nan, None


def _finished(summary: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    missing = [m for m in metrics if m not in summary.columns]
    if missing:
        raise ValueError(f"no column {missing[0]!r} in the summary")
    if "status" in summary.columns:
        return summary[summary["status"] == "ok"]
    return summary


def _t_interval(x: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean and the two-sided `level` Student-t interval of the mean of `x`."""
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(x.mean())
    if len(x) < 2:
        return mean, float("nan"), float("nan")
    from scipy import stats as scipy_stats  # here: importing sim stays free of scipy

    half = scipy_stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return mean, mean - float(half), mean + float(half)
