"""`ReplicaMemory` (engine/replica_memory.py) on its own: admission, async-load holds,
chunk growth, preemption and pool write-backs worked by hand, token by token.

Every replica here has an LRU cache of 32 tokens (unless said), 4-token pages and the
`Ticks` cost model (a transfer takes bytes / bandwidth seconds).
"""

from __future__ import annotations

import pytest
import simpy
from fakes import Ticks, lru

from prefixsim.cache.classes import BYPASS_RULE, RequestRule
from prefixsim.cache.pool import PoolLink, PoolSpec, SharedPool
from prefixsim.cache.tiers import TierSpec, TierStack
from prefixsim.cache.ttl import TTLRule
from prefixsim.engine.replica_memory import ReplicaMemory
from prefixsim.engine.request_state import HELD, RUNNING, WAITING, RequestState
from prefixsim.errors import InputError
from prefixsim.trace import Request

P = 4


def memory(capacity: int = 32, **kwargs) -> ReplicaMemory:
    return ReplicaMemory(simpy.Environment(), lru(capacity), Ticks(), **kwargs)


def state(rid: int, input_tokens: int, pages: tuple[int, ...], output: int = 4
          ) -> RequestState:
    return RequestState(Request(rid, 0.0, input_tokens, output, pages, P), 0.0)


# ------------------------------------------------------------------------- construction
def test_defaults_are_no_kv_bytes_and_blocking_loads():
    mem = memory()
    assert mem.kv_bytes_per_token == 0
    assert mem.async_loads is False
    assert (mem.num_preemptions, mem.query_tokens, mem.hit_tokens) == (0, 0, 0)
    assert mem.capacity_tokens == 32
    assert (mem._decode_room, mem._outstanding, mem._recency, mem._load_link_free_s) == (
        0, 0, 0, 0.0)
    assert (mem.loading, mem.running, list(mem.waiting)) == ([], [], [])


def test_a_cache_without_capacity_is_refused():
    with pytest.raises(ValueError, match=r"^a replica's cache needs a capacity \(its KV pool\)$"):
        ReplicaMemory(simpy.Environment(), lru(None), Ticks())


SPEC = PoolSpec(read_bytes_s=1000.0, write_bytes_s=1000.0)


@pytest.mark.parametrize(("write_through", "with_link", "hooked"),
                         [(False, True, True), (True, True, False), (False, False, False)])
def test_hbm_evictions_are_written_back_only_with_a_link_and_write_back(
        write_through, with_link, hooked):
    """Write-back needs the pool and this replica's link; write-through writes at insert."""
    spec = PoolSpec(1000.0, 1000.0, write_through=write_through)
    shared = SharedPool(lru(None), spec, lambda: 0.0)
    link = PoolLink(spec) if with_link else None
    mem = memory(pool=shared, link=link)
    assert (mem.cache.on_demote is not None) is hooked


def test_an_eviction_is_written_to_the_pool_over_the_holders_link():
    """Replica 1 (HBM 8 tokens, 1,000 B per token, pool pages held twice) holds page 1
    (4 tokens); reserving 8 tokens evicts it: the pool writes 4 tokens held by replica 1,
    and its link's write direction carries 4 * 1,000 * 2 = 8,000 bytes."""
    spec = PoolSpec(1000.0, 1000.0, replicas=2)
    shared = SharedPool(lru(None), spec, lambda: 0.0)
    links = [PoolLink(spec, 0), PoolLink(spec, 1)]
    shared.links = links
    mem = memory(8, kv_bytes_per_token=1000, pool=shared, link=links[1])
    mem.cache.insert(None, [1], [4], 0.0, 0)
    mem._reserve(8)
    assert mem.cache.get(1) is None
    assert shared.holder == {1: 1}
    assert shared.write_tokens == 4
    assert (links[1].writes.bytes, links[0].writes.bytes) == (8000, 0)


# ---------------------------------------------------------------------------- admission
def test_admission_refreshes_the_match_with_the_first_recency():
    """Page 1 cached (recency 0); A (L=8: pages 1, 2) matches it: the replica's first
    admission touches it with recency 1."""
    mem = memory()
    (page,) = mem.cache.insert(None, [1], [4], 0.0, 0)
    a = state(0, 8, (1, 2))
    assert mem.admit(a, 64) == 4
    assert (page.recency, page.num_hits, page.lock_count) == (1, 1, 1)
    assert (a.cached_tokens, a.computed_tokens, a.private_tokens) == (4, 4, 4)


