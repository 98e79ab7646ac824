"""The fluid fidelity's `ServiceSim`, `Fluid`: a service's requests as flows, a step at a
time (the definitions: the package docstring); times in s, token rates in tokens/s,
power in W, energy in kWh as `ServiceSim` reports it. `fluid` builds the fidelity of a
service: `Fluid`, or the request level for a source burstier than Poisson within a step.

`Fluid` keeps the replicas ready at each site and the shares, and splits an
`advance_to` into pieces (a step each, cut at the current time); each site serves its
share of a piece's arrivals by the chain (`serve`: waiting and power;
`memory`: the pieces that carry state), and the pieces are recorded (`record`: the step
counts, percentiles and power; `run_latency`: the run's p99s). An `advance_to` reports
the power's changes of a site in one call (arrays).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.models.llm_replica import ReplicaModel
from sim.serving.fluid.burst import _excess_dispersion
from sim.serving.fluid.record import (
    PERCENTILE_COLUMNS,
    _PowerReport,
    _StepRecorder,
    _StepTotals,
)
from sim.serving.fluid.run_latency import _RunLatency
from sim.serving.fluid.serve import _Flows, _SiteResult
from sim.serving.request_level import RequestLevel
from sim.serving.service_sim import STEP_COLUMNS, LiveStats, ServiceContext, ServiceSim


def fluid(ctx: ServiceContext) -> ServiceSim:
    """The fluid fidelity of a service: `Fluid`, or, for a source whose arrivals are
    burstier than Poisson within a step (`_excess_dispersion`: the Azure traces), the
    request level's engine (`RequestLevel`), every request followed. No stationary law
    sees such bursts, and following them is the request level's work: its results, at its
    cost."""
    bursty = _excess_dispersion(ctx.source, ctx.step_s, ctx.horizon_s) is not None
    return (RequestLevel if bursty else Fluid)(ctx)


class Fluid(ServiceSim):
    """The fluid fidelity (module docstring): per-step flows through queueing formulas, for
    sources whose arrivals are Poisson within a step (`fluid` serves the others with the
    request level's engine: the formulas miss their bursts)."""

    def setup(self) -> None:
        sites = len(self.rtt_s)
        self._ready = np.zeros(sites, dtype=np.int64)
        self._models: list[ReplicaModel | None] = [None] * sites
        self._shares: np.ndarray | None = None
        self._t = 0.0
        """Time served up to, s."""
        self._flows = _Flows(self.source, self.slo, self.timeout_s, self.rtt_s)
        self._totals = _StepTotals(self.n_steps, sites)
        self._run = _RunLatency()
        self._steps = _StepRecorder(self.n_steps, self.step_s, self.horizon_s, self._run)
        self._power = _PowerReport(self.on_power, sites)

    # -- the contract -----------------------------------------------------------------

    def configure(self, t_s: float, site: int, ready: int, model: ReplicaModel) -> float:
        self.advance_to(t_s)
        before = int(self._ready[site])
        self._ready[site] = int(ready)
        self._models[site] = model
        shed = self._flows.resize(t_s, site, before, int(ready), model)
        if shed > 0:
            self._totals.take_back(self._latest_step(), shed, to_dropped=True, site=site)
        return t_s

    def set_shares(self, t_s: float, shares: np.ndarray | None) -> None:
        self.advance_to(t_s)
        self._shares = None if shares is None else np.array(shares, dtype=float)

    def advance_to(self, t_s: float) -> None:
        t_s = min(t_s, self.horizon_s)
        if t_s <= self._t:
            return
        k0 = self._step_of(self._t)
        k1 = self._step_of(t_s)
        k1 += k1 * self.step_s < t_s  # the first grid time at or after t_s
        edges = np.concatenate([[self._t], np.arange(k0 + 1, k1) * self.step_s, [t_s]])
        steps = k0 + np.arange(len(edges) - 1)
        self._t = t_s
        arrivals, _, out_tokens = self.source.step_sums(edges)
        shares = self._site_shares()
        results: list[_SiteResult] = []
        for site in range(len(self.rtt_s)):
            if self._ready[site] == 0:
                self._power.report(site, edges[:1], np.zeros(1))
                continue
            model = self._models[site]
            assert model is not None
            share = 0.0 if shares is None else float(shares[site])
            res = self._flows.serve(
                site,
                model,
                int(self._ready[site]),
                np.diff(edges),
                share * arrivals,
                share * out_tokens,
            )
            results.append(res)
            self._power.report(site, edges[:-1], res.extra_w)
        self._totals.add(k0, arrivals, shares is None, results)
        self._steps.add(edges, steps, results)

    def source_changed(self, t_s: float) -> None:
        """The fluid level reads no arrival ahead of its time; a directive changes the
        output tokens the backlog's requests are expected to generate."""
        self.advance_to(t_s)
        factor = self.source.output_factor(t_s)
        self._flows.mean_out = float(self.source.tokens.mean_output) * factor

    def served_by_site(self) -> np.ndarray:
        return self._totals.served_site.copy()

    def live(self) -> LiveStats:
        k = self._step_of(self._t) - 1 if self._t < self.horizon_s else self.n_steps - 1
        queued = float(self._flows.backlog.sum())
        if k < 0:
            nan = math.nan
            return LiveStats(nan, queued, 0.0, nan, nan, nan, 0.0)
        totals = self._totals
        length = min((k + 1) * self.step_s, self.horizon_s) - k * self.step_s
        decided = float(totals.served[k] + totals.dropped[k])
        return LiveStats(
            rate_per_s=float(totals.arrived[k]) / length,
            queued=queued,
            in_flight=self._steps.last_in_flight,
            ttft_p99_ms=float(self._steps.pct["ttft_p99_ms"][k]),
            tpot_p99_ms=float(self._steps.pct["tpot_p99_ms"][k]),
            slo_attainment=float(totals.slo_met[k] / decided) if decided > 0 else math.nan,
            dropped=float(totals.dropped[k]),
        )

    def live_at(self, t_s: float) -> LiveStats:
        """`live()` at `t_s`: the last completed step's statistics need the requests served
        up to the start of the step in progress only, and a read does not cut that step
        (the pieces of a step are served one by one, so a cut would change its results)."""
        self.advance_to(t_s if t_s >= self.horizon_s else self._step_of(t_s) * self.step_s)
        return self.live()

    def close(self, horizon_s: float) -> None:
        self.advance_to(horizon_s)
        left = self._flows.clear()
        self._totals.take_back(self._latest_step(), left, to_dropped=False, site=None)

    def step_table(self) -> pd.DataFrame:
        """`STEP_COLUMNS` per step, the level's own arrays (not copied: a year of steps is
        read once, at the end)."""
        totals = self._totals
        return pd.DataFrame(
            {
                "step": np.arange(self.n_steps),
                "arrived": totals.arrived,
                "served": totals.served,
                "dropped": totals.dropped,
                "tokens": totals.tokens,
                **{col: self._steps.pct[col] for col in PERCENTILE_COLUMNS},
                "slo_met": totals.slo_met,
            },
            columns=list(STEP_COLUMNS),
            copy=False,
        )

    def summary(self) -> dict[str, float]:
        totals = self._totals
        return {
            "requests_total": float(totals.arrived.sum()),
            "requests_served": float(totals.served.sum()),
            "requests_dropped": float(totals.dropped.sum()),
            "requests_unfinished": totals.unfinished,
            "slo_met": float(totals.slo_met.sum()),
            "tokens_generated": float(totals.tokens.sum()),
            "ttft_p99_ms": 1e3 * self._run.ttft_p99_s(),
            "tpot_p99_ms": 1e3 * self._run.tpot_p99_s(),
        }

    def latency_mixtures(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return self._run.mixtures_ms()

    # -- helpers ----------------------------------------------------------------------

    def _step_of(self, t_s: float) -> int:
        """The step `t_s` (s) is in: k with k x step_s <= t_s < (k + 1) x step_s, those
        products as the step grid has them (`t_s // step_s` may be one off for a step that
        is no whole number of seconds, 45.3 s: 3 x 45.3 // 45.3 == 2)."""
        k = int(t_s // self.step_s)
        return k + 1 if (k + 1) * self.step_s <= t_s else k - 1 if k * self.step_s > t_s else k

    def _latest_step(self) -> int:
        """The step the current time is in (the last one at the horizon)."""
        return min(self._step_of(self._t), self.n_steps - 1)

    def _site_shares(self) -> np.ndarray | None:
        """Each site's share of the arrivals now (None: no ready replica anywhere)."""
        ready = self._ready > 0
        if not ready.any():
            return None
        if self._shares is not None:
            s = np.where(ready, self._shares, 0.0)
            if s.sum() > 0:
                return s / s.sum()
        return self._ready / self._ready.sum()
