"""The Parquet reader's fast path (whole row groups into numpy columns) against its
row-by-row path: the same requests, time shift and reordering for every file, or the same
one-line error when a file is bad (the fast path gives up and the row path decides)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fast_path import assert_same_reads
from fast_path import read_both as read_both_ways
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, parquet, read_trace
from prefixsim.trace.chains import TABLE_IDS, ChunkChains
from prefixsim.trace.columns import RequestColumns


def read_both(path, options=None):
    return read_both_ways(path, "parquet", parquet, "_read_columns", options)


rows = st.fixed_dictionaries(
    {"timestamp": st.floats(0, 1e6), "input_length": st.integers(1, 2000),
     "output_length": st.integers(0, 50)},
    optional={"session_id": st.one_of(st.text(max_size=5), st.none())})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows, min_size=1, max_size=30), st.sampled_from([None, 64, 512]),
       st.integers(1, 7), st.sampled_from(["ok", "negative", "unchained", "null", "count",
                                           "namespace", "int_session"]),
       st.one_of(st.none(), st.integers(1, 40)))
def test_fast_and_row_paths_agree(tmp_path, lines, block_size, group_rows, flaw, limit):
    """Chained ids over a few shared chains, times out of order, several row groups, an
    optional max_requests and one kind of flaw: both paths agree."""
    size = block_size or 512
    table = {"timestamp": [], "input_length": [], "output_length": [], "hash_ids": [],
             "session_id": [], "block_size": [], "namespace": []}
    for i, row in enumerate(lines):
        count = -(-row["input_length"] // size)
        table["timestamp"].append(row["timestamp"])
        table["input_length"].append(row["input_length"])
        table["output_length"].append(row["output_length"])
        table["hash_ids"].append([i % 3 * 10_000 + k for k in range(count)])
        table["session_id"].append(row.get("session_id"))
        table["block_size"].append(block_size if i % 2 else None)
        table["namespace"].append(None)
    bad = len(lines) // 2
    if flaw == "negative":
        table["timestamp"][bad] = -1.0
    elif flaw == "unchained":
        ids = table["hash_ids"][bad]
        table["hash_ids"][bad] = [99_999] + ids[1:] if len(ids) > 1 else [5]
    elif flaw == "null":
        table["input_length"][bad] = None
    elif flaw == "count":
        table["hash_ids"][bad] = table["hash_ids"][bad] + [123_456]
    elif flaw == "namespace":
        table["namespace"][bad] = "tenant-a"
    schema = pa.schema([("timestamp", pa.float64()), ("input_length", pa.int64()),
                        ("output_length", pa.int64()), ("hash_ids", pa.list_(pa.int64())),
                        ("session_id", pa.int64() if flaw == "int_session" else pa.string()),
                        ("block_size", pa.int64()), ("namespace", pa.string())])
    if flaw == "int_session":
        table["session_id"] = [i % 4 for i in range(len(lines))]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(table, schema=schema), path, row_group_size=group_rows)
    assert_same_reads(*read_both(path, ReadOptions(block_size=block_size, max_requests=limit)))


def test_a_converted_file_goes_the_fast_way(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"timestamp": [0.0, 5.0], "input_length": [600, 700],
                             "output_length": [1, 2], "hash_ids": [[1, 2], [1, 3]]}), path)
    data = read_trace(path)
    assert isinstance(data.requests, RequestColumns)
    assert [r.page_ids for r in data.requests] == [(1, 2), (1, 3)]


def test_columns_write_the_same_table_as_requests():
    """write.parquet_table takes RequestColumns array by array: the same table as row by row."""
    from prefixsim.trace.columns import as_columns
    from prefixsim.trace.record import Request
    from prefixsim.trace.write import parquet_table
    requests = [Request(0, 0.5, 600, 3, (1, 2), 512, "s1", None),
                Request(1, 1.25, 100, 0, (1,), 512, None, "tenant"),
                Request(2, 7.0, 40, 9, (5,), 64, "s2", None)]
    assert parquet_table(as_columns(requests)).equals(parquet_table(requests))


def test_the_id_span_of_the_rows_read_sizes_the_chain_table(tmp_path):
    """The row groups' statistics give the ids' range, of the groups holding the rows to be
    read only (a `max_requests` read of a big file must not size a table for all of it),
    and the chain check's table takes that size at once, or stays as it is for a range it
    cannot hold."""
    table = pa.table({"timestamp": [0.0, 1.0, 2.0, 3.0], "input_length": [1024, 512, 1024, 512],
                      "output_length": [1] * 4,
                      "hash_ids": [[3, 4], [5], [900, 901], [7]]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=2)
    handle = pq.ParquetFile(path)
    assert parquet.id_span(handle) == (3, 901)
    assert parquet.id_span(handle, 2) == (3, 5)
    assert parquet.id_span(handle, 3) == (3, 901)
    chains = ChunkChains()
    chains.expect(3, 901)
    assert len(chains.table) == 902
    for low, high in ((-1, 10), (0, TABLE_IDS)):
        other = ChunkChains()
        other.expect(low, high)
        assert len(other.table) == 0
    assert read_trace(path, "parquet").requests[2].page_ids == (900, 901)


@pytest.mark.parametrize("kind", [pa.int64(), pa.int32(), pa.string()])
def test_session_ids_are_text_whatever_the_column_holds(tmp_path, kind):
    """As in JSON lines (docs/input-rules.md I6): an integer session id is read as its
    text, on both paths (a class's session_regex once met an int and crashed the run)."""
    path = tmp_path / "t.parquet"
    sessions = pa.array([7, None, 8] if kind != pa.string() else ["7", None, "8"], kind)
    pq.write_table(pa.table({"timestamp": [0.0, 1.0, 2.0], "input_length": [10] * 3,
                             "output_length": [1] * 3, "hash_ids": [[1], [2], [3]],
                             "session_id": sessions}), path)
    for data in read_both(path):
        assert [r.session_id for r in data.requests] == ["7", None, "8"]


def test_a_session_id_that_is_not_text_or_an_integer_names_its_row(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"timestamp": [0.0, 1.0], "input_length": [10, 10],
                             "output_length": [1, 1], "hash_ids": [[1], [2]],
                             "session_id": [1.0, 1.5]}), path)
    with pytest.raises(InputError) as info:
        read_trace(path)
    assert str(info.value) == f"{path}:1: session_id: expected a string or an integer, got 1.0"
