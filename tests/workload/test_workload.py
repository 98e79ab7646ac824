"""Specification of sim.workload: the JobTable, the synthetic generator, the job-file loader."""

from __future__ import annotations

import gzip
import math
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config.loading import scenario_from_dict
from sim.config.scenario import Scenario
from sim.config.workload import SyntheticWorkload
from sim.engine.build import workload_jobs
from sim.errors import ScenarioError, TraceError
from sim.workload import COLUMNS, JobTable, generate_synthetic
from tests.conftest import scenario_jobs

START = datetime(2020, 6, 1, tzinfo=UTC)
HORIZON_S = 48 * 3600.0
SITES = ["east", "west"]  # largest GPU pools: 8 and 16
HEADER = "job_id,submit_time,gpus,work_gpu_h"


def make_scenario(
    workload: dict | None = None, source: Path | str = "<scenario>", **extra
) -> Scenario:
    raw = {
        "name": "workload-test",
        "start": START,
        "duration_h": 48.0,
        "sites": [
            {
                "name": "east",
                "lat": 40.7,
                "lon": -74.0,
                "carbon": {"constant_g_per_kwh": 300},
                "gpus": [{"model": "A100-80GB", "count": 8}, {"model": "V100", "count": 4}],
            },
            {
                "name": "west",
                "lat": 37.4,
                "lon": -122.1,
                "carbon": {"constant_g_per_kwh": 300},
                "gpus": [{"model": "A100-80GB", "count": 16}],
            },
        ],
        "workload": workload or {"file": "jobs.csv"},
        **extra,
    }
    return scenario_from_dict(raw, source=source)


SCENARIO = make_scenario()


def synthetic(**kw) -> SyntheticWorkload:
    cfg = {"arrival_rate_per_h": 50.0, "duration": {"dist": "exponential", "mean_h": 2.0}}
    return SyntheticWorkload.model_validate(cfg | kw)


def generate(cfg: SyntheticWorkload, seed: int = 1, horizon_s: float = 2000 * 3600.0) -> JobTable:
    return generate_synthetic(cfg, SITES, horizon_s, np.random.default_rng(seed))


def within(observed: float, expected: float, stderr: float, z: float = 5.0) -> bool:
    return abs(observed - expected) <= z * stderr


