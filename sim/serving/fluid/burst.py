"""Bursty arrivals at the fluid level: how bursty a source is within a step (its excess
index of dispersion), and the fine pass that follows one site's batch and queue bin by
bin (`_BatchPass`; times in s, tokens, power in W).

- **Bursts.** Arrivals burstier than Poisson within a step (the excess index of
  dispersion of the source's counts in windows of 0.5 to 30 s within steps, measured once
  on its first 6 hours: 10 to 90 for the Azure code trace, 0 for a Poisson process or the
  synthetic generator) fill and drain the slots within seconds, which no stationary law
  sees. Such a source is followed by a fine pass instead (`_BatchPass`), block by block
  (one `advance_to`), its state carried between blocks: bins of 50 ms, split down to one
  request where its arrivals are apart (their output tokens are then known), the batch
  the cohorts still in flight (processor sharing: each has received the same number of
  tokens since its admission), the queue FIFO with its timeout. From it come each
  piece's power and mean batch, and its arrivals' waits (uniform between the quantiles
  `_PASS_LEVELS` of the pass's waits) and times per token (their times in service over
  their output tokens). Its cost grows with the requests and the busy time (a Python loop
  over bins and substeps of at most `_PASS_TOKENS` tokens): seconds per hour of trace.
"""

from __future__ import annotations

import math

import numpy as np

from sim.models.llm_replica import ReplicaModel
from sim.serving.fluid.latency import LATENCY_GRID_S
from sim.serving.sources import RequestSource

_BURST_WINDOWS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Windows the arrivals' dispersion within a step is measured over, s."""
_BURST_SAMPLE_S = 6 * 3600.0
"""The arrivals' dispersion is measured over the first 6 hours at most."""
_CALM = 0.02
"""An excess dispersion (or rate variance) below this is taken as Poisson."""
_PASS_BIN_S = 0.05
"""Bins of the fine pass of bursty arrivals (`_BatchPass`), s: short enough to hold one
request or none most of the time (whose output tokens are then known exactly)."""
_PASS_SPLIT = 8
_PASS_SPLITS = 4
"""A bin holding more than one request is split into _PASS_SPLIT, at most _PASS_SPLITS
times (down to 12 us): one request per bin, whose output tokens are known."""
_PASS_QUIET_S = 1.0
"""Bins without arrivals are merged up to this length, s."""
_PASS_TOKENS = 4.0
"""A substep of the fine pass gives each sequence at most this many tokens."""
_PASS_AHEAD_S = 120.0
"""The fine pass looks this far past its block at least (no further arrivals), s: the
waits of the requests still queued and the times in service of those in flight."""
_PASS_LEVELS = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0])
"""Probability levels between which a piece's waits from the fine pass are uniform."""
_PASS_NODES = 32
"""Quantile nodes of the output tokens a request's time per token is taken at."""


