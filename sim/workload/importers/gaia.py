"""GAIA's job traces (umassos/GAIA, `src/cluster_traces/*.csv`): `arrival_time,length,cpus`.

A CSV with a header, one job per row: arrival time and length (both in the same unit) and
the number of CPUs the job holds. The published files use two units: `azure-100k.csv` and
`pai-100k.csv` are in hours (a year of arrivals, 0-8760), `pai_1k.csv` in seconds (a week).
`unit="auto"` (default) reads seconds when every length is a whole number >= 60 and hours
otherwise, and says which in the report; `unit` may also be "s", "min" or "h".

GAIA schedules CPU jobs: a job holds `cpus` cores (its cloud cost is cpus x length) for its
whole length. dcsim schedules GPU gangs, so by default every job becomes a 1-GPU job
(`cpus_per_gpu=None`); with `cpus_per_gpu=k` a job needs ceil(cpus / k) GPUs (k=1: one GPU
per CPU). `work_gpu_h = gpus x length_h`. Rows are numbered from 0 in file order and the
job id is `<file stem>-<row>`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.workload.importers import ImportReport
from sim.workload.importers._common import (
    REFERENCE_NOTE,
    RowReasons,
    ceil_gpus,
    check_common,
    native_frame,
    read_csv_strict,
)

GAIA_COLUMNS = ("arrival_time", "length", "cpus")
UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}


def import_gaia(
    path: Path,
    *,
    unit: str = "auto",
    cpus_per_gpu: float | None = None,
    profile: str = "mixed",
    origin_site: str = "",
) -> tuple[pd.DataFrame, ImportReport]:
    """Import a GAIA trace. Options: `unit` ("auto", "s", "min", "h"), `cpus_per_gpu`
    (None: one GPU per job; k > 0: ceil(cpus / k) GPUs), `profile`, `origin_site`.
    GAIA traces hold no failed jobs, so there is no `keep_failed`."""
    path = Path(path)
    check_common(path, profile)
    if unit != "auto" and unit not in UNITS:
        raise TraceError(f"{path}: option unit must be auto, s, min or h, got {unit!r}")
    if cpus_per_gpu is not None and not (
        isinstance(cpus_per_gpu, int | float) and math.isfinite(cpus_per_gpu) and cpus_per_gpu > 0
    ):
        raise TraceError(f"{path}: option cpus_per_gpu must be a number > 0, got {cpus_per_gpu!r}")
    report = ImportReport("gaia", str(path))
    jobs = read_csv_strict(path, GAIA_COLUMNS, GAIA_COLUMNS, header=True)
    n = len(jobs)
    report.rows_read = n
    arrival = jobs["arrival_time"].to_numpy()
    length = jobs["length"].to_numpy()
    cpus = jobs["cpus"].to_numpy()

    why = RowReasons(n)
    why.mark(~np.isfinite(arrival) | (arrival < 0), "arrival_time missing or negative")
    why.mark(~np.isfinite(length) | (length <= 0), "length missing or not positive")
    why.mark(~np.isfinite(cpus) | (cpus <= 0), "cpus missing or not positive")
    why.fill(report)
    keep = why.ok

    if unit == "auto":
        lk = length[keep]
        seconds = lk.size > 0 and bool(np.all(lk == np.round(lk)) and lk.min() >= 60)
        unit = "s" if seconds else "h"
        report.notes.append(
            "unit auto-detected: "
            + (
                "seconds (every length is a whole number >= 60)"
                if seconds
                else "hours (lengths are not all whole numbers >= 60)"
            )
        )
    else:
        report.notes.append(f"unit: {unit} (option)")
    scale = UNITS[unit]
    submit = arrival[keep] * scale
    length_h = length[keep] * scale / 3600.0

    if cpus_per_gpu is None:
        gpus = np.ones(int(keep.sum()))
        report.notes.append("one GPU per job (cpus ignored; option cpus_per_gpu maps CPUs to GPUs)")
    else:
        gpus = np.maximum(ceil_gpus(cpus[keep] / float(cpus_per_gpu)), 1)
        report.notes.append(f"gpus = ceil(cpus / {cpus_per_gpu:g})")
    report.notes.append(REFERENCE_NOTE)

    ids = np.char.add(f"{path.name.split('.')[0]}-", np.flatnonzero(keep).astype(str))
    frame, origin_s = native_frame(
        ids.astype(object),
        submit,
        gpus,
        gpus * length_h,
        profile=profile,
        origin_site=origin_site,
        report=report,
    )
    if len(frame):
        report.trace_start = (
            f"arrival_time {origin_s / scale:g} {unit} of the trace "
            "(relative, GAIA traces carry no date)"
        )
    return frame, report
