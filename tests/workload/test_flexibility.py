"""Specification of sim.workload.flexibility: deadlines, interruptibility, checkpoints."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from sim.workload.flexibility import apply_flexibility, checkpoint_gb_by_size

START = datetime(2020, 6, 1, tzinfo=UTC)  # a Monday
H = 3600.0


def frame(n: int = 20_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 8, 16, 128], n)
    return pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "submit_time": np.sort(rng.uniform(0, 14 * 86400, n)),
            "gpus": gpus,
            "work_gpu_h": rng.uniform(0.1, 10, n) * gpus,
        }
    )


def flex(f: pd.DataFrame, seed: int = 1, **kw) -> pd.DataFrame:
    return apply_flexibility(f, start=START, rng=np.random.default_rng(seed), **kw)


def runtime_s(f: pd.DataFrame) -> np.ndarray:
    return (f["work_gpu_h"] / f["gpus"]).to_numpy() * H


def test_fixed_slack_lies_in_the_range_and_rows_are_kept():
    f = frame()
    out = flex(f, slack="fixed", slack_h=(6, 24))
    assert len(out) == len(f) and list(out["job_id"]) == list(f["job_id"])
    slack = (out["deadline"] - out["submit_time"] - runtime_s(f)) / H
    assert slack.min() >= 6 - 1e-9 and slack.max() <= 24 + 1e-9
    assert slack.min() < 6.1 and slack.max() > 23.9
    assert abs(slack.mean() - 15) < 5 * 18 / math.sqrt(12 * len(f))
    assert "deadline" not in f.columns  # the input is not modified


def test_proportional_slack_is_runtime_times_one_plus_factor():
    f = frame(1000)
    out = flex(f, slack="proportional", slack_factor=0.5)
    expected = f["submit_time"] + runtime_s(f) * 1.5
    assert np.allclose(out["deadline"], expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("submit", "runtime_h", "deadline"),
    [
        # Monday 00:00 -> Tuesday 09:00 (the next workday, never the same day)
        ("2020-06-01T00:00:00Z", 1.0, "2020-06-02T09:00:00Z"),
        # Thursday 23:00 -> Friday 09:00
        ("2020-06-04T23:00:00Z", 2.0, "2020-06-05T09:00:00Z"),
        # Friday 10:00 -> Monday 09:00
        ("2020-06-05T10:00:00Z", 3.0, "2020-06-08T09:00:00Z"),
        # Saturday and Sunday -> Monday 09:00
        ("2020-06-06T12:00:00Z", 1.0, "2020-06-08T09:00:00Z"),
        ("2020-06-07T23:30:00Z", 1.0, "2020-06-08T09:00:00Z"),
        # cannot fit (Thursday 20:00 + 20 h > Friday 09:00): Friday 09:00 + runtime
        ("2020-06-04T20:00:00Z", 20.0, "2020-06-06T05:00:00Z"),
    ],
)
def test_next_workday_rule_on_hand_checked_dates(submit, runtime_h, deadline):
    s = (pd.Timestamp(submit) - pd.Timestamp(START)).total_seconds()
    f = pd.DataFrame(
        {"job_id": ["x"], "submit_time": [s], "gpus": [2], "work_gpu_h": [2 * runtime_h]}
    )
    out = flex(f, slack="next_workday")
    assert out["deadline"][0] == (pd.Timestamp(deadline) - pd.Timestamp(START)).total_seconds()


def test_next_workday_follows_the_local_time_zone():
    # Friday 2020-06-05 23:30 UTC is Saturday 01:30 in Berlin: Monday 09:00 CEST = 07:00 UTC
    s = (pd.Timestamp("2020-06-05T23:30:00Z") - pd.Timestamp(START)).total_seconds()
    f = pd.DataFrame({"job_id": ["x"], "submit_time": [s], "gpus": [1], "work_gpu_h": [1.0]})
    out = flex(f, slack="next_workday", timezone="Europe/Berlin")
    want = (pd.Timestamp("2020-06-08T07:00:00Z") - pd.Timestamp(START)).total_seconds()
    assert out["deadline"][0] == want
    # Thursday 23:30 UTC is Friday 01:30 in Berlin: Monday, not Friday
    s = (pd.Timestamp("2020-06-04T23:30:00Z") - pd.Timestamp(START)).total_seconds()
    out = flex(f.assign(submit_time=[s]), slack="next_workday", timezone="Europe/Berlin")
    assert out["deadline"][0] == want


def test_fractions_of_deferrable_and_interruptible_jobs():
    f = frame()
    n = len(f)
    out = flex(f, deferrable_fraction=0.3, interruptible_fraction=0.6)
    has = out["deadline"].notna().mean()
    assert abs(has - 0.3) < 5 * math.sqrt(0.21 / n)
    assert abs(out["interruptible"].mean() - 0.6) < 5 * math.sqrt(0.24 / n)
    assert out["interruptible"].dtype == bool
    none = flex(f, deferrable_fraction=0.0)
    assert none["deadline"].isna().all() and not none["interruptible"].any()
    assert flex(f).notna()["deadline"].all()  # default: every job deferrable


def test_checkpoint_by_size_classes():
    gb = checkpoint_gb_by_size(np.array([1, 2, 8, 9, 64, 65, 1024]))
    assert list(gb) == pytest.approx([4.76, 21.0, 21.0, 182.0, 182.0, 980.0, 980.0])
    f = frame(100).assign(checkpoint_gb=3.0)
    assert (flex(f)["checkpoint_gb"] == 3.0).all()  # "none" keeps the column
    out = flex(f, checkpoint="by_size")
    assert np.allclose(out["checkpoint_gb"], checkpoint_gb_by_size(f["gpus"].to_numpy()))


def test_determinism_by_seed_and_common_random_numbers():
    f = frame(2000)
    a, b, c = flex(f, seed=5), flex(f, seed=5), flex(f, seed=6)
    pd.testing.assert_frame_equal(a, b)
    assert not a["deadline"].equals(c["deadline"])
    # changing the slack model or the deferrable share keeps the interruptible draws
    d = flex(f, seed=5, slack="next_workday", deferrable_fraction=0.2)
    assert a["interruptible"].equals(d["interruptible"])


def test_empty_frame_and_bad_options():
    empty = frame(0)
    for slack in ("fixed", "proportional", "next_workday"):
        assert len(flex(empty, slack=slack)) == 0
    with pytest.raises(ValueError, match="deferrable_fraction"):
        flex(frame(3), deferrable_fraction=1.5)
    with pytest.raises(ValueError, match="slack must be"):
        flex(frame(3), slack="weekly")
