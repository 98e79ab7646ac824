"""GAIA's cost-aware scheduling policies: carbon-aware waiting mixed with reserved, on-demand
and spot capacity (docs/spot-capacity.md, "GAIA's cost-aware policies").

Hanafy, Liang, Ali-Eldin, Shenoy, "Going Green for Less Green: Optimizing the Cost of
Reducing Cloud Carbon Emissions", ASPLOS 2024; artifact github.com/umassos/GAIA (MIT),
`src/scheduling/scheduling_policy.py` (`SchedulingPolicy`: the flags carbon_aware,
cost_aware, spot_aware), `src/scheduling/__init__.py` (the five named combinations),
`src/cluster/simulation_cluster.py` (which capacity a job runs on) and `src/task.py` (the
length classes and waiting bounds). Each job gets a latest start when it arrives:

- carbon-aware: the start of the lowest-carbon window of its length within its waiting
  bound (GAIA's `oracle_carbon_slot`, the job's length known); else the end of the bound;
- cost-aware: it starts earlier, as soon as reserved GPUs are free for it (GAIA: "submit if
  work conserving ... and available resources"); with spot-aware, long jobs only;
- spot-aware: short jobs (GAIA's length class "0-2": at most 2 h) run on spot GPUs.

A job runs on reserved GPUs if enough are free, else on-demand (GAIA's
`SimulationCluster.submit`); a short job of a spot-aware policy on spot GPUs first. The
differences from the artifact (finite on-demand and spot pools, evictions, the forecast,
decision times) are listed on the docs page.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.kit import FreeGpus, best_window_start, forecast_from_now, runtime_s
from sim.api import Action, JobView, Policy, Start, SystemState

__all__ = ["GaiaCarbon", "GaiaCarbonCost", "GaiaCarbonCostSpot", "GaiaCarbonSpot", "GaiaCost"]

GAIA_SHORT_H = 2.0
"""GAIA's short length class, "0-2" h (`src/task.py`, `classify_time`, `TwoQueues.Short`)."""
STABLE_KINDS = ("reserved", "on_demand")
"""The kinds a job that may not use spot runs on, in GAIA's order: reserved first."""
SPOT_FIRST = ("spot", "reserved", "on_demand")
"""A spot-aware policy's short jobs: spot first (then reserved: paid anyway)."""


