"""Run `dcsim` on a fuzzed input and judge the outcome by the one rule every input obeys:
exit 0 with finite results, or exit 2 with a short message naming the problem; never a
traceback, never another status.

`FUZZ_EXAMPLES` sets how many inputs each fuzz test tries: the suite's size by default
(derandomised, so CI sees the same inputs every time), or `DCSIM_FUZZ_EXAMPLES` for a
nightly-size run with fresh random inputs (docs/architecture.md, "Testing").
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings

from sim.cli import main

MAX_MESSAGE_LINES = 3
"""An error message is one line naming the file, line or key and the value; a user policy's
own traceback lines may follow, hence a few."""


def fuzz_settings(suite_examples: int) -> settings:
    """Hypothesis settings of a fuzz test: `suite_examples` inputs, the same every run, or
    `DCSIM_FUZZ_EXAMPLES` fresh random ones."""
    nightly = os.environ.get("DCSIM_FUZZ_EXAMPLES")
    return settings(
        max_examples=int(nightly) if nightly else suite_examples,
        derandomize=not nightly,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_dcsim(args: list[str]) -> Outcome:
    """`dcsim ARGS` in this process; its exit status and what it printed. An exception that
    escapes `main` (a traceback for the user) propagates and fails the test."""
    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["dcsim", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = 0 if e.code is None else int(e.code)
    finally:
        sys.argv = argv
    return Outcome(code, out.getvalue(), err.getvalue())


def assert_clean(outcome: Outcome, results: Path, what: str) -> None:
    """Exit 0 with a finite summary in `results`, or exit 2 with a short message."""
    context = f"{what}\nstdout: {outcome.stdout[-2000:]}\nstderr: {outcome.stderr[-2000:]}"
    assert outcome.code in (0, 2), f"exit status {outcome.code}: {context}"
    if outcome.code == 2:
        lines = outcome.stderr.strip().splitlines()
        assert lines and lines[0].startswith("error: "), context
        assert len(lines) <= MAX_MESSAGE_LINES, context
        assert "Traceback" not in outcome.stderr, context
        return
    summary = json.loads((results / "summary.json").read_text())
    bad = {k: v for k, v in summary.items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad, f"non-finite results {bad}: {context}"
