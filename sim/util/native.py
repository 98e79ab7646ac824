"""The modules a build compiles with mypyc (`setup.py`), and running them as pure Python.

A wheel or editable install built with mypyc (the default where a C compiler is present)
holds an extension module beside each of `COMPILED`'s sources; Python imports the extension
first. `DCSIM_PURE=1` in the environment before `import sim` imports the sources instead
(the same results, slower: docs/serving.md "Iteration level"), as does a source edited
after its extension was built (with a warning: rebuild with `pip install -e .`). Only the
standard library here: `setup.py` reads `COMPILED` from this file.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED", "compiled", "pure_module", "use_sources_if_asked"]

COMPILED = ("sim.serving.iteration_level.replicas", "sim.models.llm_iteration")
"""Modules compiled by mypyc: the iteration level's replica and the iteration's cost."""

PURE_ENV = "DCSIM_PURE"


def _source_spec(name: str, as_name: str, folders: Iterable[str]) -> ModuleSpec:
    """The spec of module `name`'s source file in its package's `folders`, imported as
    `as_name`."""
    package, _, leaf = name.rpartition(".")
    for folder in folders:
        path = Path(folder) / f"{leaf}.py"
        if path.exists():
            spec = importlib.util.spec_from_file_location(as_name, path)
            assert spec is not None
            return spec
    raise ImportError(f"{name}: no source file {leaf}.py in {package}")


def _stale(source: Path) -> bool:
    """Whether the module's source was edited after its extension was built (by more than
    a second: an install writes both at once), so that the extension runs older code."""
    for suffix in EXTENSION_SUFFIXES:
        built = source.with_name(source.stem + suffix)
        if built.exists():
            return source.stat().st_mtime > built.stat().st_mtime + 1.0
    return False


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds `COMPILED`'s modules as their source files (ahead of their extensions) with
    `DCSIM_PURE=1`, or when an extension is older than its source (warned)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname not in COMPILED or path is None:
            return None
        spec = _source_spec(fullname, fullname, path)
        if os.environ.get(PURE_ENV) == "1":
            return spec
        if spec.origin is not None and _stale(Path(spec.origin)):
            warnings.warn(
                f"{fullname}: the source is newer than its compiled extension (rebuild: pip "
                "install -e .); running the source",
                stacklevel=2,
            )
            return spec
        return None


def use_sources_if_asked() -> None:
    """Import `COMPILED`'s sources instead of their extensions with `DCSIM_PURE=1` or when
    stale (`_SourceFinder`), from now on: called when this module is imported, which
    `sim/__init__.py` does first."""
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def compiled() -> list[str]:
    """The modules of `COMPILED` that run compiled (imported from an extension)."""
    out = []
    for name in COMPILED:
        module = importlib.import_module(name)
        if not str(module.__file__).endswith(".py"):
            out.append(name)
    return out


def pure_module(name: str) -> ModuleType:
    """A fresh pure-Python copy of module `name` (one of `COMPILED`), apart from the one
    imported: tests wrap its classes' methods, which compiled classes do not allow."""
    package = importlib.import_module(name.rpartition(".")[0])
    spec = _source_spec(name, f"{name}__pure", package.__path__)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up while executing it
    spec.loader.exec_module(module)
    return module


use_sources_if_asked()
