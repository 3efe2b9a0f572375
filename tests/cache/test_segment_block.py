"""Block mode on the compressed cache (docs/cache-semantics.md R3, docs/architecture.md "One
prefix cache"): every unlocked segment is a victim, its pages taken from its tail; the
pages below one that leaves stay resident as an orphan until a match or an insert reaches
its lost parent again. Known answers worked by hand (1-token pages, LRU: the least recent
touch goes first, the deeper page first on a tie), each checked on the per-page tree too.
The random differential tests are in test_segment_tree.py, test_segment_locks.py and
tests/engine/test_timed_segments.py.
"""

from __future__ import annotations

import random

import pytest
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode, ChainConflict, TTLMode, TTLRule
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tiers import build_tier_stack
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.trace import Request


def trees(capacity: int, chained: bool = True) -> list:
    """A per-page tree and a compressed one, both in block mode under LRU."""
    return [RadixCache(capacity, POLICIES.build("lru"), None, CacheMode.BLOCK),
            SegmentCache(capacity, POLICIES.build("lru"), None, chained=chained,
                         mode=CacheMode.BLOCK)]


def resident(cache) -> list[int]:
    return sorted(page.page_id for page in cache.pages())


def orphaned(cache) -> SegmentCache | RadixCache:
    """[1, 2] inserted at t=0 (recency 1), [3, 4] below it at t=1 (recency 2), then one
    token evicted: the least recent page is 2, the deeper of [1, 2], though 3 hangs below
    it: 3 and 4 stay, an orphan of 1 token (its first page's)."""
    run = cache.insert(None, [1, 2], [1, 1], 0.0, 1)
    cache.insert(run[-1], [3, 4], [1, 1], 1.0, 2)
    assert cache.evict(cache.capacity_tokens - cache.resident_tokens + 1)  # 1 past the free
    return cache


@pytest.mark.parametrize("kind", [0, 1])
def test_the_tail_of_a_parent_goes_first_and_leaves_its_children_orphans(kind):
    cache = orphaned(trees(4)[kind])
    cache.check_invariants()
    assert resident(cache) == [1, 3, 4] and cache.orphan_tokens() == 1
    assert cache.match([1, 2, 3, 4], 2.0).num_pages == 1  # 2 is gone: 3 is unreachable
    assert cache.counters.evicted_pages == 1


@pytest.mark.parametrize("kind", [0, 1])
def test_an_insert_of_the_lost_parent_readopts_the_orphan(kind):
    """[2, 3, 4] below 1: 2 is new (the one free token), 3 is the orphan whose lost parent
    was 2: reused with 4 below it, nothing more inserted; the whole chain matches again."""
    cache = orphaned(trees(4)[kind])
    tip = cache.match([1, 2, 3, 4], 2.0).pages[-1]
    placed = cache.insert(tip, [2, 3, 4], [1, 1, 1], 2.0, 3)
    cache.check_invariants()
    assert len(placed) == 3 and cache.counters.inserted_pages == 5
    assert cache.orphan_tokens() == 0 and resident(cache) == [1, 2, 3, 4]
    assert cache.match([1, 2, 3, 4], 3.0).num_pages == 4


@pytest.mark.parametrize("kind", [0, 1])
def test_a_match_readopts_an_orphan_below_its_reinserted_parent(kind):
    """2 comes back alone below 1 (capacity 5); a match of [1, 2, 3, 4] then reaches 3 by
    its id after 2, re-adopts it and matches on."""
    cache = orphaned(trees(5)[kind])
    tip = cache.match([1, 2], 2.0).pages[-1]
    cache.insert(tip, [2], [1], 2.0, 3)
    assert cache.orphan_tokens() == 1
    assert cache.match([1, 2, 3, 4], 3.0).num_pages == 4
    cache.check_invariants()
    assert cache.orphan_tokens() == 0


@pytest.mark.parametrize("kind", [0, 1])
def test_a_match_ending_inside_a_segment_readopts_below_the_split(kind):
    """2 comes back followed by 9 ([2, 9], one segment on the compressed tree); a match of
    [1, 2, 3] ends after 2, inside it: the segment is split there and 3 re-adopted."""
    cache = orphaned(trees(6)[kind])
    tip = cache.match([1], 2.0).pages[-1]
    cache.insert(tip, [2, 9], [1, 1], 2.0, 3)
    assert cache.match([1, 2, 3, 4], 3.0).num_pages == 4
    cache.check_invariants()
    assert cache.orphan_tokens() == 0 and resident(cache) == [1, 2, 3, 4, 9]


