"""Servers, not GPU counters: the server catalog, a host's power by CPU utilisation, and
embodied carbon by component (docs/servers.md).

`sim/data/servers.toml` ships the catalog, each number with its source. Engine-free: a
`ServerModel` in, watts or kgCO2e out.

Host power (the server without its GPUs), W, at CPU utilisation `u` in [0, 1]:

    host_power_w(u) = sockets x cpu_tdp_w x r(u) + dimms x dimm_w(u) + rest_w

- `r(u)`: a CPU package's draw as a fraction of its TDP, Boavizta's CPU consumption
  profile (boaviztapi 2.5.0, `CPUConsumptionProfileModel._TDP_RATIOS`): 0.12, 0.32, 0.75,
  1.02 at 0, 10, 50, 100 % load, piecewise linear between them (`CPU_LOAD_POINTS`).
- `dimm_w(u)`: one DIMM, Boavizta's RAM model (`RAMConsumptionProfileModel`): 3.0 W + 0.055
  W/GB at full load, 0.7 of that idle (GreenDIMM, MICRO 2021), linear in `u` between them.
- `rest_w` (fans, NICs, NVSwitches, drives, board, conversion losses): the vendor's maximum
  system power less the GPUs' TDPs, the CPUs' and the DIMMs' full-load draw, held at that
  value at every load (an upper bound); 0 where no maximum is sourced (a lower bound).

Embodied carbon (kgCO2e) by component, Boavizta's manufacture impact factors (boaviztapi
2.5.0, `data/factors.yml`, GWP), transcribed (boaviztapi pins pandas < 3, so it cannot be
a dependency of this project): CPU die 1.97 kg/cm2 + 9.14 kg per package; DRAM 2.20 kg per
cm2 of dies at 1.2444 GB/cm2 (the mean of its `ram_manufacture.csv`) + 5.22 kg per module;
SSD 2.20 kg/cm2 at 54.88 GB/cm2 (the mean of `ssd_manufacture.csv`) + 6.34 kg per drive;
HDD 31.11 kg; mainboard 66.10 kg; rack case 150 kg; PSU 24.30 kg per kg at 2.99 kg a unit;
assembly 6.68 kg. GPUs: the catalog's per-GPU figure (`GpuSpec.embodied_kg`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from sim.models.hardware import GPU_CATALOG

__all__ = [
    "COMPONENTS",
    "CPU_LOAD_POINTS",
    "EMBODIED_GROUPS",
    "HOST_LIFETIME_YEARS",
    "HOST_LOAD_STEPS",
    "SERVER_CATALOG",
    "SERVER_SOURCES",
    "ServerModel",
    "embodied_kg",
    "embodied_kg_by_component",
    "host_curve_w",
    "host_power_w",
    "lifetimes_years",
    "server_model_from_dict",
]

CPU_LOAD_POINTS = ((0.0, 0.12), (0.1, 0.32), (0.5, 0.75), (1.0, 1.02))
"""(CPU utilisation, package draw / TDP): Boavizta's CPU consumption profile."""
HOST_LOAD_STEPS = tuple(i / 10 for i in range(11))
"""SPECpower_ssj2008's load levels: active idle and 10 % to 100 % in steps of 10 %."""

DIMM_BASE_W = 3.0
"""One DIMM at full load, the part independent of its capacity, W (Boavizta RAM model)."""
DIMM_W_PER_GB = 0.055
"""One DIMM at full load, per GB of its capacity, W/GB (Boavizta RAM model)."""
DIMM_IDLE_FRAC = 0.7
"""A DIMM's idle draw as a fraction of its full-load draw (Boavizta, after GreenDIMM)."""

# Boavizta manufacture factors, GWP (boaviztapi 2.5.0 data/factors.yml; module docstring).
_CPU_KG_PER_MM2 = 0.0197
_CPU_KG_PER_PACKAGE = 9.14
_DRAM_KG_PER_CM2 = 2.20
_DRAM_GB_PER_CM2 = 1.2443636363636363
_DRAM_KG_PER_MODULE = 5.22
_SSD_KG_PER_CM2 = 2.20
_SSD_GB_PER_CM2 = 54.88421052631579
_SSD_KG_PER_DRIVE = 6.34
_HDD_KG_PER_DRIVE = 31.11
_MAINBOARD_KG = 66.10
_RACK_CASE_KG = 150.0
_PSU_KG_PER_KG = 24.30
_PSU_UNIT_KG = 2.99
_ASSEMBLY_KG = 6.68

