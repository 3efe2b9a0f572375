"""Differential tests: the compressed tree (SegmentCache) replays Part A exactly as RadixCache.

Every node-uniform policy, over generated traces (chained ids, many equal timestamps,
partial last pages that later prompts sometimes extend, tiny or no capacity, sliding and fixed
TTL), must give the same per-request hits, the same counters and the same resident pages as
the per-page RadixCache; so must the Mooncake conversation trace (../shared/traces, skipped
when absent). Unchained ids must fail the same way, at the same request. The cache-only run
must pick SegmentCache only where it applies and summarise the same; both record the same
timeseries rows.
"""

from __future__ import annotations

import gc
import math
import sys
from pathlib import Path

import pytest
from fakes import CAPACITIES, TTLS, prefix_traces, replay_part_a, without_segment_cache
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode, TTLMode, TTLRule
from prefixsim.cache.belady import Belady
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.cache.gdsf import GDSF
from prefixsim.cache.page import Page
from prefixsim.cache.pool import PoolSpec, SharedPool, page_sizes
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tiers import build_tier_stack
from prefixsim.config import CacheConfig, RunConfig
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build_cache
from prefixsim.trace import Request, load_trace

TRACE = Path(__file__).parents[3] / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"

NODE_UNIFORM = [name for name in POLICIES.names()
                if getattr(type(POLICIES.build(name)), "node_uniform", False)]
# on segments without learning the future: the node-uniform ones, workload-aware (its
# keys set per page as a request touches them, `run_keyed`) and S3-FIFO (a state per page,
# `page_states`)
ON_SEGMENTS = [*NODE_UNIFORM, "s3fifo", "workload_aware"]


def test_node_uniform_policies_are_the_stateless_per_node_ones():
    """lru (recency), ttl (deadline), priority (priority): keys of shared statistics only;
    fifo (the insertion order the cache numbers pages with, a segment's its last page's);
    lfu and gdsf (GreedyDual priorities set for a segment's pages at once, not falling
    with depth: the last page's is the segment's key)."""
    assert NODE_UNIFORM == ["fifo", "gdsf", "lfu", "lru", "priority", "ttl"]


def both(requests, capacity, policy, ttl, interval=1.0):
    return (replay_part_a(RadixCache(capacity, POLICIES.build(policy), ttl), requests, interval),
            replay_part_a(SegmentCache(capacity, POLICIES.build(policy), ttl), requests, interval))


@settings(max_examples=400, deadline=None)
@given(prefix_traces(), CAPACITIES, st.sampled_from(ON_SEGMENTS), TTLS,
       st.sampled_from([0.3, 1.0, 2.5]))
def test_same_hits_counters_pages_and_timeseries_as_radix_cache(requests, capacity, policy,
                                                                 ttl, interval):
    ours, reference = both(requests, capacity, policy, ttl, interval)
    assert not isinstance(reference, str)
    assert ours == reference
    assert len(ours[4]["time_s"]) == int(requests[-1].arrival_s // interval) + 1


@settings(max_examples=300, deadline=None)
@given(prefix_traces(), CAPACITIES, st.sampled_from(ON_SEGMENTS), TTLS)
def test_a_cache_promised_chained_ids_keeps_no_id_set_and_replays_the_same(
        requests, capacity, policy, ttl):
    """`chained=True` (a streamed run's ids are checked by the reader) drops the resident-id
    set: the same hits, counters, resident pages (unique: check_invariants) and state rows
    (their page counts too) as the cache that keeps it."""
    promised = SegmentCache(capacity, POLICIES.build(policy), ttl, chained=True)
    ours = replay_part_a(promised, requests)
    assert promised._ids is None
    assert ours == replay_part_a(SegmentCache(capacity, POLICIES.build(policy), ttl), requests)


@settings(max_examples=200, deadline=None)
@given(prefix_traces(chained=False), CAPACITIES, st.sampled_from(ON_SEGMENTS), TTLS)
def test_unchained_ids_fail_the_same_way(requests, capacity, policy, ttl):
    """Same error message (request and page id) or the same results when no conflict is hit."""
    ours, reference = both(requests, capacity, policy, ttl)
    assert ours == reference


def test_unchained_ids_are_an_input_error():
    """Page 2 cached after 1 cannot reappear after 7, nor a page twice in one prompt."""
    for ids in ([7, 2], [1, 2, 1], [3, 3]):
        cache = SegmentCache(None, POLICIES.build("lru"))
        with pytest.raises(InputError) as info:
            replay_cache_only([Request(0, 0.0, 32, 1, (1, 2), 16),
                               Request(1, 0.0, 16 * len(ids), 1, tuple(ids), 16)], cache)
        assert info.value.field == "hash_ids"


def test_split_then_page_at_a_time_eviction_known_answer():
    """P=1, capacity 5. r0 [1,2,3,4] at t=0; r1 [1,2,5] hits 2 (splits 1-2 | 3-4, refreshes
    1-2 to recency 1) and inserts 5 (5 tokens, full). r2 [6,7] needs 2 tokens: leaves 4 (of 3-4,
    recency 0) and 5 (recency 1): evict 4 then 3 (edge case 7: the suffix goes first; edge
    case 8: exactly two pages, not the rest of any node)."""
    requests = [Request(0, 0.0, 4, 1, (1, 2, 3, 4), 1), Request(1, 0.0, 3, 1, (1, 2, 5), 1),
                Request(2, 0.0, 2, 1, (6, 7), 1)]
    cache = SegmentCache(5, POLICIES.build("lru"))
    hits, counters, resident = replay_part_a(cache, requests)[:3]
    assert hits == [0, 2, 0]
    assert (counters.evicted_pages, counters.evicted_tokens) == (2, 2)
    assert resident == [1, 2, 5, 6, 7]


def test_a_parent_left_a_leaf_past_its_deadline_expires_without_a_queue_entry():
    """Sliding TTL 10 s, P=1. t=0 [1,2,3,4] (deadline 10); t=1 [1,2,5] splits it into 1-2
    (refreshed: 11) | 3-4 (10) and adds 5 (11). At 10.5 only 3-4 goes (1-2 still has 5). At
    11.5 page 5 goes and leaves 1-2 a leaf whose deadline (11) is past too: it goes in the
    same call, without a deadline entry of its own; every page counted once."""
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(10.0))
    cache.access([1, 2, 3, 4], 0.0, 0, 1, 4)
    cache.access([1, 2, 5], 1.0, 1, 1, 3)
    assert cache.expire(10.5) == 2 and cache.num_segments == 2
    assert cache.expire(11.5) == 3 and cache.num_segments == 0
    queue = cache._deadlines  # entries ever made: run positions 0 (1-4) and 1 (5), no heap's
    assert (queue.base + len(queue.run), queue.count) == (2, 0)
    assert (cache.counters.expired_pages, cache.counters.expired_tokens) == (5, 5)
    assert sum(cache.counters.expired_ages.counts) == 5
    cache.check_invariants()