def write(tmp_path: Path, text: str, name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def csv(*rows: str, header: str = HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


# --- the synthetic generator ------------------------------------------------------------


def test_arrivals_are_poisson_at_the_configured_rate():
    jobs = generate(synthetic(arrival_rate_per_h=50.0), horizon_s=2000 * 3600.0)
    expected = 50.0 * 2000
    assert within(len(jobs), expected, math.sqrt(expected))
    assert np.all(np.diff(jobs.submit_s) >= 0)
    assert jobs.submit_s[0] >= 0 and jobs.submit_s[-1] < 2000 * 3600.0
    gaps = np.diff(jobs.submit_s)
    assert within(gaps.mean(), 72.0, 72.0 / math.sqrt(len(gaps)))  # mean gap 3600 s / 50
    assert within(gaps.std() / gaps.mean(), 1.0, 0.01)  # exponential gaps: CV = 1
    first_half = np.count_nonzero(jobs.submit_s < 1000 * 3600.0)
    assert within(first_half, len(jobs) / 2, math.sqrt(len(jobs)) / 2)


def test_max_jobs_keeps_the_first_arrivals():
    jobs = generate(synthetic(arrival_rate_per_h=50.0, max_jobs=1000))
    assert len(jobs) == 1000
    # the 1000th arrival of a rate-50/h process: Gamma(1000), mean 20 h, sd ~0.63 h
    assert within(jobs.submit_s[-1] / 3600.0, 20.0, math.sqrt(1000) / 50.0)


def test_exponential_durations_have_the_configured_mean():
    jobs = generate(synthetic(duration={"dist": "exponential", "mean_h": 3.0}))
    duration_h = jobs.work_gpu_h / jobs.gpus
    assert within(duration_h.mean(), 3.0, 3.0 / math.sqrt(len(jobs)))
    assert within(duration_h.std(), 3.0, 0.05)


def test_lognormal_durations_have_the_configured_median_and_shape():
    jobs = generate(synthetic(duration={"dist": "lognormal", "median_h": 1.5, "sigma": 0.8}))
    log_d = np.log(jobs.work_gpu_h / jobs.gpus)
    median_se = 0.8 * math.sqrt(math.pi / 2) / math.sqrt(len(jobs))
    assert within(np.median(log_d), math.log(1.5), median_se)
    assert within(log_d.std(), 0.8, 0.8 / math.sqrt(2 * len(jobs)))


def test_gpu_counts_follow_the_mix_and_work_is_duration_times_gpus():
    mix = {1: 0.5, 4: 0.3, 8: 0.2, 16: 0.0}
    jobs = generate(synthetic(gpus=mix, duration={"dist": "exponential", "mean_h": 2.0}))
    n = len(jobs)
    assert set(np.unique(jobs.gpus)) == {1, 4, 8}
    for count, p in mix.items():
        share = np.count_nonzero(jobs.gpus == count) / n
        assert within(share, p, math.sqrt(p * (1 - p) / n) + 1e-12)
    # duration (hours on the job's reference GPUs) does not depend on the GPU count
    for count in (1, 8):
        d = jobs.work_gpu_h[jobs.gpus == count] / count
        assert within(d.mean(), 2.0, 2.0 / math.sqrt(len(d)))


def test_deferrable_jobs_get_a_deadline_with_slack_in_the_configured_range():
    jobs = generate(synthetic(deferrable_fraction=0.3, slack_h=(6.0, 24.0)))
    n = len(jobs)
    has_deadline = ~np.isnan(jobs.deadline_s)
    assert within(has_deadline.mean(), 0.3, math.sqrt(0.3 * 0.7 / n))
    duration_s = jobs.work_gpu_h / jobs.gpus * 3600.0
    slack_h = (jobs.deadline_s - jobs.submit_s - duration_s)[has_deadline] / 3600.0
    assert slack_h.min() >= 6.0 - 1e-6 and slack_h.max() <= 24.0 + 1e-6
    assert slack_h.min() < 6.1 and slack_h.max() > 23.9
    assert within(slack_h.mean(), 15.0, 18.0 / math.sqrt(12 * len(slack_h)))


def test_interruptible_share_constants_and_ids():
    cfg = synthetic(
        interruptible_fraction=0.25, profile="inference", checkpoint_gb=12.5, data_gb=3.0
    )
    jobs = generate(cfg)
    n = len(jobs)
    assert within(jobs.interruptible.mean(), 0.25, math.sqrt(0.25 * 0.75 / n))
    assert set(jobs.profile) == {"inference"}
    assert np.all(jobs.checkpoint_gb == 12.5) and np.all(jobs.data_gb == 3.0)
    assert list(jobs.job_id[:3]) == ["j0", "j1", "j2"] and jobs.job_id[-1] == f"j{n - 1}"
    assert np.all(np.isnan(jobs.deadline_s))  # deferrable_fraction defaults to 0


def test_origin_sites_uniform_by_default_else_weighted():
    jobs = generate(synthetic())
    n = len(jobs)
    assert within(np.mean(jobs.origin_site == 0), 0.5, math.sqrt(0.25 / n))
    weighted = generate(synthetic(origin_sites={"west": 1.0}))
    assert np.all(weighted.origin_site == 1)
    weighted = generate(synthetic(origin_sites={"east": 0.2, "west": 0.8}))
    assert within(np.mean(weighted.origin_site == 0), 0.2, math.sqrt(0.16 / n))


def test_origin_sites_naming_an_unknown_site_is_a_scenario_error():
    wl = {
        "synthetic": {
            "arrival_rate_per_h": 1.0,
            "origin_sites": {"north": 1.0},
            "duration": {"dist": "exponential", "mean_h": 2.0},
        }
    }
    with pytest.raises(ScenarioError, match="origin_sites: unknown site 'north'"):
        make_scenario(wl)


def test_a_short_horizon_can_give_an_empty_table():
    jobs = generate_synthetic(
        synthetic(arrival_rate_per_h=1e-6), SITES, 3600.0, np.random.default_rng(0)
    )
    assert len(jobs) == 0
    assert list(jobs.to_frame(SITES).columns) == list(COLUMNS)


# --- determinism --------------------------------------------------------------------------


DETERMINISM_CFG = synthetic(
    gpus={1: 0.6, 8: 0.4}, deferrable_fraction=0.5, interruptible_fraction=0.5
)


def test_same_seed_gives_the_same_table_and_another_seed_another():
    a = generate(DETERMINISM_CFG, seed=7, horizon_s=HORIZON_S)
    b = generate(DETERMINISM_CFG, seed=7, horizon_s=HORIZON_S)
    c = generate(DETERMINISM_CFG, seed=8, horizon_s=HORIZON_S)
    assert a.equals(b)
    assert not a.equals(c)
    assert not np.array_equal(a.submit_s[:10], c.submit_s[:10])


def test_the_workload_ignores_global_random_state_and_the_policy():
    np.random.seed(1)
    a = generate(DETERMINISM_CFG, seed=7, horizon_s=HORIZON_S)
    np.random.seed(2)
    b = generate(DETERMINISM_CFG, seed=7, horizon_s=HORIZON_S)
    assert a.equals(b)
    wl = {"synthetic": DETERMINISM_CFG.model_dump(mode="json")}
    run_now = make_scenario(wl, policy={"name": "run_now"})
    other = make_scenario(wl, policy={"name": "something_else", "params": {"x": 1}})
    via_scenario = workload_jobs(run_now, np.random.default_rng(7))
    assert via_scenario.equals(workload_jobs(other, np.random.default_rng(7)))
    assert via_scenario.equals(a)


def test_changing_a_later_attribute_keeps_the_others_common_random_numbers():
    base = generate(DETERMINISM_CFG, seed=3)
    changed = generate(DETERMINISM_CFG.model_copy(update={"deferrable_fraction": 0.9}), seed=3)
    for name in ("submit_s", "gpus", "work_gpu_h", "interruptible", "origin_site"):
        assert np.array_equal(getattr(base, name), getattr(changed, name)), name
    assert not np.array_equal(base.deadline_s, changed.deadline_s, equal_nan=True)


# --- the JobTable --------------------------------------------------------------------------


def table(**overrides) -> JobTable:
    cols = {
        "job_id": ["a", "b", "c"],
        "submit_s": [0.0, 10.0, 10.0],
        "gpus": [1, 8, 16],
        "work_gpu_h": [0.5, 80.0, 1e-3],
        "profile": ["mixed", "compute-bound", "inference"],
        "deadline_s": [np.nan, 1e6, 10.0],
        "interruptible": [False, True, False],
        "checkpoint_gb": [0.0, 120.5, 0.0],
        "data_gb": [2.0, 0.0, 0.1],
        "origin_site": [1, 0, 1],
    }
    return JobTable(**(cols | overrides))


def test_jobtable_converts_sequences_to_typed_read_only_arrays():
    jobs = table()
    assert len(jobs) == 3
    assert jobs.job_id.dtype == object and jobs.gpus.dtype == np.int64
    assert jobs.submit_s.dtype == np.float64 and jobs.interruptible.dtype == bool
    with pytest.raises(ValueError):
        jobs.gpus[0] = 2


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"gpus": [1, 2]}, "JobTable.gpus has 2 entries"),
        ({"gpus": [1.0, 2.0, 3.0]}, "JobTable.gpus must have dtype int64"),
        ({"interruptible": [0, 1, 0]}, "JobTable.interruptible must have dtype bool"),
        ({"submit_s": [5.0, 0.0, 10.0]}, "sorted"),
        ({"gpus": [1, 0, 2]}, "gpus must be > 0"),
        ({"deadline_s": [np.nan, 5.0, 10.0]}, "deadline_s must be >= submit_s"),
        ({"profile": ["mixed", "mixed", "quantum"]}, "unknown profiles"),
        ({"job_id": ["a", "b", "a"]}, "job_id must be unique"),
    ],
)
def test_jobtable_rejects_inconsistent_columns(overrides, error):
    with pytest.raises((TypeError, ValueError), match=error):
        table(**overrides)


