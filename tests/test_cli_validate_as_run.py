"""`dcsim validate` refuses exactly what `dcsim run` refuses, with the same one line and
exit status 2, before anything runs: both build the same engine (`build_engine`)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, SMALL_SCENARIO_TOML, run_cli

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
    "the batch engine asked for a world it does not take": (
        SMALL_SCENARIO_TOML + '[engine]\nkind = "batch"\n[failures]\nrate_per_gpu_h = 0.001\n',
        {},
        'engine.kind = "batch": the batch engine does not apply: failures',
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


SERVING = "scenarios/serving_only.toml"  # 24 h, one service, rate 2/s, daily amplitude 0.5

BOUNDS = {
    "a request rate beyond what the generator makes": (
        "services[0].requests.rate_per_s=1e6",  # 1e6 x 1.5 x 3600 s = 5.4e9 > 1e9 an hour
        "services[0].requests: rate_per_s: 1e+06 per second asks the generator for about "
        "5.4e+09 requests an hour at the cycles' peak, more than the 1e+09 it makes in memory "
        "(at most 1.852e+05 per second with these amplitudes)",
    ),
    "a serving step so short its rows do not fit in memory": (
        "serving.step_s=1e-6",  # 86,400 s / 1e-6 s = 8.64e10 rows > 1e7
        "serving.step_s: 1e-06 s gives 8.64e+10 steps over 24 h for each of 1 services, more "
        "than the 10,000,000 rows of services.parquet a run holds (about 4 GB); give step_s "
        ">= 0.00864",
    ),
}

MORE_REQUESTS_THAN_HELD = (
    "the request fidelity holds every request and a run at most 25,000,000 (about 10 GB): "
    'lower the rates, shorten the run or use [serving] fidelity = "fluid"'
)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_more_requests_than_the_request_fidelity_holds_are_refused_before_the_run(capsys, command):
    """1000/s over 24 h is 8.64e7 requests (the daily cycle averages out), above 2.5e7."""
    override = "services[0].requests.rate_per_s=1000"
    code, out = run_cli([command, str(REPO / SERVING), "--set", override], capsys)
    assert code == 2
    assert out.err.strip() == (
        f"error: services: about 8.64e+07 requests over 24 h (8.64e+07 by service); "
        f"{MORE_REQUESTS_THAN_HELD}"
    )


def test_a_request_file_tiled_beyond_what_the_request_fidelity_holds_is_refused(tmp_path, capsys):
    """1,000 requests 3.6 s apart, time_scale 1e-4 and repeat: a copy every 0.36 s (its
    span plus one mean gap), 240,000 copies in 24 h: 2.4e8 requests, above 2.5e7."""
    trace = tmp_path / "requests.csv"
    trace.write_text(
        "time_s,input_tokens,output_tokens\n" + "".join(f"{3.6 * i},100,50\n" for i in range(1000))
    )
    requests = f'{{ file = "{trace}", format = "requests-csv", repeat = true, time_scale = 1e-4 }}'
    code, out = run_cli(
        ["validate", str(REPO / SERVING), "--set", f"services[0].requests={requests}"], capsys
    )
    assert code == 2
    line = out.err.strip()
    assert line.startswith("error: services: about 2.4e+08 requests over 24 h")
    assert line.endswith(MORE_REQUESTS_THAN_HELD)


@pytest.mark.parametrize("case", BOUNDS)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_resource_bound_is_refused_by_validation_before_anything_runs(capsys, case, command):
    override, message = BOUNDS[case]
    code, out = run_cli([command, str(REPO / SERVING), "--set", override], capsys)
    assert code == 2
    assert out.err.strip() == f"error: {REPO / SERVING}: {message}"
