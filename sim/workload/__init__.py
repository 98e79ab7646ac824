"""The jobs of a run: a columnar `JobTable`, a synthetic generator, the native job-file
loader, and importers for public GPU-cluster traces.

`build_jobs` picks the source of the scenario's `[workload]`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from sim.config.sites import Site
from sim.config.workload import Workload
from sim.errors import ScenarioError
from sim.workload.native import load_job_file
from sim.workload.synthetic import generate_synthetic
from sim.workload.table import (
    COLUMNS,
    MAX_MASK_SITES,
    OPTIONAL_DEFAULTS,
    REQUIRED_COLUMNS,
    JobTable,
    mask_sites,
    site_mask,
)

__all__ = [
    "COLUMNS",
    "OPTIONAL_DEFAULTS",
    "REQUIRED_COLUMNS",
    "JobTable",
    "apply_residency",
    "build_jobs",
    "generate_synthetic",
    "load_job_file",
]


def build_jobs(
    wl: Workload,
    sites: Sequence[Site],
    start: datetime,
    duration_h: float,
    seed: int,
    rng: np.random.Generator,
) -> JobTable:
    """The jobs of the scenario's `[workload]` `wl` for a run of `duration_h` from `start`
    on its `sites`: generated from `rng` (synthetic) or read from its job file (`seed`: the
    scenario's, as `load_job_file` takes it).

    `rng` is the run's dedicated workload stream; a job file does not use it.
    """
    names = [s.name for s in sites]
    if not wl.has_jobs:
        return JobTable.empty()
    if wl.synthetic is not None:
        jobs = generate_synthetic(wl.synthetic, names, duration_h * 3600.0, rng, start=start)
    else:
        assert wl.file is not None  # the schema guarantees exactly one source
        jobs = load_job_file(wl.file, sites, start, duration_h, seed, wl.oversized)
    return apply_residency(jobs, wl.residency, names)


def apply_residency(
    jobs: JobTable, residency: Mapping[str, list[str]] | None, names: list[str]
) -> JobTable:
    """`jobs` with the scenario's `workload.residency` applied (`names`: its sites' names):
    each job's `allowed_sites` narrowed to the sites its origin's entry lists. A job left
    with no site is a `ScenarioError`."""
    if not residency or len(jobs) == 0:
        return jobs
    if len(names) > MAX_MASK_SITES:
        raise ScenarioError(
            f"workload.residency: supported for up to {MAX_MASK_SITES} sites, "
            f"the scenario has {len(names)}"
        )
    by_origin = np.array(
        [site_mask([names.index(s) for s in residency.get(name, names)]) for name in names],
        dtype=np.int64,
    )
    allowed = jobs.allowed_sites & by_origin[jobs.origin_site]
    if np.any(allowed == 0):
        j = int(np.flatnonzero(allowed == 0)[0])
        origin = names[jobs.origin_site[j]]
        raise ScenarioError(
            f"job {jobs.job_id[j]}: its allowed_sites "
            f"{list(mask_sites(int(jobs.allowed_sites[j]), names))} and "
            f"workload.residency.{origin} {residency[origin]} have no site in common"
        )
    return dataclasses.replace(jobs, allowed_sites=allowed)
