"""`space_time` keeps its GPU bookings from decision to decision (a plan is booked when it
is made and given back once its job has started, or has left pending and deferred) and
answers `Bookings.fits` exactly as the sweep over the running jobs and the plans then
held, rebuilt at every decision, that it used to be."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import sim
from policies.space_shifting import Bookings, Option, SpaceTime
from tests.golden.cases import SCENARIOS


def fits_by_sweep(state, plans: list[tuple[Option, int]], o: Option, gpus: int) -> bool:
    """The specification: `gpus` more GPUs of `o`'s pool never exceed the installed ones
    in [o.start_s, o.end_s), beside its running jobs (until their expected ends) and the
    planned runs (option, GPUs), checked at the start and wherever a count changes."""
    ends, running_gpus = state.expected_ends(o.site, o.gpu_model)
    spans = [(-math.inf, end_s, n) for end_s, n in zip(ends, running_gpus, strict=True)]
    spans += [(p.start_s, p.end_s, n) for p, n in plans if (p.site, p.gpu_model) == key(o)]
    spans = [(a, b, n) for a, b, n in spans if a < o.end_s and b > o.start_s]
    limit = state.total_gpus(o.site)[o.gpu_model] - gpus
    times = [o.start_s] + [t for a, b, _ in spans for t in (a, b) if o.start_s < t < o.end_s]
    return all(sum(n for a, b, n in spans if a <= t < b) <= limit for t in times)


def key(o: Option) -> tuple[str, str]:
    return o.site, o.gpu_model


class SpaceTimeCheckedBySweep(SpaceTime):
    """`space_time` whose every `Bookings.fits` answer is checked against `fits_by_sweep`
    over the plans held when the decision first asked (as it used to rebuild them) and
    those made since."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.answers: list[bool] = []
        self._plans: list[tuple[Option, int]] | None = None

    def decide(self, state):
        self._plans = None
        return super().decide(state)

    def bookings(self, state):
        kept = super().bookings(state)
        if self._plans is None:
            self._plans = [(o, job.gpus) for job, o in self._planned.items()]
        return CheckedBookings(kept, state, self._plans, self.answers)


@dataclass
class CheckedBookings:
    kept: Bookings
    state: object
    plans: list[tuple[Option, int]]
    answers: list[bool]

    def add(self, job, o: Option) -> None:
        self.kept.add(job, o)
        self.plans.append((o, job.gpus))

    def fits(self, o: Option, gpus: int) -> bool:
        answer = self.kept.fits(o, gpus)
        assert answer == fits_by_sweep(self.state, self.plans, o, gpus), o
        self.answers.append(answer)
        return answer


def test_kept_bookings_answer_as_the_sweep_over_rebuilt_plans_throughout_a_run():
    scenario = sim.load_scenario(SCENARIOS / "space_time_study.toml", ["duration_h=48"])
    checked = SpaceTimeCheckedBySweep()
    checked_run = sim.simulate(scenario, checked)
    assert checked.answers.count(True) > 100 and checked.answers.count(False) > 100
    plain_run = sim.simulate(scenario, SpaceTime())
    assert checked_run.jobs.equals(plain_run.jobs)


# --- random sequences of plans --------------------------------------------------------


@dataclass(frozen=True)
class FakeJob:
    name: str
    gpus: int


class FakeState:
    """Two pools of 8 GPUs, each with running jobs that end at set times (and hold GPUs
    that are not free)."""

    POOLS = {("a", "m"): ([50.0, 120.0, 120.0], [2, 3, 1]), ("b", "m"): ([10.0], [4])}

    def expected_ends(self, site: str, gpu_model: str) -> tuple[list[float], list[int]]:
        ends, gpus = self.POOLS[(site, gpu_model)]
        return list(ends), list(gpus)

    def total_gpus(self, site: str) -> dict[str, int]:
        return {"m": 8}

    def free_gpus(self, site: str) -> dict[str, int]:
        return {"m": 8 - sum(self.POOLS[(site, "m")][1])}


def random_option(rng: random.Random) -> Option:
    start_s = float(rng.choice([0, 10, 50, 60, 100, 120, 150]))
    end_s = start_s + float(rng.choice([10, 40, 60, 100]))
    return Option(rng.choice("ab"), "m", start_s, end_s, 0.0)


def test_adding_and_dropping_plans_answers_as_the_sweep_over_the_plans_left():
    rng = random.Random(7)
    state = FakeState()
    kept = Bookings()
    kept.look_at(state)  # type: ignore[arg-type]
    plans: dict[FakeJob, Option] = {}
    answers = []
    for step in range(2000):
        if len(plans) > 6 or (plans and rng.random() < 0.4):
            job = rng.choice(list(plans))
            kept.drop(job, plans.pop(job))  # type: ignore[arg-type]
        else:
            job, o = FakeJob(f"j{step}", rng.randint(1, 4)), random_option(rng)
            kept.add(job, o)  # type: ignore[arg-type]
            plans[job] = o
        o, gpus = random_option(rng), rng.randint(1, 6)
        answer = kept.fits(o, gpus)
        held = [(p, job.gpus) for job, p in plans.items()]
        assert answer == fits_by_sweep(state, held, o, gpus)
        answers.append(answer)
    assert answers.count(True) > 500 and answers.count(False) > 500
