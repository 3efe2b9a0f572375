"""A cache-only run over a streamed trace: the trace is read, replayed and written chunk by
chunk, so memory holds the cache, a chunk or two and a few numbers a request.

`replay_streamed(config, stream, sink, ...)` is the streamed road of `simulate`
(pipeline/road.py) for a cache-only run whose trace `trace/stream.py` can stream: it replays
the chunks through the run's cache in one pass (the same replay loop, its record table
drained after every chunk), hands each chunk's rows to the run's sink (pipeline/sinks.py),
and feeds the reference figures as it goes (the unbounded bound without a TTL:
analysis/seen_pages.py; the trace's distinct prefix tokens: trace/pages.py). It raises
NotStreamable when the run must read its trace whole; `simulate` then discards the sink's
rows and reads the trace whole, which gives the same results (tested request by request), so
the stream is only ever a faster, smaller way to them.

Kept per request for the summary: arrival, prompt, output and hit tokens (and the tier
hits of a run with tiers or a pool), 32-56 bytes a request, so every summary figure is
computed by the same code on the same numbers as an in-memory run's (bit-identical; the
request rows themselves went to the sink). Belady, as the run's policy or its bound, learns
the future from a next-use pass before the replay (analysis/next_uses.py: files in a
temporary folder in the sink's scratch folder, removed after the run; cache/belady.py:
StreamedBelady); the bound is one more pass. Not streamed (read whole): a pool with an
offline policy, a time window, formats other than Mooncake JSONL and Parquet, and traces the
stream gives up on (trace/stream.py). With a TTL or request classes the unbounded bound is a
second pass over the file (an unbounded replay).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from prefixsim.analysis.bounds import accepted
from prefixsim.analysis.next_uses import NextUses
from prefixsim.analysis.seen_pages import SeenPages
from prefixsim.cache.belady import StreamedBelady
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.config import RunConfig
from prefixsim.engine import CacheOnlyRecord, ProgressCallback, replay_cache_only
from prefixsim.engine.cache_only_fast import replay_segment_chunks
from prefixsim.engine.records import RecordTable
from prefixsim.metrics.facts import Bounds
from prefixsim.metrics.requests import records_frame, tier_hits
from prefixsim.metrics.summary import summarize
from prefixsim.metrics.timeseries import cache_only_interval, cache_only_timeseries
from prefixsim.pipeline.build import (
    Components,
    accepted_tokens,
    build,
    build_cache,
    build_unbounded_cache,
    request_ttls,
)
from prefixsim.pipeline.cache_only import cache_only_facts
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.sinks import RowSink
from prefixsim.trace import Request, TraceData
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.pages import DistinctTokens
from prefixsim.trace.readers import check_prefix_model_format
from prefixsim.trace.stream import NotStreamable, TraceStream, open_stream

OFFLINE_POLICIES = ("belady",)  # policies that read the future: the trace is read whole
KEPT = ("arrival_s", "input_tokens", "output_tokens", "cached_tokens")  # per request


def streamable(config: RunConfig) -> bool:
    """Whether a run of `config` may stream its trace (before looking at the file). A timed
    run (pipeline/streamed_timed.py) may not with an offline policy (it learns the whole
    trace first) or with a scaled clock and a TTL (the bound then runs on that clock)."""
    cache = config.cache
    if (cache.pool is not None and cache.pool.policy in OFFLINE_POLICIES
            or config.trace.time_window is not None or config.trace.path is None
            or config.trace.format is None):
        return False
    if config.cache_only:
        return True
    ttl = cache.ttl_s is not None or any(c.ttl_s is not None for c in cache.classes)
    return cache.policy not in OFFLINE_POLICIES and not (
        config.engine.time_scale != 1.0 and ttl)


def _needs_next_uses(config: RunConfig) -> bool:
    """Whether the run replays belady (as its policy or its bound): a next-use pass first."""
    return config.cache.policy in OFFLINE_POLICIES or config.cache.bounds


def open_trace_stream(config: RunConfig) -> TraceStream | None:
    """The stream a run of `config` would read (None: it reads the trace whole)."""
    trace = config.trace
    if not streamable(config):
        return None
    check_prefix_model_format(trace.format, trace.prefix_model)  # the stream has no model
    return open_stream(Path(trace.path), trace.format, trace.block_size, trace.max_requests,
                       trace.max_pages)


def replay_streamed(config: RunConfig, stream: TraceStream, sink: RowSink,
                    on_progress: ProgressCallback, command: str | None = None) -> RunResult:
    """Run cache-only `config` (resolved: trace format known) over `stream`, handing each
    chunk's request rows to `sink`; the result's `requests` frame holds the KEPT columns
    only. Raises NotStreamable (pipeline/road.py then reads the trace whole) when the trace
    must be read whole."""
    if not _needs_next_uses(config):
        return _simulate(config, stream, sink, on_progress, command)
    with tempfile.TemporaryDirectory(prefix=".next-uses-", dir=sink.scratch_dir) as tmp:
        uses = NextUses.build(stream, Path(tmp))
        return _simulate(config, stream, sink, on_progress, command, uses)


def _simulate(config: RunConfig, stream: TraceStream, rows: RowSink,
              on_progress: ProgressCallback, command: str | None,
              uses: NextUses | None = None) -> RunResult:
    started = time.perf_counter()
    belady = StreamedBelady() if config.cache.policy in OFFLINE_POLICIES else None
    # belady learns the future from `uses`; the stream checks every chunk's ids chained
    # before it yields the chunk (trace/stream.py), so the cache keeps no resident-id set
    parts = build(config, [], policy=belady, chained=True)
    cache, tiers = parts.caches[0], parts.tiers[0]
    start = stream.first_arrival_s()
    duration_s = stream.last_arrival_s(start)
    interval_s = cache_only_interval(duration_s, config.engine.sample_interval_s)
    kept = KEPT + _tier_columns(parts)
    sink = _KeptRows(rows, kept)
    records = RecordTable(CacheOnlyRecord)
    capacity = config.cache.capacity_tokens
    tally = TraceTally(parts, with_seen=capacity is not None and cache.ttl is None
                   and parts.rules is None)

    def chunks() -> Iterator[RequestColumns]:
        for chunk in stream:
            tally.add(chunk)
            yield chunk
        if tally.last_arrival_s != duration_s:
            raise NotStreamable("the last row is not the last arrival")

    def requests() -> Iterator[Request]:
        for chunk in _told_next_uses(chunks(), belady, uses):
            yield from chunk
            sink.write(records_frame(records.drain(), CacheOnlyRecord))  # its last record

    states = None if interval_s is None else []
    orphan_tokens = None  # read from the cache for the summary, unless it is cleared first
    try:
        if (isinstance(cache, SegmentCache) and parts.rules is None and tiers is None
                and parts.shared_pool is None):  # by column: no Request, no record
            replay_segment_chunks(
                _chunks_told(chunks(), belady, uses), cache,
                lambda chunk, cached: sink.write(_chunk_frame(chunk, cached)), on_progress,
                sample_interval_s=interval_s, states=states)
            orphan_tokens = cache.orphan_tokens()
            cache.clear()  # its tree goes now, before the summary (SegmentCache.clear)
        else:
            states = replay_cache_only(requests(), cache, on_progress=on_progress,
                                       tiers=tiers, rules=parts.rules,
                                       sample_interval_s=interval_s,
                                       pool=parts.shared_pool, records=records).states
    finally:
        sink.close()
    frame = sink.frame()
    samples, sampling = cache_only_timeseries(states, frame, capacity,
                                              config.engine.sample_interval_s, interval_s,
                                              duration_s)
    hbm_rate = tier_hits(frame)["cache_hit_tokens_hbm"] / max(tally.query, 1)
    if capacity is None:
        unbounded = hbm_rate
    elif tally.seen is not None:
        unbounded = tally.seen_hits / tally.seen_query if tally.seen_query else 0.0
    else:
        unbounded = unbounded_pass_rate(parts, stream)
    distinct = tally.distinct.total
    tally.seen = tally.distinct = None  # their tables go before the summary's arrays come
    belady_rate = _belady_pass_rate(parts, stream, uses) if config.cache.bounds else None
    facts = cache_only_facts(
        parts, frame, cache.counters, Bounds(unbounded, belady_rate), sampling,
        tally.ttls or [], orphan_tokens,
        num_requests=len(frame), trace=TraceData([], stream.format, time_shift_s=start),
        command=command, distinct_prefix_tokens=distinct)
    facts = dataclasses.replace(facts, wall_time_s=time.perf_counter() - started)
    return RunResult(requests=frame, summary=summarize(facts), timeseries=samples,
                     config=config, streamed=True)


class TraceTally:
    """What a run feeds per chunk besides the replay: distinct prefix tokens, the
    unbounded bound without a TTL (`with_seen`), each request's TTL (with pricing), the
    query tokens and the last arrival."""

    def __init__(self, parts: Components, with_seen: bool) -> None:
        self.parts = parts
        self.distinct = DistinctTokens()
        self.seen = SeenPages() if with_seen else None
        self.seen_hits = self.query = 0
        self.accepted = accepted_tokens(parts)  # timed: the bound skips rejected requests
        self.seen_query = 0  # the query tokens of the requests the bound counts
        self.ttls: list[float | None] | None = [] if parts.pricing is not None else None
        self.last_arrival_s = 0.0

    def add(self, chunk: RequestColumns) -> None:
        self.distinct.add(chunk)
        self.query += int(chunk.input_tokens.sum())
        self.last_arrival_s = float(chunk.arrival_s[-1])
        if self.seen is not None:
            served = accepted(chunk, self.accepted)
            counts = np.diff(served.page_start)
            self.seen_hits += int(self.seen.hit_arrays(
                served.page_ids, counts, served.input_tokens, served.page_size_tokens).sum())
            self.seen_query += int(served.input_tokens.sum())
        if self.ttls is not None:
            self.ttls.extend(request_ttls(self.parts.config.cache, self.parts.rules, chunk))


class _KeptRows:
    """Request rows to the run's sink, a chunk at a time, keeping the `kept` columns."""

    def __init__(self, rows: RowSink, kept: tuple[str, ...]) -> None:
        self.rows, self.kept = rows, kept
        self.parts: list[dict[str, np.ndarray]] = []

    def write(self, frame: pd.DataFrame) -> None:
        if not len(frame):
            return
        self.rows.write(frame)
        # copies: a view would pin the frame's whole block of columns
        self.parts.append({name: frame[name].to_numpy().copy() for name in self.kept})

    def close(self) -> None:
        self.rows.close()

    def frame(self) -> pd.DataFrame:
        """The kept columns of every row, and `status` (a cache-only request completes)."""
        columns = {name: np.concatenate([part[name] for part in self.parts])
                   if self.parts else np.zeros(0) for name in self.kept}
        size = len(columns[self.kept[0]])
        columns["status"] = pd.Categorical.from_codes(np.zeros(size, dtype=np.int8),
                                                      ["completed"])
        return pd.DataFrame(columns)