@pytest.mark.parametrize("kind", [0, 1])
def test_an_orphan_id_after_another_parent_is_a_chain_conflict(kind):
    """Ids not chained: 3, an orphan whose lost parent was 2, named after 7 instead: an id
    already cached after a different prefix."""
    cache = orphaned(trees(8, chained=False)[kind])
    with pytest.raises(ChainConflict):
        cache.insert(None, [7, 3], [1, 1], 2.0, 3)
    assert cache.orphan_tokens() == 1


@pytest.mark.parametrize("kind", [0, 1])
def test_the_matched_path_is_protected_whole(kind):
    """Evicting for a request whose match ends at 3: 1 and 2, older, are on its path, so
    nothing can go."""
    cache = trees(3)[kind]
    run = cache.insert(None, [1, 2], [1, 1], 0.0, 1)
    run = cache.insert(run[-1], [3], [1], 1.0, 2)
    assert not cache.evict(1, protect=run[-1])
    assert resident(cache) == [1, 2, 3] and cache.counters.evicted_pages == 0


def test_an_orphan_page_names_its_lost_chain():
    """What a pool's write-back reads of an evicted orphan page: its ids and tokens from
    the root, the lost ancestors' included, as the per-page tree's."""
    chains = []
    for cache in trees(4):
        orphaned(cache)
        evicted = []  # read as each page goes (a segment's view of it is good until then)
        cache.on_demote = lambda page, out=evicted: out.append(page.chain())
        cache.insert(None, [5], [1], 3.0, 5)
        cache.evict(2)  # 1 (recency 1), then 4 (recency 2, deeper than 3)
        chains.append(evicted)
    assert chains[0] == chains[1] == [([1], [1]), ([1, 2, 3, 4], [1, 1, 1, 1])]


def test_orphans_expire_and_count_as_radix_cache_counts():
    """A TTL of 1 s: everything inserted by t=1 is gone at t=2.5, the orphan too."""
    for cache in (RadixCache(4, POLICIES.build("lru"), TTLRule(1.0), CacheMode.BLOCK),
                  SegmentCache(4, POLICIES.build("lru"), TTLRule(1.0), mode=CacheMode.BLOCK)):
        orphaned(cache)
        assert cache.expire(2.5) == 3
        cache.check_invariants()
        assert cache.orphan_tokens() == 0 and cache.counters.expired_pages == 3


def test_a_readopted_orphan_keeps_its_new_parent_alive():
    """Per-request TTLs (R16): 3 goes in below [1, 2] for 100 s (its ancestors raised to
    101, R12), 2 is evicted, 2 comes back for 1 s (deadline 3); the match that re-adopts
    3 below it raises 2 to 101 too, so at t=5 nothing has expired."""
    for cache in (RadixCache(3, POLICIES.build("lru"), TTLRule(10.0), CacheMode.BLOCK),
                  SegmentCache(3, POLICIES.build("lru"), TTLRule(10.0), mode=CacheMode.BLOCK)):
        run = cache.insert(None, [1, 2], [1, 1], 0.0, 1)
        cache.insert(run[-1], [3], [1], 1.0, 2, ttl_s=100.0)
        assert cache.evict(1) and cache.orphan_tokens() == 1
        tip = cache.match([1, 2], 2.0).pages[-1]
        cache.insert(tip, [2], [1], 2.0, 3, ttl_s=1.0)
        assert cache.match([1, 2, 3], 2.5).num_pages == 3
        assert cache.expire(5.0) == 0
        cache.check_invariants()
        assert resident(cache) == [1, 2, 3] and cache.orphan_tokens() == 0


def random_trace(rng: random.Random, chained: bool) -> list[Request]:
    """Up to 80 requests over a tree of prompts (a prompt extends a prefix of an earlier
    one), arrivals in steps of 0 to 3 s: longer than the hypothesis traces, so that
    orphans are made, outlive a few requests and are re-adopted."""
    prompts: list[tuple[int, ...]] = []
    requests = []
    next_id, now, page = 1, 0.0, rng.choice([1, 2, 4])
    for position in range(rng.randint(5, 80)):
        now += rng.choice([0.0, 0.5, 1.0, 3.0])
        base: tuple[int, ...] = ()
        if prompts and rng.random() < 0.8:
            prompt = rng.choice(prompts)
            base = prompt[:rng.randint(0, len(prompt))]
        new = []
        for _ in range(rng.randint(0 if base else 1, 4)):
            if chained:
                new.append(next_id)
                next_id += 1
            else:
                new.append(rng.randint(1, 8))
        ids = base + tuple(new)
        length = (len(ids) - 1) * page + rng.randint(1, page)
        requests.append(Request(position, now, length, 1, ids, page))
        prompts.append(ids)
    return requests


