"""The base of the engine's components, how they are wired, and what they see of the core.

A component has one responsibility (the job lifecycle, job runs, the fleet's power,
checkpoints and WAN moves, demand-response metering, ...). It owns its state, as named
per-job columns (lists and typed arrays on the component itself, declared in
`__slots__`: no Python object per job), charges its own energy and carbon as exact
integrals, and writes its own result columns and summary keys through one hook,
`write_results` (desmod's `get_result_hook`). The core calls the hooks; see
docs/architecture.md for which component owns what, and how to add one.

Components are wired by declaration (desmod's `connect`): each names the siblings it uses
in `uses`, and `wire` builds them in an order that follows from those names, handing each
its siblings as keyword arguments of its constructor. Nothing is set on a component after
it is built. A sibling that must hear of something a component does without being one of
its `uses` (which would close a circle) overrides one of the broadcast hooks below; the
component calls `core.hooked(name)`.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    import simpy

    from sim.config.scenario import Scenario
    from sim.engine.gpu_prices import GpuPrices
    from sim.engine.ledger import Pool, Site
    from sim.results import ResultParts
    from sim.util.records import EventLog
    from sim.workload import JobTable

__all__ = ["BROADCAST_HOOKS", "Component", "Core", "WiringError", "per_job", "wire"]


class Core(Protocol):
    """What a component reads from the core (`sim.engine.core.Engine`): the SimPy
    environment, the run's inputs, its event log, GPU-hour prices, the decision trigger and
    the components that override a broadcast hook. Siblings come as constructor
    arguments (`Component.uses`), never through the core."""

    @property
    def env(self) -> simpy.Environment: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def jobs(self) -> JobTable: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def horizon_s(self) -> float:
        """The run's horizon, s since the scenario start."""

    @property
    def prices(self) -> GpuPrices: ...
    def request_decision(self) -> None:
        """Ask the policy to decide at the end of this instant."""

    def hooked(self, hook: str) -> tuple[Component, ...]:
        """The components that override broadcast hook `hook` and do not name it in their
        `idle_hooks`, in hook order."""