def test_to_frame_writes_the_native_columns_with_site_names():
    frame = table().to_frame(SITES)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["origin_site"].tolist() == ["west", "east", "west"]
    assert frame["submit_time"].tolist() == [0.0, 10.0, 10.0]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["jobs.csv", "jobs.csv.gz", "jobs.parquet"])
@pytest.mark.parametrize("source", ["hand-built", "synthetic"])
def test_a_table_round_trips_through_the_native_formats(tmp_path, name, source):
    if source == "hand-built":
        jobs = table()
    else:
        cfg = synthetic(
            arrival_rate_per_h=100.0,
            gpus={1: 0.5, 2: 0.25, 16: 0.25},
            deferrable_fraction=0.4,
            interruptible_fraction=0.5,
            checkpoint_gb=7.25,
        )
        jobs = generate(cfg, seed=11, horizon_s=HORIZON_S)
    frame = jobs.to_frame(SITES)
    path = tmp_path / name
    if name.endswith(".parquet"):
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    assert scenario_jobs(path, SCENARIO).equals(jobs)


@st.composite
def job_tables(draw) -> JobTable:
    n = draw(st.integers(1, 8))
    ids = draw(
        st.lists(
            st.text(st.sampled_from("ab,\"' x9_-é"), min_size=1, max_size=6).map(str.strip),
            min_size=n,
            max_size=n,
            unique=True,
        ).filter(lambda ids: all(ids))
    )
    submit = sorted(
        draw(st.lists(st.floats(0, HORIZON_S, exclude_max=True), min_size=n, max_size=n))
    )
    # at most MAX_JOB_RUNTIME_H (1e5 h) of runtime on one GPU
    positive = st.floats(1e-9, 1e5, allow_subnormal=False)
    slack = draw(st.lists(st.none() | st.floats(0, 1e7), min_size=n, max_size=n))
    return JobTable(
        job_id=np.array(ids, dtype=object),
        submit_s=submit,
        gpus=draw(st.lists(st.integers(1, 16), min_size=n, max_size=n)),
        work_gpu_h=draw(st.lists(positive, min_size=n, max_size=n)),
        profile=draw(
            st.lists(
                st.sampled_from(["mixed", "inference", "memory-bound"]), min_size=n, max_size=n
            )
        ),
        deadline_s=[np.nan if d is None else s + d for s, d in zip(submit, slack, strict=True)],
        interruptible=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        checkpoint_gb=draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n)),
        data_gb=draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n)),
        origin_site=draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
    )


