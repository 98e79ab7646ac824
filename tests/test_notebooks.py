"""The study notebooks run from start to end on reduced sizes, and are committed stripped.

Each `notebooks/*.ipynb` is executed with nbclient in a kernel of this interpreter (a
kernelspec written for `sys.executable`, so that a `python3` kernelspec installed
elsewhere on the machine is never picked up), with `DCSIM_NOTEBOOK_QUICK=1` (each notebook
reads it and shrinks its runs), its own folder as working directory, and figures and
sweeps written to a temporary folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ipykernel.kernelspec as ipykernel_kernelspec
import nbclient
import nbformat
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO))
from scripts.study_fragmentation import TRACE as ALIBABA_2023  # noqa: E402

NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
TIMEOUT_S = 300
"""Per cell, s: a hung kernel fails the test instead of stalling the suite. (Run times are
not asserted: these machines are noisy; quick mode takes about 10 s per notebook.)"""

pytestmark = pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks in notebooks/")

NEEDS_DATA = {"fragmentation.ipynb": ALIBABA_2023}
"""Notebooks that read ../shared/data (not in the repository): skipped without it."""


@pytest.fixture
def this_python_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `python3` kernelspec that runs this interpreter, first on the Jupyter path."""
    jupyter_dir = tmp_path / "jupyter"
    ipykernel_kernelspec.write_kernel_spec(jupyter_dir / "kernels" / "python3")
    spec = json.loads((jupyter_dir / "kernels" / "python3" / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_dir))
    return "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(
    path: Path, this_python_kernel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = NEEDS_DATA.get(path.name)
    if data is not None and not data.is_file():
        pytest.skip(f"{path.name} reads {data} (no ../shared/data)")
    monkeypatch.setenv("DCSIM_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("DCSIM_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("DCSIM_SWEEPS_DIR", str(tmp_path / "sweeps"))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=this_python_kernel,
        timeout=TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()  # raises CellExecutionError naming the cell and the traceback
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts; strip them"
