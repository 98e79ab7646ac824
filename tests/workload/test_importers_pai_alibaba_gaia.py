"""PAI 2020, Alibaba GPU 2023 and GAIA importers on small hand-written files in the exact
published formats, including unusable rows: imported + skipped = rows read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.errors import TraceError
from sim.workload.importers import import_trace

# ---------------------------------------------------------------- PAI 2020 (header-less)

PAI_JOBS = """\
j1,i1,u1,Terminated,100.0,500.0
j2,i2,u1,Failed,200.0,300.0
j3,i3,u2,Running,300.0,
j4,i4,u2,Waiting,400.0,
j5,i5,u3,Terminated,50.0,1000.0
j7,i7,u3,Terminated,60.0,70.0
"""

PAI_TASKS = """\
j1,ps,1.0,Terminated,110.0,500.0,600.0,29.3,,
j1,worker,2.0,Terminated,110.0,470.0,400.0,29.3,50.0,V100
j2,tensorflow,1.0,Failed,210.0,300.0,600.0,29.3,100.0,P100
j3,worker,1.0,Running,310.0,,600.0,29.3,200.0,T4
j4,worker,1.0,Waiting,,,600.0,29.3,100.0,
j5,worker,1.0,Terminated,60.0,1000.0,600.0,29.3,100.0,V100
j5,evaluator,1.0,Terminated,80.0,900.0,600.0,29.3,25.0,V100
j6,worker,1.0,Terminated,10.0,20.0,600.0,29.3,100.0,V100
j7,worker,1.0,Terminated,70.0,70.0,600.0,29.3,100.0,V100
j1,worker2,0.0,Terminated,110.0,470.0,400.0,29.3,100.0,V100
"""


def _pai(tmp_path: Path, tasks: str = PAI_TASKS, jobs: str | None = PAI_JOBS) -> Path:
    if jobs is not None:
        (tmp_path / "pai_job_table.csv").write_text(jobs)
    path = tmp_path / "pai_task_table.csv"
    path.write_text(tasks)
    return path


def test_pai2020_round_up(tmp_path):
    frame, report = import_trace("pai2020", _pai(tmp_path))
    assert report.rows_read == 10
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    assert report.skipped == {
        "CPU-only task (plan_gpu 0 or empty)": 1,
        "invalid inst_num or plan_gpu": 1,
        "failed job (status Failed; keep_failed=false)": 1,
        "job never started (status Waiting)": 1,
        "job_name not in pai_job_table": 1,
        "non-positive runtime (end_time <= start_time)": 1,
        "merged: another GPU task of a job already imported": 1,
    }
    jobs = frame.set_index("job_id")
    assert list(frame["job_id"]) == ["j5", "j1", "j3"]  # sorted by submission
    assert list(frame["submit_time"]) == [0.0, 50.0, 250.0]  # from the job table
    # j1: 2 instances x 50 % -> 2 whole GPUs, runtime 470 - 110 = 360 s
    assert jobs.loc["j1", "gpus"] == 2
    assert jobs.loc["j1", "work_gpu_h"] == pytest.approx(2 * 360 / 3600)
    # j5: 100 % + 25 % -> 1 + 1 GPUs over 60..1000
    assert jobs.loc["j5", "gpus"] == 2
    assert jobs.loc["j5", "work_gpu_h"] == pytest.approx(2 * 940 / 3600)
    # j3 is running: no end_time, runs to the trace end (1000 s)
    assert jobs.loc["j3", "gpus"] == 2
    assert jobs.loc["j3", "work_gpu_h"] == pytest.approx(2 * 690 / 3600)
    assert any("running at the trace end" in n for n in report.notes)
    assert set(frame["profile"]) == {"mixed"} and not frame["interruptible"].any()
    assert frame["deadline"].isna().all() and (frame["origin_site"] == "").all()


def test_pai2020_share_and_keep_failed(tmp_path):
    frame, report = import_trace("pai2020", _pai(tmp_path), fractional="share", keep_failed=True)
    jobs = frame.set_index("job_id")
    assert "j2" in jobs.index and report.imported == 4
    assert jobs.loc["j1", "gpus"] == 1  # 2 x 50 % = one GPU shared
    assert jobs.loc["j1", "work_gpu_h"] == pytest.approx(1.0 * 360 / 3600)
    assert jobs.loc["j5", "gpus"] == 2  # 1.25 GPUs -> gang of 2
    assert jobs.loc["j5", "work_gpu_h"] == pytest.approx(1.25 * 940 / 3600)
    assert report.imported + sum(report.skipped.values()) == report.rows_read


def test_pai2020_without_job_table(tmp_path):
    frame, report = import_trace("pai2020", _pai(tmp_path, jobs=None))
    assert report.imported + sum(report.skipped.values()) == report.rows_read == 10
    # j6 is now a job (no table to miss from); submissions are the first task starts
    assert list(frame["job_id"]) == ["j6", "j5", "j1", "j3"]
    assert list(frame["submit_time"]) == [0.0, 50.0, 100.0, 300.0]


def test_pai2020_explicit_job_table_option(tmp_path):
    tasks = _pai(tmp_path, jobs=None)
    jobs = tmp_path / "jobs_elsewhere.csv"
    jobs.write_text(PAI_JOBS)
    frame, report = import_trace("pai2020", tasks, job_table=jobs)
    assert report.imported == 3
    with pytest.raises(TraceError, match="no such file"):
        import_trace("pai2020", tasks, job_table=tmp_path / "missing.csv")


@pytest.mark.parametrize(
    "line, match",
    [
        ("j9,worker,1.0,Terminated,1.0,2.0,600.0,29.3,100.0", r":3: expected 10 fields"),
        ("j9,worker,1.0,Terminated,1.0,2.0,600.0,29.3,100.0,V100,extra", r":3: expected 10"),
        ("j9,worker,one,Terminated,1.0,2.0,600.0,29.3,100.0,V100", r":3: inst_num .* 'one'"),
    ],
)
def test_pai2020_malformed_file(tmp_path, line, match):
    lines = PAI_TASKS.splitlines()
    path = _pai(tmp_path, tasks="\n".join([*lines[:2], line, *lines[2:]]) + "\n")
    with pytest.raises(TraceError, match=match) as e:
        import_trace("pai2020", path)
    assert "pai_task_table.csv" in str(e.value)


def test_pai2020_bad_options(tmp_path):
    with pytest.raises(TraceError, match="fractional"):
        import_trace("pai2020", _pai(tmp_path), fractional="half")
    with pytest.raises(TraceError, match="profile"):
        import_trace("pai2020", _pai(tmp_path), profile="gaming")


# ---------------------------------------------------------------- Alibaba GPU 2023

OPENB = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,,LS,Running,3600,7200,3600
openb-pod-0002,88000,327680,8,1000,,Burstable,Succeeded,1000,8200,1200
openb-pod-0003,4000,15258,0,0,,BE,Running,50,900,50
openb-pod-0004,11908,30000,1,1000,,BE,Pending,100,5000,
openb-pod-0005,16000,32768,1,1000,V100M16|V100M32,LS,Failed,200,400,210
openb-pod-0006,16000,32768,2,1000,,LS,Running,300,12902960,400
openb-pod-0007,16000,32768,1,1000,,LS,Succeeded,500,500,500
openb-pod-0008,16000,32768,1,1000,,LS,Running,600,,700
openb-pod-0009,16000,32768,1,1000,,LS,Evicted,600,700,600
"""


