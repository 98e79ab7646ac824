"""The contract of a serving fidelity: one service's requests served by its replicas.

The engine's `Services` component owns the replicas' GPUs (taken from the sites' pools),
their cold starts and their power in the site ledger; a fidelity owns what happens to
the requests. The component drives it, always in time order:

- `configure(t_s, site, ready, model)`: from `t_s` on, `ready` replicas of `model`
  (a `ReplicaModel`, which carries the cap) serve at the service's site `site`. Fewer
  than before: the fidelity stops admitting on the surplus replicas and returns the time
  their last request will finish (the request level drains them; the fluid level frees
  them at once and returns `t_s`); the component frees their GPUs then.
- `set_shares(t_s, shares)`: from `t_s`, send each site this share of the requests
  (None: shares proportional to the ready replicas). Shares of sites without a ready
  replica go to the others, in proportion; with no ready replica anywhere a request is
  dropped.
- `advance_to(t_s)`: serve the requests up to `t_s`. Called before every `configure`,
  `set_shares` and `live`, and at the horizon with `close`.
- `source_changed(t_s)`: the requests arriving from `t_s` on have changed (a generation
  directive rescaled their output tokens, `RequestSource.output_factor`): read them again.

Definitions both fidelities follow (docs/serving.md):

- A request arriving at `a` goes to a site by the shares; served away from the
  service's origin it pays the round trip `rtt_s[site]` in its time to first token.
- It waits in its replica's queue until a batch slot is free (at most `model.slots`
  sequences in flight), then is in service: each iteration gives every sequence in the
  batch one token, an iteration with `n` in flight lasting `model.iter_s[n]`.
- Dropped: no ready replica when it arrives, or not admitted within `timeout_s`.
- `ttft_s` = wait + `model.prefill_s(input_tokens)` + rtt; `tpot_s` = time in service /
  output tokens. It meets its SLO when ttft <= `slo.ttft_ms` and tpot <= `slo.tpot_ms`;
  `slo_attainment` = requests that met it / all requests (dropped ones did not).
- A request belongs to the step (`step_s`) it arrived in.
- Power: the fidelity reports every change of the extra GPU power of the replicas
  serving at a site (sum over them of `model.power_w[n] - model.power_w[0]`, W) through
  `on_power(site, t_s, extra_w)`, in time order per site; exactly 0 with nothing in flight.
  Many changes at once may be reported in one call with increasing times `t_s` and their
  powers `extra_w` as numpy arrays. A fidelity that follows each replica's batch also
  reports, as a fourth argument, the replicas at the site with nothing in flight
  (`on_power(site, t_s, extra_w, idle)`, with every change of it; the request and
  iteration levels do): their GPUs are the service's idle ones
  (`energy_serving_idle_kwh`). Without it (the fluid level) a site's replicas count as
  idle only while it has nothing in flight at all.
- `advance_to(t)` serves the arrivals before `t` and the completions up to and including
  `t` (an arrival at `t` sees a `configure(t)` made after it).
- A new `model` (a cap) applies to the admitting replicas; draining ones keep theirs, so
  the time `configure` returned stays true.
- If every share falls on sites without a ready replica, requests go by ready replicas.
- Tokens (`tokens_generated`, a step's `tokens`) are the output tokens of served
  requests; requests still in service at the horizon are unfinished, their tokens not
  counted (their energy is).
- `live()` over the last completed step: TTFT over its admitted requests, TPOT over its
  served ones, SLO attainment over those served or dropped (its requests still in service
  are left out rather than counted as misses).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel
from sim.serving.sources import RequestSource

__all__ = ["STEP_COLUMNS", "LiveStats", "ServiceContext", "ServiceSim", "served_latencies"]

STEP_COLUMNS = (
    "step",
    "arrived",
    "served",
    "dropped",
    "tokens",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "slo_met",
)
"""Columns of `ServiceSim.step_table`: the step's index (its start is index x step_s),
requests arrived in it, of those served and dropped, output tokens they generated,
latency percentiles of the served ones (NaN with none) and how many met the SLO."""


@dataclass(frozen=True, slots=True)
class LiveStats:
    """What a policy sees of a service now (`SystemState.service`)."""

    rate_per_s: float
    """Arrivals per second over the last completed step."""
    queued: float
    """Requests waiting for a batch slot now (the fluid level's backlog at the start of the
    step in progress, or at the service's last change within it)."""
    in_flight: float
    """Requests in service now (the fluid level's mean over the last step)."""
    ttft_p99_ms: float
    """99th percentile time to first token over the last completed step (NaN: none)."""
    tpot_p99_ms: float
    slo_attainment: float
    """Share of the last completed step's requests that met the SLO (NaN: none)."""
    dropped: float
    """Requests of the last completed step that were dropped."""


@dataclass(frozen=True)
class ServiceContext:
    """What every fidelity is built from: the service, its requests and its run."""

    name: str
    source: RequestSource
    rtt_s: np.ndarray
    """Round trip from the origin to each of the service's deployments, s (0 at the origin)."""
    slo: SloConfig
    timeout_s: float
    """A request not admitted within this long is dropped, s."""
    step_s: float
    """Length of a step of the services table, s."""
    horizon_s: float
    """End of the run, s."""
    on_power: Callable[..., None]
    """Where the fidelity reports its replicas' power (module docstring, "Power")."""


class ServiceSim:
    """One service's requests, served at its sites (the base of every fidelity); its
    arguments are `ServiceContext`'s, kept as attributes of the same names."""

    def __init__(self, ctx: ServiceContext):
        self.name = ctx.name
        self.source = ctx.source
        self.rtt_s = np.asarray(ctx.rtt_s, dtype=float)
        self.slo = ctx.slo
        self.timeout_s = ctx.timeout_s
        self.step_s = ctx.step_s
        self.horizon_s = ctx.horizon_s
        self.n_steps = int(np.ceil(ctx.horizon_s / ctx.step_s))
        self.on_power = ctx.on_power
        self.setup()

    def setup(self) -> None:
        """Build the fidelity's own state; called once, at the end of `__init__`."""

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        """From `t_s`, `ready` replicas of `model` serve at `site`; returns when the GPUs of
        replicas taken out of service are free (`t_s` when none are)."""
        raise NotImplementedError

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        raise NotImplementedError

    def advance_to(self, t_s: float) -> None:
        raise NotImplementedError

    def source_changed(self, t_s: float) -> None:
        raise NotImplementedError

    def live(self) -> LiveStats:
        raise NotImplementedError

    def live_at(self, t_s: float) -> LiveStats:
        """`live()` as a policy reads it at `t_s` (s): the requests served up to `t_s`
        first. A fidelity whose statistics need less may advance less (the fluid level: to
        the start of the step in progress)."""
        self.advance_to(t_s)
        return self.live()

    def close(self, horizon_s: float) -> None:
        """Finish at the horizon: requests still queued or in service are neither served nor
        dropped (`unfinished` in the totals)."""
        raise NotImplementedError

    def step_table(self) -> pd.DataFrame:
        """One row per step, `STEP_COLUMNS`."""
        raise NotImplementedError

    def summary(self) -> dict[str, float]:
        """`requests_total`, `requests_served`, `requests_dropped`, `requests_unfinished`,
        `slo_met`, `tokens_generated`, `ttft_p99_ms`, `tpot_p99_ms` (NaN with nothing
        served): over the whole run."""
        raise NotImplementedError

    def latency_mixtures(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The served requests' `ttft_ms` and `tpot_ms` over the whole run, each as
        (latencies ms, requests at each): what the summary pools over the services into
        request-weighted percentiles. By default the served rows of `request_table` (one
        request each); the fluid level gives its mixtures (TTFT on its latency grid)."""
        table = self.request_table()
        if table is None:
            raise NotImplementedError
        return served_latencies(table)

    def served_by_site(self) -> np.ndarray:
        """float64[n_steps, sites]: requests served per step (of arrival) and site."""
        raise NotImplementedError

    def request_table(self) -> pd.DataFrame | None:
        """The request level's per-request records (None for the fluid level)."""
        return None


def served_latencies(table: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`ServiceSim.latency_mixtures` of a request table (`request_table`): the served
    requests' `ttft_ms` and `tpot_ms`, one request each."""
    served = (table["state"] == "served").to_numpy()
    return {
        key: (table[key].to_numpy()[served], np.ones(int(served.sum())))
        for key in ("ttft_ms", "tpot_ms")
    }