def _chunk_frame(chunk: RequestColumns, cached: np.ndarray) -> pd.DataFrame:
    """The rows `records_frame` makes of a chunk's CacheOnlyRecords (same columns and
    types), from its columns and hit tokens (no lower tier: a SegmentCache run)."""
    size = len(chunk)
    sessions = chunk.sessions if chunk.sessions is not None else pa.nulls(size, pa.string())
    status = pa.array(["completed"], type=pa.string()).take(np.zeros(size, dtype=np.int64))
    zeros = np.zeros(size, dtype=np.int64)
    return pd.DataFrame({
        "request_id": chunk.request_ids,
        "session_id": pd.array(sessions, dtype=pd.ArrowDtype(pa.string())),
        "status": pd.array(status, dtype=pd.ArrowDtype(pa.string())),
        "arrival_s": chunk.arrival_s, "input_tokens": chunk.input_tokens,
        "output_tokens": chunk.output_tokens, "cached_tokens": cached,
        "cached_tokens_host": zeros, "cached_tokens_disk": zeros, "cached_tokens_pool": zeros,
    }, columns=list(CacheOnlyRecord._fields))


def _tier_columns(parts: Components) -> tuple[str, ...]:
    """The per-tier hit columns a run can fill (the others are all zero)."""
    names: tuple[str, ...] = ()
    if parts.tiers[0] is not None:
        names += ("cached_tokens_host", "cached_tokens_disk")
    if parts.shared_pool is not None:
        names += ("cached_tokens_pool",)
    return names


