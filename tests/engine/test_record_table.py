"""`RecordTable` (engine/records.py) reads as the list of records appended to it, through
every way out (index, slice, iteration, columns, drain, reorder); `hit_token_array` equals
`hit_tokens` request by request."""

import math
from array import array

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine.records import (
    PENDING_ROWS,
    CacheOnlyRecord,
    RecordTable,
    _extend,
    hit_token_array,
    hit_tokens,
)
from prefixsim.engine.request_state import ServedRecord
from prefixsim.trace import Request

TEXT = st.none() | st.text(max_size=6)
NUMBER = st.floats(-1e6, 1e6, allow_nan=False)
COUNT = st.integers(-(2**62), 2**62)
CACHE_ONLY = st.builds(CacheOnlyRecord, COUNT, TEXT, st.sampled_from(["ok", "hit", "é"]),
                       NUMBER, COUNT, COUNT, COUNT, COUNT, COUNT, COUNT)
SERVED = st.builds(ServedRecord, COUNT, TEXT, st.sampled_from(["completed", "rejected"]),
                   COUNT, NUMBER, NUMBER, NUMBER, COUNT, COUNT, COUNT, NUMBER, NUMBER,
                   NUMBER, NUMBER, COUNT, COUNT, COUNT, COUNT, COUNT,
                   st.none() | st.integers(0, 9))


def check_reads_as(table: RecordTable, reference: list) -> None:
    assert len(table) == len(reference)
    assert list(table) == reference and table == reference and table == tuple(reference)
    assert all(table[i] == reference[i] for i in range(-len(reference), len(reference)))
    assert table[1:-1] == reference[1:-1] and table[::-2] == reference[::-2]
    columns = table.columns()
    assert list(columns) == list(reference[0]._fields if reference else table.names)
    for position, name in enumerate(table.names):
        column = columns[name]
        values = column.to_pylist() if isinstance(column, pa.Array) else list(column)
        assert values == [record[position] for record in reference]
        assert kind(column) == KINDS[name]  # after a drain or a reorder as well


# what `columns()` gives per field: numpy for numbers, Arrow for strings, a list else
KINDS = {"request_id": np.int64, "session_id": pa.string(), "status": pa.string(),
         "replica": np.int64, "arrival_s": np.float64, "first_token_s": np.float64,
         "finish_s": np.float64, "input_tokens": np.int64, "cached_tokens": np.int64,
         "output_tokens": np.int64, "queue_ms": np.float64, "ttft_ms": np.float64,
         "tpot_ms": np.float64, "e2el_ms": np.float64, "preemptions": np.int64,
         "recomputed_tokens": np.int64, "cached_tokens_host": np.int64,
         "cached_tokens_disk": np.int64, "cached_tokens_pool": np.int64,
         "decode_replica": list}


def kind(column):
    if isinstance(column, np.ndarray):
        return column.dtype.type
    return column.type if isinstance(column, pa.Array) else type(column)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(CacheOnlyRecord, CACHE_ONLY), (ServedRecord, SERVED)]).flatmap(
    lambda kind: st.tuples(st.just(kind[0]), st.lists(kind[1], max_size=12),
                           st.lists(kind[1], max_size=6))), st.randoms(),
       st.sampled_from([1, 2, 5, PENDING_ROWS]))
def test_reads_as_the_records(drawn, rng, pending_rows):
    """Whatever the block size in which appended records go into the columns."""
    record_type, first, second = drawn
    table = RecordTable(record_type, pending_rows)
    for record in first:
        table.append(record)
    check_reads_as(table, first)
    drained = table.drain()
    check_reads_as(drained, first)
    check_reads_as(table, [])
    for record in second:
        table.append(record)
    check_reads_as(table, second)
    check_reads_as(drained, first)  # the drained records stay as they were
    order = list(range(len(first)))
    rng.shuffle(order)
    drained.reorder(order)
    check_reads_as(drained, [first[i] for i in order])
    if first:
        drained.append(first[0])  # appending still works after a reorder
        check_reads_as(drained, [*(first[i] for i in order), first[0]])


def test_equality_and_hash():
    table = RecordTable(CacheOnlyRecord)
    record = CacheOnlyRecord(1, None, "ok", 0.5, 10, 2, 3)
    table.append(record)
    assert table == [record] and table != [] and table != [record, record]
    assert table != [record._replace(cached_tokens=4)]
    assert table.__eq__("x") is NotImplemented and table.__eq__(1) is NotImplemented
    with pytest.raises(TypeError, match="unhashable"):
        hash(table)


def test_empty_columns_are_typed():
    columns = RecordTable(CacheOnlyRecord).columns()
    assert columns["request_id"].dtype == np.int64 and len(columns["request_id"]) == 0
    assert columns["arrival_s"].dtype == np.float64
    assert columns["session_id"].type == pa.string() and len(columns["session_id"]) == 0
    assert columns["status"].type == pa.string() and len(columns["status"]) == 0
    table = RecordTable(CacheOnlyRecord)
    table.append(CacheOnlyRecord(1, "", "ok", 0.5, 10, 2, 3))
    table.reorder([0])
    assert table.columns()["session_id"].to_pylist() == [""]
    assert table.columns()["session_id"].null_count == 0


