"""The iteration level: every request of a service through an engine's iteration schedule
as vLLM V1 and Sarathi-Serve run it (the `ServiceSim` contract: `sim.serving.service_sim`;
docs/serving.md "Iteration level").

Each iteration batches the running decodes (a token each) with prefill chunks of waiting
prompts under a token budget, each replica's paged KV cache is counted in blocks, and a
replica runs in closed form between the events that change its batch, so the cost is per
event, not per iteration or token.

The package, by what its modules hold:

- `records`: the requests and their records (the request level's plus first token,
  tokens generated, preemptions, refusals).
- `replicas`: one replica's scheduler, KV blocks and clock (`_Replica`).
- `fleet`: the replicas at the sites, their calendar, scaling, drains and models (`_Fleet`).
- `service`: `IterationLevel`, the `ServiceSim` whose event loop serves the requests.
- `disaggregated`: `DisaggregatedLevel`, prefill and decode on separate replicas.

Routing, statistics and the rest of the contract are the request level's
(`sim.serving.request_level.per_request.PerRequestSim`).
"""

from sim.serving.iteration_level.service import IterationLevel

__all__ = ["IterationLevel"]