class Component:
    """A part of the engine.

    Lifecycle (Vessim's declared controller lifecycle):

    1. **construct** with declared inputs: `Component(core, **siblings, **inputs)`, where
       `siblings` are the built components named in the class's `uses` (keyword arguments
       of the same names) and `inputs` what the core hands it (signals, the WAN, request
       sources; `rng`: its random stream, `random_streams(seed)[stream]`, if it declares
       `stream`). `wire` builds the components in an order that follows from `uses`.
    2. **start()**: at time 0, start the component's SimPy processes and timers;
    3. **hooks** while the run goes on; every one has a default that does nothing, and
       only components that override a broadcast hook are called (`Core.hooked`):
       - `segment_closed(j, site, pool, t0_s, t1_s, energy_kwh)`: a running job's segment
         of constant speed was charged (`Runs.close_segment`); a meter takes its share;
       - `run_started(j, pool, capacity)`: `j` was placed on `pool` (`Runs.run_on`);
       - `run_computing(j)`: held `j` computes (its data or checkpoint arrived);
       - `run_stopped(j)`: `j` stopped running and freed its GPUs (`Runs.stop`);
       - `gpus_released(j, site, pool)`: `j`'s whole GPUs on `pool` were freed;
       - `pue_stepped(i, t_s)`: site `i`'s PUE changed at `t_s` (`Fleet`);

       A component whose hook does nothing in a run names it in `idle_hooks`, and is not
       called (the hot paths of a run without the feature pay nothing for it);
    4. **close(now_s)**: at the horizon, close open intervals and charge what is due;
    5. **write_results(out)**: add the component's per-job columns, summary keys and tables.
    """

    __slots__ = ()

    name: ClassVar[str]
    """The component's name: its siblings' constructor argument, the core's attribute."""
    uses: ClassVar[tuple[str, ...]] = ()
    """The names of the sibling components it is built with (constructor keywords)."""
    stream: ClassVar[str | None] = None
    """The random stream it draws from (handed as `rng`), if any."""

    def idle_hooks(self) -> frozenset[str]:
        """The broadcast hooks it overrides that do nothing in this run (a scenario without
        the feature they serve): the core does not call them (`Core.hooked`). Read once,
        after every component is built; none by default."""
        return frozenset()

    def start(self) -> None:
        """Start processes and timers at time 0."""

    def segment_closed(
        self, j: int, site: Site, pool: Pool, t0_s: float, t1_s: float, energy_kwh: float
    ) -> None:
        """Running job `j` computed on `pool` of `site` over [t0_s, t1_s] at constant speed
        and power, and was charged `energy_kwh` of facility energy for it."""

    def run_started(self, j: int, pool: Pool, capacity: Sequence[str] | None) -> None:
        """Job `j` was placed on `pool` (start, resume, migrate), its GPUs taken from the
        capacity kinds `capacity` names (None: the default order)."""

    def run_computing(self, j: int) -> None:
        """Held job `j` computes from now: its data or checkpoint arrived."""

    def run_stopped(self, j: int) -> None:
        """Job `j` stopped running and freed its GPUs."""

    def gpus_released(self, j: int, site: Site, pool: Pool) -> None:
        """The whole GPUs `j` held on `pool` of `site` were freed."""

    def pue_stepped(self, i: int, t_s: float) -> None:
        """Site `i`'s PUE changed at `t_s`, s (its facility power was logged)."""

    def close(self, now_s: float) -> None:
        """The run reached its horizon `now_s`: charge what is still open."""

    def write_results(self, out: ResultParts) -> None:
        """Add this component's columns, summary keys and tables to `out`."""


BROADCAST_HOOKS = (
    "segment_closed",
    "run_started",
    "run_computing",
    "run_stopped",
    "gpus_released",
    "pue_stepped",
)
"""The hooks a component calls on whichever siblings override them (`Core.hooked`)."""


class WiringError(ValueError):
    """The components' declarations do not make a build order: a cycle among their `uses`,
    or a sibling no component is called."""


def wire(
    kinds: Sequence[type[Component]],
    build: Callable[[type[Component], dict[str, Component]], Component],
) -> dict[str, Component]:
    """Build every component of `kinds` after the siblings it `uses`: `build(kind,
    siblings)` constructs one from its built siblings (by name). Returns them by name, in
    build order. WiringError naming the components for a cycle or an unknown sibling."""
    by_name = {k.name: k for k in kinds}
    for k in kinds:
        unknown = [u for u in k.uses if u not in by_name]
        if unknown:
            raise WiringError(
                f"component {k.name!r} uses {', '.join(map(repr, unknown))}, which no "
                f"component is called (components: {', '.join(by_name)})"
            )
    order = graphlib.TopologicalSorter({k.name: k.uses for k in kinds})
    try:
        names = list(order.static_order())
    except graphlib.CycleError as e:
        cycle = " -> ".join(reversed(e.args[1]))
        raise WiringError(f"components use each other in a circle: {cycle}") from None
    built: dict[str, Component] = {}
    for name in names:
        kind = by_name[name]
        built[name] = build(kind, {u: built[u] for u in kind.uses})
    return built


def overrides(component: Component, hook: str) -> bool:
    """Whether `component`'s class overrides `Component`'s hook `hook`."""
    return getattr(type(component), hook) is not getattr(Component, hook)


def per_job(n: int, by_job: Mapping[int, float], dtype: type = np.float64) -> np.ndarray:
    """A result column of `n` jobs from a component's sparse record `{job: value}` (0 for
    the jobs without one)."""
    column: np.ndarray = np.zeros(n, dtype=dtype)
    for j, value in by_job.items():
        column[j] = value
    return column
