"""Small CSV input files named by a scenario (failure traces, throughput tables): their
rows, or one-line errors naming the scenario key, the file and the line."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sim.errors import ScenarioError
from sim.util.text import not_utf8

__all__ = ["csv_rows"]


def csv_rows(
    path: Path, where: str, what: str, header: tuple[str, ...]
) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank data row of the CSV file `path`, whose first
    line must be `header`. ScenarioError starting with `where` (the scenario key and the
    file) for a file that cannot be read as UTF-8 CSV (`what` names it) or another header."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ScenarioError(f"{where}: cannot read {what} ({e})") from None
    why = not_utf8(data)
    if why is not None:
        raise ScenarioError(f"{where}: {what} files are UTF-8 text; {why}")
    try:
        text = io.StringIO(data.decode("utf-8-sig"), newline="")
        rows = list(enumerate(csv.reader(text), start=1))
    except csv.Error as e:
        raise ScenarioError(f"{where}: malformed CSV ({e})") from None
    if not rows or tuple(c.strip() for c in rows[0][1]) != header:
        got = rows[0][1] if rows else "an empty file"
        raise ScenarioError(f"{where}:1: the header must be {','.join(header)}, got {got}")
    return [(line, row) for line, row in rows[1:] if row]
