"""dcsim as a package people install and cite: its licence, citation and version agree, runs
read their grid data from the installed package (or the folder a user names), and meta.json
says which versions made a result. The wheel itself is installed and run outside the checkout
by `scripts/wheel-check` in `.ci/run`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import sim
from sim.grid import GRID_DATA_ENV, grid_data_dir, load_zone
from sim.grid.data_dir import packaged_grid_data_dir
from sim.results import library_versions, provenance
from tests.conftest import REPO, run_cli

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CITATION = (REPO / "CITATION.cff").read_text()
SHORT = ["--set", "duration_h=24", "--set", "demand_response=[]"]


def _cff(key: str) -> str:
    match = re.search(rf"^{key}:\s*\"?([^\"\n]+)\"?$", CITATION, re.MULTILINE)
    assert match, f"CITATION.cff has no {key}"
    return match.group(1).strip()


def test_the_licence_is_apache_2_in_spdx_and_its_text_ships():
    assert PYPROJECT["license"] == "Apache-2.0" == _cff("license")
    assert PYPROJECT["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_the_citation_names_the_version_that_is_installed():
    assert _cff("cff-version") == "1.2.0"
    assert _cff("version") == PYPROJECT["version"] == metadata.version("dcsim") == sim.__version__


def test_dcsim_version_prints_the_installed_version(capsys):
    code, out = run_cli(["--version"], capsys)
    assert code == 0
    assert out.out.startswith(f"dcsim {sim.__version__}")


def test_the_package_has_classifiers_and_declares_its_types():
    assert "Intended Audience :: Science/Research" in PYPROJECT["classifiers"]
    assert (REPO / "sim" / "py.typed").is_file() and (REPO / "policies" / "py.typed").is_file()


def test_runs_read_the_grid_data_of_the_installed_package(monkeypatch):
    monkeypatch.delenv(GRID_DATA_ENV, raising=False)
    assert grid_data_dir() == packaged_grid_data_dir()
    # installed editable from this checkout, the package's catalog is the repository's
    assert packaged_grid_data_dir().resolve() == (REPO / "grid_data").resolve()


def test_a_folder_named_by_the_environment_is_read_instead(tmp_path, monkeypatch, capsys):
    copy = tmp_path / "grid"
    shutil.copytree(REPO / "grid_data", copy, ignore=shutil.ignore_patterns("__pycache__"))
    trace = copy / "zones" / "FR_2020.parquet"
    frame = load_zone("FR", 2020)
    doubled = frame.mul(2.0).rename("lifecycle_g_per_kwh").to_frame()
    doubled["direct_g_per_kwh"] = doubled["lifecycle_g_per_kwh"]
    doubled.reset_index().to_parquet(trace)
    monkeypatch.setenv(GRID_DATA_ENV, str(copy))
    assert load_zone("FR", 2020).iloc[0] == pytest.approx(2.0 * frame.iloc[0])
    code, out = run_cli(
        ["run", str(REPO / "scenarios/quickstart.toml"), "--out", str(tmp_path / "o"), *SHORT],
        capsys,
    )
    assert code == 0, out.err
    assert json.loads((tmp_path / "o" / "meta.json").read_text())["grid_data"] == str(copy)


def test_a_grid_data_folder_that_does_not_exist_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRID_DATA_ENV, str(tmp_path / "nowhere"))
    code, out = run_cli(["run", str(REPO / "scenarios/quickstart.toml"), *SHORT], capsys)
    assert code == 2
    line = f"sites[0].carbon.zone: {GRID_DATA_ENV}={tmp_path / 'nowhere'}: no such folder"
    assert out.err.strip() == f"error: {line}"


def test_meta_json_records_the_versions_of_the_numerical_libraries(tmp_path, capsys):
    code, out = run_cli(
        ["run", str(REPO / "scenarios/quickstart.toml"), "--out", str(tmp_path), *SHORT], capsys
    )
    assert code == 0, out.err
    meta = json.loads((tmp_path / "meta.json").read_text())
    for name in ("numpy", "pandas", "scipy", "simpy", "pyarrow"):
        assert meta["libraries"][name] == metadata.version(name)
    assert meta["libraries"] == library_versions()
    assert meta["dcsim_version"] == sim.__version__
    assert meta["grid_data"] == "package"


def test_a_sweep_manifest_records_the_library_versions(tmp_path):
    sim.sweep(
        REPO / "scenarios/quickstart.toml",
        grid={"policy": ["run_now"]},
        seeds=[0],
        overrides=["duration_h=24", "demand_response=[]"],
        out=tmp_path,
    )
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["libraries"] == library_versions()


def test_the_git_revision_is_only_that_of_dcsim_s_own_checkout(tmp_path, monkeypatch):
    if (REPO / ".git").exists():
        assert provenance.git_revision() is not None
    # an installed dcsim whose environment lies inside some other repository
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inside = tmp_path / "venv" / "site-packages" / "sim"
    inside.mkdir(parents=True)
    monkeypatch.setattr(provenance, "_PACKAGE_DIR", inside)
    assert provenance.git_revision() is None


def test_the_wheel_check_runs_in_ci():
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/wheel-check" in ci
    assert Path(REPO / "scripts" / "wheel-check").is_file()


def test_the_build_compiles_with_the_locked_mypy():
    """The build's mypyc (setup.py) is the mypy of constraints.txt, so an install compiles
    the iteration level with the version CI checks the types with: pip's constraints do
    not reach the isolated build environment, so pyproject.toml pins it itself."""
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    locked = re.search(r"^mypy==(\S+)$", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    assert locked, "constraints.txt pins no mypy"
    assert f"mypy=={locked.group(1)}" in build
