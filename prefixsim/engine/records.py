"""Frozen per-request records the engines emit, and `RecordTable`, which keeps them by
column (8 bytes per number) so a replay of millions of requests stays small; metrics/ turns
them into DataFrames."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from struct import error as struct_error
from struct import pack
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from prefixsim.trace import Request

Status = str  # a record's status: few distinct values, kept as one byte per record
PENDING_ROWS = 4096  # records a RecordTable holds as tuples before it converts them


class CacheOnlyRecord(NamedTuple):
    """What cache-only replay observed for one request (no timing).

    A named tuple rather than a frozen dataclass: as immutable, and built about four times
    faster, which is a tenth of a plain cache-only replay's time (bench/cache_replay.py)."""

    request_id: int
    session_id: str | None
    status: Status
    arrival_s: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cached_tokens_host: int = 0  # of cached_tokens, loaded from host DRAM (R15)
    cached_tokens_disk: int = 0  # of cached_tokens, loaded from disk
    cached_tokens_pool: int = 0  # of cached_tokens, read from the shared KV pool (R18)


def hit_tokens(request: Request, num_matched_pages: int) -> int:
    """Tokens of the first `num_matched_pages` pages, capped at L - 1 (Part A rule 1: the
    cache-only cap is unaligned, unlike the timed engine's R3 cap, `Request.matchable_pages`).
    The one place it is written: both cache-only replays (cache_only.py step by step,
    cache_only_fast.py by segment) call it."""
    return min(request.prefix_tokens(num_matched_pages), request.input_tokens - 1)


def hit_token_array(inputs: np.ndarray, sizes: np.ndarray, matched: np.ndarray,
                    counts: np.ndarray) -> np.ndarray:
    """`hit_tokens` of many requests at once: prompt tokens, page size, matched pages and
    pages of each (Request.prefix_tokens, capped at L - 1)."""
    prefix = np.where(matched >= counts, inputs, matched * sizes)
    prefix[matched <= 0] = 0
    return np.minimum(prefix, inputs - 1)


