"""`scripts/study_onsite_energy.py`'s re-solve: a size's balance solved on another size's
run (the power table does not depend on the equipment without a policy directing it) is
the engine's own result for that size, bit for bit; and the cheapest size per target."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import sim
from tests.conftest import REPO

sys.path.insert(0, str(REPO))
from scripts.study_onsite_energy import SCENARIO, at_size, cheapest, resolve  # noqa: E402

KEYS = ("cfe_score", "grid_import_kwh", "carbon_operational_kg", "onsite_used_kwh")


@pytest.fixture(scope="module")
def short():
    return sim.load_scenario(
        SCENARIO, ["start=2019-03-01T00:00:00Z", "duration_h=72", "workload.synthetic.max_jobs=120"]
    )


@pytest.mark.parametrize("size", [(100.0, 0.0, 0.0), (0.0, 200.0, 400.0), (400.0, 50.0, 50.0)])
def test_a_size_re_solved_on_another_sizes_run_is_that_sizes_run(short, size):
    run = sim.simulate(at_size(short, 200.0, 100.0, 200.0), policy="run_now")
    full = sim.simulate(at_size(short, *size), policy="run_now")
    equipment_kg = full.summary["carbon_embodied_kg"] - run.summary["carbon_embodied_kg"]
    summary, hourly = resolve(run, at_size(short, *size))
    for key in KEYS:
        assert summary[key] == full.summary[key], key
    pd.testing.assert_frame_equal(hourly, full.onsite)
    # the re-solve's embodied carbon is the equipment's alone
    baseline = resolve(run, at_size(short, 200.0, 100.0, 200.0))[0]["carbon_embodied_kg"]
    assert summary["carbon_embodied_kg"] - baseline == pytest.approx(equipment_kg, rel=1e-12)


def test_the_cheapest_size_reaching_a_target_and_an_unreached_one():
    table = pd.DataFrame(
        {
            "setting": ["a"] * 3,
            "pv_kwp": [0.0, 100.0, 400.0],
            "wind_kw": [0.0, 0.0, 0.0],
            "battery_kwh": [0.0, 0.0, 0.0],
            "cfe_score": [0.5, 0.92, 0.95],
            "carbon_total_kg": [10.0, 8.0, 9.0],
        }
    )
    best = cheapest(table, (0.9, 0.99)).set_index("target")
    assert best.loc[0.9, "pv_kwp"] == 100.0 and best.loc[0.9, "reaching"] == 2
    assert best.loc[0.99, "reaching"] == 0 and pd.isna(best.loc[0.99, "pv_kwp"])
