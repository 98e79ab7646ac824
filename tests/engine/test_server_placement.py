"""Servers in a run (docs/placement.md, "In a run"): a pool declared as servers places each
job's GPUs on them by the site's `placement` rule within `max_servers`; a job the rule
cannot place waits even with enough free GPUs in total (a fragmentation wait, summed in
`fragmentation_wait_h`); a job over several servers runs at `placed_scaling`'s speed; the
free GPUs by server are the `servers` table."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.engine.build import simulate
from sim.models import hardware, scaling
from sim.models.placement import placed_scaling
from tests.conftest import SMALL_SCENARIO_TOML, make_scenario, run_cli, server_site

MODEL = "A100-80GB"
TWO_DGX = [{"model": MODEL, "servers": {"model": "DGX-A100", "count": 2}}]
"""Two DGX A100 servers: 16 GPUs, 8 a server."""

FOUR_FOUR_EIGHT = [
    {"job_id": "a", "submit_time": 0, "gpus": 4, "work_gpu_h": 4, "profile": "compute-bound"},
    {"job_id": "b", "submit_time": 0, "gpus": 4, "work_gpu_h": 8, "profile": "compute-bound"},
    {"job_id": "c", "submit_time": 0, "gpus": 8, "work_gpu_h": 8, "profile": "compute-bound"},
]
"""a (4 GPUs, 1 h), b (4 GPUs, 2 h) and c (8 GPUs, 1 h), all submitted at 0, in this order
(compute-bound on A100-80GB: 1 reference GPU-h per GPU-hour)."""


def run(tmp_path, jobs, gpus=TWO_DGX, **site_keys):
    extra = site_keys.pop("scenario", {})
    sites = [server_site(gpus=gpus, pue=1.0, **site_keys)]
    scenario = make_scenario(tmp_path, jobs, duration_h=10, sites=sites, **extra)
    return simulate(scenario, "run_now")


def free_at_start(results) -> dict[int, int]:
    """Free GPUs of each server after the starts at time 0."""
    rows = results.servers[results.servers["time_s"] == 0.0]
    return dict(zip(rows["server"], rows["free_gpus"], strict=True))


def test_spread_puts_two_4_gpu_jobs_on_different_servers_and_best_fit_on_one(tmp_path):
    spread = run(tmp_path, FOUR_FOUR_EIGHT[:2], placement="spread")
    best_fit = run(tmp_path, FOUR_FOUR_EIGHT[:2], placement="best_fit")
    assert free_at_start(spread) == {0: 4, 1: 4}
    assert free_at_start(best_fit) == {0: 0}  # server 1 untouched: no row


def test_an_8_gpu_job_waits_while_4_and_4_gpus_are_free_on_two_servers(tmp_path):
    # spread: a on server 0, b on server 1, c (8 GPUs, strict locality: one server) waits
    # with 4 + 4 free until a ends at 1 h and server 0 is whole again.
    spread = run(tmp_path, FOUR_FOUR_EIGHT, placement="spread")
    jobs = spread.jobs.set_index("job_id")
    assert jobs.loc["c", "start_s"] == 3600.0
    assert jobs.loc["c", "end_s"] == 7200.0
    assert spread.summary["fragmentation_wait_h"] == 1.0  # c: 0 to 1 h, 8 free in total
    # best_fit packs a and b on server 0: c starts at once on server 1
    best_fit = run(tmp_path, FOUR_FOUR_EIGHT, placement="best_fit")
    assert best_fit.jobs.set_index("job_id").loc["c", "start_s"] == 0.0
    assert best_fit.summary["fragmentation_wait_h"] == 0.0


def test_the_free_gpu_series_follows_every_start_and_end(tmp_path):
    results = run(tmp_path, FOUR_FOUR_EIGHT, placement="spread")
    expected = pd.DataFrame(
        {
            "site": "a",
            "pool": MODEL,
            "time_s": [0.0, 0.0, 3600.0, 7200.0, 7200.0],
            "server": [0, 1, 0, 1, 0],
            "free_gpus": [4, 4, 0, 8, 8],  # at 1 h: a's 4 back, c's 8 taken (one instant)
        }
    )
    pd.testing.assert_frame_equal(results.servers, expected, check_dtype=False)


def test_with_unlimited_servers_the_8_gpu_job_spans_two_servers_at_their_speed(tmp_path):
    jobs = [
        {**FOUR_FOUR_EIGHT[0], "work_gpu_h": 40},
        {**FOUR_FOUR_EIGHT[1], "work_gpu_h": 40},
        {**FOUR_FOUR_EIGHT[2], "profile": "bert-squad"},
    ]
    links = {"intra_node": "NVLink3", "inter_node": "Eth-25G"}
    results = run(
        tmp_path,
        jobs,
        placement="spread",
        max_servers="unlimited",
        scenario={"scaling": links},
    )
    c = results.jobs.set_index("job_id").loc["c"]
    assert c["start_s"] == 0.0  # 4 + 4 on servers 0 and 1
    node = scaling.NodeShape(8, "NVLink3", "Eth-25G", 1)  # another network: one port
    point = placed_scaling("bert-squad", MODEL, ((0, 4), (1, 4)), "data", node)
    assert point.nodes == 2 and point.efficiency < 1.0
    speed = hardware.speed(MODEL, "bert-squad")
    assert c["end_s"] == pytest.approx(8 * 3600 / (8 * speed * point.efficiency), rel=1e-12)


def test_a_16_gpu_job_over_two_servers_runs_at_placed_scalings_speed(tmp_path):
    job = {"job_id": "big", "submit_time": 0, "gpus": 16, "work_gpu_h": 16}
    results = run(tmp_path, [{**job, "profile": "bert-squad"}], scenario={"scaling": {}})
    point = placed_scaling("bert-squad", MODEL, ((0, 8), (1, 8)))
    assert point.nodes == 2
    speed = hardware.speed(MODEL, "bert-squad")
    end_s = results.jobs.set_index("job_id").loc["big", "end_s"]
    assert end_s == pytest.approx(16 * 3600 / (16 * speed * point.efficiency), rel=1e-12)
    assert free_at_start(results) == {0: 0, 1: 0}


def test_a_run_without_servers_has_no_fragmentation_key_value_and_no_servers_table(tmp_path):
    results = run(tmp_path, FOUR_FOUR_EIGHT, gpus=[{"model": MODEL, "count": 16}])
    assert results.summary["fragmentation_wait_h"] is None
    assert results.servers is None


@pytest.mark.parametrize(
    ("pool", "site_keys", "named"),
    [
        ('{ model = "H100-SXM", servers = { model = "DGX-A100", count = 2 } }', "", "DGX-A100"),
        ('{ model = "A100-80GB", servers = { model = "DGX-Z", count = 2 } }', "", "DGX-Z"),
        (
            '{ model = "A100-80GB", count = 8, servers = { model = "DGX-A100", count = 2 } }',
            "",
            "count 8",
        ),
        (
            '{ model = "A100-80GB", mig = ["7g.80gb"], servers = { model = "DGX-A100", count = 1'
            " } }",
            "",
            "mig",
        ),
        (
            '{ model = "A100-80GB", servers = { model = "DGX-A100", count = 1 } }',
            'placement = "x"',
            "placement",
        ),
        (
            '{ model = "A100-80GB", servers = { model = "DGX-A100", count = 1 } }',
            "max_servers = 0",
            "max_servers",
        ),
        (
            '{ model = "A100-80GB", servers = { model = "DGX-A100", count = 1 } }',
            "host_w_per_gpu = 50",
            "host_w_per_gpu",
        ),
    ],
)
def test_validate_refuses_bad_server_keys_in_one_line(tmp_path, capsys, pool, site_keys, named):
    text = SMALL_SCENARIO_TOML.replace('[{ model = "A100-80GB", count = 8 }]', f"[{pool}]")
    text = text.replace("carbon = {", f"{site_keys}\ncarbon = {{")
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 2
    assert named in out.err and len(out.err.strip().splitlines()) == 1, out.err


def test_validate_accepts_a_pool_of_servers(tmp_path, capsys):
    pool = '[{ model = "A100-80GB", servers = { model = "DGX-A100", count = 2 } }]'
    text = SMALL_SCENARIO_TOML.replace('[{ model = "A100-80GB", count = 8 }]', pool)
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 0, out.err


def test_validate_refuses_jobs_sharing_a_gpu_with_a_pool_of_servers(tmp_path, capsys):
    pd.DataFrame(
        [{"job_id": "f", "submit_time": 0, "gpus": 1, "gpu_milli": 500, "work_gpu_h": 1}]
    ).to_csv(tmp_path / "jobs.csv", index=False)
    pool = '[{ model = "A100-80GB", servers = { model = "DGX-A100", count = 2 } }]'
    text = SMALL_SCENARIO_TOML.replace('[{ model = "A100-80GB", count = 8 }]', pool)
    text = text[: text.index("[workload.synthetic]")] + '[workload]\nfile = "jobs.csv"\n'
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 2
    assert "gpu_milli" in out.err and len(out.err.strip().splitlines()) == 1, out.err


def test_an_uneven_split_runs_at_its_own_speed_after_an_even_split_of_the_same_size(tmp_path):
    """8 V100s as 4 + 4 (job e) and later as 2 + 4 + 2 (job d), both bert-sentiment140
    over 25 GbE: the same GPUs and the same largest share, but d spans three servers and
    runs at the 3-node speed (a speed cached for e's layout must not be reused for d's)."""
    long = {"submit_time": 0, "work_gpu_h": 400, "profile": "compute-bound"}
    bert = {"gpus": 8, "work_gpu_h": 8, "profile": "bert-sentiment140"}
    jobs = [
        {**long, "job_id": "a", "gpus": 4},  # spread: server 0 -> free (4, 8, 8)
        {**long, "job_id": "b", "gpus": 4},  # server 1 -> (4, 4, 8)
        {**long, "job_id": "c", "gpus": 6},  # server 2 -> (4, 4, 2)
        {**bert, "job_id": "e", "submit_time": 0},  # 4 + 4 on servers 0 and 1, ~3.4 h
        {**long, "job_id": "k", "gpus": 2, "submit_time": 14400},  # server 0 -> (2, 4, 2)
        {**bert, "job_id": "d", "submit_time": 14400},  # 2 + 4 + 2 on servers 0, 1, 2
    ]
    v100s = [{"model": "V100", "servers": {"model": "PCIe-V100x8", "count": 3}}]
    links = {"intra_node": "PCIe3", "inter_node": "Eth-25G"}
    results = run(
        tmp_path,
        jobs,
        gpus=v100s,
        placement="spread",
        max_servers="unlimited",
        scenario={"scaling": links},
    )
    node = scaling.NodeShape(8, "PCIe3", "Eth-25G", scaling.default_node("V100").nics_per_node)
    even = placed_scaling("bert-sentiment140", "V100", ((0, 4), (1, 4)), "data", node)
    uneven = placed_scaling("bert-sentiment140", "V100", ((0, 2), (1, 4), (2, 2)), "data", node)
    assert uneven.nodes == 3 and uneven.efficiency < even.efficiency
    speed = hardware.speed("V100", "bert-sentiment140")
    by_id = results.jobs.set_index("job_id")
    assert by_id.loc["e", "start_s"] == 0.0 and by_id.loc["d", "start_s"] == 14400.0
    e_s = by_id.loc["e", "end_s"] - by_id.loc["e", "start_s"]
    d_s = by_id.loc["d", "end_s"] - by_id.loc["d", "start_s"]
    assert e_s == pytest.approx(3600 / (speed * even.efficiency), rel=1e-12)
    assert d_s == pytest.approx(3600 / (speed * uneven.efficiency), rel=1e-12)