@dataclass
class GaiaCost(Policy):
    """GAIA's `cost` policy: each job waits at most its bound for reserved GPUs, then starts
    on whatever stable capacity is free (reserved, else on-demand). The other policies of
    the family set the flags (`carbon_aware`, `spot_aware`) as GAIA's names do."""

    max_wait_short_h: float = 6.0
    """Waiting bound of short jobs, h (GAIA's `-w 6x24`, the README's default)."""
    max_wait_long_h: float = 24.0
    """Waiting bound of long jobs, h."""
    short_h: float = GAIA_SHORT_H
    """Jobs of at most this runtime are short, h."""
    tick_s: float = 300.0
    """Decisions every this many seconds besides arrivals and completions, so that a
    planned start is met within a tick (GAIA steps once per trace time index)."""

    carbon_aware = False
    cost_aware = True
    spot_aware = False

    def __post_init__(self) -> None:
        for name in ("max_wait_short_h", "max_wait_long_h", "short_h"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0 h, got {getattr(self, name)}")
        if not self.tick_s > 0.0:
            raise ValueError(f"tick_s must be > 0 s, got {self.tick_s}")
        self._planned: dict[int, float] = {}
        """Job index -> its latest start, s."""
        self._short: dict[int, bool] = {}
        """Job index -> whether it is short (its runtime when it first arrived)."""

    def _kinds(self, job: JobView) -> tuple[str, ...]:
        """The kinds `job` takes its GPUs from: spot first for a short job of a spot-aware
        policy, else reserved then on-demand."""
        return SPOT_FIRST if self._uses_spot(job) else STABLE_KINDS

    def _uses_spot(self, job: JobView) -> bool:
        return self.spot_aware and self._short.get(job.index, False)

    def _plan(self, state: SystemState, job: JobView) -> None:
        runtime = runtime_s(state, job)
        short = runtime <= self.short_h * 3600.0
        self._short[job.index] = short
        now = state.now_s
        wait_s = (self.max_wait_short_h if short else self.max_wait_long_h) * 3600.0
        latest = job.submit_s + wait_s
        if not self.carbon_aware or latest <= now:
            self._planned[job.index] = max(now, latest)
            return
        times, values = forecast_from_now(state, job.origin_site, latest + runtime - now)
        if times.size == 0:
            self._planned[job.index] = now
            return
        self._planned[job.index] = best_window_start(times, values, now, latest, runtime)[0]

    def decide(self, state: SystemState) -> list[Action]:
        now = state.now_s
        free = FreeGpus(state)
        taken: dict[tuple[str, str, str], int] = {}
        actions: list[Action] = []
        for job in state.pending:
            if job.index not in self._planned:
                self._plan(state, job)
            due = now >= self._planned[job.index]
            early = self.cost_aware and not self._uses_spot(job)
            if not (due or early):
                continue
            kinds = ("reserved",) if not due else self._kinds(job)
            start = self._place(state, free, job, kinds, taken)
            if start is not None:
                actions.append(start)
        return actions

    def _place(
        self,
        state: SystemState,
        free: FreeGpus,
        job: JobView,
        kinds: tuple[str, ...],
        taken: dict[tuple[str, str, str], int],
    ) -> Start | None:
        """A Start of `job` on the first site (its origin first) and model where the kit
        places it (`FreeGpus.take_job`: its virtual cluster's quota, a MIG slice, a shared
        GPU, servers) with enough free GPUs of `kinds` left, taken from them in that order
        (`Start.capacity`), counting those this decision's starts took; None if none. An
        unsplit pool's GPUs count as on-demand, and the Start leaves the kinds out."""
        if not free.vc_fits(job):
            return None
        sites = [job.origin_site, *(s for s in state.sites if s != job.origin_site)]
        for site in sites:
            if site not in job.allowed_sites:
                continue
            for model in state.gpu_models(site):
                if job.allowed_gpu_models and model not in job.allowed_gpu_models:
                    continue
                by_kind = state.free_gpus_by_kind(site, model)
                left = {k: by_kind.get(k, 0) - taken.get((site, model, k), 0) for k in kinds}
                if by_kind and sum(left.values()) < job.gpus:
                    continue
                if not by_kind and "on_demand" not in kinds:
                    continue
                if free.take_job(job, site, model) is None:
                    continue
                if not by_kind:
                    return Start(job, site, gpu_model=model)
                need = job.gpus
                for k in kinds:  # as the engine takes them
                    n = min(need, left[k])
                    taken[(site, model, k)] = taken.get((site, model, k), 0) + n
                    need -= n
                return Start(job, site, gpu_model=model, capacity=kinds)
        return None


@dataclass
class GaiaCarbon(GaiaCost):
    """GAIA's `carbon`: wait for the lowest-carbon window within the bound."""

    carbon_aware = True
    cost_aware = False


@dataclass
class GaiaCarbonCost(GaiaCost):
    """GAIA's `carbon-cost`: the lowest-carbon window, or earlier on free reserved GPUs."""

    carbon_aware = True


@dataclass
class GaiaCarbonSpot(GaiaCost):
    """GAIA's `carbon-spot`: the lowest-carbon window; short jobs on spot GPUs."""

    carbon_aware = True
    cost_aware = False
    spot_aware = True


@dataclass
class GaiaCarbonCostSpot(GaiaCost):
    """GAIA's `carbon-cost-spot`: short jobs on spot GPUs at their lowest-carbon window; long
    jobs then, or earlier on free reserved GPUs."""

    carbon_aware = True
    spot_aware = True
