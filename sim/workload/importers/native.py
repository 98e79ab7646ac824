"""The native job format as an import source: checks its columns and the numbers every job
obeys (`sim.workload.table.job_value_checks`; a bad row is a `TraceError`, as when a
scenario loads the file), fills the optional columns with their defaults, and converts
between CSV and Parquet. What depends on a scenario (its horizon, sites and GPU pools) is
checked when a scenario loads the file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sim.workload.importers import ImportReport
from sim.workload.native import read_job_frame
from sim.workload.table import COLUMNS, OPTIONAL_DEFAULTS


def import_native(path: Path) -> tuple[pd.DataFrame, ImportReport]:
    frame = read_job_frame(path)
    report = ImportReport("native", str(path), rows_read=len(frame), imported=len(frame))
    for column in COLUMNS:
        if column not in frame.columns:
            default = OPTIONAL_DEFAULTS[column]
            frame[column] = "" if default is None else str(default).lower()
    report.notes.append(
        "submit times, sites and pool sizes are checked when a scenario loads the file"
    )
    return frame[list(COLUMNS)], report
