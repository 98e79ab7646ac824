"""The jobs of a run: a columnar `JobTable`, a synthetic generator, the native job-file
loader, and importers for public GPU-cluster traces.

`build_jobs` picks the source of `scenario.workload`.
"""

from __future__ import annotations

import numpy as np

from sim.scenario import Scenario
from sim.workload.native import load_job_file
from sim.workload.synthetic import generate_synthetic
from sim.workload.table import COLUMNS, OPTIONAL_DEFAULTS, REQUIRED_COLUMNS, JobTable

__all__ = [
    "COLUMNS",
    "OPTIONAL_DEFAULTS",
    "REQUIRED_COLUMNS",
    "JobTable",
    "build_jobs",
    "generate_synthetic",
    "load_job_file",
]


def build_jobs(scenario: Scenario, rng: np.random.Generator) -> JobTable:
    """The jobs of `scenario`: generated from `rng` (synthetic) or read from its job file.

    `rng` is the run's dedicated workload stream; a job file does not use it.
    """
    wl = scenario.workload
    if wl.synthetic is not None:
        return generate_synthetic(
            wl.synthetic, scenario.site_names(), scenario.horizon_s, rng, start=scenario.start
        )
    assert wl.file is not None  # the schema guarantees exactly one source
    return load_job_file(wl.file, scenario)
