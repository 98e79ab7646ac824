"""The output contract of a run: what it writes and what can be computed from it, importing
no engine (the engine assembles results: `sim.engine.results.build_results`).

- files.py: `Results` (the tables, the summary, the scenario, meta), `save` / `load`,
  each file written atomically; `FILES`, `OPTIONAL_FILES`.
- events.py: the events file's `job_index` (a job as its row in the jobs table) and its
  decoding into job ids on load.
- columns.py: `SUMMARY_KEYS`, `JOB_COLUMNS` (their order), `TERMINAL_STATES`.
- parts.py: `ResultParts`, what a finished run's components fill.
- metrics.py: metrics as pure functions over the tables (energy, carbon, cost,
  demand response, fairness).
- provenance.py: `package_version`, `git_revision`, `library_versions`.
"""

from sim.results.columns import JOB_COLUMNS, SUMMARY_KEYS, TERMINAL_STATES
from sim.results.files import FILES, OPTIONAL_FILES, Results
from sim.results.metrics import (
    busy_gpu_s,
    deadline_misses,
    demand_response_metrics,
    demand_response_table,
    dr_job_metrics,
    ideal_runtime_s,
    jain_index,
    operational_carbon_over_time_kg,
    site_energy_cost,
    site_energy_kwh,
    site_operational_carbon_kg,
)
from sim.results.parts import ResultParts
from sim.results.provenance import git_revision, library_versions, package_version

__all__ = [
    "FILES",
    "JOB_COLUMNS",
    "OPTIONAL_FILES",
    "SUMMARY_KEYS",
    "TERMINAL_STATES",
    "ResultParts",
    "Results",
    "busy_gpu_s",
    "deadline_misses",
    "demand_response_metrics",
    "demand_response_table",
    "dr_job_metrics",
    "git_revision",
    "library_versions",
    "ideal_runtime_s",
    "jain_index",
    "operational_carbon_over_time_kg",
    "package_version",
    "site_energy_cost",
    "site_energy_kwh",
    "site_operational_carbon_kg",
]
