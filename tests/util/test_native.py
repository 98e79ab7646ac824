"""The compiled modules (`sim.util.native`): a source edited after its extension was built
runs as the source (the extension would run older code); `DCSIM_PURE=1` runs the sources."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from sim.util import native

REPO = Path(__file__).resolve().parents[2]


def test_an_extension_older_than_its_source_is_stale_and_one_built_after_it_is_not(tmp_path):
    source = tmp_path / "replicas.py"
    built = tmp_path / f"replicas{EXTENSION_SUFFIXES[0]}"
    source.write_text("")
    built.write_bytes(b"")
    os.utime(source, (1000.0, 1000.0))
    os.utime(built, (1000.5, 1000.5))  # written by the same install
    assert not native._stale(source)
    os.utime(source, (1010.0, 1010.0))  # edited since
    assert native._stale(source)
    built.unlink()
    assert not native._stale(source)  # nothing compiled: nothing stale


def test_dcsim_pure_runs_every_compiled_module_from_its_source():
    code = "import sim.util.native as n; print(n.compiled())"
    env = dict(os.environ, DCSIM_PURE="1", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr
