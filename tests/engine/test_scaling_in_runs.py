"""Multi-GPU scaling in a run: `[scaling]` makes a job on n GPUs run at the scaling model's
efficiency and draw its communication power for the communication's share of the time;
without the table, speed is linear in the GPU count."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.engine.build import simulate
from sim.errors import ScenarioError, TraceError
from sim.models import hardware, scaling
from tests.conftest import make_scenario, site

JOBS = [
    {"job_id": "one", "submit_time": 0, "gpus": 1, "work_gpu_h": 8, "profile": "resnet50"},
    {"job_id": "node", "submit_time": 0, "gpus": 8, "work_gpu_h": 8, "profile": "resnet50"},
    {
        "job_id": "two_nodes",
        "submit_time": 0,
        "gpus": 16,
        "work_gpu_h": 16,
        "profile": "bert-squad",
    },
]
MODEL = "A100-80GB"


def run(tmp_path, **extra) -> pd.DataFrame:
    sites = [site(gpus=[{"model": MODEL, "count": 32}], pue=1.0, host_w_per_gpu=0.0)]
    scenario = make_scenario(tmp_path, JOBS, duration_h=100, sites=sites, **extra)
    return simulate(scenario, "run_now").jobs.set_index("job_id")


def test_without_the_table_speed_is_linear_in_the_gpu_count(tmp_path):
    jobs = run(tmp_path)
    assert jobs.loc["one", "end_s"] == pytest.approx(8 * 3600)
    assert jobs.loc["node", "end_s"] == pytest.approx(3600)
    assert jobs.loc["two_nodes", "end_s"] == pytest.approx(
        3600 / hardware.speed(MODEL, "bert-squad")
    )


def test_a_job_runs_at_the_scaling_models_efficiency_and_communication_power(tmp_path):
    linear, scaled = run(tmp_path), run(tmp_path, scaling={})
    assert scaled.loc["one", "end_s"] == linear.loc["one", "end_s"]
    assert scaled.loc["one", "energy_kwh"] == pytest.approx(linear.loc["one", "energy_kwh"])
    for job, profile, gpus in (("node", "resnet50", 8), ("two_nodes", "bert-squad", 16)):
        point = scaling.scaling(profile, MODEL, gpus, "data", scaling.default_node(MODEL))
        assert point.nodes == gpus // 8
        runtime_s = scaled.loc[job, "end_s"]
        assert runtime_s == pytest.approx(linear.loc[job, "end_s"] / point.efficiency, rel=1e-9)
        p0_w = hardware.estimate(MODEL, profile).power_w
        comm_w = p0_w * scaling.comm_power_frac(MODEL, profile)
        draw_w = p0_w * (1 - point.comm_time_frac) + comm_w * point.comm_time_frac
        assert scaled.loc[job, "energy_kwh"] == pytest.approx(gpus * draw_w * runtime_s / 3.6e6)
        # the work is the same: a slower run does the same reference GPU-hours
        assert scaled.loc[job, "work_gpu_h"] == linear.loc[job, "work_gpu_h"]
        assert scaled.loc[job, "state"] == "completed"
    # communication is part of the ideal runtime, not a slowdown (nothing else slowed them)
    assert scaled.loc[["node", "two_nodes"], "slowdown"].tolist() == pytest.approx([1.0, 1.0])


def test_links_given_in_the_table_replace_the_models_defaults(tmp_path):
    linear = run(tmp_path)
    slow = run(tmp_path, scaling={"intra_node": "PCIe3", "inter_node": "Eth-25G"})
    for job, profile, gpus in (("node", "resnet50", 8), ("two_nodes", "bert-squad", 16)):
        # another network than the DGX A100's 8 HDR ports: one port (scaling.nics_per_node)
        node = scaling.NodeShape(8, "PCIe3", "Eth-25G", 1)
        point = scaling.scaling(profile, MODEL, gpus, "data", node)
        assert slow.loc[job, "end_s"] == pytest.approx(linear.loc[job, "end_s"] / point.efficiency)


def test_the_network_ports_of_a_node_are_set_by_nics_per_node(tmp_path):
    """The 16-GPU data-parallel job spans two DGX A100 nodes: on IB-HDR with the catalog's 8
    ports; on 25 GbE with one port unless `nics_per_node` says otherwise."""

    def end_s(**links):
        return run(tmp_path, scaling=links).loc["two_nodes", "end_s"]

    def expected_s(link: str, nics: int) -> float:
        point = scaling.scaling(
            "bert-squad", MODEL, 16, "data", scaling.NodeShape(8, "NVLink3", link, nics)
        )
        return run(tmp_path).loc["two_nodes", "end_s"] / point.efficiency

    assert end_s(inter_node="IB-HDR") == pytest.approx(expected_s("IB-HDR", 8))
    assert end_s(inter_node="Eth-25G") == pytest.approx(expected_s("Eth-25G", 1))
    assert end_s(inter_node="Eth-25G", nics_per_node=4) == pytest.approx(expected_s("Eth-25G", 4))
    assert end_s(nics_per_node=2) == pytest.approx(expected_s("IB-HDR", 2))
    assert end_s(inter_node="Eth-25G") > end_s(inter_node="Eth-25G", nics_per_node=4)


def test_each_job_scales_by_its_own_parallel_scheme(tmp_path):
    jobs = [
        {**JOBS[1], "job_id": "tp", "profile": "bert-squad", "parallelism": "tensor"},
        {**JOBS[1], "job_id": "pp", "profile": "bert-squad", "parallelism": "pipeline"},
        {**JOBS[1], "job_id": "dp", "profile": "bert-squad"},
    ]
    sites = [site(gpus=[{"model": MODEL, "count": 32}], pue=1.0, host_w_per_gpu=0.0)]
    runs = {}
    for extra in ({}, {"scaling": {}}):
        scenario = make_scenario(tmp_path, jobs, duration_h=100, sites=sites, **extra)
        runs[bool(extra)] = simulate(scenario, "run_now").jobs.set_index("job_id")
    node = scaling.default_node(MODEL)
    for job, scheme in (("tp", "tensor"), ("pp", "pipeline"), ("dp", "data")):
        point = scaling.scaling("bert-squad", MODEL, 8, scheme, node)
        linear_s, scaled_s = runs[False].loc[job, "end_s"], runs[True].loc[job, "end_s"]
        assert scaled_s == pytest.approx(linear_s / point.efficiency, rel=1e-9)
    assert len({runs[True].loc[j, "end_s"] for j in ("tp", "pp", "dp")}) == 3


def test_a_job_the_model_cannot_scale_is_refused_before_the_run(tmp_path):
    jobs = [{**JOBS[1], "parallelism": "tensor"}]  # ResNet-50 has no transformer shapes
    scenario = make_scenario(
        tmp_path, jobs, sites=[site(gpus=[{"model": MODEL, "count": 8}])], scaling={}
    )
    with pytest.raises(
        ScenarioError, match="scaling: job 'node' \\(resnet50, 8 GPUs, tensor parallel\\)"
    ):
        simulate(scenario, "run_now")


def test_an_unknown_link_is_a_one_line_error(tmp_path):
    with pytest.raises(ScenarioError, match="unknown interconnect 'NVLink9'"):
        run(tmp_path, scaling={"intra_node": "NVLink9"})


def test_a_scenario_gpu_model_needs_its_links_named(tmp_path, catalog_restored):
    own = {
        "MyGPU": {
            **{
                k: getattr(hardware.GPU_CATALOG[MODEL], k)
                for k in (
                    "name",
                    "tdp_w",
                    "min_cap_w",
                    "max_cap_w",
                    "idle_w",
                    "memory_gb",
                    "memory_type",
                    "memory_devices",
                    "mem_bw_gbps",
                    "fp16_tflops",
                    "fp32_tflops",
                    "die_mm2",
                    "process_nm",
                    "release_year",
                    "host_embodied_kg",
                    "service_life_years",
                )
            }
        }
    }
    sites = [site(gpus=[{"model": "MyGPU", "count": 16}])]
    scenario = make_scenario(tmp_path, JOBS[:2], sites=sites, gpu_models=own, scaling={})
    with pytest.raises(ScenarioError, match="'MyGPU' has no default node"):
        simulate(scenario, "run_now")


def test_an_unknown_parallel_scheme_in_a_job_file_names_the_line_and_value(tmp_path):
    scenario = make_scenario(tmp_path, [{**JOBS[0], "parallelism": "zero"}])
    with pytest.raises(TraceError, match=r"jobs.csv:2: parallelism must be one of .*'zero'"):
        simulate(scenario, "run_now")
