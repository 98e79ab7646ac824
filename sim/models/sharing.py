"""GPU sharing: fractional jobs co-located on one GPU, their speed and their power.

A fractional job asks for `gpu_milli` thousandths of one GPU (Alibaba's `gpu_milli`,
1..999; 1000 is a whole GPU). Its work stays reference GPU-hours of a whole GPU, and:

- **Speed.** Alone on its GPU a job holding share `s = milli / 1000` progresses at `s`
  times the GPU's speed (a time slice of the GPU: the trace's runtime of a pod whose work
  is `s x runtime`). Next to co-located jobs it runs slower still, by the interference
  factor `speed_factor`: `1 / (1 + SLOWDOWN_FULL x others / (1000 - own))`, where
  `others` is the milli the co-located jobs hold and `1000 - own` the most they can hold.
  Linear between no slowdown (alone) and `SLOWDOWN_FULL` when the rest of the GPU is taken.
- **Power.** A shared GPU draws its idle power plus, per job, its share of the job's active
  power above idle: `idle + sum(s_i x (active_i - idle))` (`gpu_power_w`). Each job's
  share of that is `s_i x active_i` and the unheld rest of the GPU, `(1 - sum s_i) x idle`,
  is idle power (`sim.engine.ledger.Pool.idle_it_w`); host power is split the same way. Since
  `sum s_i <= 1` and each `active_i` is at most the GPU's power limit, the draw never
  exceeds the limit.

Sources and what they say: docs/gpu-sharing.md.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "MILLI_PER_GPU",
    "SLOWDOWN_FULL",
    "gpu_power_w",
    "is_fractional",
    "share",
    "speed_factor",
]

MILLI_PER_GPU = 1000
"""Milli-GPUs in one GPU: a job of `gpu_milli` 1000 holds whole GPUs."""

SLOWDOWN_FULL = 0.19
"""Extra time per iteration of a job whose GPU's rest is taken by co-located jobs: 19%.
Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning",
OSDI 2018, section 3, "sensitivity to interference"): two language-model training jobs
packed on one GPU each slowed down by 19%, while ResNet-50 next to a language model did not
slow down. We take the sensitive pair's figure (the pessimistic end of what was measured)
for every pair."""


def share(milli: int) -> float:
    """The fraction of one GPU that `milli` milli-GPUs are."""
    return milli / MILLI_PER_GPU


def is_fractional(milli: int) -> bool:
    """True if a job of `milli` milli-GPUs holds part of one GPU (it may share it)."""
    return milli < MILLI_PER_GPU


def speed_factor(own_milli: int, others_milli: int, slowdown_full: float = SLOWDOWN_FULL) -> float:
    """Speed of a job of `own_milli` on a GPU where co-located jobs hold `others_milli`,
    relative to its speed alone there (1.0 alone; 1 / (1 + `slowdown_full`) with the rest of
    the GPU taken: 1 / 1.19 by default)."""
    if others_milli <= 0:
        return 1.0
    room = MILLI_PER_GPU - own_milli
    if not 0 < others_milli <= room:
        raise ValueError(
            f"co-located jobs hold {others_milli} milli next to {own_milli}: "
            f"at most {room} fit on one GPU"
        )
    return 1.0 / (1.0 + slowdown_full * others_milli / room)


def gpu_power_w(idle_w: float, jobs: Iterable[tuple[int, float]]) -> float:
    """Draw of one shared GPU, W: `idle_w` plus, per job `(milli, active_w)`, its share of
    its active power above idle (a job at idle power, held or writing a checkpoint, adds
    nothing)."""
    jobs = list(jobs)
    held = sum(milli for milli, _ in jobs)
    if held > MILLI_PER_GPU:
        raise ValueError(f"jobs hold {held} milli of one GPU, more than {MILLI_PER_GPU}")
    return idle_w + sum(share(milli) * (active_w - idle_w) for milli, active_w in jobs)