# ------------------------------------------------------------------------------- growth
def test_grow_takes_the_last_free_token_and_not_one_more():
    mem = memory()
    a = state(0, 40, tuple(range(10)))
    assert mem.admit(a, 16) == 16
    assert mem.grow(a, 17) is False
    assert (a.private_tokens, mem.cache.reserved_tokens) == (16, 16)
    assert mem.grow(a, 16) is True
    assert (a.private_tokens, mem.cache.reserved_tokens, mem.cache.free_tokens) == (32, 32, 0)


# --------------------------------------------------------------------- async-load holds
def test_async_tier_hits_wait_off_the_batch_one_after_another():
    """Host tier read at 1,600 B/s, 1,000 B per token: a 4-token page loads in 2.5 s. A and
    B (L=8: pages 1, 2 and 3, 4) find their first page in host at t=0: each is admitted
    HELD, waiting, its chunk (4 tokens) and loaded page reserved (8 tokens); A's copy ends
    at 2.5, B's after it at 5.0, and each then rejoins the queue at its head."""
    mem = memory(kv_bytes_per_token=1000, async_loads=True)
    tiers = TierStack(mem.cache, [TierSpec("host", 1000, 1600.0)])
    mem.tiers = tiers
    for page_id in (1, 3):
        tiers.tiers[0].put(page_id, P)
    a, b = state(0, 8, (1, 2)), state(1, 8, (3, 4), output=2)
    for s in (a, b):
        assert mem.admit(s, 64) == HELD
        assert (s.status, s.loaded_chunk_tokens, s.private_tokens) == (WAITING, 4, 8)
        assert (s.cached_tokens, s.cached_tokens_host, s.load_s) == (4, 4, 0.0)
    assert mem.loading == [a, b]
    mem.env.run(until=2.4)
    assert mem.loading == [a, b] and list(mem.waiting) == []
    mem.env.run(until=2.6)
    assert mem.loading == [b] and list(mem.waiting) == [a]
    mem.env.run(until=4.9)
    assert mem.loading == [b]
    mem.env.run(until=5.1)
    assert list(mem.waiting) == [b, a] and mem.loading == []


def loaded(mem: ReplicaMemory, prepaid: int = 8) -> RequestState:
    """A (L=20) whose 4-token prefix has loaded, holding `prepaid` tokens for its first
    chunk (reserved in the cache and charged to it)."""
    a = state(0, 20, (1, 2, 3, 4, 5))
    a.computed_tokens = 4
    a.loaded_chunk_tokens = prepaid
    a.private_tokens = 4 + prepaid
    mem.cache.reserve(4 + prepaid)
    return a


@pytest.mark.parametrize(("decode_room", "size"), [(0, 16), (12, 16), (16, 12), (26, 8),
                                                   (40, 8)])
def test_a_loaded_request_grows_its_chunk_by_what_memory_spares(decode_room, size):
    """12 of 32 tokens reserved (4 loaded + 8 prepaid), 20 free; decode room D held back:
    the chunk is min(16 left to prefill, budget 64, 8 + max(0, 20 - D))."""
    mem = memory()
    a = loaded(mem)
    mem._decode_room = decode_room
    assert mem.admit(a, 64) == size
    assert a.status == RUNNING
    assert a.loaded_chunk_tokens == 0
    assert a.private_tokens == 4 + size
    assert mem.cache.reserved_tokens == 4 + size


def test_a_loaded_request_under_a_small_budget_returns_the_rest_of_its_prepayment():
    """Budget 5 of the 8 prepaid tokens: 3 go back to the cache."""
    mem = memory()
    a = loaded(mem)
    assert mem.admit(a, 5) == 5
    assert (a.private_tokens, mem.cache.reserved_tokens, a.loaded_chunk_tokens) == (9, 9, 0)


