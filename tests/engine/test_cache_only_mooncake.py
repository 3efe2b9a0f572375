"""The Mooncake conversation trace (../shared/traces, not in the repo) replayed to the token.

docs/cache-semantics.md Part A with an unbounded cache: 54,098,293 hit tokens of 144,793,823 prompt
tokens (37.36 %; the traces README quotes it). The file is third-party data that a fresh
clone does not have, so every test here skips, saying why, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, TTLRule
from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.engine import replay_cache_only
from prefixsim.trace import load_trace

TRACE = Path(__file__).parents[3] / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"

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


def scan_reference(requests, capacity, ttl_s):
    """Part A with dicts and a linear scan for each victim (no heaps): hits, evictions,
    expirations. Independent of the tree's lazy heaps, fast enough for ~1,000 resident pages."""
    pages: dict[int, dict] = {}  # id -> parent, tokens, recency, deadline, children
    held = evictions = expirations = 0
    hits = []

    def drop(page_id):
        nonlocal held
        page = pages.pop(page_id)
        held -= page["tokens"]
        if page["parent"] is not None:
            pages[page["parent"]]["children"] -= 1

    for position, request in enumerate(requests):
        now = request.arrival_s
        if ttl_s is not None:
            while dead := [i for i, p in pages.items()
                           if p["deadline"] < now and not p["children"]]:
                for page_id in dead:
                    drop(page_id)
                expirations += len(dead)
        matched, parent = [], None
        for page_id in request.page_ids:
            page = pages.get(page_id)
            if page is None or page["parent"] != parent:
                break
            matched.append(page_id)
            parent = page_id
        if matched:
            hit = sum(pages[i]["tokens"] for i in matched)
            hits.append(min(hit, request.input_tokens - 1))
        else:
            hits.append(0)
        for page_id in matched:
            pages[page_id]["recency"] = position
            if ttl_s is not None:
                pages[page_id]["deadline"] = now + ttl_s
        new = list(zip(request.page_ids, request.page_tokens(), strict=True))[len(matched):]
        need = sum(tokens for _, tokens in new) - (capacity - held)
        while need > 0:
            leaves = [i for i, p in pages.items() if not p["children"] and i != parent]
            if not leaves:
                break
            victim = min(leaves, key=lambda i: pages[i]["recency"])
            need -= pages[victim]["tokens"]
            drop(victim)
            evictions += 1
        for page_id, tokens in new:
            if held + tokens > capacity:
                break
            pages[page_id] = {"parent": parent, "tokens": tokens, "recency": position,
                              "deadline": float("inf") if ttl_s is None else now + ttl_s,
                              "children": 0}
            if parent is not None:
                pages[parent]["children"] += 1
            held += tokens
            parent = page_id
    return hits, evictions, expirations


@pytest.mark.parametrize(("capacity", "ttl_s"),
                         [(150_000, None), (400_000, 10.0), (1_000_000, 20.0)])
def test_bounded_replay_of_the_trace_head_matches_a_scan_reference(requests, capacity, ttl_s):
    """The first 800 requests (real prefix structure, many equal timestamps) through a small
    LRU cache, with and without a sliding TTL: per-request hits and both counters agree, and
    each case really evicts (and expires, with a TTL)."""
    head = requests[:800]
    cache = RadixCache(capacity, POLICIES.build("lru"), None if ttl_s is None else TTLRule(ttl_s))
    result = replay_cache_only(head, cache)
    ours = ([r.cached_tokens for r in result.records], result.counters.evicted_pages,
            result.counters.expired_pages)
    expected = scan_reference(head, capacity, ttl_s)
    assert ours == expected
    assert expected[1] > 0 and (ttl_s is None or expected[2] > 0)


@pytest.mark.parametrize("write_through", [True, False])
def test_unbounded_pool_under_a_small_hbm_gives_the_unbounded_figure(requests, write_through):
    """Acceptance: HBM of 300,000 tokens over an unbounded shared pool, no TTL, written
    through or back: HBM + pool hit tokens are the unbounded single cache's 54,098,293
    (37.36 %), most of them from the pool."""
    pool = SharedPool(RadixCache(None, POLICIES.build("lru")),
                      PoolSpec(1e9, 1e9, write_through=write_through), lambda: 0)
    result = replay_cache_only(requests, RadixCache(300_000, POLICIES.build("lru")),
                               pool=pool)
    assert sum(r.cached_tokens for r in result.records) == 54_098_293
    assert sum(r.cached_tokens_pool for r in result.records) > 40_000_000
