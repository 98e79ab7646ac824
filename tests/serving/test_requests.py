"""LLM inference requests: the request table and its file, the azure-llm and requests-csv
importers on small hand-written files in the exact formats (every row accounted for), the
real Azure traces, `dcsim workload import/describe` for requests, and the synthetic
generator (rate, cycles, determinism)."""

from __future__ import annotations

import gzip
import importlib.util
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.errors import TraceError
from sim.serving import importers
from sim.serving import requests as rq
from sim.serving.importers import import_requests
from sim.serving.requests import (
    DAY_S,
    WEEK_S,
    RequestTable,
    TokenDistribution,
    rate_at,
    read_requests,
    request_file_metadata,
    request_presets,
    synthetic_requests,
    write_requests,
)
from tests.conftest import REPO, SHARED_DATA, run_cli

AZURE = SHARED_DATA / "azure-llm-inference-2023"

# The published format: header, 7 fractional digits, CRLF, no newline after the last row.
AZURE_ROWS = [
    "TIMESTAMP,ContextTokens,GeneratedTokens",
    "2023-11-16 18:17:03.9799600,4808,10",
    "2023-11-16 18:17:04.0319600,3180,8",
    "2023-11-16 18:17:05.0000000,110,0",  # zero generated tokens
    "not a time,100,5",  # unparsable time
    ",100,5",  # missing time
    "2023-11-16 18:17:06.5000000,abc,5",  # text in a number column
    "2023-11-16 18:17:07.0000000,-3,5",  # negative
    "2023-11-16 18:17:07.5000000,12.5,5",  # fractional
    "2023-11-16 18:17:08.0000000,100,",  # missing output tokens
    "2023-11-16 18:17:02.0000000,0,1",  # kept: out of order, empty prompt
    "2023-11-16 18:17:09,7437,1899",  # kept: no fraction
]
AZURE_SKIPS = {
    "GeneratedTokens is 0 (a request generates at least one token)": 1,
    "TIMESTAMP unparsable (expected YYYY-MM-DD HH:MM:SS[.fffffff])": 1,
    "TIMESTAMP missing (empty field)": 1,
    "ContextTokens not a number": 1,
    "ContextTokens negative, fractional or above 1e+09": 2,
    "GeneratedTokens missing (empty field)": 1,
}


def _azure(tmp_path: Path, rows: list[str] = AZURE_ROWS, name: str = "trace.csv") -> Path:
    data = "\r\n".join(rows).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# ---------------------------------------------------------------------------- the table


def test_table_invariants():
    t = RequestTable([0.0, 1.0, 1.0], np.array([0, 5, 7], np.int32), [1, 2, 3])
    assert t.input_tokens.dtype == np.int64 and len(t) == 3 and t.span_s == 1.0
    assert not t.arrival_s.flags.writeable
    cases = [
        (([1.0, 0.5], [1, 1], [1, 1]), "non-decreasing (request 1: 0.5 after 1.0)"),
        (([0.0, 1.0], [1, 1], [1, 0]), "output_tokens must be 1..1000000000 (request 1: 0)"),
        (([0.0, 1.0], [-1, 1], [1, 1]), "input_tokens must be 0.."),
        (([-1.0], [1], [1]), "arrival_s must be finite and >= 0"),
        (([np.nan], [1], [1]), "arrival_s must be finite"),
        (([0.0], [1, 2], [1]), "input_tokens has 2 entries, arrival_s has 1"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            RequestTable(*args)
    with pytest.raises(TypeError, match="input_tokens must have dtype int64"):
        RequestTable([0.0], [1.5], [1])


def test_file_round_trip_and_errors(tmp_path):
    t = RequestTable([0.0, 0.25, 3.0], [10, 0, 7], [1, 2, 3])
    out = write_requests(t, tmp_path / "requests.parquet", metadata={"trace_start": "x"})
    back = read_requests(out)
    assert back.equals(t) and back.arrival_s.dtype == np.float64
    assert request_file_metadata(out) == {"trace_start": "x"}
    assert rq.is_request_file(out)
    with pytest.raises(TraceError, match=r"requests\.csv: requests are written as \.parquet"):
        write_requests(t, tmp_path / "requests.csv")
    jobs = tmp_path / "jobs.parquet"
    pd.DataFrame({"job_id": ["a"], "submit_time": [0.0]}).to_parquet(jobs)
    assert not rq.is_request_file(jobs)
    with pytest.raises(TraceError, match="jobs.parquet: missing column.s. arrival_s"):
        read_requests(jobs)
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"arrival_s": [0.0], "input_tokens": [1], "output_tokens": [0]}).to_parquet(bad)
    with pytest.raises(TraceError, match="bad.parquet: RequestTable: output_tokens"):
        read_requests(bad)