# ----------------------------------------------------------------------------- preempts
def test_two_preemptions_count_twice_and_requeue_at_the_head():
    mem = memory()
    a, b = state(0, 8, (1, 2)), state(1, 8, (3, 4))
    mem.waiting.append(b)
    for _ in range(2):
        assert mem.admit(a, 64) == 8
        mem.running.append(a)
        mem._preempt(a)
        assert a.status == WAITING
        assert mem.waiting.popleft() is a
    assert (a.preemptions, mem.num_preemptions) == (2, 2)
    assert (a.private_tokens, mem.cache.reserved_tokens, a.tip) == (0, 0, None)
    assert list(mem.waiting) == [b]


# ------------------------------------------------------------------- admission, by hand
def test_an_uncacheable_request_neither_matches_nor_counts_a_hit():
    """Page 1 cached; A (L=8: pages 1, 2) of the bypass class reserves all 8 tokens."""
    mem = memory()
    (page,) = mem.cache.insert(None, [1], [4], 0.0, 0)
    a = state(0, 8, (1, 2))
    a.rule = BYPASS_RULE
    assert mem.admit(a, 64) == 8
    assert (a.cached_tokens, a.computed_tokens, a.private_tokens, a.tip) == (0, 0, 8, None)
    assert (page.num_hits, page.lock_count) == (0, 0)
    assert (mem.query_tokens, mem.hit_tokens) == (8, 0)


@pytest.mark.parametrize(("decode_room", "size"), [(0, 8), (1, 0)])
def test_admission_needs_room_for_its_chunk_beside_the_decode_room(decode_room, size):
    """HBM 12 tokens holds page 1; A (L=12: pages 1, 2, 3) matches it (the cap stops at 2
    pages, page 2 is not cached): its chunk, 8 tokens, needs all 8 free tokens. With one
    token of decode room held back it does not fit: nothing reserved, page 1 unlocked, A
    untouched. (The cache's TTL, 100 s, expires nothing here.)"""
    mem = ReplicaMemory(simpy.Environment(), lru(12, TTLRule(100.0)), Ticks())
    (page,) = mem.cache.insert(None, [1], [4], 0.0, 0)
    mem._decode_room = decode_room
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == size
    if size:
        assert (a.status, a.tip, a.computed_tokens, a.private_tokens) == (RUNNING, page, 4, 8)
        assert (page.lock_count, mem.cache.reserved_tokens, mem._outstanding) == (1, 8, -4)
    else:
        assert (a.status, a.tip, a.admitted_s, a.computed_tokens) == (WAITING, None, None, 0)
        assert (page.lock_count, page.num_hits, mem.cache.reserved_tokens) == (0, 0, 0)
        assert (mem.query_tokens, mem._recency, mem._outstanding) == (0, 0, 0)


def test_tier_hits_below_a_partial_hbm_match_count_per_tier():
    """HBM holds page 1, host page 2 (1,600 B/s), disk page 3 (400 B/s), 1,000 B per token.
    A (L=16: pages 1-4, cap 3 pages) hits 12 tokens: 4 in HBM, 4 host, 4 disk; its chunk is
    the last 4 tokens, and it reserves 4 + 8 loaded = 12. Blocking: the copy, 4,000 / 1,600 +
    4,000 / 400 = 12.5 s, waits for its step; both pages left their tiers."""
    mem = memory(kv_bytes_per_token=1000)
    mem.cache.insert(None, [1], [4], 0.0, 0)
    tiers = TierStack(mem.cache, [TierSpec("host", 100, 1600.0), TierSpec("disk", 100, 400.0)])
    mem.tiers = tiers
    tiers.tiers[0].put(2, P)
    tiers.tiers[1].put(3, P)
    a = state(0, 16, (1, 2, 3, 4))
    assert mem.admit(a, 64) == 4
    assert (a.cached_tokens, a.cached_tokens_host, a.cached_tokens_disk) == (12, 4, 4)
    assert (a.computed_tokens, a.tree_tokens, a.num_tree_pages, a.private_tokens) == (12, 4, 1,
                                                                                      12)
    assert a.load_s == 12.5 and a.status == RUNNING
    assert 2 not in tiers.tiers[0] and 3 not in tiers.tiers[1]
    assert mem.cache.reserved_tokens == 12


class DoubledTransfers(Ticks):
    """Every transfer takes twice bytes / bandwidth."""

    def transfer_time_s(self, num_bytes, bandwidth_bytes_s) -> float:
        return 2 * num_bytes / bandwidth_bytes_s


