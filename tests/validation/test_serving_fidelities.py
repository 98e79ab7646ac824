"""The fluid level against the request level on the Azure LLM inference traces 2023 (the
acceptance of the fluid fidelity; skipped without ../shared/data): the conversation and
code traces, each replayed on one replica of Llama-3.1-8B-Instruct on an H100 at 30%, 60%
and 90% of its capacity, R x slots / (E[out] x iter_s[slots]) requests per second, by
scaling the trace's time. One replica keeps the time scale closest to 1 (0.4 to 1.3 for
conv, 0.2 to 0.6 for code), so the traces keep most of their own timing.

The fluid level must give the energy (the integral of the on_power step functions)
within 3%, the SLO attainment within 0.03 and the run-wide p99 time to first token within
25% of the request level's. The SLO is MLPerf Inference's for Llama-3.1-8B in the server
scenario (mlcommons/inference loadgen/mlperf.conf: `llama3_1-8b.Server.ttft_latency =
2000`, `tpot_latency = 100`, ms): a datacenter deployment's targets for this model,
between interactive chat (500 ms, 30 ms) and batch work. The code trace's long prompts
(2,048 tokens on average for 28 output tokens) make every iteration carry much prefill,
so its time per token passes 100 ms from about 35 sequences in flight on.

The code trace arrives in bursts (70 to 95 requests per second for a few seconds, more
than a replica's 205 slots can absorb), which the fluid level follows with its fine pass
(`sim.serving.fluid._BatchPass`). Cases the fluid level does not meet would be xfail
(strict) with the measured figures; there are none. `python -m
tests.validation.test_serving_fidelities` prints the comparison table (docs/serving.md).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.fluid import Fluid
from sim.serving.importers import import_azure_llm
from sim.serving.request_level import RequestLevel
from sim.serving.service_sim import ServiceSim
from sim.serving.sources import FileSource
from tests.conftest import SHARED_DATA

SLO = SloConfig(ttft_ms=2000.0, tpot_ms=100.0)
MODEL, GPU, MAX_BATCH = "Llama-3.1-8B-Instruct", "H100", 256
TIMEOUT_S, STEP_S = 60.0, 60.0
DRAIN_S = 600.0
"""The horizon runs this long past the last arrival: every request ends."""
TRACES = ("conv", "code")
LOADS = (0.3, 0.6, 0.9)
ENERGY_REL, SLO_ABS, TTFT_P99_REL = 0.03, 0.03, 0.25

MISSES: dict[tuple[str, float, str], str] = {}
"""(trace, load, figure) -> measured: what the fluid level gets wrong (module docstring)."""


class _Energy:
    """The on_power callback: integrates each site's extra-power step function."""

    def __init__(self):
        self.joules = 0.0
        self.last: dict[int, tuple[float, float]] = {}

    def __call__(self, site: int, t_s, extra_w, idle=None) -> None:
        """One change (floats) or many (arrays); the idle replicas are not used."""
        times, watts = np.atleast_1d(t_s), np.atleast_1d(extra_w)
        if site in self.last:
            t0, w0 = self.last[site]
            self.joules += w0 * (times[0] - t0)
        self.joules += float(np.sum(watts[:-1] * np.diff(times)))
        self.last[site] = (float(times[-1]), float(watts[-1]))

    def until(self, horizon_s: float) -> float:
        return self.joules + sum(w * (horizon_s - t) for t, w in self.last.values())


def _trace_path(name: str) -> Path:
    return SHARED_DATA / "azure-llm-inference-2023" / f"AzureLLMInferenceTrace_{name}.csv.gz"


@cache
def _trace(name: str):
    table, _ = import_azure_llm(_trace_path(name))
    m = replica_model(
        MODEL,
        GPU,
        1,
        MAX_BATCH,
        float(table.input_tokens.mean()),
        float(table.output_tokens.mean()),
    )
    return table, m


