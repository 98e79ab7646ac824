"""The event table's job column: the job ids as categories, without the lookup table that
checking their uniqueness leaves behind (about 60 MB at a million jobs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.util.records import EventLog, job_categorical
from tests.conftest import REPO

JOB_IDS = np.array([f"j{i}" for i in range(5)], dtype=object)
SITES = ["a", "b"]


def _event_table() -> pd.DataFrame:
    log = EventLog()
    log.append(0.0, "submit", 0)
    log.append(1.0, "start", 3, 1, detail="V100")
    log.append(2.0, "dr_start", site=0, value=5.0)
    return log.drain_frame(JOB_IDS, SITES)


def test_the_job_column_names_each_event_s_job_and_none_for_site_wide_events():
    job = _event_table()["job"]
    assert job.tolist()[:2] == ["j0", "j3"]
    assert pd.isna(job.iloc[2])


def test_the_job_categories_are_every_job_id_in_job_order_as_pandas_would_build_them():
    expected = pd.Categorical.from_codes([0, 3, -1], categories=pd.Index(JOB_IDS))
    pd.testing.assert_extension_array_equal(_event_table()["job"].array, expected)


def test_no_lookup_table_is_kept_on_the_job_categories_and_lookups_still_work():
    categories = _event_table()["job"].cat.categories
    assert "_engine" not in categories._cache
    assert categories.get_loc("j3") == 3
    assert categories.is_unique


def test_numpy_text_job_ids_become_one_str_array_shared_by_jobs_and_events():
    # a generated workload's ids are numpy StringDType (no Python string per job): the jobs
    # table's job_id and the events' job categories are one Arrow array built from them
    scenario = sim.load_scenario(REPO / "scenarios/quickstart.toml", ["duration_h=72"])
    results = sim.simulate(scenario)
    job_id = results.jobs["job_id"]
    assert job_id.dtype == "str"
    categories = results.events["job"].cat.categories
    assert categories.array._pa_array is job_id.array._pa_array


def test_ids_known_unique_are_not_hashed_to_check_them_and_read_the_same(monkeypatch):
    def no_hashing(self):
        raise AssertionError("the ids were hashed to check that they are unique")

    ids = pd.array([f"j{i}" for i in range(5)], dtype="str")
    checked = job_categorical(np.array([0, 3, -1], np.int32), ids)
    monkeypatch.setattr(pd.Index, "is_unique", property(no_hashing))
    fast = job_categorical(np.array([0, 3, -1], np.int32), ids, unique=True)
    pd.testing.assert_extension_array_equal(fast, checked)


def test_repeated_ids_not_known_unique_are_an_error():
    with pytest.raises(ValueError, match="unique"):
        job_categorical(np.array([0, 1], np.int32), np.array(["a", "a"], dtype=object))


def test_a_run_of_no_generated_jobs_has_an_empty_object_job_id_column_as_before():
    scenario = sim.load_scenario(
        REPO / "scenarios/quickstart.toml",
        ["duration_h=72", "workload.synthetic.arrival_rate_per_h=1e-9"],
    )
    results = sim.simulate(scenario)
    assert len(results.jobs) == 0 and results.jobs["job_id"].dtype == object
