"""The quality of the answers a service served: each served request carries its variant's
quality minus its directive's penalty (docs/inference-levers.md).

The request level knows every request's deployment and arrival, so its quality is exact
per request. The fluid level knows the requests served per step and deployment; a step's
requests are split over the directive levels in force during it in proportion to their
arrivals (exact whenever directives change on step boundaries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.serving.sources import RequestSource

__all__ = ["QualityTally", "directive_mix", "tally_requests", "tally_steps"]


@dataclass(frozen=True, slots=True)
class QualityTally:
    """One service's served quality per step (float64 arrays, one element per step)."""

    quality_sum: np.ndarray
    """Sum of the quality of the served requests of known quality."""
    known: np.ndarray
    """Served requests of known quality (a variant without a score has none)."""
    below_floor: np.ndarray
    """Served requests below the service's quality floor (0 without a floor)."""
    served: np.ndarray

    def mean(self) -> np.ndarray:
        """Mean served quality per step (NaN: none served of known quality)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.known > 0, self.quality_sum / self.known, np.nan)


def _directive_at(log_s: np.ndarray, log_level: np.ndarray, t_s: np.ndarray) -> np.ndarray:
    """The directive level in force at each time (a change applies from its time on)."""
    return log_level[np.searchsorted(log_s, t_s, side="right") - 1]


def tally_requests(
    site: np.ndarray,
    arrival_s: np.ndarray,
    served: np.ndarray,
    level_quality: np.ndarray,
    penalty: np.ndarray,
    log_s: np.ndarray,
    log_level: np.ndarray,
    floor: float | None,
    step_s: float,
    n_steps: int,
) -> tuple[QualityTally, np.ndarray]:
    """Per request: its quality (NaN unless served with a known quality); and the tally.
    `site` is each request's deployment (-1: none), `level_quality` each deployment's
    variant quality (NaN: unknown), `penalty` each directive level's, `log_s`/`log_level`
    the directive changes (the first at 0)."""
    quality = np.full(len(site), np.nan)
    q = level_quality[site[served]] - penalty[_directive_at(log_s, log_level, arrival_s[served])]
    quality[served] = q
    step = np.clip(np.floor(arrival_s[served] / step_s), 0, n_steps - 1).astype(np.int64)
    known = np.isfinite(q)

    def per_step(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        w = None if weights is None else weights[mask]
        return np.bincount(step[mask], weights=w, minlength=n_steps).astype(float)

    below = known & (q < floor) if floor is not None else np.zeros(len(q), dtype=bool)
    tally = QualityTally(
        per_step(known, np.where(known, q, 0.0)),
        per_step(known),
        per_step(below),
        per_step(np.ones(len(q), dtype=bool)),
    )
    return tally, quality


def directive_mix(
    source: RequestSource,
    edges_s: np.ndarray,
    log_s: np.ndarray,
    log_level: np.ndarray,
    levels: int,
) -> np.ndarray:
    """float64[steps, levels]: each step's share of arrivals under each directive level
    (steps without arrivals: all in the level in force at their start). Without a change
    inside the steps, each step's arrivals are all in the level at its start (no arrivals
    read)."""
    edges = np.asarray(edges_s, dtype=float)
    inner = log_s[(log_s > edges[0]) & (log_s < edges[-1])]
    if not len(inner):
        mix = np.zeros((len(edges) - 1, levels))
        mix[np.arange(len(edges) - 1), _directive_at(log_s, log_level, edges[:-1])] = 1.0
        return mix
    fine = np.union1d(edges, inner)
    arrivals = source.step_sums(fine)[0]
    piece_level = _directive_at(log_s, log_level, fine[:-1])
    step = np.searchsorted(edges, fine[:-1], side="right") - 1
    mix = np.zeros((len(edges) - 1, levels))
    np.add.at(mix, (step, piece_level), arrivals)
    total = mix.sum(axis=1)
    empty = total <= 0
    mix[empty, _directive_at(log_s, log_level, edges[:-1][empty])] = 1.0
    total[empty] = 1.0
    return mix / total[:, None]


def tally_steps(
    served_by_site: np.ndarray,
    level_quality: np.ndarray,
    penalty: np.ndarray,
    mix: np.ndarray,
    floor: float | None,
) -> QualityTally:
    """The tally from requests served per (step, deployment) and the directive `mix`."""
    # quality of (deployment, level), and served per (step, deployment, level)
    q = level_quality[:, None] - penalty[None, :]
    served = served_by_site[:, :, None] * mix[:, None, :]
    known = np.isfinite(q)[None, :, :]
    below = known & (q < floor)[None, :, :] if floor is not None else np.zeros_like(known)
    return QualityTally(
        (served * np.where(known, q, 0.0)).sum(axis=(1, 2)),
        (served * known).sum(axis=(1, 2)),
        (served * below).sum(axis=(1, 2)),
        served_by_site.sum(axis=1),
    )
