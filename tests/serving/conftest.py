"""Helpers of the serving tests: a one-site scenario's service, as a dict or as TOML."""

from __future__ import annotations

import tomli_w

from tests.conftest import BASE


def service(gpu: str, **keys) -> dict:
    """A `[[services]]` entry of Llama-3.1-8B on `gpu` at site "a", `keys` added."""
    return {
        "name": "chat",
        "model": "Llama-3.1-8B-Instruct",
        "gpu": gpu,
        "sites": ["a"],
        "slo": {"ttft_ms": 2000, "tpot_ms": 100},
        "requests": {"rate_per_s": 0.5},
        **keys,
    }


def service_toml(gpu: str, **keys) -> str:
    """`service(gpu, **keys)` as a scenario file's TOML."""
    return "\n" + tomli_w.dumps({"services": [service(gpu, **keys)]})


def sites(gpu: str, count: int = 8, **keys) -> list[dict]:
    """BASE's one site "a" with a pool of `count` `gpu`s, `keys` added."""
    return [{**BASE["sites"][0], "gpus": [{"model": gpu, "count": count}], **keys}]
