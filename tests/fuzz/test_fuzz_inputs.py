"""Fuzzed scenario files, job files and carbon traces: `dcsim run` exits 0 with finite
results, or exits 2 with a short message; never a traceback (tests/fuzz/harness.py).

Each input starts from a small valid one and is damaged by one to three edits: a value
replaced by an awkward one (NaN, infinities, zero, negative, huge, text, lists, tables), a
key or column removed, an unknown one added, rows duplicated, reordered or cut short.
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import assert_clean, fuzz_settings, run_dcsim

AWKWARD_NUMBERS = [math.nan, math.inf, -math.inf, 0, 0.0, -1, -0.5, 1e12, 1e300, 2**63 - 1]
AWKWARD_VALUES: list[Any] = [*AWKWARD_NUMBERS, "", "x", True, [], {}, [1, 2], {"a": 1}]
AWKWARD_CELLS = [
    "nan", "NaN", "inf", "-inf", "-1", "0", "1e12", "1e400", "", " ", "abc", "1.5", "true",
    "2020-06-01T00:00:00Z", "2020-13-45", "1/1/2020", "\x00", "é", '"', "1,5", "-0",
]  # fmt: skip

BASE_SCENARIO: dict[str, Any] = {
    "name": "fuzz",
    "seed": 3,
    "start": "2020-06-01T00:00:00Z",
    "duration_h": 6.0,
    "sites": [
        {
            "name": "a",
            "lat": 50.1,
            "lon": 8.7,
            "pue": 1.3,
            "host_w_per_gpu": 50.0,
            "carbon": {"constant_g_per_kwh": 300.0},
            "gpus": [{"model": "A100-80GB", "count": 8}],
        },
        {
            "name": "b",
            "lat": 48.9,
            "lon": 2.4,
            "carbon": {"file": "trace.csv"},
            "gpus": [{"model": "H100-SXM", "count": 8}],
            "power_off": {"idle_s": 600.0, "wake_s": 120.0},
        },
    ],
    "workload": {
        "synthetic": {
            "arrival_rate_per_h": 4.0,
            "gpus": {"1": 0.5, "2": 0.3, "4": 0.2},
            "duration": {"dist": "lognormal", "median_h": 0.5, "sigma": 1.0},
            "deferrable_fraction": 0.5,
            "slack_h": [1.0, 4.0],
            "interruptible_fraction": 0.3,
            "checkpoint_gb": 5.0,
        }
    },
    "forecast": {"model": "gaussian", "sigma_frac": 0.1},
    "policy": {"name": "wait_awhile", "params": {}},
    "demand_response": [
        {"site": "a", "generator": "daily_peak", "hour": 2.0, "duration_h": 1.0,
         "reduction_pct": 10.0, "notice_h": 0.5},
    ],
}  # fmt: skip

JOB_COLUMNS = ["job_id", "submit_time", "gpus", "work_gpu_h", "profile", "deadline"]
JOB_COLUMNS += ["interruptible", "checkpoint_gb", "data_gb", "origin_site", "allowed_sites"]
BASE_JOBS = [
    ["j1", "0", "1", "2.0", "mixed", "18000", "true", "5", "1", "a", ""],
    ["j2", "600", "2", "1.5", "compute-bound", "", "false", "0", "0", "b", "a;b"],
    ["j3", "1800", "4", "8", "resnet50", "21000", "1", "10", "2", "a", "b"],
    ["j4", "3600", "8", "0.5", "inference", "", "0", "0", "0", "b", ""],
]

TRACE_COLUMNS = ["timestamp", "carbon_intensity"]
BASE_TRACE = [[f"2020-06-01T{h:02d}:00:00Z", str(100 + 17 * h)] for h in range(-0, 12)]
BASE_TRACE = [["2020-05-31T23:00:00Z", "95"], *BASE_TRACE]


def _leaf_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value of a parsed TOML document (tables and lists included)."""
    paths = [prefix] if prefix else []
    if isinstance(node, dict | list):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            paths += _leaf_paths(value, (*prefix, key))
    return paths


SCENARIO_PATHS = _leaf_paths(BASE_SCENARIO)
awkward_value = st.one_of(
    st.sampled_from(AWKWARD_VALUES),
    st.floats(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=6),
)


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    node = doc
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def scenario_edits(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(BASE_SCENARIO)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(SCENARIO_PATHS))
        try:
            parent = _parent(doc, path)
            parent[path[-1]]  # noqa: B018 (an earlier edit may have removed it)
        except (KeyError, IndexError, TypeError):
            continue
        edit = draw(st.sampled_from(["set", "set", "set", "delete", "unknown"]))
        if edit == "set":
            parent[path[-1]] = draw(awkward_value)
        elif edit == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif edit == "unknown" and isinstance(parent, dict):
            parent["surprise_key"] = draw(awkward_value)
    return doc