def test_a_parent_left_a_leaf_before_its_deadline_is_queued_at_it():
    """t=0 [1,2,3] (deadline 10); t=5 [1,2] splits it into 1-2 (refreshed: 15) | 3 (10).
    At exactly 15 page 3 goes and leaves 1-2 a leaf due at 15, not before now: it stays,
    queued (the queue held nothing else, so its one entry), and goes in a later call."""
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(10.0))
    cache.access([1, 2, 3], 0.0, 0, 1, 3)
    cache.access([1, 2], 5.0, 1, 1, 2)
    assert cache.expire(15.0) == 1 and cache.num_segments == 1
    assert len(cache._deadlines) == 1 and cache._deadlines.last_s == 15.0
    cache.check_invariants()
    assert cache.expire(15.0) == 0
    assert cache.expire(15.5) == 2 and cache.num_segments == 0
    assert cache.counters.expired_pages == 3
    cache.check_invariants()


@pytest.mark.parametrize("policy,kept", [("lru", True), ("ttl", True), ("fifo", False),
                                           ("lfu", False)])
def test_partly_evicted_segment_keeps_its_entry_when_its_key_stays(policy, kept):
    """A leaf segment that loses tail pages keeps its queued victim entry where its key (LRU's
    recency, ttl's deadline) does not depend on its tail, and is queued again where it does
    (FIFO's insertion order, an aging priority). By hand: [1..4] fills 4 of 5 tokens; [9, 8]
    needs 1 more: page 4 goes, the segment [1, 2, 3] stays, then holds 3 tokens."""
    cache = SegmentCache(5, POLICIES.build(policy), None if policy != "ttl" else TTLRule(50.0))
    cache.access([1, 2, 3, 4], 0.0, 0, 1, 4)
    before = cache._victims.head()
    cache.access([9, 8], 1.0, 1, 1, 2)
    assert cache.counters.evicted_pages == 1 and cache.resident_tokens == 5
    first = cache._victims.head()
    assert list(first[-1].ids) == [1, 2, 3] and len(cache._victims) == 2
    assert (first is before) is kept  # the same entry, or a new one (version 1)
    assert first[-2] == first[-1].version == (0 if kept else 1)
    cache.check_invariants()


def test_capacity_set_after_building_is_the_one_used():
    """`capacity_tokens` is a property whose setter keeps the replay's C copy (`_bounded`,
    `_capacity`) in step; set before the replay. By hand: built bounded at 2, made unbounded,
    [1, 2, 3] stays whole; built unbounded, bounded at 2, [1, 2, 3] keeps [1, 2] (page 3
    does not fit), and [4] then evicts page 2."""
    unbounded = SegmentCache(2, POLICIES.build("lru"))
    unbounded.capacity_tokens = None
    assert unbounded.capacity_tokens is None and unbounded.free_tokens == float("inf")
    assert unbounded.access([1, 2, 3], 0.0, 0, 1, 3) == 0 and unbounded.resident_tokens == 3
    bounded = SegmentCache(None, POLICIES.build("lru"))
    bounded.capacity_tokens = 2
    assert bounded.capacity_tokens == 2 and bounded.free_tokens == 2
    bounded.access([1, 2, 3], 0.0, 0, 1, 3)
    assert bounded.resident_tokens == 2 and bounded.counters.evicted_pages == 0
    bounded.access([4], 1.0, 1, 1, 1)
    assert bounded.counters.evicted_pages == 1
    assert sorted(list(node.ids) for node in bounded.segments()) == [[1], [4]]
    unbounded.check_invariants()
    bounded.check_invariants()


# ------------------------------------------------------------------- real trace
real = pytest.mark.skipif(
    not TRACE.is_file(), reason=f"real trace absent: {TRACE} (see ../shared/traces/README.md)")


@pytest.fixture(scope="module")
def mooncake():
    return load_trace(TRACE)


@real
@pytest.mark.parametrize("capacity,ttl", [
    (3_000_000, None),
    (None, TTLRule(300.0)),
    (500_000, TTLRule(120.0, TTLMode.FIXED)),
])
def test_mooncake_full_trace_matches_radix_cache(mooncake, capacity, ttl):
    ours, reference = both(mooncake, capacity, "lru", ttl)
    assert ours[0] == reference[0]  # hits, request by request
    assert ours[1:] == reference[1:]


@real
@pytest.mark.parametrize("policy", ON_SEGMENTS)
def test_mooncake_first_requests_every_policy(mooncake, policy):
    ours, reference = both(mooncake[:3000], 400_000, policy, TTLRule(60.0))
    assert ours == reference


# ------------------------------------------------------------------- selection
@pytest.mark.parametrize("update,expected", [
    ({}, SegmentCache),
    ({"policy": "ttl", "ttl_s": 30.0}, SegmentCache),
    ({"policy": "priority"}, SegmentCache),
    ({"policy": "fifo"}, SegmentCache),
    ({"policy": "lfu"}, SegmentCache),
    ({"policy": "gdsf"}, SegmentCache),
    ({"policy": "workload_aware"}, SegmentCache),
    ({"policy": "s3fifo"}, SegmentCache),
    ({"host_capacity_tokens": 1000}, SegmentCache),
    ({"disk_capacity_tokens": 1000}, SegmentCache),
    ({"pool": {"capacity_tokens": 1000}}, SegmentCache),
    ({"min_cacheable_tokens": 10}, SegmentCache),
    ({"classes": [{"name": "long", "ttl_s": 3600.0}]}, SegmentCache),
    ({"prefix_caching": False}, SegmentCache),
    ({"classes": [{"name": "long", "ttl_s": 3600.0}], "policy": "s3fifo"}, SegmentCache),
    ({"mode": "block", "policy": "s3fifo"}, SegmentCache),
    ({"mode": "block", "policy": "fifo"}, SegmentCache),
    ({"mode": "block", "policy": "gdsf"}, SegmentCache),
    ({"mode": "block", "policy": "workload_aware"}, SegmentCache),
    ({"mode": "block", "policy": "ttl", "ttl_s": 30.0}, SegmentCache),
    ({"mode": "block", "policy": "lfu"}, SegmentCache),
    ({"mode": "block", "policy": "lru", "host_capacity_tokens": 1000}, SegmentCache),
])
def test_replay_cache_is_segments_only_where_it_applies(update, expected):
    config = CacheConfig(capacity_tokens=1000, **update)
    assert type(build_cache(config, replay_only=True)) is expected
    assert type(build_cache(config)) is expected  # a timed replica's cache too


