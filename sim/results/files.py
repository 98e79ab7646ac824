"""A run's results as files: `Results` (the tables, the summary, the scenario and meta),
its `save` and `load`. Each file is written atomically (`sim.util.atomic`): to a temporary
name, then renamed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sim.config.loading import load_scenario
from sim.config.scenario import Scenario
from sim.results.events import events_for_file, events_from_file
from sim.util.atomic import write_atomic
from sim.util.memory import release_free_memory
from sim.util.parquet import write_parquet

__all__ = ["FILES", "OPTIONAL_FILES", "Results"]

FILES = (
    "summary.json",
    "jobs.parquet",
    "sites.parquet",
    "power.parquet",
    "events.parquet",
    "dr_events.parquet",
    "services.parquet",
    "scenario.toml",
    "meta.json",
)
"""The files every run writes."""
OPTIONAL_FILES = ("requests.parquet", "onsite.parquet", "functions.parquet", "servers.parquet")
"""Files a run writes only when it has them (requests: the request-level fidelity; onsite:
a site with on-site energy; functions: `[functions]`; servers: a pool of servers)."""


@dataclass
class Results:
    """What one run produced. `summary` is a flat dict of metrics, names carrying units;
    a metric with no data (e.g. no job completed) is None."""

    scenario: Scenario
    summary: dict[str, Any]
    jobs: pd.DataFrame
    sites: pd.DataFrame
    """One row per site: GPUs, utilisation, facility energy, operational carbon, the
    effective carbon intensity of its energy (g/kWh), jobs finished or stopped there."""
    power: pd.DataFrame
    events: pd.DataFrame
    dr_events: pd.DataFrame
    """One row per demand-response event: limit, baseline, energy, peak, compliance,
    overshoot, energy shed, rebound peak (see `demand_response_table`)."""
    meta: dict[str, Any]
    services: pd.DataFrame = field(default_factory=pd.DataFrame)
    """One row per inference service and step (`sim.engine.service_results.SERVICE_COLUMNS`)."""
    requests: pd.DataFrame | None = None
    """One row per request of every service (request-level fidelity only; else None)."""
    onsite: pd.DataFrame | None = None
    """One row per site with on-site energy and UTC hour: its energy balance
    (`sim.engine.onsite.ONSITE_COLUMNS`; docs/onsite-energy.md); None without."""
    functions: pd.DataFrame | None = None
    """One row per serverless function invocation (`sim.functions.KeepAliveResult`;
    docs/functions.md); None without `[functions]`."""
    servers: pd.DataFrame | None = None
    """Free GPUs by server after each change, per pool of servers (site, pool, time_s,
    server, free_gpus; docs/placement.md); None in a run without servers."""

    def save(self, out_dir: str | Path) -> Path:
        """Write the result files into `out_dir` (created if needed), each atomically."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _save_table(out / "jobs.parquet", self.jobs)
        _save_table(out / "sites.parquet", self.sites)
        _save_table(out / "power.parquet", self.power)
        _save_table(out / "events.parquet", events_for_file(self.events, self.jobs["job_id"]))
        _save_table(out / "dr_events.parquet", self.dr_events)
        _save_table(out / "services.parquet", self.services)
        if self.requests is not None:
            _save_table(out / "requests.parquet", self.requests)
        if self.onsite is not None:
            _save_table(out / "onsite.parquet", self.onsite)
        if self.functions is not None:
            _save_table(out / "functions.parquet", self.functions)
        if self.servers is not None:
            _save_table(out / "servers.parquet", self.servers)
        write_atomic(out / "scenario.toml", lambda p: p.write_text(self.scenario.to_toml()))
        write_atomic(out / "meta.json", lambda p: p.write_text(json.dumps(self.meta, indent=2)))
        write_atomic(
            out / "summary.json", lambda p: p.write_text(json.dumps(self.summary, indent=2))
        )
        return out

    @classmethod
    def load(cls, out_dir: str | Path) -> Results:
        """Read back what `save` wrote (or an older dcsim did: the events' `job` column is
        decoded from `job_index` or read as written, `sim.results.events`)."""
        d = Path(out_dir)
        jobs = pd.read_parquet(d / "jobs.parquet")
        return cls(
            scenario=load_scenario(d / "scenario.toml"),
            summary=json.loads((d / "summary.json").read_text()),
            jobs=jobs,
            sites=pd.read_parquet(d / "sites.parquet"),
            power=pd.read_parquet(d / "power.parquet"),
            events=events_from_file(pd.read_parquet(d / "events.parquet"), jobs["job_id"]),
            dr_events=pd.read_parquet(d / "dr_events.parquet"),
            meta=json.loads((d / "meta.json").read_text()),
            services=pd.read_parquet(d / "services.parquet")
            if (d / "services.parquet").exists()
            else pd.DataFrame(),
            requests=pd.read_parquet(d / "requests.parquet")
            if (d / "requests.parquet").exists()
            else None,
            onsite=pd.read_parquet(d / "onsite.parquet")
            if (d / "onsite.parquet").exists()
            else None,
            functions=pd.read_parquet(d / "functions.parquet")
            if (d / "functions.parquet").exists()
            else None,
            servers=pd.read_parquet(d / "servers.parquet")
            if (d / "servers.parquet").exists()
            else None,
        )


def _save_table(path: Path, frame: pd.DataFrame) -> None:
    """Write `frame` to the Parquet file `path` atomically, in row groups (`write_parquet`),
    then hand the memory the writer freed back to the OS, so that the next file's
    transient does not stack on this one's (`release_free_memory`)."""
    write_atomic(path, lambda p: write_parquet(frame, p))
    release_free_memory()
