"""The fluid fidelity of LLM serving: a service's requests as flows, a step at a time.

Per step of `step_s` (split into pieces by a `configure` or `set_shares` inside it) and
site, the source's arrivals A and output tokens O of the piece (times the site's share)
meet R ready replicas of one `ReplicaModel`: the offered token rate x = O / duration
against the capacity x_cap = R x slots / iter_s[slots] tokens/s, the load rho = x / x_cap.
The definitions are those of `sim.serving.service_sim`.

The package, by what its modules model:

- `chain`: the batch, a birth-death chain of sequences in flight over R replicas, and its
  stationary law tabulated over the load (`PoolTable`, `pool_table`).
- `latency`: the prefill + round trip Q and the wait tables built on it (`_Latency`).
- `burst`: how bursty a source's arrivals are (a bursty source is served by the request
  level's engine: `fluid`).
- `percentiles`: a step's mixture of latency distributions and its quantiles.
- `run_latency`: the run-wide mixtures and their p99s (`_RunLatency`).
- `memory`: the pieces whose batch or backlog carries over, one after another.
- `serve`: a site's pieces through the chain, waiting and power, and the state the flows
  carry between calls (`_Flows`).
- `record`: the step counts (and the requests taken back), the step percentiles and the
  power reports.
- `service`: `Fluid`, the `ServiceSim` that advances the flows step by step, and `fluid`,
  the fidelity of a service (`Fluid`, or `RequestLevel` for a bursty source).
"""

from sim.serving.fluid.chain import LOAD_GRID as LOAD_GRID
from sim.serving.fluid.chain import PoolTable, pool_table
from sim.serving.fluid.service import Fluid, fluid

__all__ = ["Fluid", "PoolTable", "fluid", "pool_table"]
