"""Where a run ran: the dcsim version and the git revision, for meta.json and a sweep's
manifest."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["git_revision", "package_version"]


def package_version() -> str:
    """The installed dcsim's version; "unknown" when it runs from a checkout not installed."""
    try:
        return metadata.version("dcsim")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_revision() -> str | None:
    """The commit dcsim runs from, `-dirty` if it has uncommitted changes; None outside git."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=40"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
