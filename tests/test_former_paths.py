"""Modules that moved into the floors of `sim/` keep their former import paths: the same module
objects, a DeprecationWarning naming the new path, and nothing for the documented names
`sim.stats` and `sim.plots`."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import sim
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("former", "now"),
    [
        ("sim.scenario", "sim.config"),
        ("sim.run", "sim.engine.build"),
        ("sim.mig", "sim.models.mig"),
    ],
)
def test_a_former_path_is_the_module_at_its_new_place_and_says_so(former, now):
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({former!r})\n"
        f"new = importlib.import_module({now!r})\n"
        "assert old is new and new.__spec__.name == new.__name__\n"
        "print(*[str(w.message) for w in caught if w.category is DeprecationWarning], sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{former} is deprecated: import {now}"


def test_names_import_from_a_former_path():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sim.scenario import Scenario, load_scenario

    assert Scenario is sim.Scenario and load_scenario is sim.load_scenario


@pytest.mark.parametrize(("name", "now"), [("sim.stats", "sim.study.stats")])
def test_documented_names_do_not_warn(name, now):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert importlib.import_module(name) is importlib.import_module(now)
