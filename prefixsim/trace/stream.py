"""A trace read chunk by chunk, in arrival order, for runs that never hold the whole trace.

`open_stream(config)` gives a `TraceStream` for a Mooncake JSONL or Parquet file that the
fast readers can take (mooncake_fast.py, parquet.py), or None when the run must read the
trace whole (another format, a time window; the caller decides that for its own options).
Iterating the stream yields `RequestColumns` chunks (Arrow's JSON blocks, Parquet's row
groups) with request ids numbered 0.. across chunks and arrivals shifted so the first is at
t = 0: exactly the requests `read_trace` returns for the same file, chunk by chunk. It can be
iterated again (a second pass re-reads the file).

What `read_trace` does with the whole trace in hand, the stream checks as it goes and gives
up on with `NotStreamable` (the caller then reads the trace whole, whose exact path names
the line of any error): a chunk the fast path would not take, ids that are not chained,
arrivals out of order (`read_trace` would sort them), more than one page size, a span over
MAX_SPAN_S. The last arrival (what a cache-only run needs up front for its sampling
interval) comes from the file's last row: the last line of a JSONL file, the last needed
row of a Parquet file. Memory: a chunk or two and the chain table (trace/chains.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq

from prefixsim.trace.chains import ChunkChains
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.fields import MAX_TIME
from prefixsim.trace.mooncake_fast import BLOCK_BYTES, columns_of, record_lines
from prefixsim.trace.parquet import (
    KNOWN,
    UNREADABLE,
    _check_sizes,
    _prefetched,
    fast_sessions,
    id_span,
)
from prefixsim.trace.readers import MAX_SPAN_S

STREAMED_FORMATS = ("mooncake", "parquet")
DEFAULT_BLOCK_SIZE = 512  # Mooncake's and Parquet's (readers' DEFAULT_BLOCK_SIZES)
FIRST_BLOCK_BYTES = 1 << 20  # what `first_arrival_s` parses to find the first row


class NotStreamable(Exception):
    """The trace needs the whole-trace reader (the message says why)."""


@dataclass(frozen=True)
class TraceStream:
    """A trace file read in chunks (see the module docstring). `total`: the requests to
    replay (Parquet's row count, a JSONL file's record lines), for progress bars."""

    path: Path
    format: str
    block_size: int
    max_requests: int | None
    total: int | None

    def last_arrival_s(self, start_s: float) -> float:
        """Arrival of the last request, shifted by the first's `start_s`, as read_trace
        computes it (valid once iteration found the trace in order)."""
        stamp = _last_stamp_parquet(self) if self.format == "parquet" else _last_stamp_jsonl(self)
        return float(np.float64(stamp) / 1000.0 + (-start_s))

    def first_arrival_s(self) -> float:
        """Unshifted arrival of the first request (the time shift). A JSON-lines file's is
        read from its first megabyte when that parses (the first chunk of BLOCK_BYTES
        took half a second at 1M requests); otherwise, and for Parquet, from the first
        chunk as the iteration reads it. The same number either way: the first row,
        through `columns_of`."""
        if self.format != "parquet" and self.max_requests != 0:
            quick = self._first_arrival_quick()
            if quick is not None:
                return quick
        for chunk in self._raw_chunks():
            if len(chunk):
                return float(chunk.arrival_s[0])
        raise NotStreamable("the trace holds no requests")

    def _first_arrival_quick(self) -> float | None:
        """The first row's arrival from the file's first FIRST_BLOCK_BYTES, or None when
        they do not parse into a plain first row (a longer line, other types: the caller
        then reads the first chunk)."""
        try:
            reader = pj.open_json(self.path,
                                  read_options=pj.ReadOptions(block_size=FIRST_BLOCK_BYTES,
                                                              use_threads=False))
            for batch in reader:
                if batch.num_rows:
                    columns = columns_of(batch.slice(0, 1), self.block_size)
                    return None if columns is None else float(columns.arrival_s[0])
        except (pa.ArrowException, OSError, ValueError):
            return None
        return None

    def __iter__(self) -> Iterator[RequestColumns]:
        chains = ChunkChains()
        if self.format == "parquet":
            try:
                span = id_span(pq.ParquetFile(self.path), self.max_requests)
            except UNREADABLE:
                span = None  # _batches says what is wrong
            if span is not None:
                chains.expect(*span)
        first = 0
        latest = -np.inf
        start: float | None = None
        size: int | None = None
        pending: RequestColumns | None = None
        for chunk in self._raw_chunks():
            if not len(chunk):
                continue
            arrivals = chunk.arrival_s
            if arrivals[0] < latest or np.any(arrivals[1:] < arrivals[:-1]):
                raise NotStreamable("arrivals out of order")
            if size is None:
                size = int(chunk.page_size_tokens[0])
            if np.any(chunk.page_size_tokens != size):
                raise NotStreamable("more than one page size")
            if start is None:
                start = float(arrivals[0])
            latest = float(arrivals[-1])
            if latest - start > MAX_SPAN_S:
                raise NotStreamable("arrivals span too long")
            starts = chunk.page_start[:-1][np.diff(chunk.page_start) > 0]
            if not chains.wait():
                raise NotStreamable("hash ids are not chained")
            chains.check_async(chunk.page_ids, starts)  # overlaps the last chunk's replay
            shifted = chunk.renumbered(-start)
            shifted.request_ids = shifted.request_ids + first
            first += len(chunk)
            if pending is not None:
                yield pending
            pending = shifted
        if not chains.wait():
            raise NotStreamable("hash ids are not chained")
        if pending is None:
            raise NotStreamable("the trace holds no requests")
        yield pending

    def _raw_chunks(self) -> Iterator[RequestColumns]:
        """The file's chunks as the fast path reads them, unshifted, up to max_requests."""
        rows = 0
        limit = self.max_requests
        for batch in self._batches():
            if limit is not None and rows + batch.num_rows > limit:
                batch = batch.slice(0, limit - rows)
            columns = columns_of(batch, self.block_size)
            if columns is None:
                raise NotStreamable("a chunk the fast reader does not take")
            rows += batch.num_rows
            yield columns
            if limit is not None and rows >= limit:
                return

    def _batches(self) -> Iterator[pa.RecordBatch]:
        try:
            if self.format == "parquet":
                handle = pq.ParquetFile(self.path)
                names = [name for name in KNOWN if name in handle.schema_arrow.names]
                for table in _prefetched(handle, names):
                    yield from table.to_batches()
            else:
                yield from pj.open_json(self.path,
                                        read_options=pj.ReadOptions(block_size=BLOCK_BYTES))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise NotStreamable(f"unreadable ({exc})") from None