@settings(max_examples=30, deadline=None)
@given(jobs=job_tables())
def test_any_table_round_trips_exactly_through_csv(jobs):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "jobs.csv"
        jobs.to_frame(SITES).to_csv(path, index=False)
        assert scenario_jobs(path, SCENARIO).equals(jobs)


# --- reading job files ---------------------------------------------------------------------


def test_optional_columns_take_their_defaults(tmp_path):
    jobs = scenario_jobs(write(tmp_path, csv("a,0,2,1.5")), SCENARIO)
    assert list(jobs.job_id) == ["a"] and jobs.gpus.tolist() == [2]
    assert jobs.work_gpu_h.tolist() == [1.5] and jobs.profile.tolist() == ["mixed"]
    assert np.isnan(jobs.deadline_s[0]) and jobs.interruptible.tolist() == [False]
    assert jobs.checkpoint_gb.tolist() == [0.0] and jobs.data_gb.tolist() == [0.0]
    assert jobs.origin_site.tolist() == [0]  # the first site


def test_empty_optional_cells_take_their_defaults(tmp_path):
    header = HEADER + ",profile,deadline,interruptible,checkpoint_gb,data_gb,origin_site"
    text = csv("a,0,1,1,,,,,,", "b,0,1,1,inference,7200,true,3,4,west", header=header)
    jobs = scenario_jobs(write(tmp_path, text), SCENARIO)
    assert jobs.profile.tolist() == ["mixed", "inference"]
    assert np.isnan(jobs.deadline_s[0]) and jobs.deadline_s[1] == 7200.0
    assert jobs.interruptible.tolist() == [False, True]
    assert jobs.checkpoint_gb.tolist() == [0.0, 3.0] and jobs.data_gb.tolist() == [0.0, 4.0]
    assert jobs.origin_site.tolist() == [0, 1]


