"""Bursty arrivals at the fluid level: how bursty a source is within a step (its excess
index of dispersion), and the fine pass that follows one site's batch and queue bin by
bin (`_BatchPass`; times in s, tokens, power in W).

- **Bursts.** Arrivals burstier than Poisson within a step (the excess index of
  dispersion of the source's counts in windows of 0.5 to 30 s within steps, measured once
  on its first 6 hours: 10 to 90 for the Azure code trace, 0 for a Poisson process or the
  synthetic generator) fill and drain the slots within seconds, which no stationary law
  sees. Such a source is followed by a fine pass instead (`_BatchPass`), block by block
  (one `advance_to`), its state carried between blocks: bins of 50 ms, split down to one
  request where its arrivals are apart (their output tokens are then known), each
  replica a processor-sharing server of the requests admitted to it, the queue FIFO with
  its timeout, followed event by event. From it come each piece's power and mean batch,
  and its arrivals' waits (uniform between the quantiles `_PASS_LEVELS` of the pass's
  waits) and times per token (their times in service over their output tokens). Its
  cost grows with the requests: a few heap operations each, and the bins.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from operator import attrgetter

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
_PASS_LEVELS = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0])
"""Probability levels between which a piece's waits from the fine pass are uniform."""
_PASS_NODES = 32
"""Quantile nodes of the output tokens a request's time per token is taken at."""
_PASS_STRATA = 1024
"""Quantile levels a request of a bin of several is given its output tokens at."""
_ATOM_S = 1e-3
"""A wait uniform over less than this (the latency grid's first point, s) is an atom."""


class _Replica:
    """One replica in the fine pass (`_BatchPass`): its sequences in flight as items on a
    heap of the token counts at which they finish, its counter u (tokens each sequence has
    received, brought up to `tv_s`), its pace and power at its batch, and when its next
    item finishes."""

    __slots__ = (
        "extra_w",
        "forced",
        "heap",
        "iter_s",
        "log_p0",
        "n",
        "next_s",
        "pace_s",
        "power_w",
        "slots",
        "tv_s",
        "u",
    )

    def __init__(self, model: ReplicaModel, t_s: float):
        self.u = 0.0
        """Tokens each sequence in flight has received since the replica started."""
        self.tv_s = t_s
        """Time `u` was brought up to, s."""
        self.n = 0.0
        """Sequences in flight (expected)."""
        self.forced = 0
        """Cohorts certain to hold a sequence in flight."""
        self.log_p0 = 0.0
        """log P(no sequence in flight) over the other cohorts."""
        self.heap: list[tuple[float, int, list, int]] = []
        """(u at which it finishes, order, [weight, bin, admitted at s], node (-1: every
        node)) of each item in flight."""
        self.iter_s: list[float] = []
        self.power_w: list[float] = []
        self.slots = 0
        self.pace_s = 0.0
        """Time per token now, s."""
        self.extra_w = 0.0
        """Power over idle now, W."""
        self.next_s = math.inf
        """When its next item finishes, s."""
        self.use(model)

    def use(self, model: ReplicaModel) -> None:
        """Serve from now (`tv_s`) with `model`'s tables (a cap)."""
        self.iter_s, self.power_w = model.iter_s.tolist(), model.power_w.tolist()
        self.slots = model.slots
        self.refresh()

    def at(self, t_s: float) -> None:
        """Bring the counter up to `t_s`."""
        self.u += (t_s - self.tv_s) / self.pace_s
        self.tv_s = t_s

    def refresh(self) -> None:
        """Pace, power and next finish after the batch changed (at `tv_s`)."""
        it, pw = self.iter_s, self.power_w
        if not self.heap or self.n < 1e-12:
            self.n, self.forced, self.log_p0 = 0.0, 0, 0.0
            self.pace_s, self.extra_w, self.next_s = it[1], 0.0, math.inf
            return
        n, s = self.n, self.slots
        j = min(int(n), s - 1)
        self.pace_s = it[1] if n < 1 else it[j] + (n - j) * (it[j + 1] - it[j])
        busy = 1.0 if self.forced else -math.expm1(self.log_p0)
        if busy > 1e-12:
            m = max(n / busy, 1.0)
            j = min(int(m), s - 1)
            self.extra_w = busy * (pw[j] + (m - j) * (pw[j + 1] - pw[j]) - pw[0])
        else:
            self.extra_w = 0.0
        self.next_s = self.tv_s + (self.heap[0][0] - self.u) * self.pace_s

    def drain(self) -> list[tuple[float, list, int]]:
        """(time s, cohort, node) each item finishes if no more are admitted, in order."""
        t, u, n = self.tv_s, self.u, self.n
        it, s = self.iter_s, self.slots
        out = []
        for u_f, _, c, j in sorted(self.heap):
            k = min(int(n), s - 1)
            t += (u_f - u) * (it[1] if n < 1 else it[k] + (n - k) * (it[k + 1] - it[k]))
            u = u_f
            n -= c[0]
            out.append((t, c, j))
        return out

    def drain_end_s(self) -> float:
        """When its last item finishes with no more admitted, s."""
        return self.drain()[-1][0] if self.heap else self.tv_s


