"""Build dcsim with the iteration level's hot modules compiled by mypyc (`sim.util.native`:
`COMPILED`), the rest of the package as pyproject.toml says. Optional: with `DCSIM_PURE=1`
in the build's environment, without mypyc, or when compiling fails (no C compiler), the
package is pure Python, with the same results, slower (docs/serving.md "Iteration level").
"""

import os
import runpy
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
NATIVE = runpy.run_path(str(HERE / "sim" / "util" / "native.py"), run_name="dcsim_native")


def _pure(why: str) -> list[Extension]:
    print(f"dcsim: {why}, pure Python instead", file=sys.stderr)
    return []


def mypyc_extensions() -> list[Extension]:
    """The mypyc extensions of `COMPILED`, or none (pure Python)."""
    try:
        from mypyc.build import mypycify
    except ImportError:
        return _pure("mypyc not found")
    paths = [name.replace(".", "/") + ".py" for name in NATIVE["COMPILED"]]
    # The build's environment lacks the run's libraries (numpy, pydantic): their types are
    # Any to mypyc, which calls them as Python does either way.
    try:
        return mypycify(["--ignore-missing-imports", *paths], opt_level="3", group_name="dcsim")
    except (Exception, SystemExit) as e:  # mypy reports type errors by exiting
        return _pure(f"mypyc failed ({e})")


class MypycBuildExt(build_ext):
    """`build_ext` that runs mypyc when it builds (not for the metadata), and leaves the
    package pure Python, without any extension (the modules of one mypyc group import each
    other's code), when any fails to build."""

    def finalize_options(self) -> None:
        self.distribution.ext_modules = mypyc_extensions()
        super().finalize_options()

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # the compiler's errors vary by platform
            for path in self.get_outputs():
                Path(path).unlink(missing_ok=True)
            self.extensions = _pure(f"compiling failed ({e})")


# A placeholder, so that the wheel is built for the platform; `MypycBuildExt` replaces it.
PLACEHOLDER = [Extension("dcsim__mypyc", sources=[])]
setup(
    ext_modules=[] if os.environ.get(NATIVE["PURE_ENV"]) == "1" else PLACEHOLDER,
    cmdclass={"build_ext": MypycBuildExt},
)
