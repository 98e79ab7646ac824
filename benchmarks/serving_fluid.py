"""Speed of the fluid fidelity of LLM serving (`sim.serving.fluid.Fluid`): a year of one-minute
steps (525,600) for 20 services (Llama-3.1-8B on 1 to 4 H100 replicas, the azure-conv and
azure-code token presets in turn), each advanced in 12 calls as a policy would, power
reports to a no-op. The load follows the synthetic source's daily and weekly cycles
(amplitudes 0.5 and 0.2) around `--load` of the replicas' capacity: at the default 0.5 the
daily peaks reach about 90%, where the batch moves slowly and some steps run one after
another; at 0.6 the peaks overload the replicas every day (a backlog at each peak).

    python benchmarks/serving_fluid.py [--services N] [--days D] [--load L]

Prints steps per second (all services' steps over the wall time); no assertion.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sim.config.services import SloConfig
from sim.models.llm_replica import replica_model
from sim.serving.fluid import Fluid
from sim.serving.sources import SyntheticSource


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--days", type=float, default=365.0)
    parser.add_argument("--calls", type=int, default=12, help="advance_to calls per service")
    parser.add_argument("--load", type=float, default=0.5, help="mean load / capacity")
    args = parser.parse_args()
    horizon_s, step_s = args.days * 86400.0, 60.0
    slo = SloConfig(ttft_ms=2000.0, tpot_ms=100.0)
    services = []
    for k in range(args.services):
        seed = np.random.SeedSequence(k)
        preset = ("azure-conv", "azure-code")[k % 2]
        probe = SyntheticSource(1.0, horizon_s, seed, 0.5, 0.2, preset)
        model = replica_model(
            "Llama-3.1-8B-Instruct",
            "H100",
            1,
            256,
            probe.tokens.mean_input,
            probe.tokens.mean_output,
        )
        replicas = 1 + k % 4
        capacity_per_s = replicas * model.slots / (probe.tokens.mean_output * model.iter_s[-1])
        source = SyntheticSource(args.load * capacity_per_s, horizon_s, seed, 0.5, 0.2, preset)
        sim = Fluid(f"s{k}", source, np.zeros(2), slo, 60.0, step_s, horizon_s, lambda *a: None)
        sim.configure(0.0, 0, replicas, model)
        services.append(sim)
    t0 = time.perf_counter()
    for sim in services:
        for t in np.linspace(0.0, horizon_s, args.calls + 1)[1:]:
            sim.advance_to(float(t))
        sim.close(horizon_s)
    wall_s = time.perf_counter() - t0
    steps = args.services * int(np.ceil(horizon_s / step_s))
    print(
        f"{args.services} services x {steps // args.services:,} steps: {wall_s:.2f} s, "
        f"{steps / wall_s:,.0f} steps/s"
    )


if __name__ == "__main__":
    main()
