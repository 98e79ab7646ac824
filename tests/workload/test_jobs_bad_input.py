"""Job files and trace importers given bad input: non-finite or absurd numbers are a one-line
`TraceError` naming the file, line and value (the native loader) or skipped and counted
(the importers), so an importer never writes a row the native loader refuses; a directory
or an unreadable file is a one-line `TraceError` naming it."""

# ruff: noqa: E501  (the sample rows are the real formats, longer than 100 characters)

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.errors import TraceError
from sim.workload.importers import FORMATS, import_trace, write_native
from sim.workload.native import read_job_frame
from sim.workload.table import MAX_JOB_GPUS, MAX_JOB_RUNTIME_H, job_value_checks
from tests.conftest import make_scenario, scenario_jobs

# --- the native loader -----------------------------------------------------------------------

GOOD = "a,0,1,1"


def job_file(
    tmp_path: Path, *rows: str, columns: str = "job_id,submit_time,gpus,work_gpu_h"
) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([columns, *rows]) + "\n")
    return path


BAD_NUMBERS = [
    (
        "gpus NaN",
        "b,0,nan,1",
        "jobs.csv:3: gpus must be a positive integer, at most 1,048,576, got 'nan'",
    ),
    (
        "gpus inf",
        "b,0,inf,1",
        "jobs.csv:3: gpus must be a positive integer, at most 1,048,576, got 'inf'",
    ),
    (
        "gpus beyond any cluster",
        "b,0,2e6,1",
        "jobs.csv:3: gpus must be a positive integer, at most 1,048,576, got '2e6'",
    ),
    (
        "work NaN",
        "b,0,1,NaN",
        "jobs.csv:3: work_gpu_h must be a positive number of GPU-hours, got 'NaN'",
    ),
    (
        "work -inf",
        "b,0,1,-inf",
        "jobs.csv:3: work_gpu_h must be a positive number of GPU-hours, got '-inf'",
    ),
    (
        "1e12 hours",
        "b,0,1,1e12",
        "jobs.csv:3: work_gpu_h / gpus (the runtime on reference GPUs) must be at most 100,000 h, got '1e12'",
    ),
    (
        "submit NaN",
        "b,nan,1,1",
        "jobs.csv:3: submit_time must be seconds since the scenario start or an ISO-8601 datetime with UTC offset, got 'nan'",
    ),
    ("submit inf", "b,inf,1,1", "jobs.csv:3: submit_time must be within the scenario's horizon"),
]


@pytest.mark.parametrize("case, row, message", BAD_NUMBERS, ids=[c[0] for c in BAD_NUMBERS])
def test_non_finite_or_absurd_numbers_in_a_job_file_name_file_line_and_value(
    tmp_path, case, row, message
):
    path = job_file(tmp_path, GOOD, row)
    with pytest.raises(TraceError) as e:
        scenario_jobs(path, make_scenario(workload={"file": str(path), "oversized": "reject"}))
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("column", ["checkpoint_gb", "data_gb"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e9"])
def test_non_finite_or_absurd_sizes_are_refused(tmp_path, column, value):
    path = job_file(
        tmp_path,
        f"{GOOD},0",
        f"b,0,1,1,{value}",
        columns=f"job_id,submit_time,gpus,work_gpu_h,{column}",
    )
    with pytest.raises(
        TraceError,
        match=rf"jobs.csv:3: {column} must be a number >= 0 \(GB\), at most 10,000,000, got '{value}'",
    ):
        scenario_jobs(path, make_scenario(workload={"file": str(path)}))


def test_parquet_nan_and_inf_cells_name_the_row(tmp_path):
    path = tmp_path / "jobs.parquet"
    pd.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "submit_time": [0.0, 1.0, 2.0],
            "gpus": [1.0, 1.0, np.inf],
            "work_gpu_h": [1.0, np.nan, 1.0],
        }
    ).to_parquet(path)
    with pytest.raises(
        TraceError,
        match=r"jobs.parquet: row 2: work_gpu_h must be a positive number of GPU-hours, got nan \[and 1 more bad row\(s\)\]$",
    ):
        scenario_jobs(path, make_scenario(workload={"file": str(path)}))


