"""More of what a streamed trace (trace/stream.py) must do, each case worked by hand: the
first arrival read from the first row alone, the last one read back over a line longer than
the first 64 KiB, chunks that are empty (a run of blank lines longer than Arrow's block),
the arrival checks at a chunk's edge, the chain check of one-page prompts, the row limit at
a row group's edge, and what `open_stream` refuses or fills in."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prefixsim.errors import InputError
from prefixsim.trace import read_trace
from prefixsim.trace import stream as stream_module
from prefixsim.trace.readers import MAX_SPAN_S
from prefixsim.trace.stream import DEFAULT_BLOCK_SIZE, NotStreamable, TraceStream, open_stream


def row(stamp: float, ids: list[int], **extra) -> dict:
    return {"timestamp": stamp, "input_length": 512 * len(ids), "output_length": 3,
            "hash_ids": ids, **extra}


def jsonl(path: Path, rows: list[dict], between: str = "") -> Path:
    lines = [json.dumps(r) + "\n" for r in rows]
    half = len(lines) // 2
    path.write_text("".join(lines[:half]) + between + "".join(lines[half:]))
    return path


def parquet(path: Path, rows: list[dict], group: int, first: str = "timestamp") -> Path:
    names = [first, *(k for k in rows[0] if k != first)]
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in names}), path,
                   row_group_size=group)
    return path


def streamed(stream: TraceStream) -> list:
    return [r for chunk in stream for r in chunk]


# ------------------------------------------------------------------ the first arrival
def test_the_first_arrival_comes_from_the_first_row_alone(tmp_path):
    """Row 0 plain, row 1 with one hash id too few for its length (the fast reader does not
    take that chunk): the first arrival is row 0's, read from the first row alone; reading
    the first chunk instead gives up."""
    path = jsonl(tmp_path / "t.jsonl", [row(1250, [1, 2]),
                                        {**row(2000, [3, 4]), "input_length": 1500}])
    stream = open_stream(path, "mooncake", None, None)
    assert stream._first_arrival_quick() == 1.25
    assert stream.first_arrival_s() == 1.25
    with pytest.raises(NotStreamable, match="a chunk the fast reader does not take"):
        next(stream._raw_chunks())


def test_a_first_row_of_another_shape_gives_no_quick_answer(tmp_path):
    """Row 0 with one hash id too few parses as JSON but is not a plain row: no quick
    answer, and the first chunk says why."""
    path = jsonl(tmp_path / "t.jsonl", [{**row(1250, [1, 2]), "input_length": 1500},
                                        row(2000, [3, 4])])
    stream = open_stream(path, "mooncake", None, None)
    assert stream._first_arrival_quick() is None
    with pytest.raises(NotStreamable, match="a chunk the fast reader does not take"):
        stream.first_arrival_s()


def test_no_requests_at_all(tmp_path):
    empty = tmp_path / "e.parquet"
    pq.write_table(pa.table({"timestamp": pa.array([], pa.int64()),
                             "input_length": pa.array([], pa.int64()),
                             "output_length": pa.array([], pa.int64()),
                             "hash_ids": pa.array([], pa.list_(pa.int64()))}), empty)
    with pytest.raises(NotStreamable) as gave_up:
        open_stream(empty, "parquet", None, None).first_arrival_s()
    assert str(gave_up.value) == "the trace holds no requests"
    path = jsonl(tmp_path / "t.jsonl", [row(700, [1])])
    none = TraceStream(path, "mooncake", 512, 0, 0)  # no request wanted: none read
    with pytest.raises(NotStreamable) as gave_up:
        none.first_arrival_s()
    assert str(gave_up.value) == "the trace holds no requests"


# ------------------------------------------------------------------- the last arrival
def test_a_last_line_longer_than_the_first_read_back(tmp_path):
    """The last line, ~230 KB (30,000 hash ids), is longer than the 64 KiB read back first
    and the 128 KiB after it: the reads double until it is whole."""
    ids = list(range(100, 30100))
    path = jsonl(tmp_path / "t.jsonl", [row(1000, [1, 2]), row(2500, [1, 2]),
                                        row(9000, ids)])
    assert len(path.read_text().splitlines()[-1]) > (1 << 16) + (1 << 17)
    stream = open_stream(path, "mooncake", None, None)
    assert stream.last_arrival_s(1.0) == 8.0


@pytest.mark.parametrize(("content", "reason"), [
    ("", "the trace holds no requests"),
    ("\n", "the last line is not a plain record"),
])
def test_no_last_line(tmp_path, content, reason):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(NotStreamable) as gave_up:
        TraceStream(path, "mooncake", 512, None, 0).last_arrival_s(0.0)
    assert str(gave_up.value) == reason


def test_a_parquet_files_last_arrival_whatever_its_first_column(tmp_path):
    rows = [row(1000.0 * (i + 1), [10 * i, 10 * i + 1]) for i in range(5)]
    path = parquet(tmp_path / "t.parquet", rows, group=2, first="input_length")
    stream = open_stream(path, "parquet", None, None)
    assert stream.last_arrival_s(1.0) == 4.0
    assert open_stream(path, "parquet", None, 3).last_arrival_s(1.0) == 2.0


# --------------------------------------------------------------------------- chunks
def test_an_empty_chunk_between_two_is_skipped_not_the_end(tmp_path, monkeypatch):
    """Blank lines over more than one of the blocks Arrow parses at a time (BLOCK_BYTES,
    here 64 KiB) make empty chunks; the requests after them are still read."""
    monkeypatch.setattr(stream_module, "BLOCK_BYTES", 1 << 16)
    rows = [row(100.0 * i, [1, 2 + i]) for i in range(4)]
    path = jsonl(tmp_path / "t.jsonl", rows, between="\n" * (1 << 20))
    stream = open_stream(path, "mooncake", None, None)
    assert 0 in [len(c) for c in stream._raw_chunks()]
    chunks = list(stream)
    assert [len(c) for c in chunks] == [2, 2]
    assert [list(c.request_ids) for c in chunks] == [[0, 1], [2, 3]]
    assert streamed(stream) == list(read_trace(path, "mooncake").requests)


def test_equal_arrivals_across_a_chunks_edge_stream(tmp_path):
    rows = [row(stamp, [10 * i, 10 * i + 1]) for i, stamp in enumerate([0, 500, 500, 900])]
    path = parquet(tmp_path / "t.parquet", rows, group=2)
    stream = open_stream(path, "parquet", None, None)
    assert [len(c) for c in stream] == [2, 2]
    assert streamed(stream) == list(read_trace(path, "parquet").requests)


def test_epoch_time_stamps_stream_and_a_span_of_exactly_the_limit(tmp_path):
    """Arrivals in Unix epoch milliseconds (1.7e12 ms): the span is what counts, not the
    time since 1970; a span of exactly MAX_SPAN_S is kept, as read_trace keeps it."""
    epoch = 1.7e12
    rows = [row(epoch + 1000.0 * i, [10 * i, 10 * i + 1]) for i in range(4)]
    stream = open_stream(parquet(tmp_path / "e.parquet", rows, group=2), "parquet", None, None)
    assert [r.arrival_s for r in streamed(stream)] == [0.0, 1.0, 2.0, 3.0]
    edge = [row(0, [1, 2]), row(MAX_SPAN_S * 1000.0, [1, 2])]
    stream = open_stream(jsonl(tmp_path / "edge.jsonl", edge), "mooncake", None, None)
    assert [r.arrival_s for r in streamed(stream)] == [0.0, MAX_SPAN_S]


def test_one_page_prompts_are_chain_starts(tmp_path):
    """[5, 6], then [1] (one page: a prompt's first page, no parent), then [1, 2]: chained
    (page 1 has no parent both times)."""
    rows = [row(0, [5, 6]), row(100, [1]), row(200, [1, 2])]
    stream = open_stream(jsonl(tmp_path / "t.jsonl", rows), "mooncake", None, None)
    assert len(streamed(stream)) == 3


def test_a_chunk_found_not_chained_is_named_when_the_next_arrives(tmp_path):
    """Chunk 1 reuses id 1 under another parent; the check of chunk 1 runs beside chunk 2's
    read and is waited for there."""
    rows = [row(0, [1, 2]), row(100, [7, 1]), row(200, [20, 21]), row(300, [30, 31])]
    stream = open_stream(parquet(tmp_path / "t.parquet", rows, group=2), "parquet", None, None)
    chunks = iter(stream)
    with pytest.raises(NotStreamable) as gave_up:
        next(chunks)
    assert str(gave_up.value) == "hash ids are not chained"


def test_the_row_limit_at_a_row_groups_edge_reads_no_further(tmp_path):
    rows = [row(100.0 * i, [10 * i, 10 * i + 1]) for i in range(6)]
    path = parquet(tmp_path / "t.parquet", rows, group=2)
    stream = open_stream(path, "parquet", None, 2)
    assert [len(c) for c in stream._raw_chunks()] == [2]
    assert [len(c) for c in stream] == [2]


def test_unreadable_says_why(tmp_path):
    path = parquet(tmp_path / "t.parquet", [row(0, [1, 2]), row(5, [3, 4])], group=1)
    stream = open_stream(path, "parquet", None, None)
    path.write_bytes(b"PAR1 no longer a Parquet file PAR1")
    with pytest.raises(NotStreamable) as gave_up:
        list(stream)
    assert str(gave_up.value).startswith("unreadable (")


# --------------------------------------------------------------------------- opening
def test_open_stream_fills_in_and_refuses(tmp_path):
    path = jsonl(tmp_path / "t.jsonl", [row(0, [1, 2]), row(5, [1, 3])])
    stream = open_stream(path, "mooncake", None, None)
    assert (stream.format, stream.block_size, stream.max_requests, stream.total) == \
        ("mooncake", DEFAULT_BLOCK_SIZE, None, 2) and DEFAULT_BLOCK_SIZE == 512
    assert open_stream(path, "mooncake", 16, None).block_size == 16
    azure = tmp_path / "a.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n")
    assert open_stream(azure, "azure", None, None) is None  # not read in chunks
    assert open_stream(tmp_path / "nothere.jsonl", "mooncake", None, None) is None
    assert open_stream(path, "mooncake", None, 1) is None  # a row limit on JSON lines


def test_open_stream_checks_a_parquet_files_page_budget(tmp_path):
    rows = [row(100.0 * i, [10 * i, 10 * i + 1]) for i in range(4)]  # 8 hash ids
    path = parquet(tmp_path / "t.parquet", rows, group=2)
    assert open_stream(path, "parquet", None, None, max_pages=8).total == 4
    with pytest.raises(InputError) as refused:
        open_stream(path, "parquet", None, None, max_pages=7)
    assert str(refused.value) == (f"{path}: hash_ids: holds 8 hash ids, more than 7; convert "
                                  "fewer requests or coarser pages, or raise --max-trace-pages")