class _BatchPass:
    """One site's batch and queue under bursty arrivals, followed bin by bin.

    Processor sharing makes the fluid limit exact in one variable: every sequence in
    flight gets a token per iteration, so all of them have received the same number of
    tokens u(t) since any earlier instant (du/dt = 1 / iter_s[n / R], n in flight over R
    replicas). A cohort of k requests admitted when the counter read u_i still holds
    k P(out > u - u_i) of them, so the batch n = sum_i k_i P(out > u - u_i): the short
    requests of a burst leave first, as in the request level. A cohort is the requests
    of one bin admitted together; their mean output mu is known (the bin's tokens over
    its requests) and, k draws of the token sample given their mean, each spreads about
    it as the sample does about its mean, by sqrt((k - 1) / k) (one request: exactly mu).
    Per bin (`_fine_bins` makes them `_PASS_BIN_S` long, split down to one
    request where it can), in substeps that give at most `_PASS_TOKENS` tokens, the
    queue, FIFO, fills the free slots c - n (c = R x slots) from its head (a bin's
    arrivals from its start); a request still queued `timeout_s` after its arrival is
    dropped. The bin's arrivals are spread evenly over it, so a request's wait is the
    time the cumulative admissions (and drops) reach its place in the queue minus the
    time the cumulative arrivals did. Later arrivals never delay earlier ones, so the
    waits of those queued at the end of a block are found by going on without arrivals
    until the queue is empty (and the batch too, or `_PASS_AHEAD_S` has passed, for the
    times in service of those admitted late); the state carried to the next block is
    the one at its end.

    Power is concave (idle to one sequence is most of it): with the requests leaving
    independently, E[power(N)] is taken as P(N > 0) power(E[N | N > 0]), P(N = 0) the
    product over cohorts of P(none of its k left in flight) ((1 - p)^floor(k) (1 -
    frac(k) p), p = P(out > u - u_i)).

    Units: times s, u and output tokens in tokens, counts in requests (fractional)."""

    def __init__(self, output_sample: np.ndarray):
        out = np.sort(np.asarray(output_sample, dtype=float))
        self._mean = float(out.mean())
        self._rel = out / self._mean
        """The sample over its mean, sorted."""
        self._top = float(self._rel[-1])
        self.nodes = np.quantile(self._rel, (np.arange(_PASS_NODES) + 0.5) / _PASS_NODES)
        """Outputs over their mean at the mid-levels of `_PASS_NODES` quantile bins."""
        self.k = np.zeros(0)
        """Requests per cohort."""
        self.cu = np.zeros(0)
        """The token counter u when each cohort was admitted."""
        self.mu = np.zeros(0)
        """Each cohort's mean output tokens."""
        self.g = np.zeros(0)
        """Each cohort's spread about its mean relative to the sample's."""
        self.u = 0.0
        self.q_t = np.zeros(0)
        self.q_w = np.zeros(0)
        self.q_n = np.zeros(0)
        self.q_o = np.zeros(0)
        """Requests queued: the start (s) and width (s) of the bin they arrived in, count,
        output tokens."""

    def left(self, done: np.ndarray, mu: np.ndarray, g: np.ndarray) -> np.ndarray:
        """P(out > done) for cohorts of mean mu and spread g (out = mu (1 - g + g X), X
        the sample over its mean)."""
        x = (done / mu - 1.0 + g) / np.maximum(g, 1e-9)
        rel = self._rel
        return 1.0 - np.searchsorted(rel, x, side="right") / len(rel)

    @staticmethod
    def spread(k: np.ndarray) -> np.ndarray:
        """The spread of k draws about their mean relative to the sample's."""
        return np.sqrt(np.maximum(k - 1.0, 0.0) / np.maximum(k, 1e-300))

    def in_flight(self) -> float:
        return float(self.k @ self.left(self.u - self.cu, self.mu, self.g))

    def queued(self) -> float:
        return float(self.q_n.sum())

    def scale(self, keep: float) -> None:
        """Keep this share of the requests in flight (fewer replicas)."""
        self.k = self.k * keep

    def shed(self, keep: float) -> None:
        """Keep this share of the queued requests."""
        self.q_n = self.q_n * keep
        self.q_o = self.q_o * keep

    def run(
        self,
        model: ReplicaModel,
        replicas: int,
        edges: np.ndarray,
        arrivals: np.ndarray,
        tokens: np.ndarray,
        timeout_s: float,
    ) -> dict[str, np.ndarray]:
        """Bins [edges[j], edges[j + 1]) with `arrivals` each, of `tokens` output tokens.
        Per bin: mean sequences in flight `n`, mean extra power `extra_w` (W over idle,
        all replicas); per bin's arrivals: `dropped`, waits `v0` of the first and `v1` of
        the last served (s) and, per output node (`nodes` x the bin's mean output `out`),
        time in service `service_s` (s)."""
        r, s = replicas, model.slots
        c = float(r * s)
        iter_l, power_l = model.iter_s.tolist(), model.power_w.tolist()
        nb = len(arrivals)
        start = len(self.q_n)
        times = np.concatenate([self.q_t, edges[:-1]])
        counts = np.concatenate([self.q_n, arrivals])
        widths = np.concatenate([self.q_w, np.diff(edges)])
        outs = np.concatenate([self.q_o, tokens])
        cum_a = np.concatenate([[0.0], np.cumsum(counts)])
        mean_out = np.where(counts > 0, outs / np.maximum(counts, 1e-300), self._mean)
        knots_t = np.stack([times, times + widths], axis=1).ravel()
        knots_a = np.stack([cum_a[:-1], cum_a[1:]], axis=1).ravel()
        total = float(cum_a[-1])
        spread_in = self.spread(counts)
        cohorts = [self.k, self.cu, self.mu, self.g]
        fresh: list[list[float]] = []
        """Cohorts admitted since the last `batch` (k, u_i, mu, g)."""
        u = self.u
        reach = self._top

        def batch(u: float) -> tuple[float, float]:
            """Sequences in flight (mean) and P(none) at counter u; prunes the cohorts."""
            nonlocal cohorts
            if fresh:
                cohorts = [
                    np.append(a, b) for a, b in zip(cohorts, zip(*fresh, strict=True), strict=True)
                ]
                fresh.clear()
            ka, ca, ma, ga = cohorts
            alive = u - ca < ma * (1.0 - ga + ga * reach)
            if not alive.all():
                cohorts = [v[alive] for v in cohorts]
                ka, ca, ma, ga = cohorts
            if not len(ka):
                return 0.0, 1.0
            p = np.ones(len(ka))  # one request, or several of one output: in flight
            spread = ga > 0
            if spread.any():
                p[spread] = self.left(u - ca[spread], ma[spread], ga[spread])
            whole = np.floor(ka)
            if ((p >= 1.0) & (whole >= 1.0)).any():
                return float(ka @ p), 0.0
            log_p0 = whole @ np.log1p(-np.minimum(p, 1.0 - 1e-16))
            log_p0 += np.log1p(-(ka - whole) * p).sum()
            return float(ka @ p), math.exp(float(log_p0))

        removed = 0.0
        t_l = [float(edges[0])]
        d_l = [0.0]  # cumulative admitted or dropped at each bin's end
        drop_knots = [(0.0, 0.0)]  # (queue position, cumulative dropped)
        dropped = 0.0
        u_l: list[float] = []
        n_mean, w_mean = np.zeros(nb), np.zeros(nb)
        snapshot: tuple[list[np.ndarray], float, float] | None = None
        b = 0
        t = float(edges[0])
        end = float(edges[-1])
        arrived_by = np.interp(edges[1:], knots_t, knots_a, left=0.0, right=total).tolist()
        while True:
            if b == nb:
                batch(u)
                snapshot = (list(cohorts), u, removed)
            t1 = float(edges[b + 1]) if b < nb else t + _PASS_QUIET_S
            arrived = arrived_by[b] if b < nb else total
            n, p0 = batch(u)
            u_l.append(u)
            seq_s = energy = 0.0
            while t < t1 - 1e-12:
                want = arrived - removed
                if n < 1e-9 and want < 1e-9:
                    cohorts = [v[:0] for v in cohorts]
                    t = t1
                    break
                if want > 1e-12 and n < c:
                    adm = min(want, c - n)
                    i = int(np.searchsorted(cum_a, removed, side="right")) - 1
                    while adm > 1e-12 and i < len(counts):  # one cohort per bin of arrivals
                        part = min(float(cum_a[i + 1]) - removed, adm)
                        if part > 1e-12:
                            fresh.append([part, u, float(mean_out[i]), float(spread_in[i])])
                            removed += part
                            n += part
                            adm -= part
                            p0 *= max(1.0 - part, 0.0)
                        i += 1
                busy = 1.0 - p0
                m = n / r
                j = min(int(m), s - 1)
                it = iter_l[1] if m < 1 else iter_l[j] + (m - j) * (iter_l[j + 1] - iter_l[j])
                h = min(t1 - t, _PASS_TOKENS * it)
                if busy > 1e-12:
                    m = max(n / busy, 1.0) / r
                    j = min(int(m), s - 1)
                    power = power_l[j] + (m - j) * (power_l[j + 1] - power_l[j]) - power_l[0]
                    energy += r * busy * power * h
                seq_s += n * h
                u += h / it
                t += h
                n, p0 = batch(u)
            late = float(np.interp(t1 - timeout_s, knots_t, knots_a, left=0.0, right=total))
            if late > removed:
                drop_knots.append((removed, dropped))
                dropped += late - removed
                removed = late
                drop_knots.append((removed, dropped))
            if b < nb:
                n_mean[b] = seq_s / (t1 - float(edges[b]))
                w_mean[b] = energy / (t1 - float(edges[b]))
            t = t1
            t_l.append(t)
            d_l.append(removed)
            b += 1
            if b >= nb and removed >= total - 1e-9:
                if t >= end + _PASS_AHEAD_S or not len(cohorts[0]):
                    break
        if snapshot is None:
            batch(u)
            snapshot = (list(cohorts), u, removed)
        state, self.u, removed0 = snapshot
        self.k, self.cu, self.mu, self.g = state
        left = np.maximum(cum_a[1:] - np.maximum(cum_a[:-1], removed0), 0.0)
        keep = left > 1e-12
        self.q_t, self.q_w = times[keep], widths[keep]
        self.q_n = np.minimum(left, counts)[keep]
        self.q_o = self.q_n * mean_out[keep]
        # the waits of the block's arrivals
        t_a, d_a = np.array(t_l), np.array(d_l)
        pos_lo, pos_hi = cum_a[start:-1], cum_a[start + 1 :]
        v0 = np.maximum(_first_reach(t_a, d_a, pos_lo) - edges[:-1], 0.0)
        v1 = np.maximum(_first_reach(t_a, d_a, pos_hi) - edges[1:], 0.0)
        drop_knots.append((total + 1.0, dropped))
        dp, dc = np.array(drop_knots).T
        lost = np.interp(pos_hi, dp, dc) - np.interp(pos_lo, dp, dc)
        v0, v1 = np.minimum(v0, timeout_s), np.minimum(v1, timeout_s)
        admit_s = (edges[:-1] + edges[1:]) / 2 + (v0 + v1) / 2
        # time in service of each output node: the counter's times, then its last pace
        u_a = np.array(u_l + [u])
        t_u = t_a[: len(u_a)]
        u_adm = np.interp(admit_s, t_u, u_a)
        spread = self.spread(arrivals)[:, None]
        out = mean_out[start:, None] * (1.0 - spread + spread * self.nodes[None, :])
        goal = u_adm[:, None] + out
        pace = iter_l[1]
        if len(u_a) > 1 and u_a[-1] > u_a[-2]:
            pace = (t_u[-1] - t_u[-2]) / (u_a[-1] - u_a[-2])
        done = np.where(
            goal <= u_a[-1],
            _first_reach(t_u, u_a, goal.ravel()).reshape(goal.shape),
            t_u[-1] + (goal - u_a[-1]) * pace,
        )
        return {
            "n": n_mean,
            "extra_w": w_mean,
            "dropped": lost,
            "v0": v0,
            "v1": v1,
            "service_s": done - admit_s[:, None],
            "out": out,
        }