def test_a_tier_hit_up_to_the_last_prompt_token_is_timed_by_the_cost_model():
    """HBM holds page 1, host page 2 (1,600 B/s, 1,000 B per token). A (L=9: pages 1, 2 and
    a 1-token page 3; cap 2 pages) hits 8 tokens, the most the L - 1 cap allows; its chunk
    is the last token. The cost model doubles transfer times: 2 * 4,000 / 1,600 = 5 s."""
    mem = ReplicaMemory(simpy.Environment(), lru(32), DoubledTransfers(), kv_bytes_per_token=1000)
    tiers = TierStack(mem.cache, [TierSpec("host", 100, 1600.0)])
    mem.tiers = tiers
    tiers.tiers[0].put(2, P)
    a = state(0, 9, (1, 2, 3))
    mem.cache.insert(None, [1], [4], 0.0, 0)
    assert mem.admit(a, 64) == 1
    assert (a.cached_tokens, a.cached_tokens_host, a.computed_tokens, a.private_tokens) == (
        8, 4, 8, 5)
    assert a.load_s == 5.0


POOL = PoolSpec(read_bytes_s=1000.0, write_bytes_s=1000.0, latency_s=0.5, lookup_s=0.25)


def pooled_memory(hbm_pages=(), async_loads=False, spec=POOL):
    """HBM 32 tokens holding `hbm_pages`, over a pool that holds pages 1, 2 (replica 0's),
    1,000 B per token: a read of n tokens takes 0.25 + 0.5 + n s."""
    shared = SharedPool(lru(None), spec, lambda: 0.0)
    link = PoolLink(spec)
    shared.links = [link]
    shared.write([1, 2], [4, 4])
    mem = memory(kv_bytes_per_token=1000, pool=shared, link=link, async_loads=async_loads)
    if hbm_pages:
        mem.cache.insert(None, list(hbm_pages), [4] * len(hbm_pages), 0.0, 0)
    return mem, shared, link


@pytest.mark.parametrize(("hbm_pages", "from_pool"), [((), 8), ((1,), 4)])
def test_a_pool_hit_beyond_hbm_is_read_before_the_first_chunk(hbm_pages, from_pool):
    """A (L=12: pages 1, 2, 3; cap 2 pages) hits 8 tokens, the pages HBM lacks read from
    the pool: 0.25 + 0.5 + from_pool s (blocking: added to its step)."""
    mem, shared, link = pooled_memory(hbm_pages)
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 4
    assert (a.cached_tokens, a.cached_tokens_pool, a.computed_tokens) == (8, from_pool, 8)
    assert a.private_tokens == 4 + from_pool
    assert a.load_s == 0.75 + from_pool
    assert (shared.read_tokens, link.reads.bytes) == (from_pool, from_pool * 1000)
    assert mem.hit_tokens == 8
    read = [shared.cache.get(i).num_hits for i in (1, 2)]
    assert read == ([0, 1] if hbm_pages else [1, 1])  # the pages read from the pool


def test_a_pool_read_is_timed_by_the_cost_model():
    """The cost model doubles transfers: A's 8-token read takes 0.25 + 0.5 + 2 * 8 s."""
    shared = SharedPool(lru(None), POOL, lambda: 0.0)
    link = PoolLink(POOL)
    shared.links = [link]
    shared.write([1, 2], [4, 4])
    mem = ReplicaMemory(simpy.Environment(), lru(32), DoubledTransfers(), kv_bytes_per_token=1000,
                        pool=shared, link=link)
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 4
    assert a.load_s == 16.75


def test_a_pool_miss_costs_its_lookup_and_a_full_hbm_match_costs_nothing():
    mem, shared, link = pooled_memory(async_loads=True)
    b = state(1, 12, (5, 6, 7))
    assert mem.admit(b, 64) == 12  # a miss: never held, only the lookup waits
    assert (b.load_s, b.cached_tokens, shared.read_tokens, link.reads.bytes) == (0.25, 0, 0, 0)
    mem, shared, link = pooled_memory((1, 2))
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 4
    assert (a.load_s, a.cached_tokens, a.cached_tokens_pool) == (0.0, 8, 0)


