"""The topohub catalog of geographic network topologies: the keys a scenario's
`wan.topology` may name (`topohub_key`), read from the installed `topohub` package's data.
`sim.network.topology` loads the graphs.
"""

from __future__ import annotations

import difflib
import importlib.resources
from functools import lru_cache

__all__ = ["GEO_GROUPS", "bare_name", "topohub_key"]

GEO_GROUPS = ("backbone", "topozoo", "sndlib", "caida")
"""topohub groups with geographic (lon, lat) node positions; `gabriel` graphs are synthetic
plane drawings and cannot be used."""


@lru_cache(maxsize=1)
def _topohub_keys() -> dict[str, list[str]]:
    """The geographic topohub keys by group, e.g. {"backbone": ["backbone/africa", ...]}."""
    import topohub

    root = importlib.resources.files(topohub) / "data"
    keys: dict[str, list[str]] = {}
    for group in GEO_GROUPS:
        found: list[str] = []
        stack = [(root / group, group)]
        while stack:
            folder, prefix = stack.pop()
            if not folder.is_dir():
                continue
            for entry in folder.iterdir():
                if entry.is_dir():
                    stack.append((entry, f"{prefix}/{entry.name}"))
                elif entry.name.endswith(".json"):
                    found.append(f"{prefix}/{entry.name[:-5]}")
        keys[group] = sorted(found)
    return keys


def topohub_key(name: str) -> str:
    """The topohub key of a scenario's `wan.topology` value: a bare name is a backbone map
    ("world" -> "backbone/world"), anything with a slash a topohub key ("topozoo/Abilene").
    Raises ValueError naming the value, the known backbone maps and close matches."""
    key = name if "/" in name else f"backbone/{name}"
    group = key.split("/", 1)[0]
    if group == "gabriel":
        raise ValueError(
            f"{name!r}: topohub's gabriel graphs are synthetic plane drawings without "
            "latitude/longitude; use a backbone map, topozoo/..., sndlib/... or caida/..."
        )
    keys = _topohub_keys()
    if key in keys.get(group, ()):
        if not _geographic(key):
            raise ValueError(
                f"{name!r}: this topohub graph has plane coordinates, not latitude/longitude"
            )
        return key
    pool = keys.get(group) or [k for ks in keys.values() for k in ks]
    close = difflib.get_close_matches(key, pool, n=3, cutoff=0.6)
    backbone = ", ".join(k.split("/", 1)[1] for k in keys["backbone"])
    hint = f" (did you mean {', '.join(repr(bare_name(c)) for c in close)}?)" if close else ""
    raise ValueError(
        f"unknown topohub topology {name!r}{hint}; backbone maps: {backbone}; other networks "
        'as "topozoo/NAME", "sndlib/NAME" or "caida/2024-08/ASN"'
    )


@lru_cache(maxsize=64)
def _geographic(key: str) -> bool:
    """Whether every node of topohub graph `key` has a (lon, lat) position on the globe
    (some SNDlib graphs are drawn on a plane)."""
    if key.startswith("backbone/"):
        return True
    import topohub

    return all(
        -180 <= n["pos"][0] <= 180 and -90 <= n["pos"][1] <= 90 for n in topohub.get(key)["nodes"]
    )


def bare_name(key: str) -> str:
    """The scenario's name of topohub key `key` ("backbone/world" -> "world")."""
    return key.split("/", 1)[1] if key.startswith("backbone/") else key
