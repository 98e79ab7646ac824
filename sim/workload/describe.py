"""`dcsim workload describe`: the shape of a native job file, as tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from rich.table import Table

from sim.errors import TraceError
from sim.workload.native import read_job_frame

DURATION_BINS_H = (0.0, 1 / 6, 1.0, 4.0, 24.0, 7 * 24.0, np.inf)
DURATION_LABELS = ("< 10 min", "10 min - 1 h", "1 - 4 h", "4 - 24 h", "1 - 7 days", "> 7 days")


def numeric_jobs(path: str | Path) -> pd.DataFrame:
    """submit_s (relative to the first submission), gpus, duration_h of a native job file."""
    raw = read_job_frame(path)
    submit = pd.to_numeric(raw["submit_time"], errors="coerce")
    if submit.isna().any():  # ISO datetimes: relative to the first one
        stamps = pd.to_datetime(raw["submit_time"], utc=True, errors="coerce", format="ISO8601")
        submit = (stamps - stamps.min()).dt.total_seconds()
    gpus = pd.to_numeric(raw["gpus"], errors="coerce")
    work = pd.to_numeric(raw["work_gpu_h"], errors="coerce")
    bad = submit.isna() | gpus.isna() | work.isna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(f"{path}: row {i + 1}: submit_time, gpus or work_gpu_h is not a number")
    return pd.DataFrame(
        {"submit_s": submit - submit.min(), "gpus": gpus.astype(int), "duration_h": work / gpus}
    )


def describe(path: str | Path) -> list[Table]:
    jobs = numeric_jobs(path)
    span_d = jobs["submit_s"].max() / 86400.0
    summary = Table(title=f"{path}")
    summary.add_column("jobs", justify="right")
    summary.add_column("GPU-hours", justify="right")
    summary.add_column("arrivals span (days)", justify="right")
    summary.add_column("median duration (h)", justify="right")
    summary.add_column("p95 duration (h)", justify="right")
    summary.add_row(
        f"{len(jobs):,}",
        f"{(jobs['gpus'] * jobs['duration_h']).sum():,.0f}",
        f"{span_d:.1f}",
        f"{jobs['duration_h'].median():.3g}",
        f"{jobs['duration_h'].quantile(0.95):.3g}",
    )
    mix = Table(title="GPU count mix")
    for col in ("GPUs", "jobs", "share of jobs", "share of GPU-hours"):
        mix.add_column(col, justify="right")
    gpu_h = jobs["gpus"] * jobs["duration_h"]
    for n, group in jobs.groupby("gpus"):
        mix.add_row(
            str(n),
            f"{len(group):,}",
            f"{len(group) / len(jobs):.1%}",
            f"{gpu_h[group.index].sum() / gpu_h.sum():.1%}",
        )
    durations = Table(title="durations (wall time on the jobs' GPUs)")
    durations.add_column("duration")
    durations.add_column("jobs", justify="right")
    counts = pd.cut(jobs["duration_h"], DURATION_BINS_H, labels=DURATION_LABELS, right=False)
    for label, n in counts.value_counts(sort=False).items():
        durations.add_row(str(label), f"{n:,}")
    arrivals = Table(title="arrivals by hour after the first submission's hour (mod 24)")
    arrivals.add_column("hour")
    arrivals.add_column("jobs", justify="right")
    arrivals.add_column("")
    by_hour = np.bincount(((jobs["submit_s"] // 3600) % 24).astype(int), minlength=24)
    for h, n in enumerate(by_hour):
        arrivals.add_row(str(h), f"{n:,}", "#" * int(40 * n / max(by_hour.max(), 1)))
    return [summary, mix, durations, arrivals]
