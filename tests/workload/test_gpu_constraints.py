"""Trace constraints enforced: a job's `allowed_gpu_models` (the GPU models it may run on) is read
from the job file, checked against the GPU catalog, kept in the `JobTable`, shown to
policies as `JobView.allowed_gpu_models`, respected by the kit's placement and enforced by
the engine; the Alibaba 2023 importer keeps the trace's `gpu_spec` as such constraints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sim
from policies.kit.gpus import FreeGpus
from sim.api import Migrate, Resume, Start, Suspend
from sim.errors import PolicyError, TraceError
from sim.models import hardware
from sim.testing import PolicyHarness
from sim.workload.feasibility import fastest_runtime_s
from sim.workload.importers import import_trace
from tests.conftest import make_scenario, scenario_jobs, site, write_jobs

POOLS = [
    {"model": "A100-80GB", "count": 4},
    {"model": "H100-SXM", "count": 4},
    {"model": "V100", "count": 8},
]
SITES = [site(name="mixed", gpus=POOLS)]


def job(job_id: str = "j", **changes) -> dict:
    return {"job_id": job_id, "submit_time": 0, "gpus": 2, "work_gpu_h": 4.0, **changes}


def scenario(tmp_path: Path, jobs: list[dict], **overrides):
    return make_scenario(tmp_path, jobs, sites=SITES, **overrides)


# --- the job file -------------------------------------------------------------------------


def test_the_column_lists_gpu_models_and_round_trips_through_csv_and_parquet(tmp_path):
    sc = scenario(
        tmp_path,
        [
            job("a", allowed_gpu_models=" H100-SXM ; A100-80GB;H100-SXM"),
            job("b"),
            job("c", allowed_gpu_models="V100"),
        ],
    )
    jobs = scenario_jobs(sc.workload.file, sc)
    assert jobs.allowed_gpu_models.tolist() == ["H100-SXM;A100-80GB", "", "V100"]
    assert [jobs.gpu_models_of(j) for j in range(3)] == [
        ("H100-SXM", "A100-80GB"),
        (),
        ("V100",),
    ]
    frame = jobs.to_frame(sc.site_names())
    for path in (tmp_path / "again.csv", tmp_path / "again.parquet"):
        if path.suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path)
        assert scenario_jobs(path, sc).equals(jobs)


@pytest.mark.parametrize(
    ("cell", "shown"),
    [
        ("A100", "'A100'"),
        ("A100-80GB||H100-SXM", "'A100-80GB||H100-SXM'"),
        ("a100-80gb", "'a100-80gb'"),
    ],
)
def test_a_gpu_model_the_catalog_lacks_is_a_one_line_error_naming_file_line_and_value(
    tmp_path, cell, shown
):
    sc = scenario(
        tmp_path, [job("a", allowed_gpu_models="V100"), job("b", allowed_gpu_models=cell)]
    )
    with pytest.raises(TraceError) as err:
        scenario_jobs(sc.workload.file, sc)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        f"{sc.workload.file}:3: allowed_gpu_models must be GPU models separated"
    )
    assert "H100-SXM" in message and message.endswith(f"got {shown}")


def test_a_table_without_the_column_allows_any_model(tmp_path):
    sc = scenario(tmp_path, [job("a"), job("b")])
    jobs = scenario_jobs(sc.workload.file, sc)
    assert jobs.allowed_gpu_models.tolist() == ["", ""]
    assert jobs.to_frame(sc.site_names())["allowed_gpu_models"].tolist() == ["", ""]


# --- the engine ---------------------------------------------------------------------------


def test_the_engine_refuses_to_start_resume_or_migrate_a_job_onto_a_model_it_may_not_use(
    tmp_path,
):
    sc = scenario(tmp_path, [job(allowed_gpu_models="A100-80GB;H100-SXM", interruptible=True)])
    h = PolicyHarness(sc).advance(0.0)
    j = h.job("j")
    assert j.allowed_gpu_models == ("A100-80GB", "H100-SXM")
    allowed = r"\(allowed GPU models: A100-80GB, H100-SXM\)"
    with pytest.raises(PolicyError, match=rf"job j may not run on V100 {allowed}"):
        h.apply([Start(j, "mixed", gpu_model="V100")])
    h.apply([Start(j, "mixed", gpu_model="H100-SXM")])
    with pytest.raises(PolicyError, match=rf"job j may not run on V100 {allowed}"):
        h.apply([Migrate(j, "mixed", gpu_model="V100")])
    h.apply([Suspend(j)]).advance(600.0)
    with pytest.raises(PolicyError, match=rf"job j may not run on V100 {allowed}"):
        h.apply([Resume(j, "mixed", gpu_model="V100")])
    h.apply([Resume(j, "mixed", gpu_model="A100-80GB")])
    assert j.gpu_model == "A100-80GB"


def test_a_start_without_a_model_takes_the_first_allowed_pool_with_room(tmp_path):
    sc = scenario(tmp_path, [job("any"), job("v100", gpus=8, allowed_gpu_models="V100")])
    h = PolicyHarness(sc).advance(0.0)
    h.apply([Start(h.job("any"), "mixed"), Start(h.job("v100"), "mixed")])
    assert (h.job("any").gpu_model, h.job("v100").gpu_model) == ("A100-80GB", "V100")


def test_a_start_finding_no_allowed_pool_with_room_names_the_allowed_pools(tmp_path):
    sc = scenario(tmp_path, [job("a", gpus=8), job("b", gpus=8, allowed_gpu_models="V100")])
    h = PolicyHarness(sc).advance(0.0)
    h.apply([Start(h.job("a"), "mixed")])
    with pytest.raises(PolicyError, match=r"job b needs 8 GPUs of one of V100, mixed has V100=0"):
        h.apply([Start(h.job("b"), "mixed")])


def test_a_job_no_pool_of_its_models_can_hold_is_rejected_at_arrival(tmp_path):
    sc = scenario(
        tmp_path,
        [job("h200", allowed_gpu_models="H200"), job("big", gpus=8, allowed_gpu_models="H100-SXM")],
    )
    jobs = sim.simulate(sc, "run_now").jobs.set_index("job_id")
    assert jobs.loc["h200", "reason"] == "needs 2 GPUs of H200; the largest pool has 0"
    assert jobs.loc["big", "reason"] == "needs 8 GPUs of H100-SXM; the largest pool has 4"
    assert (jobs["state"] == "rejected").all()


def test_the_fastest_runtime_counts_only_the_models_a_job_may_use(tmp_path):
    sc = scenario(tmp_path, [job("any"), job("v100", allowed_gpu_models="V100")])
    jobs = scenario_jobs(sc.workload.file, sc)
    fastest = fastest_runtime_s(jobs, sc.sites, sc.speed)
    on = {m: 2 * 3600.0 / hardware.speed(m, "mixed") for m in ("H100-SXM", "V100")}
    assert fastest.tolist() == pytest.approx([on["H100-SXM"], on["V100"]])


# --- placement ----------------------------------------------------------------------------


def test_the_kits_placement_takes_only_pools_of_allowed_models_in_the_jobs_order(tmp_path):
    sc = scenario(
        tmp_path,
        [
            job("any"),
            job("v100", allowed_gpu_models="V100"),
            job("pref", allowed_gpu_models="H100-SXM;A100-80GB"),
        ],
    )
    h = PolicyHarness(sc).advance(0.0)
    free = FreeGpus(h.state)
    placed = {name: free.place(h.job(name)) for name in ("any", "v100", "pref")}
    assert {name: s.gpu_model for name, s in placed.items() if s} == {
        "any": "A100-80GB",
        "v100": "V100",
        "pref": "H100-SXM",
    }


def constrained_workload(tmp_path: Path) -> list[dict]:
    """Forty jobs arriving every 10 minutes, a third tied to V100s, a third to A100/H100."""
    rng = np.random.default_rng(3)
    kinds = ["", "V100", "A100-80GB;H100-SXM"]
    return [
        job(
            f"j{i}",
            submit_time=float(i * 600),
            gpus=int(rng.choice([1, 2, 4])),
            work_gpu_h=float(rng.uniform(0.5, 8.0)),
            allowed_gpu_models=kinds[i % 3],
        )
        for i in range(40)
    ]


def test_run_now_places_constrained_jobs_only_on_their_models(tmp_path):
    specs = constrained_workload(tmp_path)
    r = sim.simulate(scenario(tmp_path, specs, duration_h=48), "run_now")
    ran = r.jobs.set_index("job_id")
    assert (ran["state"] == "completed").all()
    for spec in specs:
        if spec["allowed_gpu_models"]:
            assert ran.loc[spec["job_id"], "gpu_model"] in spec["allowed_gpu_models"].split(";")
    assert set(ran["gpu_model"]) == {"A100-80GB", "H100-SXM", "V100"}


def test_an_empty_column_gives_the_results_of_no_column(tmp_path):
    specs = [{**s, "allowed_gpu_models": ""} for s in constrained_workload(tmp_path)]
    with_column = sim.simulate(scenario(tmp_path, specs, duration_h=48), "run_now")
    without = [{k: v for k, v in s.items() if k != "allowed_gpu_models"} for s in specs]
    (tmp_path / "plain").mkdir()
    plain = sim.simulate(scenario(tmp_path / "plain", without, duration_h=48), "run_now")
    wall_clock = {"sim_wall_s"}
    assert {k: v for k, v in with_column.summary.items() if k not in wall_clock} == {
        k: v for k, v in plain.summary.items() if k not in wall_clock
    }
    pd.testing.assert_frame_equal(with_column.jobs, plain.jobs)


# --- the Alibaba 2023 importer ------------------------------------------------------------

OPENB = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
free,8000,30000,1,1000,,LS,Succeeded,0,3600,0
v100,16000,32768,1,1000,V100M16|V100M32,LS,Running,100,3700,100
t4,4000,15258,2,1000,T4,Burstable,Succeeded,200,3800,200
either,4000,15258,1,1000,T4|P100,BE,Succeeded,300,3900,300
secret,4000,15258,1,1000,G2,LS,Succeeded,400,4000,400
a10,4000,15258,1,1000,V100M32|A10,LS,Succeeded,500,4100,500
"""


