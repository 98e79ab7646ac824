"""The engine's components are wired by declaration: each names the siblings it uses
(`Component.uses`) and `wire` builds every one after those, handing them to its constructor;
a circle among the declarations, or a sibling no component is called, is an error naming
them. The engine's own components are built that way, each with its random stream."""

from __future__ import annotations

import pytest

from sim.engine.component import BROADCAST_HOOKS, Component, WiringError, wire
from sim.engine.core import Engine
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, write_jobs


def kind(name: str, *uses: str) -> type[Component]:
    """A component class called `name` that keeps the siblings it is built with."""

    class Made(Component):
        __slots__ = ("siblings",)

        def __init__(self, **siblings: Component):
            self.siblings = siblings

    Made.name = name
    Made.uses = uses
    return Made


def build(k: type[Component], siblings: dict[str, Component]) -> Component:
    return k(**siblings)  # type: ignore[call-arg]


def test_each_component_is_built_after_the_siblings_it_uses_and_is_handed_them():
    runs, book, fleet = kind("runs", "book", "fleet"), kind("book", "fleet"), kind("fleet")
    built = wire([runs, book, fleet], build)
    assert list(built) == ["fleet", "book", "runs"]
    assert built["runs"].siblings == {"book": built["book"], "fleet": built["fleet"]}  # type: ignore[attr-defined]
    assert built["fleet"].siblings == {}  # type: ignore[attr-defined]


def test_components_that_use_each_other_in_a_circle_are_an_error_naming_the_circle():
    with pytest.raises(WiringError, match="in a circle: .*runs -> checkpoints -> runs"):
        wire([kind("runs", "checkpoints"), kind("checkpoints", "runs")], build)


def test_a_sibling_no_component_is_called_is_an_error_naming_it():
    with pytest.raises(WiringError, match="'runs' uses 'chekpoints', which no component"):
        wire([kind("runs", "chekpoints"), kind("checkpoints")], build)


def test_the_engines_components_are_built_in_an_order_their_declarations_make():
    built = wire(Engine.COMPONENTS, lambda k, siblings: Component())  # the order alone
    order = list(built)
    for k in Engine.COMPONENTS:
        assert all(order.index(u) < order.index(k.name) for u in k.uses), k.name
    assert order[0] == "fleet"  # it uses no sibling, and every other component uses it


def test_the_engine_hands_each_component_its_siblings_and_its_own_random_stream():
    engine = PolicyHarness(make_scenario()).engine
    assert [c.name for c in engine.components] == [k.name for k in Engine.COMPONENTS]
    assert engine.failures._runs is engine.runs and engine.spot._failures is engine.failures
    streams = {k.name: k.stream for k in Engine.COMPONENTS if k.stream is not None}
    assert streams == {
        "failures": "failures",
        "spot": "spot",
        "queries": "prediction",
        "functions": "functions",
    }
    assert engine.failures._rng is not engine.spot._rng


def test_a_run_without_a_feature_calls_none_of_its_hooks_on_the_hot_paths(tmp_path):
    """Without periodic checkpoints, failures, spot GPUs or demand-response events, a start
    and a stop call no sibling, and a closed segment only the checkpoints (a loading hold's
    energy): each component names the hooks it does not need in `idle_hooks`."""
    engine = PolicyHarness(make_scenario()).engine
    called = {hook: [c.name for c in engine.hooked(hook)] for hook in BROADCAST_HOOKS}
    assert called["run_started"] == called["run_stopped"] == called["gpus_released"] == []
    assert called["segment_closed"] == ["checkpoints"]


def test_periodic_checkpoints_hear_of_every_start_and_stop(tmp_path):
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 1.0}]
    workload = {"file": str(write_jobs(tmp_path / "jobs.csv", jobs)), "checkpoint_interval_h": 1}
    engine = PolicyHarness(make_scenario(tmp_path, workload=workload)).engine
    assert [c.name for c in engine.hooked("run_started")] == ["checkpoints"]
    assert [c.name for c in engine.hooked("run_stopped")] == ["checkpoints"]