def test_an_oversized_job_beyond_any_cluster_is_refused_even_when_oversized_jobs_are_rejected(
    tmp_path,
):
    path = job_file(tmp_path, GOOD, "b,0,1e30,1")
    scenario = make_scenario(workload={"file": str(path), "oversized": "reject"})
    with pytest.raises(
        TraceError,
        match="jobs.csv:3: gpus must be a positive integer, at most 1,048,576, got '1e30'",
    ):
        scenario_jobs(path, scenario)


def test_the_bounds_hold_exactly_at_their_limits():
    gpus = np.array([MAX_JOB_GPUS, MAX_JOB_GPUS + 1, 1, 1])
    work = np.array([1.0, 1.0, MAX_JOB_RUNTIME_H, MAX_JOB_RUNTIME_H * 1.000001])
    bad = {
        rule: mask.tolist()
        for _, rule, mask in job_value_checks(np.zeros(4), gpus, work, np.zeros(4), np.zeros(4))
    }
    assert [v for v in bad.values() if any(v)] == [
        [False, True, False, False],
        [False, False, False, True],
    ]


# --- importers: bad rows are skipped and counted, never written --------------------------

HELIOS = """\
job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,u,vc,good,2,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
2,u,vc,neg,-4,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
3,u,vc,nan,nan,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
4,u,vc,inf,inf,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
5,u,vc,huge,1e30,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
6,u,vc,forever,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3.6e15,0
7,u,vc,infdur,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,inf,0
8,u,vc,nandur,1,1,1,COMPLETED,2020-06-09 18:41:01,,,nan,0
"""

SWF = """\
; UnixStartTime: 1000000000
    1      0     5   3600     4   -1   -1     4   -1   -1   1  1  1  1  1  1  -1  -1
    2     10     5   3600    -4   -1   -1    -4   -1   -1   1  1  1  1  1  1  -1  -1
    3     20     5    nan     4   -1   -1     4   -1   -1   1  1  1  1  1  1  -1  -1
    4     30     5    inf     4   -1   -1     4   -1   -1   1  1  1  1  1  1  -1  -1
    5     40     5   3600  1e30   -1   -1  1e30   -1   -1   1  1  1  1  1  1  -1  -1
    6    inf     5   3600     4   -1   -1     4   -1   -1   1  1  1  1  1  1  -1  -1
"""

