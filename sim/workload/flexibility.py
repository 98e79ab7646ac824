"""Flexibility models for imported jobs: deadlines, interruptibility, checkpoint sizes.

Public GPU-cluster traces carry no deadlines; `apply_flexibility` adds them (and the
interruptible flag and checkpoint sizes) to a native-format frame, seeded and vectorised.
docs/workloads.md describes the models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import numpy as np
import pandas as pd

from sim.workload.table import COLUMNS

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""Bytes per parameter of a training checkpoint with mixed-precision Adam: fp16/bf16
weights (2) + fp32 master weights (4) + Adam momentum and variance (4 + 4). Source:
Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC'20, Sec. 3.1 (model states 2 + 2 + 12 bytes per parameter, of which the
2 bytes of fp16 gradients are not checkpointed)."""

SIZE_CLASSES: tuple[tuple[int, float, str], ...] = (
    (1, 0.34e9, "small: 1 GPU, BERT-large class (340M parameters)"),
    (8, 1.5e9, "medium: 2-8 GPUs, GPT-2 XL class (1.5B)"),
    (64, 13e9, "large: 9-64 GPUs, 13B class (e.g. LLaMA-13B)"),
    (2**62, 70e9, "xlarge: > 64 GPUs, 70B class (e.g. Llama-2-70B)"),
)
"""(max GPUs, representative parameter count, description) per model-size class. The
mapping from a job's GPU count to a model size is an assumption (traces do not record the
model); checkpoint_gb = parameters x `CHECKPOINT_BYTES_PER_PARAM` / 1e9: 4.76, 21, 182 and
980 GB."""


def checkpoint_gb_by_size(gpus: np.ndarray) -> np.ndarray:
    """Checkpoint size, GB, of jobs of `gpus` GPUs by model-size class (`SIZE_CLASSES`)."""
    limits = np.array([c[0] for c in SIZE_CLASSES], dtype=np.int64)
    params = np.array([c[1] for c in SIZE_CLASSES])
    cls = np.searchsorted(limits, np.asarray(gpus, dtype=np.int64), side="left")
    return params[cls] * CHECKPOINT_BYTES_PER_PARAM / 1e9


def next_workday_9am_s(submit_s: np.ndarray, start: datetime, timezone: str = "UTC") -> np.ndarray:
    """09:00 local time (`timezone`) on the first Monday-to-Friday date after the local date
    of each submission, as seconds since `start`. Friday, Saturday and Sunday submissions
    get Monday 09:00; a Monday 08:00 submission gets Tuesday 09:00 (always a later date)."""
    if start.tzinfo is None:
        raise ValueError(f"start must carry a UTC offset, got {start}")
    t0 = pd.Timestamp(start).tz_convert("UTC")
    local = (t0 + pd.to_timedelta(np.asarray(submit_s, dtype=np.float64), unit="s")).tz_convert(
        timezone
    )
    local = pd.DatetimeIndex(local)
    weekday = np.asarray(local.day_of_week)
    ahead = np.select([weekday == 4, weekday == 5], [3, 2], default=1)
    day = local.tz_localize(None).normalize() + pd.to_timedelta(ahead, unit="D")
    target = (day + pd.Timedelta(hours=9)).tz_localize(
        timezone, ambiguous="NaT", nonexistent="shift_forward"
    )
    return np.asarray((target - t0).total_seconds(), dtype=np.float64)


def apply_flexibility(
    frame: pd.DataFrame,
    *,
    start: datetime,
    rng: np.random.Generator,
    deferrable_fraction: float = 1.0,
    slack: Literal["fixed", "proportional", "next_workday"] = "fixed",
    slack_h: tuple[float, float] = (6.0, 24.0),
    slack_factor: float = 1.0,
    timezone: str = "UTC",
    interruptible_fraction: float = 0.0,
    checkpoint: Literal["none", "by_size"] = "none",
) -> pd.DataFrame:
    """A copy of `frame` (native format, `submit_time` in seconds since `start`) with
    `deadline` and `interruptible` replaced (and `checkpoint_gb` when `checkpoint` is
    "by_size"). Never drops or reorders rows.

    runtime_h = work_gpu_h / gpus (hours on reference GPUs). A job is deferrable with
    probability `deferrable_fraction`; its deadline (seconds since `start`) is

    - "fixed": submit + runtime + uniform(slack_h) hours;
    - "proportional": submit + runtime x (1 + slack_factor);
    - "next_workday": 09:00 local time (`timezone`, IANA) of the first Monday-to-Friday
      date after the submission's local date; if the job cannot finish by then
      (submit + runtime > that time) the deadline is that time + runtime.

    Other jobs get no deadline (NaN). A job is interruptible with probability
    `interruptible_fraction`. "by_size" sets checkpoint_gb from the GPU count
    (`SIZE_CLASSES`); "none" keeps the frame's checkpoint_gb.

    Draws from `rng`, in this order, n uniforms each whatever the options (common random
    numbers: changing one option leaves the other attributes unchanged): deferrable,
    slack position, interruptible.
    """
    missing = [c for c in ("submit_time", "gpus", "work_gpu_h") if c not in frame.columns]
    if missing:
        raise ValueError(f"apply_flexibility: frame lacks column(s) {', '.join(missing)}")
    if not 0 <= deferrable_fraction <= 1:
        raise ValueError(f"deferrable_fraction must be in [0, 1], got {deferrable_fraction}")
    if not 0 <= interruptible_fraction <= 1:
        raise ValueError(f"interruptible_fraction must be in [0, 1], got {interruptible_fraction}")
    if slack not in ("fixed", "proportional", "next_workday"):
        raise ValueError(f"slack must be fixed, proportional or next_workday, got {slack!r}")
    if checkpoint not in ("none", "by_size"):
        raise ValueError(f"checkpoint must be none or by_size, got {checkpoint!r}")
    lo, hi = slack_h
    if not 0 <= lo <= hi:
        raise ValueError(f"slack_h must be [low, high] with 0 <= low <= high, got {list(slack_h)}")
    if not slack_factor >= 0:
        raise ValueError(f"slack_factor must be >= 0, got {slack_factor}")

    out = frame.copy()
    n = len(out)
    submit = pd.to_numeric(out["submit_time"], errors="raise").to_numpy(dtype=np.float64)
    gpus = pd.to_numeric(out["gpus"], errors="raise").to_numpy(dtype=np.float64)
    work = pd.to_numeric(out["work_gpu_h"], errors="raise").to_numpy(dtype=np.float64)
    runtime_s = work / gpus * 3600.0

    deferrable = rng.random(n) < deferrable_fraction
    position = rng.random(n)
    interruptible = rng.random(n) < interruptible_fraction

    if slack == "fixed":
        deadline = submit + runtime_s + (lo + position * (hi - lo)) * 3600.0
    elif slack == "proportional":
        deadline = submit + runtime_s * (1.0 + slack_factor)
    else:
        nine = next_workday_9am_s(submit, start, timezone) if n else np.empty(0)
        deadline = np.where(submit + runtime_s > nine, nine + runtime_s, nine)
    out["deadline"] = np.where(deferrable, deadline, np.nan)
    out["interruptible"] = interruptible
    if checkpoint == "by_size":
        out["checkpoint_gb"] = checkpoint_gb_by_size(gpus.astype(np.int64))
    ordered = [c for c in COLUMNS if c in out.columns]
    return out[ordered + [c for c in out.columns if c not in ordered]]
