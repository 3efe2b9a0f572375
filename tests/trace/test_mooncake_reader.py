"""Known answers of the Mooncake JSONL reader: the request record it builds, arrival order,
--block-size, --max-requests, and that reading streams (holds records, not the file)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from prefixsim.errors import InputError
from prefixsim.trace import load_trace, read_trace


def write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_record_fields(tmp_path):
    """1300 tokens at P=512 -> ceil = 3 pages of 512, 512, 276 tokens; timestamp in ms, and
    the trace starts at t = 0: 1500 ms is a shift of 1.5 s."""
    path = write(tmp_path / "t.jsonl", [
        {"timestamp": 1500, "input_length": 1300, "output_length": 7, "hash_ids": [4, 5, 6],
         "session_id": "abc"},
    ])
    data = read_trace(path)
    (r,) = data.requests
    assert (r.request_id, r.arrival_s, r.input_tokens, r.output_tokens) == (0, 0.0, 1300, 7)
    assert (data.time_shift_s, data.reordered_rows) == (1.5, 0)
    assert r.page_ids == (4, 5, 6) and r.page_size_tokens == 512
    assert r.page_tokens() == [512, 512, 276]
    assert r.session_id == "abc"
    with pytest.raises(AttributeError):
        r.input_tokens = 3  # frozen record


def test_arrival_order_is_stable_on_equal_timestamps(tmp_path):
    """File order 0..4 with timestamps 5,1,5,1,3 s: sorted by time, ties in file order:
    rows 1,3 (t=1), 4 (t=3), 0,2 (t=5), shifted by 1 s to start at 0. Rows 1, 3 and 4 arrive
    before row 0 (5 s), read earlier: 3 reordered rows."""
    times = [5000, 1000, 5000, 1000, 3000]
    path = write(tmp_path / "t.jsonl", [
        {"timestamp": t, "input_length": 10, "output_length": i, "hash_ids": [100 + i]}
        for i, t in enumerate(times)
    ])
    data = read_trace(path)
    requests = data.requests
    assert [r.output_tokens for r in requests] == [1, 3, 4, 0, 2]
    assert [r.arrival_s for r in requests] == [0.0, 0.0, 2.0, 4.0, 4.0]
    assert (data.time_shift_s, data.reordered_rows) == (1.0, 3)


def test_block_size_option(tmp_path):
    """At --block-size 16, 40 tokens need ceil(40/16) = 3 ids; the default 512 needs 1."""
    path = write(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3]}])
    (r,) = load_trace(path, block_size=16)
    assert r.page_size_tokens == 16 and r.page_tokens() == [16, 16, 8]
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert (info.value.line, info.value.field) == (1, "hash_ids")


def test_max_requests_stops_reading(tmp_path):
    """The third line is broken, but --max-requests 2 never reads it."""
    good = {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
    path = write(tmp_path / "t.jsonl", [good, good, "{broken"])
    assert len(load_trace(path, max_requests=2)) == 2
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.line == 3


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path):
    good = {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
    path = write(tmp_path / "t.jsonl", [good, "", {**good, "output_length": -1}])
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert (info.value.line, info.value.field) == (3, "output_length")


def test_reading_streams_the_file(tmp_path):
    """1,000 lines each padded with 20 kB of an unknown field (a 20 MB file): the reader keeps
    only the records (well under 1 MB), so its peak allocation stays far below the file size."""
    pad = "x" * 20_000
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for i in range(1000):
            handle.write(json.dumps({"timestamp": i, "input_length": 600, "output_length": 1,
                                     "hash_ids": [2 * i, 2 * i + 1], "note": pad}) + "\n")
    tracemalloc.start()
    try:
        requests = load_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(requests) == 1000
    assert path.stat().st_size > 20_000_000
    assert peak < 5_000_000, peak