def _fine_bins(
    source: RequestSource, edges: np.ndarray, share: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bins the fine pass follows over the pieces between `edges` (s): `_PASS_BIN_S`
    long, a bin of several requests split (if they are apart) down to one, bins without
    arrivals merged up to `_PASS_QUIET_S`. Returns their edges (s), the arrivals and
    output tokens in each (`share` of the source's) and the piece each lies in."""
    dur = np.diff(edges)
    count = len(dur)
    per = np.maximum(np.ceil(dur / _PASS_BIN_S - 1e-9), 1).astype(np.int64)
    piece = np.repeat(np.arange(count), per)
    within = np.arange(len(piece)) - np.repeat(np.cumsum(per) - per, per)
    points = edges[piece] + within * (dur / per)[piece]
    anchor = within % max(int(round(_PASS_QUIET_S / _PASS_BIN_S)), 1) == 0
    for _ in range(_PASS_SPLITS):  # a bin of several requests split (if they are apart)
        crowded = source.step_sums(np.append(points, edges[-1]))[0] > 1
        if not crowded.any():
            break
        lo = points[crowded]
        width = (np.append(points[1:], edges[-1]) - points)[crowded]
        inner = np.arange(1, _PASS_SPLIT) / _PASS_SPLIT
        points = np.concatenate([points, (lo[:, None] + width[:, None] * inner).ravel()])
        anchor = np.concatenate([anchor, np.zeros(len(lo) * len(inner), dtype=bool)])
        order = np.argsort(points, kind="stable")
        points, anchor = points[order], anchor[order]
    piece = np.minimum(np.searchsorted(edges, points, side="right") - 1, count - 1)
    fine = np.append(points, edges[-1])
    arrivals, _, tokens = source.step_sums(fine)
    # bins without arrivals merged, up to _PASS_QUIET_S
    some = arrivals > 0
    starts = np.flatnonzero(anchor | some | np.concatenate([[True], some[:-1]]))
    fine = np.append(fine[starts], edges[-1])
    arrivals = share * np.add.reduceat(arrivals, starts)
    tokens = share * np.add.reduceat(tokens, starts)
    return fine, arrivals, tokens, piece[starts]


def _first_reach(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The first time the nondecreasing, piecewise-linear v(t) (knots t, v) reaches x."""
    i = np.clip(np.searchsorted(v, x, side="left"), 1, len(v) - 1)
    lo, hi = v[i - 1], v[i]
    f = np.clip((x - lo) / np.maximum(hi - lo, 1e-300), 0.0, 1.0)
    return t[i - 1] + f * (t[i] - t[i - 1])


def _uniform_mixture_quantiles(
    n: np.ndarray, v0: np.ndarray, v1: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """The quantiles at `levels` (0 and 1: the least and most) of a mixture of uniforms on
    [v0, v1] (an atom where they meet) weighted by n, s: its CDF on 0 and
    LATENCY_GRID_S, linear in between."""
    has = n > 0
    n, lo, hi = n[has], np.minimum(v0, v1)[has], np.maximum(v0, v1)[has]
    g = np.concatenate([[0.0], LATENCY_GRID_S])
    width = hi - lo
    f = np.where(
        width[:, None] > 1e-9,
        np.clip((g[None, :] - lo[:, None]) / np.maximum(width, 1e-9)[:, None], 0.0, 1.0),
        (g[None, :] >= lo[:, None]).astype(float),
    )
    cdf = np.maximum.accumulate(n @ f / n.sum())
    least, most = float(lo.min()), float(hi.max())
    out = np.interp(levels, cdf, g)
    return np.clip(out, least, most)


def _excess_dispersion(
    source: RequestSource, step_s: float, horizon_s: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Windows (s) and the excess over Poisson of the index of dispersion of the source's
    arrival counts in windows of that length within a step (their variance about the
    step's mean over the mean, minus 1), over the first _BURST_SAMPLE_S at most; None when no window
    shows any (a Poisson process, or the expected counts of the synthetic generator)."""
    sample_s = min(horizon_s, _BURST_SAMPLE_S)
    steps = int(sample_s // step_s)
    windows, excess = [], []
    for window_s in _BURST_WINDOWS_S:
        bins = int(step_s // window_s)
        if bins < 2 or steps < 1:
            continue
        starts = np.arange(steps)[:, None] * step_s + np.arange(bins + 1)[None, :] * window_s
        edges = np.append(starts.ravel(), steps * step_s)  # each step's bins, then a gap
        counts = source.step_sums(edges)[0].reshape(steps, bins + 1)[:, :bins]
        total = counts.sum()
        if total <= 0:
            continue
        spread = ((counts - counts.mean(axis=1, keepdims=True)) ** 2).sum() * bins / (bins - 1)
        windows.append(window_s)
        excess.append(max(spread / total - 1.0, 0.0))
    if not windows or max(excess) < _CALM:
        return None
    return np.array(windows), np.array(excess)
