"""The columnar job table every workload source produces, and the native format's columns.

A job is a gang of `gpus` GPUs that must all run on one site. Its size is `work_gpu_h`,
reference GPU-hours (an A100-80GB at its maximum power limit, see `sim.models.hardware`) summed
over its GPUs: on `gpus` reference GPUs it runs for `work_gpu_h / gpus` hours of wall time.
A job with a deadline (absolute, seconds since the scenario start) may be deferred; a job
without one must run as soon as possible. Interruptible jobs may be suspended and resumed
(`checkpoint_gb` is moved when they resume elsewhere); `data_gb` is the input a job reads
from its `origin_site`; `allowed_sites` says where the job may run at all (data residency).
Per-job data is columnar (one numpy array per attribute), never one
Python object per job: runs hold hundreds of thousands of jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, cast

import numpy as np
import pandas as pd

from sim.models import mig
from sim.models.hardware import GPU_CATALOG, PROFILES
from sim.models.scaling import SCHEMES
from sim.models.sharing import MILLI_PER_GPU
from sim.models.training import split_batch_profile
from sim.util.columns import freeze_columns, same_value_column

COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "gpus",
    "work_gpu_h",
    "profile",
    "deadline",
    "interruptible",
    "checkpoint_gb",
    "data_gb",
    "origin_site",
    "allowed_sites",
    "allowed_gpu_models",
    "target_metric",
    "gpu_milli",
    "parallelism",
    "mig_profile",
    "vc",
    "user",
)
"""Columns of the native job format, in the order `JobTable.to_frame` writes them."""

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "gpus")
"""Columns every job file has; it also has `work_gpu_h` or `target_metric` (or both)."""

OPTIONAL_DEFAULTS: dict[str, object] = {
    "profile": "mixed",
    "deadline": None,
    "interruptible": False,
    "checkpoint_gb": 0.0,
    "data_gb": 0.0,
    "origin_site": None,
    "allowed_sites": None,
    "allowed_gpu_models": None,
    "target_metric": None,
    "gpu_milli": MILLI_PER_GPU,
    "parallelism": "data",
    "mig_profile": "",
    "vc": "",
    "user": "",
}
"""Value of an optional column when it is absent or empty (None: no deadline / first site /
any site / any GPU model; `gpu_milli` 1000: whole GPUs; `mig_profile` "": no MIG slice)."""

ANY_SITE = -1
"""`allowed_sites` of a job that may run on any site (every bit set)."""
MAX_MASK_SITES = 63
"""Sites a bit mask of `allowed_sites` can name (bits 0..62 of an int64)."""
SITES_SEPARATOR = ";"
"""Between site names in the `allowed_sites` column of a job file."""
ANY_GPU_MODEL = ""
"""`allowed_gpu_models` of a job that may run on any GPU model."""
MODELS_SEPARATOR = ";"
"""Between GPU model names in the `allowed_gpu_models` column of a job file and of a `JobTable`."""


MAX_JOB_GPUS = 1 << 20
"""Most GPUs one job may hold (1,048,576): more than sixty times the 16,384 H100s of the
largest training run described in detail (Llama 3 405B, arXiv:2407.21783, section 3.3).
A larger count in a job file or trace is a unit mix-up or a corrupt cell, not a job."""
MAX_JOB_RUNTIME_H = 100_000.0
"""Longest runtime of a job on reference GPUs, `work_gpu_h / gpus`, in hours (about 11.4
years, longer than the GPU generations a cluster runs on): a longer one cannot be meant
(1e12 hours is a unit mix-up)."""
MAX_JOB_DATA_GB = 1e7
"""Largest `checkpoint_gb` or `data_gb` of one job, GB (10 PB: over a hundred times the
~60 TB of Llama 3's 15.6T-token pre-training corpus at ~4 bytes per token, arXiv:2407.21783)."""

JobValueCheck = tuple[str, str, np.ndarray]
"""(column, requirement, bad-row mask) of `job_value_checks`; the requirement reads as a
sentence about the column ("gpus must be ...")."""


def job_value_checks(
    submit_s: np.ndarray,
    gpus: np.ndarray,
    work_gpu_h: np.ndarray,
    checkpoint_gb: np.ndarray,
    data_gb: np.ndarray,
) -> list[JobValueCheck]:
    """The rules every job's numbers obey whatever the scenario: the one check the native
    loader (`sim.workload.native`) and every trace importer run, so that an importer never
    writes a row the loader refuses. Arrays are float64 (NaN: missing or not a number);
    `submit_s` is seconds since time 0 of the file, sizes in GB with missing as 0. Rules
    that need the scenario (the horizon, the sites, the largest pool) are the loader's."""
    submit_s, gpus, work_gpu_h = (np.asarray(a, np.float64) for a in (submit_s, gpus, work_gpu_h))
    with np.errstate(invalid="ignore", divide="ignore"):
        whole = np.isfinite(gpus) & (gpus == np.floor(gpus))
        gpus_ok = whole & (gpus >= 1) & (gpus <= MAX_JOB_GPUS)
        work_ok = np.isfinite(work_gpu_h) & (work_gpu_h > 0)
        runtime_h = work_gpu_h / np.where(gpus_ok, gpus, 1.0)
        checks: list[JobValueCheck] = [
            (
                "submit_time",
                "submit_time must be a finite number of seconds >= 0",
                ~(np.isfinite(submit_s) & (submit_s >= 0)),
            ),
            ("gpus", f"gpus must be a positive integer, at most {MAX_JOB_GPUS:,}", ~gpus_ok),
            ("work_gpu_h", "work_gpu_h must be a positive number of GPU-hours", ~work_ok),
            (
                "work_gpu_h",
                f"work_gpu_h / gpus (the runtime on reference GPUs) must be at most "
                f"{MAX_JOB_RUNTIME_H:,.0f} h",
                gpus_ok & work_ok & (runtime_h > MAX_JOB_RUNTIME_H),
            ),
        ]
        for name, values in (("checkpoint_gb", checkpoint_gb), ("data_gb", data_gb)):
            v = np.asarray(values, np.float64)
            checks.append(
                (
                    name,
                    f"{name} must be a number >= 0 (GB), at most {MAX_JOB_DATA_GB:,.0f}",
                    ~(np.isfinite(v) & (v >= 0) & (v <= MAX_JOB_DATA_GB)),
                )
            )
    return checks


def site_mask(indices: Sequence[int]) -> int:
    """The `allowed_sites` bit mask of the sites with these indices (into scenario.sites)."""
    mask = 0
    for i in indices:
        if not 0 <= i < MAX_MASK_SITES:
            raise ValueError(f"allowed_sites can name sites 0..{MAX_MASK_SITES - 1}, got {i}")
        mask |= 1 << i
    return mask


def gpu_model_names(models: str) -> tuple[str, ...]:
    """The GPU models a `allowed_gpu_models` entry names, in its order; () for `ANY_GPU_MODEL`."""
    return tuple(models.split(MODELS_SEPARATOR)) if models else ()


def join_gpu_models(names: Iterable[str]) -> str:
    """The `allowed_gpu_models` entry of these model names: stripped, repeats dropped, in order;
    ValueError naming the first one `sim.models.hardware.GPU_CATALOG` does not know (or an empty
    name). No names: `ANY_GPU_MODEL`."""
    unique = dict.fromkeys(name.strip() for name in names)
    for name in unique:
        if name not in GPU_CATALOG:
            raise ValueError(f"unknown GPU model {name!r}")
    return MODELS_SEPARATOR.join(unique)


def mask_sites(mask: int, site_names: Iterable[str]) -> tuple[str, ...]:
    """The names of the sites an `allowed_sites` mask allows, in scenario order."""
    return tuple(name for i, name in enumerate(site_names) if (mask >> i) & 1)


_DTYPES: dict[str, Any] = {
    "job_id": object,
    "submit_s": np.float64,
    "gpus": np.int64,
    "work_gpu_h": np.float64,
    "profile": object,
    "deadline_s": np.float64,
    "interruptible": np.bool_,
    "checkpoint_gb": np.float64,
    "data_gb": np.float64,
    "origin_site": np.int64,
    "allowed_sites": np.int64,
    "allowed_gpu_models": object,
    "target_metric": np.float64,
    "training_u": np.float64,
    "gpu_milli": np.int64,
    "parallelism": object,
    "mig_profile": object,
    "vc": object,
    "user": object,
}


@dataclass(frozen=True, eq=False)
class JobTable:
    """All jobs of a run, columnar, sorted by submit_s (stable), index = internal job number.

    Every field is a 1-D numpy array of the same length. The constructor accepts
    sequences and losslessly convertible dtypes (e.g. int32 -> int64, str -> object),
    stores read-only views, and checks the invariants below (ValueError otherwise:
    user input is validated before, by the generator and the loader).
    """

    job_id: np.ndarray
    """str (object, or numpy `StringDType` as the synthetic generator makes it: no Python
    string per job), unique."""
    submit_s: np.ndarray
    """float64, submission time, seconds since the scenario start; >= 0, non-decreasing."""
    gpus: np.ndarray
    """int64 > 0, GPUs the job needs, all on one site (gang)."""
    work_gpu_h: np.ndarray
    """float64 > 0, reference GPU-hours (A100-80GB at max power limit), total over the GPUs."""
    profile: np.ndarray
    """str (object), keys of `sim.models.hardware.PROFILES`."""
    deadline_s: np.ndarray
    """float64, absolute, seconds since the scenario start, >= submit_s; NaN = no deadline."""
    interruptible: np.ndarray
    """bool, the job may be suspended (checkpointed) and resumed."""
    checkpoint_gb: np.ndarray
    """float64 >= 0, checkpoint size moved when the job resumes on another site, GB."""
    data_gb: np.ndarray
    """float64 >= 0, input data read from the origin site, GB."""
    origin_site: np.ndarray
    """int64 >= 0, index into `scenario.sites` of the site the job is submitted to."""
    # None may be given (every job may run anywhere): __post_init__ turns it into an array,
    # so the field's type is the array every reader sees.
    allowed_sites: np.ndarray = cast(np.ndarray, None)
    """int64 bit mask of the sites the job may run on (bit i: `scenario.sites[i]`; data
    residency); `ANY_SITE` (-1): anywhere. None: every job may run anywhere."""
    allowed_gpu_models: np.ndarray = cast(np.ndarray, None)
    """str (object), the GPU models the job may run on, catalog names joined by
    `MODELS_SEPARATOR` (e.g. "A100-80GB;H100-SXM"); `ANY_GPU_MODEL` (""): any model. None:
    every job may run on any model."""
    target_metric: np.ndarray = cast(np.ndarray, None)
    """float64: the metric a training job trains to (`sim.workload.time_to_accuracy`; its
    profile is then a batch-size profile, `resnet50@256`, and `work_gpu_h` the work of its
    drawn run); NaN: a job of fixed work. None: no job has a target."""
    training_u: np.ndarray = cast(np.ndarray, None)
    """float64 in [0, 1): a target job's draw of its training run in the Zeus train trace;
    NaN for the others. None: no job has a target."""
    gpu_milli: np.ndarray = cast(np.ndarray, None)
    """int64 in 1..1000, thousandths of one GPU the job holds (`sim.models.sharing`); below 1000
    only for a one-GPU job, which may then share its GPU with other fractional jobs; its
    `work_gpu_h` stays reference GPU-hours of a whole GPU. None: every job holds whole GPUs."""
    parallelism: np.ndarray = cast(np.ndarray, None)
    """str (object), how a multi-GPU job splits its work: one of `sim.models.scaling.SCHEMES`
    ("data", "tensor", "pipeline"); used with the scenario's `[scaling]`. None: all "data"."""
    mig_profile: np.ndarray = cast(np.ndarray, None)
    """str (object), the MIG profile (`sim.models.mig`, e.g. "3g.40gb") of the slice a one-GPU job
    of `gpu_milli` 1000 runs on, in a partitioned pool; "": whole GPUs (or a share of one).
    None: no job runs on a slice."""
    vc: np.ndarray = cast(np.ndarray, None)
    """str (object), the virtual cluster the job belongs to (a trace's team share of the
    machines; the scenario's `[virtual_clusters]` may cap its GPUs); "": none."""
    user: np.ndarray = cast(np.ndarray, None)
    """str (object), who submitted the job (a trace's user); "": unknown."""

    def __post_init__(self) -> None:
        defaults = {  # a column not given: every job's value, stored once
            "allowed_sites": (ANY_SITE, np.int64),
            "allowed_gpu_models": (ANY_GPU_MODEL, object),
            "target_metric": (np.nan, np.float64),
            "training_u": (np.nan, np.float64),
            "gpu_milli": (MILLI_PER_GPU, np.int64),
            "parallelism": ("data", object),
            "mig_profile": ("", object),
            "vc": ("", object),
            "user": ("", object),
        }
        for name, (value, dtype) in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, same_value_column(len(self.job_id), value, dtype))
        freeze_columns(self, _DTYPES)
        self._check_invariants()

    def _check_invariants(self) -> None:
        def require(ok: np.ndarray | bool, what: str, values: np.ndarray) -> None:
            if not np.all(ok):
                bad = np.flatnonzero(~np.asarray(ok))[0] if np.ndim(ok) else 0
                raise ValueError(f"JobTable: {what} (job {bad}: {values[bad]!r})")

        if len(self) == 0:
            return
        submit = self.submit_s
        require(np.isfinite(submit) & (submit >= 0), "submit_s must be finite, >= 0", submit)
        if np.any(np.diff(self.submit_s) < 0):
            raise ValueError("JobTable: submit_s must be sorted (non-decreasing)")
        require(self.gpus > 0, "gpus must be > 0", self.gpus)
        work_ok = np.isfinite(self.work_gpu_h) & (self.work_gpu_h > 0)
        require(work_ok, "work_gpu_h must be > 0", self.work_gpu_h)
        dl = self.deadline_s
        require(np.isnan(dl) | (dl >= self.submit_s), "deadline_s must be >= submit_s or NaN", dl)
        for name in ("checkpoint_gb", "data_gb"):
            col = getattr(self, name)
            require(np.isfinite(col) & (col >= 0), f"{name} must be >= 0", col)
        require(self.origin_site >= 0, "origin_site must be >= 0", self.origin_site)
        require(self.allowed_sites != 0, "allowed_sites must name a site", self.allowed_sites)
        unknown_schemes = set(pd.unique(self.parallelism)) - set(SCHEMES)
        if unknown_schemes:
            raise ValueError(f"JobTable: unknown parallelism {sorted(map(str, unknown_schemes))}")
        milli = self.gpu_milli
        require((milli >= 1) & (milli <= MILLI_PER_GPU), "gpu_milli must be in 1..1000", milli)
        require(
            (milli == MILLI_PER_GPU) | (self.gpus == 1),
            "gpu_milli below 1000 needs gpus = 1",
            milli,
        )
        sliced = self.mig_profile != ""
        unknown_mig = set(pd.unique(self.mig_profile[sliced])) - set(mig.profile_names())
        if unknown_mig:
            raise ValueError(f"JobTable: unknown mig_profile {sorted(map(str, unknown_mig))}")
        require(
            ~sliced | ((self.gpus == 1) & (milli == MILLI_PER_GPU)),
            "mig_profile needs gpus = 1 and gpu_milli 1000",
            self.mig_profile,
        )
        unknown = set(pd.unique(self.profile)) - PROFILES.keys()
        if unknown:
            raise ValueError(f"JobTable: unknown profiles {sorted(map(str, unknown))}")
        for models in pd.unique(self.allowed_gpu_models):
            try:
                canonical = join_gpu_models(gpu_model_names(models))
            except (AttributeError, ValueError) as e:
                raise ValueError(f"JobTable: allowed_gpu_models {models!r}: {e}") from None
            if canonical != models:
                raise ValueError(
                    f"JobTable: allowed_gpu_models {models!r} must be written {canonical!r}"
                )
        targets = np.isfinite(self.target_metric)
        require(
            np.isfinite(self.training_u) == targets,
            "training_u must be given exactly for the jobs with a target_metric",
            self.training_u,
        )
        for p in pd.unique(self.profile[targets]):
            if split_batch_profile(p) is None:
                raise ValueError(
                    f"JobTable: a target job's profile must name its batch size: {p!r}"
                )
        if not pd.Index(self.job_id).is_unique:
            dup = pd.Index(self.job_id).duplicated()
            raise ValueError(f"JobTable: job_id must be unique, repeated: {self.job_id[dup][0]!r}")

    @classmethod
    def empty(cls) -> JobTable:
        """A table of no jobs (a scenario without a `[workload]`)."""
        return cls(
            **{f.name: np.empty(0, _DTYPES[f.name]) for f in fields(cls) if f.default is MISSING}
        )

    def __len__(self) -> int:
        return len(self.job_id)

    def gpu_models_of(self, j: int) -> tuple[str, ...]:
        """The GPU models job `j` may run on, in the order of its entry; () for any."""
        return gpu_model_names(self.allowed_gpu_models[j])

    def equals(self, other: JobTable) -> bool:
        """Whether both tables hold the same jobs in the same order (NaN equals NaN)."""
        return all(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            for a, b in ((getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
        )

    def to_frame(self, site_names: Sequence[str]) -> pd.DataFrame:
        """The jobs in the native job format (columns `COLUMNS`), one row per job.

        Times are numbers of seconds since the scenario start (`submit_time`, `deadline`;
        NaN = no deadline), `origin_site` is the site's name, `allowed_sites` the names
        joined by ";" (empty: any site) and `allowed_gpu_models` as stored (empty: any model);
        a job with a `target_metric` has no `work_gpu_h` (the loader derives it again), so
        that `frame.to_csv(path, index=False)` or `frame.to_parquet(path)` writes a file
        that `load_job_file` reads back unchanged.
        """
        names = np.asarray(list(site_names), dtype=object)
        if len(self) and (len(names) == 0 or self.origin_site.max() >= len(names)):
            raise ValueError(
                f"origin_site {self.origin_site.max()} out of range for {len(names)} site names"
            )
        return pd.DataFrame(
            {
                "job_id": self.job_id,
                "submit_time": self.submit_s,
                "gpus": self.gpus,
                "work_gpu_h": np.where(np.isfinite(self.target_metric), np.nan, self.work_gpu_h),
                "profile": self.profile,
                "deadline": self.deadline_s,
                "interruptible": self.interruptible,
                "checkpoint_gb": self.checkpoint_gb,
                "data_gb": self.data_gb,
                "origin_site": names[self.origin_site] if len(self) else np.empty(0, object),
                "allowed_sites": [
                    "" if m == ANY_SITE else SITES_SEPARATOR.join(mask_sites(m, names))
                    for m in self.allowed_sites.tolist()
                ],
                "allowed_gpu_models": self.allowed_gpu_models,
                "target_metric": self.target_metric,
                "gpu_milli": self.gpu_milli,
                "parallelism": self.parallelism,
                "mig_profile": self.mig_profile,
                "vc": self.vc,
                "user": self.user,
            },
            columns=list(COLUMNS),
        )
