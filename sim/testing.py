"""Hand-built states for unit-testing a policy: `PolicyHarness`.

A harness is a real engine, built exactly as `simulate` builds one, on a scenario whose
own policy does nothing; the test drives it by hand: advance time (jobs arrive as the
workload says), apply actions (checked exactly as in a run, so an invalid action raises
`PolicyError`), and hand `harness.state` to the policy under test::

    h = PolicyHarness(scenario)
    h.advance(3600.0)                        # jobs submitted by 1 h are pending
    actions = MyPolicy().decide(h.state)
    h.apply(actions)                         # raises PolicyError on an invalid action
    assert [a.job.id for a in actions] == ["j1"]

`h.job("j1")` is the `JobView` of a job by id; `h.times("j1")` its first start and
completion times; `h.engine` the engine itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sim.api import Action, JobView, Policy, SystemState
from sim.config.scenario import Scenario
from sim.engine.build import build_engine

__all__ = ["PolicyHarness"]


class _Idle(Policy):
    """The harness's own policy: the test decides, by hand."""

    def decide(self, state: SystemState) -> Sequence[Action]:
        return []


class PolicyHarness:
    """A paused simulation of `scenario` whose decisions are made by hand."""

    def __init__(self, scenario: Scenario):
        self.engine = build_engine(scenario, _Idle())
        self.engine.start_processes()
        self.state: SystemState = self.engine.state_view

    @property
    def now_s(self) -> float:
        return self.engine.env.now

    def advance(self, until_s: float) -> PolicyHarness:
        """Run the simulation to `until_s` (s since the scenario start): arrivals, job
        completions and event starts up to and at `until_s` happen; no policy decides."""
        env = self.engine.env
        if until_s > env.now:
            env.run(until=until_s)
        while env.peek() <= until_s:
            env.step()
        return self

    def apply(self, actions: Iterable[Action]) -> PolicyHarness:
        """Apply actions now, checked as in a run (PolicyError if one is invalid)."""
        for action in list(actions):
            self.engine.apply(action)
        return self

    def job(self, job_id: str) -> JobView:
        """The view of the job with id `job_id`."""
        for j, jid in enumerate(self.engine.jobs.job_id):
            if jid == job_id:
                return JobView(self.engine.queries, j)
        raise KeyError(f"no job {job_id!r}")

    def times(self, job_id: str) -> tuple[float, float]:
        """(first start, completion) of the job with id `job_id`, s since the scenario
        start; NaN for what has not happened yet."""
        j = self.job(job_id).index
        book = self.engine.book
        return book.start_s[j], book.end_s[j]
