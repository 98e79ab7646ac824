"""Speed of the iteration level (`sim.serving.iteration_level.IterationLevel`): simulated
requests per second on the Azure LLM conversation trace, with the vLLM V1 scheduler
(token budget, chunked prefill) and the paged KV cache on (target: at least 150,000).

    python benchmarks/serving_iterations.py

The cases of `benchmarks/serving_requests.py` (Llama-3.1-8B-Instruct on 1 x H100-SXM,
max_num_seqs 256, vLLM's default budget of 8,192 tokens on an H100, the trace tiled at three
time scales, as many replicas as put it at ~60% of the full-batch token rate), each timed
the same two ways. Both wall and CPU time (of this process) are printed: the machines are
shared, and the CPU time is what the simulation itself costs. Measured here, never
asserted in tests. The first line says whether the replica ran compiled (mypyc, as
`pip install` builds it) or as pure Python (`DCSIM_PURE=1`, or a build without a compiler).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_requests import STEP_S, print_tables_time, trace_cases  # noqa: E402

from sim.config.services import SchedulerConfig, SloConfig  # noqa: E402
from sim.serving.iteration_level import IterationLevel  # noqa: E402
from sim.serving.service_sim import ServiceContext  # noqa: E402
from sim.serving.sources import FileSource  # noqa: E402
from sim.util.native import compiled  # noqa: E402

TARGET_PER_S = 150_000.0


class Energy:
    """The power callback: the integral of each site's extra power, J (changes come in
    arrays, `ServiceSim`'s contract)."""

    def __init__(self) -> None:
        self.j = 0.0
        self._t_s = 0.0
        self._w = 0.0

    def __call__(self, site: int, t_s, extra_w, idle=None) -> None:
        t, w = np.atleast_1d(t_s), np.atleast_1d(extra_w)
        edges = np.append(self._t_s, t)
        levels = np.append(self._w, w[:-1])
        self.j += float(np.sum(levels * np.diff(edges)))
        self._t_s, self._w = float(t[-1]), float(w[-1])


def run(source: FileSource, model, replicas: int, horizon_s: float, stepped: bool):
    """One simulation; returns (the simulation, wall time s, CPU time s)."""
    slo = SloConfig(ttft_ms=2_000.0, tpot_ms=100.0)
    sched = SchedulerConfig().resolved(model.gpu, None, 256)
    ctx = ServiceContext("chat", source, np.zeros(1), slo, 60.0, STEP_S, horizon_s, Energy())
    sim = IterationLevel(ctx, [sched])
    wall, cpu = time.perf_counter(), time.process_time()
    sim.configure(0.0, 0, replicas, model)
    if stepped:
        for k in range(1, math.ceil(horizon_s / STEP_S)):
            sim.advance_to(k * STEP_S)
            sim.live()
    sim.close(horizon_s)
    return sim, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    native = compiled()
    print(f"compiled (mypyc): {', '.join(native)}" if native else "pure Python (none compiled)")
    for source, model, replicas, horizon_s in trace_cases():
        for stepped in (True, False):
            sim, wall_s, cpu_s = run(source, model, replicas, horizon_s, stepped)
            s = sim.summary()
            n = s["requests_total"]
            how = f"steps of {STEP_S:g} s + live()" if stepped else "one advance"
            verdict = "met" if n / cpu_s >= TARGET_PER_S else "missed"
            print(
                f"  {how:>24}: {n:>9,.0f} requests, {n / wall_s:>9,.0f}/s wall, "
                f"{n / cpu_s:>9,.0f}/s CPU (target {TARGET_PER_S:,.0f}: {verdict}); "
                f"TTFT p99 {s['ttft_p99_ms']:.0f} ms, preempted {s['requests_preempted']:.0f}"
            )
        print_tables_time(sim)


if __name__ == "__main__":
    main()
