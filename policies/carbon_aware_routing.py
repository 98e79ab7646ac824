"""`carbon_aware_routing`: each service's requests to the sites where a request emits least,
within its latency target, its data-residency sites and the capacity of the replicas there.

Geographical load balancing for carbon (Liu et al., "Greening Geographical Load Balancing",
SIGMETRICS 2011; Souza et al., "CASPER: Carbon-Aware Scheduling and Provisioning for
Distributed Web Services", IGSC 2023), applied to LLM services (docs/policies-carbon-aware-
routing.md). Every `tick_s` (and at every other decision point), for each service:

1. Candidate sites: its `allowed_sites` (data residency; default all its sites) whose round
   trip from the requests' origin leaves the prefill and queueing budget of the time to
   first token: `rtt_s(site) x 1000 <= slo.ttft_ms - ttft_margin_ms`. If no allowed site
   passes, the allowed site nearest the origin (residency is a hard constraint, the
   latency rule a target).
2. Carbon per request at each candidate, g: the grid's intensity (now, or the forecast
   mean over the next tick) x PUE x the energy of one request on a replica with its batch
   full: (GPU power + host power of its GPUs) / requests per second, over the replicas
   ready there (capacity-weighted over its variants), else one replica of the own model.
3. Routing: the rate to serve until the next tick (the forecast peak, or the last step's
   rate if higher) fills the candidates cleanest first, each up to `utilisation` x the
   capacity of its ready replicas. Minimising sum(rate_s x g_s) under sum(rate_s) = rate
   and 0 <= rate_s <= cap_s is a fractional knapsack, which this greedy solves exactly.
   A rate above every candidate's share goes to the candidates in proportion to their
   capacity. The shares become one `Route`.
4. With `scale = true`, also the replicas of the own model: for the forecast peak over
   `lookahead_s`, at the candidates cleanest first, as free GPUs allow (booked before the
   planned job starts: an adjuster, like `serve_autoscale`, which it replaces). Replicas
   at a site outside `allowed_sites` go at once; those at other sites only when no replica
   of the service is in its cold start, so the old ones serve until the new ones do.
   With `scale = false` (default) it only routes, chained after `serve_autoscale` (or any
   other policy that sizes the replicas).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from policies.kit import Adjuster, FreeGpus, WindowMean, forecast_from_now
from policies.kit.inference import forecast_peak_rps
from sim.api import Action, PolicyError, Route, Scale, ServiceView, SystemState

__all__ = ["CarbonAwareRouting", "SiteOption", "fill_cleanest_first"]

J_PER_KWH = 3.6e6
SIGNALS = ("now", "forecast")


@dataclass(frozen=True, slots=True)
class SiteOption:
    """One candidate site of a service at this decision."""

    site: str
    g_per_request: float
    """Operational carbon of one request served there, g."""
    ready_rps: float
    """Requests/s its ready replicas serve with their batches full."""


def fill_cleanest_first(
    options: Sequence[SiteOption], rate_rps: float, utilisation: float
) -> dict[str, float]:
    """Requests/s per site: `rate_rps` filled into `options` by ascending carbon per request,
    each up to `utilisation` x its ready capacity (the fractional knapsack's optimum); what
    exceeds them all is spread in proportion to their ready capacity. Sites given nothing
    are left out."""
    ranked = sorted(options, key=lambda o: o.g_per_request)  # stable: ties keep site order
    rates: dict[str, float] = {}
    left = rate_rps
    for o in ranked:
        take = min(left, utilisation * o.ready_rps)
        if take > 0.0:
            rates[o.site] = take
            left -= take
    total_rps = sum(o.ready_rps for o in ranked)
    if left > 0.0 and total_rps > 0.0:
        for o in ranked:
            if o.ready_rps > 0.0:
                rates[o.site] = rates.get(o.site, 0.0) + left * o.ready_rps / total_rps
    return rates


@dataclass
class CarbonAwareRouting(Adjuster):
    tick_s: float = 300.0
    """Decide at least this often, s; the routing holds until the next decision."""
    ttft_margin_ms: float = 300.0
    """Time-to-first-token budget kept for prefill and queueing, ms: a site is a candidate
    if its round trip is at most `slo.ttft_ms - ttft_margin_ms`."""
    utilisation: float = 0.8
    """Share of a site's full-batch capacity the routing fills (0.8: serve_autoscale's
    default headroom of 25 %)."""
    signal: str = "forecast"
    """Carbon intensity used: "now", or "forecast" (its mean over the next tick)."""
    allowed_sites: dict[str, list[str]] = field(default_factory=dict)
    """Data residency: service name -> the sites its requests may go to (default: all its
    sites)."""
    scale: bool = False
    """Also place the own model's replicas at the clean candidates, within free GPUs."""
    lookahead_s: float = 900.0
    """With `scale`: replicas for the forecast peak over this horizon, s."""
    min_replicas: int = 1
    """With `scale`: replicas each service keeps, however low its rate."""

    def __post_init__(self) -> None:
        checks = (
            ("tick_s", 0 < self.tick_s < math.inf, "> 0"),
            ("ttft_margin_ms", 0 <= self.ttft_margin_ms < math.inf, ">= 0"),
            ("utilisation", 0 < self.utilisation <= 1, "in (0, 1]"),
            ("signal", self.signal in SIGNALS, f"one of {SIGNALS}"),
            ("lookahead_s", 0 <= self.lookahead_s < math.inf, ">= 0"),
            ("min_replicas", self.min_replicas >= 0, ">= 0"),
        )
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name} must be {want}, got {getattr(self, name)!r}")
        for name, sites in self.allowed_sites.items():
            if not sites:
                raise ValueError(f"allowed_sites.{name} must name at least one site, got []")

    def amend(self, state: SystemState, actions: Sequence[Action]) -> list[Action]:
        """Alone or after a scheduler: with `scale`, the services' replicas (their GPUs
        booked first), then the planned `actions` that still fit, then one `Route` per
        service; without, the plan unchanged and the routes."""
        free = FreeGpus(state) if self.scale else None
        plan: list[Action] = []
        routes: list[Action] = []
        for name in state.services:
            svc = state.service(name)
            allowed = self._allowed(svc)
            options = [self._option(state, svc, s) for s in self._candidates(svc, allowed)]
            if free is not None:
                plan += self._scale(svc, allowed, options, free)
            routes.append(self._route(svc, options))
        kept = list(actions) if free is None else [a for a in actions if free.book(a)]
        return plan + kept + routes

    # --- step 1: where a service's requests may go -----------------------------------------

    def _candidates(self, svc: ServiceView, allowed: list[str]) -> list[str]:
        """The `allowed` sites within the latency rule, in the service's order (step 1)."""
        budget_ms = svc.config.slo.ttft_ms - self.ttft_margin_ms
        near = [s for s in allowed if svc.rtt_s(s) * 1000.0 <= budget_ms]
        return near or [min(allowed, key=svc.rtt_s)]

    def _allowed(self, svc: ServiceView) -> list[str]:
        """The sites `svc`'s requests may go to (data residency), in its order."""
        sites = self.allowed_sites.get(svc.name)
        if sites is None:
            return list(svc.sites)
        unknown = [s for s in sites if s not in svc.sites]
        if unknown:
            raise PolicyError(
                f"carbon_aware_routing: allowed_sites.{svc.name} names {unknown[0]!r}, not "
                f"one of the service's sites ({', '.join(svc.sites)})"
            )
        return [s for s in svc.sites if s in sites]

    # --- step 2: carbon per request ---------------------------------------------------------

    def _intensity(self, state: SystemState, site: str) -> float:
        """g/kWh: now, or the forecast mean over the next tick."""
        length_s = min(self.tick_s, state.horizon_s - state.now_s)
        if self.signal == "now" or length_s <= 0.0:
            return state.carbon_intensity(site)
        times, values = forecast_from_now(state, site, length_s)
        return WindowMean(times, values)(state.now_s, length_s)

    def _option(self, state: SystemState, svc: ServiceView, site: str) -> SiteOption:
        """Carbon per request and ready capacity at `site` (step 2): the replicas ready
        there, all variants, or one replica of the own model if none is."""
        host_w = state.host_w_per_gpu(site)
        watts = rps = 0.0
        for variant in (v for where, v in svc.deployments if where == site):
            n = svc.replicas(site, variant)
            if n:
                point = svc.replica_point(site, variant)
                watts += n * (point.busy_w + host_w * point.gpus)
                rps += n * point.capacity_rps
        if rps > 0.0:
            j_per_request = watts / rps
        else:
            point = svc.replica_point(site)
            j_per_request = (point.busy_w + host_w * point.gpus) / point.capacity_rps
        g = self._intensity(state, site) * state.pue(site) * j_per_request / J_PER_KWH
        return SiteOption(site, g, rps)

    # --- step 3: routing --------------------------------------------------------------------

    def _route(self, svc: ServiceView, options: list[SiteOption]) -> Route:
        """The shares of the cleanest-first fill (step 3)."""
        rates = fill_cleanest_first(options, forecast_peak_rps(svc, self.tick_s), self.utilisation)
        if not rates:  # no rate, or no ready replica at a candidate: all to the cleanest
            rates = {min(options, key=lambda o: o.g_per_request).site: 1.0}
        return Route(svc, rates)

    # --- step 4: replicas -------------------------------------------------------------------

    def _scale(
        self, svc: ServiceView, allowed: list[str], options: list[SiteOption], free: FreeGpus
    ) -> list[Action]:
        """Own-model replicas for the forecast peak at the candidates, cleanest first, as
        far as `free` GPUs allow (step 4). Replicas at a site outside `allowed` go at once;
        others only at a decision that starts none and finds none in its cold start."""
        have = {s: svc.replicas(s) + svc.starting(s) for s in svc.sites}
        want = dict.fromkeys(svc.sites, 0)
        left = forecast_peak_rps(svc, self.lookahead_s)
        ranked = [o.site for o in sorted(options, key=lambda o: o.g_per_request)]
        for s in ranked:
            per_rps = self.utilisation * svc.capacity_rps(s)
            n = math.ceil(left / per_rps) if left > 0.0 else 0
            if s == ranked[0]:
                n = max(n, self.min_replicas)
            got = min(n, have[s])
            while got < n and free.take(s, svc.config.gpu, svc.config.gpus_per_replica):
                got += 1
            want[s] = got
            left -= min(left, got * per_rps)
        starting = any(svc.starting(s) or want[s] > have[s] for s in svc.sites)
        return [
            Scale(svc, s, want[s])
            for s in svc.sites
            if want[s] > have[s] or (want[s] < have[s] and (s not in allowed or not starting))
        ]
