"""The event table's job column on disk and in memory.

In memory (`Results.events`) the `job` column is a categorical of the job ids whose
categories are `jobs.job_id` in job order, so its codes are the jobs' rows (-1: an event of
no job). `events.parquet` stores those codes and not the ids: its third column is
`job_index` (int32), the row in `jobs.parquet` of the event's job, -1 for none. A million
ids cost the Parquet writer about 100 MB as a dictionary and nothing as an index. Reading
decodes the index into the same categorical (`events_from_file`): one int32 array and the
jobs' own ids, no string per row. Folders written before this format have a `job` column
of ids; they are read as written.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.util.records import job_categorical

__all__ = ["JOB_INDEX", "events_for_file", "events_from_file"]

JOB_INDEX = "job_index"
"""The events file's column of job rows (int32 index into `jobs.parquet`'s `job_id`, -1:
none), in place of the table's `job`."""


def events_for_file(events: pd.DataFrame, job_ids: pd.Series | np.ndarray) -> pd.DataFrame:
    """`events` as `events.parquet` holds it: `job` replaced, in its place, by `JOB_INDEX`,
    the row of each event's job in `job_ids`. ValueError if an event names a job not among
    `job_ids`."""
    columns = {
        (JOB_INDEX if name == "job" else name): (
            _job_rows(events["job"], job_ids) if name == "job" else events[name]
        )
        for name in events.columns
    }
    return pd.DataFrame(columns, copy=False)


def events_from_file(events: pd.DataFrame, job_ids: pd.Series | np.ndarray) -> pd.DataFrame:
    """The events table from `events.parquet`'s contents: `JOB_INDEX` decoded, in its
    place, into the `job` categorical over `job_ids`; an old file's `job` column as it is."""
    if JOB_INDEX not in events.columns:
        return events
    columns = {
        ("job" if name == JOB_INDEX else name): (
            job_categorical(events[name].to_numpy(np.int32), job_ids)
            if name == JOB_INDEX
            else events[name]
        )
        for name in events.columns
    }
    return pd.DataFrame(columns, copy=False)


def _job_rows(job: pd.Series, job_ids: pd.Series | np.ndarray) -> np.ndarray:
    """Each entry of `job` (an id, missing: none) as its row in `job_ids` (-1: none), int32.
    A categorical over `job_ids` itself (what a run makes) gives its codes, without looking
    up a million texts."""
    ids = pd.Index(job_ids)
    if isinstance(job.dtype, pd.CategoricalDtype) and job.cat.categories.equals(ids):
        return job.cat.codes.to_numpy().astype(np.int32)
    rows = ids.get_indexer(job)
    unknown = (rows < 0) & job.notna().to_numpy()
    if unknown.any():
        raise ValueError(f"events: job {job[unknown].iloc[0]!r} is not in the jobs table's job_id")
    return rows.astype(np.int32)
