"""`release_free_memory` hands the C heap's free pages back where glibc can, and does nothing
where it cannot; it never changes what the process holds."""

from __future__ import annotations

import ctypes

import numpy as np

from sim.util import memory


def test_it_keeps_every_live_object_intact():
    kept = np.arange(1_000_000, dtype=np.float64)
    freed = [bytearray(64 * 1024) for _ in range(200)]
    del freed
    memory.release_free_memory()
    assert kept.sum() == 999_999 * 1_000_000 / 2


def test_without_glibc_it_is_a_no_op(monkeypatch):
    def no_libc(name):
        raise OSError(f"{name}: cannot open shared object file")

    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    try:
        assert memory._malloc_trim() is None
        memory.release_free_memory()
    finally:
        memory._malloc_trim.cache_clear()