def open_stream(path: Path, format: str, block_size: int | None,
                max_requests: int | None, max_pages: int | None = None) -> TraceStream | None:
    """A stream over `path` (format already resolved), or None when its format is not
    read in chunks or a quick look says the fast reader would not take it."""
    if format not in STREAMED_FORMATS or not path.is_file():
        return None
    block = block_size or DEFAULT_BLOCK_SIZE
    if format == "parquet":
        try:
            handle = pq.ParquetFile(path)
        except UNREADABLE:
            return None  # the whole-trace reader says what is wrong
        if not fast_sessions(handle.schema_arrow):
            return None  # (a namespace column with a value gives up later, chunk by chunk)
        _check_sizes(path, handle, max_pages)  # the whole-trace reader's errors, from metadata
        rows = handle.metadata.num_rows
        total = rows if max_requests is None else min(rows, max_requests)
        return TraceStream(path, format, block, max_requests, total)
    if max_requests is not None:
        return None  # the last arrival would need a pass
    records = record_lines(path)
    if records is None:
        return None  # a line nested deeper than Mooncake's: the exact path says which
    return TraceStream(path, format, block, None, records)


def _last_stamp_parquet(stream: TraceStream) -> float:
    handle = pq.ParquetFile(stream.path)
    row = (stream.total or 0) - 1
    for group in range(handle.metadata.num_row_groups):
        rows = handle.metadata.row_group(group).num_rows
        if row < rows:
            column = handle.read_row_group(group, columns=["timestamp"]).column(0)
            return _plain_stamp(column[row].as_py())
        row -= rows
    raise NotStreamable("the trace holds no requests")


def _last_stamp_jsonl(stream: TraceStream) -> float:
    with stream.path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        block = 1 << 16
        tail = b""
        while size > 0:
            step = min(block, size)
            size -= step
            handle.seek(size)
            tail = handle.read(step) + tail
            lines = tail.rstrip().split(b"\n")
            if len(lines) > 1 or size == 0:
                try:
                    stamp = json.loads(lines[-1])["timestamp"]
                except (ValueError, KeyError, TypeError):
                    raise NotStreamable("the last line is not a plain record") from None
                return _plain_stamp(stamp)
            block *= 2
    raise NotStreamable("the trace holds no requests")


def _plain_stamp(stamp: object) -> float:
    """The last row's timestamp as a float, or NotStreamable unless it is one the fast
    reader takes (a finite number in [0, MAX_TIME]): a NaN or infinite last stamp would
    size the cache-only sampling grid before any chunk is checked; the whole-trace reader
    then names the line."""
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
        raise NotStreamable("the last timestamp is not a number")
    value = float(stamp)
    if not (math.isfinite(value) and 0 <= value <= MAX_TIME):
        raise NotStreamable("the last timestamp is out of range")
    return value