def test_times_are_seconds_or_iso_datetimes_with_offset(tmp_path):
    text = csv(
        "a,90.5,1,1,",
        "b,2020-06-01T02:00:00+01:00,1,1,2020-06-01T03:00:00Z",
        "c,2020-06-01 00:30:00Z,1,1,2020-06-02T00:00:00-02:00",
        header=HEADER + ",deadline",
    )
    jobs = scenario_jobs(write(tmp_path, text), SCENARIO)
    assert jobs.job_id.tolist() == ["a", "c", "b"]  # sorted by submit time
    assert jobs.submit_s.tolist() == [90.5, 1800.0, 3600.0]
    assert np.isnan(jobs.deadline_s[0])
    assert jobs.deadline_s[1:].tolist() == [26 * 3600.0, 3 * 3600.0]


def test_jobs_are_sorted_by_submit_time_keeping_file_order_on_ties(tmp_path):
    text = csv("late,100,1,1", "tie1,50,1,1", "early,0,1,1", "tie2,50,1,1")
    jobs = scenario_jobs(write(tmp_path, text), SCENARIO)
    assert jobs.job_id.tolist() == ["early", "tie1", "tie2", "late"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False), ("", False)],
)
def test_interruptible_accepts_true_false_one_zero(tmp_path, value, expected):
    text = csv(f"a,0,1,1,{value}", header=HEADER + ",interruptible")
    assert scenario_jobs(write(tmp_path, text), SCENARIO).interruptible.tolist() == [expected]


def test_blank_lines_and_spaces_are_ignored_but_lines_still_counted(tmp_path):
    path = write(tmp_path, csv(" a , 0 , 1 , 1 ", "", "   ", "b,0,-2,1"))
    with pytest.raises(
        TraceError,
        match=r"jobs\.csv:5: gpus must be a positive integer, at most 1,048,576, got '-2'",
    ):
        scenario_jobs(path, SCENARIO)
    path = write(tmp_path, csv(" a , 0 , 1 , 1 ", "", "b,0,2,1"))
    assert scenario_jobs(path, SCENARIO).job_id.tolist() == ["a", "b"]


def test_line_numbers_count_newlines_inside_quoted_values(tmp_path):
    path = write(tmp_path, csv('"multi\nline",0,1,1', "b,0,x,1"))
    with pytest.raises(
        TraceError,
        match=r"jobs\.csv:4: gpus must be a positive integer, at most 1,048,576, got 'x'",
    ):
        scenario_jobs(path, SCENARIO)


def test_parquet_timestamps_with_a_time_zone_are_converted(tmp_path):
    frame = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "submit_time": pd.to_datetime(["2020-06-01T01:00:00Z", "2020-06-01T00:00:00Z"]),
            "gpus": [1, 2],
            "work_gpu_h": [1.0, 2.0],
            "deadline": pd.to_datetime(["2020-06-01T05:00:00Z", None], utc=True),
        }
    )
    path = tmp_path / "jobs.parquet"
    frame.to_parquet(path)
    jobs = scenario_jobs(path, SCENARIO)
    assert jobs.job_id.tolist() == ["b", "a"]
    assert jobs.submit_s.tolist() == [0.0, 3600.0]
    assert np.isnan(jobs.deadline_s[0]) and jobs.deadline_s[1] == 5 * 3600.0


def test_build_jobs_reads_the_scenario_job_file(tmp_path):
    write(tmp_path, csv("a,0,1,1", "b,60,8,4"))
    scenario = make_scenario({"file": "jobs.csv"}, source=tmp_path / "study.toml")
    jobs = workload_jobs(scenario, np.random.default_rng(0))
    assert jobs.job_id.tolist() == ["a", "b"] and jobs.gpus.tolist() == [1, 8]


# --- malformed job files ---------------------------------------------------------------------

OK = "ok,0,1,1"

