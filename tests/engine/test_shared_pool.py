"""The shared KV pool (cache/pool.py, docs/cache-semantics.md R18), worked by hand.

Timed runs use 1 s steps, 4-token pages, 1,000 KV bytes per token and a pool link of
1,000 B/s with 0.5 s latency, so reading one 4-token page takes 0.5 + 4 = 4.5 s.
"""

import numpy as np
import pytest
from fakes import Ticks, lru
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES
from prefixsim.cache.pool import PoolFigures, PoolLink, PoolSpec, SharedPool
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine.cache_only import replay_cache_only
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

SPEC = PoolSpec(read_bytes_s=1000.0, write_bytes_s=1000.0, latency_s=0.5)


def segment_lru(capacity: int | None) -> SegmentCache:
    """The compressed tree under LRU, as a pool with a node-uniform policy is built."""
    return SegmentCache(capacity, POLICIES.build("lru"))


def pool(capacity=None, spec=SPEC):
    return SharedPool(lru(capacity), spec, lambda: 0.0)


def serve(requests, hbm, shared, replicas=1):
    return replay_timed(requests, Fleet([lru(hbm) for _ in range(replicas)], Ticks(),
                        ContinuousBatching(64, 8), ROUTERS.build("round_robin"), pool=shared,
                        kv_bytes_per_token=1000), Sampling(check_invariants=True, max_run_steps=1))


def test_a_pool_hit_pays_its_transfer_in_ttft():
    """HBM 16 tokens. A (L=8: pages 1, 2) is served 0 -> 1. C (L=12: pages 3, 4, 5) at
    t=2 needs 12 tokens, 8 are free: HBM evicts A's leaf, page 2, which goes to the pool with
    its ancestor (pages 1, 2: 8 tokens written). B (L=12: pages 1, 2, 6) at t=5 matches page
    1 in HBM and page 2 in the pool (the page-aligned cap stops at 2 pages): a 4-token pool
    hit read in 0.5 + 4,000 / 1,000 = 4.5 s before its step, so B's first token comes at
    5 + 4.5 + 1: TTFT 5.5 s, of which 8 hit tokens (4 from the pool)."""
    shared = pool()
    result = serve([Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 2.0, 12, 1, (3, 4, 5), 4),
                    Request(2, 5.0, 12, 1, (1, 2, 6), 4)], 16, shared)
    a, c, b = result.records
    assert (a.ttft_ms, c.ttft_ms) == (1000.0, 1000.0)
    assert b.ttft_ms == 5500.0
    assert (b.cached_tokens, b.cached_tokens_pool) == (8, 4)
    link = result.pool_links[0]
    assert link.reads.bytes == 4000 and link.reads.busy_s == 4.5
    assert shared.read_tokens == 4 and shared.write_tokens >= 8
    figures = PoolFigures.of(shared, result.pool_links, result.duration_s)
    assert figures.read_bytes == 4000 and figures.busiest_link_share > 0


def test_two_reads_on_one_link_queue():
    """Link contention: two reads booked at t=5 on one link, 4,000 and 8,000 bytes: the
    first is done at 5 + 0.5 + 4 = 9.5, the second starts then: 9.5 + 0.5 + 8 = 18, i.e.
    13 s after it was asked for. A read booked at 30 finds the link idle again."""
    link = PoolLink(SPEC)
    assert link.read(4000, 5.0) == 4.5
    assert link.read(8000, 5.0) == 13.0
    assert link.reads.busy_s == 4.5 + 8.5
    assert link.read(1000, 30.0) == 1.5
    link.write(2000, 0.0)
    assert (link.writes.free_s, link.writes.bytes) == (2.5, 2000)


@pytest.mark.parametrize(("tier_load", "firsts"), [("blocking", [20.0, 20.0]),
                                                  ("async", [15.5, 20.0])])