def test_hit_tokens_by_hand():
    """40 tokens in pages of 16, 16, 8: the cap L - 1 = 39 applies only to all three."""
    request = Request(0, 0.0, 40, 1, (1, 2, 3), 16)
    assert [hit_tokens(request, n) for n in range(-1, 5)] == [0, 0, 16, 32, 39, 39]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 200), st.integers(1, 32), st.integers(-2, 12)),
                min_size=1, max_size=20))
def test_hit_token_array_equals_hit_tokens(rows):
    requests, matched = [], []
    for inputs, size, match in rows:
        pages = math.ceil(inputs / size)
        requests.append(Request(0, 0.0, inputs, 1, tuple(range(pages)), size))
        matched.append(match)
    got = hit_token_array(np.array([r.input_tokens for r in requests]),
                          np.array([r.page_size_tokens for r in requests]),
                          np.array(matched), np.array([r.num_pages for r in requests]))
    assert got.tolist() == [hit_tokens(r, m) for r, m in zip(requests, matched, strict=True)]


def test_long_text_stays_a_string_column():
    """Text columns are Arrow `string` (32-bit offsets) below 2 GiB of text: 100 bytes of
    a session id are, before and after a reorder."""
    table = RecordTable(CacheOnlyRecord)
    table.append(CacheOnlyRecord(1, "é" * 50, "ok", 0.5, 10, 2, 3))
    table.append(CacheOnlyRecord(2, None, "ok", 0.5, 10, 2, 3))
    for order in (None, [1, 0]):
        if order:
            table.reorder(order)
        column = table.columns()["session_id"]
        assert column.type == pa.string() and column.null_count == 1
        assert sorted(column.to_pylist(), key=str) == [None, "é" * 50]


def test_strings_by_hand():
    """Session ids "ab", None, "", "cd" and "é": each read back from its own bytes (the
    column holds "abcdé" and the ends 2, 2, 2, 4, 6), by index, from the end and after a
    reorder."""
    table = RecordTable(CacheOnlyRecord)
    ids = ["ab", None, "", "cd", "é"]
    for i, session in enumerate(ids):
        table.append(CacheOnlyRecord(i, session, "ok", 0.5, 10, 2, 3))
    table._flush()  # the records wait as tuples until a block fills or a reader comes
    strings = table._columns[1]
    assert bytes(strings.data) == "abcdé".encode() and list(strings.ends) == [2, 2, 2, 4, 6]
    assert [table[i].session_id for i in range(5)] == ids
    assert [table[i].session_id for i in range(-5, 0)] == ids
    table.reorder([4, 3, 2, 1, 0])
    assert [record.session_id for record in table] == ids[::-1]
    assert list(table._columns[1].ends) == [2, 4, 4, 4, 6]
    assert table.columns()["session_id"].to_pylist() == ids[::-1]


def appended_one_by_one(typecode: str, values: tuple) -> array | type:
    """The column `array.append` makes of `values`, or the type of the error it raises."""
    column = array(typecode)
    try:
        for value in values:
            column.append(value)
    except (TypeError, OverflowError) as exc:
        return type(exc)
    return column


@pytest.mark.parametrize("typecode, values", [
    ("q", (1, -2, 2**63 - 1, -(2**63))),
    ("q", (True, 2, False)),  # bools are whole numbers to an int column
    ("q", (True, False)),  # a column of bools: numpy makes them bool, value by value then
    ("q", (1, 2.5)),  # a float in an int column: TypeError, as one by one
    ("q", (1, None)),
    ("q", (2**63,)),  # out of range: OverflowError
    ("q", (2**64 + 1, 1)),
    ("d", (0.5, -0.0, math.inf, 1e308)),
    ("d", (1, 2**53 + 1, 2**63 - 1, -(2**62) - 3)),  # ints rounded as Python rounds them
    ("d", (1, 0.25, 2**60 + 1)),
    ("d", (2**70, 1.5)),  # an int numpy cannot hold: value by value
    ("d", (1.5, None)),
    ("d", ("1.5",)),  # text is not a number to an array (numpy would parse it)
])
def test_columns_take_a_block_as_value_by_value(typecode, values):
    """`_extend` gives the column `append` gives, or raises the error `append` raises."""
    expected = appended_one_by_one(typecode, values)
    column = array(typecode)
    if isinstance(expected, type):
        with pytest.raises(expected):
            _extend(column, values)
    else:
        _extend(column, values)
        assert column.tobytes() == expected.tobytes()


