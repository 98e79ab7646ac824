"""Columnar tables: one read-only numpy array per field, checked and converted once.

`JobTable` (`sim.workload.table`) and `RequestTable` (`sim.serving.requests`) are frozen
dataclasses whose fields are columns; `freeze_columns` turns what they were given into
typed, read-only, equally long arrays. A text column (dtype object) may instead be given
as numpy's `StringDType`, which it keeps: 16 bytes an entry for a text of up to 15 bytes,
and no Python string per entry (a million generated job ids: 16 MB, not 61 MB). Indexing
one entry gives a `str` either way; `text_array` turns such a column into pandas' `str`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

__all__ = ["freeze_columns", "same_value_column", "stored_once", "text_array"]

_ACCEPTED_KINDS = {object: "OUT", np.float64: "fiu", np.int64: "iu", np.bool_: "b"}
"""Per column dtype, the dtype kinds it accepts (converted without loss; a text column's
`StringDType`, kind "T", kept as it is)."""


def freeze_columns(table: Any, dtypes: dict[str, Any]) -> None:
    """Replace each dataclass field of `table` with a read-only 1-D array of its dtype in
    `dtypes`; ValueError/TypeError naming the table and field if one cannot be, or if the
    columns differ in length."""
    name = type(table).__name__
    n: int | None = None
    first = ""
    for f in fields(table):
        arr = _as_column(name, f.name, getattr(table, f.name), dtypes[f.name])
        object.__setattr__(table, f.name, arr)
        if n is None:
            n, first = len(arr), f.name
        elif len(arr) != n:
            raise ValueError(f"{name}.{f.name} has {len(arr)} entries, {first} has {n}")


def same_value_column(n: int, value: Any, dtype: Any = None) -> np.ndarray:
    """A read-only column of `n` entries, each `value` (of `dtype`, None: numpy's choice),
    that stores the value once (a view of stride 0): a column every job of a generated
    workload shares costs 8 bytes, not 8 MB a million jobs. It reads as any other column."""
    return np.broadcast_to(np.array(value, dtype), (n,))


def stored_once(column: Any) -> Any:
    """`column` as a `same_value_column` if it is a 1-D numpy array of numbers or booleans
    whose entries are all the same bits (all NaN, all 0.0: not -0.0 among them), so that it
    costs 8 bytes and not 8 MB a million rows; any other column as it is."""
    if (
        not isinstance(column, np.ndarray)
        or column.ndim != 1
        or len(column) < 2
        or column.dtype.kind not in "biuf"
        or column.strides[0] == 0
    ):
        return column
    bits = column.view(f"u{column.dtype.itemsize}")
    if not (bits == bits[0]).all():
        return column
    return same_value_column(len(column), column[0], column.dtype)


def text_array(column: np.ndarray) -> pd.api.extensions.ExtensionArray | np.ndarray:
    """A text column (`StringDType`) as pandas' `str` array (Arrow), what a table makes of an
    object column of texts, built from the column's bytes, not from a Python string per
    entry; an object column as it is (a table infers its type), and an empty one as an
    empty object column (what a table of no jobs had before: no text to infer from)."""
    if column.dtype.kind != "T":
        return column
    if len(column) == 0:
        return np.empty(0, dtype=object)
    return pd.array(pa.array(column, type=pa.large_string()), dtype="str")


def _as_column(table: str, name: str, value: Any, dtype: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{table}.{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in _ACCEPTED_KINDS[dtype]:
        raise TypeError(f"{table}.{name} must have dtype {np.dtype(dtype)}, got {arr.dtype}")
    if arr.dtype != np.dtype(dtype) and not (dtype is object and arr.dtype.kind == "T"):
        if arr.size and dtype is not object and not np.can_cast(arr.dtype, dtype, "safe"):
            raise TypeError(f"{table}.{name}: cannot convert {arr.dtype} to {np.dtype(dtype)}")
        arr = arr.astype(dtype)
    view = arr.view()
    view.flags.writeable = False
    return view
