"""Cache-only replay (docs/cache-semantics.md Part A) through a SegmentCache
(cache/segment_tree.py).

The same steps and records as `replay_cache_only`'s step-by-step loop, in one cache call per
request: match (splitting the segment where the match ends), refresh the path, evict leaf
pages while the new pages do not fit (the matched path protected), insert the rest as one
segment. `replay_cache_only` hands a SegmentCache here; no tiers, no rules.
Requests kept by column (RequestColumns, as the loader returns a trace, and each chunk of a
streamed one) are replayed a block of requests at a time: the block's ids become one int64
`array`, each request's ids a part of it (`access(ids, ..., first, stop)`: no slice made),
with no Request and no int object per page.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable

import numpy as np

from prefixsim.cache.cache_types import ChainConflict
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine.cache_samples import end_of_replay, gap_rows, state_row
from prefixsim.engine.records import (
    CacheOnlyRecord,
    RecordTable,
    array_of,
    hit_token_array,
    hit_tokens,
)
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.columns import ID_BLOCK, RequestColumns


def replay_segments(
    requests: Iterable[Request],
    cache: SegmentCache,
    on_progress=None,
    progress_every: int = 2000,
    sample_interval_s: float | None = None,
    states: list[tuple] | None = None,
    records: RecordTable | None = None,
) -> RecordTable:
    """Replay `requests` (in arrival order; any iterable) through `cache`; one record per
    request, kept by column. With
    `sample_interval_s`, the state rows of the timeseries are appended to `states`
    (engine/cache_samples.py; as `replay_cache_only` records them step by step).
    `records`: the (empty) table to append to, as `replay_cache_only` takes it."""
    if records is None:
        records = RecordTable(CacheOnlyRecord)
    if isinstance(requests, RequestColumns):  # the ids read a block at a time, no Request
        _column_records(requests, cache, on_progress, progress_every, sample_interval_s,
                        states, records)
        return records
    append = records.append
    access = cache.access
    position = -1
    upcoming = 0.0 if sample_interval_s is not None else math.inf
    for position, request in enumerate(requests):
        now = request.arrival_s
        if now > upcoming:  # the state so far holds from `upcoming` until `now`, TTL apart
            upcoming = gap_rows(cache, states, upcoming, now, sample_interval_s)
        page_ids = request.page_ids
        length = request.input_tokens
        size = request.page_size_tokens
        try:
            matched = access(page_ids, now, position, size, length)
        except ChainConflict as exc:
            raise InputError(
                f"request {request.request_id}: {exc} (hash ids are not chained)",
                field="hash_ids",
            ) from None
        cached = hit_tokens(request, matched)  # Part A rule 1: L - 1 at most
        append((request.request_id, request.session_id, "completed", now, length,
                request.output_tokens, cached, 0, 0, 0))
        if on_progress is not None and (position + 1) % progress_every == 0:
            on_progress(progress_every)
    end_of_replay(cache, states if sample_interval_s is not None else None, upcoming,
                  on_progress, (position + 1) % progress_every)
    return records


def _column_records(columns: RequestColumns, cache, on_progress, progress_every,
                    sample_interval_s, states, records: RecordTable) -> None:
    """`replay_segments` over requests kept by column: the chunk replay's `access` calls,
    then the records of all the requests appended at once, by column (the same table as
    the per-request loop's appends leave)."""
    hits = []
    _replay_chunks([columns], cache, lambda chunk, cached: hits.append(cached), on_progress,
                   progress_every, sample_interval_s, states)
    n = len(columns)
    sessions = (columns.sessions.to_pylist() if columns.sessions is not None
                else [None] * n)
    zeros = np.zeros(n, dtype=np.int64)
    records.extend_columns((columns.request_ids, sessions, ["completed"] * n,
                            columns.arrival_s, columns.input_tokens, columns.output_tokens,
                            hits[0], zeros, zeros, zeros))


def replay_segment_chunks(
    chunks: Iterable[RequestColumns],
    cache: SegmentCache,
    on_chunk: Callable[[RequestColumns, np.ndarray], None],
    on_progress=None,
    progress_every: int = 2000,
    sample_interval_s: float | None = None,
    states: list[tuple] | None = None,
) -> int:
    """`replay_segments` over requests kept by column, a chunk at a time, building no
    Request and no record: the same `access` calls in the same order, then the chunk's hit
    tokens at once (Part A's L - 1 cap, `hit_token_array`), handed to `on_chunk(chunk,
    cached_tokens)`. Returns the number of requests replayed. The replay makes no garbage
    cycles (its tree's, segment and parent, go when the cache is cleared or freed:
    SegmentCache.clear): callers run it with the cyclic collector paused
    (engine/gc_pause.py)."""
    return _replay_chunks(chunks, cache, on_chunk, on_progress, progress_every,
                          sample_interval_s, states)


def _replay_chunks(chunks, cache, on_chunk, on_progress, progress_every, sample_interval_s,
                   states) -> int:
    position = 0
    upcoming = 0.0 if sample_interval_s is not None else math.inf
    for chunk in chunks:
        # arrays of C numbers (read through typed memoryviews compiled; as Python floats
        # and ints, as `tolist` gave them, on the pure path): no object per value made
        arrivals, inputs = array_of(chunk.arrival_s, "d"), array_of(chunk.input_tokens, "q")
        sizes, starts = array_of(chunk.page_size_tokens, "q"), array_of(chunk.page_start, "q")
        count = len(arrivals)
        found = array("q", bytes(8 * count))  # matched pages per request (typed view: C)
        matched = found
        page_ids = np.asarray(chunk.page_ids, dtype=np.int64)  # no copy: int64 already
        for block in range(0, count, ID_BLOCK):  # a block's ids as one int64 array
            last = min(block + ID_BLOCK, count)
            base = starts[block]
            ids = array_of(page_ids[base:starts[last]], "q")  # a request's ids: a part of it
            for i in range(block, last):
                now = arrivals[i]
                if now > upcoming:  # the state so far holds from `upcoming` until `now`,
                    # TTL apart
                    upcoming = gap_rows(cache, states, upcoming, now, sample_interval_s)
                try:
                    matched[i] = cache.access(ids, now, position, sizes[i], inputs[i],
                                              starts[i] - base, starts[i + 1] - base)
                except ChainConflict as exc:
                    raise InputError(
                        f"request {int(chunk.request_ids[i])}: {exc} (hash ids are not "
                        "chained)", field="hash_ids",
                    ) from None
                position += 1
                if on_progress is not None and position % progress_every == 0:
                    on_progress(progress_every)
        on_chunk(chunk, hit_token_array(chunk.input_tokens, chunk.page_size_tokens,
                                        np.frombuffer(found, dtype=np.int64),
                                        np.diff(chunk.page_start)))
    if on_progress is not None:
        on_progress(position % progress_every)
    if sample_interval_s is not None:
        states.append(state_row(upcoming, cache))
    return position

