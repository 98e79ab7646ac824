"""Failures: GPU and node failures that interrupt running jobs (`[failures]` of a scenario).

Two sources, one outcome:

- a rate per GPU-hour (`failures.rate_per_gpu_h`): a running job on n GPUs fails after a
  time drawn from an exponential of rate n x the rate, drawn again each time it starts
  (memoryless, so a fresh draw at each start is exact); held jobs (their checkpoint
  arriving, their nodes booting) hold GPUs and fail too;
- a trace (`failures.trace`): at each listed time, one running job at the listed site
  fails, drawn weighted by its GPUs (none running there: the failure hits idle GPUs and
  interrupts nothing).

A failed job loses its work since its last checkpoint (the last periodic one with
`workload.checkpoint_interval_h`; else the one its last suspension or migration wrote,
or none: it starts again from scratch), frees its GPUs at once (nothing is written) and
is pending again, at the back of the queue: the policy places it anew, as cluster
schedulers requeue a job whose node failed. Starting it again reads its checkpoint with
the usual costs (`Checkpoints.start_s`). A checkpoint write under way on GPUs a job has
left does not fail. Draws come from the run's own `failures` random stream
(`sim.util.streams.STREAMS`), so failures move no other draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component, per_job
from sim.errors import ScenarioError
from sim.results import ResultParts
from sim.util.csv_rows import csv_rows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sim.engine.checkpoints import Checkpoints
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet
    from sim.engine.jobs import JobBook
    from sim.engine.ledger import Pool
    from sim.engine.runs import Run, Runs

__all__ = ["TRACE_COLUMNS", "Failures", "read_failure_trace", "trace_time_site", "weighted_draw"]

TRACE_COLUMNS = ("time_h", "site")
"""The header of a failure trace: hours since the scenario start, a site's name."""


def read_failure_trace(path: Path, site_names: list[str]) -> list[tuple[float, int]]:
    """The failures of a trace file as (time s, site index), in time order; ScenarioError
    naming the file, the line and the value for a bad row."""
    where = f"failures.trace: {path}"
    rows = csv_rows(path, where, "failure trace", TRACE_COLUMNS)
    failures = [_trace_row(where, line, row, site_names) for line, row in rows]
    return sorted(failures)


def _trace_row(where: str, line: int, row: list[str], site_names: list[str]) -> tuple[float, int]:
    """One row of a failure trace as (time s, site index)."""
    if len(row) != len(TRACE_COLUMNS):
        raise ScenarioError(f"{where}:{line}: expected 2 fields (time_h,site), got {row}")
    return trace_time_site(where, line, row, site_names)


def trace_time_site(
    where: str, line: int, row: list[str], site_names: list[str]
) -> tuple[float, int]:
    """The first two fields of a trace row, `time_h,site`, as (time s, site index);
    ScenarioError naming `where`, the line and the value (failure and eviction traces)."""
    time_text, site = row[0].strip(), row[1].strip()
    try:
        time_h = float(time_text)
    except ValueError:
        time_h = math.nan
    if not (math.isfinite(time_h) and time_h >= 0):
        raise ScenarioError(f"{where}:{line}: time_h must be a number >= 0, got {time_text!r}")
    if site not in site_names:
        raise ScenarioError(
            f"{where}:{line}: unknown site {site!r} (sites: {', '.join(site_names)})"
        )
    return time_h * 3600.0, site_names.index(site)


def weighted_draw(rng: np.random.Generator, jobs: list[int], weights: list[int]) -> int:
    """One of `jobs`, drawn with probability proportional to its weight (its GPUs)."""
    w = np.array(weights, dtype=float)
    return jobs[int(rng.choice(len(jobs), p=w / w.sum()))]