class _Strings:
    """A column of optional strings: UTF-8 bytes one after another and their end offsets
    (None: a negative length marker), about 8 bytes + the text per value."""

    __slots__ = ("data", "ends", "none")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends = array("q")
        self.none = array("b")

    def append(self, value: str | None) -> None:
        if value is not None:
            self.data += value.encode()
        self.ends.append(len(self.data))
        self.none.append(value is None)

    def extend(self, values: Sequence[str | None]) -> None:
        """`append` of each of `values`, the bytes and offsets of all at once (a list of
        None only, as a trace without sessions gives, without a look at each)."""
        if type(values) is list and values.count(None) == len(values):
            self.ends.frombytes(np.full(len(values), len(self.data), np.int64).tobytes())
            self.none.frombytes(b"\x01" * len(values))
            return
        encoded = [b"" if value is None else value.encode() for value in values]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)),
                         dtype=np.int64) + len(self.data)
        self.data += b"".join(encoded)
        self.ends.frombytes(ends.tobytes())
        self.none.frombytes(bytes([value is None for value in values]))

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, index: int) -> str | None:
        if index < 0:
            index += len(self.ends)
        if self.none[index]:
            return None
        start = self.ends[index - 1] if index else 0
        return self.data[start:self.ends[index]].decode()

    def taken(self, order: np.ndarray) -> _Strings:
        """The values at the indices `order`, by numpy (no Python object per value)."""
        fresh = _Strings()
        if not len(order):
            return fresh
        ends = np.frombuffer(self.ends, dtype=np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        lengths = (ends - starts)[order]
        new_ends = np.cumsum(lengths, dtype=np.int64)
        gather = (np.repeat(starts[order] - (new_ends - lengths), lengths)
                  + np.arange(int(new_ends[-1]), dtype=np.int64))
        fresh.data = bytearray(np.frombuffer(self.data, dtype=np.uint8)[gather].tobytes()) \
            if len(self.data) else bytearray()
        fresh.ends = array("q", new_ends.tobytes())
        fresh.none = array("b", np.frombuffer(self.none, dtype=np.int8)[order].tobytes())
        return fresh

    def values(self) -> pa.StringArray:
        ends = np.frombuffer(self.ends, dtype=np.int64) if len(self.ends) else np.zeros(0,
                                                                                  np.int64)
        offsets = np.concatenate([[0], ends]).astype(np.int64)
        mask = np.frombuffer(self.none, dtype=np.int8).astype(bool) if len(self.none) \
            else np.zeros(0, bool)
        array_ = pa.LargeStringArray.from_buffers(
            len(ends), pa.py_buffer(offsets), pa.py_buffer(bytes(self.data)),
            pa.array(~mask).buffers()[1] if mask.any() else None,
            int(mask.sum()))
        return array_.cast(pa.string()) if len(self.data) < 2**31 else array_


class _Codes:
    """A column of few distinct strings (a status): one byte per value and the values."""

    __slots__ = ("codes", "values_", "index")

    def __init__(self) -> None:
        self.codes = array("b")
        self.values_: list[str] = []
        self.index: dict[str, int] = {}

    def append(self, value: str) -> None:
        self.codes.append(self._code(value))

    def _code(self, value: str) -> int:
        """`value`'s code, given it (the next one) if it is new."""
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.values_)
            self.values_.append(value)
        return code

    def extend(self, values: Sequence[str]) -> None:
        """`append` of each of `values`, the codes stored at once (a list of one value
        only, as a replay's statuses are, without a look at each)."""
        index = self.index
        if type(values) is list and values and values.count(values[0]) == len(values):
            code = self._code(values[0])
            self.codes.extend(array(self.codes.typecode, [code]) * len(values))
            return
        codes = []
        for value in values:
            code = index.get(value)
            if code is None:
                code = index[value] = len(self.values_)
                self.values_.append(value)
            codes.append(code)
        if len(self.values_) <= 128:  # one signed byte each, as `append` stores them
            self.codes.frombytes(bytes(codes))
        else:
            self.codes.extend(codes)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index: int) -> str:
        return self.values_[self.codes[index]]

    def taken(self, order: np.ndarray) -> _Codes:
        """The values at the indices `order`."""
        fresh = _Codes()
        fresh.values_, fresh.index = list(self.values_), dict(self.index)
        if len(order):
            fresh.codes = array("b", np.frombuffer(self.codes, dtype=np.int8)[order].tobytes())
        return fresh

    def values(self) -> pa.Array:
        codes = np.frombuffer(self.codes, dtype=np.int8) if len(self.codes) else \
            np.zeros(0, np.int8)
        return pa.array(np.array(self.values_ or [""], dtype=object)[codes], type=pa.string())


