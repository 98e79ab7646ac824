"""Alibaba PAI 2020 GPU trace (`cluster-trace-gpu-v2020`): `pai_task_table` + `pai_job_table`.

Both tables are header-less CSVs (the published `.header` files give the columns):

- `pai_job_table.csv`: job_name, inst_id, user, status, start_time, end_time
  (`start_time` is the job's submission);
- `pai_task_table.csv`: job_name, task_name, inst_num, status, start_time, end_time,
  plan_cpu, plan_mem, plan_gpu, gpu_type (`plan_gpu` in percent of one GPU per instance,
  `start_time` the task's launch).

Times are seconds on a desensitised clock (a constant was subtracted; read as Unix time in
UTC+8 they keep the true time of day and weekday, with fake dates). One job per job_name:

- submission = the job table's `start_time` (the earliest task launch without a job table);
- runtime = latest task `end_time` - earliest task `start_time` over the job's GPU tasks
  (the original queueing wait is dropped: dcsim's policies decide the wait);
- GPUs: `fractional="round_up"` (default) gives each instance whole GPUs,
  sum(inst_num x ceil(plan_gpu / 100)), and `work_gpu_h = gpus x runtime_h`;
  `fractional="share"` gives the gang ceil(sum(inst_num x plan_gpu / 100)) GPUs and
  `work_gpu_h = sum(inst_num x plan_gpu / 100) x runtime_h`, which conserves the trace's
  GPU-hours (a shared job runs on whole GPUs for a fraction of its measured time).

The report counts task-table rows: each kept job imports one row; its other GPU tasks are
"merged", CPU-only tasks and unusable rows are skipped with a reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sim.errors import TraceError
from sim.util.text import check_text_file
from sim.workload.importers import ImportReport
from sim.workload.importers._common import (
    REFERENCE_NOTE,
    RowReasons,
    ceil_gpus,
    check_common,
    native_frame,
    read_csv_strict,
)

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
_STATUS_RANK = {"Waiting": 1, "Terminated": 2, "Running": 3, "Failed": 4}


def import_pai2020(
    path: Path,
    *,
    job_table: str | Path | None = None,
    keep_failed: bool = False,
    fractional: str = "round_up",
    profile: str = "mixed",
    origin_site: str = "",
) -> tuple[pd.DataFrame, ImportReport]:
    """Import a PAI 2020 `pai_task_table.csv` (and its `pai_job_table.csv`).

    Options: `job_table` (path of pai_job_table; default `pai_job_table.csv` beside the
    task table if it exists, else jobs are built from tasks alone), `keep_failed` (keep jobs
    of status Failed, default false), `fractional` ("round_up" or "share", see the module
    docstring), `profile`, `origin_site`.
    """
    path = Path(path)
    check_common(path, profile, fractional)
    report = ImportReport("pai2020", str(path))
    numeric = ("inst_num", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu")
    tasks = read_csv_strict(path, TASK_COLUMNS, numeric, header=False)
    n = len(tasks)
    report.rows_read = n

    jobs = None
    if job_table is None and (path.parent / "pai_job_table.csv").is_file():
        job_table = path.parent / "pai_job_table.csv"
    if job_table is not None:
        job_path = Path(job_table)
        if not job_path.is_file():
            raise TraceError(f"{job_path}: no such file (option job_table)")
        check_text_file(job_path, "trace")
        jobs = read_csv_strict(job_path, JOB_COLUMNS, ("start_time", "end_time"), header=False)
        dup = jobs["job_name"].duplicated()
        if dup.any():
            report.notes.append(
                f"{int(dup.sum())} repeated job_name row(s) in {job_path.name}: first one used"
            )
            jobs = jobs[~dup]
        report.notes.append(f"job submissions and statuses from {job_path}")
    else:
        report.notes.append(
            "no pai_job_table: submission = earliest task start_time (queueing wait unknown), "
            "job status derived from the task statuses"
        )

    why = RowReasons(n)
    name = tasks["job_name"].fillna("")
    inst = tasks["inst_num"].to_numpy()
    plan = tasks["plan_gpu"].to_numpy()
    start = tasks["start_time"].to_numpy()
    end = tasks["end_time"].to_numpy()

    why.mark((name == "").to_numpy(), "job_name missing")
    why.mark(np.isnan(plan) | (plan == 0), "CPU-only task (plan_gpu 0 or empty)")
    bad_inst = ~np.isfinite(inst) | (inst <= 0) | (inst != np.round(inst))
    why.mark(bad_inst | ~np.isfinite(plan) | (plan < 0), "invalid inst_num or plan_gpu")

    # job status and submission
    key, names = pd.factorize(name)  # job number per task row
    if jobs is not None:
        where = pc.index_in(
            pa.array(np.asarray(names, dtype=object), pa.string()),
            value_set=pa.array(jobs["job_name"].to_numpy(dtype=object), pa.string()),
        )
        job_row = pc.fill_null(where, -1).to_numpy().astype(np.int64)[key]
        why.mark(job_row < 0, "job_name not in pai_job_table")
        jstatus = np.append(jobs["status"].fillna("").to_numpy(dtype=object), "")
        jsubmit = np.append(jobs["start_time"].to_numpy(dtype=np.float64), np.nan)
        status = jstatus[job_row]
        submit = jsubmit[job_row]
    else:
        rank = tasks["status"].map(_STATUS_RANK).fillna(5).to_numpy()
        rank = np.where(why.ok, rank, 0)
        job_rank = pd.Series(rank).groupby(key).transform("max").to_numpy()
        inverse = {v: k for k, v in _STATUS_RANK.items()}
        status = np.array([inverse.get(r, "") for r in range(6)], dtype=object)[
            job_rank.astype(int)
        ]
        unknown = job_rank == 5
        status[unknown] = tasks["status"].to_numpy(dtype=object)[unknown]
        submit = np.full(n, np.nan)

    for s in pd.unique(status[why.ok]):
        if s not in _STATUS_RANK:
            why.mark(status == s, f"unknown job status {s!r}")
    why.mark(status == "Waiting", "job never started (status Waiting)")
    if not keep_failed:
        why.mark(status == "Failed", "failed job (status Failed; keep_failed=false)")

    # per-job times over its usable GPU task rows
    times = np.concatenate([start, end])
    if jobs is not None:
        times = np.concatenate([times, jobs["start_time"].to_numpy(), jobs["end_time"].to_numpy()])
    finite = times[np.isfinite(times)]
    trace_end = float(finite.max()) if finite.size else 0.0
    ok = why.ok
    g = pd.DataFrame({"start": np.where(ok, start, np.nan), "end": np.where(ok, end, np.nan)})
    grouped = g.groupby(key, sort=False)
    job_start = grouped["start"].transform("min").to_numpy()
    job_end = grouped["end"].transform("max").to_numpy()
    end_missing = pd.Series(ok & np.isnan(end)).groupby(key, sort=False).transform("any").to_numpy()
    why.mark(np.isnan(job_start), "job never started (no task start_time)")
    job_end = np.where(end_missing | np.isnan(job_end), trace_end, job_end)
    why.mark(job_end - job_start <= 0, "non-positive runtime (end_time <= start_time)")

    # GPUs per job
    ok = why.ok
    inst_ok = np.where(ok, inst, 0.0)
    plan_ok = np.where(ok, plan, 0.0)
    whole = pd.Series(inst_ok * ceil_gpus(plan_ok / 100.0)).groupby(key, sort=False)
    frac = pd.Series(inst_ok * plan_ok / 100.0).groupby(key, sort=False)
    gpus_whole = whole.transform("sum").to_numpy()
    gpus_frac = frac.transform("sum").to_numpy()

    ok_idx = np.flatnonzero(ok)
    merged = np.zeros(n, bool)
    merged[ok_idx] = pd.Series(key[ok_idx]).duplicated().to_numpy()
    why.mark(merged, "merged: another GPU task of a job already imported")
    why.fill(report)
    first = why.ok

    runtime_h = (job_end - job_start)[first] / 3600.0
    submit_s = submit[first]
    launch = job_start[first]
    no_submit = np.isnan(submit_s)
    if jobs is not None and no_submit.any():
        report.notes.append(
            f"{int(no_submit.sum())} job(s) without a submission time: first task start used"
        )
    late = ~no_submit & (submit_s > launch)
    if late.any():
        report.notes.append(
            f"{int(late.sum())} job(s) submitted after their first task start: task start used"
        )
    submit_s = np.where(no_submit | late, launch, submit_s)

    running = end_missing[first]
    if running.any():
        report.notes.append(
            f"{int(running.sum())} job(s) without an end_time (running at the trace end): "
            f"runtime up to the trace end ({trace_end:.0f} s)"
        )

    if fractional == "round_up":
        gpus = gpus_whole[first]
        work = gpus * runtime_h
        shared = (gpus_whole[first] > gpus_frac[first] + 1e-9).sum()
        report.notes.append(
            f"fractional=round_up: every instance takes whole GPUs; {int(shared)} job(s) "
            "asked for fractions and got whole GPUs"
        )
    else:
        share = gpus_frac[first]
        gpus = ceil_gpus(share)
        work = share * runtime_h
        shared = (gpus > share + 1e-9).sum()
        report.notes.append(
            f"fractional=share: the gang gets ceil(total GPU share) GPUs and work_gpu_h = "
            f"share x runtime_h; {int(shared)} job(s) have a fractional share and run on "
            "whole GPUs for a fraction of their measured time"
        )
    report.notes.append(REFERENCE_NOTE)

    job_names = np.asarray(names, dtype=object)[key[first]]
    frame, t0 = native_frame(
        job_names, submit_s, gpus, work, profile=profile, origin_site=origin_site, report=report
    )
    if len(frame):
        local = pd.Timestamp(t0, unit="s", tz="UTC").tz_convert("Asia/Shanghai")
        report.trace_start = (
            f"trace second {t0:.0f} (desensitised clock, no real date; as Unix time in UTC+8 "
            f"it is {local:%a %H:%M:%S}, the true weekday and time of day)"
        )
    return frame, report
