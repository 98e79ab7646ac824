"""`Bookings`: GPUs per (site, GPU model) over time, the running jobs until their expected
ends and the runs planned for later, so that planned starts fit the installed GPUs
(`space_time`, and the time-shifters with `capacity_aware = true`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sim.api import JobView, SystemState

__all__ = ["Bookings", "PlannedRun", "Run"]


class PlannedRun(Protocol):
    """A job's run planned on `site`'s `gpu_model` GPUs over [start_s, end_s), s."""

    @property
    def site(self) -> str: ...
    @property
    def gpu_model(self) -> str: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Run:
    """A `PlannedRun` and nothing more: on `site`'s `gpu_model` GPUs over [start_s, end_s), s."""

    site: str
    gpu_model: str
    start_s: float
    end_s: float


class Bookings:
    """GPUs per (site, model) over time as one decision sees them: running jobs until their
    expected end, and the jobs planned to start later, so that planned starts do not pile
    more jobs onto a site's clean hours than it has GPUs. The plans are kept across
    decisions (`add`, `drop`); the running jobs are those of the decision last given to
    `look_at`, a pool's read (`state.expected_ends`) only when a plan first asks about it."""

    def __init__(self) -> None:
        self._state: SystemState | None = None
        self._spans: dict[tuple[str, str], dict[JobView, tuple[float, float, int]]] = {}
        """Planned starts per pool: job -> (start_s, end_s, GPUs)."""
        self._running: dict[tuple[str, str], tuple[list[float], list[int]]] = {}

    def look_at(self, state: SystemState) -> None:
        """See the running jobs of `state`'s decision from now on."""
        self._state = state
        self._running.clear()

    def add(self, job: JobView, o: PlannedRun) -> None:
        """Book `job`'s GPUs for its planned run `o`."""
        self._spans.setdefault((o.site, o.gpu_model), {})[job] = (o.start_s, o.end_s, job.gpus)

    def drop(self, job: JobView, o: PlannedRun) -> None:
        """Give back what `add(job, o)` booked."""
        del self._spans[(o.site, o.gpu_model)][job]

    def fits(self, o: PlannedRun, gpus: int) -> bool:
        """Whether `gpus` more GPUs of `o.gpu_model` at `o.site` stay within the installed ones
        throughout [o.start_s, o.end_s). The pool's running jobs are read only if the GPUs
        free now could not hold these and every plan overlapping the span at once: running
        jobs hold GPUs that are not free, so they never take more than the others."""
        start, end = o.start_s, o.end_s
        key = (o.site, o.gpu_model)
        overlapping = [s for s in self._spans.get(key, {}).values() if s[1] > start and s[0] < end]
        state = self._state
        assert state is not None, "look_at a decision first"
        if gpus + sum(n for _, _, n in overlapping) <= state.free_gpus(o.site)[o.gpu_model]:
            return True
        return self._swept_fits(state, key, start, end, gpus, overlapping)

    def _swept_fits(
        self,
        state: SystemState,
        key: tuple[str, str],
        start: float,
        end: float,
        gpus: int,
        overlapping: list[tuple[float, float, int]],
    ) -> bool:
        """`fits`, by sweeping the pool's GPUs in use over [start, end) s: its running jobs
        until their expected ends and the `overlapping` plans."""
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = state.expected_ends(*key)
        busy = gpus - state.total_gpus(key[0])[key[1]]  # > 0: over the installed
        steps = []  # (time, GPUs taken (+) or given back (-)) inside (start, end)
        for b, n in zip(*running, strict=True):
            if b > start:
                busy += n
                if b < end:
                    steps.append((b, -n))
        for a, b, n in overlapping:
            if a <= start:
                busy += n
            else:
                steps.append((a, n))
            if b < end:
                steps.append((b, -n))
        if busy > 0:
            return False
        for _, n in sorted(steps):  # at equal times, releases (-n) sort before starts
            busy += n
            if busy > 0:
                return False
        return True
