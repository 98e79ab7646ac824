"""The request level: every request of a service simulated, from its arrival to its last
token (the `ServiceSim` contract and its definitions: `sim.serving.service_sim`).

Each replica under continuous batching is a processor-sharing server (a virtual clock of
iterations and a heap of virtual finish times per replica), requests are routed by
smooth weighted round-robin over the shares, and every request keeps its own records.

The package, by what its modules hold:

- `records`: the requests read from the source a chunk at a time and their per-request
  records (`_Requests`), the state codes and `STATES`.
- `replicas`: the replicas at the sites, their batches and queues, the calendar of their
  completions, scaling and cap changes, the sites' power (`_Fleet`).
- `routing`: the round-robin's weights and credits over the sites (`_Router`).
- `stats`: the step table, totals, per-site counts, live statistics and request table
  from the records (`_Statistics`).
- `per_request`: `PerRequestSim`, the contract's methods of a fidelity with a record per
  request (routing, scaling, shares, live statistics, tables), shared with the iteration
  level.
- `service`: `RequestLevel`, the `PerRequestSim` whose event loop serves the requests.
"""

from sim.serving.request_level.records import STATES
from sim.serving.request_level.service import RequestLevel

__all__ = ["STATES", "RequestLevel"]
