"""Sweeps: one scenario run over a grid of parameters and seeds, on local processes or a
Dask cluster, with every run cached so that an interrupted sweep resumes where it stopped.

    import sim
    summary = sim.sweep("scenarios/quickstart.toml",
                        grid={"policy": ["run_now", "wait_awhile"], "sites[0].pue": [1.1, 1.4]},
                        seeds=range(5), out="out/sweep")

Layout of the output folder:

- `summary.parquet`: one row per run: `run` (its index in the grid), `run_id`, one column
  per grid key, `seed`, `status` ("ok" or "failed"), `error`, every summary metric of the
  run (`sim.results.SUMMARY_KEYS`) and `wall_s` (the run's wall time: building the world,
  simulating, building the results).
- `sweep.json`: the scenario file, the grid, the seeds, the overrides, the package version.
- `runs/<run_id>/`: each run's result files (as `dcsim run --out` writes them) and
  `run.json` (its parameters, status, error, wall time, host, and the SHA-256 of every
  result file); a failed run has `run.json` and `error.txt` (the traceback). `run_id`
  hashes the run's resolved scenario (seed included), the package version and git
  revision, and the size and modification time of every file the scenario names, so a
  changed input or a new dcsim computes afresh.

A run is reused only if its folder holds an "ok" `run.json` and every result file it
lists, unchanged (same SHA-256); otherwise it is recomputed, with a line on stderr naming
the run, the file and what is wrong with it. A run whose worker process dies (killed,
`os._exit`) is recorded as failed ("worker died: ...") and the other runs go on.

A grid key is any scenario key path (`sites[0].pue`, `policy.params.watts`,
`workload.synthetic.max_jobs`), plus `policy`: a policy name there runs that policy with
its default parameters (as `dcsim run --policy` does), a table `{name = ..., params = ...}`
runs it with those. The grid is the Cartesian product of its keys' values, in the order
given, each combination with every seed.

Runs execute on the workers (each with its own copy of the scenario), which send their
result files back; only the process that called `sweep` writes into the output folder, one
run folder at a time (written under a temporary name, then renamed). Remote Dask workers
therefore need dcsim installed and the files the scenario names at the same paths.

Local workers are processes started with `spawn`, which re-runs the calling script's
top-level code in each worker: a script that calls `sweep` outside an
`if __name__ == "__main__":` block is refused with a DcsimError saying so. On Linux a
worker is killed by the kernel when the process that started it dies
(`prctl(PR_SET_PDEATHSIG, SIGKILL)`), so killing a sweep leaves no workers behind;
elsewhere a worker ends when it next talks to its parent, after its current run.

The dask backend needs the `dask` extra (`pip install 'dcsim[dask]'`); Dask is imported
only when that backend is chosen.
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import inspect
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import tomllib
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sim.config.loading import read_scenario_toml, scenario_from_dict
from sim.config.overrides import apply_override, parse_value, set_value
from sim.config.scenario import Scenario
from sim.engine.build import simulate
from sim.errors import DcsimError, ScenarioError
from sim.plugins import build_policy
from sim.results import (
    FILES,
    SUMMARY_KEYS,
    Results,
    git_revision,
    library_versions,
    package_version,
)
from sim.util.atomic import write_atomic

BACKENDS = ("local", "dask")
DASK_INSTALL = "pip install 'dcsim[dask]'"
RUN_FILE = "run.json"
ERROR_FILE = "error.txt"
SUMMARY_FILE = "summary.parquet"
SWEEP_FILE = "sweep.json"
WORKER_NAME = "dcsim-sweep-worker"
"""The name of every local worker process (a prefix: `dcsim-sweep-worker-3`)."""
UNGUARDED_MAIN_EXIT = 86
"""Exit status of a local worker that found, while starting, that the script it re-runs
calls `sweep` outside an `if __name__ == "__main__":` block (any otherwise unused value)."""
_READY = "ready"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its place in the grid, its parameters and its resolved scenario."""

    index: int
    params: dict[str, Any]
    seed: int
    scenario_toml: str
    run_id: str


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back: the run's result files, or its error."""

    files: dict[str, bytes] | None
    error: str | None
    traceback: str | None
    wall_s: float
    host: str


