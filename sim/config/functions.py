"""`[functions]`: serverless functions run beside the GPU fleet (docs/functions.md, "In a
run"): the site they run on, how many the generator draws, and the keep-alive policy.

The generation names (`generation`, `default_generation`) are checked against the
catalog of `sim.functions` when the run is built (`sim.engine.functions.keep_alive_policy`,
which `dcsim validate` calls too): the catalog sits above this floor.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim.config.base import ConfigModel

MAX_FUNCTIONS = 100_000
"""Functions a run draws at most: the keep-alive simulation is a Python loop per
invocation, and the generator's rates span 8 decades."""

MAX_WINDOWS = 1_000
"""Candidate windows the carbon-aware policy evaluates at most per decision."""


class FixedKeepAliveConfig(ConfigModel):
    """Every instance stays warm `window_s` after its execution, on `generation`
    (`sim.functions.FixedKeepAlive`)."""

    name: Literal["fixed"] = "fixed"
    window_s: float = Field(default=600.0, ge=0)
    """Seconds an idle instance stays warm (10 minutes: the platforms' fixed window)."""
    generation: str = "i3"
    """The hardware generation every instance opens on ("i3" or "m5zn")."""


class CarbonAwareKeepAliveConfig(ConfigModel):
    """EcoLife's carbon-aware choice of window and generation, as an exhaustive search
    (`sim.functions.CarbonAwareKeepAlive`) over the windows 0, `window_step_s`, ... up to
    `max_window_s`."""

    name: Literal["carbon_aware"]
    max_window_s: float = Field(default=1800.0, ge=0)
    """The longest window it may choose, s (EcoLife: 30 minutes)."""
    window_step_s: float = Field(default=60.0, gt=0)
    """The spacing of the candidate windows, s (EcoLife: a minute)."""
    default_window_s: float = Field(default=600.0, ge=0)
    """The window of a function's first invocation (no gap seen yet), s."""
    default_generation: str = "i3"
    """The generation of a function's first invocation."""

    @model_validator(mode="after")
    def _few_windows(self) -> CarbonAwareKeepAliveConfig:
        count = int(self.max_window_s // self.window_step_s) + 1
        if count > MAX_WINDOWS:
            raise ValueError(
                f"max_window_s / window_step_s gives {count:,} candidate windows; at most "
                f"{MAX_WINDOWS:,} (each decision evaluates every one)"
            )
        return self

    def windows_s(self) -> tuple[float, ...]:
        """The candidate windows, s, shortest first."""
        count = int(self.max_window_s // self.window_step_s) + 1
        return tuple(k * self.window_step_s for k in range(count))


class FunctionsConfig(ConfigModel):
    """Serverless functions, drawn by the Azure-2019-calibrated generator from the run's
    `functions` random stream, run with keep-alive on the site `site` (its carbon signal
    and PUE) over the run's horizon."""

    site: str = Field(min_length=1)
    """The site whose carbon signal and PUE the functions run on."""
    functions: int = Field(ge=1, le=MAX_FUNCTIONS)
    """How many functions the generator draws."""
    max_rate_per_day: float | None = Field(default=None, gt=0, le=1e9)
    """Leave out the functions whose mean rate is above this many invocations a day (the
    simulation loops over every invocation; the rates reach millions a day); None: all."""
    history: int = Field(default=20, ge=1, le=10_000)
    """How many of a function's latest inter-arrival gaps the policy sees (EcoLife: 20)."""
    keep_alive: FixedKeepAliveConfig | CarbonAwareKeepAliveConfig = Field(
        default=FixedKeepAliveConfig(), discriminator="name"
    )
    """The keep-alive policy: `{ name = "fixed", window_s, generation }` or
    `{ name = "carbon_aware", max_window_s, window_step_s, default_window_s,
    default_generation }`."""
