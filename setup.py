"""Build dcsim with the iteration level's hot modules compiled by mypyc (`sim.util.native`:
`COMPILED`), the rest of the package as pyproject.toml says. Optional: with `DCSIM_PURE=1`
in the build's environment, without mypyc, or when compiling fails (no C compiler), the
package is pure Python, with the same results, slower (docs/serving.md "Iteration level").
"""

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
NATIVE = runpy.run_path(str(HERE / "sim" / "util" / "native.py"), run_name="dcsim_native")


class OptionalBuildExt(build_ext):
    """`build_ext` that leaves the package pure Python (no extension at all: the modules of
    one mypyc group import each other's code) when any extension fails to build."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # the compiler's errors vary by platform
            for path in self.get_outputs():
                Path(path).unlink(missing_ok=True)
            print(f"dcsim: compiling with mypyc failed, pure Python instead ({e})", file=sys.stderr)
            self.extensions = []


def extensions() -> list:
    """The mypyc extensions, or none (pure Python)."""
    if os.environ.get(NATIVE["PURE_ENV"]) == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("dcsim: mypyc not found, pure Python", file=sys.stderr)
        return []
    paths = [name.replace(".", "/") + ".py" for name in NATIVE["COMPILED"]]
    # The build's environment lacks the run's libraries (numpy, pydantic): their types are
    # Any to mypyc, which calls them as Python does either way.
    flags = ["--ignore-missing-imports"]
    try:
        return mypycify(flags + paths, opt_level="3", group_name="dcsim")
    except (Exception, SystemExit) as e:  # mypy reports type errors by exiting
        print(f"dcsim: mypyc failed, pure Python instead ({e})", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
