"""Philly, Helios and SWF importers on small hand-written files in the exact formats."""

# ruff: noqa: E501  (the Helios sample rows are the real format, longer than 100 characters)

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.errors import TraceError
from sim.workload.importers import import_trace
from sim.workload.table import COLUMNS


def _attempt(start, end, *machines):
    return {
        "start_time": start,
        "end_time": end,
        "detail": [{"ip": ip, "gpus": [f"gpu{i}" for i in range(n)]} for ip, n in machines],
    }


def _philly_job(jobid, status, submitted, attempts):
    return {
        "status": status,
        "vc": "ee9e8c",
        "jobid": jobid,
        "attempts": attempts,
        "submitted_time": submitted,
        "user": "ce2f4c",
    }


PHILLY_JOBS = [
    # 8 GPUs on one machine; two attempts of 74 s and 1 h
    _philly_job(
        "application_1",
        "Pass",
        "2017-10-07 01:11:39",
        [
            _attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", ("m47", 8)),
            _attempt("2017-10-07 01:13:30", "2017-10-07 02:13:30", ("m412", 8)),
        ],
    ),
    # submitted first (1 h earlier); 2 machines x 2 GPUs; 30 min
    _philly_job(
        "application_2",
        "Pass",
        "2017-10-07 00:11:39",
        [_attempt("2017-10-07 00:20:00", "2017-10-07 00:50:00", ("m1", 2), ("m2", 2))],
    ),
    _philly_job(
        "application_3",
        "Killed",
        "2017-10-07 03:00:00",
        [_attempt("2017-10-07 03:00:00", "2017-10-07 04:00:00", ("m3", 1))],
    ),
    _philly_job(
        "application_4",
        "Failed",
        "2017-10-07 03:00:00",
        [_attempt("2017-10-07 03:00:00", "2017-10-07 03:30:00", ("m3", 1))],
    ),
    _philly_job("application_5", "Pass", "2017-10-07 03:00:00", []),  # no attempts
    _philly_job(
        "application_6",
        "Pass",
        "2017-10-07 03:00:00",
        [_attempt("2017-10-07 03:00:00", None, ("m3", 1))],
    ),  # still running
    _philly_job(
        "application_7",
        "Pass",
        None,
        [_attempt("2017-10-07 03:00:00", "2017-10-07 03:30:00", ("m3", 1))],
    ),  # no submitted_time
    _philly_job(
        "application_8",
        "Pass",
        "2017-10-07 03:00:00",
        [_attempt("2017-10-07 03:00:00", "2017-10-07 03:30:00", ("m3", 0))],
    ),  # no GPUs
    _philly_job(
        "application_9",
        "Pass",
        "2017-10-07 03:00:00",
        [_attempt(None, "2017-10-07 03:30:00", ("m3", 1))],
    ),  # no start
    _philly_job(
        "application_1",
        "Pass",
        "2017-10-07 05:00:00",
        [_attempt("2017-10-07 05:00:00", "2017-10-07 05:30:00", ("m3", 1))],
    ),  # repeated id
]


def _write_philly(tmp_path, jobs, name="cluster_job_log"):
    path = tmp_path / name
    path.write_text(json.dumps(jobs, indent=4))
    return path


def _accounted(report):
    assert report.imported + sum(report.skipped.values()) == report.rows_read


def test_philly_values_units_and_time_zone(tmp_path):
    frame, report = import_trace("philly", _write_philly(tmp_path, PHILLY_JOBS))
    _accounted(report)
    assert list(frame.columns) == list(COLUMNS)
    assert list(frame["job_id"]) == ["application_2", "application_1"]
    # 2017-10-07 00:11:39 PDT (UTC-7) = 07:11:39 UTC
    assert report.trace_start == "2017-10-07T07:11:39Z"
    assert list(frame["submit_time"]) == [0.0, 3600.0]
    assert list(frame["gpus"]) == [4, 8]
    assert frame["work_gpu_h"].tolist() == pytest.approx([4 * 0.5, 8 * (74 + 3600) / 3600])
    assert frame["profile"].eq("mixed").all() and not frame["interruptible"].any()
    assert frame["deadline"].isna().all() and frame["origin_site"].eq("").all()
    assert (frame[["checkpoint_gb", "data_gb"]] == 0).all().all()
    assert frame["vc"].eq("ee9e8c").all() and frame["user"].eq("ce2f4c").all()  # kept
    assert report.rows_read == 10 and report.imported == 2
    assert report.skipped == {
        "status Killed (keep_failed=false)": 1,
        "status Failed (keep_failed=false)": 1,
        "no scheduling attempts": 1,
        "still running when the trace was taken (last attempt has no end_time)": 1,
        "submitted_time missing or not 'YYYY-MM-DD HH:MM:SS'": 1,
        "no GPUs in the last attempt": 1,
        "no attempt with both start_time and end_time (runtime='sum')": 1,
        "repeated jobid (the first one is kept)": 1,
    }
    assert any("reference-GPU" in note for note in report.notes)