class _BatchPass:
    """One site's replicas and queue under bursty arrivals, followed event by event.

    Each replica is a processor-sharing server: every sequence in its batch gets a token
    per iteration, so all of them have received the same number of tokens u since any
    earlier instant (du/dt = 1 / iter_s[n], n in flight on it), and a request admitted at
    u_i with `out` output tokens leaves when u reaches u_i + out. Requests are admitted
    from one FIFO queue, at most one at a time, to the replica with the fewest in flight
    (the request level's dispatcher) while it has a free slot; a bin's requests (the bins
    of `_fine_bins`, split down to one request where it can) are admitted from its start,
    and a request still queued `timeout_s` after its arrival is dropped (checked at bin
    ends). An admitted unit (one request, or a fraction: the site's share) is one item:
    of a bin of one request or less, of the bin's output tokens (its tokens over its
    requests); of a bin of k > 1 requests of mean output mu, of mu (1 - g + g x), x the
    sample over its mean at the unit's stratum (its place among the bin's requests), g =
    sqrt((k - 1) / k) (k draws spread about their mean that much less than the sample).
    Between two events (a bin with arrivals, an item finishing) every replica's batch is
    constant, so the pass jumps from event to event: a few heap operations per request,
    as at the request level.

    Power is concave (idle to one sequence is most of it): with items of weight w < 1
    present independently, E[power(N)] on a replica is taken as P(N > 0) power(E[N | N >
    0]), P(N = 0) the product over its items of 1 - w.

    Fewer replicas (`resize`): those with the fewest in flight (ties: the newest) stop
    admitting and drain their batch, as at the request level; their GPUs are free when
    their last item finishes. More: empty replicas.

    The waits of the requests queued at the end of a block come from going on without
    arrivals until the queue is empty, and the times in service of those still in flight
    then from each replica's drain (`_Replica.drain`); the state carried to the next
    block is the one at its end.

    Units: times s, u and output tokens in tokens, counts in requests (fractional)."""

    def __init__(self, output_sample: np.ndarray):
        out = np.sort(np.asarray(output_sample, dtype=float))
        self.nodes = np.quantile(out / out.mean(), (np.arange(_PASS_NODES) + 0.5) / _PASS_NODES)
        """Outputs over their mean at the mid-levels of `_PASS_NODES` quantile bins."""
        self._strata = np.quantile(
            out / out.mean(), (np.arange(_PASS_STRATA) + 0.5) / _PASS_STRATA
        ).tolist()
        """Outputs over their mean at the mid-levels of `_PASS_STRATA` quantile bins."""
        self.reps: list[_Replica] = []
        """Replicas admitting, oldest first."""
        self.draining: list[_Replica] = []
        """Replicas out of admission still serving their batch."""
        self._order = 0
        self.q_t = np.zeros(0)
        self.q_w = np.zeros(0)
        self.q_n = np.zeros(0)
        self.q_o = np.zeros(0)
        """Requests queued: the start (s) and width (s) of the bin they arrived in, count,
        output tokens."""

    @staticmethod
    def spread(k: np.ndarray) -> np.ndarray:
        """The spread of k draws about their mean relative to the sample's."""
        return np.sqrt(np.maximum(k - 1.0, 0.0) / np.maximum(k, 1e-300))

    def in_flight(self) -> float:
        return float(sum(r.n for r in self.reps) + sum(r.n for r in self.draining))

    def queued(self) -> float:
        return float(self.q_n.sum())

    def shed(self, keep: float) -> None:
        """Keep this share of the queued requests."""
        self.q_n = self.q_n * keep
        self.q_o = self.q_o * keep

    def resize(self, t_s: float, ready: int, model: ReplicaModel) -> float:
        """From `t_s`, `ready` replicas of `model` admit (module docstring); returns when
        the replicas taken out of admission have drained, s (`t_s`: none). With none
        left, the site's batch is dropped at once (nothing would report its power)."""
        for r in self.reps + self.draining:
            r.at(t_s)
        if ready == 0:
            self.reps, self.draining = [], []
            return t_s
        out = sorted(range(len(self.reps)), key=lambda i: (self.reps[i].n, -i))
        out = out[: max(len(self.reps) - ready, 0)]
        leaving = [self.reps[i] for i in sorted(out)]
        self.reps = [r for i, r in enumerate(self.reps) if i not in out]
        self.draining += [r for r in leaving if r.heap]
        self.reps += [_Replica(model, t_s) for _ in range(ready - len(self.reps))]
        for r in self.reps:
            r.use(model)
        return max([t_s] + [r.drain_end_s() for r in leaving if r.heap])

    def run(
        self,
        model: ReplicaModel,
        replicas: int,
        edges: np.ndarray,
        arrivals: np.ndarray,
        tokens: np.ndarray,
        timeout_s: float,
    ) -> dict[str, np.ndarray]:
        """Bins [edges[j], edges[j + 1]) with `arrivals` each, of `tokens` output tokens,
        served by `replicas` replicas of `model` admitting (those missing added).
        Per bin: mean sequences in flight `n`, mean extra power `extra_w` (W over idle,
        all replicas); per bin's arrivals: `dropped`, waits `v0` of the first and `v1` of
        the last served (s) and, per output node (`nodes` x the bin's mean output `out`),
        time in service `service_s` (s)."""
        t0 = float(edges[0])
        if len(self.reps) != replicas:
            self.resize(t0, replicas, model)
        nb = len(arrivals)
        start = len(self.q_n)
        times = np.concatenate([self.q_t, edges[:-1]])
        counts = np.concatenate([self.q_n, arrivals])
        widths = np.concatenate([self.q_w, np.diff(edges)])
        cum_a = np.concatenate([[0.0], np.cumsum(counts)])
        mean_out = np.where(
            counts > 0, np.concatenate([self.q_o, tokens]) / np.maximum(counts, 1e-300), 0.0
        )
        knots_t = np.stack([times, times + widths], axis=1).ravel()
        knots_a = np.stack([cum_a[:-1], cum_a[1:]], axis=1).ravel()
        total = float(cum_a[-1])
        cum_l, mean_l = cum_a.tolist(), mean_out.tolist()
        spread_l = self.spread(counts).tolist()
        n_nodes = len(self.nodes)
        strata = self._strata
        n_strata = len(strata)
        edge_l = edges.tolist()
        arrived_by = np.interp(edges[1:], knots_t, knots_a, left=0.0, right=total).tolist()
        late_l = np.interp(edges[1:] - timeout_s, knots_t, knots_a, left=0.0, right=total)
        late_l = late_l.tolist()
        # times in service of this block's items: weighted sums per bin (one item for
        # every node) and per bin and node
        one_d, one_w = [0.0] * nb, [0.0] * nb
        node_d, node_w = np.zeros((nb, n_nodes)), np.zeros((nb, n_nodes))
        reps = self.reps
        everyone = reps + self.draining
        order = self._order
        removed = 0.0
        head = 0  # the queue's first bin with requests left
        t_l, d_l = [t0], [0.0]  # cumulative admitted or dropped, knots
        drop_knots = [(0.0, 0.0)]  # (queue position, cumulative dropped)
        dropped = 0.0
        # the sequences in flight and the power over all replicas, and their integrals over
        # time within the current bin
        pool_n = sum(r.n for r in everyone)
        pool_w = sum(r.extra_w for r in everyone)
        acc_n = acc_w = 0.0
        n_mean, w_mean = [0.0] * nb, [0.0] * nb
        snapshot: tuple | None = None

        def spent(c: list, j: int, done_s: float) -> None:
            """An item of this block's bin c[1] (node j, -1: all) finished at done_s."""
            w, b = c[0], c[1]
            if j < 0:
                one_d[b] += (done_s - c[2]) * w
                one_w[b] += w
            else:
                node_d[b, j] += (done_s - c[2]) * w
                node_w[b, j] += w

        def snap() -> tuple:
            """The state at the block's end."""
            return (
                [(r, r.u, r.tv_s, r.n, r.forced, r.log_p0, list(r.heap)) for r in everyone],
                [c for r in everyone for _, _, c, _ in r.heap],
                removed,
            )

        def finished(r: _Replica) -> None:
            """Items of `r` at the head of its heap leave (at its `tv_s`)."""
            nonlocal pool_n, pool_w
            heap = r.heap
            top = heap[0][0]
            r.u = top
            pool_n -= r.n
            pool_w -= r.extra_w
            while heap and heap[0][0] <= top + 1e-9:
                _, _, c, j = heappop(heap)
                w = c[0]
                if w >= 1.0 - 1e-12:  # certain, or present with probability w
                    r.forced -= 1
                else:
                    r.log_p0 -= math.log1p(-w)
                r.n -= w
                if c[1] >= 0:
                    spent(c, j, r.tv_s)
            r.refresh()
            pool_n += r.n
            pool_w += r.extra_w

        def admit(t: float, arrived: float) -> None:
            """Requests from the queue's head to the replicas with a free slot, one at a
            time (a unit whole), each to the one with the fewest in flight."""
            nonlocal removed, head, order, pool_n, pool_w
            before = removed
            while removed < arrived - 1e-12 and reps:
                r = min(reps, key=_IN_FLIGHT) if len(reps) > 1 else reps[0]
                while cum_l[head + 1] <= removed + 1e-12:
                    head += 1
                part = min(cum_l[head + 1] - removed, 1.0)
                if part > r.slots - r.n + 1e-9:  # whole units only: no fragments
                    break
                r.u += (t - r.tv_s) / r.pace_s
                r.tv_s = t
                mu, g = mean_l[head], spread_l[head]
                order += 1
                if g > 0.0:  # the bin's requests at its strata of the sample
                    q = (removed - cum_l[head] + part / 2) / (cum_l[head + 1] - cum_l[head])
                    x = strata[min(int(q * n_strata), n_strata - 1)]
                    j = min(int(q * n_nodes), n_nodes - 1)
                    item = (r.u + mu * (1.0 - g + g * x), order, [part, head - start, t], j)
                else:
                    item = (r.u + mu, order, [part, head - start, t], -1)
                heappush(r.heap, item)
                pool_n -= r.n
                pool_w -= r.extra_w
                if part >= 1.0 - 1e-12:
                    r.forced += 1
                else:
                    r.log_p0 += math.log1p(-part)
                r.n += part
                removed += part
                r.refresh()
                pool_n += r.n
                pool_w += r.extra_w
            if removed > before:
                t_l.append(t)
                d_l.append(before)
                t_l.append(t)
                d_l.append(removed)

        def first() -> _Replica | None:
            return (
                min(everyone, key=_NEXT_S, default=None)
                if len(everyone) > 1
                else (everyone[0] if everyone else None)
            )

        nxt = first()
        b = 0
        t = t0
        while True:
            if b == nb:
                snapshot = snap()
            t1 = edge_l[b + 1] if b < nb else t + _PASS_QUIET_S
            arrived = arrived_by[b] if b < nb else total
            if removed < arrived - 1e-12:
                admit(t, arrived)
                nxt = first()
            while nxt is not None and nxt.next_s <= t1:
                r = nxt
                t_e = r.next_s
                acc_n += pool_n * (t_e - t)
                acc_w += pool_w * (t_e - t)
                t = r.tv_s = t_e
                finished(r)
                if self.draining and not r.heap and r in self.draining:
                    self.draining.remove(r)
                    everyone.remove(r)
                if removed < arrived - 1e-12:
                    admit(t, arrived)
                nxt = first()
            acc_n += pool_n * (t1 - t)
            acc_w += pool_w * (t1 - t)
            if b < nb:
                n_mean[b] = acc_n / (t1 - edge_l[b])
                w_mean[b] = acc_w / (t1 - edge_l[b])
            acc_n = acc_w = 0.0
            t = t1
            late = (
                late_l[b]
                if b < nb
                else float(np.interp(t1 - timeout_s, knots_t, knots_a, left=0.0, right=total))
            )
            if late > removed:
                drop_knots.append((removed, dropped))
                t_l.append(t)
                d_l.append(removed)
                dropped += late - removed
                removed = late
                drop_knots.append((removed, dropped))
                t_l.append(t)
                d_l.append(removed)
            b += 1
            if b >= nb and removed >= total - 1e-9:
                break
        # the items of this block still in flight: their drain without more admitted
        for r in everyone:
            for done, c, j in r.drain():
                if c[1] >= 0:
                    spent(c, j, done)
        if snapshot is None:
            snapshot = snap()
        states, alive, removed0 = snapshot
        for r, u, tv_s, n, forced, log_p0, heap in states:
            r.u, r.tv_s, r.n, r.forced, r.log_p0, r.heap = u, tv_s, n, forced, log_p0, heap
            r.refresh()
        for c in alive:
            c[1] = -1  # carried: its times in service are this block's
        self.draining = [r for r, *_ in states if r not in reps and r.heap]
        self._order = order
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
        spread = self.spread(arrivals)[:, None]
        out = mean_out[start:, None] * (1.0 - spread + spread * self.nodes[None, :])
        sum_d = np.asarray(one_d)[:, None] + node_d
        sum_w = np.asarray(one_w)[:, None] + node_w
        service_s = np.divide(sum_d, sum_w, out=np.zeros_like(sum_d), where=sum_w > 1e-12)
        # a node no request of a bin of several fell on takes the nearest one's
        hit = sum_w > 1e-12
        at = np.where(hit, np.arange(n_nodes)[None, :], -1)
        at = np.maximum.accumulate(at, axis=1)
        at = np.where(at < 0, np.argmax(hit, axis=1)[:, None], at)
        service_s = np.take_along_axis(service_s, at, axis=1)
        return {
            "n": np.array(n_mean),
            "extra_w": np.array(w_mean),
            "dropped": lost,
            "v0": v0,
            "v1": v1,
            "service_s": service_s,
            "out": out,
        }


