"""The SegmentCache replays (engine/cache_only_fast.py) worked by hand: every field of the
records, the progress reports, the sampled state rows, eviction order by replay position,
chain conflicts, the default report cadence, and the column replay cut into chunks and id
blocks of every size (against the same answers)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from fakes import HAND_TRACE

from prefixsim.cache import POLICIES
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine import cache_only_fast
from prefixsim.engine.cache_only_fast import replay_segment_chunks, replay_segments
from prefixsim.engine.records import CacheOnlyRecord, RecordTable
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.columns import as_columns


def segments(capacity: int | None = None) -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build("lru"))


TRACE = HAND_TRACE  # tests/fakes.py: the replay worked by hand
CACHED = [0, 8, 7, 0, 4]
# interval 1 s: r11 (0.5) crosses t = 0 (state after r10); r12 (2.5) crosses t = 1 (after
# r11), and the next point is 3; r14 arrives at 3.0, not after it; the last row, at 3, is
# the state after every request.
ROWS = [(0.0, 8, 0, 0), (1.0, 10, 0, 0), (3.0, 21, 0, 0)]


def test_records_field_by_field():
    records = replay_segments(TRACE, segments())
    assert isinstance(records, RecordTable) and len(records) == 5
    assert [tuple(r) for r in records] == [
        (10, "a", "completed", 0.0, 8, 3, 0, 0, 0, 0),
        (11, None, "completed", 0.5, 10, 2, 8, 0, 0, 0),
        (12, "b", "completed", 2.5, 8, 1, 7, 0, 0, 0),
        (13, None, "completed", 2.5, 6, 1, 0, 0, 0, 0),
        (14, None, "completed", 3.0, 9, 5, 4, 0, 0, 0),
    ]
    assert all(isinstance(r, CacheOnlyRecord) for r in records)


def test_the_given_table_is_appended_to_and_returned():
    table = RecordTable(CacheOnlyRecord)
    assert replay_segments(TRACE[:2], segments(), records=table) is table
    assert [r.cached_tokens for r in table] == [0, 8]


def test_progress_every_two_then_the_rest():
    progress: list[int] = []
    replay_segments(TRACE, segments(), progress.append, progress_every=2)
    assert progress == [2, 2, 1]
    progress.clear()
    replay_segments(TRACE[:4], segments(), progress.append, progress_every=2)
    assert progress == [2, 2, 0]
    progress.clear()
    replay_segments(TRACE, segments(), progress.append, progress_every=3)
    assert progress == [3, 2]  # after the third, then the last two
    progress.clear()
    replay_segments(TRACE, segments(), progress.append, progress_every=5)
    assert progress == [5, 0]


def test_nothing_to_replay():
    progress: list[int] = []
    states: list[tuple] = []
    records = replay_segments(iter(()), segments(), progress.append, progress_every=3,
                              sample_interval_s=1.0, states=states)
    assert len(records) == 0 and progress == [0] and states == [(0.0, 0, 0, 0)]
    progress.clear()
    assert replay_segment_chunks([], segments(), None, progress.append, 3) == 0
    assert progress == [0]


def test_sampled_rows():
    states: list[tuple] = []
    cache = segments()
    replay_segments(TRACE, cache, sample_interval_s=1.0, states=states)
    assert states == ROWS
    states = []
    replay_segments(TRACE, segments(), sample_interval_s=2.0, states=states)
    # r11 crosses 0 (next point 2), r12 crosses 2 (next 4); the last row at 4
    assert states == [(0.0, 8, 0, 0), (2.0, 10, 0, 0), (4.0, 21, 0, 0)]


def test_no_rows_without_an_interval():
    states: list[tuple] = []
    replay_segments(TRACE, segments(), states=states)
    assert states == []
    replay_segment_chunks([as_columns(TRACE)], segments(), lambda c, h: None, states=states)
    assert states == []


def eviction_trace() -> list[Request]:
    """8 tokens of 4-token pages, every arrival at t = 0: pages 3, 2, 1 in that order, so
    the third insert evicts page 3 (replayed first, the least recent) and not page 2 (the
    lower id); then 2 is still there (a 4-token hit) and 3 is not."""
    return [Request(0, 0.0, 4, 1, (3,), 4), Request(1, 0.0, 4, 1, (2,), 4),
            Request(2, 0.0, 4, 1, (1,), 4), Request(3, 0.0, 5, 1, (2, 9), 4),
            Request(4, 0.0, 5, 1, (3, 8), 4)]


def test_eviction_follows_the_replay_position():
    cache = segments(8)
    records = replay_segments(eviction_trace(), cache)
    assert [r.cached_tokens for r in records] == [0, 0, 0, 4, 0]
    got: list[list[int]] = []
    replay_segment_chunks([as_columns(eviction_trace())], segments(8),
                          lambda chunk, cached: got.append(cached.tolist()))
    assert got == [[0, 0, 0, 4, 0]]


def conflicting() -> list[Request]:
    """Page 2 names the prefix (1, 2); request 7 puts it under page 3."""
    return [Request(5, 0.0, 8, 1, (1, 2), 4), Request(7, 1.0, 8, 1, (3, 2), 4)]


CONFLICT = r"request 7: page id 2 .*\(hash ids are not chained\)$"


def test_ids_not_chained_are_an_input_error():
    with pytest.raises(InputError, match=CONFLICT) as err:
        replay_segments(conflicting(), segments())
    assert err.value.message.startswith("request 7: page id 2 is already cached after")
    assert err.value.field == "hash_ids" and err.value.__cause__ is None
    with pytest.raises(InputError, match=CONFLICT) as err:
        replay_segment_chunks([as_columns(conflicting())], segments(), lambda c, h: None)
    assert err.value.message.startswith("request 7: page id 2 is already cached after")
    assert err.value.field == "hash_ids" and err.value.__cause__ is None


def one_page_requests(n: int) -> list[Request]:
    return [Request(i, float(i), 1, 1, (i,), 1) for i in range(n)]


def test_the_default_cadence_is_2000():
    requests = one_page_requests(2000)
    progress: list[int] = []
    replay_segments(requests, segments(), progress.append)
    assert progress == [2000, 0]
    progress.clear()
    assert replay_segment_chunks([as_columns(requests)], segments(), lambda c, h: None,
                                 progress.append) == 2000
    assert progress == [2000, 0]


@pytest.mark.parametrize("id_block", [1, 2, 3, 4096])
@pytest.mark.parametrize("cuts", [[0, 5], [0, 1, 5], [0, 2, 3, 5], [0, 1, 2, 3, 4, 5]])
def test_chunks_and_id_blocks(id_block, cuts, monkeypatch):
    monkeypatch.setattr(cache_only_fast, "ID_BLOCK", id_block)
    columns = as_columns(TRACE)
    chunks = [columns.take(np.arange(a, b)) for a, b in pairwise(cuts)]
    seen: list[tuple[list[int], list[int]]] = []
    progress: list[int] = []
    states: list[tuple] = []
    cache = segments()
    count = replay_segment_chunks(
        chunks, cache, lambda chunk, cached: seen.append((chunk.request_ids.tolist(),
                                                          cached.tolist())),
        progress.append, progress_every=2, sample_interval_s=1.0, states=states)
    assert count == 5
    assert [ids for ids, _ in seen] == [[10, 11, 12, 13, 14][a:b]
                                        for a, b in pairwise(cuts)]
    assert [h for _, cached in seen for h in cached] == CACHED
    assert all(type(cached) is list for _, cached in seen)
    assert progress == [2, 2, 1]
    assert states == ROWS
    assert cache.resident_tokens == 21


def test_chunk_hits_are_int64():
    got: list[np.ndarray] = []
    replay_segment_chunks([as_columns(TRACE)], segments(), lambda c, cached: got.append(cached))
    assert got[0].dtype == np.int64 and got[0].tolist() == CACHED