def test_philly_keep_failed_runtime_modes_and_winter_time(tmp_path):
    path = _write_philly(tmp_path, PHILLY_JOBS)
    frame, report = import_trace("philly", path, keep_failed=True, profile="compute-bound")
    _accounted(report)
    assert report.imported == 4 and set(frame["profile"]) == {"compute-bound"}
    got = dict(zip(frame["job_id"], frame["work_gpu_h"], strict=True))
    assert got["application_3"] == pytest.approx(1.0) and got["application_4"] == 0.5
    last, _ = import_trace("philly", path, runtime="last")
    span, _ = import_trace("philly", path, runtime="span")
    assert last.set_index("job_id")["work_gpu_h"]["application_1"] == pytest.approx(8.0)
    # span: 01:12:09 to 02:13:30 = 3681 s
    assert span.set_index("job_id")["work_gpu_h"]["application_1"] == pytest.approx(8 * 3681 / 3600)
    # PST (UTC-8) after 2017-11-05; a job across the change runs 1 h more than wall clocks say
    winter = [
        _philly_job(
            "w",
            "Pass",
            "2017-12-01 00:00:00",
            [_attempt("2017-11-05 00:30:00", "2017-11-05 02:30:00", ("m1", 1))],
        ),
    ]
    frame, report = import_trace("philly", _write_philly(tmp_path, winter, "w.json"))
    assert report.trace_start == "2017-12-01T08:00:00Z"
    assert frame["work_gpu_h"].tolist() == [3.0]


def test_philly_daylight_saving_edges(tmp_path):
    jobs = [
        # 01:30 happens twice on 2017-11-05: read as PDT (08:30 UTC); ends 03:00 PST (11:00 UTC)
        _philly_job(
            "fall",
            "Pass",
            "2017-11-05 01:30:00",
            [_attempt("2017-11-05 01:30:00", "2017-11-05 03:00:00", ("m1", 1))],
        ),
        # 02:30 does not exist on 2017-03-12: moved to 03:00 PDT (10:00 UTC)
        _philly_job(
            "spring",
            "Pass",
            "2017-03-12 02:30:00",
            [_attempt("2017-03-12 02:30:00", "2017-03-12 03:30:00", ("m1", 1))],
        ),
    ]
    frame, report = import_trace("philly", _write_philly(tmp_path, jobs, "dst"))
    _accounted(report)
    assert report.trace_start == "2017-03-12T10:00:00Z"
    work = frame.set_index("job_id")["work_gpu_h"]
    assert work["fall"] == pytest.approx(2.5) and work["spring"] == pytest.approx(0.5)
    notes = " ".join(report.notes)
    assert "1 submitted_time value(s) repeated when clocks went back" in notes
    assert "1 start_time value(s) fell in the spring-forward gap" in notes


def test_philly_malformed_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text('[\n  {"jobid": "a",\n  "status": "Pass"\n  oops\n]')
    with pytest.raises(TraceError, match=r"bad:4: not valid JSON"):
        import_trace("philly", bad)
    (tmp_path / "obj").write_text('{"jobid": "a"}')
    with pytest.raises(TraceError, match="JSON array"):
        import_trace("philly", tmp_path / "obj")
    job = _philly_job("x", "Pass", "2017-10-07 00:00:00", [])
    del job["submitted_time"]
    path = _write_philly(tmp_path, [PHILLY_JOBS[0], job], "nokey")
    with pytest.raises(TraceError, match=r"nokey: \[1\]: job 'x' lacks key\(s\) 'submitted_time'"):
        import_trace("philly", path)
    with pytest.raises(TraceError, match="runtime must be one of"):
        import_trace("philly", path, runtime="max")


