"""The Mooncake conversation trace (../shared/traces, not in the repo) replayed to the token.

cache-spec Part A with an unbounded cache: 54,098,293 hit tokens of 144,793,823 prompt
tokens (37.36 %; the traces README quotes it). The file is third-party data that a fresh
clone does not have, so every test here skips, saying why, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prefixsim.cache import POLICIES, RadixCache, TTLRule
from prefixsim.engine import replay_cache_only
from prefixsim.trace import load_trace

TRACE = Path(__file__).parents[2] / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"

pytestmark = pytest.mark.skipif(
    not TRACE.is_file(), reason=f"real trace absent: {TRACE} (see ../shared/traces/README.md)"
)


@pytest.fixture(scope="module")
def requests():
    return load_trace(TRACE)


def test_trace_shape(requests):
    """README figures: 12,031 requests; 288,500 hashed blocks of which 182,790 distinct."""
    assert len(requests) == 12_031
    assert sum(r.num_pages for r in requests) == 288_500
    assert len({pid for r in requests for pid in r.page_ids}) == 182_790
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(requests, requests[1:], strict=False))


def test_unbounded_replay_to_the_token(requests):
    cache = RadixCache(None, POLICIES.build("lru"))
    result = replay_cache_only(requests, cache)
    hits = sum(r.cached_tokens for r in result.records)
    query = sum(r.input_tokens for r in result.records)
    assert (hits, query) == (54_098_293, 144_793_823)
    # every distinct block is inserted once and never leaves an unbounded cache
    assert result.counters.inserted_pages == 182_790
    assert result.counters.evicted_pages == result.counters.expired_pages == 0
    cache.check_invariants()


def test_bounded_replay_keeps_capacity_and_loses_hits(requests):
    """LRU at 3M tokens with a 1-minute TTL: never over capacity, fewer hits than unbounded,
    and both evictions and expirations happen on this trace."""
    cache = RadixCache(3_000_000, POLICIES.build("lru"), TTLRule(60.0))
    result = replay_cache_only(requests, cache)
    cache.check_invariants()
    hits = sum(r.cached_tokens for r in result.records)
    assert 0 < hits < 54_098_293
    assert result.counters.peak_tokens <= 3_000_000
    assert result.counters.evicted_pages > 0 and result.counters.expired_pages > 0
