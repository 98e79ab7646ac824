"""The memory of the fluid level's batch and backlog: the pieces of a site whose state
carries over from one to the next, computed one after another (times in s, token rates
in tokens/s, the batch in sequences in flight over the site's replicas).

- **Memory.** Near saturation the throughput flattens, so the batch takes minutes to
  follow the load (time constant E[out] / (dX/dn)). A piece whose batch would lag its
  load by more than 1% of the capacity (`_SETTLED`), a piece past the capacity and a
  piece with a backlog carry state and are computed one after another (`_sequential`);
  the rest is one numpy pass per site (`serve`). There the mean batch n follows
  dn/dt = (x - X(n)) / E[out] (X the chain's throughput at mean batch n), linearised
  over substeps, and the chain is taken at the load whose mean batch is n; past the
  capacity the batch fills the slots, then a backlog of work W grows at x - x_cap (an
  arrival waits W / x_cap, uniform over the stretch; W never exceeds x_cap x timeout_s,
  the rest is dropped) and drains at x_cap - x, every slot busy.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import NamedTuple

import numpy as np

from sim.serving.fluid.chain import PoolTable

_SUBSTEPS = 8
"""Substeps of a piece over which the batch's relaxation is linearised."""
_SETTLED = 0.01
"""A piece whose batch, moving towards its fixed point, lags the load by less than this
share of the capacity in tokens per second is taken as settled (no memory needed)."""


class _Carried(NamedTuple):
    """The state a site carries from one piece to the next."""

    in_flight: float
    """Mean sequences in flight (the state the batch relaxes from)."""
    backlog_tokens: float
    """Output tokens queued (the backlog's work)."""
    backlog: float
    """Requests queued."""


def _sequential(
    pool: PoolTable,
    timeout_s: float,
    carried: _Carried,
    dur: np.ndarray,
    a: np.ndarray,
    x: np.ndarray,
    e_out: np.ndarray,
    settled: np.ndarray,
    flagged: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Carried]:
    """The pieces whose state carries over, one after another, from the first flagged
    one until the batch has settled again (module docstring): the mean batch n relaxes
    by dn/dt = (x - X(n)) / E[out] (X the chain's throughput at mean n), linearised
    over substeps; past the capacity it fills the slots, then a backlog of work W
    grows (to at most x_cap x timeout_s) or drains. Returns the pieces, their stretches
    (time without a backlog, time with every slot busy, requests admitted from the
    backlog, its least and most wait, requests admitted after timeout_s, requests
    dropped at the limit), the substeps without a backlog (index into the pieces,
    duration s, mean batch) and the state carried out of the last piece (`carried` is the
    one carried into the first)."""
    r, s = pool.replicas, pool.model.slots
    c = float(r * s)
    cap = pool.capacity_tokens_per_s
    most = cap * timeout_s
    n_grid, x_grid = pool.batch_grid.tolist(), pool.rate_grid.tolist()
    slopes = (np.diff(pool.rate_grid) / np.diff(pool.batch_grid)).tolist()
    top = len(slopes) - 1

    def seg(n: float) -> int:
        return min(max(bisect_right(n_grid, n) - 1, 0), top)

    flagged_at = np.flatnonzero(flagged).tolist()
    d_l, a_l, x_l, eo_l, fix_l = (v.item for v in (dur, a, x, e_out, settled))
    n, work, queued = carried
    rows: list[int] = []
    out: list[tuple[float, ...]] = []
    subs: list[tuple[int, float, float]] = []
    k, pos, count = flagged_at[0], 0, len(dur)
    if k > 0:
        n = fix_l(k - 1)
    while True:
        d, xk, eo = d_l(k), x_l(k), eo_l(k)
        lam = a_l(k) / d
        t = free_s = busy_s = 0.0
        n_q = n_lim = dropped = 0.0
        v_lo, v_hi = math.inf, -math.inf
        while t < d * (1 - 1e-12):
            h = d - t
            if work > 0 or (n >= c * (1 - 1e-12) and xk >= cap):
                n = c
                if xk >= cap:
                    grow = h if xk == cap else min(h, max(most - work, 0.0) / (xk - cap))
                    after = min(work + (xk - cap) * grow, most)
                    n_q += lam * grow
                    v_lo, v_hi = min(v_lo, work / cap), max(v_hi, after / cap)
                    if h > grow:
                        n_lim += lam * (h - grow) * cap / xk
                        dropped += lam * (h - grow) * (1 - cap / xk)
                    queued += (after - work) / eo
                    used = h
                else:
                    used = min(h, work / (cap - xk))
                    after = 0.0 if used < h else work - (cap - xk) * h
                    n_q += lam * used
                    v_lo, v_hi = min(v_lo, work / cap), max(v_hi, after / cap)
                    queued *= after / work
                work = after
                busy_s += used
                t += used
                continue
            j = seg(n)
            rate = x_grid[j] + (n - n_grid[j]) * slopes[j]
            tau = eo / max(slopes[j], 1e-12)
            target = n + (xk - rate) * tau / eo
            if xk < cap and (target - fix_l(k)) * (n - fix_l(k)) < 0:
                # the tangent overshoots the settled batch: head for it at today's rate
                target = fix_l(k)
                tau = eo * (target - n) / (xk - rate)
            # substeps while the batch still has far to go (the throughput is concave)
            used = h if abs(target - n) < _SETTLED * c else min(h, d / _SUBSTEPS)
            full = target > c and used >= -tau * math.log1p(-(c - n) / (target - n))
            if full:
                used = -tau * math.log1p(-(c - n) / (target - n))
            e = math.exp(-used / tau)
            subs.append((len(rows), used, target + (n - target) * tau * (1 - e) / used))
            n = c if full else target + (n - target) * e
            free_s += used
            t += used
        rows.append(k)
        out.append((free_s, busy_s, n_q, v_lo, v_hi, n_lim, dropped))
        k += 1
        if k >= count:
            break
        if work <= 0 and x_l(k) < cap:
            j = seg(max(n, fix_l(k)))
            tau = eo_l(k) / max(slopes[j], 1e-12)
            lag = abs(fix_l(k) - n) * eo_l(k) / d_l(k) * -math.expm1(-d_l(k) / tau)
            if lag <= _SETTLED * cap:
                while pos < len(flagged_at) and flagged_at[pos] <= k:
                    pos += 1
                if pos == len(flagged_at):
                    n = fix_l(count - 1)
                    break
                k = flagged_at[pos]
                n = fix_l(k - 1)
    return (
        np.array(rows),
        np.array(out),
        np.array(subs).reshape(-1, 3),
        _Carried(n, work, queued if work > 0 else 0.0),
    )
