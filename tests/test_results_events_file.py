"""events.parquet stores each event's job as its row in jobs.parquet (`job_index`, int32, -1:
none); `Results.load` decodes it into the job ids, and still reads folders written before,
whose events name the job by its id."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sim
from sim.results.events import events_for_file
from tests.conftest import REPO


@pytest.fixture(scope="module")
def results() -> sim.Results:
    scenario = sim.load_scenario(REPO / "scenarios/quickstart.toml", ["duration_h=72"])
    return sim.simulate(scenario)


def test_the_events_file_holds_job_rows_not_job_ids(results, tmp_path):
    results.save(tmp_path)
    schema = pq.read_schema(tmp_path / "events.parquet")
    assert schema.names == ["time_s", "kind", "job_index", "site", "value", "detail"]
    assert str(schema.field("job_index").type) == "int32"
    on_disk = pd.read_parquet(tmp_path / "events.parquet")["job_index"].to_numpy()
    job_ids = results.jobs["job_id"].to_numpy()
    named = on_disk >= 0
    assert (on_disk[~named] == -1).all() and (~named).sum() == results.events["job"].isna().sum()
    assert list(job_ids[on_disk[named]]) == list(results.events["job"].dropna())


def test_new_events_files_round_trip_to_the_same_table(results, tmp_path):
    loaded = sim.Results.load(results.save(tmp_path))
    pd.testing.assert_frame_equal(loaded.events, results.events)
    assert loaded.events["job"].cat.categories.equals(pd.Index(results.jobs["job_id"]))


def test_an_old_folder_with_job_ids_in_its_events_loads_as_written(results, tmp_path):
    results.save(tmp_path)
    # the format before job_index: the events table as it is in memory, ids as a dictionary
    results.events.to_parquet(tmp_path / "events.parquet", index=False)
    old = sim.Results.load(tmp_path)
    assert list(old.events.columns) == ["time_s", "kind", "job", "site", "value", "detail"]
    assert old.events["job"].tolist() == results.events["job"].tolist()


def test_an_old_folder_saved_again_is_written_in_the_new_format(results, tmp_path):
    results.save(tmp_path / "old")
    pd.DataFrame(results.events.assign(job=results.events["job"].astype(object))).to_parquet(
        tmp_path / "old" / "events.parquet", index=False
    )  # an old file with plain text ids, no dictionary
    again = sim.Results.load(sim.Results.load(tmp_path / "old").save(tmp_path / "new"))
    assert "job_index" in pq.read_schema(tmp_path / "new" / "events.parquet").names
    assert again.events["job"].tolist() == results.events["job"].tolist()


def test_an_event_of_a_job_missing_from_the_jobs_table_is_an_error(results):
    events = results.events.assign(job=results.events["job"].astype(object))
    events.loc[0, "job"] = "no-such-job"
    with pytest.raises(ValueError, match="events: job 'no-such-job' is not in the jobs table"):
        events_for_file(events, results.jobs["job_id"])


def test_the_job_rows_are_int32_for_any_number_of_jobs(results):
    # a categorical over few jobs has int8 codes; the file's column is int32 all the same
    events = results.events.head(3)
    assert events_for_file(events, results.jobs["job_id"])["job_index"].dtype == np.int32
