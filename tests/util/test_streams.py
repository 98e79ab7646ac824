"""Per-id draws (`sim.util.streams.id_draws`): every job its own draw, even among millions."""

from __future__ import annotations

import zlib

import numpy as np

from sim.util.streams import id_draws


def _trace_style_ids() -> list[str]:
    """A million distinct job ids in the shapes real traces use: 400,000 hex names (as
    anonymised traces hash theirs), 300,000 Philly YARN application ids
    (application_<cluster start, ms>_<sequence>) and 300,000 Helios Slurm ids with the
    importer's cluster prefix ("venus-<id>")."""
    rng = np.random.default_rng(0)
    hex_names = [rng.bytes(12).hex() for _ in range(400_000)]
    philly = [
        f"application_{1506638472019 + 86_400_000 * d}_{n}" for d in range(60) for n in range(5000)
    ]
    helios = [f"venus-{n}" for n in range(300_000)]
    return hex_names + philly + helios


def test_a_million_trace_style_ids_get_a_million_different_draws():
    ids = _trace_style_ids()
    assert len(set(ids)) == 1_000_000
    u = id_draws(7, "training", ids)
    assert np.unique(u).size == len(ids)
    assert 0.0 <= u.min() and u.max() < 1.0


def test_ids_whose_crc32_collide_get_different_draws():
    a, b = "application_1502882184548_9121", "application_1507916272225_14225"
    assert zlib.crc32(a.encode()) == zlib.crc32(b.encode())  # the pair a 32-bit key merged
    for seed in (0, 1, 2):
        u = id_draws(seed, "training", [a, b])
        assert u[0] != u[1]
