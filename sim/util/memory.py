"""Giving the C heap's free pages back to the operating system between the steps of
building the results.

glibc's malloc serves a request below its mmap threshold from the heap, and that threshold
grows (up to 32 MB) each time a larger mmapped block is freed. The logs' typed arrays and
the numpy temporaries that sort them are freed while the result tables are built, leaving
free pages inside the heap that the process keeps: at 300k jobs the results cost 70 MB
more resident memory than they hold. `malloc_trim(0)` returns those pages (`madvise`), so
the next step's peak starts from what is really held. Elsewhere (another C library, another
OS) this is a no-op.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

__all__ = ["release_free_memory"]


def release_free_memory() -> None:
    """Return the C heap's free pages to the operating system (glibc `malloc_trim(0)`; a few
    ms at a GB of heap); a no-op without glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
