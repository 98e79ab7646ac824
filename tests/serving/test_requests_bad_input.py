"""Request files and request importers given bad input: NaN, +-inf and absurd token counts are
refused (a request file) or skipped and counted (an importer), never written; a directory or
an unreadable file is a one-line `TraceError` naming it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.errors import TraceError
from sim.serving.importers import REQUEST_FORMATS, import_requests
from sim.serving.requests import read_requests, write_requests


@pytest.mark.parametrize(
    "column, value",
    [
        ("arrival_s", np.nan),
        ("arrival_s", np.inf),
        ("input_tokens", np.nan),
        ("output_tokens", np.inf),
        ("output_tokens", 1e30),
    ],
)
def test_a_request_file_with_a_non_finite_or_absurd_number_names_file_and_value(
    tmp_path, column, value
):
    frame = pd.DataFrame(
        {"arrival_s": [0.0, 1.0], "input_tokens": [10.0, 10.0], "output_tokens": [5.0, 5.0]}
    )
    frame.loc[1, column] = value
    path = tmp_path / "requests.parquet"
    frame.to_parquet(path)
    with pytest.raises(TraceError) as e:
        read_requests(path)
    message = str(e.value)
    assert message.startswith(f"{path}: RequestTable: {column} must") and "\n" not in message
    assert f"(request 1: {value!r})" in message


def test_the_csv_importer_skips_non_finite_and_absurd_cells_and_counts_them(tmp_path):
    path = tmp_path / "requests.csv"
    rows = ["0,10,5", "nan,10,5", "inf,10,5", "1,nan,5", "2,10,inf", "3,1e30,5", "4,10,-5"]
    path.write_text("time_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    table, report = import_requests("requests-csv", path)
    assert table.arrival_s.tolist() == [0.0]
    assert report.rows_read == 7 and report.imported == 1
    assert report.skipped == {
        "time_s not a number": 2,
        "input_tokens not a number": 1,
        "output_tokens not a number": 1,
        "input_tokens negative, fractional or above 1e+09": 1,
        "output_tokens negative, fractional or above 1e+09": 1,
    }
    out = write_requests(table, tmp_path / "out.parquet")
    assert read_requests(out).equals(table)


@pytest.mark.parametrize("fmt", sorted(REQUEST_FORMATS))
def test_a_directory_given_as_a_request_trace_is_a_one_line_error(tmp_path, fmt):
    with pytest.raises(TraceError, match=r": is a directory, not a trace file$"):
        import_requests(fmt, tmp_path)


@pytest.mark.parametrize("fmt", sorted(REQUEST_FORMATS))
def test_a_corrupt_gzip_request_trace_is_a_one_line_error(tmp_path, fmt):
    path = tmp_path / "trace.csv.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"not deflate data" * 4)
    with pytest.raises(TraceError) as e:
        import_requests(fmt, path)
    assert str(e.value).startswith(f"{path}: cannot read") and "\n" not in str(e.value)
