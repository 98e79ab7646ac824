"""Token-length laws: how many prompt (input) or answer (output) tokens a request has.

A law gives its mean, its second moment, its quantiles and draws (whole tokens), and the
in-flight context share

    kappa = E[L^2] / (2 E[L]^2)

that the serving model needs (docs/serving.md "Lengths as distributions"): a replica that
is kept full holds each running sequence for a time proportional to its answer length `L`,
so the sequences in flight are a length-biased sample and one of them is, on average,
half-way through it; its generated context is E[L^2] / (2 E[L]) = kappa x E[L] tokens
(renewal theory's mean age; 1/2 for a fixed length, 1 for an exponential law).

Three laws:
- `LogNormalLaw(mu, sigma, min, max)`: round(exp(N(mu, sigma))) clipped to [min, max] (the
  presets fitted to the Azure LLM inference traces, `sim.serving.request_presets`);
- `HistogramLaw(lows, highs, counts)`: an empirical histogram, each bin a range of whole
  token counts drawn uniformly (`from_edges` takes the float bin edges of the ML.ENERGY
  leaderboard's `output_length_distribution`);
- `FixedLaw(tokens)`: every request the same.

Draws go through a standard normal variate (`sample_from_normal`), so that input and
output lengths can be drawn with correlated normals (a Gaussian copula) whatever the laws.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "MAX_TOKENS",
    "FixedLaw",
    "HistogramLaw",
    "LogNormalLaw",
    "ScaledLaw",
    "TokenLaw",
]

MAX_TOKENS = 10**9
"""Largest token count a request may carry (no model has a context near it): larger values
in a trace are treated as bad numbers."""


class TokenLaw(ABC):
    """The law of a request's token count (whole tokens, >= 0). Subclasses are frozen,
    hashable dataclasses, so a law can key a cache (`sim.models.llm_replica.replica_model`)."""

    @property
    @abstractmethod
    def mean(self) -> float:
        """E[L], tokens."""

    @property
    @abstractmethod
    def second_moment(self) -> float:
        """E[L^2], tokens^2."""

    @abstractmethod
    def quantile(self, q: ArrayLike) -> np.ndarray:
        """Token counts (int64) at probabilities `q` in [0, 1] (0: the smallest count the law
        gives, 1: the largest)."""

    @property
    def in_flight_share(self) -> float:
        """kappa = E[L^2] / (2 E[L]^2): the mean generated context of a sequence in flight
        on a full replica, in units of E[L] (the module docstring derives it)."""
        m = self.mean
        return self.second_moment / (2.0 * m * m) if m > 0 else 0.5

    def sample_from_normal(self, z: ArrayLike) -> np.ndarray:
        """Counts (int64) for standard normal draws `z`: the quantile at Phi(z)."""
        return self.quantile(_ndtr(np.asarray(z, dtype=float)))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` independent counts (int64)."""
        return self.sample_from_normal(rng.standard_normal(n))

    def scaled(self, factor: float) -> TokenLaw:
        """The law of `factor` x L (rounded to whole tokens): answers a generation directive
        lengthens or shortens; its kappa is this law's."""
        return self if factor == 1.0 else ScaledLaw(self, factor)


_ERFC = np.frompyfunc(math.erfc, 1, 1)
_INV_CDF = np.frompyfunc(NormalDist().inv_cdf, 1, 1)


def _ndtr(z: ArrayLike) -> np.ndarray:
    """The standard normal CDF at `z` (math.erfc elementwise: a run need not import SciPy)."""
    return np.asarray(0.5 * _ERFC(-np.asarray(z, dtype=float) / math.sqrt(2.0)), dtype=float)


def _ndtri(q: ArrayLike) -> np.ndarray:
    """The standard normal quantile at `q` in [0, 1] (-inf at 0, inf at 1)."""
    q = np.asarray(q, dtype=float)
    inner = (q > 0) & (q < 1)
    z = np.where(q <= 0, -np.inf, np.inf)
    z[inner] = np.asarray(_INV_CDF(q[inner]), dtype=float)
    return z


def _check_count(name: str, value: object, low: int = 0) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number of tokens, got {value!r}")
    if not low <= int(value) <= MAX_TOKENS:
        raise ValueError(f"{name} must be in [{low}, {MAX_TOKENS}], got {value!r}")
    return int(value)


