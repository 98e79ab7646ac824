"""Refactors keep results: each golden case gives the recorded summary and result tables.

The references were recorded with `python -m tests.golden.record` (see
`tests/golden/cases.py`). Summary values agree to a relative 1e-9 (float summation
order may differ); the result tables (jobs, sites, power, events, demand-response events)
column by column and row by row, to the same tolerance.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tests.golden.cases import (
    ADDED_EVENT_KINDS,
    ADDED_JOB_COLUMNS,
    ADDED_SUMMARY_KEYS,
    CASES,
    GOLDEN_DIR,
    SKIPPED_SUMMARY_KEYS,
    recorded_tables,
)
from tests.golden.record import run_case

REL = 1e-9


def _same_number(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):  # type: ignore[arg-type]
            return math.isnan(a) and math.isnan(b)  # type: ignore[arg-type]
        return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)  # type: ignore[arg-type]
    return a == b


@pytest.mark.parametrize(
    ("name", "scenario_file", "policy", "overrides"), CASES, ids=[c[0] for c in CASES]
)
def test_results_match_the_recorded_golden_run(name, scenario_file, policy, overrides):
    results = run_case(scenario_file, policy, overrides)
    expected = json.loads((GOLDEN_DIR / name / "summary.json").read_text())
    summary = {k: v for k, v in results.summary.items() if k not in SKIPPED_SUMMARY_KEYS}
    for key, value in ADDED_SUMMARY_KEYS.items():
        if key not in expected:
            assert summary.pop(key) == value
    assert summary.keys() == expected.keys()
    differ = {
        k: (summary[k], expected[k]) for k in expected if not _same_number(summary[k], expected[k])
    }
    assert differ == {}
    tables = recorded_tables(results)
    assert {p.stem for p in (GOLDEN_DIR / name).glob("*.parquet")} == set(tables)
    for table in tables:
        expected_table = pd.read_parquet(GOLDEN_DIR / name / f"{table}.parquet")
        pd.testing.assert_frame_equal(
            _as_recorded(getattr(results, table), expected_table),
            expected_table,
            check_exact=False,
            rtol=REL,
            atol=1e-12,
        )


def _as_recorded(table: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """`table` without what was added since `expected` was recorded: the added columns
    (each must hold its value for a run without the feature) and the added event kinds
    (none may occur)."""
    for column, value in ADDED_JOB_COLUMNS.items():
        if column in table and column not in expected:
            assert (table[column] == value).all(), column
            table = table.drop(columns=column)
    if "kind" in table and "kind" in expected:
        kinds = table["kind"].cat.categories
        added = [k for k in ADDED_EVENT_KINDS if k not in expected["kind"].cat.categories]
        assert not table["kind"].isin(added).any()
        kept = [k for k in kinds if k not in added]
        table = table.assign(kind=table["kind"].cat.set_categories(kept))
    return table