def _told_next_uses(chunks: Iterable[RequestColumns], belady: StreamedBelady | None,
                    uses: NextUses | None) -> Iterator[Iterable[Request]]:
    """`chunks` as requests, telling `belady` (when there is one) each request's next uses
    just before the replay takes it."""
    if belady is None or uses is None:
        yield from chunks
        return
    for chunk in _chunks_told(chunks, belady, uses):
        yield _telling(chunk, belady)


def _chunks_told(chunks: Iterable[RequestColumns], belady: StreamedBelady | None,
                 uses: NextUses | None) -> Iterator[RequestColumns]:
    """`chunks` as they are, telling `belady` (when there is one) each chunk's next uses
    just before the replay takes it (a replay by chunk on SegmentCache)."""
    if belady is None or uses is None:
        yield from chunks
        return
    first = 0
    for chunk in chunks:
        values, offsets = uses.chunk(first, len(chunk))
        belady.begin_chunk(first, values, offsets)
        first += len(chunk)
        yield chunk


def _telling(chunk: RequestColumns, belady: StreamedBelady) -> Iterator[Request]:
    for i, request in enumerate(chunk):
        belady.begin_request(i)
        yield request


def _belady_pass_rate(parts: Components, stream: TraceStream, uses: NextUses | None
                      ) -> float:
    """`cache_belady_token_hit_rate` (the bound): belady at the run's capacity, with its
    TTL, mode and request classes and no tiers or pool, over the file read again."""
    if uses is None:
        raise AssertionError("the belady bound needs the next-use pass")
    config = parts.config.cache
    belady = StreamedBelady()
    cache = build_cache(config.model_copy(update={"policy": "belady", "policy_params": {},
                                                  "pool": None}),
                        replay_only=True, policy=belady, chained=True)
    return _pass_rate(parts, stream, cache, belady, uses)