OPENB = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
good,1000,1000,1,1000,,LS,Succeeded,0,3600,0
neg,1000,1000,-4,1000,,LS,Succeeded,0,3600,0
nan,1000,1000,nan,1000,,LS,Succeeded,0,3600,0
huge,1000,1000,1e30,1000,,LS,Succeeded,0,3600,0
forever,1000,1000,1,1000,,LS,Succeeded,0,inf,0
nanmilli,1000,1000,1,nan,,LS,Succeeded,0,3600,0
"""

PAI_TASKS = """\
good,worker,1.0,Terminated,0.0,3600.0,600.0,29.3,100.0,V100
neg,worker,1.0,Terminated,0.0,3600.0,600.0,29.3,-100.0,V100
nan,worker,nan,Terminated,0.0,3600.0,600.0,29.3,100.0,V100
huge,worker,1e30,Terminated,0.0,3600.0,600.0,29.3,100.0,V100
forever,worker,1.0,Terminated,0.0,inf,600.0,29.3,100.0,V100
"""

GAIA = "arrival_time,length,cpus\n0,1,4\n1,inf,4\n2,nan,4\ninf,1,4\n3,1,1e30\n4,1e12,4\n"


def philly() -> str:
    def job(jobid, start, end, gpus=2):
        detail = [{"ip": "m1", "gpus": [f"gpu{i}" for i in range(gpus)]}]
        return {"status": "Pass", "jobid": jobid, "submitted_time": start, "user": "u", "vc": "v",
                "attempts": [{"start_time": start, "end_time": end, "detail": detail}]}  # fmt: skip

    return json.dumps(
        [
            job("good", "2017-10-07 01:00:00", "2017-10-07 02:00:00"),
            job("centuries", "2017-10-07 01:00:00", "2200-01-01 00:00:00"),
            job("nan", float("nan"), "2017-10-07 02:00:00"),
        ]
    )


TRACES = {
    "helios": ("cluster_log.csv", HELIOS, {}, ["1"]),
    "swf": ("log.swf", SWF, {}, ["1"]),
    "alibaba2023": ("openb_pod_list_bad.csv", OPENB, {}, ["good"]),
    "pai2020": ("pai_task_table.csv", PAI_TASKS, {}, ["good"]),
    "gaia": ("bad.csv", GAIA, {"cpus_per_gpu": 1}, ["bad-0"]),
    "philly": ("cluster_job_log", philly(), {}, ["good"]),
}


@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_importers_skip_and_count_rows_the_native_loader_would_refuse(tmp_path, fmt):
    name, text, options, kept = TRACES[fmt]
    path = tmp_path / name
    path.write_text(text)
    frame, report = import_trace(fmt, path, **options)
    assert frame["job_id"].tolist() == kept
    assert report.imported == len(kept) and sum(report.skipped.values()) == report.rows_read - len(
        kept
    )
    # what the importer writes, the native loader reads
    out = write_native(frame, tmp_path / "jobs.csv")
    scenario = make_scenario(
        workload={"file": str(out), "oversized": "reject"}, duration_h=24 * 365.0
    )
    jobs = scenario_jobs(out, scenario)
    assert jobs.job_id.tolist() == kept
    assert np.isfinite(jobs.work_gpu_h).all() and (jobs.gpus > 0).all()


def test_a_skipped_row_names_the_rule_it_breaks(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS)
    _, report = import_trace("helios", path)
    assert report.skipped["gpus must be a positive integer, at most 1,048,576"] == 2  # inf, 1e30
    assert report.skipped["work_gpu_h must be a positive number of GPU-hours"] == 1  # inf duration
    assert (
        report.skipped[
            "work_gpu_h / gpus (the runtime on reference GPUs) must be at most 100,000 h"
        ]
        == 1
    )


def test_the_native_importer_refuses_a_row_the_loader_would_refuse(tmp_path):
    path = job_file(tmp_path, GOOD, "b,0,-2,1")
    with pytest.raises(
        TraceError,
        match=r"jobs.csv:3: gpus must be a positive integer, at most 1,048,576, got '-2'$",
    ):
        import_trace("native", path)
    with pytest.raises(TraceError, match=r"jobs.csv:3: gpus must be a positive integer"):
        read_job_frame(path)


# --- importers: files that cannot be read -------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_directory_given_as_a_trace_is_a_one_line_error(tmp_path, fmt):
    folder = tmp_path / "trace.csv"
    folder.mkdir()
    with pytest.raises(TraceError, match=r"trace.csv: is a directory, not a trace file$"):
        import_trace(fmt, folder)


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - {"philly"}))
def test_a_corrupt_gzip_trace_is_a_one_line_error(tmp_path, fmt):
    path = tmp_path / "trace.csv.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"not deflate data" * 4)  # a gzip header, then junk
    with pytest.raises(TraceError) as e:
        import_trace(fmt, path)
    assert str(e.value).startswith(f"{path}: cannot read") and "\n" not in str(e.value)


def test_a_job_file_whose_gzip_body_is_corrupt_is_a_one_line_error(tmp_path):
    path = tmp_path / "jobs.csv.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"not deflate data")
    with pytest.raises(TraceError, match=r"jobs\.csv\.gz: cannot read job file: Error -3"):
        read_job_frame(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_unreadable_trace_is_a_one_line_error(tmp_path, fmt):
    path = tmp_path / "trace.csv"
    path.write_text(GAIA)
    path.chmod(0)
    with pytest.raises(TraceError, match=r"trace.csv: cannot read"):
        import_trace(fmt, path)


def test_a_csv_row_with_fewer_fields_than_the_header_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "job_id,submit_time,gpus,work_gpu_h,origin_site\nj1,0,1,2,a\nj2,0,1,2\n",
        encoding="utf-8",
    )
    with pytest.raises(TraceError, match=r"jobs\.csv:3: expected 5 fields like the header, got 4$"):
        read_job_frame(path)


def test_a_deadline_that_cannot_be_meant_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "job_id,submit_time,gpus,work_gpu_h,deadline\nj1,0,1,2,7200\nj2,0,1,2,1e300\n",
        encoding="utf-8",
    )
    with pytest.raises(TraceError, match=r"jobs\.csv:3: deadline must be at most 100,000 h"):
        scenario_jobs(path, make_scenario())
