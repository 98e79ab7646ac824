"""Atomic file writes: a result file is complete or absent, never half written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` on a temporary name beside `path`, then rename it to `path`; the
    folder is created (with its parents) if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
