"""The commands written in the scenario files run: every `dcsim ...` line in the comments
of scenarios/*.toml (a trailing `\\` continues it on the next comment line), in the order
written, in a copy of the repository's layout (a command's outputs, such as a run that
`dcsim plot` reads, are there for the next command of its file).

Shortened so that the file's commands take seconds: `dcsim run`, `sweep` and
`fleet-renewal` get `--set duration_h=HOURS` (SHORT_H, per scenario: long enough that the
run still has its jobs, events or requests), and a sweep runs one seed (`--seeds 1`).
The commands' syntax, keys, policy names and parameters are what the test checks; the
examples' claims are tests/test_examples_demonstrate.py's. Files whose commands read
../shared/data are skipped where it is absent; `python scripts/...` lines are not
`dcsim` commands (the studies' scripts have their own tests).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, run_cli

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))
SHORT_H: dict[str, float | None] = {
    "quickstart": 72.0,  # its demand-response event is on day 3
    "serving": 1.0,  # request level: the cost of a run grows with its requests
    "serving_only": 2.0,
    "prefix_caching": 2.0,
    "carbon_aware_inference": 2.0,
    "disaggregation": 1.0,
    "gpu_generations": 2.0,  # a sweep of 18 runs
    "demand_response": None,  # its jobs file submits over three days
    "energy_efficient_config": None,  # its jobs file: every job trains to its target
    "fragmentation": None,  # the imported trace
}
"""Hours a file's runs are cut to where the default (DEFAULT_SHORT_H) does not fit: fewer
for the request level, more where an event must stay inside the run, None (not cut) where
a jobs file must fit the scenario's horizon."""
DEFAULT_SHORT_H = 6.0
SHORTENED = ("run", "sweep", "fleet-renewal")


def written_commands(path: Path) -> list[list[str]]:
    """The `dcsim` commands in `path`'s comments, as argument lists (without `dcsim`)."""
    commands, pending = [], ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        if pending:
            text = pending + " " + text
        elif not text.startswith("dcsim "):
            continue
        pending = text[:-1] if text.endswith("\\") else ""
        if not pending:
            commands.append(shlex.split(text, comments=True)[1:])
    return commands


def shortened(args: list[str], hours: float | None) -> list[str]:
    """`args` cut to `hours` of simulated time and one seed, where the command takes them."""
    if args[0] not in SHORTENED or hours is None:
        return args
    args = [*args, "--set", f"duration_h={hours:g}"]
    if "--seeds" in args:
        args[args.index("--seeds") + 1] = "1"
    return args


def mirror(tmp_path: Path) -> Path:
    """A copy of the repository's scenarios beside a link to ../shared, in `tmp_path`:
    the commands' relative paths (scenarios/..., ../shared/data, out/...) resolve as in a
    checkout, and their outputs stay in `tmp_path`."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "scenarios", root / "scenarios")
    if SHARED_DATA.is_dir():
        (tmp_path / "shared").symlink_to(SHARED_DATA.parent)
    return root


def test_the_commands_are_read_with_their_continuations():
    commands = written_commands(REPO / "scenarios" / "gpu_generations.toml")
    assert [c[0] for c in commands] == ["run", "run", "sweep"]
    assert commands[2][-4:] == ["--grid", "sites[0].carbon.zone=FR,DE,PL", "--grid",
                                "embodied=allocated,installed"]  # fmt: skip
    assert shortened(commands[2], 6)[commands[2].index("--seeds") + 1] == "1"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_commands_written_in_a_scenario_file_run(path, tmp_path, monkeypatch, capsys):
    commands = written_commands(path)
    if not commands:
        pytest.skip(f"{path.name} writes no dcsim command")
    reads_shared = "shared/data" in path.read_text() or any(
        "../shared" in arg for c in commands for arg in c
    )
    if reads_shared and not SHARED_DATA.is_dir():
        pytest.skip(f"{path.name} reads ../shared/data, absent here")
    monkeypatch.chdir(mirror(tmp_path))
    hours = SHORT_H.get(path.stem, DEFAULT_SHORT_H)
    for args in commands:
        code, out = run_cli(shortened(args, hours), capsys)
        assert code == 0, f"{path.name}: dcsim {shlex.join(args)}\n{out.err[-2000:]}"
