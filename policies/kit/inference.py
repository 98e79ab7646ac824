"""What the inference policies share: a service's forecast peak rate, whether its last step
missed its SLO, and the carbon per request of a replica at a site, weighted by how dirty
the site's grid is now against its forecast mean (`ServingCarbon`).

Carbon per request of one replica with its batch full (`sim.api.ReplicaPoint`):

    g/request = (busy_w + host_w_per_gpu x gpus) x PUE x CI / capacity_rps / 3.6e6

(W x g/kWh / (requests/s) = g/kWh x J/request; 3.6e6 J per kWh). The budget rule of both
policies compares it, times `(CI now / CI forecast mean) ** tightening`, with a budget set
at the forecast mean intensity: at the mean the weight is 1; on a grid dirtier than usual
the budget tightens (docs/policies-carbon-aware-variants.md, "The carbon budget").
"""

from __future__ import annotations

import math

from policies.kit.time_shifting import DecisionForecast
from sim.api import ReplicaPoint, ServiceView, SystemState

__all__ = ["J_PER_KWH", "ServingCarbon", "forecast_peak_rps", "missed_slo"]

J_PER_KWH = 3.6e6


def forecast_peak_rps(svc: ServiceView, lookahead_s: float) -> float:
    """The highest arrival rate of `svc` over the next `lookahead_s` (its rate forecast),
    or the last step's rate if higher, requests/s."""
    _, rates = svc.rate_forecast(lookahead_s)
    last = svc.stats.rate_per_s  # NaN before the first step ends
    return max(float(rates.max()) if len(rates) else 0.0, 0.0 if math.isnan(last) else last)


def missed_slo(svc: ServiceView) -> bool:
    """Whether `svc`'s last completed step met its SLO for fewer than its `percentile` % of
    requests, or dropped one or more (the fluid level's expected drops are fractional);
    False before the first step ends."""
    stats = svc.stats
    return stats.dropped >= 1.0 or (  # NaN >= 1 is False: no step yet
        not math.isnan(stats.slo_attainment)
        and stats.slo_attainment < svc.config.slo.percentile / 100.0
    )


class ServingCarbon:
    """The sites' carbon figures of one decision: intensity now, its forecast mean over
    `window_s`, PUE and host power, each read once per site."""

    __slots__ = ("_sites", "_state", "tightening", "window_s")

    def __init__(self, state: SystemState, window_s: float, tightening: float):
        self._state = state
        self.window_s = window_s
        """Forecast window of the mean intensity, s from now."""
        self.tightening = tightening
        """Exponent of (CI now / CI mean) in the weight of a request's carbon."""
        self._sites: dict[str, tuple[float, float, float, float]] = {}

    def _site(self, site: str) -> tuple[float, float, float, float]:
        """(CI now g/kWh, forecast mean g/kWh, PUE, host W per GPU) of `site`."""
        got = self._sites.get(site)
        if got is None:
            state = self._state
            now = state.carbon_intensity(site)
            mean = DecisionForecast(state, site, self.window_s).mean_per_kwh(
                state.now_s, self.window_s
            )
            got = self._sites[site] = (now, mean, state.pue(site), state.host_w_per_gpu(site))
        return got

    def ratio(self, site: str) -> float:
        """Intensity now over its forecast mean at `site` (1 when both are 0)."""
        now, mean, _, _ = self._site(site)
        return now / mean if mean > 0 else (1.0 if now == 0 else math.inf)

    def g_per_request(self, site: str, point: ReplicaPoint) -> float:
        """Facility carbon per request of one replica at `site` with its batch full, now, g."""
        return self._g(site, point, self._site(site)[0])

    def g_per_request_at_mean(self, site: str, point: ReplicaPoint) -> float:
        """`g_per_request` at the site's forecast mean intensity instead of now, g."""
        return self._g(site, point, self._site(site)[1])

    def weighted_g_per_request(self, site: str, point: ReplicaPoint) -> float:
        """`g_per_request` times (CI now / CI mean) ** tightening: what the budget holds, g."""
        return self.g_per_request(site, point) * self.ratio(site) ** self.tightening

    def _g(self, site: str, point: ReplicaPoint, g_per_kwh: float) -> float:
        """Carbon per request of one replica at `site` at intensity `g_per_kwh`, g."""
        _, _, pue, host_w = self._site(site)
        watts = point.busy_w + host_w * point.gpus
        return watts * pue * g_per_kwh / point.capacity_rps / J_PER_KWH
