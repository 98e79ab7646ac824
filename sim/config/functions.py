"""`[functions]`: serverless functions run beside the GPU fleet (docs/functions.md, "In a
run"): the site they run on, how many the generator draws, and the keep-alive policy.

The generation name (`keep_alive.generation`) is checked against the
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


class KeepAliveConfig(ConfigModel):
    """The keep-alive policy: "fixed" keeps every instance warm `window_s` on `generation`
    (`sim.functions.FixedKeepAlive`); "carbon_aware" is EcoLife's choice of window and
    generation, as an exhaustive search (`sim.functions.CarbonAwareKeepAlive`) over the
    windows 0, `window_step_s`, ... up to `max_window_s`, with `window_s` and `generation`
    for a function's first invocation (no gap seen yet)."""

    name: Literal["fixed", "carbon_aware"] = "fixed"
    window_s: float = Field(default=600.0, ge=0)
    """Seconds an idle instance stays warm (10 minutes: the platforms' fixed window);
    "carbon_aware": after a function's first invocation."""
    generation: str = "i3"
    """The hardware generation instances open on ("i3" or "m5zn"); "carbon_aware": a
    function's first instance."""
    max_window_s: float | None = Field(default=None, ge=0)
    """"carbon_aware" only: the longest window it may choose, s (default 1800: EcoLife's 30
    minutes)."""
    window_step_s: float | None = Field(default=None, gt=0)
    """"carbon_aware" only: the spacing of the candidate windows, s (default 60: EcoLife's
    minute)."""

    @model_validator(mode="after")
    def _keys_fit_the_name(self) -> KeepAliveConfig:
        for key in ("max_window_s", "window_step_s"):
            value = getattr(self, key)
            if value is not None and self.name != "carbon_aware":
                raise ValueError(
                    f'{key} is only meaningful with name = "carbon_aware", not "{self.name}" '
                    f"(got {key} = {value}); remove it or change the name"
                )
        count = len(self.windows_s())
        if count > MAX_WINDOWS:
            raise ValueError(
                f"max_window_s / window_step_s gives {count:,} candidate windows; at most "
                f"{MAX_WINDOWS:,} (each decision evaluates every one)"
            )
        return self

    def windows_s(self) -> tuple[float, ...]:
        """The carbon-aware policy's candidate windows, s, shortest first."""
        step_s = 60.0 if self.window_step_s is None else self.window_step_s
        longest_s = 1800.0 if self.max_window_s is None else self.max_window_s
        return tuple(k * step_s for k in range(int(longest_s // step_s) + 1))


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
    keep_alive: KeepAliveConfig = KeepAliveConfig()
    """The keep-alive policy: `{ name = "fixed", window_s, generation }` or
    `{ name = "carbon_aware", max_window_s, window_step_s, window_s, generation }`."""
