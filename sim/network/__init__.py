"""The wide-area network between sites: topology, routes, transfer time, energy, carbon.

See docs/wan.md. Build a `Wan` from a scenario's `[wan]` section and its sites; policies
ask it `cost(src, dst, gb, t0_s)` (no side effects), the engine charges moves with `totals`
or, with contention, moves them through `wan.transfers` (`Transfers`: start, advance,
next_event_s).

- topology.py: topohub maps and GraphML/GML files -> a normalised `Topology` (the topohub
  names a scenario may give: `sim.models.topologies`).
- energy.py: the `path` device model (iGDB, `sim/data/network_energy.toml`) and `per_gb`.
- routes.py: what wan.py and transfers.py share: `Route` (its `Hop`s), `RouteEnergy` (the
  `path` model's `Device`s), `Transfer` (the record of one transfer).
- wan.py: `Wan`: site attachment, routes, energy by zone, carbon, pricing a transfer.
- transfers.py: `Transfers`: transfers in flight, max-min fair sharing of link capacity; it
  asks its `Wan` through the `Network` protocol (no import of wan.py).
"""

from sim.models.topologies import topohub_key
from sim.network.energy import DeviceModel, device_model, per_gb_kwh
from sim.network.routes import Device, Hop, Route, RouteEnergy, Transfer
from sim.network.topology import (
    Topology,
    great_circle_km,
    load_topohub,
    load_topology_file,
)
from sim.network.transfers import Transfers, max_min_rates
from sim.network.wan import FALLBACK_ZONE, Attachment, Wan

__all__ = [
    "FALLBACK_ZONE",
    "Attachment",
    "Device",
    "DeviceModel",
    "Hop",
    "Route",
    "RouteEnergy",
    "Topology",
    "Transfer",
    "Transfers",
    "Wan",
    "device_model",
    "great_circle_km",
    "load_topohub",
    "load_topology_file",
    "max_min_rates",
    "per_gb_kwh",
    "topohub_key",
]
