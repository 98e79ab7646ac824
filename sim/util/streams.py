"""The random streams of a run: one independent generator per component, from the seed."""

from __future__ import annotations

import zlib

import numpy as np

STREAMS = (
    "workload",
    "forecast",
    "services",
    "failures",
    "prediction",
    "training",
    "rebound",
    "spot",
)
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


def id_draws(seed: int, stream: str, ids) -> np.ndarray:
    """A uniform draw in [0, 1) per id from the run's `stream`: splitmix64 (Steele, Lea,
    Flood, OOPSLA 2014) of the stream's state mixed with the CRC-32 of each id, so an item
    (a job) keeps its draw whatever else the run holds and wherever it stands in a file."""
    state = seed_sequences(seed)[stream].generate_state(1, np.uint64)[0]
    crc = np.fromiter((zlib.crc32(str(i).encode()) for i in ids), np.uint64, len(ids))
    with np.errstate(over="ignore"):
        x = state ^ (crc * np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53
