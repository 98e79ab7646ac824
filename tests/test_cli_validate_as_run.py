"""`dcsim validate` refuses exactly what `dcsim run` refuses, with the same one line and
exit status 2, before anything runs: both build the same engine (`build_engine`)."""

from __future__ import annotations

import pytest

from tests.conftest import SMALL_SCENARIO_TOML, run_cli

SPOT_POOL = SMALL_SCENARIO_TOML.replace("count = 8 }", "count = 8, spot = 4 }")
FILE_JOBS = SPOT_POOL.split("[workload.synthetic]")[0] + '[workload]\nfile = "jobs.csv"\n'

CASES = {
    "spot trace with a bad row": (
        SPOT_POOL + '[spot]\ntrace = "evictions.csv"\n',
        {"evictions.csv": "time_h,site,gpus\nlater,a,1\n"},
        "evictions.csv:2: time_h must be a number >= 0, got 'later'",
    ),
    "spot trace naming an unknown site": (
        SPOT_POOL + '[spot]\ntrace = "evictions.csv"\n',
        {"evictions.csv": "time_h,site,gpus\n1,b,1\n"},
        "evictions.csv:2: unknown site 'b' (sites: a)",
    ),
    "failure trace naming an unknown site": (
        SMALL_SCENARIO_TOML + '[failures]\ntrace = "failures.csv"\n',
        {"failures.csv": "time_h,site\n1,b\n"},
        "failures.csv:2: unknown site 'b' (sites: a)",
    ),
    "negative issued-forecast value": (
        SMALL_SCENARIO_TOML.replace(
            "carbon = { constant_g_per_kwh = 300 }",
            'carbon = { constant_g_per_kwh = 300 }\nforecast = { file = "issued.csv" }',
        ),
        {
            "issued.csv": "issued_at,target_start,value\n"
            "2020-06-01T00:00:00Z,2020-06-01T00:00:00Z,100\n"
            "2020-06-01T00:00:00Z,2020-06-01T00:30:00Z,-5\n"
        },
        "issued.csv:3: value must be >= 0, got -5",
    ),
    "fractional job on a split pool": (
        FILE_JOBS,
        {"jobs.csv": "job_id,submit_time,gpus,work_gpu_h,gpu_milli\nj1,0,1,1,500\n"},
        "reserved and spot capacity take whole-GPU jobs only; job j1 asks for 500 milli-GPU",
    ),
    "wholesale tariff for a zone-year without prices": (
        SMALL_SCENARIO_TOML.replace(
            "carbon = { constant_g_per_kwh = 300 }",
            'carbon = { constant_g_per_kwh = 300 }\ntariff = { kind = "wholesale", zone = "DE", '
            "year = 2020 }",
        ),
        {},
        "sites[0].tariff: no day-ahead prices for zone DE in 2020",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_validate_refuses_what_run_refuses_with_the_same_line(tmp_path, capsys, case):
    scenario, files, fragment = CASES[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "study.toml"
    path.write_text(scenario)
    lines = {}
    for command in ("run", "validate"):
        code, out = run_cli([command, str(path)], capsys)
        assert code == 2, (command, out.out)
        (lines[command],) = out.err.strip().splitlines()
    assert fragment in lines["run"]
    assert lines["validate"] == lines["run"]
