"""What the Mooncake fast path (trace/mooncake_fast.py) takes itself and what it leaves to
the exact path, at each boundary. Giving up is always safe (the exact path decides), so the
differential tests cannot see a fast path that gives up too often; these pin that every
plain file stays on it, and that its line scan, progress and row limit are exact."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow.json as pj
import pytest

from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, mooncake_fast, read_trace
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.fields import MAX_TIME, MAX_TOKENS
from prefixsim.trace.mooncake_fast import (
    _sessions,
    columns_of,
    read_fast,
    record_lines,
    report_progress,
    restart_progress,
)
from prefixsim.trace.readers import PROGRESS_EVERY, ReadContext


def row(**fields) -> dict:
    return {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1], **fields}


def batch_of(rows: list[dict]):
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return pj.read_json(io.BytesIO(text)).combine_chunks().to_batches()[0]


def columns(rows: list[dict], block: int = 512) -> RequestColumns | None:
    return columns_of(batch_of(rows), block)


# ------------------------------------------------------------------ columns_of
def test_values_at_their_bounds_stay_on_the_fast_path():
    got = columns([row(timestamp=0, input_length=1, output_length=0),
                   row(timestamp=int(MAX_TIME), input_length=MAX_TOKENS,
                       output_length=MAX_TOKENS, hash_ids=[1])], block=MAX_TOKENS)
    assert got is not None
    assert got.input_tokens.tolist() == [1, MAX_TOKENS]
    assert got.output_tokens.tolist() == [0, MAX_TOKENS]
    assert got.arrival_s.tolist() == [0.0, MAX_TIME / 1000]  # milliseconds to seconds
    assert got.request_ids.tolist() == [0, 1] and got.request_ids.dtype == np.int64
    assert got.page_size_tokens.dtype == np.int64 and got.page_ids.dtype == np.int64


@pytest.mark.parametrize("fields", [
    {"input_length": 0}, {"input_length": MAX_TOKENS + 1, "hash_ids": [1, 2]},
    {"input_length": 0, "hash_ids": []},  # no page for no token: only the bound refuses it
    {"input_length": MAX_TOKENS + 1, "hash_ids": [1, 2], "block_size": MAX_TOKENS},
    {"output_length": -1}, {"output_length": MAX_TOKENS + 1}, {"timestamp": -1},
    {"input_length": 10.0}, {"output_length": 1.0}, {"hash_ids": [1.0]}, {"timestamp": "0"},
    {"hash_ids": [1, 2]},  # 10 tokens at 512 a page are one page
    {"namespace": "a"}, {"block_size": 0}, {"block_size": MAX_TOKENS + 1},
    {"block_size": 2.0},
])
def test_what_the_fast_path_leaves_to_the_exact_one(fields):
    assert columns([row(**fields)]) is None


def test_a_null_among_the_ids_goes_the_exact_way():
    """`[1, null]` once reached numpy's zero-copy conversion: ArrowInvalid, a traceback on
    every streamed run (the whole readers caught it)."""
    assert columns([row(input_length=1000, hash_ids=[1, 2]),
                    row(input_length=600, hash_ids=[1, None])]) is None
    assert columns([row(input_length=600, hash_ids=[1, 3])]) is not None


def test_a_timestamp_past_the_bound_goes_the_exact_way():
    assert columns([row(timestamp=float(MAX_TIME) * 2)]) is None
    assert columns([row(timestamp=float(MAX_TIME))]) is not None


def test_block_sizes_given_per_row():
    got = columns([row(input_length=20, hash_ids=[1, 2], block_size=16), row(block_size=None),
                   row(input_length=10, hash_ids=[5], block_size=MAX_TOKENS),
                   row(input_length=2, hash_ids=[6, 7], block_size=1)], block=64)
    assert got is not None and got.page_size_tokens.tolist() == [16, 64, MAX_TOKENS, 1]
    assert got.page_start.tolist() == [0, 2, 3, 4, 6]
    every = columns([row(block_size=64)], block=8)  # a column without nulls: ints as they are
    assert every is not None and every.page_size_tokens.tolist() == [64]
    # a column of nulls only: the default size
    nulls = columns([row(input_length=8, block_size=None)], block=8)
    assert nulls is not None and nulls.page_size_tokens.tolist() == [8]


def test_a_namespace_column_of_nulls_is_no_namespace():
    assert columns([row(namespace=None), row()]) is not None


def test_sessions():
    assert columns([row()]).sessions is None
    assert columns([row(session_id=None)]).sessions is None
    assert columns([row(session_id="s1"), row()]).sessions.to_pylist() == ["s1", None]
    assert columns([row(chat_id=7)]).sessions.to_pylist() == ["7"]
    for fields in ({"session_id": 1.5}, {"session_id": "a", "chat_id": 1}):
        assert columns([row(**fields)]) is None
    assert _sessions({}) is None


def test_a_session_id_that_is_not_utf8_goes_the_exact_way():
    text = (json.dumps(row(session_id="s")).replace('"s"', '"\xff"') + "\n").encode("latin-1")
    batch = pj.read_json(io.BytesIO(text)).to_batches()[0]
    assert columns_of(batch, 512) is None


# ------------------------------------------------------------------ the line scan
def test_record_lines_counts_lines_that_open_a_record(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    text = "".join(json.dumps(row(hash_ids=[i])) + "\n" for i in range(5))
    path.write_text(text + "\n\n" + json.dumps(row()))  # blank lines; no final newline
    assert record_lines(path) == 6
    monkeypatch.setattr(mooncake_fast, "SCAN_BYTES", 3)  # lines and brackets across blocks
    assert record_lines(path) == 6
    path.write_text('{"a": [1, [2]]}\n')
    assert record_lines(path) is None
    path.write_text('{"a": [1],\n "b": [2]}\n')  # two lines, each opening two
    assert record_lines(path) == 2
    path.write_text('{"a": [1], "b": {"c": 2}}\n')  # three on one line
    assert record_lines(path) is None
    path.write_text('{"a": [1]}\n{"b": 2}')  # a last line that opens one, no newline
    assert record_lines(path) == 2


def test_record_lines_refuses_a_line_over_the_limit(tmp_path, monkeypatch):
    from prefixsim.trace import readers

    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 20)
    monkeypatch.setattr(mooncake_fast, "SCAN_BYTES", 8)
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": "' + "x" * 11 + '"}\n' + "{}\n")  # 20 characters, then a newline
    assert record_lines(path) == 2
    path.write_text('{"a": "' + "x" * 12 + '"}\n')  # 21, ending inside a block
    assert record_lines(path) is None
    path.write_text("{}\n" * 3 + '{"a": "' + "x" * 12 + '"}\n{}\n')  # a line between two
    assert record_lines(path) is None
    monkeypatch.setattr(mooncake_fast, "SCAN_BYTES", 64)  # a long line wholly in one block
    assert record_lines(path) is None
    path.write_text("{}\n" + '{"a": "' + "x" * 12 + '"}')  # the last line, no newline
    assert record_lines(path) is None
    monkeypatch.setattr(mooncake_fast, "SCAN_BYTES", 8)
    path.write_text("{}\n" + '{"a": "' + "x" * 11 + '"}')  # 20: still a line
    assert record_lines(path) == 2
    path.write_text("{}\n" + '{"a": "' + "x" * 11 + '"}\n')  # carried over two blocks
    assert record_lines(path) == 2


# ------------------------------------------------------------------ reading whole files
def plain(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps(row(timestamp=i, hash_ids=[i])) + "\n"
                            for i in range(count)))
    return path


@pytest.mark.parametrize("limit", [1, 4, 5, 6, 10, 11])
def test_the_row_limit_across_blocks(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(mooncake_fast, "BLOCK_BYTES", 200)  # ~2-3 rows a block
    path = plain(tmp_path / "t.jsonl", 10)
    got = read_fast(path, ReadContext(ReadOptions(max_requests=limit)), 512)
    assert got is not None and got.page_ids.tolist() == list(range(min(limit, 10)))


def test_a_single_page_row_is_checked_for_chaining(tmp_path):
    # 3 follows 2 in the first row and starts the third, right after a row ending in 2: a
    # check that took a one-page row's id as following the id before it would pass this
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row(input_length=1100, hash_ids=[1, 2, 3])) + "\n"
                    + json.dumps(row(input_length=600, hash_ids=[1, 2])) + "\n"
                    + json.dumps(row(hash_ids=[3])) + "\n")
    assert read_fast(path, ReadContext(ReadOptions()), 512) is None
    with pytest.raises(InputError, match="id 3 at position 0 follows None here but 2 earlier"):
        read_trace(path)


def test_progress_is_told_in_whole_steps_and_taken_back():
    told: list[int] = []
    ctx = ReadContext(ReadOptions(on_progress=told.append))
    report_progress(ctx, PROGRESS_EVERY - 1)
    assert told == []
    report_progress(ctx, 2 * PROGRESS_EVERY)  # a whole number of steps: the last counts
    assert told == [PROGRESS_EVERY, PROGRESS_EVERY] and ctx.reported == 2 * PROGRESS_EVERY
    report_progress(ctx, 2 * PROGRESS_EVERY + 5)
    assert len(told) == 2
    restart_progress(ctx)
    assert told[-1] == -2 * PROGRESS_EVERY and ctx.reported == 0
    restart_progress(ctx)  # nothing reported: nothing to take back
    assert len(told) == 3
    quiet = ReadContext(ReadOptions())
    quiet.reported = 5
    restart_progress(quiet)
    assert quiet.reported == 0
