"""What a demand-response policy remembers across the decisions of one run."""

from __future__ import annotations

from sim.api import JobView, SystemState

__all__ = ["Memory"]


class Memory:
    """The caps to restore after events and the jobs paused, for the run of `state`."""

    __slots__ = ("paused", "saved", "state")

    def __init__(self, state: SystemState | None):
        self.state = state
        self.saved: dict[JobView, float | None] = {}
        """Own cap of each job touched by an event, to restore after it."""
        self.paused: dict[JobView, tuple[str, str, float | None]] = {}
        """Jobs this policy suspended: (site, GPU model) to resume on, own cap to resume with."""