def sweep(
    scenario: str | Path,
    grid: Mapping[str, Sequence[Any]] | None = None,
    seeds: Iterable[int] = (0,),
    out: str | Path = "out/sweep",
    *,
    overrides: Sequence[str] = (),
    backend: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run `scenario` (a TOML file) for every combination of `grid` values and every seed;
    return the summary table (also written to `out/summary.parquet`).

    `overrides`: `key.path=value` items applied to the scenario before the grid (as `--set`).
    `backend`: "local" (a pool of `workers` processes; 1 runs in this process) or "dask"
    (a `LocalCluster` of `workers` processes, or the cluster at `scheduler`,
    e.g. "tcp://10.0.0.5:8786"). `workers` defaults to the number of CPUs.
    `progress(done, total)` is called as runs finish (cached runs count as done at once).

    Finished runs found in `out/runs/` are reused, not recomputed; failed ones are retried.
    A run that fails is recorded (status "failed", its error) and the sweep goes on.
    Raises ScenarioError before running anything if a combination is not a valid scenario,
    and DcsimError if the dask backend is asked for without Dask installed.
    The frame's `attrs` hold `params` (the grid keys), `runs_executed`, `runs_cached` and
    `runs_failed`.

    A finished run is reused only if its files are all there and unchanged; a damaged one
    is recomputed, with a line on stderr saying which run, which file and why. A worker
    process that dies fails only the run it was running (status "failed", error
    "worker died: ..."). Called from a script, local worker processes re-run the script's
    top-level code: without the `if __name__ == "__main__":` guard around the call, this
    raises DcsimError saying so.
    """
    _refuse_main_module_rerun()
    if backend not in BACKENDS:
        raise ScenarioError(f"sweep backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if scheduler is not None and backend != "dask":
        raise ScenarioError("a scheduler address needs the dask backend")
    if workers is not None and workers < 1:
        raise ScenarioError(f"workers must be >= 1, got {workers}")
    if backend == "dask":
        require_dask()
    out = Path(out)
    grid = {k: list(v) for k, v in (grid or {}).items()}
    seeds = list(seeds)
    specs = plan(scenario, grid, seeds, overrides)
    before = _OutState.of(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    _write_json(
        out / SWEEP_FILE,
        {
            "scenario": str(Path(scenario).resolve()),
            "grid": grid,
            "seeds": seeds,
            "overrides": list(overrides),
            "runs": len(specs),
            "dcsim_version": package_version(),
            "libraries": library_versions(),
        },
    )
    rows: dict[int, dict[str, Any]] = {}
    todo = []
    for spec in specs:
        record = _reusable_record(out, spec)
        if record is None:
            todo.append(spec)
        else:
            rows[spec.index] = _row(spec, record, _read_summary(out, spec))
    cached = len(rows)
    if progress:
        progress(cached, len(specs))
    failed = 0
    try:
        for spec, outcome in _execute_all(todo, backend, workers, scheduler):
            record = _store(out, spec, outcome)
            failed += record["status"] == "failed"
            rows[spec.index] = _row(spec, record, _read_summary(out, spec))
            if progress:
                progress(len(rows), len(specs))
    except UnguardedMainError:  # refused before any run: leave `out` as it was
        before.restore(out)
        raise
    except BaseException:  # an interrupted sweep still leaves the summary of what finished
        _write_summary(out, _summary_frame(rows, list(grid)))
        raise
    summary = _summary_frame(rows, list(grid))
    _write_summary(out, summary)
    summary.attrs.update(
        params=list(grid), runs_executed=len(todo), runs_cached=cached, runs_failed=failed
    )
    return summary


def _write_summary(out: Path, summary: pd.DataFrame) -> None:
    write_atomic(out / SUMMARY_FILE, lambda p: summary.to_parquet(p, index=False))


@dataclass(frozen=True)
class _OutState:
    """What a sweep's output folder held before the sweep wrote into it, to put back when
    the sweep is refused before running anything."""

    out_existed: bool
    runs_existed: bool
    sweep_json: bytes | None

    @classmethod
    def of(cls, out: Path) -> _OutState:
        sweep_json = (out / SWEEP_FILE).read_bytes() if (out / SWEEP_FILE).is_file() else None
        return cls(out.exists(), (out / "runs").exists(), sweep_json)

    def restore(self, out: Path) -> None:
        if self.sweep_json is None:
            (out / SWEEP_FILE).unlink(missing_ok=True)
        else:
            write_atomic(out / SWEEP_FILE, lambda p: p.write_bytes(self.sweep_json or b""))
        for folder, existed in ((out / "runs", self.runs_existed), (out, self.out_existed)):
            if not existed and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def load_sweep(out: str | Path) -> pd.DataFrame:
    """The summary table a sweep wrote into `out`, with `attrs["params"]` its grid keys."""
    out = Path(out)
    try:
        meta = json.loads((out / SWEEP_FILE).read_text())
        summary = pd.read_parquet(out / SUMMARY_FILE)
        summary.attrs["params"] = list(meta["grid"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ScenarioError(f"{out}: not a sweep folder ({type(e).__name__}: {e})") from None
    return summary


def load_run(out: str | Path, run_id: str) -> Results:
    """The full results of one finished run of the sweep in `out`."""
    return Results.load(Path(out) / "runs" / run_id)


def parse_seeds(text: str) -> list[int]:
    """`"0-9"`, `"1,2,5"` or `"0-4,10"` to a list of seeds, in order, without repeats."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            chunk = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise ScenarioError(f"--seeds {text!r}: expected e.g. 0-9 or 1,2,5") from None
        if sep and int(hi) < int(lo):
            raise ScenarioError(f"--seeds {text!r}: range {part.strip()} is empty")
        seeds += [s for s in chunk if s not in seeds]
    return seeds


def parse_grid_item(item: str) -> tuple[str, list[Any]]:
    """`key=v1,v2,...` to the key and its values, each parsed as a TOML value (else a
    string); commas inside brackets, braces or quotes do not split."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip() or not text.strip():
        raise ScenarioError(f"--grid {item!r}: expected key=value1,value2,...")
    return key.strip(), [parse_value(v) for v in _split_top_level(text)]


# --- planning ------------------------------------------------------------------------------


def plan(
    scenario: str | Path,
    grid: Mapping[str, Sequence[Any]],
    seeds: Sequence[int],
    overrides: Sequence[str] = (),
) -> list[RunSpec]:
    """Every run of the sweep, validated: a bad combination raises ScenarioError naming it."""
    path = Path(scenario)
    for key, values in grid.items():
        if key == "seed":
            raise ScenarioError("grid key 'seed': give seeds with --seeds (seeds=...)")
        if not values:
            raise ScenarioError(f"grid key {key!r} has no values")
    if not seeds:
        raise ScenarioError("a sweep needs at least one seed")
    base = read_scenario_toml(path)
    for item in overrides:
        apply_override(base, item)
    # A grid of policies replaces the policy table: the overrides of its parameters then
    # apply to each policy of the grid (which refuses a parameter it does not take).
    param_overrides = [o for o in overrides if o.strip().startswith("policy.params")]
    stamp = f"{package_version()} {git_revision()}"
    checked_policies: set[str] = set()
    specs: list[RunSpec] = []
    combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    for params, seed in itertools.product(combos, seeds):
        raw = copy.deepcopy(base)
        for key, value in params.items():
            _set_param(raw, key, value)
        for item in param_overrides:
            apply_override(raw, item)
        raw["seed"] = seed
        try:
            resolved = scenario_from_dict(raw, source=path)
        except ScenarioError as e:
            raise ScenarioError(f"{e} (grid {_label(params)}, seed {seed})") from None
        _check_policy(resolved, checked_policies, params)
        text = resolved.to_toml()
        digest = hashlib.sha256(f"{text}\n{stamp}\n{_input_files(resolved)}".encode())
        specs.append(RunSpec(len(specs), params, seed, text, digest.hexdigest()[:16]))
    return specs


def _set_param(raw: dict[str, Any], key: str, value: Any) -> None:
    if key == "policy" and isinstance(value, str):  # the policy with its defaults
        raw["policy"] = {"name": value, "params": {}}
    else:
        set_value(raw, key, copy.deepcopy(value), origin="grid")


def _check_policy(scenario: Scenario, checked: set[str], params: dict[str, Any]) -> None:
    key = json.dumps([scenario.policy.name, scenario.policy.params], sort_keys=True, default=str)
    if key not in checked:
        try:
            build_policy(scenario.policy.name, scenario.policy.params)
        except DcsimError as e:  # the grid's combination on the first line, before frames
            head, newline, frames = str(e).partition("\n")
            raise type(e)(f"{head} (grid {_label(params)}){newline}{frames}") from None
        checked.add(key)


def _input_files(scenario: Scenario) -> str:
    """Size and modification time of every file the scenario names, as one string."""
    stamps = []
    for value in _strings(scenario.model_dump(mode="json")):
        candidate = value.rpartition(":")[0] if ".py:" in value else value
        if os.path.isabs(candidate) and os.path.isfile(candidate):
            st = os.stat(candidate)
            stamps.append(f"{candidate} {st.st_size} {st.st_mtime_ns}")
    return "\n".join(sorted(set(stamps)))


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _label(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_param_value(v)}" for k, v in params.items()) or "(no grid)"


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    quote: str | None = None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


# --- executing -----------------------------------------------------------------------------


def execute(scenario_toml: str) -> Outcome:
    """Run one resolved scenario; return its result files, or its error. Never raises."""
    t0 = time.perf_counter()
    try:
        scenario = scenario_from_dict(tomllib.loads(scenario_toml), source="<sweep run>")
        results = simulate(scenario)
        with tempfile.TemporaryDirectory(prefix="dcsim-run-") as tmp:
            results.save(tmp)
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir())}
        return Outcome(files, None, None, time.perf_counter() - t0, socket.gethostname())
    except Exception as e:
        error = f"{type(e).__name__}: {e}".splitlines()[0]
        tb = traceback.format_exc()
        return Outcome(None, error, tb, time.perf_counter() - t0, socket.gethostname())


def _execute_all(
    specs: list[RunSpec], backend: str, workers: int | None, scheduler: str | None
) -> Iterator[tuple[RunSpec, Outcome]]:
    if not specs:
        return
    workers = workers or os.cpu_count() or 1
    if backend == "dask":
        yield from _execute_dask(specs, workers, scheduler)
    elif workers == 1 or len(specs) == 1:
        for spec in specs:
            yield spec, execute(spec.scenario_toml)
    else:
        yield from _execute_processes(specs, min(workers, len(specs)))


@dataclass
class _Worker:
    """A local worker process, the parent's end of its pipe and the run it is running."""

    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    spec: RunSpec | None = None
    ready: bool = False


def _execute_processes(specs: list[RunSpec], workers: int) -> Iterator[tuple[RunSpec, Outcome]]:
    """Run `specs` on `workers` processes, one run at a time each, yielding each outcome.

    Each worker has its own pipe, so the parent knows which run a worker holds: a worker
    that dies (its process ends with no outcome sent) fails that run only, and a new
    worker takes its place. Workers ignore Ctrl-C; the parent kills them on its way out."""
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
    todo = deque(specs)
    started = 0

    def start() -> _Worker:
        nonlocal started
        started += 1
        parent_end, child_end = context.Pipe()
        process = context.Process(
            target=_worker_main,
            args=(child_end, os.getpid()),
            name=f"{WORKER_NAME}-{started}",
            daemon=True,
        )
        process.start()
        child_end.close()  # the parent's copy: its end must see EOF when the worker ends
        return _Worker(process, parent_end)

    pool = [start() for _ in range(workers)]
    try:
        while pool:
            wait([w.conn for w in pool] + [w.process.sentinel for w in pool])
            for worker in list(pool):
                try:
                    if not worker.conn.poll():
                        if worker.process.is_alive():
                            continue
                        raise EOFError
                    message = worker.conn.recv()
                except (EOFError, OSError):  # the worker's process ended
                    pool.remove(worker)
                    lost = _worker_ended(worker)
                    if lost is not None:
                        yield lost
                        if todo:
                            pool.append(start())
                    continue
                if isinstance(message, Outcome) and worker.spec is not None:
                    yield worker.spec, message
                worker.ready = True
                worker.spec = todo.popleft() if todo else None
                worker.conn.send(worker.spec.scenario_toml if worker.spec else None)
    finally:
        for worker in pool:
            worker.process.kill()
        for worker in pool:
            worker.process.join()
            worker.conn.close()


def _worker_ended(worker: _Worker) -> tuple[RunSpec, Outcome] | None:
    """The failed outcome of the run a worker was running when its process ended, or None
    if it held no run. Raises DcsimError if it ended while starting."""
    worker.process.join()
    worker.conn.close()
    code = worker.process.exitcode
    if not worker.ready:
        if code == UNGUARDED_MAIN_EXIT:
            script = getattr(sys.modules["__main__"], "__file__", None)
            refused = UnguardedMainError(_unguarded_main_message(script))
            _print_without_traceback(refused)
            raise refused from None
        raise DcsimError(
            f"sweep worker process {worker.process.name} ended while starting "
            f"({_exit_reason(code)}); its error, if any, is printed above"
        ) from None
    if worker.spec is None:
        return None
    error = f"worker died: {_exit_reason(code)}"
    why = f"{error}\nThe worker process ended before sending this run's outcome: no traceback.\n"
    return worker.spec, Outcome(None, error, why, float("nan"), socket.gethostname())


def _exit_reason(code: int | None) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:  # a signal without a name (real-time signals)
        return f"killed by signal {-code}"


def _worker_main(conn: multiprocessing.connection.Connection, parent_pid: int) -> None:
    """A local worker: say it is ready, then run each scenario it receives and send back
    the outcome, until it receives None or its parent is gone."""
    _end_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops the sweep
    try:
        conn.send(_READY)
        while (scenario_toml := conn.recv()) is not None:
            conn.send(execute(scenario_toml))
    except (EOFError, OSError):  # the parent is gone
        pass


def _end_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux: PR_SET_PDEATHSIG).

    Elsewhere a worker notices only when it next uses its pipe, after its current run."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died before the kernel was told
        os._exit(1)


