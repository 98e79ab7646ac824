"""One replica of the iteration level (`_Replica`): vLLM V1's scheduler run iteration by
iteration, in closed form between the events that change its batch; times in s.

At every iteration boundary the scheduler (vLLM V1 `Scheduler.schedule`, Sarathi-Serve's
stall-free batching) gives each running decode one token, then continues the prompts being
prefilled, then admits waiting requests first come first served, while the iteration's
tokens stay within `max_num_batched_tokens`, the running sequences within `max_num_seqs`
and the KV blocks within the cache. With chunked prefill a prompt takes what is left of
the budget and continues in the next iterations; without it a prompt is admitted whole.
A prompt's first token comes at the end of the iteration that computes its last chunk.

An iteration lasts `IterationCost.step(B, C, P)`: B decodes, C tokens of context they
read, P prefill tokens. The replica is in one of three modes:

- idle (nothing running or waiting);
- a mixed iteration whose prompts do not all complete in it: one event at its end;
- an epoch: a first iteration (decodes only, or decodes and prompts that all complete in
  it), then decode iterations with the batch unchanged, each sequence's context one token
  longer each time, so the `i`-th of them lasts `d0 + g i` (the cost's tangent in C) and
  the time of `m` iterations is an arithmetic series. The epoch's one event is the first
  boundary where something changes: a request finishes (a heap of finish iterations), the
  KV cache needs a block it lacks, or a request arrived during the iteration in progress
  (it is scheduled at that iteration's end).

KV cache (paged attention): a running sequence whose context is `c` tokens holds
ceil((c + 1) / block_size) blocks for the iteration that computes its next token. When a
decode needs a block and none is free, the running request admitted last is preempted
(vLLM V1: recompute): its blocks are freed, it goes back to the head of the queue, and on
readmission prefills its prompt and the tokens it had generated again (counted in
`recomputed`), then decodes the rest. With swap (`_Limits.swap_s`) a decode's KV goes to
the host and back instead, each transfer lengthening the iteration scheduled with it.
A request whose prompt plus output exceeds the replica's `max_model_len`, or (chunked
prefill off) whose prompt exceeds the token budget, is refused at arrival.

Prefix caching (`_Limits.prefix_hit_rate`): at each admission a prompt finds
`_Limits.cached` of its tokens in the cache; it holds their KV blocks (not shared with
other requests) but computes, and takes budget for, only the others.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heapify, heappop, heappush

import numpy as np
from mypy_extensions import mypyc_attr

from sim.models.llm_iteration import IterationCost
from sim.serving.iteration_level.records import _IterRequests
from sim.serving.request_level.records import _DROPPED, _SERVED

_IDLE, _DECODE, _MIXED = 0, 1, 2


class _Limits:
    """A replica's scheduler limits, resolved (docs/serving.md "Iteration level")."""

    __slots__ = (
        "batched_tokens",
        "max_seqs",
        "chunked",
        "block_size",
        "blocks",
        "max_len",
        "swap_s",
        "prefix_hit_rate",
    )

    def __init__(
        self,
        batched_tokens: int,
        max_seqs: int,
        chunked: bool,
        block_size: int,
        blocks: int,
        max_len: int,
        swap_s: float = 0.0,
        prefix_hit_rate: float = 0.0,
    ):
        self.batched_tokens = batched_tokens
        self.max_seqs = max_seqs
        self.chunked = chunked
        self.block_size = block_size
        self.blocks = blocks
        """KV blocks of the cache."""
        self.max_len = max_len
        """Most tokens of context (prompt + output) of one request."""
        self.swap_s = swap_s
        """Swap preemption: time to move one token's KV between GPU and host, s (0: a
        preempted request is recomputed)."""
        self.prefix_hit_rate = prefix_hit_rate
        """Share of each prompt's tokens in the prefix cache (`cached`)."""

    def cached(self, input_tokens: int) -> int:
        """Tokens of a prompt of `input_tokens` found in the prefix cache at each admission:
        `sim.models.llm_replica.cached_tokens` for one prompt (their KV blocks held, not
        computed)."""
        return int(self.prefix_hit_rate * input_tokens)


