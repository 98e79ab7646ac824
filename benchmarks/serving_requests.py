"""Speed of the request level (`sim.serving.request_level.RequestLevel`): simulated requests
per second of wall time on the Azure LLM conversation trace (target: at least 50,000).

    python benchmarks/serving_requests.py

Llama-3.1-8B-Instruct on 1 x H100-SXM, max_batch 256, as many replicas as put the offered
output tokens at ~60% of the replicas' full-batch token rate. The trace (an hour) is
tiled over the run at three time scales: stretched to a day (~19,700 requests), as it is
(~480,000 a day) and ten times faster over six hours (~1.2 million, 7 replicas). Each run
is timed twice: advanced in 60 s steps with a policy's `live()` read at every step (the
engine's busiest use), and advanced in one go; both include `close` and the power
callback (an energy integral, as a ledger would keep), not the tables, which are timed
apart. Timings are measured here, not asserted in tests: the machines are shared.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.importers import import_azure_llm
from sim.serving.request_level import RequestLevel
from sim.serving.service_sim import ServiceContext, ServiceSim
from sim.serving.sources import FileSource

TRACE = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv.gz"
)
STEP_S = 60.0
LOAD = 0.6
"""Offered output tokens / the replicas' full-batch token rate."""
TARGET_PER_S = 50_000.0
CASES = ((24.0, 86_400.0), (1.0, 86_400.0), (0.1, 6 * 3600.0))
"""(time scale of the trace, simulated horizon s)."""


class Energy:
    """The power callback: the integral of each site's extra power, J."""

    def __init__(self) -> None:
        self.j = 0.0
        self._t_s = 0.0
        self._w = 0.0

    def __call__(self, site: int, t_s: float, extra_w: float, idle: int | None = None) -> None:
        """One change of the extra power (the idle replicas the request level also reports
        are not used here)."""
        self.j += self._w * (t_s - self._t_s)
        self._t_s, self._w = t_s, extra_w


def run(source: FileSource, model, replicas: int, horizon_s: float, stepped: bool):
    """One simulation; returns (the simulation, wall time s)."""
    slo = SloConfig(ttft_ms=2_000.0, tpot_ms=100.0)
    sim = RequestLevel(
        ServiceContext("chat", source, np.zeros(1), slo, 60.0, STEP_S, horizon_s, Energy())
    )
    start = time.perf_counter()
    sim.configure(0.0, 0, replicas, model)
    if stepped:
        for k in range(1, math.ceil(horizon_s / STEP_S)):
            sim.advance_to(k * STEP_S)
            sim.live()
    sim.close(horizon_s)
    return sim, time.perf_counter() - start


def trace_cases() -> Iterator[tuple[FileSource, ReplicaModel, int, float]]:
    """The benchmark's cases on the conversation trace, each announced on stdout: (source,
    replica model, replicas, horizon s). Shared with `benchmarks/serving_iterations.py`."""
    table, _ = import_azure_llm(TRACE)
    model = replica_model(
        "Llama-3.1-8B-Instruct",
        "H100-SXM",
        1,
        256,
        float(np.mean(table.input_tokens)),
        float(np.mean(table.output_tokens)),
    )
    full_batch_tokens_per_s = float(model.tokens_per_s(model.slots))
    span_s = float(table.arrival_s[-1] - table.arrival_s[0])
    print(f"{model.model} on {model.gpu}: {model.slots} slots, {full_batch_tokens_per_s:.0f} tok/s")
    for time_scale, horizon_s in CASES:
        offered = float(np.sum(table.output_tokens)) / (span_s * time_scale)
        replicas = math.ceil(offered / (LOAD * full_batch_tokens_per_s))
        print(
            f"time_scale {time_scale:g} over {horizon_s / 3600:g} h, {replicas} replica(s) at "
            f"{offered / (replicas * full_batch_tokens_per_s):.0%} of full-batch tokens:"
        )
        yield FileSource(table, horizon_s, time_scale, True), model, replicas, horizon_s


def print_tables_time(sim: ServiceSim) -> None:
    """Time to build the step and request tables of `sim`, on stdout."""
    start = time.perf_counter()
    sim.step_table()
    sim.request_table()
    print(f"  {'tables':>24}: {time.perf_counter() - start:6.2f} s")


def main() -> None:
    for source, model, replicas, horizon_s in trace_cases():
        for stepped in (True, False):
            sim, wall_s = run(source, model, replicas, horizon_s, stepped)
            n = sim.summary()["requests_total"]
            how = f"steps of {STEP_S:g} s + live()" if stepped else "one advance"
            verdict = "met" if n / wall_s >= TARGET_PER_S else "missed"
            print(
                f"  {how:>24}: {n:>9,.0f} requests in {wall_s:6.2f} s = "
                f"{n / wall_s:>9,.0f} requests/s (target {TARGET_PER_S:,.0f}: {verdict})"
            )
        print_tables_time(sim)


if __name__ == "__main__":
    main()