class RecordTable(Sequence):
    """Records of one type kept by column: an `array` of 8-byte numbers per int or float
    field, bytes and offsets per string field, a list per other field (optional numbers).
    A sequence of the record type to its readers (indexing and iterating build the named
    tuples on the fly, equality is element-wise), about 8 bytes per number instead of a
    Python object per record; `columns()` hands the numbers to numpy without a copy and
    the strings as Arrow arrays. Appended records wait as tuples until `pending_rows` of
    them (or a reader) come, then go into the columns a block at a time (`_extend`); every
    way out sees them all."""

    def __init__(self, record_type: type, pending_rows: int = PENDING_ROWS) -> None:
        self.record_type = record_type
        self.names = list(record_type._fields)
        self._columns: list = _columns_for(record_type)
        # appended records wait here as they came, and go into the columns a block at a
        # time (`_flush`): one conversion per column, not one per value
        self._pending: list[tuple] = []
        self._pending_rows = pending_rows

    def append(self, record: tuple) -> None:
        pending = self._pending
        pending.append(record)
        if len(pending) >= self._pending_rows:
            self._flush()

    def _flush(self) -> None:
        """Move the pending records into the columns."""
        rows = self._pending
        if rows:
            self._pending = []
            for column, values in zip(self._columns, zip(*rows, strict=True), strict=True):
                _extend(column, values)

    def extend_columns(self, values: Sequence[Sequence]) -> None:
        """Append many records given by column: one sequence per field, in field order, all
        of one length; the same columns as `append` of each row would leave. A numpy array
        of whole numbers for an int field, of numbers for a float field, goes in at once;
        any other number column value by value, refused as `append` refuses a value, and
        before any column has changed."""
        if len(values) != len(self._columns):
            raise ValueError(f"{len(values)} columns for {len(self._columns)} fields")
        lengths = {len(v) for v in values}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        converted = []
        for column, given in zip(self._columns, values, strict=True):
            if isinstance(column, array):
                if isinstance(given, np.ndarray) \
                        and given.dtype.kind in _NUMPY_KINDS[column.typecode]:
                    given = array_of(given, column.typecode)
                else:
                    numbers = array(column.typecode)
                    _extend(numbers, tuple(given))
                    given = numbers
            converted.append(given)
        self._flush()
        columns = self._columns
        for i, given in enumerate(converted):
            if isinstance(given, array) and not len(columns[i]):
                columns[i] = given  # an empty column takes the new one as it is: no copy
            else:
                columns[i].extend(given)

    def __len__(self) -> int:
        return len(self._columns[0]) + len(self._pending)

    def __getitem__(self, index):
        if self._pending:
            self._flush()
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.record_type(*(column[index] for column in self._columns))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def columns(self) -> dict[str, object]:
        """Column name -> numpy array (numbers, no copy), Arrow string array or list."""
        self._flush()
        return {name: _column_values(column)
                for name, column in zip(self.names, self._columns, strict=True)}

    def column(self, name: str) -> object:
        """One column as `columns()` gives it, the others left alone."""
        self._flush()
        return _column_values(self._columns[self.names.index(name)])

    def drain(self) -> RecordTable:
        """The records so far, as a table of their own; this one starts empty (its bound
        `append` keeps working), so a streaming replay holds a chunk's records at a time."""
        self._flush()
        taken = RecordTable(self.record_type, self._pending_rows)
        taken._columns, self._columns = self._columns, taken._columns
        return taken

    def reorder(self, order: Sequence[int]) -> None:
        """Put the records in the order of the indices `order` (a permutation)."""
        self._flush()
        order = np.asarray(order, dtype=np.int64)
        for i, column in enumerate(self._columns):
            if isinstance(column, array):
                data = np.frombuffer(column, dtype=_DTYPES[column.typecode])[order]
                self._columns[i] = array(column.typecode, data.tobytes())
            elif isinstance(column, (_Strings, _Codes)):
                self._columns[i] = column.taken(order)
            else:
                self._columns[i] = [column[j] for j in order.tolist()]


def _columns_for(record_type: type) -> list:
    """An empty column per field of `record_type`, by its annotation."""
    hints = {name: getattr(hint, "__forward_arg__", hint)
             for name, hint in record_type.__annotations__.items()}
    return [_column(hints[name]) for name in record_type._fields]


def _extend(column, values: tuple) -> None:
    """Append `values` to `column` as its `append` would one by one: numbers packed at once
    by `struct` (which takes what an `array` takes: whole numbers in range for an int
    column, numbers for a float column); where it refuses one, value by value, to the
    error `append` raises."""
    if isinstance(column, array):
        try:
            packed = pack(f"={len(values)}{column.typecode}", *values)
        except struct_error:
            column.extend(values)  # raises as the array does
            return
        column.frombytes(packed)
    else:
        column.extend(values)


_TYPECODES = {"int": "q", "float": "d", int: "q", float: "d"}
_DTYPES = {"q": np.int64, "d": np.float64}
# numpy dtype kinds an array column takes without a check per value: signed integers for
# an int column (an unsigned one could exceed int64), integers and floats for a float one
_NUMPY_KINDS = {"q": "i", "d": "iuf"}


def array_of(values: np.ndarray, typecode: str) -> array:
    """`values` as an `array(typecode)` ("q": int64, "d": float64): one copy, from numpy's
    buffer (no `bytes` object in between)."""
    numbers = array(typecode)
    numbers.frombytes(np.ascontiguousarray(values, dtype=_DTYPES[typecode]).view(np.uint8))
    return numbers


_STRINGS = {"str", "str | None", str}


def _column(hint: object):
    if hint in _TYPECODES:
        return array(_TYPECODES[hint])
    if hint == "Status":
        return _Codes()
    if hint in _STRINGS:
        return _Strings()
    return []


def _column_values(column: object) -> object:
    """A stored column as `RecordTable.columns` gives it: numbers as a numpy array over the
    array's buffer (no copy), string columns as their `values()`, anything else as it is."""
    if isinstance(column, array):
        return np.frombuffer(column, dtype=_DTYPES[column.typecode]) \
            if len(column) else np.zeros(0, _DTYPES[column.typecode])
    return column.values() if isinstance(column, (_Strings, _Codes)) else column