def built(name: str, requests: list[Request]):
    """A new policy `name` for one tree's replay of `requests` (belady prepared on them:
    offline)."""
    policy = POLICIES.build(name)
    if name == "belady":
        policy.prepare(requests)
    return policy


def seeded_case(seed: int):
    """(rng, requests, policy, capacity, ttl) of seeded trace `seed`: a trace of
    `random_trace`, a policy that runs block mode on segments, a capacity from a page up,
    no TTL or a sliding or fixed one; `rng` goes on for the caller's further draws."""
    rng = random.Random(seed)
    requests = random_trace(rng, chained=rng.random() < 0.7)
    policy = rng.choice(["belady", "fifo", "gdsf", "lfu", "lru", "priority", "s3fifo", "ttl",
                         "workload_aware"])
    capacity = rng.randint(1, 30)
    ttl = rng.choice([None, None, TTLRule(2.0), TTLRule(5.0, TTLMode.FIXED)])
    return rng, requests, policy, capacity, ttl


def replayed(cache, requests: list[Request]):
    """A block-mode replay's hits, counters, resident pages with their deadlines and
    orphan tokens (the cache's invariants checked), or its input error."""
    try:
        result = replay_cache_only(requests, cache, sample_interval_s=1.0)
    except InputError as exc:
        return str(exc)
    cache.check_invariants()
    return ([r.cached_tokens for r in result.records], result.counters,
            sorted((p.page_id, p.deadline_s) for p in cache.pages()), cache.orphan_tokens())


@pytest.mark.parametrize("block", range(4))
def test_long_random_traces_replay_as_on_pages(block):
    """200 seeded traces a block (chained or not, every policy that runs block mode on
    segments, TTLs sliding or fixed, capacities from a page up), each replayed in block
    mode on both trees: the same hits, counters, resident pages with their deadlines, and
    orphans, or the same input error."""
    for seed in range(200 * block, 200 * block + 200):
        _, requests, policy, capacity, ttl = seeded_case(seed)
        pages = RadixCache(capacity, built(policy, requests), ttl, CacheMode.BLOCK)
        segments = SegmentCache(capacity, built(policy, requests), ttl, mode=CacheMode.BLOCK)
        assert replayed(pages, requests) == replayed(segments, requests), f"seed {seed}"


def test_belady_keyed_by_access_replays_as_on_pages():
    """Belady keyed by each page's id and its segment's last access and recency as it is
    queued (`by_access`: a timed replica's cache), in block mode: 200 seeded traces give
    the per-page tree's hits, counters, resident pages with their deadlines and orphans."""
    for seed in range(200):
        _, requests, _, capacity, ttl = seeded_case(seed)
        pages = RadixCache(capacity, built("belady", requests), ttl, CacheMode.BLOCK)
        segments = SegmentCache(capacity, built("belady", requests), ttl, by_access=True,
                                mode=CacheMode.BLOCK)
        assert replayed(pages, requests) == replayed(segments, requests), f"seed {seed}"


def test_earliest_deadline_first_reads_a_raised_deadline():
    """ttl policy (R11), block mode, a sliding 10 s TTL: 1 (deadline 10) and 2 (11) at the
    root, then 3 below 1 at t=5 raises 1 to 15 (R12). One more page at t=6 evicts the
    earliest deadline, 2, not 1 under the deadline it was queued with."""
    for cache in (RadixCache(3, POLICIES.build("ttl"), TTLRule(10.0), CacheMode.BLOCK),
                  SegmentCache(3, POLICIES.build("ttl"), TTLRule(10.0), mode=CacheMode.BLOCK)):
        one = cache.insert(None, [1], [1], 0.0, 1)
        cache.insert(None, [2], [1], 1.0, 2)
        cache.insert(one[-1], [3], [1], 5.0, 3)
        assert cache.evict(1)
        cache.insert(None, [4], [1], 6.0, 4)
        cache.check_invariants()
        assert resident(cache) == [1, 3, 4] and cache.orphan_tokens() == 0