@pytest.mark.parametrize("policy", ["lru", "priority"])
def test_block_mode_evicts_leaves_only_in_a_cache_only_replay_where_parents_outlast(policy):
    """Block mode with a policy under which parents outlast their children: a cache-only
    replay's cache evicts leaves only, as in radix mode (`block` False: no orphans), a
    timed replica's makes every unlocked segment a victim (its chunks go in below a tip
    without touching the path above); both report block mode."""
    config = CacheConfig(capacity_tokens=1000, mode="block", policy=policy)
    replay, timed = build_cache(config, replay_only=True), build_cache(config)
    assert type(replay) is type(timed) is SegmentCache
    assert replay.mode == timed.mode == "block"
    assert not replay.block and timed.block


def test_which_policies_run_block_mode_on_segments():
    """Leaves only in a whole-path replay: lru and priority (`parents_outlast_children`);
    every unlocked segment a victim, tail first: lru, priority, lfu, ttl (`shared_key`),
    head first: fifo (`head_first`), each page by its own entry: belady, s3fifo,
    workload-aware, gdsf (keys or states per page): every policy. The
    declarations are read from the policy's own class: a subclass that changes the key
    (here LRU's) inherits neither."""
    from prefixsim.cache.lru import LRU

    def declared(**kwargs):
        return [name for name in POLICIES.names() if SegmentCache.supports(
            POLICIES.build(name), CacheMode.BLOCK, **kwargs)]

    assert declared(whole_paths=True) == declared() == [
        "belady", "fifo", "gdsf", "lfu", "lru", "priority", "s3fifo", "ttl",
        "workload_aware"]
    assert [name for name in POLICIES.names()
            if vars(type(POLICIES.build(name))).get("head_first")] == ["fifo"]
    assert [name for name in POLICIES.names()
            if vars(type(POLICIES.build(name))).get("parents_outlast_children")] == [
        "lru", "priority"]

    class MostRecentFirst(LRU):
        def key(self, page):
            return -page.recency

    assert not SegmentCache.supports(MostRecentFirst(), CacheMode.BLOCK, whole_paths=True)
    assert not SegmentCache.supports(MostRecentFirst(), CacheMode.BLOCK)

    class FlatGDSF(GDSF):  # a value of its own: `run_values` would not give it
        def value(self, page):
            return 1.0

    assert not SegmentCache.supports(FlatGDSF(), CacheMode.BLOCK)


def test_lfu_in_block_mode_leaves_orphans():
    """Why lfu is not declared (known answer, 3 tokens of 1-token pages; priority L + hits
    + 1): 2 and 3 are hit twice each (priority 3), 1 is inserted (1). [1, 4] touches 1
    first (2), then evicts 2 (L rises to 3), then inserts 4 (3 + 1 = 4): the parent's
    priority is below its new child's. [5] needs a page: block mode takes 1 (2) and
    leaves 4 an orphan; radix mode takes the leaf 3."""
    ids = [(2,), (2,), (2,), (3,), (3,), (3,), (1,), (1, 4), (5,)]
    requests = [Request(i, float(i), len(p), 1, p, 1) for i, p in enumerate(ids)]
    left = {}
    for mode in (CacheMode.BLOCK, CacheMode.RADIX):
        cache = RadixCache(3, POLICIES.build("lfu"), None, mode)
        replay_cache_only(requests, cache)
        left[mode] = sorted(p.page_id for p in cache.pages()), cache.orphan_tokens()
    assert left == {CacheMode.BLOCK: ([3, 4, 5], 1), CacheMode.RADIX: ([1, 4, 5], 0)}


def test_fifo_in_block_mode_leaves_orphans():
    """Why fifo is not declared (known answer, 3 tokens of 1-token pages, block mode):
    [1, 2] then [1, 2, 3] (a hit on 1, 2; 3 inserted last), then [4] needs a page: the
    oldest insert, page 1, goes though it has a child: 2 is left an orphan (1 token, its
    parent gone) and 3 below it, which no match reaches; radix mode takes the leaf 3."""
    requests = [Request(0, 0.0, 2, 1, (1, 2), 1), Request(1, 1.0, 3, 1, (1, 2, 3), 1),
                Request(2, 2.0, 1, 1, (4,), 1)]
    block = RadixCache(3, POLICIES.build("fifo"), None, CacheMode.BLOCK)
    replay_cache_only(requests, block)
    assert block.orphan_tokens() == 1 and sorted(p.page_id for p in block.pages()) == [2, 3, 4]
    assert block.match([1, 2, 3], 3.0).num_pages == 0
    radix = RadixCache(3, POLICIES.build("fifo"))
    replay_cache_only(requests, radix)
    assert sorted(p.page_id for p in radix.pages()) == [1, 2, 4]


def test_belady_keys_a_timed_replica_s_segments_by_their_last_access():
    """belady keys pages by cache-only request in a cache-only replay (its keys per replay
    position, kept per page); a timed replica's recency counts its steps, so its segments
    read a page's key from their last access and recency instead (`by_access`), as
    RadixCache's `key` does; so do both with arrivals that go back in time."""
    requests = [Request(0, 0.0, 32, 1, (1, 2), 16), Request(1, 1.0, 32, 1, (1, 3), 16)]
    config = CacheConfig(capacity_tokens=1000, policy="belady")
    replay = build_cache(config, requests, replay_only=True)
    timed = build_cache(config, requests)
    assert type(replay) is SegmentCache and (replay._keyed, replay._lazy) == (True, False)
    assert type(timed) is SegmentCache and (timed._keyed, timed._lazy) == (False, True)
    back = [Request(0, 1.0, 32, 1, (1, 2), 16), Request(1, 0.0, 32, 1, (1, 3), 16)]
    for cache in (build_cache(config, back, replay_only=True), build_cache(config, back)):
        assert type(cache) is SegmentCache and (cache._keyed, cache._lazy) == (False, True)