COMPONENTS = ("cpu", "dram", "ssd", "hdd", "mainboard", "chassis", "psu", "assembly", "gpu")
"""The keys of `embodied_kg_by_component`, in order."""

EMBODIED_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "cpu": ("cpu",),
        "dram": ("dram",),
        "storage": ("ssd", "hdd"),
        "gpu": ("gpu",),
        "other": ("mainboard", "chassis", "psu", "assembly"),
    }
)
"""The components (`COMPONENTS`) summed in each of a run's `embodied_<group>_kg` columns
of the sites table (docs/servers.md, "In a run")."""

HOST_LIFETIME_YEARS = 4.0
"""Lifetime of every host component (all but the GPUs), Julian years: the 35,040 h (4
years) of Boavizta's server archetypes (boaviztapi 2.5.0; docs/servers.md). Boavizta's
default component lifetime, 26,280 h (3 years), would charge a third more per hour."""


@dataclass(frozen=True, slots=True)
class ServerModel:
    """One server model of the catalog (sim/data/servers.toml)."""

    id: str
    name: str
    gpu_model: str
    """A GPU id of `sim.models.hardware.GPU_CATALOG`."""
    gpus: int
    cpu_model: str
    cpu_sockets: int
    cpu_cores: int
    """Cores per socket."""
    cpu_tdp_w: float
    """TDP of one CPU package, W."""
    cpu_die_mm2: float
    """Total silicon of one CPU package, mm2."""
    memory_gb: float
    dimms: int
    ssd_tb: tuple[float, ...]
    """The capacity of each SSD, TB."""
    hdd_units: int
    nic_count: int
    nic_gbps: float
    """Port speed of each network adapter, Gb/s."""
    psu_units: int
    system_max_w: float | None = None
    """The vendor's maximum system power with its GPUs, W; None: not sourced."""

    @property
    def rest_w(self) -> float:
        """The host's draw besides CPUs and DIMMs (fans, NICs, switches, drives, board), W:
        the sourced system maximum less the GPUs' TDPs and the CPUs' and DIMMs' full-load
        draw; 0 without a sourced maximum."""
        if self.system_max_w is None:
            return 0.0
        gpus_w = self.gpus * GPU_CATALOG[self.gpu_model].tdp_w
        return self.system_max_w - gpus_w - _cpus_w(self, 1.0) - _dimms_w(self, 1.0)

    @property
    def host_idle_w(self) -> float:
        """The host's draw at 0 % CPU utilisation (active idle), W."""
        return host_power_w(self, 0.0)

    @property
    def host_peak_w(self) -> float:
        """The host's draw at 100 % CPU utilisation, W."""
        return host_power_w(self, 1.0)


def _cpus_w(model: ServerModel, cpu_util: float) -> float:
    x, r = zip(*CPU_LOAD_POINTS, strict=True)
    return model.cpu_sockets * model.cpu_tdp_w * float(np.interp(cpu_util, x, r))


def _dimms_w(model: ServerModel, cpu_util: float) -> float:
    full_w = DIMM_BASE_W + DIMM_W_PER_GB * model.memory_gb / model.dimms
    return model.dimms * full_w * (DIMM_IDLE_FRAC + (1.0 - DIMM_IDLE_FRAC) * cpu_util)


def host_power_w(model: ServerModel, cpu_util: float) -> float:
    """The host's power (the server without its GPUs), W, at CPU utilisation `cpu_util`
    (a fraction in [0, 1]); ValueError naming the value outside it."""
    if not 0.0 <= cpu_util <= 1.0:
        raise ValueError(f"cpu_util = {cpu_util!r}: must be a fraction in [0, 1]")
    return _cpus_w(model, cpu_util) + _dimms_w(model, cpu_util) + model.rest_w


def host_curve_w(model: ServerModel) -> tuple[float, ...]:
    """The host's power at SPECpower's load levels (`HOST_LOAD_STEPS`: idle, 10 %, ...,
    100 %), W; `host_power_w` is linear between consecutive levels."""
    return tuple(host_power_w(model, u) for u in HOST_LOAD_STEPS)


