"""The random streams of a run: one independent generator per component, from the seed."""

from __future__ import annotations

import hashlib

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
    "functions",
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
    """A uniform draw in [0, 1) per id from the run's `stream`, so an item (a job) keeps its
    draw whatever else the run holds and wherever it stands in a file.

    The id's 64-bit key is its BLAKE2b digest (RFC 7693; `hashlib.blake2b`, digest_size=8)
    of its UTF-8 text (`str(id)`), keyed with 32 bytes of the stream's state: a keyed hash
    is a pseudo-random function of (stream, id), so distinct ids get independent draws. The
    draw is the key's top 53 bits (a double's precision): two ids share one with probability
    2^-53, about n^2 / 2^54 pairs among n ids (6e-5 for a million). Chosen over a
    `SeedSequence` per id (the digest as its spawn key), as independent but about 10 us per
    id against 1 us here (a million ids: 1 s). The CRC-32 of the id used before gave about
    n^2 / 2^33 colliding pairs among n ids (116 among a million), each pair one draw."""
    key = seed_sequences(seed)[stream].generate_state(4, np.uint64).tobytes()
    words = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(str(i).encode(), digest_size=8, key=key).digest())
            for i in ids
        ),
        np.uint64,
        len(ids),
    )
    return (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