def test_fifo_takes_a_segment_from_its_head():
    """fifo (insertion order) in block mode: [1, 2] then [1, 2, 3], then [4] needs a
    page: the oldest insert, 1, goes though pages follow it: 2 is left an orphan with 3
    below it, which no match reaches (on the compressed tree [1, 2] loses its head and
    the rest goes on as the orphan)."""
    requests = [Request(0, 0.0, 2, 1, (1, 2), 1), Request(1, 1.0, 3, 1, (1, 2, 3), 1),
                Request(2, 2.0, 1, 1, (4,), 1)]
    for cache in (RadixCache(3, POLICIES.build("fifo"), None, CacheMode.BLOCK),
                  SegmentCache(3, POLICIES.build("fifo"), None, mode=CacheMode.BLOCK)):
        replay_cache_only(requests, cache)
        cache.check_invariants()
        assert cache.orphan_tokens() == 1 and resident(cache) == [2, 3, 4]
        assert cache.match([1, 2, 3], 3.0).num_pages == 0


def test_fifo_takes_several_head_pages_at_once_first_page_first():
    """[1, 2, 3, 4] then [5, 6] in 4 tokens (fifo, block mode): two pages must go, the two
    oldest inserts, 1 then 2 (handed to the host tier in that order), and [3, 4] is left
    an orphan of 1 token."""
    requests = [Request(0, 0.0, 4, 1, (1, 2, 3, 4), 1), Request(1, 1.0, 2, 1, (5, 6), 1)]
    for cache in (RadixCache(4, POLICIES.build("fifo"), None, CacheMode.BLOCK),
                  SegmentCache(4, POLICIES.build("fifo"), None, mode=CacheMode.BLOCK)):
        tiers = build_tier_stack(cache, 10, 1.0, None, 1.0, 0)
        replay_cache_only(requests, cache, tiers=tiers)
        cache.check_invariants()
        assert resident(cache) == [3, 4, 5, 6] and cache.orphan_tokens() == 1
        assert list(tiers.tiers[0]._pages) == [1, 2]


@pytest.mark.parametrize("block", range(2))
def test_long_random_traces_with_tiers_pools_or_classes_replay_as_on_pages(block):
    """200 seeded traces a block through the step-by-step replay: a host tier (and a
    disk), a shared pool written back or through (an evicted orphan's chain written
    through its lost ancestors), or a request class with its own TTL and priority; the
    same hits per tier, counters, each page's statistics, what is below HBM, orphans."""
    for seed in range(200 * block, 200 * block + 200):
        rng, requests, policy, capacity, ttl = seeded_case(seed)
        kind = rng.choice(["tier", "pool", "pool_through", "classes"])
        host, disk, pool_capacity = rng.randint(0, 30), rng.choice([None, 20]), rng.randint(0, 60)
        rule = RequestClass("some", ttl_s=rng.choice([None, 1.0, 30.0]),
                            priority=rng.randint(0, 2), share=0.5)
        if kind == "classes" and ttl is None and rule.ttl_s is not None:
            ttl = TTLRule(float("inf"))  # as build_cache makes it
        out = []
        for cache in (RadixCache(capacity, built(policy, requests), ttl, CacheMode.BLOCK),
                      SegmentCache(capacity, built(policy, requests), ttl,
                                   mode=CacheMode.BLOCK)):
            tiers = pool = rules = None
            if kind == "tier":
                tiers = build_tier_stack(cache, host, 1.0, disk, 1.0, 0)
            elif kind == "classes":
                rules = CacheRules([rule], 0, 0)
            else:
                pool = SharedPool(RadixCache(pool_capacity, POLICIES.build("lru")),
                                  PoolSpec(1.0, 1.0, write_through=kind == "pool_through"),
                                  lambda: 0.0)
            try:
                result = replay_cache_only(requests, cache, tiers=tiers, pool=pool,
                                           rules=rules, sample_interval_s=1.0)
            except InputError as exc:
                out.append(str(exc))
                continue
            cache.check_invariants()
            below = (sorted((p.page_id, p.num_tokens) for p in pool.cache.pages())
                     if pool is not None else
                     [list(tier._pages.items()) for tier in tiers.tiers] if tiers else None)
            out.append(([(r.cached_tokens, r.cached_tokens_host, r.cached_tokens_pool)
                         for r in result.records], result.counters,
                        sorted((p.page_id, p.deadline_s) for p in cache.pages()), below,
                        cache.orphan_tokens()))
        assert out[0] == out[1], f"seed {seed} ({kind})"