def test_write_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "requests.parquet"
    out.write_bytes(b"old")

    def broken(table, where, **kw):
        Path(where).write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rq.pq, "write_table", broken)
    with pytest.raises(TraceError, match="requests.parquet: cannot write: No space left"):
        write_requests(RequestTable([0.0], [1], [1]), out)
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["requests.parquet"]


# ---------------------------------------------------------------------------- importers


@pytest.mark.parametrize("name", ["trace.csv", "AzureLLMInferenceTrace_code.csv.gz"])
def test_azure_row_accounting(tmp_path, name):
    table, report = import_requests("azure-llm", _azure(tmp_path, name=name))
    assert report.rows_read == 11 and report.imported == 4
    assert report.skipped == AZURE_SKIPS
    assert report.imported + sum(report.skipped.values()) == report.rows_read
    # sorted by arrival, from the first kept request (18:17:02, which came late in the file)
    assert report.trace_start == "2023-11-16T18:17:02Z"
    np.testing.assert_allclose(table.arrival_s, [0.0, 1.97996, 2.03196, 7.0])
    assert table.input_tokens.tolist() == [0, 4808, 3180, 7437]
    assert table.output_tokens.tolist() == [1, 10, 8, 1899]
    assert any("sorted by arrival" in n for n in report.notes)
    assert any("read as UTC" in n for n in report.notes)
    text = report.render()
    assert "11 rows read, 4 requests imported" in text
    assert "skipped 2: ContextTokens negative, fractional or above 1e+09" in text
    assert "arrival_s 0 = 2023-11-16T18:17:02Z" in text