def test_a_block_goes_in_when_full():
    """With blocks of 3, the third record converts all three; a reader converts the rest."""
    table = RecordTable(CacheOnlyRecord, 3)
    records = [CacheOnlyRecord(i, None, "ok", 0.5, 10, 2, 3) for i in range(5)]
    for i, record in enumerate(records):
        table.append(record)
        assert len(table._columns[0]) == (3 if i >= 2 else 0) and len(table) == i + 1
    assert table[4] == records[4] and len(table._columns[0]) == 5 and table == records


@settings(max_examples=60, deadline=None)
@given(st.lists(CACHE_ONLY, max_size=12), st.lists(CACHE_ONLY, max_size=5),
       st.booleans())
def test_extend_columns_reads_as_the_rows_appended(rows, before, as_numpy):
    """Records given by column (numpy arrays or plain sequences) after some appended one by
    one: the table reads as all of them appended in order."""
    table = RecordTable(CacheOnlyRecord, pending_rows=3)
    for row in before:
        table.append(row)
    columns = [list(values) for values in zip(*rows, strict=True)] if rows else \
        [[] for _ in CacheOnlyRecord._fields]
    if as_numpy:  # the number fields as the replay hands them: int64 / float64 arrays
        columns = [np.array(values, dtype=KINDS[name]) if KINDS[name] in (np.int64,
                   np.float64) else values
                   for name, values in zip(CACHE_ONLY_FIELDS, columns, strict=True)]
    table.extend_columns(columns)
    check_reads_as(table, before + rows)


CACHE_ONLY_FIELDS = CacheOnlyRecord._fields


def test_extend_columns_copies_once_into_an_empty_table():
    """Columns given to an empty table become its columns as one copy each (no copy of a
    copy): the caller's arrays stay theirs (changing them afterwards changes no record),
    and a second call appends to what the first one left."""
    n = 3
    ints = np.arange(n, dtype=np.int64)
    floats = np.linspace(0.0, 1.0, n)
    table = RecordTable(CacheOnlyRecord)
    given = [ints, [None] * n, ["completed"] * n, floats, ints, ints, ints, ints, ints, ints]
    table.extend_columns(given)
    table.extend_columns(given)
    ints[:] = -1
    floats[:] = -1.0
    assert [record.request_id for record in table] == [0, 1, 2, 0, 1, 2]
    assert [record.arrival_s for record in table] == [0.0, 0.5, 1.0] * 2
    assert table.column("cached_tokens").tolist() == [0, 1, 2, 0, 1, 2]


def test_extend_columns_checks_what_append_checks():
    """A float array for an int field goes value by value, refused as `append` refuses a
    float; an unsigned array for an int field too (it could exceed int64); a wrong count
    or length of columns is refused; a refused call adds nothing."""
    row = CacheOnlyRecord(1, None, "completed", 0.5, 10, 2, 3)
    table = RecordTable(CacheOnlyRecord)
    table.append(row)
    columns = [np.array([value]) if isinstance(value, (int, float)) else [value]
               for value in row]
    with pytest.raises(ValueError, match="9 columns for 10 fields"):
        table.extend_columns(columns[:-1])
    with pytest.raises(ValueError, match="different lengths"):
        table.extend_columns(columns[:-1] + [np.array([0, 0])])
    with pytest.raises(TypeError):
        RecordTable(CacheOnlyRecord, pending_rows=1).append(row._replace(input_tokens=1.5))
    with pytest.raises(TypeError):
        table.extend_columns(columns[:4] + [np.array([1.5])] + columns[5:])
    big = np.array([2**63], dtype=np.uint64)
    with pytest.raises(OverflowError):
        table.extend_columns(columns[:4] + [big] + columns[5:])
    table.extend_columns(columns[:4] + [np.array([7], dtype=np.uint64)] + columns[5:])
    assert list(table) == [row, row._replace(input_tokens=7)]  # nothing of the refused


@pytest.mark.parametrize("before", [[], ["ok"], ["hit", "ok"]])
def test_a_column_of_one_value_goes_in_at_once(before):
    """A status column of one value and a session column of None only (a replay's, where
    the trace has no sessions) go in without a look at each value, known value or new,
    and the table reads as the rows appended; `column` is `columns()`'s one column."""
    table = RecordTable(CacheOnlyRecord, pending_rows=2)
    rows = [CacheOnlyRecord(i, f"s{i}", status, 0.5, 10, 1, 3, 0, 0, 0)
            for i, status in enumerate(before)]
    for row in rows:
        table.append(row)
    n = 5
    added = [CacheOnlyRecord(100 + i, None, "hit", 1.0 + i, 20, 2, i, 0, 0, 0)
             for i in range(n)]
    table.extend_columns([list(values) for values in zip(*added, strict=True)])
    check_reads_as(table, rows + added)
    assert table._columns[2].values_ == list(dict.fromkeys(before + ["hit"]))
    everything = table.columns()
    for name in CACHE_ONLY_FIELDS:
        one = table.column(name)
        assert (one.tolist() if hasattr(one, "tolist") else one.to_pylist()) == \
            (everything[name].tolist() if hasattr(everything[name], "tolist")
             else everything[name].to_pylist())
