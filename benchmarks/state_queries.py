"""What each state query costs a policy: microseconds per call, measured inside a real run.

Runs the quickstart (three sites, a week) with the WAN of the space-time study under
`run_now`, and at the first decision after `--at-h` hours (a busy cluster) times every
query of `sim.api.SystemState` and `JobView` with `timeit`, on the jobs and sites of
that moment. Prints a Markdown table (docs/writing-a-policy.md carries it).

    python benchmarks/state_queries.py [--at-h 48] [--repeat 5]

Times are medians over `--repeat` timeit rounds; absolute microseconds depend on the
machine, their ratios do not much.
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path

import sim
from policies.run_now import RunNow
from sim.api import Action, SystemState

REPO = Path(__file__).resolve().parents[1]
WAN = 'wan={topology="europe"}'
"""The quickstart's sites on the European backbone, so transfer queries have routes."""


def queries(state: SystemState) -> dict[str, Callable[[], object]]:
    """The calls to time, on a running job, a pending one (or the running one) and two sites."""
    running = state.running[0]
    job = state.pending[0] if state.pending else running
    here, there = state.sites[0], state.sites[-1]
    model = state.gpu_models(here)[0]
    mark = state.pending_mark - 1
    return {
        "`now_s`": lambda: state.now_s,
        "`len(pending)`, `len(running)`": lambda: (len(state.pending), len(state.running)),
        "iterate `running` (per job)": lambda: sum(1 for _ in state.running),
        "a `JobView` field (`job.gpus`)": lambda: job.gpus,
        "`job.remaining_gpu_h`": lambda: job.remaining_gpu_h,
        "`free_gpus(site)`": lambda: state.free_gpus(here),
        "`carbon_intensity(site)`": lambda: state.carbon_intensity(here),
        "`forecast(site, 24 h)`": lambda: state.forecast(here, 24 * 3600.0),
        "`forecast(site, 72 h)`": lambda: state.forecast(here, 72 * 3600.0),
        "`site_power_kw(site)`": lambda: state.site_power_kw(here),
        "`operating_point(model, profile, cap)`": lambda: state.operating_point(
            model, "mixed", 250.0
        ),
        "`pending_since(pending_mark - 1)`": lambda: state.pending_since(mark),
        "`estimate(job, site)`": lambda: state.estimate(job, there),
        "`runtime_s(job, site)`": lambda: state.runtime_s(job, there),
        "`runtime_version(site)`": lambda: state.runtime_version(here),
        "`forecast_version(site)`": lambda: state.forecast_version(here),
        "`power_delta_w(job)`": lambda: state.power_delta_w(job, site=here),
        "`transfer_cost(src, dst, 50 GB)`": lambda: state.transfer_cost(here, there, 50.0),
        "`migration_cost(running job, site)`": lambda: state.migration_cost(running, there),
        "`expected_ends(site, model)`": lambda: state.expected_ends(here, model),
        "`demand_response()`": lambda: state.demand_response(),
    }


class Probe(RunNow):
    """`run_now`, which times the state queries once, at its first decision after `at_s`."""

    def __init__(self, at_s: float, repeat: int):
        super().__init__()
        self.at_s, self.repeat = at_s, repeat
        self.rows: list[tuple[str, float, str]] = []

    def decide(self, state: SystemState) -> list[Action]:
        if not self.rows and state.now_s >= self.at_s and state.running:
            self.rows = [(name, *self._time(call), "") for name, call in queries(state).items()]
            per_job = len(state.running)
            name, us, _ = self.rows[2]
            self.rows[2] = (name, us / per_job, f"{per_job} running jobs")
        return super().decide(state)

    def _time(self, call: Callable[[], object]) -> tuple[float]:
        timer = timeit.Timer(call)
        number, _ = timer.autorange()
        rounds = timer.repeat(repeat=self.repeat, number=number)
        return (statistics.median(rounds) / number * 1e6,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at-h", type=float, default=48.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scenario = sim.load_scenario(REPO / "scenarios" / "quickstart.toml", [WAN])
    probe = Probe(args.at_h * 3600.0, args.repeat)
    sim.simulate(scenario, probe)
    print("| query | µs per call | note |")
    print("|---|---:|---|")
    for name, us, note in probe.rows:
        print(f"| {name} | {us:,.2f} | {note} |")


if __name__ == "__main__":
    main()