def _openb(tmp_path: Path, text: str = OPENB) -> Path:
    path = tmp_path / "openb_pod_list_test.csv"
    path.write_text(text)
    return path


def test_alibaba2023_round_up(tmp_path):
    frame, report = import_trace("alibaba2023", _openb(tmp_path))
    assert report.rows_read == 10
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    assert report.skipped == {
        "CPU-only pod (num_gpu 0)": 1,
        "never scheduled (no scheduled_time)": 1,
        "failed pod (pod_phase Failed; keep_failed=false)": 1,
        "non-positive runtime (deletion_time <= scheduled_time)": 1,
        "unknown pod_phase 'Evicted'": 1,
    }
    jobs = frame.set_index("job_id")
    assert list(frame["job_id"]) == [f"openb-pod-000{i}" for i in (0, 6, 8, 2, 1)]
    assert jobs.loc["openb-pod-0001", "gpus"] == 1
    assert jobs.loc["openb-pod-0001", "work_gpu_h"] == pytest.approx(1.0)
    assert jobs.loc["openb-pod-0002", "gpus"] == 8
    assert jobs.loc["openb-pod-0002", "work_gpu_h"] == pytest.approx(8 * 7000 / 3600)
    # never deleted: runs to the trace end, the last time in the file (12902960)
    assert jobs.loc["openb-pod-0008", "work_gpu_h"] == pytest.approx((12902960 - 700) / 3600)
    notes = " ".join(report.notes)
    assert "1 pod(s) never deleted" in notes and "1 pod(s) still Running at the trace end" in notes