def test_a_segment_keyed_by_access_evicts_as_belady_s_pages_would():
    """Known answer, P=16, capacity 64: [1, 2] inserted at t=0 (position 0), [5, 6] at t=1
    (position 1); later requests use 5 (position 2), 1 and 2 (3), 5 and 6 (4). Keys from
    each page's last access: 1 and 2 -3, 5 -2, 6 -4. Freeing one page takes leaf 6 (-4;
    LRU would take 2); freeing two more takes 2 (-3, before leaf 5's -2), then 1. Then a
    segment whose inner page is wanted sooner than another leaf loses only its tail."""
    requests = [Request(0, 0.0, 32, 1, (1, 2), 16), Request(1, 1.0, 32, 1, (5, 6), 16),
                Request(2, 2.0, 16, 1, (5,), 16), Request(3, 3.0, 32, 1, (1, 2), 16),
                Request(4, 4.0, 32, 1, (5, 6), 16)]
    for tree in (RadixCache, SegmentCache):
        policy = Belady()
        policy.prepare(requests)
        cache = (RadixCache(64, policy) if tree is RadixCache
                 else SegmentCache(64, policy, by_access=True))
        cache.insert(None, [1, 2], [16, 16], 0.0, 0)
        cache.insert(None, [5, 6], [16, 16], 1.0, 1)
        cache.evict(16)
        assert sorted(page.page_id for page in cache.pages()) == [1, 2, 5], tree
        cache.evict(48)
        assert [page.page_id for page in cache.pages()] == [5], tree
        cache.check_invariants()
    # two pages to free at once, the segment's inner page wanted sooner than another leaf:
    # [1, 2] and [5] with keys 1 -2, 2 -4, 5 -3 free 2 (-4) then 5 (-3), not 1
    requests = [Request(0, 0.0, 32, 1, (1, 2), 16), Request(1, 1.0, 16, 1, (5,), 16),
                Request(2, 2.0, 16, 1, (1,), 16), Request(3, 3.0, 16, 1, (5,), 16),
                Request(4, 4.0, 32, 1, (1, 2), 16)]
    for tree in (RadixCache, SegmentCache):
        policy = Belady()
        policy.prepare(requests)
        cache = (RadixCache(48, policy) if tree is RadixCache
                 else SegmentCache(48, policy, by_access=True))
        cache.insert(None, [1, 2], [16, 16], 0.0, 0)
        cache.insert(None, [5], [16], 1.0, 1)
        cache.evict(32)
        assert [page.page_id for page in cache.pages()] == [1], tree


