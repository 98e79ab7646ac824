"""The native job format (CSV, gzipped CSV or Parquet; docs/job-format.md), validated
column-wise; the first bad row is reported as `file:line: message` and raised as `TraceError`."""

from __future__ import annotations

import csv
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from gzip import open as gzip_open
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from sim.config.sites import Site
from sim.errors import TraceError
from sim.models import mig
from sim.models.hardware import GPU_CATALOG, PROFILES, profile_choices
from sim.models.scaling import SCHEMES
from sim.models.sharing import MILLI_PER_GPU
from sim.util.text import check_text_file
from sim.workload.table import (
    ANY_GPU_MODEL,
    ANY_SITE,
    COLUMNS,
    MAX_JOB_RUNTIME_H,
    MAX_MASK_SITES,
    MODELS_SEPARATOR,
    OPTIONAL_DEFAULTS,
    REQUIRED_COLUMNS,
    SITES_SEPARATOR,
    JobTable,
    job_value_checks,
    join_gpu_models,
    site_mask,
)
from sim.workload.time_to_accuracy import resolve_targets, training_draws


def load_job_file(
    path: str | Path,
    sites: Sequence[Site],
    start: datetime,
    duration_h: float,
    seed: int,
    oversized: str = "error",
) -> JobTable:
    """Read a job file in the native format (docs/job-format.md) for a run of `duration_h`
    from `start` on the scenario's `sites`; `seed`: the scenario's (the work of jobs with
    a training target); `oversized`: `workload.oversized`, whether a job larger than every
    pool is an error ("error") or kept to be rejected at arrival ("reject").

    `.csv` and `.csv.gz` are read as CSV, `.parquet` as Parquet. Numeric times are seconds
    since `start`; string times are ISO-8601 datetimes with a UTC offset. Every
    column is validated with vector operations; the first bad row (in file order) raises
    `TraceError("file:line: message")` (Parquet: "file: row N: message", rows counted
    from 1). The table is sorted by submit time (stable).
    """
    raw, where = _read_any(Path(path))
    return _parse(raw, where, sites, start, duration_h, seed, oversized)


def read_job_frame(path: str | Path) -> pd.DataFrame:
    """The cells of a native job file as read, its columns checked and the numbers every
    job obeys whatever the scenario (`job_value_checks`: GPU count, work, sizes) validated;
    `TraceError("file:line: message")` for the first bad row, as `load_job_file` reports it.
    The rest needs the scenario (horizon, sites, GPU pools) and is `load_job_file`'s."""
    raw, where = _read_any(Path(path))
    checks: list[_Check] = []
    n = len(raw)
    work = _numbers(raw["work_gpu_h"])[0] if "work_gpu_h" in raw.columns else np.full(n, np.nan)
    if "target_metric" in raw.columns:
        # a target's work comes from the scenario's seed: the loader derives and checks it
        work[~_numbers(raw["target_metric"])[1]] = 1.0
    _job_values(raw, np.zeros(n), work, checks)
    _raise_first(checks, where)
    return raw


def _read_any(path: Path) -> tuple[pd.DataFrame, _Where]:
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return _read_csv(path, gzip=name.endswith(".gz"))
    if name.endswith(".parquet"):
        return _read_parquet(path)
    raise TraceError(f"{path}: unknown job file type; use .csv, .csv.gz or .parquet")


@dataclass(frozen=True)
class _Where:
    """Names places in a job file: CSV lines (header = line 1) or Parquet rows (from 1)."""

    path: Path
    labels: np.ndarray  # per data row: line number (CSV) or row number (Parquet)
    csv: bool

    def header(self) -> str:
        return f"{self.path}:1" if self.csv else str(self.path)

    def row(self, i: int) -> str:
        return f"{self.path}:{self.labels[i]}" if self.csv else f"{self.path}: row {self.labels[i]}"

    def ref(self, i: int) -> str:
        return f"line {self.labels[i]}" if self.csv else f"row {self.labels[i]}"


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:  # not the path again
        return e.strerror
    return " ".join(str(e).split()) or type(e).__name__


