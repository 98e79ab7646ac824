"""SenseTime Helios trace importer: `cluster_log.csv` of S-Lab-System-Group/HeliosData.

One CSV per cluster (Earth, Saturn, Uranus, Venus; Hu et al., SC'21), with a header::

    job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,...
    1425511,uXBbc,vcJkd,job1,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,...

(the public README's example omits `jobname`; columns are found by name, in any order).

Columns read: `job_id`, `gpu_num` (GPUs the job requested), `state`, `submit_time`, the
runtime: `duration` (seconds, `end_time - start_time` as the trace documents it) or, where
it is absent or empty, `end_time - start_time`, and where present `vc` and `user` (kept as
the job columns of the same names). Other columns are not read.

Conversions (all reported in the `ImportReport`):

- Times are naive wall-clock strings `YYYY-MM-DD HH:MM:SS`. The trace names no time zone;
  Helios is SenseTime's datacenter in China, so they are read as `Asia/Shanghai` (UTC+8,
  no daylight saving; option `timezone`) and converted to UTC.
- `work_gpu_h = gpu_num x duration_h`: the measured runtime on Helios' GPUs (V100 and
  1080 Ti class) taken as reference-GPU time, as the notes say.
- `state`: `COMPLETED` is kept; `CANCELLED`, `FAILED`, `TIMEOUT` and `NODE_FAIL` (the
  trace counts the last two as failed) are kept only with `keep_failed=True`. Any other
  state is skipped as not terminal.
- `job_id` is the Slurm id, unique within one cluster; `id_prefix` (e.g. `"venus-"`) makes
  ids unique when clusters are combined.

Rows skipped with a reason: CPU-only jobs (`gpu_num` 0), `gpu_num` missing, negative or
fractional, `submit_time` missing or unparseable, a state not kept, no runtime, zero or
negative runtime, repeated `job_id`. A file without a header naming the required columns,
or with a row of more or fewer fields than the header, raises `TraceError` naming the file and line.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from sim.errors import TraceError
from sim.models.hardware import PROFILES, profile_choices
from sim.workload.importers import ImportReport
from sim.workload.importers._common import apply_reasons, native_frame_utc

__all__ = ["import_helios"]

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
REQUIRED = ("job_id", "gpu_num", "state", "submit_time")
KEPT_STATE = "COMPLETED"
FAILED_STATES = ("CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")


def import_helios(
    path: Path,
    *,
    keep_failed: bool = False,
    profile: str = "mixed",
    origin_site: str = "",
    timezone: str = "Asia/Shanghai",
    id_prefix: str = "",
) -> tuple[pd.DataFrame, ImportReport]:
    """Import a Helios `cluster_log.csv` into native jobs (see the module doc)."""
    path = Path(path)
    if profile not in PROFILES:
        raise TraceError(f"profile must be one of {profile_choices()}, got {profile!r}")
    data = _read(path)
    n = len(data)
    report = ImportReport("helios", str(path), rows_read=n)

    state = data["state"].fillna("").astype(str).str.strip().str.upper().to_numpy(dtype=object)
    gpu_num = pd.to_numeric(data["gpu_num"], errors="coerce").to_numpy(dtype=float)
    submit = _to_utc(data["submit_time"], timezone)
    run_s = np.full(n, np.nan)
    if "duration" in data.columns:
        run_s = pd.to_numeric(data["duration"], errors="coerce").to_numpy(dtype=float)
    if "start_time" in data.columns and "end_time" in data.columns:
        start = _to_utc(data["start_time"], timezone)
        end = _to_utc(data["end_time"], timezone)
        span = (end - start).total_seconds().to_numpy(dtype=float)
        from_span = np.isnan(run_s) & np.isfinite(span)
        run_s = np.where(from_span, span, run_s)
        if from_span.any() and "duration" in data.columns:
            report.notes.append(
                f"{int(from_span.sum())} row(s) without duration: end_time - start_time used"
            )

    known = np.isin(state, (KEPT_STATE, *FAILED_STATES))
    reasons = [
        (gpu_num == 0, "CPU-only job (gpu_num 0)"),
        (np.isnan(gpu_num), "gpu_num missing or not a number"),
        ((gpu_num < 0) | (gpu_num != np.floor(gpu_num)), "gpu_num negative or fractional"),
        (pd.isna(submit), "submit_time missing or not 'YYYY-MM-DD HH:MM:SS'"),
    ]
    for st in pd.unique(state[~known]):
        shown = st if st else "(empty)"
        reasons.append((state == st, f"state {shown} (not a terminal state dcsim imports)"))
    if not keep_failed:
        for st in FAILED_STATES:
            reasons.append((state == st, f"state {st} (keep_failed=false)"))
    reasons += [
        (np.isnan(run_s), "no runtime (duration and start_time/end_time missing)"),
        (run_s <= 0, "zero or negative runtime"),
    ]
    keep = apply_reasons(report, reasons, n)
    job_id = data["job_id"].fillna("").astype(str).str.strip().to_numpy(dtype=object)
    missing_id = keep & (job_id == "")
    report.skip("job_id missing", int(missing_id.sum()))
    keep &= ~missing_id
    dup = keep & pd.Index(job_id).duplicated(keep="first")
    report.skip("repeated job_id (the first one is kept)", int(dup.sum()))
    keep &= ~dup

    report.notes.append(f"times read as {timezone} wall-clock time and converted to UTC")
    report.notes.append(
        "work_gpu_h = gpu_num x duration_h, the measured runtime on Helios' GPUs taken as "
        "reference-GPU (A100-80GB) time"
    )
    if keep_failed:
        n_failed = int((keep & np.isin(state, FAILED_STATES)).sum())
        report.notes.append(
            f"{n_failed} CANCELLED/FAILED/TIMEOUT/NODE_FAIL job(s) kept with their measured runtime"
        )
    gpus = gpu_num[keep]
    ids = job_id[keep]
    if id_prefix:
        ids = (id_prefix + pd.Series(ids, dtype=object)).to_numpy(dtype=object)
    team = {
        k: data[k].fillna("").astype(str).str.strip().to_numpy(dtype=object)[keep]
        for k in ("vc", "user")
        if k in data.columns
    }
    frame = native_frame_utc(
        ids,
        submit[keep],
        gpus,
        run_s[keep],
        profile=profile,
        origin_site=origin_site,
        report=report,
        extra=team,
    )
    return frame, report


def _read(path: Path) -> pd.DataFrame:
    try:
        header = pd.read_csv(path, nrows=0, encoding="utf-8-sig").columns
    except pd.errors.EmptyDataError as e:
        raise TraceError(f"{path}: not a Helios cluster_log.csv ({e})") from None
    raw_header = [str(c) for c in header]
    header = [c.strip() for c in raw_header]
    missing = [c for c in REQUIRED if c not in header]
    if not missing and "duration" not in header and not {"start_time", "end_time"} <= set(header):
        missing = ["duration (or start_time and end_time)"]
    if missing:
        raise TraceError(
            f"{path}:1: missing required column(s) {', '.join(map(repr, missing))} "
            f"(columns present: {', '.join(header)})"
        )
    optional = ("duration", "start_time", "end_time", "vc", "user")
    wanted = [*REQUIRED, *(c for c in optional if c in header)]
    raw_names = dict(zip(header, raw_header, strict=True))
    try:
        table = pa_csv.read_csv(
            path,
            parse_options=pa_csv.ParseOptions(ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                include_columns=[raw_names[c] for c in wanted],
                column_types={raw_names[c]: pa.string() for c in wanted},
                strings_can_be_null=True,
            ),
        )
    except pa.ArrowInvalid as e:
        raise TraceError(f"{path}: malformed CSV: {_line_of(path, e)}") from None
    data = table.to_pandas()
    data.columns = wanted
    return data


def _line_of(path: Path, error: Exception) -> str:
    """The first line whose field count differs from the header's, with its number."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f)
        width = len(next(rows))
        for row in rows:
            if row and len(row) != width:
                return (
                    f"line {rows.line_num} has {len(row)} fields, the header {width}: "
                    f"{','.join(row)[:120]!r}"
                )
    return str(error)


def _to_utc(col: pd.Series, tz: str) -> pd.DatetimeIndex:
    local = pd.DatetimeIndex(pd.to_datetime(col.str.strip(), format=TIME_FORMAT, errors="coerce"))
    try:
        dst = np.ones(len(local), bool)
        aware = local.tz_localize(tz, ambiguous=dst, nonexistent="shift_forward")
    except Exception as e:  # unknown time zone name
        raise TraceError(f"unknown time zone {tz!r} ({e})") from None
    return aware.tz_convert("UTC")
