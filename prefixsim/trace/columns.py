"""Requests kept by column: `RequestColumns`, a Sequence[Request] over numpy arrays.

A list of `Request` records costs about a kilobyte a request on a long-prompt trace (the
record, its tuple of page ids and an int object per id); here the page ids of every request
lie in one int64 array with offsets, and each other field in an array of its own (strings
as Arrow arrays): about 8 bytes a page and 50 a request. A request is built only when it is
read (indexing, iterating, slicing a list out), so the engines and every consumer of a
Sequence[Request] take it as they took a list. `ColumnsBuilder` appends rows as a reader
validates them. This module reads no file.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from prefixsim.trace.record import Request

ID_BLOCK = 4096  # requests whose page ids are taken out at once (as ints; the chunk replay:
# as one int64 array)


class RequestColumns(Sequence):
    """Requests 0.. as columns; request i's pages are page_ids[page_start[i]:page_start[i+1]]
    (ids as numpy int64). `sessions` and `namespaces` are Arrow string arrays (or None when
    no request has one)."""

    def __init__(self, request_ids: np.ndarray, arrival_s: np.ndarray,
                 input_tokens: np.ndarray, output_tokens: np.ndarray,
                 page_size_tokens: np.ndarray, page_start: np.ndarray, page_ids: np.ndarray,
                 sessions: pa.Array | None = None, namespaces: pa.Array | None = None) -> None:
        self.request_ids = request_ids
        self.arrival_s = arrival_s
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.page_size_tokens = page_size_tokens
        self.page_start = page_start
        self.page_ids = page_ids
        self.sessions = sessions
        self.namespaces = namespaces

    def __len__(self) -> int:
        return len(self.arrival_s)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.take(np.arange(len(self))[index])
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("request index out of range")
        start, end = int(self.page_start[index]), int(self.page_start[index + 1])
        return Request(int(self.request_ids[index]), float(self.arrival_s[index]),
                       int(self.input_tokens[index]), int(self.output_tokens[index]),
                       tuple(self.page_ids[start:end].tolist()),
                       int(self.page_size_tokens[index]), _text(self.sessions, index),
                       _text(self.namespaces, index))

    def __iter__(self) -> Iterator[Request]:
        ids, arrivals = self.request_ids.tolist(), self.arrival_s.tolist()
        inputs, outputs = self.input_tokens.tolist(), self.output_tokens.tolist()
        sizes, starts = self.page_size_tokens.tolist(), self.page_start.tolist()
        pages = self.page_ids
        sessions = self.sessions.to_pylist() if self.sessions is not None else None
        namespaces = self.namespaces.to_pylist() if self.namespaces is not None else None
        for block in range(0, len(arrivals), ID_BLOCK):
            last = min(block + ID_BLOCK, len(arrivals))
            base = starts[block]
            # the block's ids as Python ints in one tuple: each request's is a slice of it
            block_ids = tuple(pages[base:starts[last]].tolist())
            for i in range(block, last):
                yield Request(ids[i], arrivals[i], inputs[i], outputs[i],
                              block_ids[starts[i] - base:starts[i + 1] - base], sizes[i],
                              None if sessions is None else sessions[i],
                              None if namespaces is None else namespaces[i])

    def take(self, indices: np.ndarray) -> RequestColumns:
        """The requests at `indices` (in that order), as columns."""
        indices = np.asarray(indices, dtype=np.int64)
        counts = np.diff(self.page_start)[indices]
        starts = self.page_start[indices]
        page_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        gather = (np.repeat(starts - page_start[:-1], counts)
                  + np.arange(int(page_start[-1]), dtype=np.int64))
        pick = pa.array(indices)
        return RequestColumns(
            self.request_ids[indices], self.arrival_s[indices], self.input_tokens[indices],
            self.output_tokens[indices], self.page_size_tokens[indices], page_start,
            self.page_ids[gather],
            None if self.sessions is None else self.sessions.take(pick),
            None if self.namespaces is None else self.namespaces.take(pick))

    def renumbered(self, shift_s: float) -> RequestColumns:
        """The same requests with ids 0.. in order and arrivals shifted by `shift_s`."""
        return RequestColumns(np.arange(len(self), dtype=np.int64), self.arrival_s + shift_s,
                              self.input_tokens, self.output_tokens, self.page_size_tokens,
                              self.page_start, self.page_ids, self.sessions, self.namespaces)

    @property
    def num_pages(self) -> int:
        return int(self.page_start[-1])


def _text(values: pa.Array | None, index: int) -> str | None:
    if values is None:
        return None
    return values[index].as_py()


class ColumnsBuilder:
    """Rows appended one by one (C arrays, no Python object per page id), then `build()`."""

    def __init__(self) -> None:
        self.arrival_s = array("d")
        self.input_tokens = array("q")
        self.output_tokens = array("q")
        self.page_size_tokens = array("q")
        self.counts = array("q")
        self.page_ids = array("q")
        self.sessions: list[str | None] = []
        self.namespaces: list[str | None] = []
        self.any_session = self.any_namespace = False

    def __len__(self) -> int:
        return len(self.arrival_s)

    def append(self, arrival_s: float, input_tokens: int, output_tokens: int,
               page_ids: Sequence[int], page_size_tokens: int, session: str | None = None,
               namespace: str | None = None) -> None:
        self.arrival_s.append(arrival_s)
        self.input_tokens.append(input_tokens)
        self.output_tokens.append(output_tokens)
        self.page_size_tokens.append(page_size_tokens)
        self.counts.append(len(page_ids))
        self.page_ids.extend(page_ids)
        self.sessions.append(session)
        self.namespaces.append(namespace)
        if session is not None:
            self.any_session = True
        if namespace is not None:
            self.any_namespace = True

    def build(self) -> RequestColumns:
        """The rows so far as columns (request ids in row order)."""
        counts = _numpy(self.counts, np.int64)
        return RequestColumns(
            np.arange(len(counts), dtype=np.int64), _numpy(self.arrival_s, np.float64),
            _numpy(self.input_tokens, np.int64), _numpy(self.output_tokens, np.int64),
            _numpy(self.page_size_tokens, np.int64),
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            _numpy(self.page_ids, np.int64),
            pa.array(self.sessions, type=pa.string()) if self.any_session else None,
            pa.array(self.namespaces, type=pa.string()) if self.any_namespace else None)


def _numpy(values: array, dtype) -> np.ndarray:
    return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype)


def as_columns(requests: Sequence[Request]) -> RequestColumns:
    """Any sequence of requests as columns (keeping their ids)."""
    if isinstance(requests, RequestColumns):
        return requests
    builder = ColumnsBuilder()
    for request in requests:
        builder.append(request.arrival_s, request.input_tokens, request.output_tokens,
                       request.page_ids, request.page_size_tokens, request.session_id,
                       request.namespace)
    columns = builder.build()
    columns.request_ids = np.fromiter((r.request_id for r in requests), dtype=np.int64,
                                      count=len(requests))
    return columns


def concat_columns(parts: Sequence[RequestColumns]) -> RequestColumns:
    """Columns one after another (request ids 0.. in order)."""
    if len(parts) == 1:
        return parts[0].renumbered(0.0)
    counts = np.concatenate([np.diff(p.page_start) for p in parts])
    return RequestColumns(
        np.arange(sum(len(p) for p in parts), dtype=np.int64),
        np.concatenate([p.arrival_s for p in parts]),
        np.concatenate([p.input_tokens for p in parts]),
        np.concatenate([p.output_tokens for p in parts]),
        np.concatenate([p.page_size_tokens for p in parts]),
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        np.concatenate([p.page_ids for p in parts]),
        _joined([p.sessions for p in parts], parts),
        _joined([p.namespaces for p in parts], parts))


def _joined(texts: list[pa.Array | None], parts: Sequence[RequestColumns]) -> pa.Array | None:
    """One string column from the parts' (a part without one: nulls), or None if none has
    one."""
    if all(t is None for t in texts):
        return None
    return pa.concat_arrays([t if t is not None else pa.nulls(len(p), pa.string())
                             for t, p in zip(texts, parts, strict=True)])