_IN_FLIGHT = attrgetter("n")
_NEXT_S = attrgetter("next_s")


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
    counts = source.step_sums(np.append(points, edges[-1]))[0]
    inner = np.arange(_PASS_SPLIT + 1) / _PASS_SPLIT
    for _ in range(_PASS_SPLITS):  # a bin of several requests split (if they are apart)
        crowded = np.flatnonzero(counts > 1)
        if not len(crowded):
            break
        lo = points[crowded]
        hi = np.append(points[1:], edges[-1])[crowded]
        sub = lo[:, None] + (hi - lo)[:, None] * inner[None, :]  # each bin's edges
        sub_counts = np.append(source.step_sums(sub.ravel())[0], 0.0)
        sub_counts = sub_counts.reshape(len(crowded), _PASS_SPLIT + 1)[:, :_PASS_SPLIT]
        counts[crowded] = sub_counts[:, 0]
        points = np.concatenate([points, sub[:, 1:-1].ravel()])
        counts = np.concatenate([counts, sub_counts[:, 1:].ravel()])
        anchor = np.concatenate([anchor, np.zeros(sub[:, 1:-1].size, dtype=bool)])
        order = np.argsort(points, kind="stable")
        points, anchor, counts = points[order], anchor[order], counts[order]
    piece = np.minimum(np.searchsorted(edges, points, side="right") - 1, count - 1)
    # bins without arrivals merged, up to _PASS_QUIET_S
    some = counts > 0
    starts = np.flatnonzero(anchor | some | np.concatenate([[True], some[:-1]]))
    fine = np.append(points[starts], edges[-1])
    arrivals, _, tokens = source.step_sums(fine)
    return fine, share * arrivals, share * tokens, piece[starts]


