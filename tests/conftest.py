"""Shared builders: small scenarios written as dicts, job files in the native format."""

from __future__ import annotations

import copy
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.api import OnsiteReading
from sim.config.loading import scenario_from_dict
from sim.config.scenario import Scenario
from sim.grid import CarbonSignal, signal_for_site
from sim.network import Wan
from sim.workload import JobTable, load_job_file

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]

BASE = {
    "name": "test",
    "seed": 1,
    "start": "2020-06-01T00:00:00Z",
    "duration_h": 24.0,
    "sites": [
        {
            "name": "a",
            "lat": 50.1,
            "lon": 8.7,
            "pue": 1.5,
            "host_w_per_gpu": 40.0,
            "carbon": {"constant_g_per_kwh": 300.0},
            "gpus": [{"model": "A100-80GB", "count": 4}],
        }
    ],
    "workload": {
        "synthetic": {"arrival_rate_per_h": 1.0, "duration": {"dist": "exponential", "mean_h": 1.0}}
    },
}


SMALL_SCENARIO_TOML = """
name = "small"
start = 2020-06-01T00:00:00Z
duration_h = 24

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
carbon = { constant_g_per_kwh = 300 }
gpus = [{ model = "A100-80GB", count = 8 }]

[workload.synthetic]
arrival_rate_per_h = 2
duration = { dist = "exponential", mean_h = 1 }
"""
"""A valid one-site scenario file, for tests that damage it or run a policy on it."""


def site(**changes) -> dict:
    """The base site (A100-80GB x 4, PUE 1.5, host 40 W/GPU, 300 g/kWh) with `changes`."""
    return {**copy.deepcopy(BASE["sites"][0]), **changes}


def server_site(**changes) -> dict:
    """`site(**changes)` without `host_w_per_gpu`: its pools of servers draw their catalog
    host power (docs/servers.md, "Host power in a run")."""
    keys = site(**changes)
    del keys["host_w_per_gpu"]
    return keys


def write_jobs(path: Path, jobs: list[dict]) -> Path:
    """Write jobs in the native CSV format; missing optional columns take defaults."""
    pd.DataFrame(jobs).to_csv(path, index=False)
    return path


def jobs_of(gpus: list[int], work_gpu_h: float, checkpoint_gb: float = 0.0) -> list[dict]:
    """Compute-bound jobs submitted at 0, one per GPU count (A100-80GB: 1 reference GPU-h
    per GPU-hour)."""
    return [
        {
            "job_id": f"j{i}",
            "submit_time": 0,
            "gpus": g,
            "work_gpu_h": work_gpu_h,
            "profile": "compute-bound",
            "checkpoint_gb": checkpoint_gb,
        }
        for i, g in enumerate(gpus)
    ]


def trace_file(tmp_path: Path, name: str, text: str) -> dict:
    """`{"trace": path}` of a trace `name` in `tmp_path` holding `text` (dedented)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return {"trace": str(path)}


def onsite_reading(**changes) -> OnsiteReading:
    """A reading of site "a" (`SystemState.onsite`) with `changes`: no generation, a 5 kW
    load, a 25 kWh / 5 kW battery at 0.2 (bounds 0.1..0.9, efficiencies 0.9) on
    self-consumption, no connection limits."""
    values = {
        "site": "a",
        "generation_kw": 0.0,
        "load_kw": 5.0,
        "battery_kwh": 5.0,
        "battery_soc": 0.2,
        "battery_capacity_kwh": 25.0,
        "battery_soc_min": 0.1,
        "battery_soc_max": 0.9,
        "battery_power_kw": 5.0,
        "battery_charge_efficiency": 0.9,
        "battery_discharge_efficiency": 0.9,
        "battery_setpoint_kw": None,
        "battery_import_cap_kw": None,
        "month_peak_import_kw": None,
        "import_limit_kw": np.inf,
        "export_limit_kw": np.inf,
        "over_limit": "refuse",
    }
    return OnsiteReading(**{**values, **changes})


def generation_forecast_state(generation_kw: list[float]):
    """A stand-in state at 0 s whose on-site generation forecast is hourly `generation_kw`
    (kW; `SystemState.onsite_forecast`)."""
    times = np.arange(len(generation_kw)) * 3600.0
    return types.SimpleNamespace(
        now_s=0.0, onsite_forecast=lambda site, horizon_s: (times, np.array(generation_kw))
    )


def make_scenario(
    tmp_path: Path | None = None, jobs: list[dict] | None = None, **overrides
) -> Scenario:
    """BASE with top-level keys replaced by `overrides`; `jobs` become a job file."""
    raw = copy.deepcopy(BASE)
    raw.update(copy.deepcopy(overrides))
    if jobs is not None:
        assert tmp_path is not None
        raw["workload"] = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs))}
    return scenario_from_dict(raw, source=(tmp_path or Path(".")) / "test.toml")


def scenario_jobs(path: Path | str, scenario: Scenario) -> JobTable:
    """The job file at `path` read for `scenario` (its sites, run, seed and `oversized`)."""
    return load_job_file(
        path,
        scenario.sites,
        scenario.start,
        scenario.duration_h,
        scenario.seed,
        scenario.workload.oversized,
    )


def site_signal(scenario: Scenario, index: int) -> CarbonSignal:
    """The carbon signal `scenario.sites[index]` is charged on, over the whole run."""
    site = scenario.sites[index]
    return signal_for_site(site, index, scenario.start, scenario.horizon_s, scenario.years)


def scenario_wan(scenario: Scenario) -> Wan:
    """The WAN of `scenario` (its `[wan]` between its sites)."""
    assert scenario.wan is not None
    return Wan(scenario.wan, scenario.sites, scenario.start, scenario.horizon_s, scenario.years)


def run_demand_peaks(results, timezone: str, interval_min: int = 15) -> list:
    """`interval_peaks_kw` of a run's facility power: (month start, peak kW, month share
    covered) per local calendar month of `timezone`."""
    from sim.market.billing import interval_peaks_kw

    power = results.power
    return interval_peaks_kw(
        power["time_s"].to_numpy(),
        power["facility_w"].to_numpy(),
        results.scenario.horizon_s,
        results.scenario.start,
        timezone,
        interval_min,
    )


def run_cli(args: list[str], capsys):
    """Run `dcsim ARGS` in-process; returns (exit status, captured stdout/stderr)."""
    from sim.cli import main

    argv, sys.argv = sys.argv, ["dcsim", *args]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code
    finally:
        sys.argv = argv
    return code, capsys.readouterr()


def one_line_cli_error(tmp_path, capsys, files: dict[str, str], scenario_extra: str) -> str:
    """`dcsim run` on the small scenario with `scenario_extra` (TOML) added, beside `files`
    (name -> text) in `tmp_path`: checks that it fails with exit status 2 and one line on
    stderr, and returns that line."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "study.toml"
    path.write_text(SMALL_SCENARIO_TOML + "\n" + scenario_extra + "\n")
    code, out = run_cli(["run", str(path)], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    return line


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (checkout without ../shared)")
    return SHARED_DATA


@pytest.fixture
def catalog_restored():
    """Scenario GPU models join the process-wide catalog; take them out again."""
    from sim.models.hardware import GPU_CATALOG

    before = set(GPU_CATALOG)
    yield
    for gid in set(GPU_CATALOG) - before:
        del GPU_CATALOG[gid]
