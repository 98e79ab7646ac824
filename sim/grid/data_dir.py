"""Where dcsim reads its grid data (zone catalogs, marginal series, prices).

The catalog ships inside the installed distribution as the `grid_data` package (the
repository's top-level `grid_data/` folder), found with `importlib.resources`, so a wheel
installed anywhere reads the same files as a source checkout. A user who rebuilt the catalog
elsewhere (`dcsim grid-data build --out DIR`) points runs at it with the environment variable
`DCSIM_GRID_DATA=DIR`; meta.json records which folder a run read (`grid_data`).
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from sim.errors import ScenarioError

__all__ = [
    "GRID_DATA_ENV",
    "OUT_HELP",
    "grid_data_dir",
    "grid_data_source",
    "packaged_grid_data_dir",
    "read_catalog_csv",
]

GRID_DATA_ENV = "DCSIM_GRID_DATA"
"""Environment variable naming a folder to read the grid data from instead of the package's."""

OUT_HELP = f"output folder (default: the folder runs read: ${GRID_DATA_ENV}, else the package's)"
"""The `--out` help of the grid-data build commands."""


def packaged_grid_data_dir() -> Path:
    """The folder of the installed `grid_data` package (in a source checkout installed
    editable: the repository's `grid_data/`)."""
    try:
        root = resources.files("grid_data")
    except ModuleNotFoundError:  # an editable install made before grid_data was a package
        raise ScenarioError(
            "the grid_data package is not installed with dcsim; reinstall it "
            "(pip install -e . in a checkout)"
        ) from None
    if not isinstance(root, Path):  # a zipped install: pandas and pyarrow need real files
        raise ScenarioError(f"the grid_data package at {root} is not a folder on disk")
    return root


def grid_data_dir() -> Path:
    """The folder runs read grid data from: `$DCSIM_GRID_DATA` if set, else the package's.
    A variable naming no folder is an error naming it, never a silent fallback."""
    chosen = os.environ.get(GRID_DATA_ENV)
    if not chosen:
        return packaged_grid_data_dir()
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise ScenarioError(f"{GRID_DATA_ENV}={chosen}: no such folder")
    return path


@lru_cache(maxsize=8)
def read_catalog_csv(path: Path, what: str, builder: str) -> pd.DataFrame:
    """A catalog CSV of the grid data (`what`, e.g. "average zone"), read once per path; an
    error naming the path and the command `builder` that writes it if it is missing."""
    if not path.is_file():
        raise ScenarioError(f"no {what} catalog at {path}; run `{builder}`")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def grid_data_source() -> str:
    """For meta.json: "package" when runs read the installed catalog, else the folder
    `$DCSIM_GRID_DATA` names."""
    chosen = os.environ.get(GRID_DATA_ENV)
    return str(grid_data_dir()) if chosen else "package"