def test_an_async_pool_read_waits_for_its_own_link_booking():
    """Async: A's 8-token pool read (8.75 s) holds it off the batch; the host link's clock
    for tier loads is not used."""
    mem, shared, link = pooled_memory(async_loads=True)
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == HELD
    assert (a.status, a.loaded_chunk_tokens, a.load_s, mem._load_link_free_s) == (
        WAITING, 4, 0.0, 0.0)
    mem.env.run(until=8.7)
    assert mem.loading == [a]
    mem.env.run(until=8.8)
    assert list(mem.waiting) == [a] and mem.loading == []
    assert mem.admit(a, 64) == 4 and a.status == RUNNING


def test_readmission_after_preemption_counts_recomputed_tokens_not_queries():
    """A (L=8, 2 output tokens) prefills (pages 1, 2 cached), is preempted after its first
    token: its prompt is 9 tokens, all of its 2 pages matchable: 8 hit, 1 recomputed; the
    same once more. Only the first admission counts as a query."""
    mem = memory()
    a = state(0, 8, (1, 2), output=2)
    assert mem.admit(a, 64) == 8
    mem.running.append(a)
    mem._advance_prefill(a, 8)
    assert (a.generated_tokens, a.tree_tokens, a.private_tokens) == (1, 8, 0)
    mem.env.run(until=3.0)
    assert a.tip is mem.cache.get(2) and a.tip.lock_count == 1
    mem._preempt(a)
    assert a.tip is None and mem.cache.get(2).lock_count == 0
    assert (a.prompt_tokens, a.computed_tokens, a.tree_tokens, a.num_tree_pages) == (9, 0, 0, 0)
    assert (a.last_token_s, a.load_s) == (3.0, 0.0)
    assert mem.admit(a, 64) == 1
    assert (a.cached_tokens, a.recomputed_tokens, a.admitted_s) == (0, 1, 0.0)
    assert (mem.query_tokens, mem.hit_tokens) == (8, 0)
    assert (a.computed_tokens, a.tree_tokens, a.private_tokens) == (8, 8, 1)
    mem.running.append(a)
    mem._preempt(a)  # once more, before its chunk ran: 1 token recomputed again
    assert mem.admit(a, 64) == 1
    assert (a.recomputed_tokens, a.preemptions, mem.num_preemptions) == (2, 2, 2)
    assert (mem.query_tokens, mem.hit_tokens, a.cached_tokens) == (8, 0, 0)


# ------------------------------------------------------------------ prefill and decode
def test_a_partial_last_page_stays_private_and_the_last_chunk_yields_a_token():
    """At t=2 A (L=10: pages 1, 2 and a 2-token page 3) runs in chunks of 2, 4 and 4: the
    first completes no page, the second page 1 (4 tokens into the tree), the third page 2;
    page 3 stays private. Admission took recency 1, each insert the next."""
    mem = memory()
    mem.env.run(until=2.0)
    a = state(0, 10, (1, 2, 3))
    assert mem.admit(a, 2) == 2
    mem._advance_prefill(a, 2)
    assert (a.num_tree_pages, a.tree_tokens, a.private_tokens, a.tip) == (0, 0, 2, None)
    assert (mem.cache.resident_tokens, mem._recency) == (0, 1)
    assert mem.grow(a, 4)
    mem._advance_prefill(a, 4)
    assert (a.num_tree_pages, a.tree_tokens, a.private_tokens) == (1, 4, 2)
    assert (a.generated_tokens, a.first_token_s, a.tip.page_id) == (0, None, 1)
    assert mem.grow(a, 4)
    mem._advance_prefill(a, 4)
    assert (a.num_tree_pages, a.tree_tokens, a.private_tokens) == (2, 8, 2)
    assert (a.generated_tokens, a.first_token_s, a.tip.page_id) == (1, 2.0, 2)
    one, two = mem.cache.get(1), mem.cache.get(2)
    assert (one.lock_count, two.lock_count) == (1, 1)  # one path, locked once
    assert (one.recency, two.recency, one.created_s, two.created_s) == (2, 3, 2.0, 2.0)
    assert mem.cache.get(3) is None
    assert (mem.cache.reserved_tokens, mem.cache.resident_tokens) == (2, 8)
    assert mem._outstanding == -11