def test_azure_structural_errors(tmp_path):
    rows = [*AZURE_ROWS[:3], "2023-11-16 18:17:05.0000000,110", *AZURE_ROWS[4:]]
    with pytest.raises(TraceError, match=r"trace.csv:4: expected 3 fields"):
        import_requests("azure-llm", _azure(tmp_path, rows))
    rows = ["TIMESTAMP,Context,GeneratedTokens", "2023-11-16 18:17:05,1,1"]
    with pytest.raises(TraceError, match=r"trace.csv:1: missing column\(s\) 'ContextTokens'"):
        import_requests("azure-llm", _azure(tmp_path, rows))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(TraceError, match="empty.csv: empty file"):
        import_requests("azure-llm", tmp_path / "empty.csv")
    (tmp_path / "bad.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="bad.csv.gz: cannot read: Not a gzipped file"):
        import_requests("azure-llm", tmp_path / "bad.csv.gz")
    truncated = gzip.compress("\r\n".join(AZURE_ROWS).encode())[:-30]
    (tmp_path / "cut.csv.gz").write_bytes(truncated)
    with pytest.raises(TraceError, match="cut.csv.gz: "):
        import_requests("azure-llm", tmp_path / "cut.csv.gz")
    with pytest.raises(TraceError, match="nope.csv: no such file"):
        import_requests("azure-llm", tmp_path / "nope.csv")
    with pytest.raises(TraceError, match=r"unknown option\(s\) \['scale'\]; options: none"):
        import_requests("azure-llm", _azure(tmp_path), scale=2)
    header_only = import_requests("azure-llm", _azure(tmp_path, [AZURE_ROWS[0], ""]))
    assert len(header_only[0]) == 0 and header_only[1].rows_read == 0


def test_requests_csv_time_s(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(
        "time_s,input_tokens,output_tokens,model\n"
        "10.5,100,20,a\n"
        "3,50,5,b\n"  # out of order: sorted
        "-1,50,5,c\n"  # negative time
        "x,50,5,d\n"  # bad number
        "12,50,0,e\n"  # zero output
        "13,1e3,2.0,f\n"  # whole numbers written as floats
    )
    table, report = import_requests("requests-csv", path)
    assert report.rows_read == 6 and report.imported == 3
    assert report.skipped == {
        "time_s negative": 1,
        "time_s not a number": 1,
        "output_tokens is 0 (a request generates at least one token)": 1,
    }
    assert table.arrival_s.tolist() == [3.0, 10.5, 13.0]  # kept as they are, not shifted
    assert table.input_tokens.tolist() == [50, 100, 1000]
    assert table.output_tokens.tolist() == [5, 20, 2]
    assert report.trace_start is None  # no clock time: nothing under trace_start
    assert any("times kept as they are" in note for note in report.notes)


def test_requests_csv_timestamp(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(
        "timestamp,input_tokens,output_tokens\n"
        "2024-03-01T12:00:00Z,1,1\n"
        "2024-03-01T13:00:01+01:00,2,2\n"  # 12:00:01 UTC
        "2024-03-01 12:00:02.5,3,3\n"  # no zone: UTC
        "yesterday,4,4\n"
    )
    table, report = import_requests("requests-csv", path)
    assert report.skipped == {"timestamp unparsable (expected ISO 8601)": 1}
    assert table.arrival_s.tolist() == [0.0, 1.0, 2.5]
    assert report.trace_start == "2024-03-01T12:00:00Z"
    for header, message in [
        ("time_s,timestamp,input_tokens,output_tokens", "both time_s and timestamp"),
        ("t,input_tokens,output_tokens", "no time_s or timestamp"),
    ]:
        path.write_text(header + "\n")
        with pytest.raises(TraceError, match=rf"r.csv:1: {message}"):
            import_requests("requests-csv", path)
    path.write_text("time_s,input_tokens\n1,2\n")
    with pytest.raises(TraceError, match=r"r.csv:1: missing column\(s\) 'output_tokens'"):
        import_requests("requests-csv", path)


@pytest.mark.parametrize(
    ("file", "rows"),
    [("AzureLLMInferenceTrace_code.csv.gz", 8819), ("AzureLLMInferenceTrace_conv.csv.gz", 19366)],
)
def test_real_azure_traces(file, rows):
    if not AZURE.is_dir():
        pytest.skip(f"shared data not found at {AZURE} (checkout without ../shared)")
    table, report = import_requests("azure-llm", AZURE / file)
    assert report.rows_read == rows  # the data rows the source's README lists
    assert report.imported + sum(report.skipped.values()) == rows
    assert report.imported == rows and report.skipped == {}
    assert report.trace_start and report.trace_start.startswith("2023-11-16T18:1")
    assert 3400 < table.span_s < 3510 and table.output_tokens.min() >= 1
    # the shipped presets are the log-normal fit of this trace
    preset = request_presets()["azure-code" if "code" in file else "azure-conv"]
    assert preset.input_tokens.mu == pytest.approx(np.log(table.input_tokens).mean(), abs=1e-4)
    assert preset.output_tokens.sigma == pytest.approx(np.log(table.output_tokens).std(), abs=1e-4)
    assert preset.output_tokens.max == table.output_tokens.max()


# ---------------------------------------------------------------------------- the CLI


def test_cli_import_and_describe(tmp_path, capsys):
    out = tmp_path / "requests.parquet"
    code, cap = run_cli(
        ["workload", "import", "azure-llm", str(_azure(tmp_path)), "--out", str(out)], capsys
    )
    assert code == 0, cap.err
    assert "11 rows read, 4 requests imported" in cap.out
    assert f"4 requests written to {out}" in cap.out
    assert len(read_requests(out)) == 4
    assert request_file_metadata(out)["trace_start"] == "2023-11-16T18:17:02Z"
    code, cap = run_cli(["workload", "describe", str(out)], capsys)
    assert code == 0, cap.err
    for text in ("requests", "tokens per request", "output_tokens", "arrival rate by 5 minutes"):
        assert text in cap.out
    csv = tmp_path / "r.csv"
    csv.write_text("time_s,input_tokens,output_tokens\n0,1,1\n")
    code, cap = run_cli(["workload", "import", "requests-csv", str(csv), "--out", str(out)], capsys)
    assert code == 0 and "1 requests written" in cap.out
    assert "trace_start" not in request_file_metadata(out)  # time_s: no clock time to store


def test_describe_mean_rate_counts_gaps_and_time_s_files_have_no_clock(tmp_path):
    out = tmp_path / "requests.parquet"
    arrivals = [0.0, 10.0, 20.0]
    write_requests(RequestTable(arrivals, [1, 1, 1], [1, 1, 1]), out)
    summary, _, rates = importers.describe_requests(out)
    assert summary.columns[2]._cells == ["0.1"]  # 3 arrivals over 20 s: 2 gaps of 10 s
    csv = tmp_path / "r.csv"
    rows = "".join(f"{t},5,5\n" for t in range(0, 3 * 86400, 3600))
    csv.write_text("time_s,input_tokens,output_tokens\n" + rows)
    table, report = importers.import_requests("requests-csv", csv)
    assert report.trace_start is None
    write_requests(table, out, metadata={"format": "requests-csv"})
    *_, rates = importers.describe_requests(out)
    assert rates.title == "arrival rate by hour of day (hours after arrival_s 0, mod 24)"


def test_calibrate_requests_writes_atomically(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "calibrate_requests", REPO / "scripts" / "calibrate_requests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "presets.toml"
    path.write_text("old")
    module.write_atomically(path, "new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["presets.toml"]


def test_cli_bad_file_is_one_line_and_leaves_output(tmp_path, capsys):
    out = tmp_path / "requests.parquet"
    out.write_bytes(b"old")
    rows = [*AZURE_ROWS[:5], "2023-11-16 18:17:05.0000000,110,4,9"]
    bad = _azure(tmp_path, rows)
    code, cap = run_cli(["workload", "import", "azure-llm", str(bad), "--out", str(out)], capsys)
    assert code == 2
    assert cap.err.strip().count("\n") == 0
    assert f"{bad}:6: expected 3 fields" in cap.err
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == [
        "requests.parquet",
        "trace.csv",
    ]
    good = _azure(tmp_path)
    for args, message in [
        (["--out", str(tmp_path / "r.csv")], "r.csv: requests are written as .parquet"),
        (["--out", str(out), "--flex", "deferrable_fraction=0.5"], "--flex applies to job"),
        (["--out", str(out), "--option", "x=1"], "unknown option(s) ['x']"),
    ]:
        code, cap = run_cli(["workload", "import", "azure-llm", str(good), *args], capsys)
        assert code == 2 and message in cap.err and cap.err.strip().count("\n") == 0
    code, cap = run_cli(
        ["workload", "import", "azure-llm", str(tmp_path), "--out", str(out)], capsys
    )
    assert code == 2 and cap.err.strip().count("\n") == 0
    assert f"{tmp_path}: is a directory" in cap.err
    code, cap = run_cli(["workload", "import", "slurm", str(good), "--out", str(out)], capsys)
    assert code == 2 and "request formats: azure-llm, requests-csv" in cap.err


# ---------------------------------------------------------------------------- the generator


def test_rate_mean_over_a_week():
    t = np.linspace(0, WEEK_S, 7 * 24 * 60, endpoint=False)
    r = rate_at(t, 3.0, daily_amplitude=0.6, weekly_amplitude=0.4)
    assert r.mean() == pytest.approx(3.0, rel=1e-9)
    assert r.max() <= 3.0 * 1.6 * 1.4


def test_generator_rate_and_cycle_amplitudes():
    rate, a_d, a_w = 0.5, 0.5, 0.3
    peak_d, peak_w = 13 * 3600.0, 4 * DAY_S
    table = synthetic_requests(
        rate,
        WEEK_S,
        np.random.default_rng(7),
        daily_amplitude=a_d,
        weekly_amplitude=a_w,
        daily_peak_s=peak_d,
        weekly_peak_s=peak_w,
    )
    n, expected = len(table), rate * WEEK_S  # a whole week: the mean rate is rate_per_s
    assert abs(n - expected) < 4 * math.sqrt(expected)
    assert table.arrival_s.max() < WEEK_S
    # E[cos(2 pi (t - peak) / period)] over the arrivals is amplitude / 2 (the cross terms
    # vanish over whole weeks); each estimate's standard error is about sqrt(2 / n).
    t = table.arrival_s
    est_d = 2 * np.cos(2 * np.pi * (t - peak_d) / DAY_S).mean()
    est_w = 2 * np.cos(2 * np.pi * (t - peak_w) / WEEK_S).mean()
    tol = 4 * math.sqrt(2 / n)
    assert abs(est_d - a_d) < tol and abs(est_w - a_w) < tol
    # and the peak is where it was asked (the sine component is zero)
    assert abs(2 * np.sin(2 * np.pi * (t - peak_d) / DAY_S).mean()) < tol


def test_generator_homogeneous_and_tokens():
    table = synthetic_requests(2.0, 20_000.0, 3, input_tokens="azure-code", output_tokens=64)
    n = len(table)
    assert abs(n - 40_000) < 4 * math.sqrt(40_000)
    gaps = np.diff(table.arrival_s)
    assert gaps.mean() == pytest.approx(0.5, rel=0.03) and gaps.std() / gaps.mean() == (
        pytest.approx(1.0, abs=0.03)
    )
    code = request_presets()["azure-code"].input_tokens
    assert table.input_tokens.min() >= code.min and table.input_tokens.max() <= code.max
    assert np.median(table.input_tokens) == pytest.approx(code.median, rel=0.05)
    assert set(table.output_tokens.tolist()) == {64}
    conv = synthetic_requests(1.0, 20_000.0, 4)  # both azure-conv, correlated logs
    rho = np.corrcoef(np.log(conv.input_tokens), np.log(conv.output_tokens))[0, 1]
    assert rho == pytest.approx(request_presets()["azure-conv"].log_correlation, abs=0.05)
    free = synthetic_requests(1.0, 20_000.0, 4, correlated=False)
    rho_free = np.corrcoef(np.log(free.input_tokens), np.log(free.output_tokens))[0, 1]
    assert abs(rho_free) < 0.03
    custom = synthetic_requests(1.0, 1000.0, 5, output_tokens=TokenDistribution(3.0, 0.0, 1, 10))
    assert set(custom.output_tokens.tolist()) == {10}
    assert len(synthetic_requests(0.0, 1000.0, 1)) == 0
    assert len(synthetic_requests(1.0, 0.0, 1)) == 0


def test_generator_is_deterministic_by_seed():
    kw = dict(daily_amplitude=0.4, weekly_amplitude=0.2, input_tokens="azure-conv")
    a = synthetic_requests(1.0, 2 * DAY_S, 11, **kw)
    b = synthetic_requests(1.0, 2 * DAY_S, np.random.default_rng(11), **kw)
    c = synthetic_requests(1.0, 2 * DAY_S, 12, **kw)
    assert a.equals(b) and not c.equals(a)


def test_generator_rejects_bad_parameters():
    for kwargs, message in [
        (dict(rate_per_s=-1.0), "rate_per_s must be"),
        (dict(duration_s=math.inf), "duration_s must be"),
        (dict(daily_amplitude=1.0), r"daily_amplitude must be in \[0, 1\)"),
        (dict(input_tokens="azure-chat"), "unknown preset 'azure-chat'; presets: azure-code"),
        (dict(output_tokens=0), "output_tokens: a request generates >= 1 token"),
        (dict(rate_per_s="1"), "rate_per_s must be a finite number >= 0, got '1'"),
        (dict(rate_per_s=None), "rate_per_s must be a finite number >= 0, got None"),
        (dict(rate_per_s=10**400), "rate_per_s must be a finite number"),
        (dict(duration_s="10"), "duration_s must be a finite number"),
        (dict(weekly_amplitude="0.1"), r"weekly_amplitude must be in \[0, 1\)"),
        (
            dict(rate_per_s=1e6, duration_s=DAY_S),
            r"rate_per_s=1000000.0, duration_s=86400.0 .*8.64e\+10 requests expected, more "
            r"than the 1e\+09",
        ),
        (
            dict(rate_per_s=1e4, duration_s=DAY_S, daily_amplitude=0.5),
            r"about 1.3e\+09 requests expected",
        ),
    ]:
        args = {"rate_per_s": 1.0, "duration_s": 10.0, "rng": 0, **kwargs}
        with pytest.raises(ValueError, match=message):
            synthetic_requests(**args)  # type: ignore[arg-type]


def test_presets_file_names_its_source():
    raw = tomllib.loads((REPO / "sim" / "data" / "request_presets.toml").read_text())
    assert "Azure LLM inference traces 2023" in raw["source"]
    assert raw["generated_by"] == "scripts/calibrate_requests.py"
    assert set(raw["presets"]) == {"azure-code", "azure-conv"} == set(request_presets())
    assert importers.REQUEST_FORMATS.keys() == {"azure-llm", "requests-csv"}
