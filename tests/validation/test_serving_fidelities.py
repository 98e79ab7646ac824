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
so its time per token passes 100 ms from about 44 sequences in flight on.

The code trace arrives in bursts (70 to 95 requests per second for a few seconds, more
than a replica's 205 slots can absorb), and both traces are burstier than Poisson within
a step: the fluid level (`sim.serving.fluid.fluid`) serves them with the request level's
engine, so the two agree exactly here; this file keeps them so. Cases the fluid level
does not meet would be xfail (strict) with the measured figures; there are none. `python -m
tests.validation.test_serving_fidelities` prints the comparison tables (docs/serving.md).

With autoscaling: both traces at their own pace, repeated for `AUTOSCALE_H` hours, served
by replicas of Llama-3.1-70B-Instruct on four H100s (max_batch 128: the `code` service of
scenarios/serving.toml) whose number follows `serve_autoscale`'s rule with its defaults
(every tick, replicas for the peak rate of the lookahead with the headroom, down only
below the margin), computed from the trace's own per-step rates so that both fidelities
serve the same schedule (the policy's SLO feedback is left out: it reads the fidelity's
own figures). Replicas taken away drain at both levels; the energy adds the idle power of
the replicas held (until `configure` says their GPUs are free) to the integral of the
on_power step functions: what `energy_serving_kwh` charges for the GPUs. The SLO is MLPerf
Inference's for its 70B model in the server scenario (mlcommons/inference
loadgen/mlperf.conf: `llama2-70b.Server.ttft_latency = 2000`, `tpot_latency = 200`, ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policies.serve_autoscale import ServeAutoscale
from sim.config.services import SloConfig
from sim.models.llm_replica import ReplicaModel, replica_model
from sim.serving.fluid import fluid
from sim.serving.importers import import_azure_llm
from sim.serving.request_level import RequestLevel
from sim.serving.service_sim import ServiceContext, ServiceSim
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

AUTOSCALE_MODEL, AUTOSCALE_GPUS, AUTOSCALE_BATCH = "Llama-3.1-70B-Instruct", 4, 128
AUTOSCALE_SLO = SloConfig(ttft_ms=2000.0, tpot_ms=200.0)
AUTOSCALE_H = 3.0
"""Hours of the autoscaled replays (the one-hour traces repeated)."""

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


def _run(
    cls: Callable[..., ServiceSim], source: FileSource, m: ReplicaModel, horizon_s: float
) -> dict:
    energy = _Energy()
    sim = cls(ServiceContext("svc", source, np.zeros(1), SLO, TIMEOUT_S, STEP_S, horizon_s, energy))
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
        "fluid": _run(fluid, source, m, horizon_s),
        "time_scale": time_scale,
    }


