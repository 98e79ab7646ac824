"""`carbon_aware_cap` looks for sites whose capping level changed only once a cached level
may have run out (the earliest end of the forecast steps they were taken in): the same
`SetCap`s, in the same order, as looking at every decision."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

import sim
from policies.chain import Chain
from policies.power_capping import CarbonAwareCap
from policies.space_shifting import SpaceTime
from tests.golden.cases import SCENARIOS


class CarbonAwareCapRecorded(CarbonAwareCap):
    """`carbon_aware_cap` as it is, its re-caps (job index, W) recorded in order."""

    def amend(self, state, actions):
        out = super().amend(state, actions)
        self.recaps: list[tuple[int, float | None]] = getattr(self, "recaps", [])
        self.recaps += [(a.target.index, a.watts) for a in out[len(actions) :]]
        return out


class CarbonAwareCapLookingAlways(CarbonAwareCapRecorded):
    """`carbon_aware_cap` that compares every site's level at every decision."""

    def _recap(self, state, concerned):
        self._recapped_until_s = -math.inf
        return super()._recap(state, concerned)


def twenty_minute_trace(path: Path) -> Path:
    """A trace in 20-minute steps, ten minutes off the hour: its steps end between those of
    the hourly zone traces."""
    times = pd.date_range("2019-06-01 00:10", "2019-06-12", freq="20min", tz="UTC")
    values = np.random.default_rng(3).uniform(50.0, 700.0, len(times))
    pd.DataFrame({"timestamp": times, "carbon_intensity": values}).to_csv(path, index=False)
    return path


def run(cap: CarbonAwareCap, trace: Path) -> sim.Results:
    scenario = sim.load_scenario(
        SCENARIOS / "space_time_study.toml",
        ["duration_h=48", f"sites[4].carbon={{file='{trace}'}}"],
    )
    return sim.simulate(scenario, Chain([SpaceTime(), cap]))


def test_re_caps_are_those_of_looking_at_every_site_at_every_decision(tmp_path):
    trace = twenty_minute_trace(tmp_path / "stockholm.csv")
    always, kept = CarbonAwareCapLookingAlways(), CarbonAwareCapRecorded()
    always_run, kept_run = run(always, trace), run(kept, trace)
    assert len(kept.recaps) > 100
    assert kept.recaps == always.recaps
    assert kept_run.jobs.equals(always_run.jobs)
    assert kept_run.events.equals(always_run.events)