def test_two_requests_wait_for_the_last_read_of_their_step(tier_load, firsts):
    """B and D (both L=12 over pool-held prefixes: 4 tokens each from the pool) are
    admitted at t=10 on one replica: the reads queue on the link (4.5 s, then 4.5 s more).
    Blocking: one step waits for the last read (9 s) and not for their sum plus the
    queueing: both first tokens at 10 + 9 + 1 = 20. Async (R15): each request steps when its
    own read is in, B at 14.5 -> 15.5, D at 19 -> 20."""
    shared = pool()
    shared.write([1, 2], [4, 4])
    shared.write([6, 7], [4, 4])
    hbm = lru(64)
    hbm.insert(None, [1], [4], 0.0, 0)
    hbm.insert(None, [6], [4], 0.0, 0)
    result = replay_timed([Request(0, 10.0, 12, 1, (1, 2, 5), 4),
                           Request(1, 10.0, 12, 1, (6, 7, 8), 4)],
                          Fleet([hbm], Ticks(), ContinuousBatching(64, 8),
                          ROUTERS.build("round_robin"), pool=shared, kv_bytes_per_token=1000,
                          tier_load=tier_load), Sampling(check_invariants=True))
    assert [r.first_token_s for r in result.records] == firsts
    assert [r.cached_tokens_pool for r in result.records] == [4, 4]


def test_write_back_keeps_the_pools_chain_whole_and_write_through_writes_at_insert():
    """An evicted leaf is written with the ancestors the pool lacks; with write-through the
    pool has every page of a prefill as soon as it is inserted, before any eviction."""
    shared = pool()
    hbm = lru(100)
    hbm.on_demote = shared.write_evicted
    hbm.insert(None, [1, 2, 3], [4, 4, 4], 0.0, 0)
    hbm.evict(100)
    assert sorted(p.page_id for p in shared.cache.pages()) == [1, 2, 3]
    assert shared.write_tokens == 12  # page 3 with 1, 2; then 2 and 1 were there already
    through = SharedPool(lru(None), PoolSpec(1e9, 1e9, 0.0, write_through=True), lambda: 0.0)
    result = serve([Request(0, 0.0, 8, 1, (1, 2), 4)], 100, through)
    assert result.records[0].status == "completed"
    assert sorted(p.page_id for p in through.cache.pages()) == [1, 2]


@pytest.mark.parametrize("tree", ["pages", "segments"])
def test_a_pool_hit_is_read_before_the_admission_s_write_backs(tree):
    """A full 8-token LRU pool holds page 1 (written first) and page 9; HBM (12 tokens)
    holds page 5, then page 6. R (L=8: pages 1, 2; the cap matches page 1 only) finds page
    1 in the pool at t=1 and needs 8 tokens of HBM, 4 free: page 5 (least recent) is
    evicted and written back, and the full pool evicts its least recent page. The read
    comes first (at the lookup, R18), so page 1 is the most recent and page 9 goes: the
    pool ends with pages 1 and 5 (reading after the write-back evicted page 1, the page
    just found, and still read it). R's pages 1, 2 then fit beside page 6."""
    shared = SharedPool((lru if tree == "pages" else segment_lru)(8), SPEC, lambda: 0.0)
    shared.write([1], [4])
    shared.write([9], [4])
    hbm = lru(12)
    hbm.insert(None, [5], [4], 0.0, 0)
    hbm.insert(None, [6], [4], 0.0, 1)
    result = replay_timed([Request(0, 1.0, 8, 1, (1, 2), 4)],
                          Fleet([hbm], Ticks(), ContinuousBatching(64, 8),
                                ROUTERS.build("round_robin"), pool=shared,
                                kv_bytes_per_token=1000), Sampling(check_invariants=True))
    assert result.records[0].cached_tokens_pool == 4
    assert sorted(p.page_id for p in shared.cache.pages()) == [1, 5]
    assert shared.cache.counters.evicted_pages == 1 and shared.read_tokens == 4


def test_a_bounded_pool_evicts_by_its_own_policy():
    shared = pool(capacity=8)
    shared.write([1, 2], [4, 4])
    shared.write([3], [4])
    assert shared.cache.resident_tokens == 8 and shared.cache.counters.evicted_pages == 1


def chained_trace(seed, n=60):
    rng = np.random.default_rng(seed)
    prefixes = [tuple(range(k * 100, k * 100 + int(rng.integers(1, 6)))) for k in range(6)]
    out, fresh = [], 10**6
    for i in range(n):
        base = prefixes[int(rng.integers(0, len(prefixes)))]
        extra = tuple(range(fresh, fresh + int(rng.integers(0, 4))))
        fresh += 10
        ids = base[:int(rng.integers(1, len(base) + 1))] + extra
        tokens = 4 * (len(ids) - 1) + int(rng.integers(1, 5))
        out.append(Request(i, float(i), tokens, 1, ids, 4))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(4, 40), st.booleans())
