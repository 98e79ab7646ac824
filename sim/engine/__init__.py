"""The engine: a small event core (`core.Engine`) and the components that own the state of a
run (`component.Component` and its subclasses). See docs/architecture.md."""

from sim.engine.component import Component
from sim.engine.core import Engine

__all__ = ["Component", "Engine"]
