"""`sim.util.text`: the one UTF-8 check of every text file a user gives, read in chunks."""

from __future__ import annotations

import gzip

import pytest

from sim.errors import TraceError
from sim.util import text


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(text, "_CHUNK_BYTES", 3)  # every multi-byte character gets cut


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz"])
def test_characters_cut_between_chunks_are_text(tmp_path, tiny_chunks, name):
    path = tmp_path / name
    data = "\ufeffsite,€,𝄞\nbé,ü,x\n".encode()  # BOM, 2-, 3- and 4-byte characters
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    text.check_text_file(path, "trace")


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ("a,b\n1,2\n".encode("utf-16"), "this one is UTF-16"),
        ("abcdefg€".encode()[:-1], "byte 7 is 0xe2, not UTF-8"),  # cut at the end of the file
        (b"abcdefgh\xe9ij", "byte 8 is 0xe9, not UTF-8 (Latin-1 or a binary file?"),
        (b"abcdefgh\x00", "byte 8 is 0x00, not UTF-8 text (UTF-16 or a binary file?"),
    ],
)
def test_the_first_byte_that_is_not_text_is_named_by_its_place_in_the_file(
    tmp_path, tiny_chunks, data, said
):
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    with pytest.raises(TraceError) as e:
        text.check_text_file(path, "trace")
    assert str(e.value).startswith(f"{path}: trace files are UTF-8 text; {said}")
