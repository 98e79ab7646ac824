"""The prefill/decode disaggregation study: co-located against disaggregated serving of
Llama-3.1-70B on the Azure LLM inference traces (code and conversation, 2023), at equal
GPUs and at equal provisioned GPU power, at the iteration level.

    python scripts/study_disaggregation.py --out out/disagg

For each trace and design it finds the highest request rate (a multiple of the trace's
own) at which 99% of the requests meet the SLO (TTFT <= 2 s and TPOT <= 100 ms), by
doubling then bisecting, and runs every design at one common rate to compare latency
tails, energy, carbon and the KV transfers. Each run is 20 minutes of the trace (tiled,
its arrivals compressed by the rate's factor) at one site on its real grid. The runs'
summaries are kept in `out/runs/` (a rerun reuses them); the table is `out/table.csv`
and the figure `docs/figures/disaggregation_study.png`. The doc page with the measured
numbers is docs/study-disaggregation.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import sim
from sim.study.plots import OKABE_ITO, STYLE

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "azure-llm-inference-2023"
TRACES = {
    "code": "AzureLLMInferenceTrace_code.csv.gz",
    "conv": "AzureLLMInferenceTrace_conv.csv.gz",
}
MODEL = "Llama-3.1-70B-Instruct"
GPUS_PER_MACHINE = 8
TDP_W = {"H100-SXM": 700.0, "A100-80GB": 400.0}
"""Maximum power limits of the GPUs (NVIDIA datasheets), W: provisioned power at no cap."""
SLO = {"ttft_ms": 2000, "tpot_ms": 100, "percentile": 99}
"""The study's own SLO (not Splitwise's, which it sets per model from unloaded latencies)."""
ATTAINMENT = 0.99
DURATION_H = 1.0 / 3.0


@dataclass(frozen=True)
class Pool:
    gpu: str
    machines: int
    cap_w: float | None = None

    @property
    def power_kw(self) -> float:
        """Provisioned GPU power: the cap, else the GPU's maximum, kW."""
        return self.machines * GPUS_PER_MACHINE * (self.cap_w or TDP_W[self.gpu]) / 1e3


@dataclass(frozen=True)
class Design:
    """Co-located (`decode` None: `prefill` does both) or disaggregated machines."""

    name: str
    budget: str
    """"equal GPUs" or "equal power" (against Baseline-H100's 4 machines)."""
    prefill: Pool
    decode: Pool | None = None

    @property
    def gpus(self) -> int:
        pools = [self.prefill] + ([self.decode] if self.decode else [])
        return sum(p.machines for p in pools) * GPUS_PER_MACHINE

    @property
    def power_kw(self) -> float:
        return self.prefill.power_kw + (self.decode.power_kw if self.decode else 0.0)


H100, A100 = "H100-SXM", "A100-80GB"
DESIGNS = (
    Design("Baseline-H100", "equal GPUs", Pool(H100, 4)),
    Design("Baseline-A100", "equal GPUs", Pool(A100, 4)),
    Design("HH 2:2", "equal GPUs", Pool(H100, 2), Pool(H100, 2)),
    Design("HH 3:1", "equal GPUs", Pool(H100, 3), Pool(H100, 1)),
    Design("HH 1:3", "equal GPUs", Pool(H100, 1), Pool(H100, 3)),
    Design("HA 2:2", "equal GPUs", Pool(H100, 2), Pool(A100, 2)),
    Design("HHcap 2:4", "equal power", Pool(H100, 2), Pool(H100, 4, 350.0)),
    Design("HHcap 3:2", "equal power", Pool(H100, 3), Pool(H100, 2, 350.0)),
    Design("HA 2:3", "equal power", Pool(H100, 2), Pool(A100, 3)),
)
"""Splitwise's names (Patel et al., ISCA 2024): Baseline-X co-locates on X; HH, HA put the
prompts on H100s and the tokens on H100s or A100s; HHcap caps the token machines' H100s
(here at 350 W, half their 700 W: our choice). "P:D" counts 8-GPU machines per pool.
Equal power: at most Baseline-H100's 22.4 kW of GPU power limits."""


def scenario_toml(trace: str, design: Design, rate: float) -> str:
    """The scenario of `design` serving `trace` at `rate` times its own arrival rate."""

    def pool(p: Pool) -> str:
        cap = f", cap_w = {p.cap_w}" if p.cap_w else ""
        return f'{{ gpu = "{p.gpu}", replicas = {{ site = {p.machines} }}{cap} }}'

    gpus = {H100: 0, A100: 0}
    for p in (design.prefill, design.decode):
        if p is not None:
            gpus[p.gpu] += p.machines * GPUS_PER_MACHINE
    pools = ", ".join(f'{{ model = "{g}", count = {n} }}' for g, n in gpus.items() if n)
    if design.decode is None:
        placement = (
            f'gpu = "{design.prefill.gpu}"\nreplicas = {{ site = {design.prefill.machines} }}'
        )
    else:
        placement = (
            f'gpu = "{design.prefill.gpu}"\n\n[services.disaggregation]\nlink = "IB-NDR"\n'
            f"prefill = {pool(design.prefill)}\ndecode = {pool(design.decode)}"
        )
    return f"""
name = "disagg_{trace}"
seed = 1
start = 2020-07-15T16:00:00Z
duration_h = {DURATION_H}

[[sites]]
name = "site"
lat = 37.34
lon = -121.89
pue = 1.2
carbon = {{ zone = "US-CAL", year = 2020 }}
gpus = [{pools}]

[serving]
fidelity = "iteration"
step_s = 60

[[services]]
name = "{trace}"
model = "{MODEL}"
gpus_per_replica = {GPUS_PER_MACHINE}
sites = ["site"]
slo = {{ ttft_ms = {SLO["ttft_ms"]}, tpot_ms = {SLO["tpot_ms"]}, percentile = {SLO["percentile"]} }}
{placement}

[services.requests]
file = "{DATA / TRACES[trace]}"
format = "azure-llm"
time_scale = {1.0 / rate!r}
repeat = true
"""


