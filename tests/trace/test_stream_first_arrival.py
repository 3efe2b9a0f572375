"""`TraceStream.first_arrival_s` (trace/stream.py): a JSON-lines file's first arrival read
from its first megabyte is the first chunk's, whatever that takes; where the first megabyte
does not give a plain first row it reads the first chunk as before."""

from __future__ import annotations

import json

import pytest

from prefixsim.trace import stream as stream_module
from prefixsim.trace.stream import NotStreamable, open_stream


def write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def row(stamp, pages=2, first_id=0):
    return {"timestamp": stamp, "input_length": 512 * pages, "output_length": 3,
            "hash_ids": list(range(first_id, first_id + pages))}


def first_chunk_arrival(stream) -> float:
    return float(next(c for c in stream._raw_chunks() if len(c)).arrival_s[0])


@pytest.mark.parametrize("stamps", [[1357, 2000, 2500], [1357.5, 2000, 2500.25],
                                    [0, 0, 7]])
def test_the_first_arrival_is_the_first_chunks(tmp_path, stamps):
    path = write(tmp_path / "t.jsonl", [row(s, first_id=10 * i) for i, s in enumerate(stamps)])
    stream = open_stream(path, "mooncake", 512, None)
    assert stream.first_arrival_s() == first_chunk_arrival(stream) == stamps[0] / 1000.0


def test_a_first_line_longer_than_the_quick_read_falls_back(tmp_path, monkeypatch):
    """A first line longer than what the quick read parses (Arrow refuses a line across
    its block): the first chunk is read instead, the same number."""
    path = write(tmp_path / "t.jsonl", [row(4321, pages=400), row(5000, first_id=1000)])
    monkeypatch.setattr(stream_module, "FIRST_BLOCK_BYTES", 256)
    stream = open_stream(path, "mooncake", 512, None)
    assert stream._first_arrival_quick() is None
    assert stream.first_arrival_s() == first_chunk_arrival(stream) == 4.321


def test_a_first_row_the_fast_reader_does_not_take_is_not_streamable(tmp_path):
    """A first row of another shape: no quick answer, and the first chunk says why, as it
    did before the quick read."""
    path = write(tmp_path / "t.jsonl", [{**row(10), "timestamp": "soon"}, row(20, first_id=9)])
    stream = open_stream(path, "mooncake", 512, None)
    assert stream._first_arrival_quick() is None
    with pytest.raises(NotStreamable):
        stream.first_arrival_s()