def _first_reach(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The first time the nondecreasing, piecewise-linear v(t) (knots t, v) reaches x."""
    i = np.clip(np.searchsorted(v, x, side="left"), 1, len(v) - 1)
    lo, hi = v[i - 1], v[i]
    f = np.clip((x - lo) / np.maximum(hi - lo, 1e-300), 0.0, 1.0)
    return t[i - 1] + f * (t[i] - t[i - 1])


def _uniform_mixture_quantiles(
    group: np.ndarray,
    count: int,
    n: np.ndarray,
    v0: np.ndarray,
    v1: np.ndarray,
    levels: np.ndarray,
) -> np.ndarray:
    """Per group of `count` (item j in group `group[j]`), the quantiles at `levels` (0 and
    1: the least and most) of the mixture of uniforms on [v0, v1] weighted by n, s: its
    CDF on 0 and LATENCY_GRID_S (exact there: sums of steps and ramps accumulated over
    the grid), linear in between; a uniform narrower than `_ATOM_S` is an atom at its
    middle. Returns [level, group] (0 for a group of no weight)."""
    out = np.zeros((len(levels), count))
    has = n > 0
    if not has.any():
        return out
    ids, group = np.unique(group[has], return_inverse=True)
    n, lo, hi = n[has], np.minimum(v0, v1)[has], np.maximum(v0, v1)[has]
    g = np.concatenate([[0.0], LATENCY_GRID_S])
    size = len(g) + 1
    cells = len(ids) * size

    def on_grid(at: np.ndarray, weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per group, the cumulative sum over the grid of `weight` placed at the first
        grid point >= `at`."""
        col = np.searchsorted(g, at, side="left")
        acc = np.bincount(rows * size + col, weight, cells).astype(float)
        acc = acc.reshape(len(ids), size)
        return np.cumsum(acc, axis=1)[:, :-1]

    atom = hi - lo < _ATOM_S
    mid = (lo + hi) / 2
    mass = on_grid(mid[atom], n[atom], group[atom])
    ramp = ~atom
    if ramp.any():  # n (g - lo)+ / width - n (g - hi)+ / width
        rows = np.concatenate([group[ramp], group[ramp]])
        at = np.concatenate([lo[ramp], hi[ramp]])
        slope = n[ramp] / (hi - lo)[ramp]
        slope = np.concatenate([slope, -slope])
        mass += g[None, :] * on_grid(at, slope, rows) - on_grid(at, slope * at, rows)
    total = np.bincount(group, n, len(ids))[:, None]
    cdf = np.maximum.accumulate(np.clip(mass / total, 0.0, 1.0), axis=1)
    i = np.clip((cdf[:, None, :] < levels[None, :, None]).sum(axis=2), 1, len(g) - 1)
    rows = np.arange(len(ids))[:, None]
    c0, c1 = cdf[rows, i - 1], cdf[rows, i]
    x = np.clip((levels[None, :] - c0) / np.maximum(c1 - c0, 1e-300), 0.0, 1.0)
    q = g[i - 1] + x * (g[i] - g[i - 1])
    least = np.full(len(ids), np.inf)
    most = np.full(len(ids), -np.inf)
    np.minimum.at(least, group, np.where(atom, mid, lo))
    np.maximum.at(most, group, np.where(atom, mid, hi))
    out[:, ids] = np.clip(q, least[:, None], most[:, None]).T
    return out


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