@pytest.mark.parametrize("cache", [
    {"capacity_tokens": 40},
    {"capacity_tokens": None, "ttl_s": 1.0},
    {"capacity_tokens": 24, "ttl_s": 2.0, "ttl_mode": "fixed", "policy": "ttl"},
])
def test_cache_only_run_summary_is_the_same(cache, monkeypatch):
    """simulate(): SegmentCache and RadixCache runs give the same rows and summary."""
    requests = [Request(i, float(i // 3), 30 + 7 * (i % 5), 2,
                        tuple(range(1, 2 + (30 + 7 * (i % 5) - 1) // 16)), 16)
                for i in range(30)]
    config = RunConfig.model_validate({"cache_only": True, "cache": cache})
    fast = simulate(config, requests)
    without_segment_cache(monkeypatch)
    slow = simulate(config, requests)
    assert fast.requests.equals(slow.requests)
    assert len(fast.timeseries) == 10  # t = 0 .. 9 s, every second (the default)
    assert fast.timeseries.equals(slow.timeseries)
    fast.summary.pop("wall_time_s")
    slow.summary.pop("wall_time_s")
    assert fast.summary == slow.summary


@settings(max_examples=60, deadline=None)
@given(prefix_traces(), CAPACITIES, st.sampled_from(NODE_UNIFORM), TTLS, st.booleans())
def test_a_cleared_cache_is_empty_and_replays_as_a_new_one(requests, capacity, policy, ttl,
                                                           chained):
    """`clear()` leaves an empty, consistent cache whose counters stay; the requests replayed
    again after it give what a new cache gives them (hits, counters added on)."""
    cache = SegmentCache(capacity, POLICIES.build(policy), ttl, chained=chained)
    first = replay_part_a(cache, requests)
    counters = cache.counters
    inserted = counters.inserted_pages
    cache.clear()
    cache.check_invariants()
    assert cache.num_pages == cache.num_segments == cache.resident_tokens == 0
    assert not cache.segments() and cache.counters is counters
    assert counters.inserted_pages == inserted
    again = replay_part_a(cache, requests)
    fresh = replay_part_a(SegmentCache(capacity, POLICIES.build(policy), ttl, chained=chained),
                          requests)
    assert again[0] == fresh[0] == first[0] and again[2] == fresh[2]  # hits, resident ids
    assert counters.inserted_pages == 2 * inserted == inserted + fresh[1].inserted_pages


def test_a_dropped_cache_frees_its_segments_without_the_collector():
    """A segment and its parent reference each other; a cache freed (the runs pause the
    cyclic collector, and the compiled Segment is not even tracked by it) takes its tree
    apart, so its segments go with it by reference counting, not at the next collection (a
    curve's 20 trees once piled up): once the cache is gone, each of its 400 segments is
    referenced only by the list that holds them here (no parent or child link left)."""
    requests = [Request(i, float(i), 96, 1, tuple(range(i * 10, i * 10 + 5)) + (10**9 + i,),
                        16) for i in range(200)]
    requests += [Request(200 + i, 300.0 + i, 48, 1, tuple(range(i * 10, i * 10 + 3)), 16)
                 for i in range(200)]
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        cache = SegmentCache(None, POLICIES.build("lru"))
        replay_cache_only(requests, cache)
        held = cache.segments()
        assert len(held) == cache.num_segments == 400
        linked = sum(sys.getrefcount(held[i]) > 2 for i in range(len(held)))
        assert linked == 400  # the tree (a parent's child map, a child's parent) holds them
        del cache
        assert [sys.getrefcount(held[i]) for i in range(len(held))] == [2] * 400
        assert all(not node.resident and node.parent is None for node in held)
    finally:
        if enabled:
            gc.enable()


def test_a_cache_whose_construction_failed_is_freed_quietly(monkeypatch):
    """A refused construction (a negative capacity) leaves an object without a tree; freeing
    it raises nothing in `__del__` (Python would print it as an ignored exception)."""
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    with pytest.raises(ValueError, match="capacity_tokens must be >= 0"):
        SegmentCache(-1, POLICIES.build("lru"))
    assert ignored == []


def test_a_key_that_is_a_field_is_read_and_an_override_is_called():
    """lru, fifo and ttl declare the field their key returns (read from the segment, not
    called); priority's key is a conversion (called). A subclass that overrides `key`
    without declaring a field again is called, and replays as on the per-page tree (here
    most recent first: the newest leaf goes)."""
    from prefixsim.cache.lru import LRU
    from prefixsim.cache.policy import key_field_code

    assert [key_field_code(POLICIES.build(name)) for name in ("lru", "fifo", "ttl", "priority")
            ] == [1, 2, 3, 0]

    class MostRecentFirst(LRU):
        def key(self, page):
            return -page.recency

    assert key_field_code(MostRecentFirst()) == 0
    requests = [Request(0, 0.0, 4, 1, (1, 2, 3, 4), 1), Request(1, 1.0, 3, 1, (1, 2, 5), 1),
                Request(2, 2.0, 2, 1, (6, 7), 1), Request(3, 3.0, 4, 1, (1, 2, 3, 4), 1)]
    ours = replay_part_a(SegmentCache(5, MostRecentFirst()), requests)
    assert ours == replay_part_a(RadixCache(5, MostRecentFirst()), requests)


@settings(max_examples=200, deadline=None)
@given(prefix_traces(), CAPACITIES, st.sampled_from([*ON_SEGMENTS, "belady"]), TTLS,
       st.booleans())
def test_a_request_read_as_part_of_a_larger_array_replays_the_same(
        requests, capacity, policy, ttl, chained):
    """`access(ids, ..., first, stop)` (the chunk replay's: a request's ids as a part of its
    block's array, ids of other requests around them) gives what `access` of the request's
    own ids gives: the same hits, counters and resident pages after every request."""
    from prefixsim.cache.segment_tree import id_array

    def built():
        built_policy = POLICIES.build(policy)
        if policy == "belady":
            built_policy.prepare(requests)
        return SegmentCache(capacity, built_policy, ttl, chained=chained)

    own, part = built(), built()
    block = id_array([pid for request in requests for pid in request.page_ids] + [10**9])
    first = 0
    for position, request in enumerate(requests):
        stop = first + request.num_pages
        args = (request.arrival_s, position, request.page_size_tokens, request.input_tokens)
        assert own.access(request.page_ids, *args) == part.access(block, *args, first, stop)
        first = stop
        assert own.counters == part.counters and own.resident_tokens == part.resident_tokens
    part.check_invariants()
    assert ([node.ids.tolist() for node in own.segments()]
            == [node.ids.tolist() for node in part.segments()])


def test_workload_aware_run_keys_count_pages_as_the_hooks_do():
    """Known answer: P(reuse) = (reused + 1) / (inserted + 2) per (category, log2 depth
    bucket), counted page by page. Depths 0, 1, 2 are buckets 0, 1, 2: first inserts,
    1/3 each; depths 2 and 3 (bucket 2) again: 1/4, then 1/5; a first hit on depths 0-1
    counts a reuse: 2/3; a second hit counts nothing."""
    policy = POLICIES.build("workload_aware")
    assert policy.run_keys(7, 0, 3, 0) == (1 / 3, 1 / 3, 1 / 3)
    assert policy.run_keys(7, 2, 2, 0) == (1 / 4, 1 / 5)
    assert policy.run_keys(7, 0, 2, 1) == (2 / 3, 2 / 3)
    assert policy.run_keys(7, 0, 1, 2) == (2 / 3,)
    assert policy.run_keys(8, 0, 1, 0) == (1 / 3,)  # another category
    policy.clock = 1.0
    assert policy.run_keys(8, 1, 1, 0) == (1.0 + 1 / 3,)
    page = Page(9, None, 1, 0.0, 0)  # the page hooks count the same way
    policy.on_insert(page)
    assert policy.value(page) == policy.reuse_probability(page) == 1 / 3
    assert policy.key(page) == 1.0 + 1 / 3


def test_workload_aware_evicts_a_segment_s_pages_by_their_own_keys():
    """Known answer, 4 tokens of 1-token pages. [1, 2, 3, 4] goes in as one segment keyed
    1/3, 1/3, 1/3, 1/4 (depth 3 is bucket 2's second page). [5] needs a page: the tail 4
    (1/4) goes and L rises to 1/4; 5 is keyed 1/4 + 1/3. [6, 7] needs two: 3 then 2 (1/3
    each, below 5's key), L = 1/3. Both trees."""
    requests = [Request(i, float(i), len(ids), 1, ids, 1)
                for i, ids in enumerate([(1, 2, 3, 4), (5,), (6, 7)])]
    for tree in (RadixCache, SegmentCache):
        cache = tree(4, POLICIES.build("workload_aware"))
        replay_cache_only(requests[:2], cache)
        assert cache.policy.clock == 1 / 4
        cache = tree(4, POLICIES.build("workload_aware"))
        replay_cache_only(requests, cache)
        assert cache.policy.clock == 1 / 3
        assert sorted(page.page_id for page in cache.pages()) == [1, 5, 6, 7]
        assert cache.counters.evicted_pages == 3


@settings(max_examples=150, deadline=None)
@given(prefix_traces(), st.integers(1, 120), TTLS, st.sampled_from(list(CacheMode)))
def test_s3fifo_s_queues_and_ghost_list_are_the_same_on_segments(requests, capacity, ttl,
                                                                 mode):
    """Beyond the results: S3-FIFO's own books after the replay on either tree (S's tokens,
    the pages it tracks, the ghost list with its numbers, the clock, each resident page's
    queue, position and frequency): pages that left by expiry or eviction are told. In
    radix mode and in block mode (each page its own victim entry, second chances and
    leavers told page by page as the per-page tree tells them)."""
    books = []
    for tree in (RadixCache, SegmentCache):
        cache = (RadixCache(capacity, POLICIES.build("s3fifo"), ttl, mode) if tree is RadixCache
                 else SegmentCache(capacity, POLICIES.build("s3fifo"), ttl, mode=mode))
        replay_part_a(cache, requests)
        policy = cache.policy
        if tree is RadixCache:
            states = {page.page_id: page.policy_state for page in cache.pages()}
        else:
            states = {pid: state for node in cache.segments()
                      for pid, state in zip(node.ids, node.states, strict=True)}
        books.append((policy._small_tokens, policy._tracked, policy._ghost,
                      policy._ghost_tokens, policy._clock,
                      {pid: (state.queue, state.position, state.frequency, state.tokens)
                       for pid, state in states.items()}))
    assert books[0] == books[1]
    assert books[0][1] == len(books[0][5])


def test_s3fifo_re_keys_a_segment_whose_tail_becomes_due():
    """Known answer, 10 tokens of 1-token pages (S's budget 1 token). [5], hit in S, moves
    to M as [1, 2, 3] enters S (1 then 2 become due); [1, 2, 3] is queued under its tail
    3, still in S. [4] entering S makes 3 due: its segment is re-keyed (`requeue` of 3's
    state, its tail), so eviction takes 3, 2, 1 (due) before 5 (main), and they enter the
    ghost list. Without the re-key 5 would go first (main before small). Both trees."""
    for tree in (RadixCache, SegmentCache):
        cache = tree(10, POLICIES.build("s3fifo"))
        cache.insert(None, [5], [1], 0.0, 0)
        cache.touch(cache.match([5], 1.0).pages, 1.0, 1)
        cache.insert(None, [1, 2, 3], [1, 1, 1], 2.0, 2)
        assert cache.policy._small_tokens == 1  # 3 alone is within S's budget
        cache.insert(None, [4], [1], 3.0, 3)
        for left in ([1, 2, 4, 5], [1, 4, 5], [4, 5]):
            cache.evict(10 - cache.resident_tokens + 1)
            assert sorted(page.page_id for page in cache.pages()) == left, tree
        assert [cache.policy.in_ghost(i) for i in (1, 2, 3, 5)] == [True, True, True, False]
        cache.check_invariants()


def test_clear_sets_an_aging_policys_clock_back():
    """GDSF, 8 tokens: three 4-token prompts evict one page, which raises the GreedyDual
    clock L above 0; a cleared cache starts from L = 0 as a new one does (a later replay
    would otherwise rank its pages against the old L)."""
    cache = SegmentCache(8, POLICIES.build("gdsf"), None)
    for recency, page in enumerate([1, 2, 3]):
        cache.access([page], float(recency), recency, 4, 4)
    assert cache.counters.evicted_pages == 1 and cache.policy.clock > 0
    cache.clear()
    assert cache.policy.clock == 0.0


# ------------------------------------------- step by step: classes, tiers, a pool
STEPWISE_POLICIES = [*ON_SEGMENTS, "belady"]


def stepwise_policy(name, requests):
    """A policy for one tree's replay of `requests` (belady prepared on them: offline)."""
    if name != "belady":
        return POLICIES.build(name)
    policy = Belady()
    policy.prepare(requests)
    return policy


# ---------------------------------------------------------------- request classes
@st.composite
def class_rules(draw):
    """Two classes (a share of the requests, and the long prompts) with their own TTL and
    priority, a minimum cacheable prompt, caching on or off."""
    ttl = st.one_of(st.none(), st.sampled_from([0.5, 2.0, 30.0]))
    classes = [RequestClass("some", ttl_s=draw(ttl), priority=draw(st.integers(0, 2)),
                            share=draw(st.sampled_from([0.3, 0.7]))),
               RequestClass("long", ttl_s=draw(ttl), priority=draw(st.integers(0, 2)),
                            min_input_tokens=draw(st.integers(1, 30)))]
    return CacheRules(classes, draw(st.integers(0, 6)), draw(st.integers(0, 3)),
                      enabled=draw(st.booleans()) or draw(st.booleans()))


@settings(max_examples=150, deadline=None)
@given(prefix_traces(), CAPACITIES, st.sampled_from(STEPWISE_POLICIES), TTLS, class_rules())
def test_request_classes_replay_on_segments_as_on_pages(requests, capacity, policy, ttl,
                                                        rules):
    """With request classes (their TTLs and priorities, the minimum cacheable prompt) the
    step-by-step replay (engine/cache_only.py) drives either tree: the same hits, counters,
    resident pages and each page's deadline and priority."""
    if ttl is None and rules.needs_ttl:
        ttl = TTLRule(float("inf"))  # as build_cache makes it
    out = []
    for cache in (RadixCache(capacity, stepwise_policy(policy, requests), ttl),
                  SegmentCache(capacity, stepwise_policy(policy, requests), ttl)):
        result = replay_cache_only(requests, cache, rules=rules, sample_interval_s=1.0)
        cache.check_invariants()
        if isinstance(cache, SegmentCache):
            pages = {pid: (node.deadline_s, node.priority, node.recency, node.num_hits)
                     for node in cache.segments() for pid in node.ids}
        else:
            pages = {page.page_id: (page.deadline_s, page.priority, page.recency,
                                    page.num_hits) for page in cache.pages()}
        out.append(([r.cached_tokens for r in result.records], result.counters, pages,
                    result.states))
    assert out[0] == out[1]


def page_statistics(cache) -> dict[int, tuple]:
    """Each resident page's deadline, priority, recency and hits, on either tree."""
    if isinstance(cache, SegmentCache):
        return {pid: (node.deadline_s, node.priority, node.recency, node.num_hits)
                for node in cache.segments() for pid in node.ids}
    return {page.page_id: (page.deadline_s, page.priority, page.recency, page.num_hits)
            for page in cache.pages()}


BLOCK_AS_RADIX = ["lru", "priority"]  # parents outlast children: leaves only, no orphans
# any unlocked segment a victim: taken from a segment's tail, its head, or by each page's
# own entry (keys or states per page)
BLOCK_POLICIES = ["belady", "fifo", "gdsf", "lfu", "lru", "priority", "s3fifo", "ttl",
                  "workload_aware"]


def block_segments(capacity, policy, ttl, whole_paths, requests):
    """A compressed cache in block mode: leaves only where `whole_paths` and the policy's
    parents outlast their children, else every unlocked segment a victim."""
    cache = SegmentCache(capacity, stepwise_policy(policy, requests), ttl,
                         mode=CacheMode.BLOCK, whole_paths=whole_paths)
    assert cache.block is not (whole_paths and policy in BLOCK_AS_RADIX)
    return cache


@settings(max_examples=200, deadline=None)
@given(st.one_of(prefix_traces(), prefix_traces(chained=False)), CAPACITIES,
       st.sampled_from(BLOCK_POLICIES), TTLS, st.one_of(st.none(), class_rules()),
       st.booleans())
def test_block_mode_on_segments_as_on_pages(requests, capacity, policy, ttl, rules,
                                            whole_paths):
    """Cache-only, block mode, with or without request classes (TTLs, priorities, a
    minimum cacheable prompt, caching off), the fast replay or the step-by-step one: the
    compressed cache gives the per-page tree's block-mode results (any unlocked page a
    victim; lfu leaves orphans; every shape of a segment's eviction: its tail, its head,
    each page by its own entry): hits, counters, state rows, each page's statistics, the
    orphans' tokens, or the same input error. Where parents outlast children in a
    whole-path replay (lru, priority) it evicts leaves only and no orphan is ever left."""
    if rules is not None and ttl is None and rules.needs_ttl:
        ttl = TTLRule(float("inf"))
    out = []
    for cache in (RadixCache(capacity, stepwise_policy(policy, requests), ttl,
                             CacheMode.BLOCK),
                  block_segments(capacity, policy, ttl, whole_paths, requests)):
        try:
            result = replay_cache_only(requests, cache, rules=rules, sample_interval_s=1.0)
        except InputError as exc:
            out.append(str(exc))
            continue
        cache.check_invariants()
        if not cache.block:
            assert cache.orphan_tokens() == 0
        out.append(([r.cached_tokens for r in result.records], result.counters,
                    page_statistics(cache), result.states, cache.orphan_tokens()))
    assert out[0] == out[1]


# ------------------------------------------------------------------- lower tiers
@settings(max_examples=150, deadline=None)
@given(prefix_traces(), st.integers(0, 60), st.sampled_from(STEPWISE_POLICIES), TTLS,
       st.integers(0, 40), st.one_of(st.none(), st.integers(0, 40)), st.integers(0, 8))
def test_lower_tiers_replay_on_segments_as_on_pages(requests, capacity, policy, ttl, host,
                                                    disk, min_load):
    """Host and disk tiers under HBM (R15): evicted pages go down in the order RadixCache
    evicts them, so both trees give the same hits per tier, counters, state rows, resident
    pages and tier contents (in LRU order)."""
    out = []
    for cache in (RadixCache(capacity, stepwise_policy(policy, requests), ttl),
                  SegmentCache(capacity, stepwise_policy(policy, requests), ttl)):
        tiers = build_tier_stack(cache, host, 1.0, disk, 1.0, min_load)
        result = replay_cache_only(requests, cache, tiers=tiers, sample_interval_s=1.0)
        cache.check_invariants()
        if isinstance(cache, SegmentCache):
            resident = sorted(pid for node in cache.segments() for pid in node.ids)
        else:
            resident = sorted(page.page_id for page in cache.pages())
        out.append(([(r.cached_tokens, r.cached_tokens_host, r.cached_tokens_disk)
                     for r in result.records], result.counters, result.states, resident,
                    [list(tier._pages.items()) for tier in tiers.tiers]))
    assert out[0] == out[1]


@settings(max_examples=100, deadline=None)
@given(st.one_of(prefix_traces(), prefix_traces(chained=False)), st.integers(0, 60),
       st.sampled_from(BLOCK_POLICIES), TTLS, st.integers(0, 40),
       st.one_of(st.none(), st.integers(0, 60)), st.booleans(), st.booleans())
def test_block_mode_with_tiers_or_a_pool_on_segments_as_on_pages(
        requests, capacity, policy, ttl, host, pool_capacity, with_pool, whole_paths):
    """Block mode with a host tier or a shared pool below HBM: the same hits per tier,
    counters, state rows, resident pages, orphans, and the tier's or the pool's contents
    on either tree (evicted pages go down, and a pool's write-back writes their chains,
    an orphan's through its lost ancestors, as the per-page tree's block mode does)."""
    out = []
    for cache in (RadixCache(capacity, stepwise_policy(policy, requests), ttl,
                             CacheMode.BLOCK),
                  block_segments(capacity, policy, ttl, whole_paths, requests)):
        tiers = pool = None
        if with_pool:
            pool = SharedPool(RadixCache(pool_capacity, POLICIES.build("lru")),
                              PoolSpec(1.0, 1.0), lambda: 0.0)
        else:
            tiers = build_tier_stack(cache, host, 1.0, None, 1.0, 0)
        try:
            result = replay_cache_only(requests, cache, tiers=tiers, pool=pool,
                                       sample_interval_s=1.0)
        except InputError as exc:
            out.append(str(exc))
            continue
        cache.check_invariants()
        below = (pool_pages(pool.cache) if pool is not None
                 else [list(tier._pages.items()) for tier in tiers.tiers])
        out.append(([(r.cached_tokens, r.cached_tokens_host, r.cached_tokens_pool)
                     for r in result.records], result.counters, result.states,
                    page_statistics(cache), below, cache.orphan_tokens()))
    assert out[0] == out[1]


def test_belady_keeps_the_same_page_on_either_tree_after_an_id_named_twice():
    """Found by the test above: a request naming page 1 three times (ids not chained) left
    page 1 keyed by its own request's later position, so at page 3's insert the compressed
    tree kept page 1 (used next at 20) and dropped page 2 (used next at 19), where the
    per-page tree, reading each page's next use afresh, drops page 1 (cache/belady.py)."""
    names = ["2", "1", "1", "1", "2"] + ["1"] * 11 + ["1 2 1 1", "2", "3", "2"] + ["1"] * 10
    requests = [Request(i, 0.0, 7 if len(ids.split()) == 4 else 1, 1,
                        tuple(int(x) for x in ids.split()), 2) for i, ids in enumerate(names)]
    seen = []
    for cache in (RadixCache(2, stepwise_policy("belady", requests), None, CacheMode.BLOCK),
                  block_segments(2, "belady", None, False, requests)):
        replay_cache_only(requests[:19], cache)
        seen.append(page_statistics(cache))
    assert seen[0] == seen[1] == {2: (math.inf, 0, 17, 0), 3: (math.inf, 0, 18, 0)}


# -------------------------------------------------------------------- shared pool
@settings(max_examples=150, deadline=None)
@given(prefix_traces(), st.integers(0, 60), st.sampled_from(STEPWISE_POLICIES), TTLS,
       st.one_of(st.none(), st.integers(0, 60)), st.booleans())
def test_a_shared_pool_replays_on_segments_as_on_pages(requests, capacity, policy, ttl,
                                                       pool_capacity, write_through):
    """A KV pool below HBM (R18), written through or with HBM's evictions (each evicted
    page with the ancestors the pool lacks: its chain, read from the segment holding it):
    both trees give the same hits in HBM and in the pool, counters, state rows, and the
    same pool after the run (its counters, pages, tokens read and written)."""
    out = []
    for cache in (RadixCache(capacity, stepwise_policy(policy, requests), ttl),
                  SegmentCache(capacity, stepwise_policy(policy, requests), ttl)):
        pool = SharedPool(RadixCache(pool_capacity, POLICIES.build("lru")),
                          PoolSpec(1.0, 1.0, write_through=write_through), lambda: 0.0)
        result = replay_cache_only(requests, cache, pool=pool, sample_interval_s=1.0)
        cache.check_invariants()
        pool.cache.check_invariants()
        out.append(([(r.cached_tokens, r.cached_tokens_pool) for r in result.records],
                    result.counters, result.states, pool.cache.counters,
                    sorted(page.page_id for page in pool.cache.pages()), pool.read_tokens,
                    pool.write_tokens))
    assert out[0] == out[1]


def pool_pages(cache) -> dict[int, tuple]:
    """Each pool page's id -> (tokens, last access, recency, hits, deadline, priority), from
    either tree."""
    if isinstance(cache, SegmentCache):
        return {pid: (tokens, node.last_access_s, node.recency, node.num_hits,
                      node.deadline_s, node.priority)
                for node in cache.segments()
                for pid, tokens in zip(node.ids, [node.page_tokens] * (len(node.ids) - 1)
                                       + [node.last_tokens], strict=True)}
    return {page.page_id: (page.num_tokens, page.last_access_s, page.recency, page.num_hits,
                           page.deadline_s, page.priority) for page in cache.pages()}


@settings(max_examples=150, deadline=None)
@given(st.one_of(prefix_traces(), prefix_traces(chained=False)), st.integers(0, 60),
       st.sampled_from(ON_SEGMENTS), st.one_of(st.none(), st.integers(0, 60)),
       st.sampled_from(STEPWISE_POLICIES), TTLS, st.booleans())
def test_the_pool_s_own_tree_on_segments_as_on_pages(requests, capacity, policy,
                                                     pool_capacity, pool_policy, pool_ttl,
                                                     write_through):
    """The pool's own tree (R18) a SegmentCache, as pipeline/build.py makes it for a
    node-uniform policy or belady (keys read by access: the pool's recency counts its
    reads and writes), or a RadixCache: the same hits in HBM and in the pool, counters,
    the same pool pages with the same statistics (a hit refreshes only the pages beyond
    HBM's match: `run_from` splits a segment there), tokens read and written, or the
    same input error (ids not chained crossing in HBM or in the pool)."""
    out = []
    for pool_tree in (RadixCache, SegmentCache):
        cache = SegmentCache(capacity, POLICIES.build(policy))
        keyed = stepwise_policy(pool_policy, requests)
        tree = (RadixCache(pool_capacity, keyed, pool_ttl) if pool_tree is RadixCache
                else SegmentCache(pool_capacity, keyed, pool_ttl, by_access=True))
        pool = SharedPool(tree, PoolSpec(1.0, 1.0, write_through=write_through), lambda: 0.0)
        try:
            result = replay_cache_only(requests, cache, pool=pool, sample_interval_s=1.0)
        except InputError as exc:
            out.append(str(exc))
            continue
        pool.cache.check_invariants()
        out.append(([(r.cached_tokens, r.cached_tokens_pool) for r in result.records],
                    result.counters, result.states, pool.cache.counters,
                    pool_pages(pool.cache), pool.read_tokens, pool.write_tokens))
    assert out[0] == out[1]


def test_a_pool_write_across_a_partial_page_goes_in_by_stretches():
    """A chain whose pages are not all one size but the last (a prompt's partial last page
    that a later prompt named as a full page of its own) goes into a compressed pool as one
    segment per stretch, each below the last, all of it written (known answer)."""
    for tree in (RadixCache, SegmentCache):
        pool = SharedPool(tree(None, POLICIES.build("lru")), PoolSpec(1.0, 1.0), lambda: 0.0)
        assert pool.write([1, 2, 3, 4, 5], [4, 1, 4, 4, 2]) == 15
        assert pool.write([1, 2, 3, 4, 5], [4, 1, 4, 4, 2]) == 0
        assert pool.write([7, 8], [3, 4]) == 7  # a short first page, then a longer one
        assert pool.cache.num_pages == 7 and pool.cache.resident_tokens == 22
        if tree is SegmentCache:
            assert segment_ids(pool.cache) == [[1, 2], [3, 4, 5], [7], [8]]
        assert page_sizes(pool.run_after([1, 2, 3, 4, 5], 1, 0.0)) == [
            (2, 1), (3, 4), (4, 4), (5, 2)]
        if tree is SegmentCache:  # the run starts a segment: [1, 2] split after 1
            assert segment_ids(pool.cache) == [[1], [2], [3, 4, 5], [7], [8]]


def segment_ids(cache: SegmentCache) -> list[list[int]]:
    return sorted(list(node.ids) for node in cache.segments())


def test_a_pool_hit_beyond_hbm_keeps_its_ancestors_alive_as_long():
    """R12 in the pool: a hit of the pool refreshes only the pages beyond HBM's match (R18),
    and their ancestors take the new deadline (their other statistics unchanged), so a
    parent never expires before its child there either (known answer, both trees: chain
    [1, 2, 3] written at 0 with a 1 s TTL, pages 2 and 3 read from the pool at 0.5)."""
    for tree in (RadixCache, SegmentCache):
        clock = [0.0]
        pool = SharedPool(tree(None, POLICIES.build("lru"), TTLRule(1.0)), PoolSpec(1.0, 1.0),
                          lambda clock=clock: clock[0])
        pool.write([1, 2, 3], [4, 4, 4])
        clock[0] = 0.5
        run = pool.run_after([1, 2, 3], 1, 0.5)
        pool.read(run, 8, 0.5)
        pages = pool_pages(pool.cache)
        assert {pid: stats[4] for pid, stats in pages.items()} == {1: 1.5, 2: 1.5, 3: 1.5}
        assert pages[1][1:4] == (0.0, 1, 0) and pages[2][1:4] == (0.5, 2, 1)
        pool.cache.check_invariants()
        assert len(pool.cache.match([1, 2, 3], 1.2).pages) == 3
        assert len(pool.cache.match([1, 2, 3], 1.6).pages) == 0


def test_matched_pages_counts_a_match_without_splitting():
    """`matched_pages` counts what `match` finds (expired pages dropped first) and leaves
    the segment whole; a pool write of a chain it holds whole splits nothing either (each
    page HBM evicts writes its chain, one page shorter than the last)."""
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(5.0))
    cache.insert(None, [1, 2, 3], [4, 4, 4], 0.0, 1)
    assert [cache.matched_pages(ids, 1.0) for ids in ([1, 2], [1, 2, 3, 4], [1, 9], [7])] == [
        2, 3, 1, 0]
    assert segment_ids(cache) == [[1, 2, 3]]
    assert cache.matched_pages([1, 2], 5.5) == 0 and cache.num_pages == 0  # expired
    pool = SharedPool(SegmentCache(None, POLICIES.build("lru")), PoolSpec(1.0, 1.0),
                      lambda: 0.0)
    assert pool.write([1, 2, 3], [4, 4, 4]) == 12
    assert pool.write([1, 2], [4, 4]) == 0 and pool.write([1], [4]) == 0
    assert segment_ids(pool.cache) == [[1, 2, 3]]
    assert pool.write([1, 5], [4, 4]) == 4  # a branch after 1: the split is needed
    assert segment_ids(pool.cache) == [[1], [2, 3], [5]]


@settings(max_examples=100, deadline=None)
@given(prefix_traces(), CAPACITIES, TTLS)
def test_page_ids_are_the_resident_pages_ids(requests, capacity, ttl):
    """`page_ids()` (a router's snapshot) lists what `pages()` does, on either tree."""
    for cache in (RadixCache(capacity, POLICIES.build("lru"), ttl),
                  SegmentCache(capacity, POLICIES.build("lru"), ttl)):
        replay_cache_only(requests, cache)
        assert cache.page_ids() == {page.page_id for page in cache.pages()}
        assert len(cache.page_ids()) == cache.num_pages
