"""replay_segment_chunks (columns in, no Request or record built) against replay_segments,
and RecordTable.drain, which a streaming replay empties between chunks."""

from __future__ import annotations

import numpy as np
import pytest

from prefixsim.cache import POLICIES, TTLMode, TTLRule
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine import cache_only_fast
from prefixsim.engine.cache_only_fast import replay_segment_chunks, replay_segments
from prefixsim.engine.records import CacheOnlyRecord, RecordTable
from prefixsim.trace.columns import as_columns
from prefixsim.trace.generate import generate, load_preset


@pytest.mark.parametrize("capacity, ttl", [(200_000, None), (None, 20.0), (60_000, 5.0)])
def test_chunks_replay_like_requests(capacity, ttl, monkeypatch):
    monkeypatch.setattr(cache_only_fast, "ID_BLOCK", 97)  # several id blocks a chunk
    requests = generate(load_preset("chat"), 1500, seed=5)
    def cache() -> SegmentCache:
        rule = None if ttl is None else TTLRule(ttl, TTLMode.SLIDING)
        return SegmentCache(capacity, POLICIES.build("lru"), rule)

    whole = cache()
    states_whole: list[tuple] = []
    records = replay_segments(requests, whole, sample_interval_s=2.0, states=states_whole)
    chunked = cache()
    states: list[tuple] = []
    columns = as_columns(requests)
    cuts = [0, 1, 400, 401, 1100, len(requests)]
    chunks = [columns.take(np.arange(a, b)) for a, b in zip(cuts, cuts[1:], strict=False)]
    got: list[np.ndarray] = []
    progress: list[int] = []
    count = replay_segment_chunks(chunks, chunked, lambda chunk, cached: got.append(cached),
                                  progress.append, progress_every=300, sample_interval_s=2.0,
                                  states=states)
    assert count == len(requests) == sum(progress)
    assert np.concatenate(got).tolist() == [r.cached_tokens for r in records]
    assert states == states_whole
    assert chunked.counters == whole.counters


def test_drain_hands_over_the_records_and_keeps_appending():
    table = RecordTable(CacheOnlyRecord)
    append = table.append  # bound once, as the replay loops bind it
    append((0, "s", "completed", 0.0, 10, 1, 5, 0, 0, 0))
    append((1, None, "completed", 1.0, 20, 2, 0, 0, 0, 0))
    taken = table.drain()
    append((2, "t", "completed", 2.0, 30, 3, 9, 0, 0, 0))
    assert [r.request_id for r in taken] == [0, 1] and taken[1].session_id is None
    assert len(table) == 1 and table[0].session_id == "t" and table[0].cached_tokens == 9


@pytest.mark.parametrize("block", [1, 7, 4096])
def test_iterating_columns_gives_the_requests_across_id_blocks(block, monkeypatch):
    """RequestColumns turns a block of requests' ids into one tuple of Python ints and
    slices each request's from it: across block edges (a block of 1 and of 7 requests;
    some requests with no pages) iteration gives the requests the columns were made of,
    as indexing each one does."""
    from prefixsim.trace import Request, columns

    monkeypatch.setattr(columns, "ID_BLOCK", block)
    requests = generate(load_preset("chat"), 60, seed=9)
    requests[3] = Request(3, requests[3].arrival_s, 1, 1, (), 16)  # no pages
    made = as_columns(requests)
    assert list(made) == requests == [made[i] for i in range(len(made))]
    assert all(type(r.page_ids) is tuple for r in made)


@pytest.mark.parametrize("capacity, ttl", [(150_000, None), (None, 20.0)])
def test_columns_in_give_the_records_of_requests_in(capacity, ttl, monkeypatch):
    """replay_segments handed columns (as the loader returns a trace) replays them a block
    of ids at a time, building no Request: every record field, the state rows, the progress
    reports and the counters are those of the same requests handed in one by one."""
    monkeypatch.setattr(cache_only_fast, "ID_BLOCK", 61)
    requests = generate(load_preset("chat"), 900, seed=11)
    columns = as_columns(requests)
    assert columns.sessions is not None  # the session column is carried into the records

    def replay(source):
        rule = None if ttl is None else TTLRule(ttl, TTLMode.SLIDING)
        cache = SegmentCache(capacity, POLICIES.build("lru"), rule)
        states: list[tuple] = []
        progress: list[int] = []
        records = replay_segments(source, cache, progress.append, progress_every=250,
                                  sample_interval_s=2.0, states=states)
        return list(records), states, progress, cache.counters

    by_request, by_column = replay(requests), replay(columns)
    assert by_column[0] == by_request[0] and len(by_column[0]) == len(requests)
    assert by_column[1:] == by_request[1:]
    assert sum(r.cached_tokens for r in by_column[0]) > 0


def test_an_empty_column_set_replays_to_no_record():
    cache = SegmentCache(100, POLICIES.build("lru"))
    states: list[tuple] = []
    records = replay_segments(as_columns([]), cache, sample_interval_s=1.0, states=states)
    assert len(records) == 0 and states == [(0.0, 0, 0, 0)]


def test_ids_of_a_narrower_integer_type_are_read_as_their_values():
    """The block's ids are copied into an int64 array: a column of int32 ids (not what the
    readers make, but a RequestColumns a caller may build) replays as its int64 copy."""
    requests = generate(load_preset("chat"), 200, seed=3)
    wide = as_columns(requests)
    narrow = as_columns(requests)
    narrow.page_ids = wide.page_ids.astype(np.int32)
    assert (narrow.page_ids == wide.page_ids).all()

    def hits(columns) -> list[int]:
        cache = SegmentCache(40_000, POLICIES.build("lru"))
        return [r.cached_tokens for r in replay_segments(columns, cache)]

    assert hits(narrow) == hits(wide) and sum(hits(wide)) > 0
