"""Compiled numeric kernels: a plain Python function over numbers and numpy arrays, compiled
by numba on its first call and cached on disk, with the function itself kept as the
reference.

    @kernel
    def best_start(times_s, values, ...): ...

    best_start(...)           # numba's compiled code (compiled on the first call)
    best_start.py_func(...)   # the same function run by Python: the reference tests use

A kernel may call plain Python functions marked `@helper` (numba compiles them into each
kernel that calls them; Python runs them in the reference).

numba is imported only when a kernel is first called, so `import sim` does not pay for it.
The compiled code is cached beside the source (`__pycache__`) or, where that folder is not
writable, in numba's per-user cache (`NUMBA_CACHE_DIR` overrides both): the first run on a
machine compiles (about a second per kernel family), later runs load. `DCSIM_PURE=1` in the
environment runs every kernel as Python (the same arithmetic; slower), as it does for the
mypyc-compiled modules (`sim.util.native`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from sim.util.native import PURE_ENV

__all__ = ["Kernel", "helper", "kernel"]

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

_HELPERS: list[Callable[..., Any]] = []
"""The functions marked `helper`, registered with numba when the first kernel compiles."""


class Kernel(Generic[P, R]):
    """A function compiled by numba on its first call (`njit`, cached on disk), or run as
    Python with `DCSIM_PURE=1`. `py_func` is the Python function: the reference."""

    __slots__ = ("_run", "py_func")

    def __init__(self, py_func: Callable[P, R]) -> None:
        self.py_func = py_func
        self._run: Callable[..., Any] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        run = self._run
        if run is None:
            run = self._run = self.compiled()
        result: R = run(*args, **kwargs)
        return result

    def compiled(self) -> Callable[P, R]:
        """numba's dispatcher of `py_func` (`py_func` itself with `DCSIM_PURE=1`)."""
        if os.environ.get(PURE_ENV) == "1":
            return self.py_func
        import numba
        from numba.extending import register_jitable

        while _HELPERS:
            register_jitable(_HELPERS.pop())
        dispatcher: Callable[P, R] = numba.njit(cache=True, nogil=True)(self.py_func)
        return dispatcher


def kernel(py_func: Callable[P, R]) -> Kernel[P, R]:
    """Decorate a numeric function as a `Kernel`: compiled by numba (no fast-math: the
    compiled code does the operations Python does, in the same order)."""
    return Kernel(py_func)


def helper(py_func: F) -> F:
    """Mark a plain Python function as callable from kernels (numba's `register_jitable`,
    done when the first kernel compiles); it stays the same function for Python."""
    _HELPERS.append(py_func)
    return py_func