def autoscale_schedule(
    source: FileSource, m: ReplicaModel, horizon_s: float
) -> list[tuple[float, int]]:
    """(time s, replicas) at each of `serve_autoscale`'s ticks: replicas for the highest
    per-step rate of the lookahead (or of the last step) with the headroom over one
    replica's full-batch rate, at least `min_replicas`; fewer only when those needed are
    at most 1 - `scale_down_margin` of those running."""
    policy = ServeAutoscale()
    rates = source.step_sums(np.arange(0.0, horizon_s + STEP_S, STEP_S))[0] / STEP_S
    per_replica = m.slots / (source.tokens.mean_output * m.iter_s[m.slots])
    ahead = int(policy.lookahead_s // STEP_S)
    schedule, have = [], 0
    for t in np.arange(0.0, horizon_s, policy.tick_s):
        k = int(t // STEP_S)
        peak = max(rates[k : k + ahead].max(), rates[k - 1] if k else 0.0)
        need = max(policy.min_replicas, math.ceil(peak * (1.0 + policy.headroom) / per_replica))
        if need > have or need <= (1.0 - policy.scale_down_margin) * have:
            have = need
            schedule.append((float(t), have))
    return schedule


def _run_scaled(
    cls: Callable[..., ServiceSim],
    source: FileSource,
    m: ReplicaModel,
    horizon_s: float,
    schedule: list[tuple[float, int]],
) -> dict:
    """`_run` with the replicas of `schedule`; the energy adds their idle power while
    held (a drained replica's until `configure` frees it)."""
    energy = _Energy()
    ctx = ServiceContext(
        "svc", source, np.zeros(1), AUTOSCALE_SLO, TIMEOUT_S, STEP_S, horizon_s, energy
    )
    sim = cls(ctx)
    held_s, last_t, last_r = 0.0, 0.0, 0
    for t, r in schedule:
        free_s = sim.configure(t, 0, r, m)
        held_s += last_r * (t - last_t) + max(last_r - r, 0) * (free_s - t)
        last_t, last_r = t, r
    sim.close(horizon_s)
    held_s += last_r * (horizon_s - last_t)
    s = sim.summary()
    return {
        "energy_kwh": (energy.until(horizon_s) + held_s * m.power_w[0]) / 3.6e6,
        "slo": s["slo_met"] / s["requests_total"],
        "ttft_p99_ms": s["ttft_p99_ms"],
        "tpot_p99_ms": s["tpot_p99_ms"],
        "dropped": s["requests_dropped"],
    }


@cache
def compare_autoscaled(name: str) -> dict:
    """Both fidelities on trace `name` at its own pace with autoscaled replicas."""
    table, _ = _trace(name)
    m = replica_model(
        AUTOSCALE_MODEL,
        GPU,
        AUTOSCALE_GPUS,
        AUTOSCALE_BATCH,
        float(table.input_tokens.mean()),
        float(table.output_tokens.mean()),
    )
    horizon_s = AUTOSCALE_H * 3600.0
    source = FileSource(table, horizon_s, 1.0, True)
    schedule = autoscale_schedule(source, m, horizon_s)
    return {
        "request": _run_scaled(RequestLevel, source, m, horizon_s, schedule),
        "fluid": _run_scaled(fluid, source, m, horizon_s, schedule),
        "replicas": [r for _, r in schedule],
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


def autoscale_table() -> pd.DataFrame:
    """One row per trace with autoscaling: both fidelities' figures and the fluid's
    errors."""
    rows = []
    for name in TRACES:
        c = compare_autoscaled(name)
        r, f = c["request"], c["fluid"]
        rows.append(
            {
                "trace": name,
                "replicas": "-".join(map(str, c["replicas"])),
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


def _check(r: dict, f: dict, figure: str) -> None:
    """The fluid's `figure` within its tolerance of the request level's."""
    if figure == "energy":
        assert f["energy_kwh"] == pytest.approx(r["energy_kwh"], rel=ENERGY_REL)
    elif figure == "slo":
        assert f["slo"] == pytest.approx(r["slo"], abs=SLO_ABS)
    else:
        assert f["ttft_p99_ms"] == pytest.approx(r["ttft_p99_ms"], rel=TTFT_P99_REL)


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
    _check(c["request"], c["fluid"], figure)


@pytest.mark.parametrize("figure", ("energy", "slo", "ttft_p99"))
@pytest.mark.parametrize("name", TRACES)
def test_fluid_matches_the_request_level_with_autoscaling(shared_data, name, figure):
    c = compare_autoscaled(name)
    assert len(set(c["replicas"])) > 1  # the replicas do change
    _check(c["request"], c["fluid"], figure)


def test_nothing_is_dropped_below_the_capacity(shared_data):
    """Both fidelities agree that a replica at 30% of its capacity drops nothing, and
    that every request of a trace is accounted for."""
    for name in TRACES:
        c = compare(name, 0.3)
        assert c["request"]["dropped"] == 0
        assert c["fluid"]["dropped"] < 1.0


if __name__ == "__main__":
    for table in (comparison_table(), autoscale_table()):
        print("| " + " | ".join(table.columns) + " |")
        print("|" + "---|" * len(table.columns))
        for row in table.itertuples(index=False):
            cells = (f"{v:.4g}" if isinstance(v, float) else str(v) for v in row)
            print("| " + " | ".join(cells) + " |")
        print()
