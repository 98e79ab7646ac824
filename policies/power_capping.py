"""Power-capping policies: `static_cap`, `energy_optimal_cap`, `carbon_aware_cap`.

All three are adjusters (`policies.kit.Adjuster`): they add GPU power caps to the
`Start`s and `Resume`s a scheduler planned that carry no cap of their own (alone: to what
`run_now` would do; in a `chain`: to what the members before them planned), and
`carbon_aware_cap` also re-caps running jobs with `SetCap(job, watts)`. A cap the
scheduler set itself is never changed. docs/policies-power-capping.md has the parameters,
sources and measured results.

Caps and the settable range. The engine refuses a cap outside the GPU model's settable
range [min_cap_w, max_cap_w] (`PolicyError`). The GPU model of a `Start`/`Resume` is its
`gpu_model` (schedulers always set it); without one, the model the engine would choose
(the site's first pool with enough GPUs still free after the plan's earlier starts).

- `static_cap`: `watts` and `per_site` values apply across GPU models and are **clipped**
  into each model's range; a `per_model` value names one model, so a value outside that
  model's range (or an unknown model id, or an unknown site in `per_site`) is a
  configuration error: `PolicyError` at the first decision, naming the parameter.
- `energy_optimal_cap` and `carbon_aware_cap` only ever choose caps on the model's grid
  (below), inside the range by construction.

Cap grid. The optimising policies search the caps `min_cap_w, min_cap_w + resolution_w,
..., max_cap_w` (the maximum always included), exactly, with the calibrated hardware model
(`state.operating_point`). Keeping to a grid also keeps the number of distinct caps, and
so the engine's per-(model, profile, cap) cache, bounded. A chosen cap equal to
`max_cap_w` is returned as None ("no cap of its own"): the job runs uncapped, or under its
site's cap if one was set with `SetCap(site, watts)`.

Deadlines. The optimising policies never give a job with a deadline a cap under which its
remaining work (`state.estimate`) would not finish `deadline_margin_s` before its deadline:
they raise the cap to the lowest grid cap that does, or leave the job uncapped if none
does. Because a cap that meets the deadline now still meets it later (the remaining work
shrinks exactly as fast as the time left), checking at each start and each re-cap suffices.
`static_cap` is a hard limit and does not look at deadlines.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from policies.kit import Adjuster, FreeGpus, OperatingPoints, job_of
from sim.api import Action, JobView, PolicyError, Resume, SetCap, Start, SystemState

__all__ = ["CarbonAwareCap", "EnergyOptimalCap", "StaticCap"]

Placement = Start | Resume


# --- shared helpers ----------------------------------------------------------------------


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


class _Models:
    """The GPU model each `Start`/`Resume` of a plan runs on: its `gpu_model`, or the one the
    engine would choose (first pool of the site with enough GPUs free after the plan's
    earlier placements; the site's first pool if none has)."""

    __slots__ = ("_free", "_state")

    def __init__(self, state: SystemState):
        self._state = state
        self._free = FreeGpus(state)

    def of(self, action: Placement) -> str:
        taken = self._free.take_for(action.job, action.site, action.gpu_model)
        return taken or action.gpu_model or self._state.gpu_models(action.site)[0]


class _OperatingPoints(OperatingPoints):
    """The kit's operating points with Zeus's energy-time optimum."""

    __slots__ = ()

    def zeus_optimum(
        self, state: SystemState, model: str, profile: str, eta: float, host_w: float
    ) -> float | None:
        """The grid cap minimising eta x energy + (1 - eta) x max_power x time per unit of
        work (Zeus), with `host_w` added to the GPU's power in energy and max_power; None if
        that is the maximum limit. Ties go to the higher cap (faster)."""
        if eta == 0.0:
            return None
        caps, r, power = self.table(state, model, profile)
        max_power_w = state.gpu_spec(model).max_cap_w + host_w
        cost = (eta * (power + host_w) + (1.0 - eta) * max_power_w) / r
        best = len(cost) - 1 - int(np.argmin(cost[::-1]))
        return None if best == len(caps) - 1 else float(caps[best])


def _deadline_guard(
    state: SystemState,
    job: JobView,
    site: str,
    model: str,
    cap_w: float | None,
    caps: np.ndarray,
    margin_s: float,
) -> float | None:
    """`cap_w`, or the lowest higher cap of `caps` under which `job` still finishes its
    remaining work `margin_s` before its deadline; None (uncapped) if no cap does."""
    deadline_s = job.deadline_s
    if cap_w is None or deadline_s is None:
        return cap_w
    left_s = deadline_s - margin_s - state.now_s

    def fits(c: float) -> bool:
        return state.estimate(job, site, c, model)[0] <= left_s

    if fits(cap_w):
        return cap_w
    higher = caps[caps > cap_w]
    if len(higher) < 2 or not fits(float(higher[-2])):
        return None  # only the maximum limit (or nothing) is fast enough
    lo, hi = 0, len(higher) - 2  # fits(higher[hi]) holds; find the first that fits
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(float(higher[mid])):
            hi = mid
        else:
            lo = mid + 1
    return float(higher[lo])


def _with_cap(action: Placement, cap_w: float | None) -> Placement:
    return action if cap_w is None else dataclasses.replace(action, gpu_cap_w=cap_w)


def _cap_placements(
    state: SystemState,
    actions: Sequence[Action],
    cap_of: Callable[[Placement, str], float | None],
) -> list[Action]:
    """`actions` with `cap_of(placement, gpu_model)` (None: leave uncapped) added to every
    `Start`/`Resume` that has no cap of its own."""
    models = _Models(state)
    out: list[Action] = []
    for a in actions:
        if isinstance(a, Start | Resume):
            model = models.of(a)
            if a.gpu_cap_w is None:
                a = _with_cap(a, cap_of(a, model))
        out.append(a)
    return out


# --- static_cap --------------------------------------------------------------------------


@dataclass
class StaticCap(Adjuster):
    """A fixed GPU power cap on every job started or resumed, by site, GPU model, or for all.

    Precedence: `per_site[site]` > `per_model[model]` > `watts`; a job matching none runs
    uncapped. `watts` and `per_site` apply across GPU models and are clipped into each
    model's settable range; a `per_model` value outside its model's range, an unknown GPU
    model id in `per_model` or an unknown site in `per_site` is a `PolicyError` at the first
    decision. Caps the scheduler set itself are kept. Running jobs are not re-capped.

    Source: the fixed GPU power caps studied across a research supercomputing center by Zhao
    et al., "Sustainable Supercomputing for AI: GPU Power Capping at HPC Scale", ACM SoCC
    2023 (arXiv:2402.18593): lower power and temperature for a modest slowdown.
    """

    watts: float | None = None
    """Cap of every GPU, W (clipped into each model's settable range); None: no default cap."""
    per_model: dict[str, float] = field(default_factory=dict)
    """Cap per GPU model id, W, e.g. {"V100" = 150}; must lie in that model's settable range."""
    per_site: dict[str, float] = field(default_factory=dict)
    """Cap per site name, W, for every GPU of the site (clipped into each model's range)."""

    def __post_init__(self) -> None:
        if self.watts is not None:
            _check_positive("watts", self.watts)
        for key, table in (("per_model", self.per_model), ("per_site", self.per_site)):
            for name, w in table.items():
                _check_positive(f"{key}.{name}", w)
        if self.watts is None and not self.per_model and not self.per_site:
            raise ValueError("static_cap needs at least one of watts, per_model, per_site")
        self._checked_for: object = None

    def _check(self, state: SystemState) -> None:
        """Validate names and ranges against the scenario, once per run."""
        if self._checked_for is state:
            return
        for site in self.per_site:
            if site not in state.sites:
                raise PolicyError(
                    f"static_cap: per_site names unknown site {site!r} (sites: {list(state.sites)})"
                )
        for model, w in self.per_model.items():
            try:
                spec = state.gpu_spec(model)
            except KeyError:
                raise PolicyError(
                    f"static_cap: per_model names unknown GPU model {model!r}"
                ) from None
            if not spec.min_cap_w <= w <= spec.max_cap_w:
                raise PolicyError(
                    f"static_cap: per_model.{model} = {w:g} W is outside {model}'s settable "
                    f"range {spec.min_cap_w:g}-{spec.max_cap_w:g} W"
                )
        self._checked_for = state

    def cap_for(self, state: SystemState, site: str, model: str) -> float | None:
        """The cap a job started on `model` GPUs at `site` gets, W (None: uncapped)."""
        if site in self.per_site:
            w = self.per_site[site]
        elif model in self.per_model:
            return float(self.per_model[model])
        elif self.watts is not None:
            w = self.watts
        else:
            return None
        spec = state.gpu_spec(model)
        return float(min(max(w, spec.min_cap_w), spec.max_cap_w))

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        self._check(state)
        return _cap_placements(state, actions, lambda a, model: self.cap_for(state, a.site, model))


# --- energy_optimal_cap ------------------------------------------------------------------


@dataclass
class EnergyOptimalCap(Adjuster):
    """Per job, the GPU power cap minimising Zeus's energy-time cost.

    For each job started or resumed without a cap, over the GPU model's cap grid (every
    `resolution_w` from min_cap_w to max_cap_w, searched exhaustively), with the calibrated
    hardware model r(c) (throughput fraction) and P(c) (average GPU power):

        cost(c) = eta x (P(c) + h) / r(c) + (1 - eta) x (max_cap_w + h) / r(c)

    i.e. eta x energy + (1 - eta) x max_power x time per unit of work, with h the site's
    host power per GPU (`state.host_w_per_gpu`) if `count_host_power`, else 0. Ties go to
    the higher cap; the maximum limit means uncapped. eta = 1 minimises energy per unit of
    work, eta = 0 time (uncapped).

    Host power: Zeus counts GPU energy only (h = 0). The engine charges each job its GPUs'
    power plus the host share (`host_w_per_gpu`), times PUE. With h counted, the chosen
    cap's per-job energy is never above uncapped for any eta > 0 (the cost at the optimum
    is at most the cost uncapped, and time never falls under a cap), which the GPU-only
    cost does not guarantee; the optimum moves to a higher cap (e.g. V100 ResNet-50,
    eta = 1: 124 W GPU-only, 146 W with 40 W of host power). PUE multiplies every cap's
    energy alike and is left out, as in Zeus.

    A job with a deadline is never capped so far that it would miss it (module docstring).
    Running jobs are not re-capped: their operating point does not change with time.

    Source: You, Chung and Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
    Consumption of DNN Training", NSDI 2023, Sec. 3 (the cost, `zeus_cost` in
    ml-energy/zeus `zeus/util/metric.py`); the cap model is calibrated on its measurements
    (docs/power-model.md).
    """

    eta: float = 0.5
    """Weight of energy against time in [0, 1] (Zeus's eta knob): 1 = energy only, 0 = time only."""
    count_host_power: bool = True
    """Add the site's host power per GPU (W) to the GPU's power in the cost."""
    resolution_w: float = 1.0
    """Step of the cap grid searched, W."""
    deadline_margin_s: float = 300.0
    """Time kept in reserve before a job's deadline when checking a cap against it, s."""

    def __post_init__(self) -> None:
        if not (isinstance(self.eta, int | float) and 0.0 <= self.eta <= 1.0):
            raise ValueError(f"eta must be in [0, 1], got {self.eta!r}")
        _check_positive("resolution_w", self.resolution_w)
        if not self.deadline_margin_s >= 0.0:
            raise ValueError(f"deadline_margin_s must be >= 0, got {self.deadline_margin_s!r}")
        self._points = _OperatingPoints(self.resolution_w)

    def cap_for(self, state: SystemState, job: JobView, site: str, model: str) -> float | None:
        """The cap `job` gets on `model` GPUs at `site`, W (None: uncapped), before the
        deadline check."""
        host_w = state.host_w_per_gpu(site) if self.count_host_power else 0.0
        return self._points.zeus_optimum(state, model, job.profile, float(self.eta), host_w)

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        def guarded_cap(a: Placement, model: str) -> float | None:
            cap = self.cap_for(state, a.job, a.site, model)
            caps = self._points.table(state, model, a.job.profile)[0]
            return _deadline_guard(state, a.job, a.site, model, cap, caps, self.deadline_margin_s)

        return _cap_placements(state, actions, guarded_cap)


# --- carbon_aware_cap --------------------------------------------------------------------


@dataclass
class CarbonAwareCap(Adjuster):
    """Lower GPU caps while the grid is dirty, keeping deadlines.

    At every decision, and at every step of a carbon signal (`signal_steps`), each site
    gets a capping level from its current carbon intensity ci (g/kWh) and two thresholds:

        level = clip((ci - low) / (high - low), 0, 1)     (level 0 if high == low and ci <= high)

    - thresholds: `low_g_per_kwh` and `high_g_per_kwh` if given (both); otherwise the
      `low_quantile` and `high_quantile` of the site's forecast over the next `window_h`
      (time-weighted, `state.forecast`, with the scenario's forecast error), so the policy
      adapts to any grid: with the defaults, uncapped in the cleanest quarter of the coming
      day, deepest cap in the dirtiest quarter;
    - cap of a job = max_cap_w - level x (max_cap_w - deepest), rounded to the cap grid
      (every `resolution_w` from min_cap_w), None (uncapped) at level 0;
    - deepest cap: `min_cap_frac` x max_cap_w (clipped into the settable range) if given;
      by default the job's energy-optimal cap (`energy_optimal_cap` with eta = 1 and host
      power counted), below which a cap costs energy as well as time. Between the maximum
      limit and that cap, energy per unit of work falls monotonically as the cap falls (for
      every catalog GPU and profile in the calibrated model), so every level saves energy
      as well as moving draw out of dirty hours.

    Jobs started or resumed without a cap get the cap of their site's level; running jobs
    are re-capped (`SetCap(job, watts)`, only when the cap changes) when their site's level
    changes. Running jobs with a cap this policy did not set (a scheduler's, or a later
    chain member's) are left alone, as are jobs that another action of the plan concerns.
    A job with a deadline is never capped so far that it would miss it (module docstring);
    with `cap_jobs_without_deadline = false`, jobs without a deadline run uncapped.

    Sources: the idea of scaling a job's resources with the grid's carbon intensity is
    CarbonScaler's (Hanafy et al., "CarbonScaler: Leveraging Cloud Workload Elasticity for
    Optimizing Carbon-Efficiency", SIGMETRICS 2024), applied here to the GPU power limit
    instead of the number of servers; the deepest cap is Zeus's energy optimum (You et al.,
    NSDI 2023). The linear ramp and the quantile thresholds are this policy's own rule,
    chosen so that one parameter set works on grids of any carbon level.
    """

    low_g_per_kwh: float | None = None
    """Carbon intensity at or below which jobs run uncapped, g/kWh (give with high_g_per_kwh)."""
    high_g_per_kwh: float | None = None
    """Carbon intensity at or above which jobs get the deepest cap, g/kWh."""
    low_quantile: float = 0.25
    """Without absolute thresholds: the low threshold, a quantile of the forecast in [0, 1]."""
    high_quantile: float = 0.75
    """Without absolute thresholds: the high threshold, a quantile of the forecast in [0, 1]."""
    window_h: float = 24.0
    """Forecast window the quantiles are taken over, h."""
    min_cap_frac: float | None = None
    """Deepest cap as a fraction of max_cap_w in (0, 1]; None: the job's energy-optimal cap."""
    cap_jobs_without_deadline: bool = True
    """Also cap jobs that have no deadline (they then finish later)."""
    resolution_w: float = 1.0
    """Step of the cap grid, W."""
    deadline_margin_s: float = 300.0
    """Time kept in reserve before a job's deadline when checking a cap against it, s."""

    signal_steps = True  # class attribute, not a parameter: decide at every signal step

    def __post_init__(self) -> None:
        low, high = self.low_g_per_kwh, self.high_g_per_kwh
        if (low is None) != (high is None):
            raise ValueError(
                "give both low_g_per_kwh and high_g_per_kwh, or neither (quantile thresholds), "
                f"got low_g_per_kwh={self.low_g_per_kwh!r}, high_g_per_kwh={self.high_g_per_kwh!r}"
            )
        if low is not None and high is not None:
            if not 0.0 <= low < high:
                raise ValueError(
                    "low_g_per_kwh must be >= 0 and below high_g_per_kwh, got "
                    f"low_g_per_kwh={self.low_g_per_kwh!r}, high_g_per_kwh={self.high_g_per_kwh!r}"
                )
        if not 0.0 <= self.low_quantile <= self.high_quantile <= 1.0:
            raise ValueError(
                "need 0 <= low_quantile <= high_quantile <= 1, got "
                f"low_quantile={self.low_quantile!r}, high_quantile={self.high_quantile!r}"
            )
        _check_positive("window_h", self.window_h)
        if self.min_cap_frac is not None and not 0.0 < self.min_cap_frac <= 1.0:
            raise ValueError(f"min_cap_frac must be in (0, 1], got {self.min_cap_frac!r}")
        _check_positive("resolution_w", self.resolution_w)
        if not self.deadline_margin_s >= 0.0:
            raise ValueError(f"deadline_margin_s must be >= 0, got {self.deadline_margin_s!r}")
        self._points = _OperatingPoints(self.resolution_w)
        self._run: object = None  # the state of the run the memory below belongs to
        self._levels: dict[str, tuple[float, float]] = {}  # site -> (valid until s, level)
        self._recapped_level: dict[str, float] = {}  # site -> level running jobs last got
        self._recapped_until_s = -math.inf
        """Until when every site's level stays the one its running jobs last got, s."""
        self._set: dict[JobView, float | None] = {}  # job -> cap this policy gave it
        self._level_caps: dict[tuple[str, str, str], tuple[float, float | None]] = {}
        """(site, GPU model, profile) -> (the level last asked, its cap before the deadline
        check, W)."""

    # -- levels and caps -----------------------------------------------------------------

    def thresholds(self, state: SystemState, site: str) -> tuple[float, float]:
        """(low, high) carbon-intensity thresholds of `site` now, g/kWh."""
        return self._thresholds(state, site)[:2]

    def _thresholds(self, state: SystemState, site: str) -> tuple[float, float, float]:
        """(low, high, until when the level they give holds, s: the end of the forecast's
        current step; now with absolute thresholds, cheap enough to apply at every call)."""
        low, high = self.low_g_per_kwh, self.high_g_per_kwh
        if low is not None and high is not None:  # both or neither (__post_init__)
            return float(low), float(high), state.now_s
        window_s = self.window_h * 3600.0
        t, v = state.forecast(site, window_s)
        if len(v) == 0:
            ci = state.carbon_intensity(site)
            return ci, ci, math.inf
        step_end_s = float(t[1]) if len(t) > 1 else math.inf
        # The window ends at now + window_h, or at the horizon (the forecast may stop there).
        ends = np.append(t[1:], min(state.now_s + window_s, max(state.horizon_s, t[-1])))
        weights = np.clip(ends - t, 0.0, None)
        if weights.sum() <= 0.0:
            return float(v[0]), float(v[0]), step_end_s
        order = np.argsort(v, kind="stable")
        cum = np.cumsum(weights[order]) / weights.sum()

        def quantile(q: float) -> float:
            k = int(np.searchsorted(cum, q - 1e-12, side="left"))
            return float(v[order][min(k, len(v) - 1)])

        return quantile(self.low_quantile), quantile(self.high_quantile), step_end_s

    def level(self, state: SystemState, site: str) -> float:
        """Capping level of `site` now in [0, 1]: 0 uncapped, 1 the deepest cap. The
        thresholds are those of the first decision in the current step of the site's
        forecast: they stay put until the next step (the intensity does not move within it)."""
        now = state.now_s
        hit = self._levels.get(site)
        if hit is not None and now < hit[0]:
            return hit[1]
        ci = state.carbon_intensity(site)
        low, high, step_end_s = self._thresholds(state, site)
        if high > low:
            lvl = min(1.0, max(0.0, (ci - low) / (high - low)))
        else:
            lvl = 1.0 if ci > high else 0.0
        self._levels[site] = (step_end_s, lvl)
        return lvl

    def cap_for(self, state: SystemState, job: JobView, site: str, model: str) -> float | None:
        """The cap of `job` on `model` GPUs at `site` now, W (None: uncapped), deadline kept."""
        if job.deadline_s is None and not self.cap_jobs_without_deadline:
            return None
        lvl = self.level(state, site)
        if lvl <= 0.0:
            return None
        profile = job.profile
        key = (site, model, profile)
        hit = self._level_caps.get(key)
        if hit is not None and hit[0] == lvl:
            cap = hit[1]
        else:
            cap = self._level_cap(state, site, model, profile, lvl)
            self._level_caps[key] = (lvl, cap)
        if cap is None:
            return None
        caps = self._points.table(state, model, profile)[0]
        return _deadline_guard(state, job, site, model, cap, caps, self.deadline_margin_s)

    def _level_cap(
        self, state: SystemState, site: str, model: str, profile: str, lvl: float
    ) -> float | None:
        """The cap of a `profile` job on `model` GPUs at `site` at capping level `lvl` > 0,
        W, before the deadline check (None: uncapped)."""
        spec = state.gpu_spec(model)
        caps = self._points.table(state, model, profile)[0]
        if self.min_cap_frac is not None:
            deepest = min(max(self.min_cap_frac * spec.max_cap_w, spec.min_cap_w), spec.max_cap_w)
        else:
            opt = self._points.zeus_optimum(state, model, profile, 1.0, state.host_w_per_gpu(site))
            deepest = spec.max_cap_w if opt is None else opt
        target = spec.max_cap_w - lvl * (spec.max_cap_w - deepest)
        cap = float(caps[int(np.argmin(np.abs(caps - target)))])
        return None if cap >= spec.max_cap_w else cap

    # -- the decision --------------------------------------------------------------------

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        if self._run is not state:  # a new run: forget the last one
            self._run = state
            self._levels.clear()
            self._recapped_level.clear()
            self._recapped_until_s = -math.inf
            self._set.clear()
            self._level_caps.clear()

        def recorded_cap(a: Placement, model: str) -> float | None:
            cap = self._set[a.job] = self.cap_for(state, a.job, a.site, model)
            return cap

        out = _cap_placements(state, actions, recorded_cap)
        out.extend(self._recap(state, {j for a in out if (j := job_of(a)) is not None}))
        return out

    def _recap(self, state: SystemState, concerned: set[JobView]) -> list[Action]:
        """SetCaps for the running jobs of sites whose level changed since their last re-cap."""
        if state.now_s < self._recapped_until_s:
            return []  # no site's level can have changed: each is still the one cached
        changed = set()
        recapped_until_s = math.inf
        for name in state.sites:
            lvl = self.level(state, name)
            recapped_until_s = min(recapped_until_s, self._levels[name][0])
            if self._recapped_level.get(name) != lvl:
                self._recapped_level[name] = lvl
                changed.add(name)
        self._recapped_until_s = recapped_until_s
        if not changed:
            return []
        out: list[Action] = []
        kept: dict[JobView, float | None] = {}
        for job in state.running:
            site, model = job.site, job.gpu_model
            assert site is not None and model is not None  # running
            own = job.cap_w
            managed = own is None or (job in self._set and self._set[job] == own)
            if not managed:
                continue
            if site not in changed or job in concerned:
                kept[job] = own
                continue
            cap = self.cap_for(state, job, site, model)
            kept[job] = cap
            if cap != own:
                out.append(SetCap(job, cap))
        # Forget jobs no longer running (completed, suspended); keep this plan's starts.
        for job, cap in self._set.items():
            if job not in kept and job.state in ("pending", "deferred", "suspended"):
                kept[job] = cap
        self._set = kept
        return out
