"""Prediction error: the runtimes a policy is told are off by a factor per (job, GPU model).

With `[prediction_error]` (`sim.config.workload.PredictionErrorConfig`), the runtime of job `j`
on GPU model `m` that `state.estimate`, `state.runtime_s` and `state.expected_ends`
report is the true one times a factor f[j, m] = exp(sigma_m x z), z ~ N(0, 1): lognormal,
median 1, log-standard deviation sigma_m. The factors are drawn once, when the run is
built, from the run's own `prediction` random stream (`sim.util.streams.STREAMS`), so they depend
on the seed only (not on what the policy asks, or when) and move no other draw. The
engine's truth (completions, energy, carbon) never sees them.
"""

from __future__ import annotations

import numpy as np

from sim.config.scenario import Scenario
from sim.config.workload import PredictionErrorConfig

__all__ = ["Prediction", "build_prediction"]


class Prediction:
    """The runtime factors of every (job, GPU model) of a run."""

    __slots__ = ("columns", "factors")

    def __init__(self, models: list[str], factors: np.ndarray):
        self.columns = {m: i for i, m in enumerate(models)}
        """The column of `factors` of each GPU model."""
        self.factors = factors
        """Runtime factors, one row per job, one column per GPU model (dimensionless)."""

    def factor(self, j: int, model: str) -> float:
        """The factor of job `j`'s runtimes on `model`."""
        return float(self.factors[j, self.columns[model]])


def draw_factors(
    config: PredictionErrorConfig, models: list[str], n_jobs: int, rng: np.random.Generator
) -> np.ndarray:
    """exp(sigma_m x z) per (job, model) with z standard normal, drawn job by job (a job's
    factors do not depend on how many jobs follow it); a model of sigma 0 gets exactly 1."""
    sigmas = np.array([config.sigma(m) for m in models])
    return np.exp(rng.standard_normal((n_jobs, len(models))) * sigmas)


def build_prediction(
    scenario: Scenario, n_jobs: int, rng: np.random.Generator
) -> Prediction | None:
    """The prediction error of `scenario`'s `n_jobs` jobs over its GPU models (sorted by
    name); None without `[prediction_error]`."""
    config = scenario.prediction_error
    if config is None:
        return None
    models = sorted({p.model for s in scenario.sites for p in s.gpus})
    return Prediction(models, draw_factors(config, models, n_jobs, rng))
