"""The job lifecycle: arrivals, the pending, running and suspended sets the policy sees,
deferrals, rejections, and each job's terminal state.

States: not yet submitted -> pending <-> deferred -> running <-> suspended, ending
completed or rejected; at the horizon every other state is "unfinished". Every job ends in
exactly one terminal state, so the counts add up to the jobs submitted.
"""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component
from sim.results import TERMINAL_STATES, ResultParts, deadline_misses
from sim.workload.table import gpu_model_names

if TYPE_CHECKING:
    from sim.engine.component import Core
    from sim.engine.fleet import Fleet

__all__ = [
    "COMPLETED",
    "DEFERRED",
    "PENDING",
    "REJECTED",
    "RUNNING",
    "STATE_NAMES",
    "SUBMITTED_LATER",
    "SUSPENDED",
    "JobBook",
]

SUBMITTED_LATER, PENDING, DEFERRED, RUNNING, SUSPENDED, COMPLETED, REJECTED = range(7)
STATE_NAMES = (
    "not submitted",
    "pending",
    "deferred",
    "running",
    "suspended",
    "completed",
    "rejected",
)
_OPEN = (PENDING, DEFERRED, RUNNING, SUSPENDED)


class JobBook(Component):
    """Each job's state, the ordered job sets, deferrals and the lifecycle's times."""

    name = "book"
    uses = ("fleet",)

    __slots__ = (
        "_core",
        "_fleet",
        "state",
        "pending",
        "pending_count",
        "running",
        "suspended",
        "deferred_until",
        "reason",
        "allowed",
        "start_s",
        "end_s",
        "vc_quota",
        "vc_running_gpus",
        "_vc",
        "site_of",
        "_metered",
    )

    def __init__(self, core: Core, *, fleet: Fleet):
        self._core = core
        self._fleet = fleet
        n = len(core.jobs)
        self.state = array("b", [SUBMITTED_LATER]) * n
        """Per job, one of the state codes above."""
        # Ordered job sets (dicts as insertion-ordered sets), viewed by the policy.
        self.pending: dict[int, int] = {}
        """Pending jobs -> when each became pending, counted in `pending_count` (so the
        values increase along the dict's order)."""
        self.pending_count = 0
        """How many times a job has become pending so far (arrival or deferral expiry)."""
        self.running: dict[int, None] = {}
        self.suspended: dict[int, None] = {}
        self.deferred_until: dict[int, float] = {}
        """Deferred jobs: the time each becomes pending again, s."""
        self.reason: dict[int, str] = {}
        """Rejected jobs: the reason given."""
        self.allowed: list[int] = core.jobs.allowed_sites.tolist()
        """Per job, bit mask of the sites it may run on (data residency)."""
        self.start_s = array("d", [math.nan]) * n
        """First start, s (NaN: never started)."""
        self.end_s = array("d", [math.nan]) * n
        """Completion, s (NaN: not completed)."""
        config = core.scenario.virtual_clusters
        self.vc_quota: dict[str, int] = {} if config is None else dict(config.quota_gpus)
        """Virtual cluster -> the most GPUs its running jobs may hold (`[virtual_clusters]`)."""
        self.vc_running_gpus: dict[str, int] = dict.fromkeys(self.vc_quota, 0)
        """Virtual cluster with a quota -> GPUs its running jobs hold now."""
        self._vc: list[str] = core.jobs.vc.tolist() if self.vc_quota else []
        self.site_of = array("h", [-1]) * n
        """The index of the site the job last ran on (-1: never ran)."""
        self._metered = fleet.has_servers
        """Queue waits are metered for fragmentation (`Fleet.queued`)."""

    def start(self) -> None:
        self._core.env.process(self._arrivals())

    def _arrivals(self):
        core = self._core
        env = core.env
        gpus = core.jobs.gpus.tolist()  # as submitted: a `Start` may resize a pending job
        largest = self._fleet.largest_pool
        models = core.jobs.allowed_gpu_models.tolist()
        slices = core.jobs.mig_profile.tolist()
        largest_of: dict[str, int] = {}  # per `allowed_gpu_models` entry, its largest pool
        for j, t in enumerate(core.jobs.submit_s.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            core.events.append(t, "submit", j)
            if slices[j]:  # a MIG job needs a slice of its profile, not whole GPUs
                if not self._offers_slice(slices[j], models[j]):
                    self.reject(j, f"needs a {slices[j]} MIG slice; no partitioned pool offers one")
                    continue
            elif gpus[j] > largest:
                self.reject(j, f"needs {gpus[j]} GPUs; the largest pool has {largest}")
                continue
            elif models[j]:
                most = largest_of.get(models[j])
                if most is None:
                    most = largest_of[models[j]] = self._largest_pool_of(models[j])
                if gpus[j] > most:
                    self.reject(
                        j, f"needs {gpus[j]} GPUs of {models[j]}; the largest pool has {most}"
                    )
                    continue
            self._make_pending(j)
            core.request_decision()

    def _offers_slice(self, profile: str, models: str) -> bool:
        """Whether a partitioned pool of the scenario (of a model an `allowed_gpu_models`
        entry names, "" for any) has `profile` slices in its layout."""
        names = gpu_model_names(models)
        return any(
            p.mig is not None and p.mig.has(profile) and (not names or p.model in names)
            for s in self._fleet.sites
            for p in s.pools
        )

    def _largest_pool_of(self, models: str) -> int:
        """GPUs of the largest pool of whole GPUs of any site whose model an
        `allowed_gpu_models` entry names (0: the scenario has none of them)."""
        names = gpu_model_names(models)
        sites = self._fleet.sites
        pools = (p.count for s in sites for p in s.pools if p.model in names and p.mig is None)
        return max(pools, default=0)

    def _make_pending(self, j: int) -> None:
        self.state[j] = PENDING
        self.pending[j] = self.pending_count
        self.pending_count += 1
        if self._metered:
            self._fleet.queued(j)

    def _unqueue(self, j: int) -> None:
        """`j` is out of the pending set (if it was there)."""
        if self.pending.pop(j, None) is not None and self._metered:
            self._fleet.dequeued(j)

    def pending_since(self, mark: int) -> list[int]:
        """The pending jobs that became pending at or after `mark` (a `pending_count`), in
        queue order: O(those jobs)."""
        newer: list[int] = []
        for j, count in reversed(self.pending.items()):
            if count < mark:
                break
            newer.append(j)
        newer.reverse()
        return newer

    def leave_queue(self, j: int) -> None:
        """`j` starts: out of the pending set, its deferral forgotten."""
        self.deferred_until.pop(j, None)
        self._unqueue(j)

    def run(self, j: int, now_s: float, site: int, gpus: int) -> None:
        """`j` starts, resumes or moves to site index `site` on `gpus` GPUs: it is running
        (first start time kept)."""
        self.state[j] = RUNNING
        self.running[j] = None
        self.site_of[j] = site
        if math.isnan(self.start_s[j]):
            self.start_s[j] = now_s
        self._count_vc(j, gpus)

    def stop_running(self, j: int, gpus: int) -> None:
        """`j`, running on `gpus` GPUs, no longer computes (suspended, moving, completed):
        out of the running set."""
        del self.running[j]
        self._count_vc(j, -gpus)

    def _count_vc(self, j: int, gpus: int) -> None:
        """`j`'s virtual cluster, if it has a quota, holds `gpus` more GPUs."""
        if self._vc and self._vc[j] in self.vc_quota:
            self.vc_running_gpus[self._vc[j]] += gpus

    def vc_room(self, j: int) -> float:
        """GPUs `j`'s virtual cluster may still start now (inf: no quota)."""
        vc = self._vc[j] if self._vc else ""
        if vc not in self.vc_quota:
            return math.inf
        return self.vc_quota[vc] - self.vc_running_gpus[vc]

    def requeue(self, j: int) -> None:
        """`j` stopped running after a failure: pending again, at the back of the queue."""
        self._make_pending(j)

    def complete(self, j: int, now_s: float) -> None:
        self.state[j] = COMPLETED
        self.end_s[j] = now_s

    def suspend(self, j: int) -> None:
        self.state[j] = SUSPENDED
        self.suspended[j] = None

    def unsuspend(self, j: int) -> None:
        """Suspended `j` resumes: out of the suspended set."""
        del self.suspended[j]

    def defer(self, j: int, until_s: float) -> None:
        core = self._core
        now = core.env.now
        self._unqueue(j)
        self.state[j] = DEFERRED
        self.deferred_until[j] = until_s
        core.events.append(now, "defer", j, value=until_s)
        if until_s < core.horizon_s:
            core.env.timeout(until_s - now).callbacks.append(
                lambda _e: self._deferral_expired(j, until_s)
            )

    def _deferral_expired(self, j: int, until_s: float) -> None:
        if self.deferred_until.get(j) != until_s:
            return  # started, rejected or deferred again meanwhile
        del self.deferred_until[j]
        self._make_pending(j)
        self._core.events.append(self._core.env.now, "ready", j)
        self._core.request_decision()

    def reject(self, j: int, reason: str) -> None:
        """`j` ends rejected with `reason`, out of whichever queue held it."""
        self._unqueue(j)
        self.suspended.pop(j, None)
        self.deferred_until.pop(j, None)
        self.state[j] = REJECTED
        self.reason[j] = reason
        self._core.events.append(self._core.env.now, "reject", j, detail=reason)

    def close(self, now_s: float) -> None:
        site_of = self.site_of
        for j, st in enumerate(self.state):
            if st in _OPEN:
                self._core.events.append(now_s, "unfinished", j, site_of[j])

    def terminal_states(self) -> pd.Categorical:
        """Each job's terminal state (`TERMINAL_STATES`): completed, rejected, or unfinished
        (at the horizon); made from codes, not a text per job (memory)."""
        state = np.frombuffer(self.state, np.int8)
        codes = np.full(len(state), TERMINAL_STATES.index("unfinished"), dtype=np.int8)
        codes[state == COMPLETED] = TERMINAL_STATES.index("completed")
        codes[state == REJECTED] = TERMINAL_STATES.index("rejected")
        return pd.Categorical.from_codes(codes, categories=TERMINAL_STATES)

    def write_results(self, out: ResultParts) -> None:
        """Columns `start_s`, `end_s`, `state`, `reason`, `wait_h`, `jct_h`; the job counts,
        waits, completion times and deadline misses."""
        jt = self._core.jobs
        start, end = np.asarray(self.start_s), np.asarray(self.end_s)
        # the reasons from codes (categories sorted, as pd.Categorical of the texts orders
        # them), not an object array of a text per job (memory)
        texts = sorted({"", *self.reason.values()})
        code_of = {text: code for code, text in enumerate(texts)}
        codes = np.zeros(len(jt), dtype=np.int8 if len(texts) < 128 else np.int32)
        for j, r in self.reason.items():
            codes[j] = code_of[r]
        reason = pd.Categorical.from_codes(codes, categories=pd.Index(texts))
        state = self.terminal_states()
        wait_h = (start - jt.submit_s) / 3600.0
        jct_h = (end - jt.submit_s) / 3600.0
        out.job_columns.update(
            start_s=start,
            end_s=end,
            state=state,
            reason=reason,
            wait_h=wait_h,
            jct_h=jct_h,
        )
        summary = out.summary
        counts = pd.Series(state).value_counts()
        summary["jobs_submitted"] = len(jt)
        for name in TERMINAL_STATES:
            summary[f"jobs_{name}"] = int(counts.get(name, 0))
        summary["wait_mean_h"] = _mean_or_none(wait_h)
        summary["jct_mean_h"] = _mean_or_none(jct_h)
        jct = jct_h[~np.isnan(jct_h)]
        summary["jct_p95_h"] = float(np.percentile(jct, 95)) if len(jct) else None
        summary["deadline_misses"] = deadline_misses(
            pd.DataFrame({"deadline_s": jt.deadline_s, "end_s": end, "state": state}),
            self._core.horizon_s,
        )


def _mean_or_none(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else None
