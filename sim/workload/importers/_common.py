"""Helpers the trace importers share: a strict CSV reader that names the bad line, per-row
skip-reason accounting, option checks, and the native frame builder."""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from sim.errors import TraceError
from sim.models.hardware import PROFILES, profile_choices
from sim.workload.importers import ImportReport
from sim.workload.table import COLUMNS, job_value_checks

FRACTIONAL = ("round_up", "share")


def read_csv_strict(
    path: Path,
    columns: Sequence[str],
    numeric: Iterable[str],
    *,
    header: bool,
) -> pd.DataFrame:
    """Read `columns` of a CSV with pyarrow: numbers as float64 (empty = NaN), rest as text.

    `header=False`: the file has exactly these columns and no header line.
    `header=True`: the first line names the columns; `columns` must be among them (others
    are ignored). Any row with a wrong number of fields or a number column holding text
    raises `TraceError` naming the file, the line and the value.
    """
    numeric = set(numeric)
    types = {c: (pa.float64() if c in numeric else pa.string()) for c in columns}
    read = pacsv.ReadOptions(column_names=None if header else list(columns), block_size=1 << 24)
    if header:
        present = _header(path)
        missing = [c for c in columns if c not in present]
        if missing:
            raise TraceError(
                f"{path}:1: missing column(s) {', '.join(map(repr, missing))} "
                f"(columns present: {', '.join(present)})"
            )
    convert = pacsv.ConvertOptions(
        column_types=types, include_columns=list(columns), strings_can_be_null=False
    )
    try:
        table = pacsv.read_csv(path, read_options=read, convert_options=convert)
    except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
            raise TraceError(f"{path}: empty file, expected columns {', '.join(columns)}") from None
        _locate_bad_line(path, columns, numeric, header, str(e))
        raise AssertionError("unreachable") from None
    for c in columns:
        if c not in numeric:
            i = table.schema.get_field_index(c)
            table = table.set_column(i, c, pc.utf8_trim_whitespace(table.column(c)))
    return table.to_pandas()


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8", errors="replace")
    return open(path, newline="", encoding="utf-8", errors="replace")


def _header(path: Path) -> list[str]:
    with _open_text(path) as f:
        for row in csv.reader(f):
            if row:
                return [c.strip() for c in row]
    raise TraceError(f"{path}: empty file, expected a header line")


_NULLS = {"", "nan", "NaN", "-nan", "-NaN", "NULL", "null", "N/A", "NA", "#N/A", "n/a", "None"}


def _locate_bad_line(path, columns, numeric, header, arrow_msg) -> None:
    """Slow path, only after pyarrow refused the file: find and report the first bad line."""
    with _open_text(path) as f:
        reader = csv.reader(f)
        names: list[str] | None = None
        for row in reader:
            line = reader.line_num
            if not row:
                continue
            if header and names is None:
                names = [c.strip() for c in row]
                continue
            expect = len(names) if names is not None else len(columns)
            if len(row) != expect:
                raise TraceError(
                    f"{path}:{line}: expected {expect} fields "
                    f"({', '.join(names or columns)}), got {len(row)}: {','.join(row)!r}"
                )
            cells = dict(zip(names or columns, row, strict=True))
            for c in columns:
                value = cells[c].strip()
                if c in numeric and value not in _NULLS:
                    try:
                        float(value)
                    except ValueError:
                        raise TraceError(
                            f"{path}:{line}: {c} must be a number, got {cells[c]!r}"
                        ) from None
    raise TraceError(f"{path}: unreadable CSV: {arrow_msg}")


class RowReasons:
    """Assigns each row at most one skip reason, first reason wins, then fills the report."""

    def __init__(self, n: int) -> None:
        self.code = np.zeros(n, np.int32)
        self.reasons: list[str] = []

    def mark(self, mask: np.ndarray | pd.Series, reason: str) -> None:
        mask = np.asarray(mask, dtype=bool) & (self.code == 0)
        if mask.any():
            if reason in self.reasons:
                idx = self.reasons.index(reason) + 1
            else:
                self.reasons.append(reason)
                idx = len(self.reasons)
            self.code[mask] = idx

    @property
    def ok(self) -> np.ndarray:
        return self.code == 0

    def fill(self, report: ImportReport) -> None:
        counts = np.bincount(self.code, minlength=len(self.reasons) + 1)
        for i, reason in enumerate(self.reasons, start=1):
            report.skip(reason, int(counts[i]))


def apply_reasons(
    report: ImportReport, reasons: list[tuple[np.ndarray, str]], n: int
) -> np.ndarray:
    """Skip each of `n` rows for the first (mask, reason) that applies; return the kept rows."""
    why = RowReasons(n)
    for mask, reason in reasons:
        why.mark(mask, reason)
    why.fill(report)
    return why.ok


