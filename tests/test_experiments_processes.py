"""Sweeps on local worker processes: a worker that dies fails only its own run, killing the
sweep kills its workers, and a script without the `__main__` guard is refused."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import sim
from tests.conftest import REPO

QUICKSTART = REPO / "scenarios" / "quickstart.toml"
SMALL = ("duration_h=24", "demand_response=[]")  # a day of the quickstart: ~0.1 s a run

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="kills processes, reads /proc")


def policy_module(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "test_policies.py"
    path.write_text(textwrap.dedent(source))
    return path


def killer_policy(tmp_path: Path, how: str) -> dict:
    """A policy whose decide() ends its own process: by SIGKILL, or by os._exit(3)."""
    path = policy_module(
        tmp_path,
        """
        import os, signal

        class Killer:
            def __init__(self, how):
                self.how = how

            def decide(self, state):
                if self.how == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                os._exit(3)
        """,
    )
    return {"name": f"{path}:Killer", "params": {"how": how}}


def sleeper_policy(tmp_path: Path, marks: Path) -> dict:
    """A policy whose decide() leaves a file named after its process id in `marks`, then
    sleeps for ten minutes."""
    path = policy_module(
        tmp_path,
        """
        import os, time
        from pathlib import Path

        class Sleeper:
            def __init__(self, marks):
                self.marks = marks

            def decide(self, state):
                Path(self.marks, str(os.getpid())).touch()
                time.sleep(600)
                return []
        """,
    )
    return {"name": f"{path}:Sleeper", "params": {"marks": str(marks)}}


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (an ended process not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kill_workers(pids) -> None:
    """Kill those of `pids` that are still running multiprocessing workers (not a process
    that took a pid over)."""
    for pid in pids:
        try:
            is_worker = b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if is_worker and alive(pid):
            os.kill(pid, signal.SIGKILL)


def sweep_script(tmp_path: Path, call: str, guard: bool) -> Path:
    """A script that runs a sweep with two workers and prints the runs' statuses."""
    body = f"summary = {call}\nprint('statuses', list(summary['status']))\n"
    if guard:
        body = 'if __name__ == "__main__":\n' + textwrap.indent(body, "    ")
    path = tmp_path / "study.py"
    path.write_text(f"import sim\n\n{body}")
    return path


# --- a worker that dies ---------------------------------------------------------------------


def test_a_worker_that_dies_fails_only_the_run_it_was_running(tmp_path):
    killers = [killer_policy(tmp_path, "sigkill"), killer_policy(tmp_path, "exit")]
    grid = {"policy": ["run_now", *killers, "wait_awhile"]}
    out = tmp_path / "sweep"
    summary = sim.sweep(QUICKSTART, grid, seeds=[0], out=out, overrides=SMALL, workers=2)

    assert list(summary["status"]) == ["ok", "failed", "failed", "ok"]
    assert list(summary["error"].iloc[1:3]) == [
        "worker died: killed by SIGKILL",
        "worker died: exit status 3",
    ]
    assert summary.attrs["runs_failed"] == 2
    assert summary["carbon_total_kg"].iloc[1:3].isna().all()  # failed, not NaN successes
    for run_id in summary["run_id"].iloc[1:3]:  # error.txt, which `dcsim sweep` points to
        assert "no traceback" in (out / "runs" / run_id / "error.txt").read_text()
    for run_id in summary["run_id"].iloc[[0, 3]]:  # the others ran to the end and are stored
        assert sim.load_run(out, run_id).summary["jobs_submitted"] > 0

    again = sim.sweep(QUICKSTART, grid, seeds=[0], out=out, overrides=SMALL, workers=2)
    assert again.attrs["runs_cached"] == 2 and again.attrs["runs_executed"] == 2
    assert list(again["status"]) == ["ok", "failed", "failed", "ok"]


# --- killing the sweep ----------------------------------------------------------------------


