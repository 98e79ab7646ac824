"""A run that records, per job, the work it did: the integral of its progress rate over its
run segments (a conservation check independent of the engine's own bookkeeping)."""

from __future__ import annotations

import pytest

import sim
from sim.engine.runs import Runs


def run_recording_work(
    scenario, policy, monkeypatch: pytest.MonkeyPatch
) -> tuple[sim.Results, dict[str, float]]:
    """Run, recording per job id the reference GPU-seconds of progress over its segments."""
    done: dict[int, float] = {}
    close = Runs.close_segment

    def recording(self: Runs, j: int, now: float) -> None:
        run = self.live[j]
        done[j] = done.get(j, 0.0) + run.rate * max(0.0, now - run.seg_start_s)
        close(self, j, now)

    monkeypatch.setattr(Runs, "close_segment", recording)
    r = sim.simulate(scenario, policy)
    ids = r.jobs["job_id"].tolist()  # in engine order
    return r, {ids[j]: s for j, s in done.items()}
