"""Giving the C heap's free pages back to the operating system between the steps of
building the results.

glibc's malloc serves a request below its mmap threshold from the heap, and that threshold
grows (up to 32 MB) each time a larger mmapped block is freed. The logs' typed arrays and
the numpy temporaries that sort them are freed while the result tables are built, leaving
free pages inside the heap that the process keeps: at 300k jobs the results cost 70 MB
more resident memory than they hold. `malloc_trim(0)` returns those pages (`madvise`), so
the next step's peak starts from what is really held. Elsewhere (another C library, another
OS) this is a no-op.

pyarrow's memory pool (mimalloc) keeps the pages it freed too: converting and writing the
jobs table at 300k jobs left 106 MB resident that the pool no longer used. Its
`release_unused` returns them; it is called only if pyarrow is already imported.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from functools import cache

__all__ = ["release_free_memory"]


def release_free_memory() -> None:
    """Return the C heap's free pages to the operating system (glibc `malloc_trim(0)`; a few
    ms at a GB of heap; a no-op without glibc), and pyarrow's pool's unused pages if
    pyarrow is imported."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