@pytest.mark.parametrize("kill_signal", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_sweep_process_ends_its_workers_mid_run(tmp_path, kill_signal):
    marks = tmp_path / "marks"
    marks.mkdir()
    policy = sleeper_policy(tmp_path, marks)
    call = (
        f"sim.sweep({str(QUICKSTART)!r}, {{'policy': [{policy!r}]}}, seeds=[0, 1, 2], "
        f"out={str(tmp_path / 'sweep')!r}, overrides={SMALL!r}, workers=2)"
    )
    script = sweep_script(tmp_path, call, guard=True)
    main = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and main.poll() is None:
            time.sleep(0.05)
            workers = [int(p.name) for p in marks.iterdir()]
        assert len(workers) == 2, main.stderr.read().decode() if main.poll() is not None else ""
        assert all(alive(pid) for pid in workers)  # both are running a run

        os.kill(main.pid, kill_signal)
        main.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in workers if alive(pid)] == []
    finally:
        main.kill()
        main.wait()
        main.stderr.close()
        kill_workers(workers)


# --- the __main__ guard ---------------------------------------------------------------------


def test_a_script_without_the_main_guard_is_refused_with_a_message_saying_to_add_it(tmp_path):
    call = (
        f"sim.sweep({str(QUICKSTART)!r}, {{'policy': ['run_now', 'wait_awhile']}}, "
        f"out='sweep', overrides={SMALL!r}, workers=2)"
    )
    unguarded = sweep_script(tmp_path, call, guard=False)
    done = subprocess.run(
        [sys.executable, str(unguarded)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "statuses" not in done.stdout  # no summary of failed or NaN runs
    assert done.stderr.strip().splitlines() == [
        f"error: sim.sweep is called from the top-level code of {unguarded}, which every "
        'worker process re-runs when it starts: put the call under `if __name__ == "__main__":` '
        "(or pass workers=1)"
    ]  # no traceback of dcsim's internals, no chained "During handling of the above ..."
    assert not (tmp_path / "sweep").exists()  # no empty summary.parquet, no sweep.json


def test_a_refused_unguarded_sweep_leaves_an_earlier_sweep_folder_as_it_was(tmp_path):
    out = tmp_path / "sweep"
    sim.sweep(QUICKSTART, {"policy": ["run_now"]}, out=out, overrides=SMALL, workers=1)
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    call = (  # two runs to do: a pool of two workers
        f"sim.sweep({str(QUICKSTART)!r}, {{'policy': ['run_now', 'wait_awhile', 'carbon_time']}}, "
        f"out={str(out)!r}, overrides={SMALL!r}, workers=2)"
    )
    unguarded = sweep_script(tmp_path, call, guard=False)
    done = subprocess.run(
        [sys.executable, str(unguarded)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.stderr.startswith("error: sim.sweep is called from the top-level code")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_the_readme_sweep_snippet_saved_as_a_script_runs_every_run(tmp_path):
    readme = (REPO / "README.md").read_text()
    opening = 'import sim\n\nif __name__ == "__main__":\n'
    snippet = opening + readme.split(f"```python\n{opening}", 1)[1].split("```", 1)[0]
    assert "sim.sweep(" in snippet and "workers" not in snippet  # a pool of one per CPU
    snippet = snippet.replace('out="out/sweep"', f"out={str(tmp_path / 'sweep')!r}")
    snippet = snippet.replace("seeds=range(5)", "seeds=range(1)")  # the guard is what counts
    script = tmp_path / "study.py"
    script.write_text(f"{snippet}    print('statuses', list(summary['status']))\n")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "statuses ['ok', 'ok']" in done.stdout


def test_a_sweep_called_while_any_child_process_re_runs_a_script_raises_the_guard_error(tmp_path):
    """Not only dcsim's workers: a child that multiprocessing starts for the user's own code
    re-runs the script as `__mp_main__` too, and gets the error itself."""
    script = tmp_path / "study.py"
    out = tmp_path / "never-written"
    script.write_text(f"import sim\nsim.sweep({str(QUICKSTART)!r}, out={str(out)!r})\n")
    with pytest.raises(sim.DcsimError, match=f"top-level code of {script}.*if __name__ =="):
        runpy.run_path(str(script), run_name="__mp_main__")
    assert not out.exists()
