"""The `tokens` of a service's synthetic requests: a preset name, or a law per direction
(docs/request-format.md "Token lengths").

    tokens = "azure-conv"                                    # a preset, both directions
    tokens = { input = "azure-conv",
               output = { law = "lognormal", median = 600, sigma = 1.1, min = 1, max = 32768 } }
    tokens = { output = { law = "histogram", file = "gpqa_output.csv" } }
    tokens = { input = { law = "fixed", tokens = 200 }, output = ... }

A direction left out takes the `azure-conv` preset's. A histogram file is a CSV with the
header `min_tokens,max_tokens,count`, one bin a line (`HISTOGRAM_COLUMNS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, model_validator

from sim.config.base import ConfigModel
from sim.errors import ScenarioError
from sim.models.token_laws import MAX_TOKENS, FixedLaw, HistogramLaw, LogNormalLaw, TokenLaw
from sim.util.csv_rows import csv_rows

__all__ = ["HISTOGRAM_COLUMNS", "TokensConfig", "read_token_histogram"]

HISTOGRAM_COLUMNS = ("min_tokens", "max_tokens", "count")
"""Header of a token histogram file: each row a bin of whole token counts from `min_tokens`
to `max_tokens` (both included), holding `count` requests."""


class LogNormalTokens(ConfigModel):
    """round(exp(N(ln median, sigma))) clipped to [min, max] (`LogNormalLaw`)."""

    law: Literal["lognormal"]
    median: float = Field(gt=0, le=MAX_TOKENS)
    """Median of the unclipped law, tokens."""
    sigma: float = Field(ge=0, le=20)
    """Standard deviation of the natural log of the count."""
    min: int = Field(default=1, ge=0, le=MAX_TOKENS)
    max: int = Field(default=MAX_TOKENS, ge=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _bounds(self) -> LogNormalTokens:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self

    def token_law(self) -> TokenLaw:
        return LogNormalLaw.from_median(self.median, self.sigma, self.min, self.max)


class FixedTokens(ConfigModel):
    """Every request the same count (`FixedLaw`)."""

    law: Literal["fixed"]
    tokens: int = Field(ge=0, le=MAX_TOKENS)

    def token_law(self) -> TokenLaw:
        return FixedLaw(self.tokens)


class HistogramTokens(ConfigModel):
    """An empirical histogram from a CSV file (`HISTOGRAM_COLUMNS`; `HistogramLaw`)."""

    law: Literal["histogram"]
    file: Path
    """The histogram file, relative to the scenario file."""
    _law: HistogramLaw | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _read(self) -> HistogramTokens:
        try:
            self._law = read_token_histogram(self.file)
        except ScenarioError as e:
            raise ValueError(str(e)) from None
        return self

    def token_law(self) -> TokenLaw:
        assert self._law is not None  # read by the validator
        return self._law


TokenLawConfig = Annotated[
    LogNormalTokens | FixedTokens | HistogramTokens, Field(discriminator="law")
]


class TokensConfig(ConfigModel):
    """A law (or a preset's) for each direction of the requests' token counts."""

    input: str | TokenLawConfig = "azure-conv"
    """Prompt tokens: a preset name (its input law) or a law."""
    output: str | TokenLawConfig = "azure-conv"
    """Answer tokens: a preset name (its output law) or a law; every answer has >= 1."""

    @model_validator(mode="after")
    def _check(self) -> TokensConfig:
        # preset names are checked where the presets are read (sim.serving.sources)
        if not isinstance(self.output, str):
            shortest = int(self.output.token_law().quantile(0.0))
            if shortest < 1:
                raise ValueError(
                    f"output: a request generates at least one token, but the law gives {shortest}"
                )
        return self

    def specs(self) -> tuple[str | TokenLaw, str | TokenLaw]:
        """(input, output): a preset name or a `TokenLaw` each."""
        return tuple(  # type: ignore[return-value]
            spec if isinstance(spec, str) else spec.token_law()
            for spec in (self.input, self.output)
        )


def read_token_histogram(path: Path) -> HistogramLaw:
    """The `HistogramLaw` of a histogram CSV file (`HISTOGRAM_COLUMNS`); ScenarioError
    naming the file, the line and the value for a bad row or bins that overlap."""
    where = str(path)
    lows: list[int] = []
    highs: list[int] = []
    counts: list[int] = []
    for line, row in csv_rows(path, where, "token histogram", HISTOGRAM_COLUMNS):
        if len(row) != len(HISTOGRAM_COLUMNS):
            raise ScenarioError(
                f"{where}:{line}: expected 3 fields ({','.join(HISTOGRAM_COLUMNS)}), got {row}"
            )
        values = []
        for name, text in zip(HISTOGRAM_COLUMNS, row, strict=True):
            try:
                value = int(text.strip())
            except ValueError:
                value = -1
            if not 0 <= value <= MAX_TOKENS:
                raise ScenarioError(
                    f"{where}:{line}: {name} must be a whole number in [0, {MAX_TOKENS}], "
                    f"got {text.strip()!r}"
                )
            values.append(value)
        lo, hi, count = values
        if hi < lo:
            raise ScenarioError(f"{where}:{line}: max_tokens {hi} is below min_tokens {lo}")
        if highs and lo <= highs[-1]:
            raise ScenarioError(
                f"{where}:{line}: bin {lo}-{hi} starts at or before the end of the previous "
                f"bin ({highs[-1]}): bins must increase and not overlap"
            )
        lows.append(lo)
        highs.append(hi)
        counts.append(count)
    if not counts or sum(counts) == 0:
        raise ScenarioError(f"{where}: the histogram holds no requests (every count is 0)")
    return HistogramLaw(tuple(lows), tuple(highs), tuple(counts))