def run(out: Path, trace: str, design: Design, rate: float) -> dict:
    """The summary of one run (cached in `out/runs/`)."""
    key = f"{trace}_{design.name.replace(' ', '_').replace(':', '-')}_{rate:.4f}.json"
    path = out / "runs" / key
    if path.exists():
        return json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        scenario_path = Path(tmp) / "scenario.toml"
        scenario_path.write_text(scenario_toml(trace, design, rate))
        summary = dict(sim.simulate(sim.load_scenario(scenario_path)).summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary))
    return summary


def meets_slo(summary: dict) -> bool:
    return (summary["slo_attainment"] or 0.0) >= ATTAINMENT


def max_rate(out: Path, trace: str, design: Design, steps: int = 4) -> float:
    """The highest rate multiple (of 1/4, 1/2, 1, 2, ... then bisected `steps` times) whose
    run meets the SLO; 0 if a quarter of the trace's rate does not."""
    lo, hi = 0.0, 0.25
    while meets_slo(run(out, trace, design, hi)):
        lo, hi = hi, 2.0 * hi
    for _ in range(steps if lo else 0):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if meets_slo(run(out, trace, design, mid)) else (lo, mid)
    return lo


def study(out: Path) -> pd.DataFrame:
    """One row per trace and design: its rate at SLO, and its run at the common rate,
    Baseline-H100's rate at SLO."""
    rows = []
    for trace in TRACES:
        at_slo = {d.name: max_rate(out, trace, d) for d in DESIGNS}
        common = at_slo["Baseline-H100"]
        for d in DESIGNS:
            s = run(out, trace, d, common)
            tokens = s["tokens_generated"] or np.nan
            rows.append(
                {
                    "trace": trace,
                    "design": d.name,
                    "budget": d.budget,
                    "gpus": d.gpus,
                    "gpu_power_kw": d.power_kw,
                    "rate_at_slo": at_slo[d.name],
                    "rate_vs_baseline_h100": at_slo[d.name] / common if common else np.nan,
                    "common_rate": common,
                    "slo_attainment": s["slo_attainment"],
                    "ttft_p99_ms": s["ttft_p99_requests_ms"],
                    "tpot_p99_ms": s["tpot_p99_requests_ms"],
                    "energy_kwh": s["energy_serving_kwh"],
                    "wh_per_1k_tokens": 1e6 * s["energy_serving_kwh"] / tokens,
                    "carbon_kg": s["carbon_serving_kg"],
                    "kv_transfer_gb": s["kv_transfer_gb"],
                    "kv_transfer_energy_kwh": s["kv_transfer_energy_kwh"],
                }
            )
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, path: Path) -> None:
    """Per trace: each design's rate at SLO relative to Baseline-H100 (bars, by budget),
    and its energy per 1,000 generated tokens at the common rate (dots)."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.0), sharex=True)
        for col, trace in enumerate(TRACES):
            t = table[table["trace"] == trace]
            x = np.arange(len(t))
            colors = [OKABE_ITO[0] if b == "equal GPUs" else OKABE_ITO[1] for b in t["budget"]]
            ax = axes[0, col]
            ax.bar(x, t["rate_vs_baseline_h100"], color=colors)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_title(f"{trace}: rate at SLO / Baseline-H100's")
            ax = axes[1, col]
            bars = ax.bar(x, t["wh_per_1k_tokens"], color=colors)
            for bar, ok in zip(bars, t["slo_attainment"] >= ATTAINMENT, strict=True):
                bar.set_hatch("" if ok else "//")
            ax.set_title(f"{trace}: Wh per 1k tokens at Baseline-H100's rate")
            ax.set_xticks(x, t["design"], rotation=60, ha="right")
        handles = [plt.Rectangle((0, 0), 1, 1, color=OKABE_ITO[k]) for k in (0, 1)]
        handles.append(plt.Rectangle((0, 0), 1, 1, fill=False, hatch="//"))
        labels = ["equal GPUs (32)", "equal power (<= 22.4 kW)", "misses the SLO at that rate"]
        fig.legend(handles, labels, loc="lower center", ncol=3)
        fig.tight_layout(rect=(0.0, 0.05, 1.0, 1.0))
        fig.savefig(path)
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/disagg"))
    parser.add_argument(
        "--figure", type=Path, default=REPO / "docs" / "figures" / "disaggregation_study.png"
    )
    args = parser.parse_args()
    table = study(args.out)
    table.to_csv(args.out / "table.csv", index=False)
    figure(table, args.figure)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