def check_common(path: Path, profile: str, fractional: str | None = None) -> None:
    if profile not in PROFILES:
        raise TraceError(
            f"{path}: option profile must be one of {profile_choices()}, got {profile!r}"
        )
    if fractional is not None and fractional not in FRACTIONAL:
        raise TraceError(
            f"{path}: option fractional must be one of {', '.join(FRACTIONAL)}, got {fractional!r}"
        )


def native_frame(
    job_id: np.ndarray,
    submit_s: np.ndarray,
    gpus: np.ndarray,
    work_gpu_h: np.ndarray,
    *,
    profile: str,
    origin_site: str,
    report: ImportReport,
    extra: dict[str, np.ndarray] | None = None,
) -> tuple[pd.DataFrame, float]:
    """Jobs in the native columns, sorted by submission (stable), and time 0 of their
    `submit_time`: the first kept submission, in the seconds of `submit_s` (NaN if none).
    `extra`: per row, the values of further native columns the trace gives
    (`allowed_gpu_models`, `vc`, `user`; columns not given are left empty).

    Rows the native loader would refuse (`sim.workload.table.job_value_checks`: a GPU count
    that is not a positive integer or beyond any cluster, an infinite or absurd runtime, a
    submission that is not a finite time) are skipped, each counted in `report` under the
    rule it breaks; `report.imported` is the number of rows returned. `gpus` may be float
    (whole numbers): it is cast to int64 only after the check.
    """
    submit_s = np.asarray(submit_s, np.float64)
    gpus_f = np.asarray(gpus, np.float64)
    work = np.asarray(work_gpu_h, np.float64)
    n = len(submit_s)
    finite = submit_s[np.isfinite(submit_s)]
    relative = submit_s - (finite.min() if finite.size else 0.0)
    zero = np.zeros(n)
    checks = job_value_checks(relative, gpus_f, work, zero, zero)
    keep = apply_reasons(report, [(bad, rule) for _, rule, bad in checks], n)
    kept = np.flatnonzero(keep)
    order = kept[np.argsort(submit_s[kept], kind="stable")]
    origin = float(submit_s[order[0]]) if len(order) else float("nan")
    report.imported = len(order)
    n = len(order)
    frame = pd.DataFrame(
        {
            "job_id": np.asarray(job_id, dtype=object)[order],
            "submit_time": submit_s[order] - origin if n else np.zeros(0),
            "gpus": gpus_f[order].astype(np.int64),
            "work_gpu_h": work[order],
            "profile": np.full(n, profile, dtype=object),
            "deadline": np.full(n, np.nan),
            "interruptible": np.zeros(n, bool),
            "checkpoint_gb": np.zeros(n),
            "data_gb": np.zeros(n),
            "origin_site": np.full(n, origin_site or "", dtype=object),
        },
        columns=list(COLUMNS),
    )
    for name, values in (extra or {}).items():
        frame[name] = np.asarray(values, object)[order]
    return frame, origin


def native_frame_utc(
    job_id: np.ndarray,
    submit_utc: pd.DatetimeIndex,
    gpus: np.ndarray,
    runtime_s: np.ndarray,
    *,
    profile: str,
    origin_site: str,
    report: ImportReport,
    extra: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Like `native_frame`, from UTC submission times and runtimes (s); sets the report's
    `trace_start` (the first kept submission)."""
    if len(job_id):
        t0 = submit_utc.min()
        submit_s = (submit_utc - t0).total_seconds().to_numpy(dtype=float)
    else:
        submit_s = np.zeros(0)
    gpus = np.asarray(gpus, np.float64)
    frame, origin_s = native_frame(
        job_id,
        submit_s,
        gpus,
        gpus * np.asarray(runtime_s, np.float64) / 3600.0,
        profile=profile,
        origin_site=origin_site,
        report=report,
        extra=extra,
    )
    if len(frame):
        first = t0 + pd.Timedelta(seconds=origin_s)
        report.trace_start = first.isoformat().replace("+00:00", "Z")
    return frame


def ceil_gpus(x: np.ndarray) -> np.ndarray:
    """ceil, tolerant of float noise (2.0000000001 GPUs is 2); float64, so that a count no
    int64 holds (a corrupt cell) reaches `native_frame`'s check instead of wrapping around."""
    return np.ceil(np.asarray(x, np.float64) - 1e-9)


REFERENCE_NOTE = (
    "the measured runtime on the trace's hardware is taken as run time on the reference GPU "
    "(A100-80GB at its maximum power limit)"
)


# --------------------------------------------------------------------------------------