class _SiteState:
    """What a replica updates of its site: the loads routing reads and its changes of power
    and of the idle replicas (times, possibly ahead of the events served, and differences),
    reported in time order by `flush`."""

    __slots__ = ("loads", "index", "on_power", "t", "dw", "dn", "di", "extra_w", "busy", "idle")

    def __init__(self, index: int, on_power: Callable[..., None]):
        self.index = index
        self.loads: list[int] = []
        """Requests (running + waiting) of each admitting replica."""
        self.on_power = on_power
        self.t: list[float] = []
        self.dw: list[float] = []
        """Changes of a replica's power over idle, W, from the times `t`."""
        self.dn: list[int] = []
        """Changes of the number of busy replicas (power over idle exactly 0 with none)."""
        self.di: list[int] = []
        """Changes of the number of idle replicas: admitting ones with nothing in flight
        (power over idle 0; draining ones always have some)."""
        self.extra_w = 0.0
        self.busy = 0
        self.idle = 0
        """Power over idle, busy and idle replicas as last reported."""

    def idle_changed(self, t_s: float, di: int) -> None:
        """`di` more idle replicas from `t_s` (replicas added or taken out of admission)."""
        self.t.append(t_s)
        self.dw.append(0.0)
        self.dn.append(0)
        self.di.append(di)

    def flush(self, t_s: float) -> None:
        """Report the changes up to `t_s` (included) in time order, the site's power over
        idle the sum of its replicas' (exactly 0 with none busy), and its idle replicas."""
        if not self.t:
            return
        # In order iff equal to its sorted copy: a sort in C, 0.5 us against 3.7 us for a
        # generator comparing neighbours (timeit, 35 changes: a 60 s step at 2% load).
        if len(self.t) < 64 and self.t[-1] <= t_s and self.t == sorted(self.t):
            self._flush_few()
            return
        t = np.asarray(self.t)
        now = t <= t_s
        order = np.argsort(t[now], kind="stable")
        dw, dn = np.asarray(self.dw)[now][order], np.asarray(self.dn)[now][order]
        di = np.asarray(self.di)[now][order]
        times = t[now][order]
        if len(times) < len(t):
            later = ~now
            self.t, self.dw = t[later].tolist(), np.asarray(self.dw)[later].tolist()
            self.dn = np.asarray(self.dn)[later].tolist()
            self.di = np.asarray(self.di)[later].tolist()
        else:
            self.t, self.dw, self.dn, self.di = [], [], [], []
        if not len(times):
            return
        extra = self.extra_w + np.cumsum(dw)
        busy = self.busy + np.cumsum(dn)
        idle = self.idle + np.cumsum(di)
        extra[busy == 0] = 0.0
        last = np.append(times[1:] != times[:-1], True)
        self.extra_w, self.busy, self.idle = float(extra[-1]), int(busy[-1]), int(idle[-1])
        self.on_power(self.index, times[last], extra[last], idle[last])

    def _flush_few(self) -> None:
        """`flush` of a few changes, all due and in order (the same arithmetic, in Python)."""
        times: list[float] = []
        levels: list[float] = []
        idles: list[int] = []
        e, n, i = self.extra_w, self.busy, self.idle
        for t, dw, dn, di in zip(self.t, self.dw, self.dn, self.di, strict=True):
            e += dw
            n += dn
            i += di
            if not n:
                e = 0.0
            if times and times[-1] == t:
                levels[-1], idles[-1] = e, i
            else:
                times.append(t)
                levels.append(e)
                idles.append(i)
        self.t, self.dw, self.dn, self.di = [], [], [], []
        self.extra_w, self.busy, self.idle = e, n, i
        self.on_power(self.index, np.array(times), np.array(levels), np.array(idles))