def test_unbounded_pool_plus_hbm_equals_an_unbounded_cache(seed, hbm_tokens, through):
    """Cache-only, no TTL: with an unbounded pool every page ever in HBM is in HBM or the
    pool, chain and all, so HBM + pool hits equal an unbounded single cache's, request by
    request (Part A's L - 1 cap included)."""
    requests = chained_trace(seed)
    shared = SharedPool(lru(None), PoolSpec(1e9, 1e9, 0.0, through), lambda: 0.0)
    with_pool = replay_cache_only(requests, lru(hbm_tokens), pool=shared).records
    alone = replay_cache_only(requests, lru(None)).records
    assert [r.cached_tokens for r in with_pool] == [r.cached_tokens for r in alone]
    assert all(r.cached_tokens_pool <= r.cached_tokens for r in with_pool)


def test_pool_spec_is_checked():
    with pytest.raises(ValueError, match="bandwidth"):
        PoolSpec(0.0, 1.0)
    with pytest.raises(ValueError, match="latency"):
        PoolSpec(1.0, 1.0, latency_s=-1)


@pytest.mark.parametrize(("copies", "ttft_c"), [(1, 26_000.0), (2, 13_500.0)])
def test_two_readers_of_one_holder_contend(copies, ttft_c):
    """Three replicas (round robin), write-through. A (L=12, pages 1-3) is prefilled on
    replica 0 by t=1, which writes its 3 pages to the pool: replica 0 holds them. B (on
    replica 1) and C (on replica 2), both L=16 over pages 1-3 at t=5, each read 12 tokens
    (12,000 B) from the pool: B crosses its own link and holder 0's outbound one, 0.5 + 12 =
    12.5 s, first token at 5 + 12.5 + 1 (TTFT 13.5 s). C's own link is free but holder 0's
    is not: its read starts at 17.5, ends at 30, first token at 31 (TTFT 26 s). With two
    copies (holders 0 and 1) C reads from holder 1, free: TTFT 13.5 s like B."""
    spec = PoolSpec(1000.0, 1000.0, 0.5, write_through=True, replicas=copies)
    result = serve([Request(0, 0.0, 12, 1, (1, 2, 3), 4),
                    Request(1, 5.0, 16, 1, (1, 2, 3, 4), 4),
                    Request(2, 5.0, 16, 1, (1, 2, 3, 5), 4)], 100, pool(spec=spec), replicas=3)
    a, b, c = result.records
    assert (b.cached_tokens_pool, c.cached_tokens_pool) == (12, 12)
    assert (b.ttft_ms, c.ttft_ms) == (13_500.0, ttft_c)
    assert result.pool_links[0].writes.bytes == 12_000 * copies


def test_every_pool_query_costs_its_lookup():
    """Lookup 0.25 s, nothing in the pool: A (L=8) misses HBM and the pool, and still waits
    for the lookup: first token at 0.25 + 1 (TTFT 1.25 s). A repeat of A at t=10 finds its
    first page in HBM (R3's cap: the prompt's last page is never a hit) and asks the pool
    for nothing more: TTFT 1 s."""
    spec = PoolSpec(1000.0, 1000.0, 0.5, write_through=True, lookup_s=0.25)
    result = serve([Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 10.0, 8, 1, (1, 2), 4)],
                   100, pool(spec=spec))
    assert [r.ttft_ms for r in result.records] == [1250.0, 1000.0]


@pytest.mark.parametrize("cache_only", [True, False])
@pytest.mark.parametrize("write", ["back", "through"])
def test_ids_that_cross_in_the_pool_are_an_input_error(cache_only, write):
    """Page 2 follows 1 in request 0 and 7 in request 2: HBM (64 tokens) has evicted
    request 0's pages by then, so the conflict is found where they went, in the pool (a
    write-back of an evicted page, or a write-through), as the input error on `hash_ids`
    that HBM's own conflicts are, not a crash."""
    from prefixsim.config import RunConfig
    from prefixsim.errors import InputError
    from prefixsim.pipeline import simulate
    requests = [Request(0, 0.0, 40, 1, (1, 2, 3), 16), Request(1, 0.1, 40, 1, (4, 5, 6), 16),
                Request(2, 0.2, 40, 1, (7, 2, 8), 16), Request(3, 0.3, 40, 1, (9, 10, 11), 16)]
    config = RunConfig.model_validate({"cache_only": cache_only, "cache": {
        "capacity_tokens": 64, "pool": {"capacity_tokens": 400, "write": write}}})
    with pytest.raises(InputError, match="page id 2 is already cached after a different "
                       "prefix.*not chained") as caught:
        simulate(config, requests)
    assert caught.value.field == "hash_ids"
