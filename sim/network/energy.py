"""Energy of moving data over the WAN: the per-device `path` model and the `per_gb` model.

`path` (iGDB): every router site of a route holds a router, two WDM switches, a transponder
and a muxponder; the fibre between two router sites (and each site's attachment leg) holds
an amplifier every 80 km and a regenerator every 1,500 km, strictly inside the span (a span
of L km holds ceil(L / 80) - 1 amplifiers). Each device draws its intensity in W/Gbps
(= J/Gbit) for the traffic it carries; the numbers and rules are in
`sim/data/network_energy.toml` (written by `scripts/derive_network_energy.py`).

`per_gb` (Aslan et al. 2018): 0.06 kWh/GB in 2015, halving every two years.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType

ASLAN_2015_KWH_PER_GB = 0.06
"""Electricity intensity of internet data transmission in 2015, kWh/GB (Aslan, Mayers,
Koomey, France: J. Industrial Ecology 22(4), 2018, 785-798)."""
ASLAN_HALVING_YEARS = 2.0
"""The same paper's trend: the intensity has halved about every two years since 2000."""

DEFAULT_NETWORK_PUE = 1.5
"""Cooling and power-conversion overhead of network sites (Baliga et al., Proc. IEEE 99(1),
2011, "Green cloud computing", who use 1.5 for the transport network)."""
DEFAULT_REDUNDANCY = 2.0
"""Protection equipment powered alongside the working path, 1+1 (Baliga et al. 2011; Van
Heddeghem et al., Photonic Netw. Commun. 24, 2012, protection factor 2)."""

GBIT_PER_GB = 8.0
"""1 GB = 10^9 bytes = 8 Gbit."""
J_PER_KWH = 3.6e6


def per_gb_kwh(year: int | float) -> float:
    """Aslan et al. 2018's electricity intensity of data transmission in `year`, kWh/GB:
    0.06 x 2^(-(year - 2015) / 2)."""
    return ASLAN_2015_KWH_PER_GB * 0.5 ** ((year - 2015) / ASLAN_HALVING_YEARS)


@dataclass(frozen=True)
class DeviceModel:
    """The `path` model's device intensities and placement rules."""

    w_per_gbps: Mapping[str, float]
    """Intensity per device kind, W/Gbps (= J/Gbit)."""
    per_router_site: Mapping[str, int]
    """Devices at every router site, by kind."""
    spacing_km: Mapping[str, float]
    """In-line devices along the fibre: one every this many km, by kind."""
    source: str

    @property
    def router_site_w_per_gbps(self) -> float:
        """W/Gbps of one router site (all its devices)."""
        return sum(n * self.w_per_gbps[k] for k, n in self.per_router_site.items())

    def inline_count(self, kind: str, span_km: float) -> int:
        """In-line devices of `kind` strictly inside a span of `span_km`: positions at
        spacing, 2 x spacing, ... below the span's length."""
        if span_km <= 0:
            return 0
        return max(0, math.ceil(span_km / self.spacing_km[kind] - 1e-9) - 1)


@lru_cache(maxsize=1)
def device_model() -> DeviceModel:
    """The shipped device model, `sim/data/network_energy.toml`."""
    text = resources.files("sim").joinpath("data/network_energy.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    return DeviceModel(
        MappingProxyType(dict(raw["w_per_gbps"])),
        MappingProxyType(dict(raw["per_router_site"])),
        MappingProxyType(dict(raw["spacing_km"])),
        raw["source"],
    )