HELIOS = """\
job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1425511,uXBbc,vcJkd,j1,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0
1425512,uVMrF,vchbv,j2,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0
1425513,uzqls,vcpDC,j3,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0
1425514,uzqls,vcpDC,j4,0,8,1,COMPLETED,2020-06-09 18:41:29,2020-06-09 18:41:29,2020-06-09 18:51:29,600,0
1425515,uzqls,vcpDC,j5,8,64,1,COMPLETED,2020-06-09 18:40:01,2020-06-09 19:00:00,2020-06-09 21:00:00,,1199
1425516,uzqls,vcpDC,j6,2,8,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:42:00,0,0
1425517,uzqls,vcpDC,j7,x,8,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:43:00,60,0
1425518,uzqls,vcpDC,j8,2,8,1,COMPLETED,not a time,2020-06-09 18:42:00,2020-06-09 18:43:00,60,0
1425519,uzqls,vcpDC,j9,2,8,1,RUNNING,2020-06-09 18:42:00,2020-06-09 18:42:00,,,0
1425511,uzqls,vcpDC,j10,2,8,1,COMPLETED,2020-06-09 18:50:00,2020-06-09 18:50:00,2020-06-09 18:51:00,60,0
1425520,uzqls,vcpDC,j11,2,8,1,TIMEOUT,2020-06-09 18:50:00,2020-06-09 18:50:00,2020-06-09 18:51:00,60,0
"""


def test_helios_values_and_reasons(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS)
    frame, report = import_trace("helios", path, id_prefix="venus-")
    _accounted(report)
    assert list(frame["job_id"]) == ["venus-1425515", "venus-1425511"]
    # 2020-06-09 18:40:01 in Asia/Shanghai (UTC+8)
    assert report.trace_start == "2020-06-09T10:40:01Z"
    assert list(frame["submit_time"]) == [0.0, 60.0]
    assert list(frame["gpus"]) == [8, 1]
    # duration missing: end - start = 2 h; otherwise the duration column
    assert frame["work_gpu_h"].tolist() == pytest.approx([16.0, 36848 / 3600])
    assert list(frame["vc"]) == ["vcpDC", "vcJkd"] and list(frame["user"]) == ["uzqls", "uXBbc"]
    assert report.rows_read == 11 and report.skipped == {
        "state FAILED (keep_failed=false)": 1,
        "state CANCELLED (keep_failed=false)": 1,
        "state TIMEOUT (keep_failed=false)": 1,
        "CPU-only job (gpu_num 0)": 1,
        "zero or negative runtime": 1,
        "gpu_num missing or not a number": 1,
        "submit_time missing or not 'YYYY-MM-DD HH:MM:SS'": 1,
        "state RUNNING (not a terminal state dcsim imports)": 1,
        "repeated job_id (the first one is kept)": 1,
    }
    frame, report = import_trace("helios", path, keep_failed=True)
    _accounted(report)
    assert report.imported == 5
    assert set(frame["job_id"]) >= {"1425512", "1425513", "1425520"}


def test_helios_malformed_files(tmp_path):
    path = tmp_path / "no_state.csv"
    path.write_text("job_id,gpu_num,submit_time,duration\n1,1,2020-06-09 18:41:01,5\n")
    with pytest.raises(TraceError, match=r"no_state.csv:1: missing required column\(s\) 'state'"):
        import_trace("helios", path)
    path = tmp_path / "extra.csv"
    lines = HELIOS.splitlines()
    lines[3] += ",surplus"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"extra.csv: malformed CSV: line 4 has 14 fields"):
        import_trace("helios", path)


SWF = """\
; Version: 2.2
; Computer: Test cluster
; UnixStartTime: 1104566400
; TimeZoneString: Europe/Stockholm
; MaxProcs: 16
;
    1      0    10   3600     4   -1  -1     4   7200  -1  1  1  1 -1  1 -1 -1 -1
    2     60     0   1800    -1   -1  -1     8   7200  -1  1  1  1 -1  1 -1 -1 -1
    3    120     5     -1     2   -1  -1     2   7200  -1  1  1  1 -1  1 -1 -1 -1
    4    180     5      0     2   -1  -1     2   7200  -1  1  1  1 -1  1 -1 -1 -1
    5    240     5    100     2   -1  -1     2   7200  -1  0  1  1 -1  1 -1 -1 -1
    6    300     5    100     2   -1  -1     2   7200  -1  5  1  1 -1  1 -1 -1 -1
    7    360     5    100     2   -1  -1     2   7200  -1  3  1  1 -1  1 -1 -1 -1
    8    420     5    100    -1   -1  -1    -1   7200  -1  1  1  1 -1  1 -1 -1 -1
    9    480     5    360     3   -1  -1     4   7200  -1 -1  1  1 -1  1 -1 -1 -1
   10     -1     5    100     2   -1  -1     2   7200  -1  1  1  1 -1  1 -1 -1 -1
   11    540     5    abc     2   -1  -1     2   7200  -1  1  1  1 -1  1 -1 -1 -1
    1    600     5    100     2   -1  -1     2   7200  -1  1  1  1 -1  1 -1 -1 -1
; a comment between jobs

   12    660     5    100    32   -1  -1    32   7200  -1  1  1  1 -1  1 -1 -1 -1
"""


