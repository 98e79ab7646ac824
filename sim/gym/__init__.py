"""A Gymnasium environment over any dcsim scenario: `DcsimEnv` (docs/gym.md).

An agent takes one family of decisions (`levers`: "jobs", "services", "battery") at the
engine's decision points, observing `SystemState` as a normalised vector, rewarded by
minus a weighted sum of the run's carbon, energy cost, deadline and SLO misses; a base
policy takes every other decision. Needs the `gym` extra (`pip install 'dcsim[gym]'`).
"""

from sim.gym.env import DcsimEnv
from sim.gym.meter import DEFAULT_WEIGHTS, TERMS

__all__ = ["DEFAULT_WEIGHTS", "TERMS", "DcsimEnv"]
