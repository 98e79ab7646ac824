"""`--help` of every command reads like a man page: `--out DIR`, `--set KEY=VALUE`, `FILE`;
no type artefacts such as `<bool>`, `<path>` or `{file}`."""

from __future__ import annotations

import re

import pytest
import typer

from sim.cli import app
from tests.conftest import run_cli


def command_paths(group=None, path=()) -> list[tuple[str, ...]]:
    """Every command and command group of `dcsim`, as the words that name it."""
    group = group if group is not None else typer.main.get_command(app)
    paths = [path]
    for name, command in getattr(group, "commands", {}).items():
        paths += command_paths(command, (*path, name))
    return paths


ARTEFACTS = re.compile(r"<(bool|str|int|float|path|file|dir)[^>]*>|\{[a-z_]+\}")


def test_there_are_commands_to_check():
    paths = command_paths()
    assert ("run",) in paths and ("grid-data", "show") in paths and len(paths) >= 11


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "dcsim")
def test_help_shows_no_type_artefacts(capsys, path):
    status, out = run_cli([*path, "--help"], capsys)
    assert status == 0
    assert "--help" in out.out
    assert not ARTEFACTS.findall(out.out), out.out


@pytest.mark.parametrize(
    "path, shown",
    [
        (("run",), [r"dcsim run \[OPTIONS\] FILE", r"--out\s+DIR", r"--set\s+KEY=VALUE",
                    r"--policy\s+NAME", r"--seed\s+N\b", r"\bFILE\s+Scenario TOML file"]),
        (("sweep",), [r"--out\s+DIR", r"--grid\s+KEY=V1,V2", r"--workers\s+N\b",
                      r"--dask\s+Run on"]),
        (("plot",), [r"dcsim plot \[OPTIONS\] FOLDER", r"--out\s+DIR"]),
        (("workload", "import"), [r"FORMAT FILE", r"--out\s+FILE", r"--option\s+KEY=VALUE"]),
        (("grid-data", "show"), [r"\[OPTIONS\] ZONE", r"--plot\s+FILE"]),
        ((), [r"--help\s+Show this message"]),
    ],
)  # fmt: skip
def test_help_names_each_value_by_what_it_is(capsys, path, shown):
    _, out = run_cli([*path, "--help"], capsys)
    for pattern in shown:
        assert re.search(pattern, out.out), (pattern, out.out)


def test_python_m_sim_cli_is_the_dcsim_command():
    import subprocess
    import sys

    import sim

    done = subprocess.run(
        [sys.executable, "-m", "sim.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"dcsim {sim.__version__}")
