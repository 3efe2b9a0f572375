"""The Parquet reader (trace/parquet.py) at its edges, deterministically: the row limit
across row groups on the fast path, chains checked in the last group and on one-page rows,
namespaces and every row-path refusal word for word, the metadata checks at their bounds
and the id span over several row groups. (The differential tests in test_parquet_fast.py
draw their files at random, so a mutant there may live through one run.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakes import refusal

from prefixsim.trace import ReadOptions, parquet, read_trace
from prefixsim.trace.columns import RequestColumns


def write(path: Path, rows: list[dict], group_rows: int = 4, **table_options) -> Path:
    names = ["timestamp", "input_length", "output_length", "hash_ids",
             *sorted({k for r in rows for k in r} - {"timestamp", "input_length",
                                                      "output_length", "hash_ids"})]
    columns = {name: [r.get(name) for r in rows] for name in names}
    pq.write_table(pa.table(columns), path, row_group_size=group_rows, **table_options)
    return path


def plain(count: int, **extra) -> list[dict]:
    return [{"timestamp": float(i), "input_length": 10, "output_length": 1,
             "hash_ids": [100 + i], **extra} for i in range(count)]


@pytest.mark.parametrize("limit", [1, 3, 4, 5, 9, 10, 11])
def test_the_row_limit_across_row_groups_on_the_fast_path(tmp_path, limit):
    path = write(tmp_path / "t.parquet", plain(10))
    data = read_trace(path, options=ReadOptions(max_requests=limit))
    assert isinstance(data.requests, RequestColumns)
    assert [r.page_ids for r in data.requests] == [(100 + i,) for i in range(min(limit, 10))]


@pytest.mark.parametrize("limit", [None, 2, 5])
def test_the_row_limit_and_skipped_rows_on_the_row_path(tmp_path, limit):
    rows = plain(8, namespace="a")  # a namespace: the row path reads the file
    rows[1]["input_length"] = 0
    path = write(tmp_path / "t.parquet", rows)
    data = read_trace(path, options=ReadOptions(max_requests=limit, skip_bad_lines=True))
    assert not isinstance(data.requests, RequestColumns)
    expected = [0, 2, 3, 4, 5, 6, 7][:limit]  # the file's times, in milliseconds
    assert [round((r.arrival_s + data.time_shift_s) * 1000) for r in data.requests] == \
        expected
    assert data.skipped_lines == 1


def test_sessions_of_text_and_integers_stay_on_the_fast_path(tmp_path):
    for sessions in (["a", None, "b"], [1, None, 2]):
        rows = plain(3)
        for row, session in zip(rows, sessions, strict=True):
            row["session_id"] = session
        data = read_trace(write(tmp_path / "t.parquet", rows))
        assert isinstance(data.requests, RequestColumns)
        assert [r.session_id for r in data.requests] == [None if s is None else str(s)
                                                         for s in sessions]


def test_namespaces_keep_their_ids_apart(tmp_path):
    rows = plain(3)
    for row, namespace in zip(rows, ["a", "b", None], strict=True):
        row["namespace"] = namespace
        row["hash_ids"] = [7]
    data = read_trace(write(tmp_path / "t.parquet", rows))
    assert [r.namespace for r in data.requests] == ["a", "b", None]
    assert len({r.page_ids for r in data.requests}) == 3  # id 7 is three pages
    rows = plain(2)
    rows[0].update(input_length=600, hash_ids=[1, 2], namespace="a")
    rows[1].update(input_length=600, hash_ids=[3, 2], namespace="b")  # b's 2 follows 3
    assert len(read_trace(write(tmp_path / "u.parquet", rows)).requests) == 2


def test_the_row_path_reads_past_its_first_batch(tmp_path):
    rows = plain(5000, namespace="a")  # the row path decodes 4,096 rows at a time
    data = read_trace(write(tmp_path / "t.parquet", rows, group_rows=5000))
    assert len(data.requests) == 5000 and data.requests[-1].page_ids[0] != 0


def test_ids_that_are_not_integers_and_a_chat_id_column(tmp_path):
    rows = plain(2)
    rows[0]["hash_ids"] = [1.5]
    path = write(tmp_path / "t.parquet", rows)
    assert refusal(read_trace, path) == f"{path}:1: hash_ids: expected a list of integers"
    rows = plain(2, chat_id="c1", namespace="a")  # sessions are session_id only (row path)
    assert [r.session_id for r in read_trace(write(tmp_path / "u.parquet", rows)).requests] \
        == [None, None]


@pytest.mark.parametrize("last_group", [False, True])
def test_unchained_ids_are_refused_wherever_they_are(tmp_path, last_group):
    rows = plain(8)
    rows[0].update(input_length=600, hash_ids=[1, 2])
    bad = 7 if last_group else 2
    rows[bad].update(input_length=10, hash_ids=[2])  # 2 followed 1 in the first row
    path = write(tmp_path / "t.parquet", rows)
    assert refusal(read_trace, path) == (
        f"{path}:{bad + 1}: hash_ids: id 2 at position 0 follows None here but 1 earlier "
        "(ids are not chained prefix hashes)")


def test_a_one_page_row_that_starts_a_chain_after_its_old_parent(tmp_path):
    rows = plain(3)
    rows[0].update(input_length=1100, hash_ids=[1, 2, 3])
    rows[1].update(input_length=600, hash_ids=[1, 2])
    rows[2].update(input_length=10, hash_ids=[3])
    path = write(tmp_path / "t.parquet", rows)
    assert "id 3 at position 0 follows None here but 2 earlier" in refusal(read_trace, path)


@pytest.mark.parametrize(("change", "text"), [
    ({"timestamp": -1.0}, "timestamp: must be a finite number >= 0, got -1.0"),
    ({"input_length": 0}, "input_length: must be >= 1, got 0"),
    ({"output_length": -1}, "output_length: must be >= 0, got -1"),
    ({"block_size": 0}, "block_size: must be >= 1, got 0"),
    ({"hash_ids": [1, 2]}, "hash_ids: has 2 ids but input length 10 needs ceil(10/512) = 1 "
                           "(is --block-size right?)"),
    ({"namespace": ""}, "namespace: expected a non-empty string, got ''"),
])
def test_row_path_refusals_word_for_word(tmp_path, change, text):
    rows = plain(3, namespace="x")
    rows[1].update(change)
    path = write(tmp_path / "t.parquet", rows)
    assert refusal(read_trace, path) == f"{path}:2: {text}"


def test_the_page_budgets_at_their_bounds(tmp_path, monkeypatch):
    path = write(tmp_path / "t.parquet", plain(6), group_rows=3)  # 6 ids in all
    assert len(read_trace(path, options=ReadOptions(max_pages=6)).requests) == 6
    assert refusal(read_trace, path, options=ReadOptions(max_pages=5)) == (
        f"{path}: hash_ids: holds 6 hash ids, more than 5; convert fewer requests or coarser "
        "pages, or raise --max-trace-pages")
    monkeypatch.setattr(parquet, "MAX_PAGES_PER_REQUEST", 2)
    rows = plain(4)
    rows[0].update(input_length=1100, hash_ids=[1, 2, 3])  # 3 ids: one row over 2 a row
    path = write(tmp_path / "u.parquet", rows, group_rows=1)
    assert refusal(read_trace, path) == (
        f"{path}: hash_ids: row group 0 holds 3 hash ids for 1 rows, more than 2 a request")
    rows = plain(2)
    rows[0].update(input_length=600, hash_ids=[1, 2])  # 3 ids in a group of 2 rows: fine
    assert len(read_trace(write(tmp_path / "v.parquet", rows, group_rows=2)).requests) == 2


def test_the_id_span_over_row_groups(tmp_path):
    rows = plain(6)
    for row, ids in zip(rows, [900, 901, 3, 4, 2000, 3000], strict=True):
        row["hash_ids"] = [ids]
    handle = pq.ParquetFile(write(tmp_path / "t.parquet", rows, group_rows=2))
    assert parquet.id_span(handle) == (3, 3000)
    assert parquet.id_span(handle, 4) == (3, 901)  # two groups hold the first four rows;
    # the highest of them is in the first
    assert parquet.id_span(handle, 5) == (3, 3000)
    bare = write(tmp_path / "u.parquet", rows, group_rows=2, write_statistics=False)
    assert parquet.id_span(pq.ParquetFile(bare)) is None
    none = tmp_path / "n.parquet"  # no row group at all
    pq.ParquetWriter(none, pa.schema([("hash_ids", pa.list_(pa.int64()))])).close()
    assert parquet.id_span(pq.ParquetFile(none)) is None
    empty = tmp_path / "e.parquet"
    pq.write_table(pa.table({"hash_ids": pa.array([], pa.list_(pa.int64()))}), empty)
    assert parquet.id_span(pq.ParquetFile(empty)) is None


def test_what_the_entry_point_refuses(tmp_path):
    missing = tmp_path / "gone.parquet"
    assert refusal(read_trace, missing, "parquet") == f"{missing}: no such file"
    text = tmp_path / "t.parquet"
    text.write_text("timestamp,input_length\n")
    assert refusal(read_trace, text, "parquet").startswith(
        f"{text}: not a readable Parquet file (")
    no_ids = tmp_path / "n.parquet"
    pq.write_table(pa.table({"timestamp": [1.0], "input_length": [5],
                             "output_length": [1]}), no_ids)
    assert refusal(read_trace, no_ids) == f"{no_ids}: hash_ids: missing column"


def test_a_damaged_page_deep_in_the_file(tmp_path):
    # the footer reads, the third row group's first page does not: the row path names the
    # file with Arrow's reason on one line
    path = write(tmp_path / "t.parquet", plain(200, namespace="a"), group_rows=50,
                 compression="snappy")
    column = pq.ParquetFile(path).metadata.row_group(2).column(0)
    data = bytearray(path.read_bytes())
    for at in range(column.data_page_offset + 5,
                    column.data_page_offset + column.total_compressed_size - 2):
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises((pa.ArrowException, OSError)) as arrow:
        for _ in pq.ParquetFile(path).iter_batches(batch_size=4096):
            pass
    reason = " ".join(str(arrow.value).split())
    assert refusal(read_trace, path) == f"{path}: not a readable Parquet file ({reason})"


def test_rows_past_the_first_batch_are_named_by_their_number(tmp_path):
    rows = plain(9000, namespace="a")  # the row path decodes 4,096 rows at a time: the
    rows[8499]["input_length"] = 0  # bad row is in the third batch
    path = write(tmp_path / "t.parquet", rows, group_rows=9000)
    assert refusal(read_trace, path) == f"{path}:8500: input_length: must be >= 1, got 0"
