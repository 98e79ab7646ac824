"""Alibaba GPU 2023 trace (`cluster-trace-gpu-v2023`, FGD paper, ATC'23): `openb_pod_list_*.csv`.

A CSV with a header: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time (times in seconds on the trace's
own clock, no absolute date). One pod is one job:

- submission = `creation_time`; runtime = `deletion_time - scheduled_time` (the original
  scheduling wait is dropped: dcsim's policies decide the wait);
- `num_gpu == 0` (CPU pods) are skipped; pods without `scheduled_time` never ran (the
  trace's `Pending` pods) and are skipped; `Failed` pods are skipped unless `keep_failed`
  (they ran until deleted); `Running` and `Succeeded` pods are kept: `Running` is the phase
  at deletion, i.e. a service or job removed while running;
- a pod without `deletion_time` runs up to the trace end (the largest time in the file),
  and so do, in effect, the `Running` pods whose `deletion_time` is the trace end: both are
  counted in the notes;
- fractional GPUs: a pod with `num_gpu == 1` and `gpu_milli < 1000` asks for a fraction of
  one GPU. `fractional="round_up"` (default) gives it a whole GPU and
  `work_gpu_h = runtime_h`; `fractional="share"` keeps its `gpu_milli` (the job column:
  it shares one GPU with other fractional jobs, docs/gpu-sharing.md) with
  `work_gpu_h = gpu_milli / 1000 x runtime_h`, which conserves the trace's GPU-hours: alone
  on its GPU it progresses at gpu_milli / 1000 of the GPU's speed, so it runs for its
  measured time (longer next to co-located jobs). Multi-GPU pods take `num_gpu` whole GPUs.
- GPU types: `gpu_spec` lists the GPU types a pod may run on (`V100M16|V100M32`; empty:
  any). With `keep_gpu_spec` (default) each type is mapped to a catalog model where the
  mapping is certain (`TRACE_GPU_MODELS`) and kept as the job's `allowed_gpu_models`; a spec
  naming any other type (the undisclosed G1-G3, the A10 the catalog lacks) keeps no
  constraint, counted in the notes. A pod whose spec names only types that are the very
  card of one catalog model X (`SAME_CARD`) was measured on X: its work is converted to
  reference GPU-hours, `work_gpu_h x speed(X, profile) / speed("A100-80GB", profile)`
  (`sim.models.hardware.speed`); other pods' runtimes are taken as reference runtimes
  (`REFERENCE_NOTE`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.models import hardware
from sim.models.hardware import REFERENCE_GPU
from sim.workload.importers import ImportReport
from sim.workload.importers._common import (
    REFERENCE_NOTE,
    RowReasons,
    check_common,
    native_frame,
    read_csv_strict,
)
from sim.workload.table import join_gpu_models

COLUMNS_USED = (
    "name",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
PHASES = ("Running", "Succeeded", "Failed", "Pending")
TRACE_GPU_MODELS = {"P100": "P100", "T4": "T4", "V100M16": "V100", "V100M32": "V100"}
"""The trace's GPU types (`gpu_spec`, the node list's `model`) -> catalog models, where
certain: V100M16 and V100M32 are the 16 GB and 32 GB V100 (one chip; the catalog's V100
is the 32 GB PCIe card). G1, G2 and G3 are undisclosed internal codes and the catalog has
no A10: they map to nothing."""
SAME_CARD = frozenset({"T4"})
"""Trace GPU types whose catalog model is the very card, so that its speed is known: the
T4 comes in one form. The trace does not say whether its P100s and V100s are the PCIe or
the SXM2 cards (whose clocks, and so speeds, differ), so their runtimes are not converted."""
SPEC_SEPARATOR = "|"


def import_alibaba2023(
    path: Path,
    *,
    keep_failed: bool = False,
    fractional: str = "round_up",
    profile: str = "mixed",
    origin_site: str = "",
    keep_gpu_spec: bool = True,
) -> tuple[pd.DataFrame, ImportReport]:
    """Import an `openb_pod_list_*.csv`. Options: `keep_failed` (keep pods of phase Failed,
    default false), `fractional` ("round_up" or "share"), `profile`, `origin_site`,
    `keep_gpu_spec` (keep `gpu_spec` as GPU-model constraints, default true)."""
    path = Path(path)
    check_common(path, profile, fractional)
    report = ImportReport("alibaba2023", str(path))
    numeric = ("num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")
    pods = read_csv_strict(path, COLUMNS_USED, numeric, header=True)
    n = len(pods)
    report.rows_read = n

    name = pods["name"].fillna("").to_numpy(dtype=object)
    num_gpu = pods["num_gpu"].to_numpy()
    milli = pods["gpu_milli"].to_numpy()
    phase = pods["pod_phase"].fillna("").to_numpy(dtype=object)
    created = pods["creation_time"].to_numpy()
    deleted = pods["deletion_time"].to_numpy()
    scheduled = pods["scheduled_time"].to_numpy()

    why = RowReasons(n)
    why.mark(name == "", "name missing")
    why.mark(pd.Series(name).duplicated().to_numpy(), "repeated pod name (first one kept)")
    bad_gpu = ~np.isfinite(num_gpu) | (num_gpu < 0) | (num_gpu != np.round(num_gpu))
    why.mark(bad_gpu, "invalid num_gpu")
    why.mark(num_gpu == 0, "CPU-only pod (num_gpu 0)")
    bad_milli = ~np.isfinite(milli) | (milli <= 0) | (milli > 1000)
    why.mark(bad_milli, "invalid gpu_milli (must be in 1..1000)")
    why.mark(~np.isfinite(created) | (created < 0), "creation_time missing or negative")
    for p in pd.unique(phase[why.ok]):
        if p not in PHASES:
            why.mark(phase == p, f"unknown pod_phase {p!r}")
    why.mark(np.isnan(scheduled), "never scheduled (no scheduled_time)")
    why.mark(phase == "Pending", "never ran (pod_phase Pending)")
    if not keep_failed:
        why.mark(phase == "Failed", "failed pod (pod_phase Failed; keep_failed=false)")

    times = np.concatenate([created, deleted, scheduled])
    finite = times[np.isfinite(times)]
    trace_end = float(finite.max()) if finite.size else 0.0
    end = np.where(np.isnan(deleted), trace_end, deleted)
    why.mark(end - scheduled <= 0, "non-positive runtime (deletion_time <= scheduled_time)")
    why.fill(report)
    keep = why.ok

    k_sched, k_created = scheduled[keep], created[keep]
    runtime_h = (end[keep] - k_sched) / 3600.0
    early = k_sched < k_created
    if early.any():
        report.notes.append(
            f"{int(early.sum())} pod(s) scheduled before creation: submitted at scheduled_time"
        )
    submit = np.minimum(k_created, k_sched)
    undeleted = np.isnan(deleted[keep])
    if undeleted.any():
        report.notes.append(
            f"{int(undeleted.sum())} pod(s) never deleted: runtime up to the trace end "
            f"({trace_end:.0f} s)"
        )
    at_end = ~undeleted & (deleted[keep] == trace_end) & (phase[keep] == "Running")
    if at_end.any():
        report.notes.append(
            f"{int(at_end.sum())} pod(s) still Running at the trace end (deletion_time = "
            f"{trace_end:.0f} s, the last time in the file): runtime truncated there"
        )

    gpus = num_gpu[keep]
    fraction = np.where(gpus == 1, milli[keep] / 1000.0, 1.0)
    partial = fraction < 1.0
    multi_partial = (gpus > 1) & (milli[keep] < 1000)
    if multi_partial.any():
        report.notes.append(
            f"{int(multi_partial.sum())} multi-GPU pod(s) with gpu_milli < 1000: "
            "take num_gpu whole GPUs"
        )
    if fractional == "round_up":
        work = gpus * runtime_h
        report.notes.append(
            f"fractional=round_up: {int(partial.sum())} GPU-sharing pod(s) (gpu_milli < 1000) "
            "take a whole GPU"
        )
    else:
        work = gpus * fraction * runtime_h
        report.notes.append(
            f"fractional=share: {int(partial.sum())} GPU-sharing pod(s) keep their gpu_milli "
            "and share a GPU (work_gpu_h = share x runtime_h: alone on its GPU a pod runs for "
            "its measured time)"
        )
    models = None
    if keep_gpu_spec:
        spec = pods["gpu_spec"].fillna("").to_numpy(dtype=object)[keep]
        models, to_reference = _gpu_constraints(spec, profile, report)
        work = work * to_reference
    else:
        report.notes.append("keep_gpu_spec=false: gpu_spec ignored, no GPU-model constraints")
        report.notes.append(REFERENCE_NOTE)

    extra: dict[str, np.ndarray] = {}
    if models is not None:
        extra["allowed_gpu_models"] = models
    if fractional == "share":
        extra["gpu_milli"] = np.round(fraction * 1000.0).astype(np.int64)
    frame, origin_s = native_frame(
        name[keep],
        submit,
        gpus,
        work,
        profile=profile,
        origin_site=origin_site,
        report=report,
        extra=extra,
    )
    if len(frame):
        report.trace_start = (
            f"creation_time {origin_s:.0f} s of the trace's clock "
            "(relative seconds, the trace publishes no date)"
        )
    return frame, report


def _gpu_constraints(
    spec: np.ndarray, profile: str, report: ImportReport
) -> tuple[np.ndarray, np.ndarray]:
    """Per pod, its `allowed_gpu_models` entry ("": any) and the factor from its measured GPU-hours
    to reference GPU-hours (1 unless it was measured on a known card); notes in `report`."""
    codes, specs = pd.factorize(spec)
    entries = np.array([_catalog_entry(text) for text in specs], dtype=object)
    factors = np.array([_to_reference(text, profile) for text in specs])
    unmapped = np.array([text != "" for text in specs], bool) & (entries == "")
    if unmapped.any():
        names = ", ".join(sorted(map(str, specs[unmapped])))
        report.notes.append(
            f"{int(unmapped[codes].sum())} pod(s) with a gpu_spec naming a GPU type without a "
            f"certain catalog model ({names}): no GPU-model constraint"
        )
    converted = int((factors != 1.0)[codes].sum())
    report.notes.append(
        f"{int((entries != '')[codes].sum())} pod(s) keep their gpu_spec as allowed_gpu_models; "
        f"{converted} measured on a known card ({', '.join(sorted(SAME_CARD))}) have their "
        "work converted to reference GPU-hours (x speed(card) / speed(A100-80GB) for the "
        "profile); for the others, " + REFERENCE_NOTE
    )
    return entries[codes], factors[codes]


def _to_reference(spec: str, profile: str) -> float:
    """Reference GPU-hours per GPU-hour measured on the card a `gpu_spec` names, if it
    names only `SAME_CARD` types of one catalog model; else 1 (runtime taken as is)."""
    types = {t.strip() for t in spec.split(SPEC_SEPARATOR)} if spec else set()
    models = {TRACE_GPU_MODELS[t] for t in types & SAME_CARD}
    if not types or not types <= SAME_CARD or len(models) != 1:
        return 1.0
    (card,) = models
    return hardware.speed(card, profile) / hardware.speed(REFERENCE_GPU, profile)


def _catalog_entry(spec: str) -> str:
    """The `allowed_gpu_models` entry of a `gpu_spec` cell: its types' catalog models, "" (any)
    if it is empty or names a type `TRACE_GPU_MODELS` does not map."""
    types = [t.strip() for t in spec.split(SPEC_SEPARATOR)] if spec else []
    if not all(t in TRACE_GPU_MODELS for t in types):
        return ""
    return join_gpu_models(TRACE_GPU_MODELS[t] for t in types)