def test_swf_values_header_and_reasons(tmp_path):
    path = tmp_path / "log.swf"
    path.write_text(SWF)
    frame, report = import_trace("swf", path)
    _accounted(report)
    assert list(frame["job_id"]) == ["1", "2", "9", "12"]
    assert report.trace_start == "2005-01-01T08:00:00Z"  # 1104566400 = 2005-01-01T08:00Z
    assert list(frame["submit_time"]) == [0.0, 60.0, 480.0, 660.0]
    assert list(frame["gpus"]) == [4, 8, 3, 32]  # job 2: requested, as allocated is -1
    assert frame["work_gpu_h"].tolist() == pytest.approx([4.0, 4.0, 0.3, 32 * 100 / 3600])
    assert report.rows_read == 13 and report.skipped == {
        "run time missing (-1)": 1,
        "zero run time": 1,
        "status 0 failed (keep_failed=false)": 1,
        "status 5 cancelled (keep_failed=false)": 1,
        "partial execution (status 2/3/4: the job's line covers it)": 1,
        "no processors (field 5 and 8 -1 or 0)": 1,
        "submit time missing (-1)": 1,
        "a field is not a number": 1,
        "repeated job number (the first one is kept)": 1,
    }
    notes = " ".join(report.notes)
    assert "Europe/Stockholm" in notes and "MaxProcs 16: 1 kept job(s) use more" in notes
    assert "1 job(s) with unknown status (-1) kept" in notes

    frame, report = import_trace("swf", path, procs_per_gpu=4, keep_failed=True, id_prefix="s-")
    _accounted(report)
    assert report.imported == 6
    got = dict(zip(frame["job_id"], frame["gpus"], strict=True))
    assert got == {"s-1": 1, "s-2": 2, "s-5": 1, "s-6": 1, "s-9": 1, "s-12": 8}
    assert "3 job(s) rounded up to a whole number of GPUs" in " ".join(report.notes)
    requested, _ = import_trace("swf", path, procs="requested")
    assert requested.set_index("job_id")["gpus"]["9"] == 4


def test_swf_without_header_and_malformed_lines(tmp_path):
    path = tmp_path / "model.swf"
    path.write_text("1 100 -1 60 1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\n")
    frame, report = import_trace("swf", path)
    assert report.imported == 1 and "no UnixStartTime" in report.trace_start
    assert frame["submit_time"].tolist() == [0.0]
    for name, bad in (("long.swf", " 1"), ("short.swf", "")):
        lines = SWF.splitlines()
        lines[9] = lines[9].rsplit(" ", 1)[0] if not bad else lines[9] + bad
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        fields = 19 if bad else 17
        with pytest.raises(
            TraceError, match=rf"{name}:10: an SWF line has 18 fields, got {fields}"
        ):
            import_trace("swf", tmp_path / name)
    with pytest.raises(TraceError, match="procs_per_gpu must be > 0"):
        import_trace("swf", path, procs_per_gpu=0)


def test_empty_results_are_consistent(tmp_path):
    path = tmp_path / "none.swf"
    path.write_text("; UnixStartTime: 0\n")
    frame, report = import_trace("swf", path)
    assert len(frame) == 0 and report.rows_read == 0 and list(frame.columns) == list(COLUMNS)
    philly = _write_philly(tmp_path, [PHILLY_JOBS[2]], "killed")
    frame, report = import_trace("philly", philly)
    assert len(frame) == 0 and report.skipped == {"status Killed (keep_failed=false)": 1}
    assert np.issubdtype(frame["gpus"].dtype, np.integer)