class Failures(Component):
    """Failures of running jobs, and what they cost: per job, how often it failed and the
    work it lost."""

    name = "failures"
    uses = ("runs", "checkpoints", "book", "fleet")
    stream = "failures"

    __slots__ = (
        "_core",
        "_runs",
        "_checkpoints",
        "_book",
        "_rng",
        "_restarts",
        "active",
        "rate_per_gpu_s",
        "_trace",
        "restart_gpu_s",
        "count",
        "lost_gpu_s",
    )

    def __init__(
        self,
        core: Core,
        *,
        runs: Runs,
        checkpoints: Checkpoints,
        book: JobBook,
        fleet: Fleet,
        rng: np.random.Generator,
    ):
        self._core = core
        self._runs = runs
        self._checkpoints = checkpoints
        self._book = book
        self._rng = rng
        config = core.scenario.failures
        self.active = config is not None
        """The scenario has failures (else this component does nothing)."""
        self._restarts = self.active or fleet.has_capacity_kinds
        """Restart points are kept: for failures, or for evictions of spot GPUs (`Spot`
        restarts evicted jobs from the same point)."""
        rate = None if config is None else config.rate()
        self.rate_per_gpu_s = None if rate is None else rate / 3600.0
        """Failures per GPU-second of a running job (None: from the trace)."""
        trace = None if config is None else config.trace
        self._trace = [] if trace is None else read_failure_trace(trace, fleet.names)
        """The trace's failures, (time s, site index) in time order."""
        self.restart_gpu_s: dict[int, float] = {}
        """Without periodic checkpoints: each started job's work left when it last started
        (its last checkpoint, or all of it), reference GPU-s."""
        self.count: dict[int, int] = {}
        """Failures per job that failed."""
        self.lost_gpu_s: dict[int, float] = {}
        """Work lost to failures per job that failed, reference GPU-s."""

    def start(self) -> None:
        if self._trace:
            self._core.env.process(self._replay())

    def idle_hooks(self) -> frozenset[str]:
        """Without failures or spot GPUs, no restart point is kept."""
        return frozenset() if self._restarts else frozenset({"run_started"})

    def run_started(self, j: int, pool: Pool, capacity: Sequence[str] | None) -> None:
        """`j` runs (held or computing): when failures are `active` or spot GPUs may be
        evicted, remember its restart point, and with a rate draw when it fails."""
        core = self._core
        run = self._runs.live[j]
        if self._checkpoints.timing.interval_s is None:
            self.restart_gpu_s[j] = self._runs.remaining_gpu_s[j]
        if not self.rate_per_gpu_s:
            return
        after_s = float(self._rng.exponential(1.0 / (self._runs.gpus[j] * self.rate_per_gpu_s)))
        if core.env.now + after_s < core.horizon_s:
            core.env.timeout(after_s).callbacks.append(lambda _e: self._fail_run(j, run))

    def _fail_run(self, j: int, run: Run) -> None:
        """A drawn failure: `j` fails if `run` is still its run (not stopped since)."""
        if self._runs.live.get(j) is run:
            self.fail(j)

    def _replay(self):
        env = self._core.env
        for t_s, h in self._trace:
            if t_s >= self._core.horizon_s:
                return
            if t_s > env.now:
                yield env.timeout(t_s - env.now)
            j = self._victim(h)
            if j is not None:
                self.fail(j)

    def _victim(self, h: int) -> int | None:
        """A running job at site `h` drawn with probability proportional to its GPUs
        (None: no job runs there)."""
        runs = self._runs
        jobs = [j for j, run in runs.live.items() if run.site.index == h]
        if not jobs:
            return None
        return weighted_draw(self._rng, jobs, [runs.gpus[j] for j in jobs])

    def fail(self, j: int) -> None:
        """Running job `j` fails now: it falls back to its last checkpoint, frees its GPUs
        and is pending again (event `fail`, its value the work lost, reference GPU-h)."""
        core = self._core
        site = self._runs.live[j].site
        lost_gpu_s = self._checkpoints.fail(j, self.restart_gpu_s.get(j))
        self.count[j] = self.count.get(j, 0) + 1
        self.lost_gpu_s[j] = self.lost_gpu_s.get(j, 0.0) + lost_gpu_s
        self._book.requeue(j)
        core.events.append(core.env.now, "fail", j, site.index, lost_gpu_s / 3600.0)
        core.request_decision()

    def write_results(self, out: ResultParts) -> None:
        """Columns `failures` and `work_lost_failures_gpu_h` (reference GPU-h), and their
        sums."""
        n = len(self._core.jobs)
        count = per_job(n, self.count, np.int64)
        lost_gpu_h = per_job(n, self.lost_gpu_s) / 3600.0
        out.job_columns.update(failures=count, work_lost_failures_gpu_h=lost_gpu_h)
        out.summary["failures"] = int(count.sum())
        out.summary["work_lost_failures_gpu_h"] = float(pd.Series(lost_gpu_h).sum())
