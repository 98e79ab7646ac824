"""Text files a user gives (scenarios, traces): UTF-8 or a one-line error saying what the
file looks like instead, the same check for every reader."""

from __future__ import annotations

import gzip
from pathlib import Path

from sim.errors import TraceError

__all__ = ["check_text_file", "not_utf8"]

_CHUNK_BYTES = 1 << 22
"""A text file is checked 4 MiB at a time."""


def not_utf8(data: bytes, offset: int = 0) -> str | None:
    """Why `data` (the bytes of a file from byte `offset`) is not UTF-8 text, or None if it
    is (a byte-order mark allowed at the start). A NUL byte is refused: UTF-16 without a
    byte-order mark, or a binary file."""
    if offset == 0 and data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "this one is UTF-16"
    nul = data.find(b"\x00")
    if nul >= 0:
        where = f"byte {offset + nul} is 0x00"
        return f"{where}, not UTF-8 text (UTF-16 or a binary file? save it as UTF-8)"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = data[e.start : e.start + 1].hex()
        return (
            f"byte {offset + e.start} is 0x{bad}, not UTF-8 (Latin-1 or a binary file? "
            "save it as UTF-8)"
        )
    return None


def check_text_file(path: Path, kind: str) -> None:
    """TraceError "`path`: `kind` files are UTF-8 text; ..." unless the whole file (after
    gzip decompression for a `.gz` name) is UTF-8 text (`not_utf8`). Read in chunks: a
    trace of any size is checked in constant memory. OSError/EOFError/zlib.error of a
    file that cannot be read or decompressed pass through."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    offset, carry = 0, b""
    with opener(path, "rb") as f:
        while chunk := f.read(_CHUNK_BYTES):
            data = carry + chunk
            whole = len(data) - _cut_tail(data)  # the next chunk ends a cut character
            _raise_unless_text(path, kind, data[:whole], offset)
            offset, carry = offset + whole, data[whole:]
    _raise_unless_text(path, kind, carry, offset)


def _raise_unless_text(path: Path, kind: str, data: bytes, offset: int) -> None:
    why = not_utf8(data, offset)
    if why is not None:
        raise TraceError(f"{path}: {kind} files are UTF-8 text; {why}")


def _cut_tail(data: bytes) -> int:
    """Bytes at the end of `data` that start a UTF-8 character it does not finish (0-3)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: a character starts here
            length = 4 if byte >= 0xF0 else 3 if byte >= 0xE0 else 2 if byte >= 0xC0 else 1
            return back if length > back else 0
    return 0