@st.composite
def table_edits(draw: st.DrawFn, columns: list[str], rows: list[list[str]]) -> str:
    """A CSV of `columns` and `rows`, damaged: cells, columns and rows edited."""
    header, body = list(columns), [list(r) for r in rows]
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(["cell", "cell", "cell", "drop_column", "add_column", "rows"]))
        if edit == "cell" and body:
            r = draw(st.integers(0, len(body) - 1))
            if not body[r]:
                continue
            c = draw(st.integers(0, len(body[r]) - 1))
            body[r][c] = draw(st.one_of(st.sampled_from(AWKWARD_CELLS), st.text(max_size=5)))
        elif edit == "drop_column" and len(header) > 1:
            c = draw(st.integers(0, len(header) - 1))
            header.pop(c)
            for row in body:
                del row[c : c + 1]
        elif edit == "add_column":
            header.append(draw(st.sampled_from(["extra", header[0], ""])))
            for row in body:
                row.append("1")
        elif edit == "rows" and body:
            kind = draw(st.sampled_from(["duplicate", "reverse", "cut", "short", "empty"]))
            r = draw(st.integers(0, len(body) - 1))
            if kind == "duplicate":
                body.insert(r, list(body[r]))
            elif kind == "reverse":
                body.reverse()
            elif kind == "cut":
                body = body[:r]
            elif kind == "short":
                body[r] = body[r][: max(len(body[r]) - 1, 0)]
            else:
                body.insert(r, [])
    return "\n".join(",".join(_csv_cell(x) for x in row) for row in [header, *body]) + "\n"


def _csv_cell(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


def _run(scenario: dict[str, Any], jobs_csv: str | None, trace_csv: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "trace.csv").write_text(trace_csv, encoding="utf-8")
        if jobs_csv is not None:
            (base / "jobs.csv").write_text(jobs_csv, encoding="utf-8")
        try:
            text = tomli_w.dumps(scenario)
        except (TypeError, ValueError):
            return  # not expressible in TOML: no user can write it
        (base / "scenario.toml").write_text(text, encoding="utf-8")
        out = base / "out"
        outcome = run_dcsim(["run", str(base / "scenario.toml"), "--out", str(out)])
        assert_clean(outcome, out, f"scenario:\n{text}\njobs:\n{jobs_csv}\ntrace:\n{trace_csv}")


def _base_trace() -> str:
    return "\n".join(",".join(r) for r in [TRACE_COLUMNS, *BASE_TRACE]) + "\n"


def _with_job_file() -> dict[str, Any]:
    scenario = copy.deepcopy(BASE_SCENARIO)
    scenario["workload"] = {"file": "jobs.csv"}
    return scenario


@fuzz_settings(suite_examples=90)
@given(scenario_edits())
def test_a_fuzzed_scenario_runs_cleanly_or_is_refused_in_one_line(scenario: dict[str, Any]):
    _run(scenario, None, _base_trace())


@fuzz_settings(suite_examples=55)
@given(table_edits(JOB_COLUMNS, BASE_JOBS))
def test_a_fuzzed_job_file_runs_cleanly_or_is_refused_in_one_line(jobs_csv: str):
    _run(_with_job_file(), jobs_csv, _base_trace())


@fuzz_settings(suite_examples=55)
@given(table_edits(TRACE_COLUMNS, BASE_TRACE))
def test_a_fuzzed_carbon_trace_runs_cleanly_or_is_refused_in_one_line(trace_csv: str):
    _run(copy.deepcopy(BASE_SCENARIO), None, trace_csv)


def test_the_undamaged_inputs_run_and_give_results():
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "trace.csv").write_text(_base_trace(), encoding="utf-8")
        (base / "jobs.csv").write_text(
            "\n".join(",".join(r) for r in [JOB_COLUMNS, *BASE_JOBS]) + "\n", encoding="utf-8"
        )
        for scenario in (BASE_SCENARIO, _with_job_file()):
            (base / "scenario.toml").write_text(tomli_w.dumps(scenario), encoding="utf-8")
            outcome = run_dcsim(["run", str(base / "scenario.toml"), "--out", str(base / "o")])
            assert outcome.code == 0, outcome.stderr
            assert_clean(outcome, base / "o", "base")
