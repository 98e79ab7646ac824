"""Importers of LLM inference request traces into `requests.parquet` (docs/request-format.md),
and `dcsim workload describe` for request files.

Like the job importers (`sim.workload.importers`), each importer accounts for every row it
read: imported + skipped (with a reason each) = rows read; a structurally broken file (a
missing column, a row with the wrong number of fields) is a `TraceError` naming the file
and the line. Formats:

- `azure-llm`: the Azure LLM inference traces 2023 (`AzureLLMInferenceTrace_code.csv`,
  `_conv.csv`, gzipped or not): `TIMESTAMP,ContextTokens,GeneratedTokens`, the timestamp
  `YYYY-MM-DD HH:MM:SS.fffffff` without a zone (read as UTC).
- `requests-csv`: a CSV with a header naming `input_tokens`, `output_tokens` and one time
  column, `time_s` (seconds, kept as they are) or `timestamp` (ISO 8601; without a zone:
  UTC; made relative to the first kept request). Other columns are ignored.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.errors import TraceError
from sim.serving.requests import (
    MAX_TOKENS,
    RequestTable,
    read_requests,
    request_file_metadata,
)
from sim.workload.importers import ImportReport, reading
from sim.workload.importers._common import RowReasons, _header, read_csv_strict

REQUEST_FORMATS: dict[str, str] = {
    "azure-llm": "sim.serving.importers:import_azure_llm",
    "requests-csv": "sim.serving.importers:import_requests_csv",
}
"""Format name -> `module:function(path, **options) -> (RequestTable, RequestImportReport)`."""

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
CSV_TOKEN_COLUMNS = ("input_tokens", "output_tokens")
TIME_COLUMNS = ("time_s", "timestamp")


class RequestImportReport(ImportReport):
    """An `ImportReport` of requests: `trace_start` is the UTC time of arrival_s 0, set only
    when the source has clock times (None for `time_s` files)."""

    ROWS = "requests"
    TIME_ZERO = "arrival_s 0"


def import_requests(
    fmt: str, path: str | Path, **options: Any
) -> tuple[RequestTable, RequestImportReport]:
    """Import `path` in request format `fmt` (one of `REQUEST_FORMATS`)."""
    if fmt not in REQUEST_FORMATS:
        raise TraceError(f"unknown request format {fmt!r}; formats: {', '.join(REQUEST_FORMATS)}")
    path = Path(path)
    module, func = REQUEST_FORMATS[fmt].split(":")
    importer: Callable[..., tuple[RequestTable, RequestImportReport]] = getattr(
        importlib.import_module(module), func
    )
    accepted = [k for k in inspect.signature(importer).parameters if k != "path"]
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise TraceError(
            f"{fmt} import: unknown option(s) {unknown}; options: {accepted or 'none'}"
        )
    with reading(path):
        table, report = importer(path, **options)
    report.check()
    return table, report


def import_azure_llm(path: Path) -> tuple[RequestTable, RequestImportReport]:
    """An Azure LLM inference trace 2023 (code or conversation); no options."""
    path = Path(path)
    report = RequestImportReport("azure-llm", str(path))
    raw = read_csv_strict(path, AZURE_COLUMNS, (), header=True)
    report.rows_read = len(raw)
    why = RowReasons(len(raw))
    stamps = _timestamps(raw["TIMESTAMP"], "TIMESTAMP", why, "YYYY-MM-DD HH:MM:SS[.fffffff]")
    inp = _tokens(raw["ContextTokens"], "ContextTokens", why)
    out = _tokens(raw["GeneratedTokens"], "GeneratedTokens", why, zero_reason=True)
    why.fill(report)
    keep = why.ok
    report.notes.append("TIMESTAMP carries no time zone (the source states none): read as UTC")
    report.notes.append("input_tokens = ContextTokens, output_tokens = GeneratedTokens")
    return _finish(report, _relative(stamps, keep, report), inp, out, keep), report


def import_requests_csv(path: Path) -> tuple[RequestTable, RequestImportReport]:
    """A generic request CSV (`time_s` or `timestamp`, `input_tokens`, `output_tokens`)."""
    path = Path(path)
    present = _header(path)
    times = [c for c in TIME_COLUMNS if c in present]
    if len(times) != 1:
        which = "both time_s and timestamp: keep one" if times else "no time_s or timestamp"
        raise TraceError(
            f"{path}:1: {which} (a request CSV has one time column, time_s or timestamp; "
            f"columns present: {', '.join(present)})"
        )
    time_col = times[0]
    report = RequestImportReport("requests-csv", str(path))
    raw = read_csv_strict(path, (time_col, *CSV_TOKEN_COLUMNS), (), header=True)
    report.rows_read = len(raw)
    why = RowReasons(len(raw))
    if time_col == "time_s":
        t = _numbers(raw["time_s"], "time_s", why)
        why.mark(t < 0, "time_s negative")
    else:
        stamps = _timestamps(raw["timestamp"], "timestamp", why, "ISO 8601")
    inp = _tokens(raw["input_tokens"], "input_tokens", why)
    out = _tokens(raw["output_tokens"], "output_tokens", why, zero_reason=True)
    why.fill(report)
    keep = why.ok
    if time_col == "time_s":
        report.notes.append("times kept as they are: arrival_s 0 is time_s 0 of the file")
        arrival = t
    else:
        report.notes.append("timestamps without a time zone are read as UTC")
        arrival = _relative(stamps, keep, report)
    return _finish(report, arrival, inp, out, keep), report


# ------------------------------------------------------------------------ row parsing


def _numbers(raw: pd.Series, name: str, why: RowReasons) -> np.ndarray:
    """The column as float64; marks empty fields and text (NaN where marked)."""
    x = pd.to_numeric(raw, errors="coerce").to_numpy(np.float64)
    empty = (raw == "").to_numpy()
    why.mark(empty, f"{name} missing (empty field)")
    why.mark(~np.isfinite(x), f"{name} not a number")
    return np.where(np.isfinite(x), x, np.nan)


def _tokens(raw: pd.Series, name: str, why: RowReasons, *, zero_reason: bool = False) -> np.ndarray:
    x = _numbers(raw, name, why)
    with np.errstate(invalid="ignore"):
        bad = (x < 0) | (x != np.round(x)) | (x > MAX_TOKENS)
    why.mark(np.isfinite(x) & bad, f"{name} negative, fractional or above {MAX_TOKENS:.0e}")
    if zero_reason:
        why.mark(x == 0, f"{name} is 0 (a request generates at least one token)")
    return x


def _timestamps(raw: pd.Series, name: str, why: RowReasons, form: str) -> pd.Series:
    stamps = pd.to_datetime(raw, format="ISO8601", utc=True, errors="coerce")
    why.mark((raw == "").to_numpy(), f"{name} missing (empty field)")
    why.mark(stamps.isna().to_numpy(), f"{name} unparsable (expected {form})")
    return stamps


def _relative(stamps: pd.Series, keep: np.ndarray, report: ImportReport) -> np.ndarray:
    """Seconds since the first kept timestamp (NaN elsewhere); sets `trace_start`."""
    arrival = np.full(len(stamps), np.nan)
    if keep.any():
        kept = stamps[keep]
        t0 = kept.min()
        report.trace_start = t0.isoformat().replace("+00:00", "Z")
        arrival[keep] = (kept - t0).dt.total_seconds().to_numpy(np.float64)
    return arrival


def _finish(
    report: ImportReport, arrival: np.ndarray, inp: np.ndarray, out: np.ndarray, keep: np.ndarray
) -> RequestTable:
    arrival, inp, out = arrival[keep], inp[keep], out[keep]
    backwards = int(np.count_nonzero(np.diff(arrival) < 0))
    order = np.argsort(arrival, kind="stable")
    if backwards:
        report.notes.append(
            f"rows not in time order ({backwards:,} steps back): sorted by arrival (stable)"
        )
    report.imported = int(keep.sum())
    return RequestTable(arrival[order], inp[order].astype(np.int64), out[order].astype(np.int64))


# ------------------------------------------------------------------------ describe

FINE_BIN_S = 300.0


def describe_requests(path: str | Path) -> list[Any]:
    """`dcsim workload describe` of a request file: counts, token statistics, arrival rate
    by hour (by 5 minutes for traces up to 6 h; by hour of day beyond 2 days)."""
    from rich.table import Table

    table = read_requests(path)
    meta = request_file_metadata(path)
    n = len(table)
    span = table.span_s
    summary = Table(title=f"{path}")
    for col in ("requests", "span (h)", "mean rate (req/s)", "input tokens", "output tokens"):
        summary.add_column(col, justify="right")
    summary.add_row(
        f"{n:,}",
        f"{span / 3600:.3g}",
        f"{(n - 1) / span:.4g}" if span > 0 else "-",  # n arrivals span n - 1 gaps
        f"{int(table.input_tokens.sum()):,}",
        f"{int(table.output_tokens.sum()):,}",
    )
    if meta.get("trace_start"):
        summary.caption = f"arrival_s 0 = {meta['trace_start']}"
    tokens = Table(title="tokens per request")
    for col in ("", "min", "p10", "p50", "mean", "p90", "p99", "max"):
        tokens.add_column(col, justify="right")
    for name in ("input_tokens", "output_tokens"):
        x = getattr(table, name)
        if n == 0:
            tokens.add_row(name, *["-"] * 7)
            continue
        q = np.percentile(x, [10, 50, 90, 99])
        tokens.add_row(
            name,
            f"{x.min():,}",
            *(f"{v:,.0f}" for v in q[:2]),
            f"{x.mean():,.1f}",
            *(f"{v:,.0f}" for v in q[2:]),
            f"{x.max():,}",
        )
    return [summary, tokens, _rate_table(table, meta.get("trace_start"))]


def _rate_table(table: RequestTable, trace_start: str | None) -> Any:
    from rich.table import Table

    t = table.arrival_s
    start = t[0] if len(t) else 0.0
    span = table.span_s
    caption = None
    if span > 2 * 86400:
        title = "arrival rate by hour of day"
        # trace_start is stored only when arrival_s 0 is a clock time (timestamp imports)
        clock = pd.Timestamp(trace_start) if trace_start else None
        if clock is not None:
            hour0 = clock.hour + clock.minute / 60 + clock.second / 3600
            title += " (UTC)"
        else:
            hour0 = 0.0
            title += " (hours after arrival_s 0, mod 24)"
        hours = ((t / 3600 + hour0) // 1 % 24).astype(int)
        counts = np.bincount(hours, minlength=24)
        cover = np.bincount(
            ((np.arange(int(t[-1] // 3600) + 1) + hour0) // 1 % 24).astype(int), minlength=24
        )
        rates = counts / np.maximum(cover, 1) / 3600
        labels = [f"{h:02d}:00" for h in range(24)]
    else:
        bin_s = FINE_BIN_S if span <= 6 * 3600 else 3600.0
        title = f"arrival rate by {'5 minutes' if bin_s < 3600 else 'hour'} from the first request"
        k = ((t - start) // bin_s).astype(int)
        counts = np.bincount(k, minlength=1) if len(t) else np.zeros(1, int)
        rates = counts / bin_s
        unit, per = ("min", 60.0) if bin_s < 3600 else ("h", 3600.0)
        labels = [f"+{i * bin_s / per:g} {unit}" for i in range(len(counts))]
        last = span - bin_s * (len(counts) - 1)
        if last < bin_s:
            caption = f"req/s over whole bins; the last bin holds {last / 60:.3g} min of arrivals"
    out = Table(title=title, caption=caption)
    out.add_column("from")
    out.add_column("requests", justify="right")
    out.add_column("req/s", justify="right")
    out.add_column("")
    top = max(float(rates.max()), 1e-12) if len(rates) else 1.0
    for label, c, r in zip(labels, counts, rates, strict=True):
        out.add_row(label, f"{int(c):,}", f"{r:.3g}", "#" * int(round(40 * r / top)))
    return out
