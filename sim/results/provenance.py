"""Where a run ran: the dcsim version, the git revision and the versions of the libraries its
numbers depend on, for meta.json and a sweep's manifest."""

from __future__ import annotations

import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

__all__ = ["LIBRARIES", "git_revision", "library_versions", "package_version"]

LIBRARIES = ("numpy", "pandas", "scipy", "simpy", "pyarrow", "networkx", "pydantic")
"""The distributions a result's numbers depend on: numpy's random streams are identical only
on the same numpy (and build), pandas and pyarrow read and write the tables, scipy and
networkx compute, SimPy orders the events, pydantic reads the scenario."""

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def package_version() -> str:
    """The installed dcsim's version; "unknown" when it runs from a checkout not installed."""
    return _version("dcsim") or "unknown"


def library_versions() -> dict[str, str | None]:
    """The installed version of each of `LIBRARIES` (None if one is missing), and the
    machine's architecture (`machine`, e.g. "x86_64"), since a numpy build is per
    architecture. Read once per process (a new dict each call)."""
    return dict(_library_versions())


@cache
def _library_versions() -> tuple[tuple[str, str | None], ...]:
    versions = [(name, _version(name)) for name in LIBRARIES]
    return (*versions, ("machine", platform.machine() or None))


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def git_revision() -> str | None:
    """The commit dcsim runs from, `-dirty` if it has uncommitted changes; None unless dcsim
    runs from a git checkout of its own (an installed wheel has none, even when its
    environment lies inside some repository)."""
    if not _in_own_checkout(_PACKAGE_DIR):
        return None
    return _git(_PACKAGE_DIR, "describe", "--always", "--dirty", "--abbrev=40")


@cache
def _in_own_checkout(package_dir: Path) -> bool:
    """Whether `package_dir` is the `sim/` of the git work tree it lies in (asked once)."""
    top = _git(package_dir, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() / "sim" == package_dir


def _git(folder: Path, *args: str) -> str | None:
    """What `git *args` prints in `folder`; None if git fails or is absent."""
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