@dataclass(frozen=True)
class LogNormalLaw(TokenLaw):
    """round(exp(N(mu, sigma))) clipped to [min, max].

    `mu` and `sigma` are the mean and standard deviation of the natural log of the count
    (a log-normal); `min` and `max` bound it (the fitted trace's extremes for a preset).
    The moments are those of the clipped log-normal; the rounding to whole tokens is left
    out of them (it moves the mean by well under a token).
    """

    mu: float
    sigma: float
    min: int = 1
    max: int = MAX_TOKENS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mu) and math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"LogNormalLaw: need finite mu and sigma >= 0, got {self}")
        if not 0 <= self.min <= self.max <= MAX_TOKENS:
            raise ValueError(f"LogNormalLaw: need 0 <= min <= max <= {MAX_TOKENS}, got {self}")

    @classmethod
    def from_median(
        cls, median: float, sigma: float, min: int = 1, max: int = MAX_TOKENS
    ) -> LogNormalLaw:
        """The law of median `median` tokens (before clipping) and log-spread `sigma`."""
        if not (math.isfinite(median) and median > 0):
            raise ValueError(f"LogNormalLaw: median must be a positive number, got {median!r}")
        return cls(math.log(median), sigma, min, max)

    @property
    def median(self) -> float:
        """The median of the unclipped log-normal, tokens."""
        return math.exp(self.mu)

    def _moment(self, k: int) -> float:
        """E[clip(X, min, max)^k] for X log-normal (no rounding)."""
        lo, hi = float(self.min), float(self.max)
        if self.sigma == 0.0:
            return min(max(math.exp(self.mu), lo), hi) ** k
        s = self.sigma
        a = (math.log(lo) - self.mu) / s if lo > 0 else -math.inf
        b = (math.log(hi) - self.mu) / s
        body = math.exp(k * self.mu + 0.5 * (k * s) ** 2) * float(
            _ndtr(b - k * s) - _ndtr(a - k * s)
        )
        return lo**k * float(_ndtr(a)) + hi**k * float(1.0 - _ndtr(b)) + body

    @property
    def mean(self) -> float:
        return self._moment(1)

    @property
    def second_moment(self) -> float:
        return self._moment(2)

    def sample_from_normal(self, z: ArrayLike) -> np.ndarray:
        x = np.rint(np.exp(self.mu + self.sigma * np.asarray(z, dtype=float)))
        return np.clip(x, self.min, self.max).astype(np.int64)

    def quantile(self, q: ArrayLike) -> np.ndarray:
        z = _ndtri(np.clip(np.asarray(q, dtype=float), 0.0, 1.0))
        return self.sample_from_normal(z if self.sigma > 0 else np.zeros_like(z))