def unbounded_pass_rate(parts: Components, stream: TraceStream) -> float:
    """The unbounded bound with a TTL or request classes: an unbounded replay over the
    file read again, its records summed chunk by chunk."""
    limit = accepted_tokens(parts)  # timed: a request a replica rejects meets no cache
    return _pass_rate(parts, (accepted(chunk, limit) for chunk in stream),
                      build_unbounded_cache(parts.config.cache, chained=True))


def _pass_rate(parts: Components, stream: Iterable[RequestColumns], cache,
               belady: StreamedBelady | None = None, uses: NextUses | None = None) -> float:
    """Token hit rate of one more replay of the file through `cache` (with the run's
    request classes), its records summed chunk by chunk."""
    records = RecordTable(CacheOnlyRecord)
    sums = [0, 0]
    if isinstance(cache, SegmentCache) and parts.rules is None:  # by column: no Request
        def tally(chunk: RequestColumns, cached: np.ndarray) -> None:
            sums[0] += int(np.sum(cached))
            sums[1] += int(np.sum(chunk.input_tokens))

        replay_segment_chunks(_chunks_told(stream, belady, uses), cache, tally)
        return sums[0] / sums[1] if sums[1] else 0.0

    def add(table: RecordTable) -> None:
        columns = table.columns()
        sums[0] += int(np.sum(columns["cached_tokens"]))
        sums[1] += int(np.sum(columns["input_tokens"]))

    def requests() -> Iterator[Request]:
        for chunk in _told_next_uses(stream, belady, uses):
            yield from chunk
            add(records.drain())

    replay_cache_only(requests(), cache, rules=parts.rules, records=records)
    return sums[0] / sums[1] if sums[1] else 0.0
