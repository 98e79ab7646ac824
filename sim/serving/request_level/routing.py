"""The request level's routing weights (`_Router`).

A request goes to a site by smooth weighted round-robin over the shares (deterministic:
each site's credit grows by its share per request, the site with the most credit takes
it and pays the total; ties to the lowest index), then to the admitting replica of that
site with the fewest requests (in flight + queued; ties to the lowest index). Sites
without an admitting replica take none; with none anywhere the request is dropped at its
arrival. The event loop applies the rule inline (its hot path) on the weights and
credits kept here.
"""

from __future__ import annotations

import numpy as np


class _Router:
    """The sites that take requests (`act`), their round-robin weights (`w`) and credits
    (`cred`, which the event loop updates in place), from the shares set and the
    admitting replicas."""

    def __init__(self, sites: int):
        self._n_sites = sites
        self._shares: tuple[float, ...] | None = None
        self.act: list[int] = []
        self.w: list[float] = []
        self.cred: list[float] = []

    def set_shares(self, shares: np.ndarray | None) -> None:
        """Each site's share of the requests (None: by admitting replicas); call
        `reweight` after."""
        if shares is None:
            self._shares = None
            return
        s = np.asarray(shares, dtype=float)
        if s.shape != (self._n_sites,) or not np.all(np.isfinite(s) & (s >= 0)):
            raise ValueError(f"shares must be {self._n_sites} finite values >= 0, got {shares!r}")
        self._shares = tuple(s.tolist())

    def reweight(self, admitting: list[int]) -> None:
        """Round-robin weights from the admitting replicas at each site: the shares of the
        sites with one (None, or none of those with a share: proportional to the admitting
        replicas); credits restart when the weights change."""
        ready = [float(k) for k in admitting]
        w = ready
        if self._shares is not None:
            shared = [sh if k > 0 else 0.0 for sh, k in zip(self._shares, ready, strict=True)]
            if sum(shared) > 0:
                w = shared
        act = [s for s, x in enumerate(w) if x > 0]
        weights = [w[s] for s in act]
        if act != self.act or weights != self.w:
            self.act, self.w, self.cred = act, weights, [0.0] * len(act)
