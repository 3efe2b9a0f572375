"""Belady on the compressed tree (SegmentCache, page-keyed): the same Part A results as on the
per-page RadixCache, request by request, for the in-memory policy (keys from its prepared
next uses) and the streamed one (keys handed over a chunk at a time), and a known answer
where a segment's pages must leave in between another segment's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import CAPACITIES, TTLS, prefix_traces, replay_part_a
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import TTLRule
from prefixsim.cache.belady import Belady, StreamedBelady
from prefixsim.cache.classes import CacheRules
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.config import CacheConfig
from prefixsim.engine import replay_cache_only
from prefixsim.engine.cache_only_fast import replay_segment_chunks
from prefixsim.pipeline.build import build_cache
from prefixsim.trace import Request, load_trace
from prefixsim.trace.columns import as_columns

TRACE = Path(__file__).parents[3] / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"


def prepared(requests) -> Belady:
    policy = Belady()
    policy.prepare(requests)
    return policy


def naive_next_uses(requests) -> list[list[int]]:
    """For each request, each page's next use: the position of the next request naming it
    (-1: none), by a scan of the whole trace per page."""
    out = []
    for position, request in enumerate(requests):
        row = []
        for page_id in request.page_ids:
            later = [q for q in range(position + 1, len(requests))
                     if page_id in requests[q].page_ids]
            row.append(later[0] if later else -1)
        out.append(row)
    return out


def test_request_keys_are_minus_the_next_position():
    requests = [Request(0, 0.0, 32, 1, (1, 2), 16), Request(1, 1.0, 16, 1, (1,), 16),
                Request(2, 1.0, 48, 1, (1, 2, 3), 16)]
    policy = prepared(requests)
    assert policy.request_keys(0) == [-1.0, -2.0]
    assert policy.request_keys(1) == [-2.0]
    assert policy.request_keys(2) == [-np.inf] * 3
    assert policy.page_keyed


def test_arrivals_out_of_order_read_keys_by_access():
    """Next uses in time are not the next positions there: no keys up front; the segments
    read each page's key from its last access (`by_access`), as RadixCache's `key`."""
    requests = [Request(0, 5.0, 16, 1, (1,), 16), Request(1, 1.0, 16, 1, (1,), 16)]
    config = CacheConfig(policy="belady", capacity_tokens=64)
    cache = build_cache(config, requests, replay_only=True)
    assert type(cache) is SegmentCache and (cache._keyed, cache._lazy) == (False, True)
    in_order = [Request(0, 1.0, 16, 1, (1,), 16), Request(1, 5.0, 16, 1, (1,), 16)]
    cache = build_cache(config, in_order, replay_only=True)
    assert type(cache) is SegmentCache and (cache._keyed, cache._lazy) == (True, False)


@st.composite
def shuffled_arrivals(draw):
    """A prefix trace whose arrival times are drawn again, so they go back and forth."""
    requests = draw(prefix_traces())
    times = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.0, 7.5]),
                          min_size=len(requests), max_size=len(requests)))
    return [Request(r.request_id, t, r.input_tokens, r.output_tokens, r.page_ids,
                    r.page_size_tokens) for r, t in zip(requests, times, strict=True)]


@settings(max_examples=300, deadline=None)
@given(shuffled_arrivals(), CAPACITIES, TTLS, st.sampled_from([0.3, 1.0, 2.5]))
def test_out_of_order_arrivals_on_segments_keyed_by_access(requests, capacity, ttl,
                                                          interval):
    """A trace whose arrivals go back in time: the segments keyed by access give the per-page
    tree's hits, counters, pages and timeseries (both replay loops: the chunk replay, and
    the step-by-step one with a minimum cacheable prompt)."""
    policy = prepared(requests)
    assert not policy.page_keyed or sorted(r.arrival_s for r in requests) == [
        r.arrival_s for r in requests]
    ours = replay_part_a(SegmentCache(capacity, policy, ttl, by_access=True), requests,
                         interval)
    reference = replay_part_a(RadixCache(capacity, prepared(requests), ttl), requests,
                              interval)
    assert ours == reference
    stepwise = []
    for cache in (SegmentCache(capacity, prepared(requests), ttl, by_access=True),
                  RadixCache(capacity, prepared(requests), ttl)):
        result = replay_cache_only(requests, cache, rules=CacheRules([], 20, 0),
                                   sample_interval_s=interval)
        cache.check_invariants()
        stepwise.append(([r.cached_tokens for r in result.records], result.counters,
                         result.states))
    assert stepwise[0] == stepwise[1]


def test_segment_pages_leave_between_another_segments_known_answer():
    """Capacity 4 pages of 16 tokens. Request 0 caches segment A = (1, 2), request 1 caches
    B = (10, 11). Next uses: 1 at position 3, 2 never, 10 at 4, 11 at 5. Request 2 needs 3
    pages' room (20, 21, 22, never used again): victims by key (minus the next use): page 2
    (-inf), then 11 (-5), then 10 (-4); page 1 (-3), A's next page, stays, so A's run stops
    after one page and B goes whole. Request 3 finds page 1 (16 tokens) and evicts 22;
    request 4 finds nothing (10 is gone) and evicts 21 ((-inf, recency 2) before page 5's
    (-inf, recency 3)); request 5 finds 10 and evicts 20."""
    requests = [Request(0, 0.0, 32, 1, (1, 2), 16), Request(1, 0.0, 32, 1, (10, 11), 16),
                Request(2, 1.0, 48, 1, (20, 21, 22), 16), Request(3, 2.0, 32, 1, (1, 5), 16),
                Request(4, 3.0, 16, 1, (10,), 16), Request(5, 4.0, 32, 1, (10, 11), 16)]
    ours = replay_part_a(SegmentCache(64, prepared(requests)), requests)
    reference = replay_part_a(RadixCache(64, prepared(requests)), requests)
    assert ours == reference
    hits, counters, resident = ours[0], ours[1], ours[2]
    assert hits == [0, 0, 0, 16, 0, 16]
    assert counters.evicted_pages == 3 + 1 + 1 + 1
    assert resident == [1, 5, 10, 11]


@settings(max_examples=400, deadline=None)
@given(prefix_traces(), CAPACITIES, TTLS, st.sampled_from([0.3, 1.0, 2.5]))
def test_same_hits_counters_pages_and_timeseries_as_radix_cache(requests, capacity, ttl,
                                                                 interval):
    ours = replay_part_a(SegmentCache(capacity, prepared(requests), ttl), requests, interval)
    reference = replay_part_a(RadixCache(capacity, prepared(requests), ttl), requests, interval)
    assert not isinstance(reference, str)
    assert ours == reference


@settings(max_examples=200, deadline=None)
@given(prefix_traces(), CAPACITIES, TTLS, st.integers(1, 7))
def test_streamed_keys_by_chunk_match_radix_cache(requests, capacity, ttl, chunk_size):
    """StreamedBelady told each chunk's next uses (as the streamed pipeline tells it, from
    a naive scan here) on SegmentCache, replayed by column: RadixCache's hits."""
    uses = naive_next_uses(requests)
    reference = replay_part_a(RadixCache(capacity, prepared(requests), ttl), requests)
    policy = StreamedBelady()
    cache = SegmentCache(capacity, policy, ttl)
    chunks = [as_columns(requests[i:i + chunk_size])
              for i in range(0, len(requests), chunk_size)]

    def told():
        for first in range(0, len(requests), chunk_size):
            rows = uses[first:first + chunk_size]
            offsets = np.cumsum([0] + [len(row) for row in rows]).tolist()
            policy.begin_chunk(first, np.array([u for row in rows for u in row],
                                               dtype=np.int64), offsets)
            yield chunks[first // chunk_size]

    got: list[int] = []
    replay_segment_chunks(told(), cache, lambda chunk, cached: got.extend(cached.tolist()))
    cache.check_invariants()
    assert got == reference[0]
    assert cache.counters == reference[1]


@pytest.mark.skipif(not TRACE.exists(), reason=f"real trace not found at {TRACE}")
@pytest.mark.parametrize("capacity,ttl", [(3_000_000, None), (400_000, TTLRule(60.0))])
def test_mooncake_matches_radix_cache(capacity, ttl):
    requests = list(load_trace(TRACE))[:4000]
    ours = replay_part_a(SegmentCache(capacity, prepared(requests), ttl), requests)
    reference = replay_part_a(RadixCache(capacity, prepared(requests), ttl), requests)
    assert ours == reference
