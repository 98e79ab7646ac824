"""Bursty arrivals at the fluid level: how bursty a source is within a step (its excess
index of dispersion; times in s).

Arrivals burstier than Poisson within a step (the excess index of dispersion of the
source's counts in windows of 0.5 to 30 s within steps, measured once on its first 6
hours: 10 to 90 for the Azure code trace, 0 for a Poisson process or the synthetic
generator) fill and drain the slots within seconds, which no stationary law sees. The
fluid level serves such a source with the request level's engine (`fluid`), every request
followed.
"""

from __future__ import annotations

import numpy as np

from sim.serving.sources import RequestSource

_BURST_WINDOWS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Windows the arrivals' dispersion within a step is measured over, s."""
_BURST_SAMPLE_S = 6 * 3600.0
"""The arrivals' dispersion is measured over the first 6 hours at most."""
_CALM = 0.02
"""An excess dispersion (or rate variance) below this is taken as Poisson."""


def _excess_dispersion(
    source: RequestSource, step_s: float, horizon_s: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Windows (s) and the excess over Poisson of the index of dispersion of the source's
    arrival counts in windows of that length within a step (their variance about the
    step's mean over the mean, minus 1), over the first _BURST_SAMPLE_S at most; None when no window
    shows any (a Poisson process, or the expected counts of the synthetic generator)."""
    sample_s = min(horizon_s, _BURST_SAMPLE_S)
    steps = int(sample_s // step_s)
    windows, excess = [], []
    for window_s in _BURST_WINDOWS_S:
        bins = int(step_s // window_s)
        if bins < 2 or steps < 1:
            continue
        starts = np.arange(steps)[:, None] * step_s + np.arange(bins + 1)[None, :] * window_s
        edges = np.append(starts.ravel(), steps * step_s)  # each step's bins, then a gap
        counts = source.step_sums(edges)[0].reshape(steps, bins + 1)[:, :bins]
        total = counts.sum()
        if total <= 0:
            continue
        spread = ((counts - counts.mean(axis=1, keepdims=True)) ** 2).sum() * bins / (bins - 1)
        windows.append(window_s)
        excess.append(max(spread / total - 1.0, 0.0))
    if not windows or max(excess) < _CALM:
        return None
    return np.array(windows), np.array(excess)
