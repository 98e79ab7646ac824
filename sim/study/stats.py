"""Statistics over a sweep's summary table: means with confidence intervals across seeds, and
paired differences against a baseline.

Confidence intervals are Student-t intervals of the mean over the seeds (the runs of one
parameter combination are independent replications). Paired differences compare runs that
share every other parameter and the seed, so they see the same jobs and the same forecast
errors; their interval is the t interval of the mean difference, usually much narrower
than the difference of two unpaired intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

DEFAULT_METRICS = ("carbon_total_kg", "energy_facility_kwh", "wait_mean_h", "jct_mean_h")


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
    of the mean difference), `baseline_mean`, and `change_pct` (mean difference as a
    percentage of the baseline's mean over the same pairs: negative is a saving)."""
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
        mean, low, high = _t_interval(valid["diff"].to_numpy(float), level)
        base_mean = float(valid["baseline"].mean()) if len(valid) else float("nan")
        row |= {
            "pairs": len(valid),
            "diff_mean": mean,
            "diff_ci_low": low,
            "diff_ci_high": high,
            "baseline_mean": base_mean,
            "change_pct": 100.0 * mean / base_mean if base_mean else float("nan"),
        }
        rows.append(row)
    return pd.DataFrame(rows)


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