def _read_csv(path: Path, gzip: bool) -> tuple[pd.DataFrame, _Where]:
    # Every cell is read as a string (the header too: repeated names stay visible) and
    # blank lines are kept, so that row k of `table` is line k + 1 of the file.
    try:  # one encoding check for every text file a user gives (sim.util.text)
        check_text_file(path, "job")
    except (OSError, EOFError, zlib.error) as e:
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None
    arrow_error = ""
    try:
        table = _read_csv_arrow(path, gzip)
    except (OSError, EOFError, ValueError, pa.ArrowException) as e:
        # pandas' parser is slower but names the line of a malformed row; it also
        # explains unreadable and empty files
        arrow_error = str(e)
        table = _read_csv_pandas(path, gzip)
    header = [str(c).strip() for c in table.iloc[0].tolist()]
    _check_columns(header, f"{path}:1")
    _refuse_short_rows(path, gzip, arrow_error)
    # first line of each record: one per record, plus the newlines inside quoted values
    newlines = sum(table[c].str.count("\n").to_numpy() for c in table.columns)
    first_line = 1 + np.arange(len(table)) + np.concatenate(([0], np.cumsum(newlines)[:-1]))
    data = table.iloc[1:].set_axis(header, axis=1)
    data = data.apply(lambda c: c.str.strip())
    filled = (data != "").any(axis=1).to_numpy()
    lines = first_line[1:][filled]
    data = data[filled].reset_index(drop=True)
    if data.empty:
        raise TraceError(f"{path}: the file is empty (a header, no jobs)")
    return data, _Where(path, lines, csv=True)


def _refuse_short_rows(path: Path, gzip: bool, arrow_error: str) -> None:
    """TraceError naming the first row with fewer fields than the header, if Arrow's error
    says there is one: pandas would pad it with empty cells, and a missing comma must not
    shift a job's values into the wrong columns unnoticed."""
    found = re.search(r"Expected (\d+) columns, got (\d+)", arrow_error)
    if found is None or int(found[2]) >= int(found[1]):
        return
    opener = gzip_open if gzip else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f)
        want = len(next(rows, []))
        for row in rows:
            if len(row) < want and any(cell.strip() for cell in row):  # blank lines pass
                raise TraceError(
                    f"{path}:{rows.line_num}: expected {want} fields like the header, "
                    f"got {len(row)}"
                )


