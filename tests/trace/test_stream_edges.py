"""A streamed trace (trace/stream.py) gives up, with its reason, on whatever read_trace
does with the whole trace in hand, and a run says why it read the trace whole
(`RunResult.not_streamed`, a note from `prefixsim run`). Also: chunks that are exactly
read_trace's requests, the row limit at chunk edges, and the last arrival."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from prefixsim import simulate
from prefixsim.cli import app
from prefixsim.config import build_config
from prefixsim.trace import read_trace
from prefixsim.trace.stream import NotStreamable, open_stream


def row(stamp: float, first_id: int, pages: int = 2, **extra) -> dict:
    return {"timestamp": stamp, "input_length": 512 * pages, "output_length": 3,
            "hash_ids": list(range(first_id, first_id + pages)), **extra}


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("rows", "reason"), [
    ([row(2000, 0), row(1000, 10)], "arrivals out of order"),
    ([row(0, 0), row(1000, 10, block_size=16, input_length=20)], "more than one page size"),
    ([row(0, 0), row(2e12, 10)], "arrivals span too long"),
    ([row(0, 0), row(1000, 1, pages=1)], "hash ids are not chained"),
])
def test_each_reason_to_give_up(tmp_path, rows, reason):
    stream = open_stream(jsonl(tmp_path / "t.jsonl", rows), "mooncake", 512, None)
    with pytest.raises(NotStreamable) as gave_up:
        list(stream)
    assert str(gave_up.value) == reason


def test_no_requests_and_a_chunk_the_fast_reader_does_not_take(tmp_path):
    empty = tmp_path / "e.parquet"
    pq.write_table(pa.table({"timestamp": pa.array([], pa.float64()),
                             "input_length": pa.array([], pa.int64()),
                             "output_length": pa.array([], pa.int64()),
                             "hash_ids": pa.array([], pa.list_(pa.int64()))}), empty)
    with pytest.raises(NotStreamable) as gave_up:
        list(open_stream(empty, "parquet", 512, None))
    assert str(gave_up.value) == "the trace holds no requests"
    odd = jsonl(tmp_path / "o.jsonl", [row(0, 0), row(5, 10, namespace="a")])
    with pytest.raises(NotStreamable) as gave_up:
        list(open_stream(odd, "mooncake", 512, None))
    assert str(gave_up.value) == "a chunk the fast reader does not take"


@pytest.mark.parametrize("limit", [None, 1, 3, 4, 5, 8])
def test_parquet_chunks_are_read_traces_requests(tmp_path, limit):
    rows = [row(1000.0 * (i + 1), 10 * i) for i in range(8)]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path,
                   row_group_size=4)
    stream = open_stream(path, "parquet", 512, limit)
    streamed = [r for chunk in stream for r in chunk]
    whole = read_trace(path, "parquet").requests[:limit]
    assert streamed == list(whole)
    assert stream.total == (8 if limit is None else limit)
    assert stream.last_arrival_s(1.0) == whole[-1].arrival_s


def test_a_run_says_why_it_read_the_trace_whole(tmp_path):
    path = jsonl(tmp_path / "t.jsonl", [row(2000, 0), row(1000, 10), row(3000, 20)])
    config = build_config({"trace": {"path": str(path)}, "cache_only": True})
    result = simulate(config, stream=True)
    assert result.not_streamed == "arrivals out of order" and not result.streamed
    assert simulate(config, stream=False).not_streamed is None
    ordered = jsonl(tmp_path / "o.jsonl", [row(1000, 0), row(2000, 10)])
    assert simulate(build_config({"trace": {"path": str(ordered)}, "cache_only": True}),
                    stream=True).not_streamed is None
    out = CliRunner().invoke(app, ["run", "--trace", str(path), "--cache-only", "--quiet",
                                   "-o", str(tmp_path / "run")])
    assert out.exit_code == 0
    assert "note: the trace was read whole, not streamed (arrivals out of order)" in out.output


@pytest.mark.parametrize(("count", "tail"), [(1, ""), (3, "\n\n"), (2000, ""), (2000, "\n \n")])
def test_a_jsonl_files_last_arrival_from_its_last_line(tmp_path, count, tail):
    # 2,000 rows are ~150 KB: the last line is found reading back 64 KiB, then 128 KiB...
    rows = [row(1000.0 + 250.0 * i, 10 * i) for i in range(count)]
    path = jsonl(tmp_path / "t.jsonl", rows)
    path.write_text(path.read_text() + tail)
    stream = open_stream(path, "mooncake", 512, None)
    assert stream.last_arrival_s(1.0) == (1000.0 + 250.0 * (count - 1)) / 1000.0 - 1.0
    assert stream.first_arrival_s() == 1.0
    assert stream.total == count


def test_a_last_line_that_is_not_a_plain_record(tmp_path):
    for last, reason in (('{"timestamp": "late"}', "the last timestamp is not a number"),
                         ("[1, 2]", "the last line is not a plain record")):
        path = tmp_path / "t.jsonl"
        path.write_text(json.dumps(row(1000, 0)) + "\n" + last + "\n")
        stream = open_stream(path, "mooncake", 512, None)
        with pytest.raises(NotStreamable) as gave_up:
            stream.last_arrival_s(0.0)
        assert str(gave_up.value) == reason


@pytest.mark.parametrize("stamp", ["NaN", "Infinity", "-Infinity", "-5", "1e17"])
def test_a_last_timestamp_out_of_range_gives_up(tmp_path, stamp):
    """A NaN or infinite last stamp once sized the cache-only sampling grid (a traceback in
    metrics/timeseries.py) before any chunk was checked: the stream gives up on it and the
    whole-trace reader names the line."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row(1000, 0)) + "\n"
                    + json.dumps(row(0, 0)).replace('"timestamp": 0', f'"timestamp": {stamp}')
                    + "\n")
    stream = open_stream(path, "mooncake", 512, None)
    with pytest.raises(NotStreamable) as gave_up:
        stream.last_arrival_s(0.0)
    assert str(gave_up.value) == "the last timestamp is out of range"
