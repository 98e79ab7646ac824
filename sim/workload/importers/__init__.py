"""Importers of public GPU-cluster traces into the native job format.

Each importer reads one trace format and returns the jobs as a DataFrame in the native
format (`sim.workload.COLUMNS`; docs/job-format.md) with `submit_time` in seconds since the
trace's first kept submission, sorted by it, plus an `ImportReport` that accounts for every
row it read: imported + skipped (with a reason each) = rows read. Nothing is dropped
silently. Importers are vectorised (pandas/pyarrow): a million-row trace imports in
seconds.

Common options: `keep_failed` (keep failed and killed jobs, default false), `profile`
(the workload profile of every job, default "mixed"), `origin_site` (default: empty, the
scenario's first site). Format-specific options are documented in each module.
"""

from __future__ import annotations

import importlib
import inspect
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from sim.errors import TraceError
from sim.util.atomic import write_atomic
from sim.util.text import check_text_file
from sim.workload.table import COLUMNS

FORMATS: dict[str, str] = {
    "philly": "sim.workload.importers.philly:import_philly",
    "helios": "sim.workload.importers.helios:import_helios",
    "pai2020": "sim.workload.importers.pai2020:import_pai2020",
    "alibaba2023": "sim.workload.importers.alibaba2023:import_alibaba2023",
    "swf": "sim.workload.importers.swf:import_swf",
    "gaia": "sim.workload.importers.gaia:import_gaia",
    "native": "sim.workload.importers.native:import_native",
}
"""Format name -> `module:function(path, **options) -> (DataFrame, ImportReport)`."""


@dataclass
class ImportReport:
    """What an import did with every row it read."""

    format: str
    source: str
    rows_read: int = 0
    imported: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    """Reason -> number of rows not imported for it."""
    notes: list[str] = field(default_factory=list)
    """Conversions and assumptions worth knowing (units, clipped values, rounding)."""
    trace_start: str | None = None
    """What submit_time 0 is: an ISO UTC time, or a description for traces with relative times."""

    ROWS: ClassVar[str] = "jobs"
    """What the imported rows are, in the printed report."""
    TIME_ZERO: ClassVar[str] = "submit_time 0"
    """What `trace_start` dates, in the printed report."""

    def skip(self, reason: str, rows: int) -> None:
        if rows:
            self.skipped[reason] = self.skipped.get(reason, 0) + int(rows)

    def check(self) -> None:
        """Raise if the rows do not add up (a bug in the importer, not in the trace)."""
        accounted = self.imported + sum(self.skipped.values())
        if accounted != self.rows_read:
            raise AssertionError(
                f"{self.format} import of {self.source}: {self.rows_read} rows read but "
                f"{self.imported} imported + {sum(self.skipped.values())} skipped"
            )

    def render(self) -> str:
        lines = [
            f"{self.source} ({self.format}): {self.rows_read:,} rows read, "
            f"{self.imported:,} {self.ROWS} imported"
        ]
        lines += [f"  skipped {n:,}: {reason}" for reason, n in sorted(self.skipped.items())]
        if self.trace_start:
            lines.append(f"  {self.TIME_ZERO} = {self.trace_start}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def import_trace(fmt: str, path: str | Path, **options: Any) -> tuple[pd.DataFrame, ImportReport]:
    """Import `path` in format `fmt` (one of `FORMATS`); returns native jobs and the report."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; formats: {', '.join(FORMATS)}")
    path = Path(path)
    module, func = FORMATS[fmt].split(":")
    importer = getattr(importlib.import_module(module), func)
    accepted = inspect.signature(importer).parameters
    unknown = [k for k in options if k not in accepted or k == "path"]
    if unknown:
        names = [k for k in accepted if k != "path"]
        raise TraceError(f"{fmt} import: unknown option(s) {unknown}; options: {names or 'none'}")
    with reading(path):
        frame, report = importer(path, **options)
    report.check()
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise AssertionError(f"{fmt} importer returned no columns {missing}")
    return frame[list(COLUMNS)].reset_index(drop=True), report


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Run an importer on `path`, turning what stops any reader into a one-line `TraceError`
    naming the file: a missing file, a directory, no permission to read, a corrupt or
    truncated gzip file; and a text file that is not UTF-8 (`sim.util.text.check_text_file`,
    the one encoding check of every importer)."""
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    try:
        if not path.name.lower().endswith(".parquet"):
            check_text_file(path, "trace")
        yield
    except (OSError, EOFError, zlib.error) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise TraceError(f"{path}: cannot read: {' '.join(reason.split())}") from None


def write_native(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write native jobs to `.parquet` or `.csv`/`.csv.gz`, atomically."""
    out = Path(out)
    if out.suffix == ".parquet":
        write_atomic(out, lambda tmp: frame.to_parquet(tmp, index=False))
    elif out.name.endswith((".csv", ".csv.gz")):
        gz = "gzip" if out.suffix == ".gz" else None
        write_atomic(out, lambda tmp: frame.to_csv(tmp, index=False, compression=gz))
    else:
        raise TraceError(f"{out}: write .parquet, .csv or .csv.gz")
    return out
