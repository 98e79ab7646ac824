"""Result tables are written to Parquet a slice of rows at a time (`sim.util.parquet`): each
slice one row group, so writing never holds an Arrow copy of a whole table. The files read
back as `to_parquet` would have written them, and folders written in one row group (every
dcsim before) load the same."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

import sim
from sim.util.parquet import write_parquet
from tests.conftest import REPO


@pytest.fixture(scope="module")
def results() -> sim.Results:
    scenario = sim.load_scenario(REPO / "scenarios/quickstart.toml", ["duration_h=72"])
    return sim.simulate(scenario)


def _mixed_table(n: int) -> pd.DataFrame:
    """Every kind of column a result table has; the text column is empty in its first rows
    (its type is known only from the whole frame)."""
    return pd.DataFrame(
        {
            "time_s": [0.5 * i for i in range(n)],
            "count": list(range(n)),
            "site": pd.Categorical(["abc"[i % 3] for i in range(n)]),
            "reason": [None if i < n - 2 else "late" for i in range(n)],
            "reached": pd.array([(None, True, False)[i % 3] for i in range(n)], "boolean"),
            "job_id": pd.array([f"j{i}" for i in range(n)], dtype="str"),
        }
    )


def test_a_table_is_written_in_row_groups_of_the_given_rows(tmp_path):
    write_parquet(_mixed_table(1000), tmp_path / "t.parquet", rows=300)
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [300, 300, 300, 100]


@pytest.mark.parametrize("n", [0, 1, 299, 300, 1000])
def test_a_table_written_in_row_groups_reads_back_as_to_parquet_writes_it(tmp_path, n):
    frame = _mixed_table(n)
    frame.to_parquet(tmp_path / "whole.parquet", index=False)
    write_parquet(frame, tmp_path / "groups.parquet", rows=300)
    whole = pd.read_parquet(tmp_path / "whole.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "groups.parquet"), whole)
    schema = pq.read_schema(tmp_path / "groups.parquet")
    assert schema.equals(pq.read_schema(tmp_path / "whole.parquet"), check_metadata=True)


def test_results_write_their_tables_in_row_groups_and_load_them_unchanged(
    results, tmp_path, monkeypatch
):
    monkeypatch.setattr("sim.util.parquet.ROW_GROUP_ROWS", 100)
    loaded = sim.Results.load(results.save(tmp_path))
    assert pq.ParquetFile(tmp_path / "events.parquet").metadata.num_row_groups > 1
    assert pq.ParquetFile(tmp_path / "jobs.parquet").metadata.num_row_groups > 1
    for name in ("jobs", "sites", "power", "events", "dr_events"):
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(results, name))


def test_a_folder_written_in_one_row_group_loads_the_same(results, tmp_path):
    new = sim.Results.load(results.save(tmp_path / "new"))
    results.save(tmp_path / "old")
    for name in ("jobs", "sites", "power", "dr_events"):  # as dcsim wrote them before
        getattr(results, name).to_parquet(tmp_path / "old" / f"{name}.parquet", index=False)
    old = sim.Results.load(tmp_path / "old")
    for name in ("jobs", "sites", "power", "events", "dr_events"):
        pd.testing.assert_frame_equal(getattr(old, name), getattr(new, name))
