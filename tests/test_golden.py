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
    added = {k: summary.pop(k) for k in ADDED_SUMMARY_KEYS if k not in expected}
    assert added == {k: ADDED_SUMMARY_KEYS[k] for k in added}
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
            getattr(results, table), expected_table, check_exact=False, rtol=REL, atol=1e-12
        )