def test_alibaba2023_share_and_keep_failed(tmp_path):
    frame, report = import_trace(
        "alibaba2023", _openb(tmp_path), fractional="share", keep_failed=True
    )
    jobs = frame.set_index("job_id")
    assert jobs.loc["openb-pod-0001", "gpus"] == 1
    assert jobs.loc["openb-pod-0001", "work_gpu_h"] == pytest.approx(0.46)
    assert jobs.loc["openb-pod-0005", "work_gpu_h"] == pytest.approx(190 / 3600)
    assert report.imported == 6
    assert report.imported + sum(report.skipped.values()) == report.rows_read


def test_alibaba2023_malformed(tmp_path):
    lines = OPENB.splitlines()
    bad = lines[:3] + ["openb-pod-0099,1,1,1,1000,,LS,Running,soon,10,5"] + lines[3:]
    with pytest.raises(TraceError, match=r"openb_pod_list_test.csv:4: creation_time .*'soon'"):
        import_trace("alibaba2023", _openb(tmp_path, "\n".join(bad)))
    short = lines[:5] + ["openb-pod-0099,1,1,1"] + lines[5:]
    with pytest.raises(TraceError, match=r":6: expected 11 fields"):
        import_trace("alibaba2023", _openb(tmp_path, "\n".join(short)))
    header = OPENB.replace("scheduled_time", "sched")
    with pytest.raises(TraceError, match=r":1: missing column\(s\) 'scheduled_time'"):
        import_trace("alibaba2023", _openb(tmp_path, header))
    with pytest.raises(TraceError, match="empty file"):
        import_trace("alibaba2023", _openb(tmp_path, ""))


# ---------------------------------------------------------------- GAIA


def test_gaia_hours_auto(tmp_path):
    path = tmp_path / "azure-mini.csv"
    path.write_text(
        "arrival_time,length,cpus\n0.0,0.75,4\n0.5,2.0,2\n,1.0,2\n1.0,-1,2\n2.0,1.0,0\n1.5,0.25,30\n"
    )
    frame, report = import_trace("gaia", path)
    assert report.rows_read == 6 and report.imported == 3
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    assert report.skipped == {
        "arrival_time missing or negative": 1,
        "length missing or not positive": 1,
        "cpus missing or not positive": 1,
    }
    assert list(frame["job_id"]) == ["azure-mini-0", "azure-mini-1", "azure-mini-5"]
    assert list(frame["submit_time"]) == [0.0, 1800.0, 5400.0]
    assert list(frame["gpus"]) == [1, 1, 1]
    assert np.allclose(frame["work_gpu_h"], [0.75, 2.0, 0.25])
    assert any("hours" in n for n in report.notes)
    frame, _ = import_trace("gaia", path, cpus_per_gpu=8)
    assert list(frame["gpus"]) == [1, 1, 4]
    assert np.allclose(frame["work_gpu_h"], [0.75, 2.0, 1.0])


def test_gaia_seconds_auto_and_unit_option(tmp_path):
    path = tmp_path / "pai_mini.csv"
    path.write_text("arrival_time,length,cpus\n10.0,6302.0,1\n78.0,1000.0,1\n473.0,1570.0,3\n")
    frame, report = import_trace("gaia", path)
    assert list(frame["submit_time"]) == [0.0, 68.0, 463.0]
    assert np.allclose(frame["work_gpu_h"], [6302 / 3600, 1000 / 3600, 1570 / 3600])
    assert any("seconds" in n for n in report.notes)
    frame, _ = import_trace("gaia", path, unit="min")
    assert list(frame["submit_time"]) == [0.0, 68.0 * 60, 463.0 * 60]
    with pytest.raises(TraceError, match="unit"):
        import_trace("gaia", path, unit="days")


def test_gaia_malformed(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("arrival_time,length,cpus\n0.0,1.0,1\n\n1.0,abc,1\n")
    with pytest.raises(TraceError, match=r"g.csv:4: length must be a number, got 'abc'"):
        import_trace("gaia", path)
    path.write_text("arrival,length,cpus\n0.0,1.0,1\n")
    with pytest.raises(TraceError, match=r"g.csv:1: missing column\(s\) 'arrival_time'"):
        import_trace("gaia", path)
