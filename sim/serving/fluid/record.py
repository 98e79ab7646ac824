"""What the fluid level records of its pieces: the counts of each step (`_StepTotals`),
its latency percentiles (`_StepRecorder`, which also feeds the run's mixtures) and the
sites' power (`_PowerReport`); times in s, latencies in ms, power in W.

Requests count in the step they arrived in, served or dropped when they arrive (the wait
they will have is known then); a backlog shed later (fewer replicas) and the requests
queued or in flight at `close` are taken back from the latest steps (`take_back`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.serving.fluid.percentiles import _mixture_pct, _Part
from sim.serving.fluid.run_latency import _RunLatency
from sim.serving.fluid.serve import _SiteResult
from sim.serving.service_sim import STEP_COLUMNS

PERCENTILE_COLUMNS = STEP_COLUMNS[5:9]
"""The latency percentiles of `STEP_COLUMNS` (ms)."""


class _StepTotals:
    """Per step of arrival: requests arrived, served (in all and per site), dropped, the
    output tokens of those served and how many met the SLO; and the requests left
    unfinished at the horizon."""

    def __init__(self, n_steps: int, sites: int):
        self.arrived = np.zeros(n_steps)
        self.served = np.zeros(n_steps)
        self.served_site = np.zeros((n_steps, sites))
        self.dropped = np.zeros(n_steps)
        self.tokens = np.zeros(n_steps)
        self.slo_met = np.zeros(n_steps)
        self.unfinished = 0.0

    def add(
        self, k0: int, arrivals: np.ndarray, unrouted: bool, results: list[_SiteResult]
    ) -> None:
        """Add the pieces from step `k0` on, one per step: their `arrivals`, all dropped
        when `unrouted` (no replica ready anywhere), and what each site did of them."""
        count = len(arrivals)
        served = np.zeros(count)
        dropped = np.zeros(count)
        tokens = np.zeros(count)
        slo_met = np.zeros(count)
        if unrouted:
            dropped += arrivals
        span = slice(k0, k0 + count)
        for res in results:
            served += res.served
            self.served_site[span, res.site] += res.served
            dropped += res.dropped
            tokens += res.tokens
            slo_met += res.slo_met
        self.arrived[span] += arrivals
        self.served[span] += served
        self.dropped[span] += dropped
        self.tokens[span] += tokens
        self.slo_met[span] += slo_met

    def take_back(self, latest: int, count: float, to_dropped: bool, site: int | None) -> None:
        """Move `count` served requests of the steps up to `latest`, the latest first, to
        dropped (or unfinished): `site`'s (its backlog shed), as far as it served them;
        else every site's in proportion."""
        k = latest
        while count > 1e-12 and k >= 0:
            take = min(count, self.served[k])
            if take > 0:
                keep = 1 - take / self.served[k]
                self.tokens[k] *= keep
                self.slo_met[k] = min(self.slo_met[k], self.served[k] - take)
                self._take_back_site(k, take, keep, site)
                self.served[k] -= take
                if to_dropped:
                    self.dropped[k] += take
                else:
                    self.unfinished += take
                count -= take
            k -= 1

    def _take_back_site(self, k: int, take: float, keep: float, site: int | None) -> None:
        """Step `k`'s requests served per site less `take` (a share `1 - keep` of all):
        from `site` first, the rest from every site in proportion."""
        row = self.served_site[k]
        if site is not None:
            own = min(take, float(row[site]))
            row[site] -= own
            rest = float(row.sum())
            take -= own
            keep = 1.0 - take / rest if rest > 0 else 1.0
        row *= keep


