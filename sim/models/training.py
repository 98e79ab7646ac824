"""Training to a target accuracy: the measured workloads of Zeus by batch size and power limit.

Zeus (You, Chung, Chowdhury, NSDI 2023) trained six (model, dataset) workloads at many batch
sizes, four or more seeds each, recording the epoch at which each run first reached each
target metric (its train trace), and measured the time per epoch and the average GPU power
of each (batch size, power limit) on four GPUs (its power traces). `sim/data/
zeus_training.toml`, written by `scripts/calibrate_training.py` from those traces, holds

- per workload (`TrainingWorkload`): the Zeus artifact's job defaults (target metric,
  maximum epochs, default batch size) and, per batch size and target, each run's epochs to
  the target (`epochs_to_target`; NaN: that run never reached it);
- per (GPU, workload, batch size) the power sweep (`PowerSweep`): time per epoch and power at
  each measured limit, made monotone in the limit (the script's minimax fit).

This module only reads those data; `sim.models.hardware` turns a sweep into the speed and power of a
batch-size profile (`resnet50@512`), and `sim.workload.time_to_accuracy` turns a job's target
into its work.
"""

from __future__ import annotations

import bisect
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

BATCH_SEPARATOR = "@"
"""Between a workload and its batch size in a profile id: `resnet50@512`."""


@dataclass(frozen=True, slots=True)
class TrainingWorkload:
    """One of Zeus's (model, dataset) workloads, as its train trace measured it."""

    id: str
    """The profile id of `sim.models.hardware.PROFILES` (e.g. `resnet50`)."""
    dataset: str
    network: str
    optimizer: str
    metric: str
    """What the target measures (e.g. `top-1 accuracy`, `word error rate (%)`)."""
    lower_is_better: bool
    default_target: float
    default_batch_size: int
    max_epochs: int
    """Epochs a run that never reaches its target trains before it stops (Zeus's default)."""
    epochs: Mapping[int, Mapping[float, tuple[float, ...]]]
    """Batch size -> target -> the epoch each run (seed) first reached it; NaN: never."""

    def runs(self, batch_size: int, target: float) -> tuple[float, ...]:
        """Each run's epochs to `target` at `batch_size`; ValueError naming what is known."""
        per_target = self.epochs.get(batch_size)
        if per_target is None:
            sizes = ", ".join(map(str, self.epochs))
            raise ValueError(
                f"{self.id} was not trained at batch size {batch_size} by Zeus (trained: {sizes})"
            )
        runs = per_target.get(target)
        if runs is None:
            targets = ", ".join(f"{t:g}" for t in per_target)
            raise ValueError(
                f"{self.id} at batch size {batch_size}: {target:g} is not a target of the Zeus "
                f"train trace ({self.metric}; targets: {targets})"
            )
        return runs

    def require_reached(self, batch_size: int, target: float) -> None:
        """ValueError unless at least one run at `batch_size` reached `target`."""
        if all(math.isnan(e) for e in self.runs(batch_size, target)):
            raise ValueError(
                f"no run of the Zeus train trace reaches {target:g} ({self.metric}) with "
                f"{self.id} at batch size {batch_size}"
            )

    def epochs_to_target(self, batch_size: int, target: float, u: float) -> tuple[float, bool]:
        """(epochs trained, whether the target was reached) of the run a uniform draw `u` in
        [0, 1) picks among the trace's runs at `batch_size`, as Zeus's simulator samples a
        training path: a run that never reached the target trains `max_epochs`."""
        runs = self.runs(batch_size, target)
        epochs = runs[min(int(u * len(runs)), len(runs) - 1)]
        if math.isnan(epochs):
            return float(self.max_epochs), False
        return epochs, True


@dataclass(frozen=True, slots=True)
class PowerSweep:
    """Time per epoch and average power of one (GPU, workload, batch size) over power limits,
    non-increasing and non-decreasing in the limit respectively."""

    cap_w: tuple[float, ...]
    """The measured power limits, W, ascending; the last is the GPU's maximum."""
    epoch_s: tuple[float, ...]
    """Time per epoch at each limit, s."""
    power_w: tuple[float, ...]
    """Average power of the GPU at each limit, W."""

    def at(self, cap_w: float) -> tuple[float, float]:
        """(time per epoch s, power W) under `cap_w`: linear between measured limits; the
        lowest measured point below them, the highest above."""
        caps = self.cap_w
        if cap_w >= caps[-1]:
            return self.epoch_s[-1], self.power_w[-1]
        if cap_w <= caps[0]:
            return self.epoch_s[0], self.power_w[0]
        i = bisect.bisect_right(caps, cap_w)
        w = (cap_w - caps[i - 1]) / (caps[i] - caps[i - 1])
        return (
            self.epoch_s[i - 1] + w * (self.epoch_s[i] - self.epoch_s[i - 1]),
            self.power_w[i - 1] + w * (self.power_w[i] - self.power_w[i - 1]),
        )


def _load() -> tuple[
    dict[str, TrainingWorkload], dict[tuple[str, str, int], PowerSweep], dict[str, Any]
]:
    text = resources.files("sim").joinpath("data/zeus_training.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    workloads = {}
    for wid, w in raw["workloads"].items():
        epochs = {
            int(b): MappingProxyType({float(t): tuple(runs) for t, runs in per_target.items()})
            for b, per_target in w.pop("epochs").items()
        }
        workloads[wid] = TrainingWorkload(id=wid, epochs=MappingProxyType(epochs), **w)
    sweeps = {
        (gid, wid, int(b)): PowerSweep(tuple(s["cap_w"]), tuple(s["epoch_s"]), tuple(s["power_w"]))
        for gid, per_workload in raw["sweeps"].items()
        for wid, per_batch in per_workload.items()
        for b, s in per_batch.items()
    }
    meta = {k: raw[k] for k in ("source", "generated_by", "monotone_fit_max_change")}
    return workloads, sweeps, meta


_workloads, _sweeps, _meta = _load()
TRAINING_WORKLOADS: Mapping[str, TrainingWorkload] = MappingProxyType(_workloads)
"""The Zeus workloads by profile id."""
POWER_SWEEPS: Mapping[tuple[str, str, int], PowerSweep] = MappingProxyType(_sweeps)
"""(GPU model, workload, batch size) -> its measured power sweep."""
SOURCE: Mapping[str, Any] = MappingProxyType(_meta)
"""Where the data come from and how they were derived."""


def measured_batch_sizes(workload: str) -> tuple[int, ...]:
    """The batch sizes of `workload` with a power sweep on at least one GPU, ascending."""
    return tuple(sorted({b for (_, w, b) in POWER_SWEEPS if w == workload}))


def batch_profile(workload: str, batch_size: int) -> str:
    """The profile id of `workload` at `batch_size`, e.g. `resnet50@512`."""
    return f"{workload}{BATCH_SEPARATOR}{batch_size}"


def split_batch_profile(profile: str) -> tuple[str, int] | None:
    """(workload, batch size) of a batch-size profile id; None for any other profile."""
    workload, sep, batch = profile.partition(BATCH_SEPARATOR)
    if not sep or workload not in TRAINING_WORKLOADS or not batch.isdigit():
        return None
    return workload, int(batch)
