"""GPU partitions (NVIDIA MIG): profiles, placement rules, per-slice speed and power.

A pure model the engine and the partitioner policies can call; it does not import the engine.
The data, each number with its source, is `sim/data/mig_profiles.toml`; docs/mig.md explains
the model and its limits. In short:

- **Slices.** A MIG GPU has 7 compute (SM) slices and 8 memory slices. A profile `Ng.Mgb`
  takes N compute slices and a fixed number of memory slices, and may only start at the
  memory-slice indices NVIDIA lists (`nvidia-smi mig -lgipp`). A layout is valid when every
  instance sits at an allowed start and no two instances share a memory slice (NVML,
  `nvmlDeviceGetGpuInstancePossiblePlacements`: "Creation of new GPU instance will fail if
  there is overlap with the already occupied memory slices").
- **Speed.** A slice holds `sm_count / sm_full` of the GPU's SMs (the counts `nvidia-smi mig
  -lgip` reports, not the nominal N/7) and `memory_slices / 8` of its memory bandwidth. A
  workload that spends `compute_frac` of its whole-GPU time in compute-bound kernels runs at
  `1 / (compute_frac / sm_share + (1 - compute_frac) / bandwidth_share)` of the whole GPU's
  speed (the roofline split of `sim.models.hardware`, applied to one GPU's resources).
- **Power.** `idle_w + sum(load_i x sm_share_i) x (max_cap_w - idle_w)`: each slice draws its
  SM share of the GPU's dynamic range at its load. An assumption (docs/mig.md): NVIDIA says
  only that instances share the GPU's power.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from sim.models import hardware

__all__ = [
    "COMPUTE_SLICES",
    "MEMORY_SLICES",
    "MIG_GPUS",
    "MigGpu",
    "MigProfile",
    "Placement",
    "PlacedSlice",
    "bandwidth_share",
    "fits",
    "gpu_power_w",
    "layouts",
    "mig_gpu",
    "profile",
    "profile_names",
    "reconfiguration_s",
    "slice_speed_frac",
    "sm_share",
    "validate_layout",
]

COMPUTE_SLICES = 7
"""SM slices of a MIG GPU (MIG User Guide, "Concepts": an SM slice is about 1/7 of the SMs)."""
MEMORY_SLICES = 8
"""Memory slices of a MIG GPU (MIG User Guide, "Concepts": a memory slice is about 1/8 of the
memory capacity and bandwidth)."""

_DATA_FILE = "mig_profiles.toml"
_NAME = re.compile(r"^(\d+)g\.(\d+)gb$")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU model."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: float
    sm_count: int
    """SMs of one instance, as `nvidia-smi mig -lgip` reports them."""
    max_instances: int
    starts: tuple[int, ...]
    """Memory-slice indices an instance may start at."""


@dataclass(frozen=True, slots=True)
class MigGpu:
    """The MIG capabilities of one GPU model."""

    gpu_model: str
    sm_full: int
    """SMs of the whole GPU outside MIG mode."""
    reconfiguration_s: float
    """Time to destroy and re-create the instances of an idle GPU, s."""
    profiles: Mapping[str, MigProfile]
    sources: Mapping[str, str]


@dataclass(frozen=True, slots=True, order=True)
class PlacedSlice:
    """One instance of a layout: its first memory slice and its profile."""

    start: int
    profile: str


@dataclass(frozen=True, slots=True)
class Placement:
    """A layout of one GPU model with a start slot per instance, sorted by start."""

    gpu_model: str
    slices: tuple[PlacedSlice, ...] = ()

    @property
    def profiles(self) -> tuple[str, ...]:
        """The profile names of the instances, in start order."""
        return tuple(s.profile for s in self.slices)


# --- the catalog ------------------------------------------------------------------------------


def _profile_from_dict(where: str, name: str, f: Mapping[str, Any]) -> MigProfile:
    m = _NAME.match(name)
    if m is None:
        raise ValueError(f"{where}: profile name must look like '3g.40gb', got {name!r}")
    p = MigProfile(
        name,
        int(f["compute_slices"]),
        int(f["memory_slices"]),
        float(f["memory_gb"]),
        int(f["sm_count"]),
        int(f["max_instances"]),
        tuple(int(s) for s in f["starts"]),
    )
    checks = (
        (p.compute_slices == int(m.group(1)), "compute_slices disagrees with the name"),
        (p.memory_gb == int(m.group(2)), "memory_gb disagrees with the name"),
        (0 < p.compute_slices <= COMPUTE_SLICES, f"compute_slices must be 1..{COMPUTE_SLICES}"),
        (p.max_instances == len(p.starts), "max_instances must equal the number of starts"),
        (
            all(0 <= s and s + p.memory_slices <= MEMORY_SLICES for s in p.starts),
            f"every start + memory_slices must be within 0..{MEMORY_SLICES}",
        ),
    )
    for ok, why in checks:
        if not ok:
            raise ValueError(f"{where}.profiles.{name!r}: {why}, got {f}")
    return p


def _gpu_from_dict(gpu_model: str, f: Mapping[str, Any]) -> MigGpu:
    where = f"{_DATA_FILE}: [{gpu_model}]"
    if gpu_model not in hardware.GPU_CATALOG:
        raise ValueError(f"{where}: not a GPU of gpus.toml")
    profiles = {n: _profile_from_dict(where, n, pf) for n, pf in f["profiles"].items()}
    sm_full = int(f["sm_full"])
    for p in profiles.values():
        if not 0 < p.sm_count <= sm_full:
            raise ValueError(
                f"{where}: {p.name} sm_count must be in 1..{sm_full}, got {p.sm_count}"
            )
    return MigGpu(
        gpu_model,
        sm_full,
        float(f["reconfiguration_s"]),
        MappingProxyType(profiles),
        MappingProxyType(dict(f["sources"])),
    )


def _load() -> Mapping[str, MigGpu]:
    text = resources.files("sim").joinpath(f"data/{_DATA_FILE}").read_text("utf-8")
    return MappingProxyType({g: _gpu_from_dict(g, f) for g, f in tomllib.loads(text).items()})


MIG_GPUS: Mapping[str, MigGpu] = _load()
"""GPU model -> its MIG profiles, for every MIG-capable GPU of the catalog."""


def mig_gpu(gpu_model: str) -> MigGpu:
    """The MIG data of `gpu_model`; ValueError naming the model if it has no MIG."""
    gpu = MIG_GPUS.get(gpu_model)
    if gpu is None:
        raise ValueError(
            f"GPU model {gpu_model!r} does not support MIG; MIG GPUs: {', '.join(MIG_GPUS)}"
        )
    return gpu


def profile(gpu_model: str, name: str) -> MigProfile:
    """Profile `name` of `gpu_model`; ValueError naming both if unknown."""
    profiles = mig_gpu(gpu_model).profiles
    if name not in profiles:
        raise ValueError(
            f"{gpu_model}: unknown MIG profile {name!r}; profiles: {', '.join(profiles)}"
        )
    return profiles[name]


def profile_names() -> tuple[str, ...]:
    """Every profile name of some MIG GPU of the catalog, sorted."""
    return tuple(sorted({n for gpu in MIG_GPUS.values() for n in gpu.profiles}))


def reconfiguration_s(gpu_model: str) -> float:
    """Time to repartition an idle `gpu_model`, s (an estimate: docs/mig.md)."""
    return mig_gpu(gpu_model).reconfiguration_s


# --- layouts ----------------------------------------------------------------------------------


def _mask(p: MigProfile, start: int) -> int:
    """The memory slices an instance of `p` at `start` occupies, as a bit mask."""
    return ((1 << p.memory_slices) - 1) << start


def _place(gpu: MigGpu, names: Sequence[str], used: int) -> tuple[PlacedSlice, ...] | None:
    """Start slots for `names` on memory slices not in `used` (backtracking), or None."""
    if not names:
        return ()
    p = gpu.profiles[names[0]]
    for start in p.starts:
        mask = _mask(p, start)
        if used & mask:
            continue
        rest = _place(gpu, names[1:], used | mask)
        if rest is not None:
            return (PlacedSlice(start, p.name), *rest)
    return None


def _why_not(gpu: MigGpu, names: Sequence[str]) -> str:
    """Why `names` cannot be placed, in words."""
    for n in dict.fromkeys(names):
        count, most = names.count(n), gpu.profiles[n].max_instances
        if count > most:
            return f"{n} allows at most {most} instance(s) per GPU, got {count}"
    mem = sum(gpu.profiles[n].memory_slices for n in names)
    if mem > MEMORY_SLICES:
        return f"needs {mem} memory slices, the GPU has {MEMORY_SLICES}"
    starts = "; ".join(f"{n} at {list(gpu.profiles[n].starts)}" for n in dict.fromkeys(names))
    return f"no placement without overlapping memory slices (allowed starts: {starts})"


def _largest_first(gpu: MigGpu, names: Iterable[str]) -> list[str]:
    """`names` ordered for placement: widest, then most compute, first (fewest starts)."""
    return sorted(
        names,
        key=lambda n: (-gpu.profiles[n].memory_slices, -gpu.profiles[n].compute_slices, n),
    )


def validate_layout(gpu_model: str, profiles: Sequence[str]) -> Placement:
    """Assign each profile a start slot by NVIDIA's placement rules.

    Raises ValueError with one line naming the GPU, the layout and why it does not fit, or
    the unknown GPU or profile.
    """
    gpu = mig_gpu(gpu_model)
    for name in profiles:
        profile(gpu_model, name)
    slices = _place(gpu, _largest_first(gpu, profiles), 0)
    if slices is None:
        layout = " + ".join(profiles)
        raise ValueError(f"{gpu_model}: {layout} does not fit: {_why_not(gpu, profiles)}")
    return Placement(gpu_model, tuple(sorted(slices)))


def _used(gpu: MigGpu, placement: Placement) -> int:
    used = 0
    for s in placement.slices:
        used |= _mask(gpu.profiles[s.profile], s.start)
    return used


def _room(gpu: MigGpu, used: int) -> tuple[int, int, int]:
    """What a GPU whose `used` memory slices are taken still offers: the most compute slices
    one more instance could get, the free memory slices some profile can still occupy, and
    the number of free (profile, start) pairs."""
    free = [(p, s) for p in gpu.profiles.values() for s in p.starts if not used & _mask(p, s)]
    usable = 0
    for p, s in free:
        usable |= _mask(p, s)
    widest = max((p.compute_slices for p, _ in free), default=0)
    return widest, usable.bit_count(), len(free)


def fits(gpu_model: str, current: Placement, profile_name: str) -> int | None:
    """The start slot where one more `profile_name` goes next to `current`, or None.

    Of the free starts it picks the one that keeps the largest instance possible, then the
    most memory slices usable, then the most (profile, start) pairs free, then the lowest
    start: our heuristic against fragmentation (NVIDIA's driver picks its own). Placing one
    instance at a time cannot serve every order: when `fits` says None, the multiset may
    still fit after a repartition (`validate_layout`).
    """
    gpu = mig_gpu(gpu_model)
    p = profile(gpu_model, profile_name)
    if current.gpu_model != gpu_model:
        raise ValueError(f"{gpu_model}: the placement is of {current.gpu_model}")
    used = _used(gpu, current)
    free = [s for s in p.starts if not used & _mask(p, s)]
    if not free:
        return None
    return max(free, key=lambda s: (*_room(gpu, used | _mask(p, s)), -s))


@functools.cache
def layouts(gpu_model: str) -> tuple[Placement, ...]:
    """Every maximal valid layout of `gpu_model`: profile multisets that fit and to which no
    profile can be added, each with the placement `validate_layout` gives it."""
    gpu = mig_gpu(gpu_model)
    names = _largest_first(gpu, gpu.profiles)
    found: list[Placement] = []

    def grow(layout: tuple[str, ...], first: int) -> None:
        extended = False
        for i in range(len(names)):
            candidate = (*layout, names[i])
            if _place(gpu, _largest_first(gpu, candidate), 0) is None:
                continue
            extended = True
            if i >= first:
                grow(candidate, i)
        if not extended:
            found.append(validate_layout(gpu_model, layout))

    grow((), 0)
    return tuple(found)


# --- speed and power --------------------------------------------------------------------------


def sm_share(gpu_model: str, profile_name: str) -> float:
    """The slice's share of the whole GPU's SMs (outside MIG mode), in (0, 1]."""
    return profile(gpu_model, profile_name).sm_count / mig_gpu(gpu_model).sm_full


def bandwidth_share(gpu_model: str, profile_name: str) -> float:
    """The slice's share of the GPU's memory bandwidth: its memory slices over 8."""
    return profile(gpu_model, profile_name).memory_slices / MEMORY_SLICES


def slice_speed_frac(gpu_model: str, profile_name: str, workload_kind: str) -> float:
    """Throughput of one slice relative to the whole GPU (outside MIG mode) for a workload of
    `sim.models.hardware.PROFILES[workload_kind]`: the roofline split of its `compute_frac` over the
    slice's SM share and bandwidth share. Assumes the workload saturates the whole GPU."""
    if workload_kind not in hardware.PROFILES:
        raise ValueError(
            f"unknown workload kind {workload_kind!r}; use {hardware.profile_choices()}"
        )
    cf = hardware.PROFILES[workload_kind].compute_frac
    return 1.0 / (
        cf / sm_share(gpu_model, profile_name)
        + (1.0 - cf) / bandwidth_share(gpu_model, profile_name)
    )


def gpu_power_w(gpu_model: str, slices: Sequence[tuple[str, float]]) -> float:
    """Power of a partitioned `gpu_model`, W: idle power plus each slice's SM share of the
    dynamic range (`max_cap_w - idle_w`) at its load.

    `slices` are (profile, load) pairs forming a valid layout; a load in [0, 1] is the share
    of the slice's full dynamic power it draws (busy time x the workload's draw). The SM shares
    of a valid layout add up to at most 1, so the result never exceeds the power limit.
    """
    for name, load in slices:
        if not 0.0 <= load <= 1.0:
            raise ValueError(f"{gpu_model}: load of {name} must be in [0, 1], got {load}")
    validate_layout(gpu_model, [name for name, _ in slices])
    spec = hardware.GPU_CATALOG[gpu_model]
    dynamic = sum(load * sm_share(gpu_model, name) for name, load in slices)
    return spec.idle_w + dynamic * (spec.max_cap_w - spec.idle_w)
