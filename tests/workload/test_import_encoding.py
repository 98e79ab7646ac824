"""Every importer (`dcsim workload import`, jobs and requests) checks its text files for
encoding with the scenario loader's check (`sim.util.text`): a file that is not UTF-8 is one
line saying so, never a dump of its bytes."""

from __future__ import annotations

import pytest

from sim.serving.importers import REQUEST_FORMATS
from sim.workload.importers import FORMATS
from tests.conftest import run_cli

TEXT = "job_id,submit_time,gpus,work_gpu_h\nj1,0,1,1\n"


@pytest.mark.parametrize("fmt", [*FORMATS, *REQUEST_FORMATS])
@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("utf-16", "this one is UTF-16"),
        ("utf-16-le", "byte 1 is 0x00, not UTF-8 text (UTF-16 or a binary file? save it as UTF-8)"),
        ("latin-1", "byte 0 is 0xe9, not UTF-8 (Latin-1 or a binary file? save it as UTF-8)"),
    ],
)
def test_an_imported_file_that_is_not_utf8_is_one_line_naming_it(
    tmp_path, capsys, fmt, encoding, said
):
    trace = tmp_path / "trace.csv"
    text = TEXT if encoding != "latin-1" else "é" + TEXT  # é is byte 0xe9 in Latin-1
    trace.write_bytes(text.encode(encoding))
    code, out = run_cli(
        ["workload", "import", fmt, str(trace), "--out", str(tmp_path / "o.parquet")], capsys
    )
    assert code == 2
    assert out.err.strip() == f"error: {trace}: trace files are UTF-8 text; {said}"


def test_the_job_table_of_a_pai2020_trace_is_checked_too(tmp_path, capsys):
    tasks = tmp_path / "pai_task_table.csv"
    tasks.write_text("j1,t1,1,Terminated,0,10,100,1,1,V100\n")
    jobs = tmp_path / "pai_job_table.csv"
    jobs.write_bytes("j1,inst,user,Terminated,0,10\n".encode("utf-16"))
    code, out = run_cli(
        ["workload", "import", "pai2020", str(tasks), "--out", str(tmp_path / "o.csv")], capsys
    )
    assert code == 2
    assert out.err.strip() == f"error: {jobs}: trace files are UTF-8 text; this one is UTF-16"
