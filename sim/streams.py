"""The random streams of a run: one independent generator per component, from the seed."""

from __future__ import annotations

import numpy as np

STREAMS = ("workload", "forecast", "services", "failures", "prediction", "training")
"""The random streams of a run, in spawn order: new components append theirs at the end,
so that existing ones never move."""


def seed_sequences(seed: int) -> dict[str, np.random.SeedSequence]:
    """Independent seed sequences per component, spawned from one SeedSequence, so that
    changing one component (say, the policy) never changes another's draws (the workload)."""
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return dict(zip(STREAMS, children, strict=True))


def random_streams(seed: int) -> dict[str, np.random.Generator]:
    """A random generator per component (`seed_sequences`)."""
    return {n: np.random.default_rng(c) for n, c in seed_sequences(seed).items()}