def _read_csv_arrow(path: Path, gzip: bool) -> pd.DataFrame:
    with pa.input_stream(str(path), compression="gzip" if gzip else None) as stream:
        table = pa_csv.read_csv(
            stream,
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True),
            parse_options=pa_csv.ParseOptions(ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(
                column_types={f"f{i}": pa.string() for i in range(64)},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    frame = table.to_pandas()
    if not all(dtype == "str" for dtype in frame.dtypes):
        raise ValueError("not all columns read as text")  # let the pandas reader handle it
    return frame


def _read_csv_pandas(path: Path, gzip: bool) -> pd.DataFrame:
    try:
        return pd.read_csv(
            path,
            header=None,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
            compression="gzip" if gzip else None,
            encoding="utf-8",
        )
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as e:
        ragged = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if ragged:
            want, line, got = ragged.groups()
            raise TraceError(
                f"{path}:{line}: expected {want} fields like the header, got {got}"
            ) from None
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None
    except (OSError, EOFError, ValueError, zlib.error) as e:  # gzip errors
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None


def _read_parquet(path: Path) -> tuple[pd.DataFrame, _Where]:
    try:
        data = pd.read_parquet(path)
    except (OSError, EOFError, ValueError, pa.ArrowException) as e:
        raise TraceError(f"{path}: cannot read job file: {_one_line(e)}") from None
    data = data.reset_index(drop=True)
    _check_columns([str(c) for c in data.columns], str(path))
    if data.empty:
        raise TraceError(f"{path}: the file is empty (no jobs)")
    for name in data.columns:
        if not _is_typed(data[name]):
            data[name] = _text(data[name])
    return data, _Where(path, np.arange(1, len(data) + 1), csv=False)


def _check_columns(header: list[str], where: str) -> None:
    seen: set[str] = set()
    for c in header:
        if c in seen:
            raise TraceError(f"{where}: column {c!r} appears more than once")
        seen.add(c)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if "work_gpu_h" not in seen and "target_metric" not in seen:
        missing.append("work_gpu_h")
    if missing:
        raise TraceError(
            f"{where}: missing required column(s) {', '.join(map(repr, missing))} "
            f"(columns present: {', '.join(header) or 'none'})"
        )
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise TraceError(
            f"{where}: unknown column {unknown[0]!r}; the job format's columns are "
            f"{', '.join(COLUMNS)}"
        )


# Column parsing. Every parser takes a column as read (CSV: stripped strings; Parquet:
# any dtype) and returns arrays; every check is a boolean mask of bad rows plus a message
# for one row. The first bad row in file order is reported.

_Check = tuple[np.ndarray, Callable[[int], str]]

_ISO_WITH_OFFSET = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[Zz]|[+-]\d\d(?::?\d\d)?)"
_ISO_NAIVE = r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?"
_TRUE = ("true", "1")
_FALSE = ("false", "0")


def _is_typed(col: pd.Series) -> bool:
    """Whether a column holds numbers, booleans or timestamps rather than text."""
    return pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_datetime64_any_dtype(
        col.dtype
    )


def _text(col: pd.Series) -> pd.Series:
    """The column as stripped strings, missing values as "" (text columns come so)."""
    if col.dtype == "str" and not col.hasnans:
        return col
    return col.astype(object).where(col.notna(), "").astype(str).str.strip()


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _numbers(col: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as float64 with NaN where missing or bad, missing mask, not-a-number mask)."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = np.array(col.to_numpy(dtype=np.float64, na_value=np.nan))  # writable copy
        return values, np.isnan(values), np.zeros(len(col), bool)
    text = _text(col)
    missing = (text == "").to_numpy()
    filled = text[~missing] if missing.any() else text
    try:  # fast path: Arrow's exact parser, all-or-nothing
        parsed = pc.cast(pa.array(filled), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowException, TypeError, ValueError):
        parsed = pd.to_numeric(filled, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    values = np.full(len(text), np.nan)
    values[~missing] = parsed
    return values, missing, ~missing & np.isnan(values)


def _times(
    col: pd.Series, name: str, start: pd.Timestamp, where: _Where
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(seconds since start, missing mask, unparseable mask, no-UTC-offset mask)."""
    n = len(col)
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        seconds = np.array(
            ((col - start) / pd.Timedelta(seconds=1)).to_numpy(np.float64, na_value=np.nan)
        )
        no = np.zeros(n, bool)
        return seconds, np.isnan(seconds), no, no
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        raise TraceError(
            f"{where.header()}: column {name!r} holds timestamps without a time zone "
            f"({col.dtype}); store them in UTC (e.g. timestamp[us, tz=UTC]) or as seconds"
        )
    seconds, missing, bad = _numbers(col)
    naive = np.zeros(n, bool)
    if bad.any():
        text = _text(col)[bad]
        dated = text.str.fullmatch(_ISO_WITH_OFFSET).to_numpy(dtype=bool, na_value=False)
        parsed = pd.to_datetime(text[dated], format="ISO8601", utc=True, errors="coerce")
        sub = np.full(len(text), np.nan)
        sub[dated] = ((parsed - start) / pd.Timedelta(seconds=1)).to_numpy(
            np.float64, na_value=np.nan
        )
        seconds[bad] = sub
        naive[bad] = ~dated & text.str.fullmatch(_ISO_NAIVE).to_numpy(dtype=bool, na_value=False)
        bad = bad & np.isnan(seconds) & ~naive
    return seconds, missing, bad, naive


def _booleans(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, bad mask); missing values are False."""
    if pd.api.types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=bool, na_value=False), np.zeros(len(col), bool)
    if pd.api.types.is_numeric_dtype(col.dtype):
        v = col.to_numpy(dtype=np.float64, na_value=0.0)
        return v == 1.0, ~np.isin(v, (0.0, 1.0))
    text = _text(col).str.lower()
    true = text.isin(_TRUE).to_numpy()
    return true, ~(true | text.isin(_FALSE + ("",)).to_numpy())


def _parse(
    raw: pd.DataFrame,
    where: _Where,
    site_configs: Sequence[Site],
    run_start: datetime,
    duration_h: float,
    seed: int,
    oversized: str,
) -> JobTable:
    n = len(raw)
    sites = [s.name for s in site_configs]
    start = pd.Timestamp(run_start).tz_convert("UTC")
    horizon_s = duration_h * 3600.0
    end = run_start + timedelta(hours=duration_h)
    largest = max(s.max_pool_gpus for s in site_configs)
    checks: list[_Check] = []

    def shown(name: str, i: int) -> str:
        return _shown(raw, name, i)

    def check(mask: np.ndarray, message: Callable[[int], str]) -> None:
        checks.append((np.asarray(mask, dtype=bool), message))

    def column(name: str) -> pd.Series | None:
        return raw[name] if name in raw.columns else None

    # job_id
    ids = _text(raw["job_id"])
    id_missing = (ids == "").to_numpy()
    check(id_missing, lambda i: "job_id is required, got an empty value")
    dup = ids.duplicated(keep="first").to_numpy() & ~id_missing

    def dup_message(i: int) -> str:
        first = int(np.flatnonzero((ids == ids.iloc[i]).to_numpy())[0])
        return f"duplicate job_id {ids.iloc[i]!r} (first on {where.ref(first)})"

    check(dup, dup_message)

    # submit_time
    time_help = "seconds since the scenario start or an ISO-8601 datetime with UTC offset"
    submit_s, s_missing, s_bad, s_naive = _times(raw["submit_time"], "submit_time", start, where)
    check(s_missing, lambda i: "submit_time is required, got an empty value")
    check(s_bad, lambda i: f"submit_time must be {time_help}, got {shown('submit_time', i)}")
    check(
        s_naive,
        lambda i: (
            "submit_time must carry a UTC offset (e.g. 2020-06-01T00:00:00Z), "
            f"got {shown('submit_time', i)}"
        ),
    )
    outside = ~np.isnan(submit_s) & ~((submit_s >= 0) & (submit_s < horizon_s))
    check(
        outside,
        lambda i: (
            f"submit_time must be within the scenario's horizon [0, {horizon_s:.12g}) s "
            f"= [{start.isoformat()}, {end.isoformat()}), got {shown('submit_time', i)}"
            + ("" if _is_number(raw["submit_time"].iloc[i]) else f" = {submit_s[i]:.12g} s")
        ),
    )

    # profile
    if (col := column("profile")) is not None:
        profile = _text(col).replace("", OPTIONAL_DEFAULTS["profile"])
        known = profile_choices()
        check(
            ~profile.isin(list(PROFILES)).to_numpy(),
            lambda i: f"profile must be one of {known}, got {shown('profile', i)}",
        )
        codes, uniques = pd.factorize(profile)  # one str object per distinct profile
        profile_arr = np.asarray(uniques, dtype=object)[codes]
    else:
        profile_arr = np.full(n, OPTIONAL_DEFAULTS["profile"], dtype=object)

    # work_gpu_h or target_metric
    work, target, training_u = _work(raw, ids, profile_arr, seed, check)

    # gpus, work_gpu_h, checkpoint_gb, data_gb: the rules importers share
    gpus_f, sizes = _job_values(raw, submit_s, work, checks)
    if oversized == "error":
        mig_col = column("mig_profile")  # a job on a MIG slice needs no pool of whole GPUs
        on_slice = False if mig_col is None else (_text(mig_col) != "").to_numpy()
        check(
            (gpus_f > largest) & ~on_slice,  # False where NaN
            lambda i: (
                f"gpus must be at most {largest} (the largest GPU pool of any site), "
                f'got {shown("gpus", i)}; or set workload.oversized = "reject"'
            ),
        )

    # deadline
    if (col := column("deadline")) is not None:
        deadline_s, _, d_bad, d_naive = _times(col, "deadline", start, where)
        check(
            d_bad,
            lambda i: f"deadline must be empty (none) or {time_help}, got {shown('deadline', i)}",
        )
        check(
            d_naive,
            lambda i: (
                "deadline must carry a UTC offset (e.g. 2020-06-01T00:00:00Z), "
                f"got {shown('deadline', i)}"
            ),
        )
        check(
            np.isinf(deadline_s),
            lambda i: f"deadline must be finite, got {shown('deadline', i)}",
        )
        check(
            deadline_s - submit_s > MAX_JOB_RUNTIME_H * 3600.0,  # False where either is NaN
            lambda i: (
                f"deadline must be at most {MAX_JOB_RUNTIME_H:,.0f} h after submit_time "
                f"({shown('submit_time', i)}), got {shown('deadline', i)}"
            ),
        )
        check(
            deadline_s < submit_s,  # False where either is NaN
            lambda i: (
                f"deadline must not be before submit_time ({shown('submit_time', i)}), "
                f"got {shown('deadline', i)}"
            ),
        )
    else:
        deadline_s = np.full(n, np.nan)

    # interruptible
    if (col := column("interruptible")) is not None:
        interruptible, i_bad = _booleans(col)
        check(
            i_bad,
            lambda i: (
                "interruptible must be true, false, 1 or 0 (empty = false), "
                f"got {shown('interruptible', i)}"
            ),
        )
    else:
        interruptible = np.zeros(n, bool)

    # origin_site
    if (col := column("origin_site")) is not None:
        origin_names = _text(col)
        origin = pd.Index(sites).get_indexer(origin_names)
        origin[(origin_names == "").to_numpy()] = 0
        check(
            origin < 0,
            lambda i: (
                f"origin_site must be one of the scenario's sites ({', '.join(sites)}), "
                f"got {shown('origin_site', i)}"
            ),
        )
    else:
        origin = np.zeros(n, np.int64)

    # allowed_sites
    if (col := column("allowed_sites")) is not None:
        allowed, a_bad = _site_masks(_text(col), sites)
        check(
            a_bad,
            lambda i: (
                f"allowed_sites must be site names separated by {SITES_SEPARATOR!r} from "
                f"{', '.join(sites)} (empty = any site), got {shown('allowed_sites', i)}"
            ),
        )
    else:
        allowed = np.full(n, ANY_SITE, np.int64)

    # allowed_gpu_models
    if (col := column("allowed_gpu_models")) is not None:
        models, m_bad = _gpu_model_lists(_text(col))
        check(
            m_bad,
            lambda i: (
                f"allowed_gpu_models must be GPU models separated by {MODELS_SEPARATOR!r} from the "
                f"catalog ({', '.join(GPU_CATALOG)}) (empty = any model), "
                f"got {shown('allowed_gpu_models', i)}"
            ),
        )
    else:
        models = np.full(n, ANY_GPU_MODEL, dtype=object)

    # gpu_milli
    if (col := column("gpu_milli")) is not None:
        milli, milli_missing, _ = _numbers(col)
        milli[milli_missing] = MILLI_PER_GPU
        whole_milli = np.isfinite(milli) & (milli == np.floor(milli))
        check(
            ~(whole_milli & (milli >= 1) & (milli <= MILLI_PER_GPU)),
            lambda i: (
                "gpu_milli must be an integer in 1..1000 (thousandths of one GPU; empty = "
                f"1000, whole GPUs), got {shown('gpu_milli', i)}"
            ),
        )
        check(
            (milli < MILLI_PER_GPU) & (gpus_f != 1),  # False where NaN
            lambda i: (
                f"gpu_milli below 1000 needs gpus = 1 (a share of one GPU), got gpu_milli "
                f"{shown('gpu_milli', i)} with gpus {shown('gpus', i)}"
            ),
        )
    else:
        milli = np.full(n, float(MILLI_PER_GPU))

    # parallelism
    if (col := column("parallelism")) is not None:
        schemes = _text(col).replace("", OPTIONAL_DEFAULTS["parallelism"])
        check(
            ~schemes.isin(list(SCHEMES)).to_numpy(),
            lambda i: (
                f"parallelism must be one of {', '.join(SCHEMES)} (empty = data), "
                f"got {shown('parallelism', i)}"
            ),
        )
        scheme_arr = schemes.to_numpy(dtype=object)
    else:
        scheme_arr = np.full(n, OPTIONAL_DEFAULTS["parallelism"], dtype=object)

    # mig_profile
    if (col := column("mig_profile")) is not None:
        mig_arr = _text(col).to_numpy(dtype=object)
        names = mig.profile_names()
        check(
            (mig_arr != "") & ~np.isin(mig_arr, names),
            lambda i: (
                f"mig_profile must be a MIG profile ({', '.join(names)}; empty = whole GPUs), "
                f"got {shown('mig_profile', i)}"
            ),
        )
        check(
            (mig_arr != "") & ((gpus_f != 1) | (milli != MILLI_PER_GPU)),
            lambda i: (
                f"mig_profile needs gpus = 1 and gpu_milli 1000 (one slice), got mig_profile "
                f"{shown('mig_profile', i)} with gpus {shown('gpus', i)} and gpu_milli "
                f"{'1000' if column('gpu_milli') is None else shown('gpu_milli', i)}"
            ),
        )
    else:
        mig_arr = np.full(n, OPTIONAL_DEFAULTS["mig_profile"], dtype=object)

    # vc, user: any text (spaces around removed), empty = none
    vc, user = (
        _text(raw[name]).to_numpy(dtype=object) if name in raw.columns else np.full(n, "", object)
        for name in ("vc", "user")
    )

    _raise_first(checks, where)

    order = np.argsort(submit_s, kind="stable")
    return JobTable(
        job_id=ids.to_numpy(dtype=object)[order],
        submit_s=submit_s[order],
        gpus=gpus_f[order].astype(np.int64),
        work_gpu_h=work[order],
        profile=profile_arr[order],
        deadline_s=deadline_s[order],
        interruptible=interruptible[order],
        checkpoint_gb=sizes["checkpoint_gb"][order],
        data_gb=sizes["data_gb"][order],
        origin_site=origin[order].astype(np.int64),
        allowed_sites=allowed[order],
        allowed_gpu_models=models[order],
        target_metric=target[order],
        training_u=training_u[order],
        gpu_milli=milli[order].astype(np.int64),
        parallelism=scheme_arr[order],
        mig_profile=mig_arr[order],
        vc=vc[order],
        user=user[order],
    )


def _shown(raw: pd.DataFrame, name: str, i: int) -> str:
    """Cell `name` of row i as the user wrote it (repr, at most 80 characters)."""
    value = raw[name].iloc[i]
    value = value.item() if isinstance(value, np.generic) else value
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _work(
    raw: pd.DataFrame,
    ids: pd.Series,
    profile: np.ndarray,
    seed: int,
    check: Callable[[np.ndarray, Callable[[int], str]], None],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(work_gpu_h, target_metric, training_u) per row: `work_gpu_h` as given, or derived
    from `target_metric` (`sim.workload.time_to_accuracy`; `profile` becomes the batch-size
    profile it trains, in place). Exactly one of the two per row."""
    n = len(raw)
    work = _numbers(raw["work_gpu_h"])[0] if "work_gpu_h" in raw.columns else np.full(n, np.nan)
    target = np.full(n, np.nan)
    if "target_metric" not in raw.columns:
        return work, target, target.copy()
    target, t_missing, t_bad = _numbers(raw["target_metric"])
    check(
        t_bad | np.isinf(target),
        lambda i: f"target_metric must be a number, got {_shown(raw, 'target_metric', i)}",
    )
    w_missing = _numbers(raw["work_gpu_h"])[1] if "work_gpu_h" in raw.columns else np.ones(n, bool)
    check(
        ~t_missing & ~w_missing,
        lambda i: "give work_gpu_h or target_metric, not both (the target sets the work)",
    )
    target = np.where(np.isfinite(target) & w_missing, target, np.nan)
    draws = np.full(n, np.nan)  # drawn for the target rows only (an id's draw is its own)
    aimed = np.isfinite(target)
    draws[aimed] = training_draws(seed, ids.to_numpy(dtype=object)[aimed])
    jobs = resolve_targets(profile, target, draws)
    check(
        jobs.problem != "",
        lambda i: f"target_metric {_shown(raw, 'target_metric', i)}: {jobs.problem[i]}",
    )
    has_target = np.isfinite(jobs.work_gpu_h)
    profile[has_target] = jobs.profile[has_target]
    return np.where(has_target, jobs.work_gpu_h, work), target, jobs.training_u


def _job_values(
    raw: pd.DataFrame, submit_s: np.ndarray, work: np.ndarray, checks: list[_Check]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """gpus and the sizes (checkpoint_gb, data_gb; missing = 0) as float64, with
    `job_value_checks` of them and of `work` (work_gpu_h) appended to `checks` (the rules
    the importers share)."""
    gpus, _, _ = _numbers(raw["gpus"])
    sizes: dict[str, np.ndarray] = {}
    for name in ("checkpoint_gb", "data_gb"):
        values = np.zeros(len(raw))
        if name in raw.columns:
            values, missing, _ = _numbers(raw[name])
            values[missing] = 0.0
        sizes[name] = values
    for name, rule, bad in job_value_checks(
        submit_s, gpus, work, sizes["checkpoint_gb"], sizes["data_gb"]
    ):

        def message(i: int, name: str = name, rule: str = rule) -> str:
            return f"{rule}, got {_shown(raw, name, i)}"

        checks.append((bad, message))
    return gpus, sizes


def _site_masks(names: pd.Series, sites: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(`allowed_sites` bit masks, bad cells) of a column of ";"-separated site names; an
    empty cell allows any site. A cell naming an unknown site, or no site, is bad."""
    index = {name: i for i, name in enumerate(sites[:MAX_MASK_SITES])}
    by_text: dict[str, int] = {"": ANY_SITE}
    for text in pd.unique(names):
        if text in by_text:
            continue
        parts = [p.strip() for p in text.split(SITES_SEPARATOR)]
        ok = all(p in index for p in parts)
        by_text[text] = site_mask([index[p] for p in parts]) if ok else 0
    masks = names.map(by_text).to_numpy(np.int64)
    return masks, masks == 0


def _gpu_model_lists(cells: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(`allowed_gpu_models` entries, bad cells) of a column of ";"-separated GPU models (as
    `allowed_sites` separates sites); an empty cell allows any model. A cell naming a
    model the catalog does not know is bad."""
    by_text: dict[str, str | None] = {}
    for text in pd.unique(cells):
        try:
            by_text[text] = join_gpu_models(text.split(MODELS_SEPARATOR)) if text else ANY_GPU_MODEL
        except ValueError:
            by_text[text] = None
    entries = cells.map(by_text).to_numpy(dtype=object)
    bad = pd.isna(entries)
    entries[bad] = ANY_GPU_MODEL
    return entries, bad


def _raise_first(checks: list[_Check], where: _Where) -> None:
    """Raise TraceError for the first bad row; on that row, the first failing check."""
    first_row, first_check = None, None
    for mask, message in checks:
        if mask.any():
            i = int(np.argmax(mask))
            if first_row is None or i < first_row:
                first_row, first_check = i, message
    if first_row is None or first_check is None:
        return
    bad_rows = int(np.logical_or.reduce([m for m, _ in checks]).sum())
    more = f" [and {bad_rows - 1} more bad row(s)]" if bad_rows > 1 else ""
    raise TraceError(f"{where.row(first_row)}: {first_check(first_row)}{more}")