def test_decode_steps_reserve_a_token_each_per_step():
    mem = memory()
    a, b = state(0, 4, (1,)), state(1, 4, (2,))
    mem._reserve_decode([], 3)
    assert mem.cache.reserved_tokens == 0
    mem._reserve_decode([a, b], 3)
    assert (a.private_tokens, b.private_tokens, mem.cache.reserved_tokens) == (3, 3, 6)


def test_decode_room_preempts_the_newest_until_each_decoder_can_grow():
    """HBM 16: A and B (L=8 each) prefilled, their 16 tokens cached and locked: no room for
    2 decode tokens, so B (newest) is preempted; its pages become evictable (8 >= 1)."""
    mem = memory(16)
    a, b = state(0, 8, (1, 2)), state(1, 8, (3, 4))
    for s in (a, b):
        assert mem.admit(s, 64) == 8
        mem.running.append(s)
        mem._advance_prefill(s, 8)
    c = state(2, 8, (5, 6))
    mem.running.append(c)  # still prefilling: needs no decode room
    mem.running[1:] = [c, b]
    mem._make_decode_room()
    assert mem.running == [a, c] and list(mem.waiting) == [b]
    assert (mem._decode_room, mem.num_preemptions) == (1, 1)
    mem._make_decode_room()
    assert (mem._decode_room, mem.num_preemptions) == (1, 1)
    mem.running.clear()
    mem._make_decode_room()
    assert mem._decode_room == 0


def test_decode_room_that_just_fits_preempts_nobody():
    """HBM 18: A and B prefilled (16 tokens locked), 2 free for their 2 decode tokens."""
    mem = memory(18)
    for rid in (0, 1):
        s = state(rid, 8, (2 * rid + 1, 2 * rid + 2))
        assert mem.admit(s, 64) == 8
        mem.running.append(s)
        mem._advance_prefill(s, 8)
    mem._make_decode_room()
    assert (mem._decode_room, mem.num_preemptions, len(mem.running)) == (2, 0, 2)


def test_write_back_inserts_write_nothing_to_the_pool():
    spec = PoolSpec(1000.0, 1000.0)
    shared = SharedPool(lru(None), spec, lambda: 0.0)
    link = PoolLink(spec)
    mem = memory(kv_bytes_per_token=1000, pool=shared, link=link)
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 12
    mem._advance_prefill(a, 12)
    assert (shared.write_tokens, link.writes.bytes, mem.cache.resident_tokens) == (0, 0, 12)


def test_write_through_writes_each_inserted_chunk_to_the_pool():
    """Write-through, 1,000 B per token, 2 copies per page: A (L=12: pages 1-3) empty pool:
    its prefill inserts 12 tokens, written twice over its link: 24,000 bytes."""
    spec = PoolSpec(1000.0, 1000.0, write_through=True, replicas=2)
    shared = SharedPool(lru(None), spec, lambda: 0.0)
    links = [PoolLink(spec, 0), PoolLink(spec, 1)]
    shared.links = links
    mem = memory(kv_bytes_per_token=1000, pool=shared, link=links[1])
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 12
    mem._advance_prefill(a, 12)
    assert (shared.write_tokens, links[1].writes.bytes, links[0].writes.bytes) == (12, 24000, 0)
    assert [p.page_id for p in shared.cache.pages()] == [1, 2, 3]
    assert shared.holder == {1: 1, 2: 1, 3: 1}
    assert a.tip is mem.cache.get(3)
    assert [mem.cache.get(i).lock_count for i in (1, 2, 3)] == [1, 1, 1]


def test_unchained_hash_ids_are_an_input_error():
    """Page 2 is resident as a root; A names it as the child of page 1."""
    mem = memory()
    mem.cache.insert(None, [2], [4], 0.0, 0)
    a = state(7, 8, (1, 2))
    assert mem.admit(a, 64) == 8
    with pytest.raises(InputError, match=r"^hash_ids: request 7: page id 2 is already cached "
                       r"after a different prefix \(hash ids are not chained\)$") as err:
        mem._advance_prefill(a, 8)
    assert err.value.field == "hash_ids"