# (case, the row on line 3 after a good line 2, the bad value as shown, text of the message)
BAD_ROWS = [
    ("gpus negative", "b,0,-2,1", "'-2'", "gpus must be a positive integer"),
    ("gpus zero", "b,0,0,1", "'0'", "gpus must be a positive integer"),
    ("gpus fractional", "b,0,2.5,1", "'2.5'", "gpus must be a positive integer"),
    ("gpus not a number", "b,0,four,1", "'four'", "gpus must be a positive integer"),
    ("gpus missing", "b,0,,1", "''", "gpus must be a positive integer"),
    ("gpus above largest pool", "b,0,17,1", "'17'", "at most 16 (the largest GPU pool"),
    ("work zero", "b,0,1,0", "'0'", "work_gpu_h must be a positive number"),
    ("work negative", "b,0,1,-3.5", "'-3.5'", "work_gpu_h must be a positive number"),
    ("work not a number", "b,0,1,lots", "'lots'", "work_gpu_h must be a positive number"),
    ("work infinite", "b,0,1,inf", "'inf'", "work_gpu_h must be a positive number"),
    ("submit not a time", "b,yesterday,1,1", "'yesterday'", "submit_time must be seconds"),
    ("submit negative", "b,-1,1,1", "'-1'", "horizon [0, 172800) s"),
    ("submit at the horizon", "b,172800,1,1", "'172800'", "horizon [0, 172800) s"),
    ("submit after the end", "b,2020-06-03T00:00:00Z,1,1", "'2020-06-03T00:00:00Z'", "horizon"),
    ("submit without offset", "b,2020-06-01T10:00:00,1,1", "'2020-06-01T10:00:00'", "UTC offset"),
    ("submit impossible date", "b,2020-02-30T00:00:00Z,1,1", "'2020-02-30T00:00:00Z'", "ISO-8601"),
    ("job_id empty", ",0,1,1", "job_id", "required"),
    ("job_id duplicate", "ok,5,1,1", "'ok'", "duplicate job_id 'ok' (first on line 2)"),
]