class _StepRecorder:
    """The latency percentiles of each step (`PERCENTILE_COLUMNS`, ms; NaN: none served)
    from the mixture of its pieces, a step split over several `advance_to` gathered until
    it ends; the same pieces go to the run's mixtures (`run`). Also the mean sequences in
    flight over the last step ended."""

    def __init__(self, n_steps: int, step_s: float, horizon_s: float, run: _RunLatency):
        self._step_s = step_s
        self._horizon_s = horizon_s
        self._run = run
        self.pct = {col: np.full(n_steps, np.nan) for col in PERCENTILE_COLUMNS}
        self.last_in_flight = 0.0
        """Mean sequences in flight over the last step ended."""
        self._open: list[tuple[np.ndarray, _Part]] = []
        """Components of the step in progress (its pieces before the current time)."""
        self._open_seq_s = 0.0
        """Sequence-seconds in flight of the step in progress so far."""

    def add(self, edges: np.ndarray, steps: np.ndarray, results: list[_SiteResult]) -> None:
        """Record the pieces between `edges` (s), piece j in step `steps[j]`, served as
        `results` (none: no replica ready anywhere, every arrival dropped)."""
        dur = np.diff(edges)
        seq_s = np.zeros(len(dur))
        for res in results:
            seq_s += res.in_flight * dur
        step_end = np.minimum((steps + 1) * self._step_s, self._horizon_s)
        whole = (edges[:-1] == steps * self._step_s) & (edges[1:] >= step_end)
        for j in np.flatnonzero(~whole):  # the first and the last piece at most
            if results:
                self._open.extend(_parts(results, np.array([j])))
            self._open_seq_s += seq_s[j]
            if edges[j + 1] >= step_end[j]:
                if self._open:
                    self._record(np.array([steps[j]]), self._open)
                self.last_in_flight = self._open_seq_s / (step_end[j] - steps[j] * self._step_s)
                self._open, self._open_seq_s = [], 0.0
        if whole.any() and results:
            rows = np.flatnonzero(whole)
            mixed = np.zeros(len(dur), dtype=bool)
            for res in results:
                mixed |= res.mixed
            for subset in (rows[~mixed[rows]], rows[mixed[rows]]):
                parts = _parts(results, subset)
                if parts:
                    self._record(steps[subset], parts)
        if whole.any():
            last = int(np.flatnonzero(whole)[-1])
            self.last_in_flight = seq_s[last] / dur[last]

    def _record(self, steps: np.ndarray, parts: list[tuple[np.ndarray, _Part]]) -> None:
        """Write the percentiles of `steps` (rows of `parts`) and add `parts` to the
        run-wide mixtures."""
        for kind in ("ttft", "tpot"):
            for name, p in (("p50", 0.5), ("p99", 0.99)):
                self.pct[f"{kind}_{name}_ms"][steps] = 1e3 * _mixture_pct(parts, p, kind == "ttft")
        self._run.add(parts)


def _parts(results: list[_SiteResult], rows: np.ndarray) -> list[tuple[np.ndarray, _Part]]:
    """The components (requests, component) of pieces `rows` over all sites, those that
    serve any."""
    if len(rows) == len(results[0].served):
        return [(n, c) for res in results for n, c in res.parts if n.any()]
    return [(n[rows], c.rows(rows)) for res in results for n, c in res.parts if n[rows].any()]


class _PowerReport:
    """Reports each site's extra power (W) to `on_power` where it changes."""

    def __init__(self, on_power: Callable[..., None], sites: int):
        self.on_power = on_power
        self._reported_w = np.full(sites, np.nan)
        """The extra power last reported at each site, W (NaN: none yet)."""

    def report(self, site: int, starts: np.ndarray, extra_w: np.ndarray) -> None:
        """The site's extra power from `starts` (s) on: its changes in one call (floats for
        one, arrays for more)."""
        changed = np.flatnonzero(
            extra_w != np.concatenate([[self._reported_w[site]], extra_w[:-1]])
        )
        if len(changed) == 1:
            self.on_power(site, float(starts[changed[0]]), float(extra_w[changed[0]]))
        elif len(changed):
            self.on_power(site, starts[changed], extra_w[changed])
        self._reported_w[site] = extra_w[-1]