def embodied_kg_by_component(model: ServerModel) -> dict[str, float]:
    """Embodied carbon of one server by component (`COMPONENTS`), kgCO2e: Boavizta's
    factors for the host's parts, the GPU catalog's figure for the GPUs."""
    dram_cm2_per_module = model.memory_gb / model.dimms / _DRAM_GB_PER_CM2
    return {
        "cpu": model.cpu_sockets * (_CPU_KG_PER_MM2 * model.cpu_die_mm2 + _CPU_KG_PER_PACKAGE),
        "dram": model.dimms * (_DRAM_KG_PER_CM2 * dram_cm2_per_module + _DRAM_KG_PER_MODULE),
        "ssd": sum(
            _SSD_KG_PER_CM2 * tb * 1000.0 / _SSD_GB_PER_CM2 + _SSD_KG_PER_DRIVE
            for tb in model.ssd_tb
        ),
        "hdd": model.hdd_units * _HDD_KG_PER_DRIVE,
        "mainboard": _MAINBOARD_KG,
        "chassis": _RACK_CASE_KG,
        "psu": model.psu_units * _PSU_UNIT_KG * _PSU_KG_PER_KG,
        "assembly": _ASSEMBLY_KG,
        "gpu": model.gpus * GPU_CATALOG[model.gpu_model].embodied_kg,
    }


def lifetimes_years(model: ServerModel) -> dict[str, float]:
    """The lifetime of each component (`COMPONENTS`) of `model`, Julian years: the GPUs'
    the GPU catalog's `service_life_years` (6 years for the A100, BLOOM), the host's
    `HOST_LIFETIME_YEARS`."""
    gpu_years = GPU_CATALOG[model.gpu_model].service_life_years
    return {c: gpu_years if c == "gpu" else HOST_LIFETIME_YEARS for c in COMPONENTS}


def embodied_kg(model: ServerModel) -> float:
    """Embodied carbon of one server, kgCO2e: the sum of its components."""
    return sum(embodied_kg_by_component(model).values())


_INT_FIELDS = ("gpus", "cpu_sockets", "cpu_cores", "dimms", "nic_count", "psu_units")
_COUNT_FIELDS = ("hdd_units",)
_TEXT_FIELDS = ("name", "gpu_model", "cpu_model")
_NUMBER_FIELDS = ("cpu_tdp_w", "cpu_die_mm2", "memory_gb", "nic_gbps", "system_max_w")


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _field_error(sid: str, key: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"server {sid!r}: {key} = {value!r}: expected {expected}")


def server_model_from_dict(sid: str, fields: Mapping[str, Any]) -> ServerModel:
    """A ServerModel from catalog fields (as in servers.toml); ValueError naming the first
    unknown, missing or bad field and its value."""
    fields = {k: v for k, v in fields.items() if k != "sources"}
    known = set(ServerModel.__slots__) - {"id"}
    for key in sorted(set(fields) - known):
        raise _field_error(sid, key, fields[key], f"one of the fields {sorted(known)}")
    for key in sorted(known - set(fields) - {"system_max_w"}):
        raise ValueError(f"server {sid!r}: {key} is missing (fields as in servers.toml)")
    for key in _TEXT_FIELDS:
        if not isinstance(fields[key], str) or not fields[key]:
            raise _field_error(sid, key, fields[key], "a non-empty string")
    for key in _INT_FIELDS + _COUNT_FIELDS:
        v = fields[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < (key in _INT_FIELDS):
            raise _field_error(sid, key, v, "a positive integer" if key in _INT_FIELDS else ">= 0")
    for key in _NUMBER_FIELDS:
        if key in fields and not (_is_number(fields[key]) and fields[key] > 0):
            raise _field_error(sid, key, fields[key], "a positive number")
    ssd = fields["ssd_tb"]
    if not isinstance(ssd, list) or not all(_is_number(t) and t > 0 for t in ssd):
        raise _field_error(sid, "ssd_tb", ssd, "a list of positive capacities, TB")
    if fields["gpu_model"] not in GPU_CATALOG:
        raise _field_error(sid, "gpu_model", fields["gpu_model"], "a GPU id of gpus.toml")
    model = ServerModel(id=sid, **{**fields, "ssd_tb": tuple(float(t) for t in ssd)})
    if model.rest_w < 0:
        raise _field_error(
            sid, "system_max_w", model.system_max_w, "at least the GPUs', CPUs' and DIMMs' draw"
        )
    return model


def _load() -> tuple[Mapping[str, ServerModel], Mapping[str, Mapping[str, str]]]:
    text = resources.files("sim").joinpath("data/servers.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    models = {sid: server_model_from_dict(sid, f) for sid, f in raw.items()}
    sources = {sid: MappingProxyType(dict(f.get("sources", {}))) for sid, f in raw.items()}
    return MappingProxyType(models), MappingProxyType(sources)


SERVER_CATALOG: Mapping[str, ServerModel]
SERVER_SOURCES: Mapping[str, Mapping[str, str]]
"""Per server: field (or field group) -> source key / note, as in servers.toml."""
SERVER_CATALOG, SERVER_SOURCES = _load()
