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
from sim.hardware import PROFILES
from sim.workload.importers import ImportReport
from sim.workload.table import COLUMNS

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
            f"{path}: option profile must be one of {', '.join(PROFILES)}, got {profile!r}"
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
) -> pd.DataFrame:
    """Jobs in the native columns, submit_time from the first submission, sorted (stable)."""
    submit_s = np.asarray(submit_s, np.float64)
    order = np.argsort(submit_s, kind="stable")
    start = submit_s[order[0]] if len(order) else 0.0
    n = len(order)
    frame = pd.DataFrame(
        {
            "job_id": np.asarray(job_id, dtype=object)[order],
            "submit_time": submit_s[order] - start,
            "gpus": np.asarray(gpus, np.int64)[order],
            "work_gpu_h": np.asarray(work_gpu_h, np.float64)[order],
            "profile": np.full(n, profile, dtype=object),
            "deadline": np.full(n, np.nan),
            "interruptible": np.zeros(n, bool),
            "checkpoint_gb": np.zeros(n),
            "data_gb": np.zeros(n),
            "origin_site": np.full(n, origin_site or "", dtype=object),
        },
        columns=list(COLUMNS),
    )
    return frame


def native_frame_utc(
    job_id: np.ndarray,
    submit_utc: pd.DatetimeIndex,
    gpus: np.ndarray,
    runtime_s: np.ndarray,
    *,
    profile: str,
    origin_site: str,
    report: ImportReport,
) -> pd.DataFrame:
    """Like `native_frame`, from UTC submission times and runtimes (s); sets the report's
    `imported` and `trace_start` (the first submission)."""
    report.imported = len(job_id)
    if len(job_id):
        t0 = submit_utc.min()
        report.trace_start = t0.isoformat().replace("+00:00", "Z")
        submit_s = (submit_utc - t0).total_seconds().to_numpy(dtype=float)
    else:
        submit_s = np.zeros(0)
    gpus = np.asarray(gpus, np.int64)
    return native_frame(
        job_id,
        submit_s,
        gpus,
        gpus * np.asarray(runtime_s) / 3600.0,
        profile=profile,
        origin_site=origin_site,
    )


def ceil_gpus(x: np.ndarray) -> np.ndarray:
    """ceil, tolerant of float noise (2.0000000001 GPUs is 2)."""
    return np.ceil(np.asarray(x, np.float64) - 1e-9).astype(np.int64)


REFERENCE_NOTE = (
    "the measured runtime on the trace's hardware is taken as run time on the reference GPU "
    "(A100-80GB at its maximum power limit)"
)


# --------------------------------------------------------------------------------------