def test_alibaba_gpu_spec_becomes_allowed_gpu_models_where_the_mapping_is_certain(tmp_path):
    path = tmp_path / "openb_pod_list_gpuspec.csv"
    path.write_text(OPENB)
    frame, report = import_trace("alibaba2023", path)
    jobs = frame.set_index("job_id")
    assert jobs["allowed_gpu_models"].to_dict() == {
        "free": "",
        "v100": "V100",
        "t4": "T4",
        "either": "T4;P100",
        "secret": "",
        "a10": "",
    }
    notes = " ".join(report.notes)
    assert "2 pod(s) with a gpu_spec naming a GPU type without a certain catalog model" in notes
    assert "(G2, V100M32|A10)" in notes
    # an hour measured on a T4 (one card) is a T4's speed in reference GPU-hours; the trace
    # does not say which V100 or P100 card (PCIe or SXM2) a pod ran on: taken as is
    t4 = hardware.speed("T4", "mixed") / hardware.speed("A100-80GB", "mixed")
    assert jobs.loc["t4", "work_gpu_h"] == pytest.approx(2 * t4)
    unconverted = ["free", "v100", "either", "secret", "a10"]
    assert jobs.loc[unconverted, "work_gpu_h"].tolist() == [1.0] * 5


def test_alibaba_import_can_ignore_gpu_spec(tmp_path):
    path = tmp_path / "openb_pod_list_gpuspec.csv"
    path.write_text(OPENB)
    frame, report = import_trace("alibaba2023", path, keep_gpu_spec=False)
    assert frame["allowed_gpu_models"].isna().all()
    assert (frame["work_gpu_h"] == frame["gpus"]).all()  # an hour each, taken as reference
    assert any("gpu_spec ignored" in n for n in report.notes)


def test_an_imported_trace_loads_with_its_constraints(tmp_path):
    path = tmp_path / "openb_pod_list_gpuspec.csv"
    path.write_text(OPENB)
    frame, _ = import_trace("alibaba2023", path)
    out = write_jobs(tmp_path / "imported.csv", frame.to_dict("records"))
    sc = make_scenario(
        tmp_path,
        None,
        sites=[site(name="a", gpus=[*POOLS, {"model": "T4", "count": 2}])],
        workload={"file": str(out)},
    )
    r = sim.simulate(sc, "run_now").jobs.set_index("job_id")
    assert (r["state"] == "completed").all()
    assert r.loc[["v100", "t4", "either"], "gpu_model"].tolist() == ["V100", "T4", "T4"]
