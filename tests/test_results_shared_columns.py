"""A jobs-table column whose entries are all one value (a run without failures, without
training targets: zeros and NaN) is stored once (`sim.util.columns.stored_once`): 8 bytes,
not 8 MB a million jobs. It reads, saves and loads as any other column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.util.columns import stored_once
from tests.conftest import REPO


@pytest.fixture(scope="module")
def results() -> sim.Results:
    scenario = sim.load_scenario(REPO / "scenarios/quickstart.toml", ["duration_h=72"])
    return sim.simulate(scenario)


@pytest.mark.parametrize(
    "column",
    [np.zeros(5), np.full(5, np.nan), np.full(4, 7, np.int64), np.ones(3, bool)],
    ids=["zeros", "nan", "int", "bool"],
)
def test_a_column_of_one_value_is_stored_once_and_reads_the_same(column):
    once = stored_once(column)
    assert once.strides == (0,) and once.dtype == column.dtype
    np.testing.assert_array_equal(once, column)


@pytest.mark.parametrize(
    "column",
    [
        np.array([0.0, -0.0]),  # equal, but not the same bits
        np.array([1.0, np.nan]),
        np.array([1, 2]),
        np.array(["a", "a"], dtype=object),
        np.zeros(1),
        np.zeros(0),
    ],
    ids=["signed-zero", "nan-and-number", "ints", "text", "one-entry", "empty"],
)
def test_any_other_column_is_kept_as_it_is(column):
    assert stored_once(column) is column


def test_a_column_of_strided_rows_of_one_value_is_stored_once():
    wan = np.zeros((4, 3))
    assert stored_once(wan[:, 1]).strides == (0,)


def test_the_jobs_table_stores_its_single_valued_columns_once(results):
    jobs = results.jobs
    assert (jobs["failures"] == 0).all() and jobs["time_to_accuracy_h"].isna().all()
    for name in ("failures", "work_lost_failures_gpu_h", "time_to_accuracy_h", "target_metric"):
        assert jobs[name].to_numpy().strides == (0,), name
    assert jobs["submit_s"].to_numpy().strides == (8,)


def test_a_jobs_table_with_columns_stored_once_saves_and_loads_unchanged(results, tmp_path):
    loaded = sim.Results.load(results.save(tmp_path)).jobs
    pd.testing.assert_frame_equal(loaded, results.jobs)
    assert loaded["failures"].to_numpy().strides == (8,)  # read back as a full column