def _refuse_main_module_rerun() -> None:
    """Stop a `sweep` called by the top-level code of a script that a starting child process
    re-runs (the spawn and forkserver start methods import it as `__mp_main__`): the call
    is not under `if __name__ == "__main__":`. A dcsim worker exits with
    UNGUARDED_MAIN_EXIT, for its parent to raise the error once; another process's child
    raises it itself."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            if multiprocessing.current_process().name.startswith(WORKER_NAME):
                raise SystemExit(UNGUARDED_MAIN_EXIT)
            raise DcsimError(_unguarded_main_message(frame.f_globals.get("__file__")))
        frame = frame.f_back


class UnguardedMainError(DcsimError):
    """`sweep` was called by a script's top-level code outside `if __name__ == "__main__":`,
    which every local worker re-runs: refused before any run."""


def _print_without_traceback(error: BaseException) -> None:
    """If `error` ends the program uncaught, print it as `error: MESSAGE` on stderr, without
    a traceback: the traceback would show dcsim's internals, and the message already names
    the script and the fix. Any other exception is printed by the hook there was before."""
    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        if value is error:
            print(f"error: {value}", file=sys.stderr)
        else:
            previous(kind, value, tb)

    sys.excepthook = hook


def _unguarded_main_message(script: str | None) -> str:
    script = script or "the main module"
    return (
        f"sim.sweep is called from the top-level code of {script}, which every worker "
        'process re-runs when it starts: put the call under `if __name__ == "__main__":` '
        "(or pass workers=1)"
    )


def require_dask() -> None:
    """Raise DcsimError, saying what to install, if Dask's distributed scheduler is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise DcsimError(
            f"the dask backend (--dask, --scheduler) needs Dask, which is not installed: "
            f"{DASK_INSTALL} ({e})"
        ) from None


