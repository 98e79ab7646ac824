"""Bad input: each malformed scenario gives one clear line naming the problem, and exit 2."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import SMALL_SCENARIO_TOML, run_cli

GOOD = SMALL_SCENARIO_TOML


def write(tmp_path, text, name="study.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


CASES = {
    "unknown key": (GOOD + 'colour = "red"\n', ["colour: unknown key"]),
    "wrong type": (
        GOOD.replace("duration_h = 24", 'duration_h = "a week"'),
        ["duration_h", "'a week'"],
    ),
    "negative count": (
        GOOD.replace("count = 8", "count = -4"),
        ["sites[0].gpus[0].count", "greater than 0", "-4"],
    ),
    "unknown site reference": (
        GOOD
        + textwrap.dedent("""
        [[demand_response]]
        site = "b"
        start = 2020-06-01T10:00:00Z
        duration_h = 1
        limit_kw = 5
        """),
        ["demand_response[0].site", "unknown site 'b'"],
    ),
    "zone years do not cover the horizon": (
        GOOD.replace("{ constant_g_per_kwh = 300 }", '{ zone = "DE", year = 2020 }')
        .replace("start = 2020-06-01T00:00:00Z", "start = 2020-12-30T00:00:00Z")
        .replace("duration_h = 24", "duration_h = 96"),
        ["sites[0].carbon.zone", "zone DE", "not 2021"],
    ),
    "unknown GPU model": (
        GOOD.replace('"A100-80GB"', '"A1000"'),
        ["sites[0].gpus[0].model", "unknown GPU model 'A1000'"],
    ),
    "invalid TOML": (GOOD.replace("lat = 50.1", "lat = 50.1.2"), ["invalid TOML", "line"]),
    "start without a time zone": (
        GOOD.replace("2020-06-01T00:00:00Z", "2020-06-01T00:00:00"),
        ["start", "UTC offset"],
    ),
    "GPU mix that does not sum to 1": (
        GOOD + "gpus = { 1 = 0.5, 2 = 0.2 }\n",
        ["workload.synthetic.gpus", "sum to 1"],
    ),
    "synthetic jobs larger than any site": (
        GOOD + "gpus = { 16 = 1.0 }\n",
        ["jobs of 16 GPUs fit on no site", "has 8"],
    ),
    "unknown policy": (
        GOOD + '[policy]\nname = "greenest"\n',
        ["policy.name", "unknown policy 'greenest'", "run_now"],
    ),
    "unknown policy parameter": (
        GOOD + '[policy]\nname = "run_now"\nparams = { bakfill = true }\n',
        ["policy.params.bakfill", "backfill"],
    ),
    "unknown zone": (
        GOOD.replace("{ constant_g_per_kwh = 300 }", '{ zone = "XX" }'),
        ["sites[0].carbon", "XX"],
    ),
    "two carbon sources": (
        GOOD.replace("{ constant_g_per_kwh = 300 }", '{ constant_g_per_kwh = 300, zone = "DE" }'),
        ["sites[0].carbon", "exactly one of"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_malformed_scenario_gives_one_line_and_exit_2(tmp_path, capsys, case):
    text, fragments = CASES[case]
    path = write(tmp_path, text)
    code, out = run_cli(["validate", str(path)], capsys)
    err = out.err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in [*fragments]:
        assert fragment in lines[0], lines[0]


def job_file_case(tmp_path, capsys, csv_text, fragments, name="jobs.csv"):
    if csv_text is not None:
        (tmp_path / name).write_text(textwrap.dedent(csv_text))
    scenario = GOOD.split("[workload.synthetic]")[0] + f'[workload]\nfile = "{name}"\n'
    code, out = run_cli(["run", str(write(tmp_path, scenario))], capsys)
    err = out.err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


def test_a_job_needing_more_gpus_than_any_site_has_is_an_error(tmp_path, capsys):
    job_file_case(
        tmp_path,
        capsys,
        """\
        job_id,submit_time,gpus,work_gpu_h
        a,0,1,1.0
        b,10,16,2.0
        """,
        ["jobs.csv:3", "16", "8"],
    )


def test_an_unreadable_job_file_is_an_error(tmp_path, capsys):
    job_file_case(tmp_path, capsys, None, ["missing.csv"], name="missing.csv")


def test_a_carbon_trace_with_a_non_numeric_value_names_file_and_line(tmp_path, capsys):
    (tmp_path / "ci.csv").write_text(
        "timestamp,carbon_intensity\n2020-06-01T00:00:00Z,300\n2020-06-01T01:00:00Z,lots\n"
    )
    text = GOOD.replace("{ constant_g_per_kwh = 300 }", '{ file = "ci.csv" }')
    code, out = run_cli(["validate", str(write(tmp_path, text))], capsys)
    err = out.err
    assert code == 2
    assert "ci.csv" in err and ":3" in err and "lots" in err


def test_a_bad_override_names_the_key(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    code, out = run_cli(["run", str(path), "--set", "sites[3].pue=1.1"], capsys)
    err = out.err
    assert code == 2
    assert "sites" in err and "3" in err


def test_a_missing_scenario_file_is_an_error(tmp_path, capsys):
    code, out = run_cli(["run", str(tmp_path / "nope.toml")], capsys)
    err = out.err
    assert code == 2
    assert "nope.toml" in err


def test_a_trace_file_that_ends_before_the_scenario_is_an_error(tmp_path, capsys):
    (tmp_path / "ci.csv").write_text(
        "timestamp,carbon_intensity\n2020-06-01T00:00:00Z,300\n2020-06-01T01:00:00Z,280\n"
    )
    text = GOOD.replace("{ constant_g_per_kwh = 300 }", '{ file = "ci.csv" }')
    code, out = run_cli(["validate", str(write(tmp_path, text))], capsys)
    assert code == 2
    assert "sites[0].carbon" in out.err and "before the scenario end" in out.err


def test_a_scenario_saved_with_a_byte_order_mark_is_read(tmp_path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + textwrap.dedent(GOOD).encode())
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 0, out.err


@pytest.mark.parametrize(
    ("encoded", "said"),
    [
        (textwrap.dedent(GOOD).replace('"a"', '"café"').encode("latin-1"), "is 0xe9, not UTF-8"),
        (textwrap.dedent(GOOD).encode("utf-16"), "this one is UTF-16"),
        (bytes(range(256)) * 4, "not UTF-8"),
    ],
    ids=["latin-1", "utf-16", "binary"],
)
def test_a_scenario_that_is_not_utf8_text_is_one_line_naming_the_file(
    tmp_path, capsys, encoded, said
):
    path = tmp_path / "study.toml"
    path.write_bytes(encoded)
    code, out = run_cli(["validate", str(path)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert str(path) in line and said in line


def a_file(tmp_path):
    (tmp_path / "taken").write_text("x")
    return tmp_path / "taken"


def under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "out"


def in_a_read_only_folder(tmp_path):
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux's /proc, where no one (not even root) may create files")
    return Path("/proc/self/out")


@pytest.mark.parametrize(
    ("make_out", "said"),
    [
        (a_file, "is a file, not a folder"),
        (under_a_file, "lies under a file"),
        (in_a_read_only_folder, "cannot write in /proc/self"),
    ],
    ids=["a file", "under a file", "read-only even for root"],
)
def test_an_out_folder_that_cannot_be_written_is_refused_before_the_run(
    tmp_path, capsys, make_out, said
):
    out = make_out(tmp_path)
    code, printed = run_cli(["run", str(write(tmp_path, GOOD)), "--out", str(out)], capsys)
    assert code == 2
    (line,) = printed.err.strip().splitlines()
    assert f"--out {out}" in line and said in line
    assert "simulating" not in printed.out and "energy" not in printed.out


@pytest.mark.parametrize("command", ["sweep", "plot", "import"])
def test_every_command_that_writes_checks_its_out_before_it_starts(tmp_path, capsys, command):
    scenario = write(tmp_path, GOOD)
    out = under_a_file(tmp_path)
    args = {
        "sweep": ["sweep", str(scenario), "--out", str(out)],
        "plot": ["plot", str(tmp_path), "--out", str(out)],
        "import": ["workload", "import", "native", str(scenario), "--out", str(out / "j.csv")],
    }[command]
    code, printed = run_cli(args, capsys)
    assert code == 2
    (line,) = printed.err.strip().splitlines()
    assert "--out" in line and "lies under a file" in line


def test_workload_import_creates_the_folder_of_its_out_file(tmp_path, capsys):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submit_time,gpus,work_gpu_h\nj1,0,1,2\n")
    out = tmp_path / "new" / "deeper" / "jobs.csv"
    code, printed = run_cli(["workload", "import", "native", str(jobs), "--out", str(out)], capsys)
    assert code == 0, printed.err
    assert out.is_file()


def test_grid_data_show_checks_its_plot_file_before_it_prints(tmp_path, capsys):
    plot = under_a_file(tmp_path) / "de.png"
    code, printed = run_cli(["grid-data", "show", "DE", "--plot", str(plot)], capsys)
    assert code == 2
    assert printed.out == ""
    (line,) = printed.err.strip().splitlines()
    assert f"--plot {plot}: lies under a file" in line


def test_a_missing_out_folder_is_created_with_its_parents(tmp_path, capsys):
    out = tmp_path / "new" / "deeper"
    code, printed = run_cli(["run", str(write(tmp_path, GOOD)), "--out", str(out)], capsys)
    assert code == 0, printed.err
    assert (out / "summary.json").is_file()


def test_shortening_a_scenario_past_its_event_names_the_fix(capsys):
    """The README's own `--set duration_h=...` on the quickstart, whose demand-response
    event is on day 3: one line that says how to go on."""
    from tests.conftest import REPO

    quickstart = REPO / "scenarios" / "quickstart.toml"
    code, out = run_cli(["validate", str(quickstart), "--set", "duration_h=24"], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert "demand_response[0]" in line and "--set demand_response=[]" in line
    code, out = run_cli(
        ["validate", str(quickstart), "--set", "duration_h=24", "--set", "demand_response=[]"],
        capsys,
    )
    assert code == 0, out.err
