"""Standard Workload Format (SWF 2.2) importer: the Parallel Workloads Archive's logs.

One job per line, 18 whitespace-separated numeric fields, `-1` where a value is unknown;
lines starting with `;` are comments, the header ones of the form `; Key: value`
(www.cs.huji.ac.il/labs/parallel/workload/swf.html). Fields read:

| field | name | use |
|---|---|---|
| 1 | Job Number | `job_id` |
| 2 | Submit Time (s from the log's start) | `submit_time` |
| 4 | Run Time (s, wall clock) | runtime |
| 5 | Number of Allocated Processors | GPUs (`procs="allocated"`, default) |
| 8 | Requested Number of Processors | GPUs (`procs="requested"`, or when field 5 is -1) |
| 11 | Status | 1 completed, 0 failed, 5 cancelled, -1 unknown; 2/3/4 partial executions |

Header comments read: `UnixStartTime` (the epoch second submit time 0 refers to: it dates
the trace, `ImportReport.trace_start`), `TimeZoneString` (the site's zone, noted),
`MaxProcs` (noted, with the count of jobs using more processors).

Conversions (all reported in the `ImportReport`):

- GPUs: SWF logs count processors (CPU cores, or nodes). `gpus = ceil(procs /
  procs_per_gpu)` (option, default 1: one processor is one GPU); the number of jobs
  rounded up is noted.
- `work_gpu_h = gpus x run_time_h`: the measured runtime taken as reference-GPU time.
- Status: 1 is kept, 0 (failed) and 5 (cancelled) only with `keep_failed=True`, -1
  (unknown; synthetic models have no status) is kept and counted in the notes. 2, 3 and 4
  mark the partial executions of a checkpointed or swapped job, which the job's own line
  already covers: they are skipped so no work is counted twice.

Rows skipped with a reason: a field that is not a number, submit time or run time missing
(-1), zero run time (the log rounds to whole seconds: under 0.5 s), no processors, a status
not kept, repeated job number. A data line without exactly 18 fields raises `TraceError`
naming the file, the line and its content.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.models.hardware import PROFILES, profile_choices
from sim.workload.importers import ImportReport
from sim.workload.importers._common import apply_reasons, native_frame

__all__ = ["import_swf"]

N_FIELDS = 18
JOB, SUBMIT, WAIT, RUN, ALLOC, _CPU, _MEM, REQ, _REQT, _REQM, STATUS = range(11)
PROCS_MODES = ("allocated", "requested")
_HEADER_RE = re.compile(r"^;\s*([A-Za-z]+)\s*:\s*(.*?)\s*$")


def import_swf(
    path: Path,
    *,
    keep_failed: bool = False,
    profile: str = "mixed",
    origin_site: str = "",
    procs_per_gpu: float = 1,
    procs: str = "allocated",
    id_prefix: str = "",
) -> tuple[pd.DataFrame, ImportReport]:
    """Import an SWF log into native jobs (see the module doc)."""
    path = Path(path)
    if profile not in PROFILES:
        raise TraceError(f"profile must be one of {profile_choices()}, got {profile!r}")
    if procs not in PROCS_MODES:
        raise TraceError(f"procs must be one of {', '.join(PROCS_MODES)}, got {procs!r}")
    if not procs_per_gpu > 0:
        raise TraceError(f"procs_per_gpu must be > 0, got {procs_per_gpu!r}")
    header = _read_header(path)
    raw = _read_fields(path)
    n = len(raw)
    report = ImportReport("swf", str(path), rows_read=n)

    for col in raw.columns:
        if raw[col].dtype.kind not in "fiu":
            raw[col] = pd.to_numeric(raw[col], errors="coerce")
    values = raw.to_numpy(dtype=float)
    not_number = np.isnan(values).any(axis=1)
    submit = values[:, SUBMIT]
    run_s = values[:, RUN]
    status = values[:, STATUS]
    p_alloc, p_req = values[:, ALLOC], values[:, REQ]
    if procs == "allocated":
        fallback = (p_alloc <= 0) & (p_req > 0)
        p = np.where(fallback, p_req, p_alloc)
    else:
        fallback = np.zeros(n, bool)
        p = p_req
    gpus_f = np.ceil(np.round(p / procs_per_gpu, 9))

    reasons = [
        (not_number, "a field is not a number"),
        (np.isin(status, (2, 3, 4)), "partial execution (status 2/3/4: the job's line covers it)"),
        (~np.isin(status, (1, 0, 5, -1)), "unknown status (not -1, 0, 1, 2, 3, 4, 5)"),
    ]
    if not keep_failed:
        reasons += [
            (status == 0, "status 0 failed (keep_failed=false)"),
            (status == 5, "status 5 cancelled (keep_failed=false)"),
        ]
    reasons += [
        (submit < 0, "submit time missing (-1)"),
        (run_s < 0, "run time missing (-1)"),
        (run_s == 0, "zero run time"),
        (p <= 0, f"no processors (field {'5 and 8' if procs == 'allocated' else '8'} -1 or 0)"),
    ]
    keep = apply_reasons(report, reasons, n)
    job_num = np.where(keep, values[:, JOB], 0).astype(np.int64)
    dup = keep & pd.Index(job_num).duplicated(keep="first")
    report.skip("repeated job number (the first one is kept)", int(dup.sum()))
    keep &= ~dup

    # notes
    report.notes.append(
        f"gpus = ceil({'allocated (field 5)' if procs == 'allocated' else 'requested (field 8)'}"
        f" processors / procs_per_gpu={procs_per_gpu:g}); work_gpu_h = gpus x run time, the "
        "measured runtime taken as reference-GPU (A100-80GB) time"
    )
    if k := int((keep & fallback).sum()):
        report.notes.append(f"{k} job(s) without allocated processors use the requested number")
    rounded = keep & (gpus_f * procs_per_gpu != p)
    if k := int(rounded.sum()):
        report.notes.append(f"{k} job(s) rounded up to a whole number of GPUs")
    if k := int((keep & (status == -1)).sum()):
        report.notes.append(f"{k} job(s) with unknown status (-1) kept")
    if keep_failed and (k := int((keep & np.isin(status, (0, 5))).sum())):
        report.notes.append(f"{k} failed/cancelled job(s) kept with their measured runtime")
    if "MaxProcs" in header:
        max_procs = pd.to_numeric(header["MaxProcs"], errors="coerce")
        over = int((keep & (p > max_procs)).sum()) if max_procs > 0 else 0
        report.notes.append(
            f"MaxProcs {header['MaxProcs']}" + (f": {over} kept job(s) use more" if over else "")
        )
    if "TimeZoneString" in header:
        zone = header["TimeZoneString"]
        report.notes.append(f"site time zone {zone} (UnixStartTime and submit times are UTC)")

    ids = (id_prefix + pd.Series(job_num[keep]).astype(str)).to_numpy(dtype=object)
    gpus = gpus_f[keep]
    frame, t0 = native_frame(
        ids,
        submit[keep],
        gpus,
        gpus * run_s[keep] / 3600.0,
        profile=profile,
        origin_site=origin_site,
        report=report,
    )
    unix_start = pd.to_numeric(header.get("UnixStartTime", ""), errors="coerce")
    if len(frame) and np.isfinite(unix_start):
        report.trace_start = (
            pd.Timestamp(float(unix_start) + t0, unit="s", tz="UTC")
            .isoformat()
            .replace("+00:00", "Z")
        )
    elif len(frame):
        report.trace_start = (
            f"{t0:g} s after the log's time 0 (no UnixStartTime header: absolute date unknown)"
        )
    return frame, report


def _read_header(path: Path) -> dict[str, str]:
    """`; Key: value` comments before the first data line (the SWF header)."""
    header: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                stripped = line.strip()
                if not stripped:
                    continue
                if not stripped.startswith(";"):
                    break
                if m := _HEADER_RE.match(stripped):
                    header.setdefault(m.group(1), m.group(2))
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    return header


def _read_fields(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(
            path,
            sep=r"\s+",
            comment=";",
            header=None,
            skip_blank_lines=True,
            encoding="utf-8",
            encoding_errors="replace",
        )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({i: pd.Series(dtype=float) for i in range(N_FIELDS)})
    except pd.errors.ParserError:
        raise TraceError(_bad_line(path)) from None
    if raw.shape[1] != N_FIELDS or raw[N_FIELDS - 1].isna().any():
        raise TraceError(_bad_line(path))
    return raw


def _bad_line(path: Path) -> str:
    """The first data line without exactly 18 fields (slow path, only on error)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            fields = line.split(";", 1)[0].split()
            if fields and len(fields) != N_FIELDS:
                return (
                    f"{path}:{number}: an SWF line has {N_FIELDS} fields, got "
                    f"{len(fields)}: {line.strip()[:120]!r}"
                )
    return f"{path}: an SWF line has {N_FIELDS} whitespace-separated fields"
