"""Validation on the real public traces in ../shared/data (skipped without them): the
Alibaba GPU 2023 and GAIA traces import with every row accounted for, and the Alibaba
trace runs through the simulator with every job ending in exactly one terminal state."""

from __future__ import annotations

import math

import pytest

import sim
from sim.workload.importers import import_trace, write_native
from tests.conftest import make_scenario, site


@pytest.mark.parametrize(
    "name, rows, unit",
    [
        ("azure-100k.csv", 99988, "hours"),
        ("pai-100k.csv", 99998, "hours"),
        ("pai_1k.csv", 1000, "seconds"),
    ],
)
def test_gaia_traces_import(shared_data, name, rows, unit):
    frame, report = import_trace("gaia", shared_data / "gaia-traces" / name)
    assert report.rows_read == rows
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    assert report.imported == len(frame) == rows  # the published files have no bad rows
    assert any(unit in note for note in report.notes)
    assert frame["submit_time"].is_monotonic_increasing and frame["submit_time"].iloc[0] == 0
    assert (frame["gpus"] == 1).all() and (frame["work_gpu_h"] > 0).all()


def test_alibaba2023_import_and_simulate(shared_data, tmp_path):
    path = shared_data / "alibaba-gpu-2023" / "openb_pod_list_default.csv"
    frame, report = import_trace("alibaba2023", path)
    assert report.rows_read == 8152
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    assert report.skipped == {
        "CPU-only pod (num_gpu 0)": 1088,
        "failed pod (pod_phase Failed; keep_failed=false)": 1869,
        "never scheduled (no scheduled_time)": 861,
    }
    assert report.imported == len(frame) == 4334

    jobs = write_native(frame, tmp_path / "alibaba.parquet")
    # the trace's measured runs never need more than 63 GPUs at once; 128 leave room
    assert frame["gpus"].max() <= 128
    duration_h = math.ceil(frame["submit_time"].max() / 3600 + 24)  # all arrivals + a day
    scenario = make_scenario(
        tmp_path,
        duration_h=duration_h,
        sites=[site(gpus=[{"model": "A100-80GB", "count": 128}])],
        workload={"file": str(jobs)},
    )
    s = sim.simulate(scenario, "run_now").summary
    assert s["jobs_submitted"] == report.imported
    assert s["jobs_completed"] + s["jobs_rejected"] + s["jobs_unfinished"] == report.imported
    # every pod's measured run ends within a day of the last arrival: all complete
    assert (s["jobs_completed"], s["jobs_rejected"], s["jobs_unfinished"]) == (4334, 0, 0)