def _execute_dask(
    specs: list[RunSpec], workers: int, scheduler: str | None
) -> Iterator[tuple[RunSpec, Outcome]]:
    import logging

    from distributed import Client, LocalCluster, as_completed

    if scheduler is None:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    else:
        cluster = None
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise ScenarioError(f"--scheduler {scheduler}: cannot connect ({e})") from None
    try:
        futures = {
            client.submit(execute, s.scenario_toml, key=f"dcsim-run-{s.run_id}", pure=False): s
            for s in specs
        }
        for future in as_completed(futures):
            yield futures[future], _outcome(future)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _outcome(future) -> Outcome:
    """A future's Outcome; a worker that died (no Outcome came back) is a failed run."""
    try:
        return future.result()
    except Exception as e:
        error = f"worker lost: {type(e).__name__}: {e}".splitlines()[0]
        return Outcome(None, error, traceback.format_exc(), float("nan"), "")


# --- storing -------------------------------------------------------------------------------


def _store(out: Path, spec: RunSpec, outcome: Outcome) -> dict[str, Any]:
    """Write the run's folder under a temporary name, then rename it into place."""
    files = outcome.files or {}
    record = {
        "run": spec.index,
        "run_id": spec.run_id,
        "params": spec.params,
        "seed": spec.seed,
        "status": "ok" if outcome.error is None else "failed",
        "error": outcome.error,
        "wall_s": outcome.wall_s,
        "host": outcome.host,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    final = out / "runs" / spec.run_id
    tmp = out / "runs" / f".{spec.run_id}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    if outcome.traceback:
        (tmp / ERROR_FILE).write_text(outcome.traceback)
    (tmp / RUN_FILE).write_text(json.dumps(record, indent=2, default=str))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return record


def _reusable_record(out: Path, spec: RunSpec) -> dict[str, Any] | None:
    """The run.json of a finished run whose files are all there and unchanged, or None if
    the run must be computed: not run yet, failed, or damaged (said on stderr)."""
    folder = out / "runs" / spec.run_id
    if not folder.exists():
        return None
    damage: tuple[str, str] | None
    try:
        record = json.loads((folder / RUN_FILE).read_text())
    except (OSError, ValueError) as e:
        record, damage = None, (RUN_FILE, f"cannot be read ({_reason(e)})")
    else:
        if not isinstance(record, dict) or record.get("status") != "ok":
            return None
        damage = _damage(folder, record)
    if damage is None:
        return record
    name, problem = damage
    print(
        f"recomputing run {spec.index} ({_label(spec.params)}, seed {spec.seed}): "
        f"runs/{spec.run_id}/{name} {problem}",
        file=sys.stderr,
        flush=True,
    )
    return None


def _damage(folder: Path, record: dict[str, Any]) -> tuple[str, str] | None:
    """The first file of a finished run's folder that is missing, unreadable or changed
    since the run was stored (its SHA-256 in run.json), and what is wrong with it."""
    digests = record.get("files")
    if not isinstance(digests, dict):
        return RUN_FILE, "lists no result files (written by an older dcsim)"
    for name in (*FILES, *sorted(set(digests) - set(FILES))):
        if name not in digests:
            return RUN_FILE, f"does not list {name}"
        try:
            data = (folder / name).read_bytes()
        except OSError as e:
            return name, f"cannot be read ({_reason(e)})"
        if hashlib.sha256(data).hexdigest() != digests[name]:
            return name, f"has changed since the run finished (now {len(data)} bytes)"
    return None


def _reason(error: Exception) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


def _read_summary(out: Path, spec: RunSpec) -> dict[str, Any]:
    path = out / "runs" / spec.run_id / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _row(spec: RunSpec, record: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"run": spec.index, "run_id": spec.run_id}
    row |= {k: _param_value(v) for k, v in spec.params.items()}
    row |= {"seed": spec.seed, "status": record["status"], "error": record["error"]}
    row |= {k: summary.get(k) for k in SUMMARY_KEYS}
    row |= {k: v for k, v in summary.items() if k not in row}  # metrics added later
    row["wall_s"] = record["wall_s"]
    return row


def _param_value(value: Any) -> Any:
    """A grid value as a table cell: scalars as they are, tables and lists as JSON."""
    if isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _summary_frame(rows: dict[int, dict[str, Any]], params: list[str]) -> pd.DataFrame:
    columns = ["run", "run_id", *params, "seed", "status", "error", *SUMMARY_KEYS, "wall_s"]
    frame = pd.DataFrame([rows[i] for i in sorted(rows)])
    if frame.empty:
        return pd.DataFrame(columns=columns)
    extra = [c for c in frame.columns if c not in columns]
    frame = frame[[*columns[:-1], *extra, "wall_s"]]
    for key in params:  # a column mixing numbers and strings is written as strings
        kinds = {type(v) for v in frame[key]}
        if len(kinds - {int, float}) > 0 and len(kinds) > 1:
            frame[key] = frame[key].map(str)
    for key in (*SUMMARY_KEYS, *extra, "wall_s"):
        if frame[key].dtype == object:
            frame[key] = pd.to_numeric(frame[key], errors="coerce")
    frame["error"] = frame["error"].astype("string")
    return frame


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, lambda p: p.write_text(json.dumps(data, indent=2, default=str)))
