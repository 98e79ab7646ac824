"""LLM serving: services' requests, replicas and fidelities over the performance and power
model of one replica (`sim.models.llm_performance`, calibrated on the ML.ENERGY
leaderboard v3 measurements; docs/serving.md), re-exported here.

`performance(model, gpu, num_gpus, max_batch, ...)` returns a `ServingPoint`; `MODELS`
lists the catalog ids; `ModelSpec` describes a model the catalog lacks.
"""

from __future__ import annotations

from typing import Any

from sim.models.llm import ARCHITECTURES, PRECISION_BYTES, ModelSpec
from sim.models.llm_performance import (
    ServingPoint,
    load_serving_model,
    performance,
    serving_model,
)

__all__ = [
    "ARCHITECTURES",
    "MODELS",
    "PRECISION_BYTES",
    "ModelSpec",
    "ServingPoint",
    "load_serving_model",
    "performance",
    "serving_model",
]


def __getattr__(name: str) -> Any:
    """`MODELS`: the catalog model ids (the leaderboard's short names), read on first use."""
    if name == "MODELS":
        return tuple(sorted(serving_model().models))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Requests (docs/request-format.md): the request table, its file, the synthetic generator,
# and the token-length laws (docs/serving.md "Lengths as distributions").
from sim.models.token_laws import FixedLaw, HistogramLaw, LogNormalLaw, TokenLaw  # noqa: E402
from sim.serving.requests import (  # noqa: E402
    RequestTable,
    TokenDistribution,
    read_requests,
    request_presets,
    synthetic_requests,
    write_requests,
)

__all__ += [
    "FixedLaw",
    "HistogramLaw",
    "LogNormalLaw",
    "TokenLaw",
    "RequestTable",
    "TokenDistribution",
    "read_requests",
    "request_presets",
    "synthetic_requests",
    "write_requests",
]