def _run(cls: type[ServiceSim], source: FileSource, m: ReplicaModel, horizon_s: float) -> dict:
    energy = _Energy()
    sim = cls("svc", source, np.zeros(1), SLO, TIMEOUT_S, STEP_S, horizon_s, energy)
    sim.configure(0.0, 0, 1, m)
    sim.close(horizon_s)
    s = sim.summary()
    return {
        "energy_kwh": energy.until(horizon_s) / 3.6e6,
        "slo": s["slo_met"] / s["requests_total"],
        "ttft_p99_ms": s["ttft_p99_ms"],
        "tpot_p99_ms": s["tpot_p99_ms"],
        "dropped": s["requests_dropped"],
    }


@cache
def compare(name: str, load: float) -> dict[str, dict]:
    """Both fidelities on trace `name` at `load` of one replica's capacity."""
    table, m = _trace(name)
    out = float(table.output_tokens.mean())
    capacity_per_s = m.slots / (out * m.iter_s[m.slots])
    time_scale = (len(table) - 1) / table.span_s / (load * capacity_per_s)
    horizon_s = table.span_s * time_scale + DRAIN_S
    source = FileSource(table, horizon_s, time_scale, False)
    return {
        "request": _run(RequestLevel, source, m, horizon_s),
        "fluid": _run(Fluid, source, m, horizon_s),
        "time_scale": time_scale,
    }


def comparison_table() -> pd.DataFrame:
    """One row per trace and load: both fidelities' figures and the fluid's errors."""
    rows = []
    for name in TRACES:
        for load in LOADS:
            c = compare(name, load)
            r, f = c["request"], c["fluid"]
            rows.append(
                {
                    "trace": name,
                    "load": load,
                    "time_scale": c["time_scale"],
                    "energy_kwh_request": r["energy_kwh"],
                    "energy_kwh_fluid": f["energy_kwh"],
                    "energy_error": f["energy_kwh"] / r["energy_kwh"] - 1,
                    "slo_request": r["slo"],
                    "slo_fluid": f["slo"],
                    "ttft_p99_ms_request": r["ttft_p99_ms"],
                    "ttft_p99_ms_fluid": f["ttft_p99_ms"],
                    "ttft_p99_error": f["ttft_p99_ms"] / r["ttft_p99_ms"] - 1,
                    "tpot_p99_ms_request": r["tpot_p99_ms"],
                    "tpot_p99_ms_fluid": f["tpot_p99_ms"],
                }
            )
    return pd.DataFrame(rows)


def _cases() -> list:
    return [
        pytest.param(
            name,
            load,
            figure,
            marks=[pytest.mark.xfail(reason=MISSES[name, load, figure], strict=True)]
            if (name, load, figure) in MISSES
            else [],
            id=f"{name}-{load}-{figure}",
        )
        for name in TRACES
        for load in LOADS
        for figure in ("energy", "slo", "ttft_p99")
    ]


@pytest.mark.parametrize("name, load, figure", _cases())
def test_fluid_matches_the_request_level(shared_data, name, load, figure):
    c = compare(name, load)
    r, f = c["request"], c["fluid"]
    if figure == "energy":
        assert f["energy_kwh"] == pytest.approx(r["energy_kwh"], rel=ENERGY_REL)
    elif figure == "slo":
        assert f["slo"] == pytest.approx(r["slo"], abs=SLO_ABS)
    else:
        assert f["ttft_p99_ms"] == pytest.approx(r["ttft_p99_ms"], rel=TTFT_P99_REL)


def test_nothing_is_dropped_below_the_capacity(shared_data):
    """Both fidelities agree that a replica at 30% of its capacity drops nothing, and
    that every request of a trace is accounted for."""
    for name in TRACES:
        c = compare(name, 0.3)
        assert c["request"]["dropped"] == 0
        assert c["fluid"]["dropped"] < 1.0


if __name__ == "__main__":
    table = comparison_table()
    print("| " + " | ".join(table.columns) + " |")
    print("|" + "---|" * len(table.columns))
    for row in table.itertuples(index=False):
        print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row) + " |")