@pytest.mark.parametrize(("case", "row", "value", "text"), BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_a_bad_value_names_file_line_column_and_value(tmp_path, case, row, value, text):
    path = write(tmp_path, csv(OK, row))
    with pytest.raises(TraceError) as info:
        scenario_jobs(path, SCENARIO)
    message = str(info.value)
    assert message.startswith(f"{path}:3: "), message
    assert value in message and text in message, message
    assert "\n" not in message


OPTIONAL_HEADER = HEADER + ",profile,deadline,interruptible,checkpoint_gb,data_gb,origin_site"
BAD_OPTIONAL = [
    (
        "unknown profile",
        "b,0,1,1,gpu-heavy,,,,,",
        "'gpu-heavy'",
        "profile must be one of ",
    ),
    ("unknown origin", "b,0,1,1,,,,,,north", "'north'", "one of the scenario's sites (east, west)"),
    (
        "deadline before submit",
        "b,100,1,1,,50,,,,",
        "'50'",
        "deadline must not be before submit_time ('100')",
    ),
    (
        "deadline not a time",
        "b,0,1,1,,soon,,,,",
        "'soon'",
        "deadline must be empty (none) or seconds",
    ),
    ("deadline infinite", "b,0,1,1,,inf,,,,", "'inf'", "deadline must be finite"),
    (
        "interruptible not a bool",
        "b,0,1,1,,,maybe,,,",
        "'maybe'",
        "interruptible must be true, false, 1 or 0",
    ),
    ("checkpoint negative", "b,0,1,1,,,,-1,,", "'-1'", "checkpoint_gb must be a number >= 0"),
    ("data not a number", "b,0,1,1,,,,,big,", "'big'", "data_gb must be a number >= 0"),
]


@pytest.mark.parametrize(
    ("case", "row", "value", "text"), BAD_OPTIONAL, ids=[c[0] for c in BAD_OPTIONAL]
)
def test_a_bad_optional_value_names_file_line_column_and_value(tmp_path, case, row, value, text):
    path = write(tmp_path, csv("ok,0,1,1,,,,,,", row, header=OPTIONAL_HEADER))
    with pytest.raises(TraceError) as info:
        scenario_jobs(path, SCENARIO)
    message = str(info.value)
    assert message.startswith(f"{path}:3: "), message
    assert value in message and text in message, message


def test_the_first_bad_row_in_file_order_is_reported_and_the_others_counted(tmp_path):
    path = write(tmp_path, csv(OK, "b,0,1,-1", "c,0,-2,1", "d,0,1,1"))
    with pytest.raises(TraceError) as info:
        scenario_jobs(path, SCENARIO)
    assert str(info.value) == (
        f"{path}:3: work_gpu_h must be a positive number of GPU-hours, got '-1' "
        "[and 1 more bad row(s)]"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "job_id,submit_time,gpu,work_gpu_h\na,0,1,1\n",
            ":1: missing required column(s) 'gpus' "
            "(columns present: job_id, submit_time, gpu, work_gpu_h)",
        ),
        ("job_id,submit_time\na,0\n", "missing required column(s) 'gpus', 'work_gpu_h'"),
        (csv(OK, header=HEADER + ",priority"), ":1: unknown column 'priority'"),
        (csv("a,0,1,1,2", header=HEADER + ",gpus"), ":1: column 'gpus' appears more than once"),
        ("", ": the file is empty"),
        (HEADER + "\n", ": the file is empty (a header, no jobs)"),
        (csv(OK, "b,0,1,1,extra"), ":3: expected 4 fields like the header, got 5"),
    ],
)
def test_malformed_files_name_the_file_and_the_problem(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as info:
        scenario_jobs(path, SCENARIO)
    message = str(info.value)
    assert message.startswith(str(path)) and expected in message, message
    assert "\n" not in message


def test_unreadable_files_are_trace_errors(tmp_path):
    with pytest.raises(TraceError, match=r"missing.csv: cannot read job file: No such file"):
        scenario_jobs(tmp_path / "missing.csv", SCENARIO)
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(TraceError, match="folder.csv: cannot read job file"):
        scenario_jobs(tmp_path / "folder.csv", SCENARIO)
    (tmp_path / "latin1.csv").write_bytes(csv("caf\xe9,0,1,1").encode("latin-1"))
    with pytest.raises(
        TraceError, match="latin1.csv: job files are UTF-8 text; byte 38 is 0xe9"
    ):  # 35 + "caf"
        scenario_jobs(tmp_path / "latin1.csv", SCENARIO)
    (tmp_path / "broken.csv.gz").write_bytes(gzip.compress(csv(OK).encode())[:20])
    with pytest.raises(TraceError, match="broken.csv.gz: cannot read job file"):
        scenario_jobs(tmp_path / "broken.csv.gz", SCENARIO)
    (tmp_path / "broken.parquet").write_text(csv(OK))
    with pytest.raises(TraceError, match="broken.parquet: cannot read job file"):
        scenario_jobs(tmp_path / "broken.parquet", SCENARIO)


def test_other_file_types_are_refused(tmp_path):
    path = write(tmp_path, csv(OK), name="jobs.json")
    with pytest.raises(
        TraceError, match=r"jobs\.json: unknown job file type; use \.csv, \.csv\.gz or \.parquet"
    ):
        scenario_jobs(path, SCENARIO)


def test_parquet_errors_name_the_row(tmp_path):
    frame = pd.DataFrame(
        {"job_id": ["a", "b"], "submit_time": [0.0, 1.0], "gpus": [1, -2], "work_gpu_h": [1.0, 1.0]}
    )
    path = tmp_path / "jobs.parquet"
    frame.to_parquet(path)
    with pytest.raises(
        TraceError,
        match=r"jobs\.parquet: row 2: gpus must be a positive integer, at most 1,048,576, got -2$",
    ):
        scenario_jobs(path, SCENARIO)
    frame.iloc[0:0].to_parquet(path)
    with pytest.raises(TraceError, match=r"jobs\.parquet: the file is empty"):
        scenario_jobs(path, SCENARIO)
    naive = frame.assign(gpus=[1, 2], submit_time=pd.to_datetime(["2020-06-01", "2020-06-01"]))
    naive.to_parquet(path)
    with pytest.raises(TraceError, match="'submit_time' holds timestamps without a time zone"):
        scenario_jobs(path, SCENARIO)


def test_the_job_format_page_lists_every_accepted_profile():
    from sim.models.hardware import PROFILES
    from sim.models.training import split_batch_profile
    from tests.conftest import REPO

    page = (REPO / "docs" / "job-format.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `profile` |"))
    plain = {p for p in PROFILES if split_batch_profile(p) is None}
    assert set(re.findall(r"`([\w-]+)`", row)) - {"profile"} == plain
    assert "`WORKLOAD@BATCH`" in row
