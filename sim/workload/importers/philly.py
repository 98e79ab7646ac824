"""Microsoft Philly trace importer: `cluster_job_log` of msr-fiddle/philly-traces.

The file is one JSON array of jobs (Jeon et al., ATC'19; schema in the trace's README)::

    {"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
     "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c",
     "attempts": [{"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23",
                   "detail": [{"ip": "m47", "gpus": ["gpu0", "gpu1"]}]}, ...]}

Conversions (all reported in the `ImportReport`):

- Times are naive local wall-clock strings. The cluster is in US Pacific time: the trace's
  per-minute utilisation files stamp the same clock as `PDT`/`PST`
  (`2017-10-03 00:08:00 PDT`), so they are read in `America/Los_Angeles` (option
  `timezone`) and converted to UTC. The trace crosses the end of daylight saving time
  (2017-11-05): a wall time repeated that night is read as daylight time (the earlier
  instant), a skipped one is moved forward; both are counted in the notes.
- `gpus` is the number of GPUs of the job's last attempt (the sum of `len(gpus)` over its
  `detail` machines), the allocation the job ended with.
- The runtime is, by option `runtime`:
  `"sum"` (default) the sum of the durations of the attempts with both a start and an end
  time, i.e. the GPU time the job actually held (retries included, gaps between attempts
  excluded); `"last"` the last attempt only; `"span"` the first start to the last end, as
  the trace authors' analysis notebook computes run time (gaps included).
- `work_gpu_h = gpus x runtime_h`: the measured runtime on Philly's GPUs (12 and 24 GB
  Pascal-era cards) taken as reference-GPU time, as the notes say.
- `status`: `Pass` is kept; `Killed` and `Failed` are kept only with `keep_failed=True`
  (with the runtime they had before they ended).

Rows that cannot be used are skipped with a reason: no attempts, last attempt without an
end time (still running when the trace was taken), unparseable `submitted_time`, no attempt
with both times, zero runtime, zero GPUs, unknown status, repeated `jobid`.
A file that is not JSON, not an array of objects, or whose job lacks one of the keys
`jobid`, `status`, `submitted_time`, `attempts` raises `TraceError` naming the file and the
JSON line or array index.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.models.hardware import PROFILES, profile_choices
from sim.workload.importers import ImportReport
from sim.workload.importers._common import apply_reasons, native_frame_utc

__all__ = ["import_philly"]

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
REQUIRED_KEYS = ("jobid", "status", "submitted_time", "attempts")
KEPT_STATUS = "Pass"
FAILED_STATUSES = ("Killed", "Failed")
RUNTIME_MODES = ("sum", "last", "span")


def import_philly(
    path: Path,
    *,
    keep_failed: bool = False,
    profile: str = "mixed",
    origin_site: str = "",
    timezone: str = "America/Los_Angeles",
    runtime: str = "sum",
    id_prefix: str = "",
) -> tuple[pd.DataFrame, ImportReport]:
    """Import a Philly `cluster_job_log` JSON file into native jobs (see the module doc)."""
    path = Path(path)
    _check_options(profile, runtime)
    jobs = _load_json(path)
    report = ImportReport("philly", str(path), rows_read=len(jobs))

    job_id = np.array([str(j["jobid"]) for j in jobs], dtype=object)
    status = np.array([j["status"] for j in jobs], dtype=object)
    submitted = [j["submitted_time"] for j in jobs]
    attempts = [j["attempts"] if isinstance(j["attempts"], list) else [] for j in jobs]
    n_attempts = np.array([len(a) for a in attempts], dtype=np.int64)

    # one entry per attempt, with the index of its job
    owner = np.repeat(np.arange(len(jobs)), n_attempts)
    flat = [a if isinstance(a, dict) else {} for atts in attempts for a in atts]
    start = _to_utc([a.get("start_time") for a in flat], timezone, report, "start_time")
    end = _to_utc([a.get("end_time") for a in flat], timezone, report, "end_time")
    submit = _to_utc(submitted, timezone, report, "submitted_time")

    dur_s = (end - start).total_seconds().to_numpy(dtype=float)
    complete = np.isfinite(dur_s) & (dur_s >= 0)
    last_idx = np.cumsum(n_attempts) - 1  # index of each job's last attempt (if any)
    has_att = n_attempts > 0
    last_end_missing = np.zeros(len(jobs), bool)
    last_end_missing[has_att] = pd.isna(end[last_idx[has_att]])

    run_s: np.ndarray
    if runtime == "sum":
        run_s = np.bincount(owner[complete], dur_s[complete], minlength=len(jobs))
        any_complete = np.bincount(owner[complete], minlength=len(jobs)) > 0
    elif runtime == "last":
        run_s = np.zeros(len(jobs))
        run_s[has_att] = np.where(complete[last_idx[has_att]], dur_s[last_idx[has_att]], 0.0)
        any_complete = np.zeros(len(jobs), bool)
        any_complete[has_att] = complete[last_idx[has_att]]
    else:  # span: first start to last end
        first_idx = last_idx - n_attempts + 1
        span = np.full(len(jobs), np.nan)
        s0 = start[first_idx[has_att]]
        span[has_att] = (end[last_idx[has_att]] - s0).total_seconds().to_numpy(dtype=float)
        any_complete = np.isfinite(span) & (span >= 0)
        run_s = np.where(any_complete, span, 0.0)

    gpus = np.zeros(len(jobs), np.int64)
    gpus[has_att] = [_gpu_count(attempts[i][-1]) for i in np.flatnonzero(has_att)]

    partial = np.bincount(owner[~complete], minlength=len(jobs)) > 0
    reasons = [
        (~has_att, "no scheduling attempts"),
        (last_end_missing, "still running when the trace was taken (last attempt has no end_time)"),
        (pd.isna(submit), "submitted_time missing or not 'YYYY-MM-DD HH:MM:SS'"),
        (~any_complete, f"no attempt with both start_time and end_time (runtime={runtime!r})"),
        (run_s <= 0, "zero runtime"),
        (gpus <= 0, "no GPUs in the last attempt"),
        (~np.isin(status, (KEPT_STATUS, *FAILED_STATUSES)), "status not Pass/Killed/Failed"),
    ]
    if not keep_failed:
        for st in FAILED_STATUSES:
            reasons.append((status == st, f"status {st} (keep_failed=false)"))
    keep = apply_reasons(report, reasons, len(jobs))
    dup = keep & pd.Index(job_id).duplicated(keep="first")
    report.skip("repeated jobid (the first one is kept)", int(dup.sum()))
    keep &= ~dup

    kept_partial = int((keep & partial).sum())
    if kept_partial:
        report.notes.append(
            f"{kept_partial} kept job(s) had an attempt without start or end time; "
            "such attempts add no runtime"
        )
    report.notes.append(
        f"times read as {timezone} wall-clock time (the cluster's clock, PDT/PST in the "
        "trace's utilisation logs) and converted to UTC"
    )
    report.notes.append(
        f"runtime = {_RUNTIME_TEXT[runtime]}; gpus = GPUs of the last attempt; "
        "work_gpu_h = gpus x runtime_h, the measured runtime on Philly's GPUs taken as "
        "reference-GPU (A100-80GB) time"
    )
    if keep_failed:
        n_failed = int((keep & np.isin(status, FAILED_STATUSES)).sum())
        report.notes.append(f"{n_failed} Killed/Failed job(s) kept with their measured runtime")

    team = {k: np.array([str(j.get(k) or "") for j in jobs], dtype=object) for k in ("vc", "user")}
    frame = native_frame_utc(
        job_id=np.array([id_prefix + j for j in job_id[keep]], dtype=object),
        submit_utc=submit[keep],
        gpus=gpus[keep],
        runtime_s=run_s[keep],
        profile=profile,
        origin_site=origin_site,
        report=report,
        extra={k: v[keep] for k, v in team.items()},
    )
    return frame, report


_RUNTIME_TEXT = {
    "sum": "sum of the attempts' durations (end_time - start_time)",
    "last": "duration of the last attempt",
    "span": "first attempt's start_time to last attempt's end_time",
}


def _check_options(profile: str, runtime: str) -> None:
    if profile not in PROFILES:
        raise TraceError(f"profile must be one of {profile_choices()}, got {profile!r}")
    if runtime not in RUNTIME_MODES:
        raise TraceError(f"runtime must be one of {', '.join(RUNTIME_MODES)}, got {runtime!r}")


def _load_json(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(data, list):
        raise TraceError(
            f"{path}: a Philly cluster_job_log is a JSON array of jobs, got {type(data).__name__}"
        )
    for i, job in enumerate(data):
        if not isinstance(job, dict):
            raise TraceError(f"{path}: [{i}]: a job must be a JSON object, got {job!r:.80}")
        missing = [k for k in REQUIRED_KEYS if k not in job]
        if missing:
            raise TraceError(
                f"{path}: [{i}]: job {job.get('jobid', '?')!r} lacks key(s) "
                f"{', '.join(map(repr, missing))} (keys present: {', '.join(job)})"
            )
        atts = job["attempts"]
        if atts is not None and not isinstance(atts, list):
            raise TraceError(f"{path}: [{i}].attempts must be a list, got {atts!r:.80}")
    return data


def _to_utc(values: list, tz: str, report: ImportReport, what: str) -> pd.DatetimeIndex:
    """Naive local 'YYYY-MM-DD HH:MM:SS' strings (None allowed) -> UTC; NaT where unusable."""
    text = pd.Series(values, dtype=object)
    text = text.where(
        text.map(lambda v: isinstance(v, str)).astype(bool)
    )  # None, numbers, ... -> NaN
    local = pd.DatetimeIndex(pd.to_datetime(text, format=TIME_FORMAT, errors="coerce"))
    dst = np.ones(len(local), bool)
    try:
        aware = local.tz_localize(tz, ambiguous=dst, nonexistent="shift_forward")
    except Exception as e:  # unknown time zone name
        raise TraceError(f"unknown time zone {tz!r} ({e})") from None
    gap = local.notna() & local.tz_localize(tz, ambiguous=dst, nonexistent="NaT").isna()
    if gap.any():
        report.notes.append(
            f"{int(gap.sum())} {what} value(s) fell in the spring-forward gap and "
            "were moved to the end of it"
        )
    ambiguous = local.notna() & (
        local.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward").isna()
    )
    if ambiguous.any():
        report.notes.append(
            f"{int(ambiguous.sum())} {what} value(s) repeated when clocks went back; "
            "read as daylight time (the first occurrence)"
        )
    return aware.tz_convert("UTC")


def _gpu_count(attempt: object) -> int:
    if not isinstance(attempt, dict) or not isinstance(attempt.get("detail"), list):
        return 0
    return sum(len(d.get("gpus") or ()) for d in attempt["detail"] if isinstance(d, dict))
