"""`ResultParts`: what a finished run's components write, before the engine assembles it
into `Results` (`sim.engine.results.build_results`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ResultParts"]


@dataclass(slots=True)
class ResultParts:
    """What a finished run's components write, assembled by `sim.engine.results.build_results`.

    `power` (the site power step functions) and `events` (the event log) are built before
    the hooks run; components add to the other three, in the core's component order, so a
    component may read what an earlier one wrote (the demand-response meter reads the
    runs' `slowdown`)."""

    power: pd.DataFrame
    events: pd.DataFrame
    job_columns: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-job result columns, one value per job in the workload's order."""
    summary: dict[str, Any] = field(default_factory=dict)
    """Summary metrics, names with units (`sim.results.SUMMARY_KEYS` orders them)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    """Further result tables by name (`dr_events`)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Entries for meta.json (how inputs were read)."""
