"""Quality of served answers: a published benchmark score per catalog model, and generation
directives that shorten answers at a quality penalty (docs/serving-quality.md).

Pure: the defaults are read once from `sim/data/serving_quality.toml`. A score is MMLU-Pro
accuracy in percent (0-100); a directive's `quality_penalty` is in the same points, its
`output_factor` is the mean output length relative to the `normal` directive.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from sim.models.llm import finite_real
from sim.models.llm_performance import serving_model

__all__ = [
    "QUALITY_BENCHMARK",
    "Directive",
    "QualityScore",
    "default_directives",
    "model_quality",
    "quality_scores",
]

_FILE = "sim/data/serving_quality.toml"
QUALITY_BENCHMARK = "MMLU-Pro"
"""The benchmark every default score comes from (accuracy, %)."""


@dataclass(frozen=True)
class QualityScore:
    """A catalog model's published benchmark score (0-100], its source and caveats."""

    model: str
    score: float
    source: str
    note: str


@dataclass(frozen=True)
class Directive:
    """A generation directive level: `output_factor` scales the mean output length (normal = 1),
    `quality_penalty` is subtracted from the variant's score (benchmark points)."""

    name: str
    output_factor: float
    quality_penalty: float
    source: str


def _catalog() -> tuple[str, ...]:
    """The serving catalog's model ids."""
    return tuple(sorted(serving_model().models))


def _number(value: Any, key: str, low: float, high: float, low_open: bool) -> float:
    """`value` as a float in the range, else ValueError naming the file, key and value."""
    x = finite_real(value)
    above_low = x is not None and (x > low if low_open else x >= low)
    if x is None or not above_low or x > high:
        bracket = "(" if low_open else "["
        raise ValueError(f"{_FILE}: {key} must be in {bracket}{low}, {high}], got {value!r}")
    return x


def _text(value: Any, key: str) -> str:
    """`value` as a non-empty string, else ValueError naming the file and key."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{_FILE}: {key} must be a non-empty string, got {value!r}")
    return value


def _scores(raw: Mapping[str, Any]) -> dict[str, QualityScore]:
    """The [scores] tables, checked against the serving catalog."""
    catalog = _catalog()
    out = {}
    for model, entry in raw.items():
        key = f"scores.{model!r}"
        if model not in catalog:
            raise ValueError(f"{_FILE}: {key} is not a serving catalog model {list(catalog)}")
        out[model] = QualityScore(
            model,
            _number(entry.get("score"), f"{key}.score", 0.0, 100.0, low_open=True),
            _text(entry.get("source"), f"{key}.source"),
            _text(entry.get("note"), f"{key}.note"),
        )
    return out


def _directives(raw: list[Mapping[str, Any]]) -> tuple[Directive, ...]:
    """The [[directives]] tables; the first must be `normal` with factor 1 and penalty 0."""
    out = tuple(
        Directive(
            _text(entry.get("name"), f"directives[{i}].name"),
            _number(entry.get("output_factor"), f"directives[{i}].output_factor", 0.0, 1.0, True),
            _number(
                entry.get("quality_penalty"), f"directives[{i}].quality_penalty", 0.0, 100.0, False
            ),
            _text(entry.get("source"), f"directives[{i}].source"),
        )
        for i, entry in enumerate(raw)
    )
    if not out or (out[0].name, out[0].output_factor, out[0].quality_penalty) != ("normal", 1, 0):
        first = out[0] if out else None
        raise ValueError(
            f"{_FILE}: directives[0] must be normal with output_factor 1 and quality_penalty 0, "
            f"got {first!r}"
        )
    return out


@cache
def _load() -> tuple[Mapping[str, QualityScore], tuple[Directive, ...]]:
    """The shipped defaults, read and checked once."""
    raw = tomllib.loads(
        resources.files("sim").joinpath("data/serving_quality.toml").read_text("utf-8")
    )
    if raw.get("benchmark") != QUALITY_BENCHMARK:
        raise ValueError(
            f"{_FILE}: benchmark must be {QUALITY_BENCHMARK!r}, got {raw.get('benchmark')!r}"
        )
    return MappingProxyType(_scores(raw["scores"])), _directives(raw["directives"])


def quality_scores() -> Mapping[str, QualityScore]:
    """The default scores, catalog model id -> `QualityScore` (only models with a published
    score; read-only)."""
    return _load()[0]


def model_quality(model: str) -> float | None:
    """`model`'s default score (MMLU-Pro, %), None for a catalog model with none published.

    Raises ValueError naming `model` and listing the catalog if it is not a catalog model.
    """
    catalog = _catalog()
    if model not in catalog:
        raise ValueError(f"model {model!r} is not in the serving catalog {list(catalog)}")
    entry = quality_scores().get(model)
    return None if entry is None else entry.score


def default_directives() -> tuple[Directive, ...]:
    """The default directive levels, `normal` first (factor 1, penalty 0), then shorter ones."""
    return _load()[1]