def test_a_pool_page_past_its_ttl_is_no_hit():
    """The pool keeps pages 10 s after their last use; pages 1, 2 were written at 0. At
    t=5 A (L=12: pages 1-3) reads both (alive to 15); at t=20 B finds them expired: a
    miss (lookup only)."""
    shared = SharedPool(lru(None, TTLRule(10.0)), POOL, lambda: 0.0)
    link = PoolLink(POOL)
    shared.links = [link]
    shared.write([1, 2], [4, 4])
    mem = memory(kv_bytes_per_token=1000, pool=shared, link=link)
    mem.env.run(until=5.0)
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == 4 and a.cached_tokens_pool == 8
    mem.env.run(until=20.0)
    b = state(1, 12, (1, 2, 4))
    assert mem.admit(b, 64) == 12
    assert (b.cached_tokens, b.cached_tokens_pool, b.load_s) == (0, 0, 0.25)


def test_a_class_rule_sets_ttl_and_priority_of_matched_and_inserted_pages():
    """Cache TTL 100 s; pages 1-3 cached at 0 to live 1 s. At 0.5 A (L=20: pages 1-5, class
    TTL 5 s, priority 3) matches all three (the cap stops at 4): they live to 5.5 and take
    priority 3, page 3 is its tip; its prefill inserts pages 4, 5 the same way."""
    mem = ReplicaMemory(simpy.Environment(), lru(32, TTLRule(100.0)), Ticks())
    cached = mem.cache.insert(None, [1, 2, 3], [4, 4, 4], 0.0, 0, 1.0)
    mem.env.run(until=0.5)
    a = state(0, 20, (1, 2, 3, 4, 5))
    a.rule = RequestRule(True, 5.0, 3, "gold")
    assert mem.admit(a, 64) == 8
    assert a.tip is cached[2] and a.num_tree_pages == 3
    assert [(p.deadline_s, p.priority, p.lock_count) for p in cached] == [(5.5, 3, 1)] * 3
    mem._advance_prefill(a, 8)
    pages = [mem.cache.get(i) for i in (1, 2, 3, 4, 5)]
    assert [(p.deadline_s, p.priority) for p in pages] == [(5.5, 3)] * 5
    assert a.tip is pages[4] and (a.num_tree_pages, a.tree_tokens) == (5, 20)
    mem.env.run(until=10.0)
    mem.running.append(a)
    mem._preempt(a)  # its unlock at 10 frees the pages dead since 5.5
    assert mem.cache.resident_tokens == 0 and mem.cache.get(1) is None


def test_two_admissions_add_up_queries_and_hits():
    """Page 1 cached: A (L=8: pages 1, 2) and B (L=12: pages 1, 3, 4) hit 4 tokens each."""
    mem = memory()
    mem.cache.insert(None, [1], [4], 0.0, 0)
    a, b = state(0, 8, (1, 2)), state(1, 12, (1, 3, 4))
    assert (mem.admit(a, 64), mem.admit(b, 64)) == (4, 8)
    assert (mem.query_tokens, mem.hit_tokens, mem._recency) == (20, 8, 2)
    for s in (a, b):
        assert (s.cached_tokens, s.cached_tokens_host, s.cached_tokens_disk,
                s.cached_tokens_pool, s.recomputed_tokens, s.load_s) == (4, 0, 0, 0, 0, 0.0)
    assert mem.cache.get(1).lock_count == 2


def test_async_loads_hold_only_a_request_with_something_to_load():
    """Async tier loads: A (L=8: pages 5, 6) finds nothing in host: admitted at once."""
    mem = memory(kv_bytes_per_token=1000, async_loads=True)
    mem.tiers = TierStack(mem.cache, [TierSpec("host", 1000, 1600.0)])
    a = state(0, 8, (5, 6))
    assert mem.admit(a, 64) == 8
    assert (a.status, a.loaded_chunk_tokens, mem.loading) == (RUNNING, 0, [])


def test_an_async_read_under_a_second_is_still_held():
    """Pool read at 8,000 B/s, no latency: HBM holds page 1, A (L=12: pages 1-3) reads
    page 2 in 4,000 / 8,000 = 0.5 s, off the batch."""
    mem, shared, link = pooled_memory((1,), async_loads=True, spec=PoolSpec(8000.0, 8000.0))
    a = state(0, 12, (1, 2, 3))
    assert mem.admit(a, 64) == HELD
    mem.env.run(until=0.49)
    assert mem.loading == [a]
    mem.env.run(until=0.51)
    assert list(mem.waiting) == [a]
