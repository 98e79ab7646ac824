"""`scripts/study_serverless_keepalive.py`: its claims hold on a small case (6 h on two
grids) and fail on a table that contradicts them; the scenario's header
says what it demonstrates."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO))
from scripts.study_serverless_keepalive import (  # noqa: E402
    AWARE,
    NEW,
    OLD,
    POLICIES,
    SCENARIO,
    check,
    study,
)


@pytest.fixture(scope="module")
def small():
    return study(quick=True, workers=1)


def test_the_claims_hold_on_a_small_case(small):
    assert len(small) == 2 * len(POLICIES)
    check(small)


def test_a_carbon_aware_policy_emitting_more_than_the_fixed_window_fails_the_check(small):
    worse = small.copy()
    aware = worse["policy"] == AWARE
    dirty = worse["case"].str.startswith("dirty")
    worse.loc[aware & dirty, "carbon_kg"] *= 1.2
    with pytest.raises(
        AssertionError, match=r"claim fails: the carbon-aware choice emits less carbon.*in \['dirty"
    ):
        check(worse)


def test_a_carbon_aware_policy_on_one_generation_only_fails_the_check(small):
    one = small.copy()
    one.loc[one["policy"] == AWARE, "new_share_instances"] = 0.0
    with pytest.raises(AssertionError, match="both generations"):
        check(one)


def test_the_counts_are_integers_and_the_delays_those_of_the_cold_starts(small):
    assert small["cold_starts"].dtype == "int64" and small["invocations"].dtype == "int64"
    fixed_old = small[small["policy"] == OLD].iloc[0]
    # every cold start on i3 waits its 3.4934 s; a warm invocation not at all
    assert fixed_old["cold_delay_mean_s"] == pytest.approx(3.4934)
    assert fixed_old["delay_mean_s"] == pytest.approx(3.4934 * fixed_old["cold_start_share"])
    assert small[small["policy"] == NEW]["new_share_invocations"].eq(1.0).all()


def test_the_scenario_header_says_what_it_demonstrates():
    header = SCENARIO.read_text().split("\nname = ")[0]
    assert "It demonstrates" in header
    assert "docs/study-serverless-keepalive.md" in header
    assert (REPO / "docs" / "study-serverless-keepalive.md").exists()