@dataclass(frozen=True)
class FixedLaw(TokenLaw):
    """Every request has `tokens` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        _check_count("FixedLaw: tokens", self.tokens)

    @property
    def mean(self) -> float:
        return float(self.tokens)

    @property
    def second_moment(self) -> float:
        return float(self.tokens) ** 2

    def quantile(self, q: ArrayLike) -> np.ndarray:
        return np.full(np.shape(q), self.tokens, dtype=np.int64)

    def sample_from_normal(self, z: ArrayLike) -> np.ndarray:
        return self.quantile(z)


@dataclass(frozen=True)
class HistogramLaw(TokenLaw):
    """An empirical histogram: bin `i` holds `counts[i]` requests of `lows[i]` to
    `highs[i]` tokens (both included), each whole count in the bin equally likely.

    Bins are in increasing order and do not overlap (gaps between them hold nothing).
    Tuples, so that the law is hashable.
    """

    lows: tuple[int, ...]
    highs: tuple[int, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.counts)
        if n == 0 or len(self.lows) != n or len(self.highs) != n:
            raise ValueError(
                f"HistogramLaw: need as many lows, highs and counts (at least one bin), got "
                f"{len(self.lows)}, {len(self.highs)}, {n}"
            )
        for i in range(n):
            lo = _check_count(f"HistogramLaw: bin {i} low", self.lows[i])
            hi = _check_count(f"HistogramLaw: bin {i} high", self.highs[i])
            _check_count(f"HistogramLaw: bin {i} count", self.counts[i])
            if hi < lo:
                raise ValueError(f"HistogramLaw: bin {i}: high {hi} is below low {lo}")
            if i and lo <= self.highs[i - 1]:
                raise ValueError(
                    f"HistogramLaw: bin {i} ({lo}-{hi}) starts at or before the end of bin "
                    f"{i - 1} ({self.highs[i - 1]}): bins must increase and not overlap"
                )
        if sum(self.counts) == 0:
            raise ValueError("HistogramLaw: every count is 0")

    @classmethod
    def from_edges(cls, edges: ArrayLike, counts: ArrayLike) -> HistogramLaw:
        """The law of a histogram with float bin `edges` (n + 1, increasing) and `counts`
        (n), as numpy.histogram and the ML.ENERGY leaderboard write them: bin i holds the
        whole counts in [edges[i], edges[i+1]), the last bin its top edge too. Bins that
        hold no whole number are left out (ValueError if they hold requests)."""
        e = np.asarray(edges, dtype=float)
        c = np.asarray(counts)
        if e.ndim != 1 or c.ndim != 1 or len(e) != len(c) + 1 or len(c) == 0:
            raise ValueError(
                f"HistogramLaw: need n + 1 edges for n counts (n >= 1), got {e.shape} edges "
                f"and {c.shape} counts"
            )
        if not (np.all(np.isfinite(e)) and np.all(np.diff(e) > 0)):
            raise ValueError("HistogramLaw: edges must be finite and increasing")
        lows = np.ceil(e[:-1]).astype(np.int64)
        highs = np.ceil(e[1:]).astype(np.int64) - 1
        highs[-1] = int(np.floor(e[-1]))
        keep = highs >= lows
        if np.any(~keep & (c != 0)):
            i = int(np.flatnonzero(~keep & (c != 0))[0])
            raise ValueError(f"HistogramLaw: bin {i} ({e[i]}-{e[i + 1]}) holds no whole count")
        return cls(
            tuple(int(x) for x in lows[keep]),
            tuple(int(x) for x in highs[keep]),
            tuple(int(x) for x in c[keep]),
        )

    @classmethod
    def of_counts(cls, tokens: ArrayLike) -> HistogramLaw:
        """The exact law of the whole token counts `tokens` (at least one, e.g. a request
        file's answers): one bin per distinct count, holding how often it occurs."""
        values, counts = np.unique(np.asarray(tokens, dtype=np.int64), return_counts=True)
        distinct = tuple(int(x) for x in values)
        return cls(distinct, distinct, tuple(int(c) for c in counts))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.asarray(self.lows, dtype=float),
            np.asarray(self.highs, dtype=float),
            np.asarray(self.counts, dtype=float),
        )

    @property
    def mean(self) -> float:
        lo, hi, c = self._arrays()
        return float(np.sum(c * (lo + hi) / 2.0) / np.sum(c))

    @property
    def second_moment(self) -> float:
        lo, hi, c = self._arrays()
        width = hi - lo + 1.0
        per_bin = ((lo + hi) / 2.0) ** 2 + (width * width - 1.0) / 12.0  # discrete uniform
        return float(np.sum(c * per_bin) / np.sum(c))

    def quantile(self, q: ArrayLike) -> np.ndarray:
        lo, hi, c = self._arrays()
        cum = np.cumsum(c)
        pos = np.clip(np.asarray(q, dtype=float), 0.0, 1.0) * cum[-1]
        last = int(np.flatnonzero(c)[-1])
        i = np.minimum(np.searchsorted(cum, pos, side="right"), last)
        within = (pos - (cum[i] - c[i])) / c[i]
        x = lo[i] + np.floor(within * (hi[i] - lo[i] + 1.0))
        return np.minimum(x, hi[i]).astype(np.int64)


@dataclass(frozen=True)
class ScaledLaw(TokenLaw):
    """`factor` x a draw of `law`, rounded to whole tokens (`TokenLaw.scaled`). Its moments
    leave the rounding out, as `LogNormalLaw`'s do."""

    law: TokenLaw
    factor: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"ScaledLaw: factor must be a positive number, got {self.factor!r}")

    @property
    def mean(self) -> float:
        return self.factor * self.law.mean

    @property
    def second_moment(self) -> float:
        return self.factor**2 * self.law.second_moment

    def quantile(self, q: ArrayLike) -> np.ndarray:
        return np.rint(self.factor * self.law.quantile(q)).astype(np.int64)