@mypyc_attr(allow_interpreted_subclasses=True)  # the prefill-only replica of disaggregated.py
class _Replica:
    """One replica's scheduler state (module docstring)."""

    __slots__ = (
        "site",
        "pos",
        "rq",
        "cost",
        "lim",
        "mi",
        "timeout_s",
        "mode",
        "t",
        "k",
        "b",
        "s",
        "d0",
        "d1",
        "g",
        "ev_k",
        "heap",
        "base",
        "order",
        "waiting",
        "pf",
        "chunks",
        "pf_blocks",
        "w",
        "ver",
        "n_admitted",
        "pending",
        "next_t",
        "first",
        "extra_s",
    )

    def __init__(
        self,
        site: _SiteState,
        pos: int,
        rq: _IterRequests,
        cost: IterationCost,
        lim: _Limits,
        mi: int,
        timeout_s: float,
        t_s: float,
    ):
        self.site = site
        self.pos = pos
        """Index among the site's admitting replicas; -1 once draining."""
        self.rq = rq
        self.cost = cost
        self.lim = lim
        self.mi = mi
        """Index of its model (`_Fleet.models`)."""
        self.timeout_s = timeout_s
        self.mode = _IDLE
        self.t = t_s
        """Time of the last boundary (a decode epoch's start), s."""
        self.k = 0
        """Iterations done at `t`."""
        self.b = 0
        """Running decodes."""
        self.s = 0
        """Sum over the decodes of `base`: their context at boundary K is s + b K tokens."""
        self.d1 = 0.0
        """The epoch's first iteration (from boundary `k`), s."""
        self.d0 = 0.0
        self.g = 0.0
        """The epoch's next iteration, s, and the growth per iteration after it, s."""
        self.ev_k = 0
        """The boundary of a decode epoch's event."""
        self.heap: list[tuple[int, int]] = []
        """(boundary of the last token, request) of the running decodes."""
        self.base: dict[int, int] = {}
        """A decode's context at boundary K is base + K tokens."""
        self.order: dict[int, int] = {}
        """Admission order of the running requests (preemption takes the last)."""
        self.waiting: deque[int] = deque()
        self.pf: list[list[int]] = []
        """Prompts being prefilled: [request, tokens to compute, tokens computed]."""
        self.chunks: list[tuple[list[int], int]] = []
        """The mixed iteration in progress: (prefill entry, tokens computed in it)."""
        self.pf_blocks = 0
        """Blocks held by the prompts being prefilled."""
        self.w = 0.0
        """Power over idle now, W."""
        self.ver = -1
        """Version of its calendar entry."""
        self.n_admitted = 0
        self.pending: IterationCost | None = None
        """A new cost (a cap change) from the next boundary."""
        self.next_t = -1.0
        """Time of its next event, s (-1: none; kept by the fleet's calendar)."""
        self.first = (0, 0)
        """(decodes, prefill tokens) of the iteration from boundary `k`."""
        self.extra_s = 0.0
        """KV swapped out and in while scheduling the iteration from `k`: its time, s."""

    def ghost(self, site: _SiteState, rq: _IterRequests) -> _Replica:
        """A copy of the replica that writes to `site` and `rq` instead, with its own
        calendar of finishes, queue and prompt entries, to run ahead (a drain's end), of the
        replica's own class (a prefill-only replica's copy only prefills)."""
        g = type(self)(site, self.pos, rq, self.cost, self.lim, self.mi, self.timeout_s, self.t)
        g.mode, g.k, g.b, g.s = self.mode, self.k, self.b, self.s
        g.d1, g.d0, g.g, g.ev_k = self.d1, self.d0, self.g, self.ev_k
        g.heap, g.base, g.order = list(self.heap), dict(self.base), dict(self.order)
        g.waiting = deque(self.waiting)
        g.pf = [list(e) for e in self.pf]
        index = {id(e): x for x, e in enumerate(self.pf)}
        g.chunks = [(g.pf[index[id(e)]], c) for e, c in self.chunks]
        g.pf_blocks, g.w, g.ver, g.n_admitted = self.pf_blocks, self.w, self.ver, self.n_admitted
        g.pending, g.next_t, g.first, g.extra_s = (
            self.pending,
            self.next_t,
            self.first,
            self.extra_s,
        )
        return g

    # -- events ------------------------------------------------------------------------

    def arrive(self, j: int, t: float) -> float:
        """Request `j` arrives at `t`; returns the time of the replica's new next event, or
        -1 if its event is unchanged."""
        rq = self.rq
        lim = self.lim
        if rq.input[j] + rq.output[j] > lim.max_len or (
            not lim.chunked and rq.input[j] - lim.cached(rq.input[j]) > lim.batched_tokens
        ):
            rq.refused[j] = 1
            rq.state[j] = _DROPPED
            if self.pos >= 0:
                self.site.loads[self.pos] -= 1
            return -1.0
        self.waiting.append(j)
        mode = self.mode
        if mode == _DECODE:
            if self.b + len(self.pf) >= lim.max_seqs:
                return -1.0
            return self.cut(t)
        if mode == _IDLE:
            self.t = t
            return self.schedule(t)
        return -1.0

    def cut(self, t: float) -> float:
        """In an epoch, move the event to the end of the iteration in progress at `t`
        (something waits to be scheduled); returns the new event time or -1."""
        x = t - self.t - self.d1
        if x < 0.0:
            kb = self.k + 1
        else:
            d0, g = self.d0, self.g
            if g > 0.0:
                a = d0 - 0.5 * g
                m = int((math.sqrt(a * a + 2.0 * g * x) - a) / g)
            else:
                m = int(x / d0)
            while m > 0 and m * d0 + 0.5 * g * m * (m - 1) > x:
                m -= 1
            while (m + 1) * d0 + 0.5 * g * (m + 1) * m <= x:
                m += 1
            kb = self.k + m + 2
        if kb >= self.ev_k:
            return -1.0
        self.ev_k = kb
        return self.time_of(kb)

    def time_of(self, kb: int) -> float:
        """Time of boundary `kb` (> `k`) of the epoch, s."""
        m = kb - self.k - 1
        return self.t + self.d1 + m * self.d0 + 0.5 * self.g * m * (m - 1)

    def event(self, t: float) -> float:
        """The event at boundary time `t`: the end of a mixed iteration or an epoch's event;
        returns the next event time (-1: idle)."""
        if self.mode == _MIXED:
            k = self.k + 1
            self._prefilled(k, t)
        else:
            k = self.ev_k
        self.k = k
        self.t = t
        heap = self.heap
        if heap and heap[0][0] <= k:
            rq, bases, order = self.rq, self.base, self.order
            end_s, state, gen, output = rq.end_s, rq.state, rq.gen, rq.output
            done = 0
            while heap and heap[0][0] <= k:
                j = heappop(heap)[1]
                self.s -= bases.pop(j)
                end_s[j] = t
                state[j] = _SERVED
                gen[j] = output[j]
                del order[j]
                done += 1
            self.b -= done
            if self.pos >= 0:
                self.site.loads[self.pos] -= done
        return self.schedule(t)

    def _prefilled(self, k: int, t: float) -> None:
        """The chunks of the iteration ending at boundary `k`, time `t`, are computed: the
        prompts complete join the decodes with their first token (done at once, a request
        whose answer is one token in the heap at `k`)."""
        for e, c in self.chunks:
            e[2] += c
        self.chunks = []
        # One pass over the prompts (not a filter, then a loop): the common case is one
        # prompt, completing.
        rq, bs = self.rq, self.lim.block_size
        heap, bases = self.heap, self.base
        gen, first_s, inp, output = rq.gen, rq.first_s, rq.input, rq.output
        left = []
        blocks = joined = added = 0
        for e in self.pf:
            if e[2] < e[1]:
                left.append(e)
                continue
            j = e[0]
            blocks += -(-e[2] // bs)
            g = gen[j] + 1
            gen[j] = g
            if first_s[j] != first_s[j]:
                first_s[j] = t
            base = inp[j] + g - 1 - k
            heappush(heap, (k + output[j] - g, j))
            bases[j] = base
            joined += 1
            added += base
        if not joined:
            return
        self.pf = left
        self.pf_blocks -= blocks
        self.b += joined
        self.s += added

    # -- the scheduler -------------------------------------------------------------------

    def schedule(self, t: float) -> float:
        """Schedule the iteration from boundary `self.k`, time `t`, and the epoch it starts;
        returns the time of the next event (-1: idle)."""
        if self.pending is not None:
            self.cost, self.pending = self.pending, None
        lim, k, b = self.lim, self.k, self.b
        admit = True
        free = lim.blocks - self.pf_blocks
        if b:
            # Blocks of the decodes: a bound (each at most one partly filled block) while
            # the cache is far from full, exact when close (within one schedule's blocks).
            bs = lim.block_size
            used = (self.s + b * (k + 1)) // bs + b
            if used + lim.batched_tokens // bs + len(self.pf) + 2 > free:
                used = self._exact_blocks(k)
            free -= used
            while free < 0:
                free += self._preempt()
                admit = False  # vLLM V1 admits nobody in a step that preempted
            b = self.b
        p, held = 0, False
        if self.pf or self.waiting:
            p, held, partial = self._chunks(t, free, admit)
            b = self.b  # with the decodes swapped back in
        cost = self.cost
        self.first = (b, p)
        swap_s, self.extra_s = self.extra_s, 0.0
        st = self.site
        w_old = self.w
        if p:
            dm, w = cost.step(b, self.s + b * k, p)
            dm += swap_s
            if w != w_old:
                st.t.append(t)
                st.dw.append(w - w_old)
                st.dn.append(0 if w_old > 0.0 else 1)
                st.di.append(0 if w_old > 0.0 or self.pos < 0 else -1)
                w_old = self.w = w
            if partial:
                self.mode = _MIXED
                return t + dm
            # Every prompt completes in this iteration: the epoch goes on with the decodes.
            k1 = k + 1
            t1 = t + dm
            self._prefilled(k1, t1)
            b = self.b
            d0, g, w = cost.decode(b, self.s + b * k1)
            self.d1, self.d0, self.g = dm, d0, g
        elif b:
            d1, g, w = cost.decode(b, self.s + b * k)
            self.d1, self.d0, self.g = d1 + swap_s, d1 + g, g
            k1, t1 = k, t
        elif self.pf:
            # Nothing could run: prompts in prefill hold the blocks the others need.
            self._preempt()
            return self.schedule(t)
        else:
            self.mode = _IDLE
            if w_old != 0.0:
                st.t.append(t)
                st.dw.append(-w_old)
                st.dn.append(-1)
                st.di.append(0 if self.pos < 0 else 1)
                self.w = 0.0
            return -1.0
        if w != w_old:
            st.t.append(t1)
            st.dw.append(w - w_old)
            st.dn.append(0 if w_old > 0.0 else 1)
            st.di.append(0 if w_old > 0.0 or self.pos < 0 else -1)
            self.w = w
        # The epoch: its event is the first finish, or the first boundary where the decodes'
        # blocks may exceed the cache by a bound (exact when it comes first), or the next
        # boundary for a request the budget alone held.
        self.mode = _DECODE
        ev = self.heap[0][0]
        if held:
            ev = k + 1
        else:
            s, bs = self.s, lim.block_size
            room = lim.blocks - self.pf_blocks
            if -(-((room - b + 1) * bs - s) // b) - 1 < ev:
                free = room - self._exact_blocks(k1)
                ev = k1 if free < 0 else min(ev, self._kv_boundary(k1, free))
        self.ev_k = ev
        return self.time_of(ev)

    def _chunks(self, t: float, free: int, admit: bool) -> tuple[int, bool, bool]:
        """Fill the iteration from boundary `self.k` with prefill chunks: the prompts being
        prefilled, then waiting requests first come first served (`admit`), within the
        token budget left by the decodes, the sequences and the `free` KV blocks; returns
        (prefill tokens, whether a waiting request is held by the budget alone, to be
        scheduled at the next boundary, whether a prompt is left unfinished after it)."""
        lim, rq = self.lim, self.rq
        bs = lim.block_size
        budget = lim.batched_tokens - self.b
        chunks = self.chunks
        p = 0
        partial = False
        for e in self.pf:
            left = e[1] - e[2]
            c = min(left, budget)
            nb = -(-(e[2] + c) // bs) - -(-e[2] // bs)
            if c <= 0 or nb > free:
                partial = True
                break
            partial = partial or c < left
            chunks.append((e, c))
            self.pf_blocks += nb
            free -= nb
            budget -= c
            p += c
        waiting = self.waiting
        seqs = self.b + len(self.pf)
        while admit and waiting and seqs < lim.max_seqs:
            j = waiting[0]
            started = rq.admit_s[j] == rq.admit_s[j]
            if not started and t - rq.arrival_s[j] > self.timeout_s:
                waiting.popleft()
                rq.state[j] = _DROPPED
                if self.pos >= 0:
                    self.site.loads[self.pos] -= 1
                continue
            if rq.swapped[j]:
                if budget <= 0:
                    return p, True, partial
                ctx = rq.swapped[j]
                nb = -(-(ctx + 1) // bs)
                if nb > free:
                    break
                waiting.popleft()
                self._swap_in(j, ctx)
                free -= nb
                budget -= 1
                seqs += 1
                continue
            need = rq.input[j] + rq.gen[j]
            hit = lim.cached(rq.input[j])
            c = min(need - hit, budget)
            if c <= 0 or (c < need - hit and not lim.chunked):
                return p, True, partial
            nb = -(-(hit + c) // bs)
            if nb > free:
                break
            waiting.popleft()
            if not started:
                rq.admit_s[j] = t
                rq.mid[j] = self.mi
            e = [j, need, hit]
            self.pf.append(e)
            self.n_admitted += 1
            self.order[j] = self.n_admitted
            chunks.append((e, c))
            self.pf_blocks += nb
            free -= nb
            budget -= c
            seqs += 1
            p += c
            partial = partial or c < need - hit
        return p, False, partial

    def _exact_blocks(self, k: int) -> int:
        """Blocks the decodes need for the iteration from boundary `k`, O(decodes)."""
        bs = self.lim.block_size
        return sum(-(-(v + k + 1) // bs) for v in self.base.values())

    def _kv_boundary(self, k: int, free: int) -> int:
        """The first boundary after `k` at which the decodes need a block more than the
        `free` ones left after the iteration from `k`."""
        bs = self.lim.block_size
        # Decode j takes a new block for the iteration from boundary K when its context
        # base + K + 1 starts a block: K = -(base + 1) mod bs (after k).
        firsts = sorted(k + 1 + (-(v + k + 1)) % bs for v in self.base.values())
        q, r = divmod(free, len(firsts))
        return firsts[r] + q * bs

    def _swap_in(self, j: int, ctx: int) -> None:
        """Request `j`'s `ctx` tokens of KV come back from the host at boundary `k`: it
        decodes again from this iteration."""
        rq, k = self.rq, self.k
        rq.swapped[j] = 0
        heappush(self.heap, (k + rq.output[j] - rq.gen[j], j))
        base = ctx - k
        self.base[j] = base
        self.b += 1
        self.s += base
        self.n_admitted += 1
        self.order[j] = self.n_admitted
        self.extra_s += ctx * self.lim.swap_s

    def _preempt(self) -> int:
        """Preempt the running request admitted last (its KV recomputed later, or swapped
        out to the host: a decode with `swap_s`); returns the blocks freed."""
        rq, k, bs = self.rq, self.k, self.lim.block_size
        j = max(self.order, key=self.order.__getitem__)
        del self.order[j]
        rq.preempted[j] += 1
        self.waiting.appendleft(j)
        for e in self.pf:
            if e[0] == j:
                self.pf.remove(e)
                freed = -(-e[2] // bs)
                self.pf_blocks -= freed
                rq.recomputed[j] += e[2] - self.lim.cached(rq.input[j])
                return freed
        x = next(x for x, (_, jj) in enumerate(self.heap) if jj == j)
        kf = self.heap[x][0]
        self.heap[x] = self.heap[-1]
        self.heap.pop()
        heapify(self.heap)
        base = self.base.pop(j)
        rq.gen[j] = rq.output[j] - (kf - k)
        self.b -= 1
        self.s -= base
        if self.lim.swap_s:
            rq.swapped[j] = base + k
            self.extra_s += (base + k) * self.lim.swap_s
        else:
            rq.recomputed[j] += base + k - self.lim.cached(rq.input[j])
        return -(-(base + k + 1) // bs)

    # -- state ---------------------------------------------------------------------------

    def in_flight(self) -> int:
        return self.b + len(self.pf)

    def queued(self) -> int:
        return len(self.waiting)
