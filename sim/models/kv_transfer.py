"""Moving a request's KV cache from a prefill replica to a decode replica (prefill/decode
disaggregation, docs/serving.md "Disaggregation"): its time and its energy over a link of
the interconnect catalog (`sim/data/interconnects.toml`).

Each GPU of the prefill replica sends its shard of the cache over its own link (Splitwise
transfers per GPU over InfiniBand; a DGX node has a NIC per GPU), so a transfer of `b`
bytes between replicas of `g_p` and `g_d` GPUs takes

    latency + b / (min(g_p, g_d) x the link's achieved bandwidth)

(the catalog's `achieved_frac` of its nominal bandwidth, as a large NCCL transfer reaches)
and costs `b` x the link's energy per byte (`JOULES_PER_BIT`), counted as power drawn over
the transfer's duration at the site.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.models.scaling import interconnect

__all__ = ["JOULES_PER_BIT", "KvLink", "kv_link"]

JOULES_PER_BIT = {
    "intra": 2 * 5.5e-12,
    "network": 4 * 9.0 / 400e9,
}
"""Energy of one bit crossing a link, J, by the catalog's kind (lower bounds: the serial
links and optics only, no switch or NIC logic):

- "intra" (NVLink or PCIe inside a node): two SerDes hops (GPU to NVSwitch to GPU) at
  5.5 pJ/bit each, a 112G PAM4 SerDes as an analysis of NVLink-C2C compares it with
  NVLink-C2C's 1.3 pJ/bit (NVIDIA, ISSCC 2023 paper 9.3; besthub.dev, "Why Nvidia's
  NVLink C2C is redefining GPU-CPU interconnects"): 11 pJ/bit.
- "network" (InfiniBand or Ethernet between nodes): the four optical transceivers of a
  NIC-switch-NIC path at 9 W each for 400 Gb/s (NVIDIA MMS4X00-NS400 400Gb/s OSFP DR4
  product specification: 9 W typical and maximum at 400 Gb/s): 90 pJ/bit."""


@dataclass(frozen=True, slots=True)
class KvLink:
    """The link a service's KV caches cross, resolved for its replicas."""

    id: str
    """The interconnect's catalog id."""
    bytes_per_s: float
    """Bandwidth of one transfer (all the replica's GPU links together), bytes/s."""
    latency_s: float
    joules_per_byte: float

    def seconds(self, nbytes: float) -> float:
        """Time to move `nbytes` bytes, s."""
        return self.latency_s + nbytes / self.bytes_per_s

    def joules(self, nbytes: float) -> float:
        """Energy of moving `nbytes` bytes, J."""
        return nbytes * self.joules_per_byte


def kv_link(link: str, gpus: int) -> KvLink:
    """The catalog's `link` used by `gpus` GPU links at once (module docstring); ValueError
    naming the link if the catalog has none of that id."""
    ic = interconnect(link)
    return KvLink(link, gpus * ic.achieved_bytes_per_s, ic.latency_s, 8.0 * JOULES_PER_BIT[ic.kind])
