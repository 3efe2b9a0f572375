"""The cache-only replay (engine/cache_only.py) worked by hand, on each cache (`each_cache`:
SegmentCache and the per-page reference): every field of the records, progress reports,
sampled rows, eviction order by replay position, request classes (bypass, TTL, priority),
lower tiers (host and disk hits, the L - 1 cap on the deepest page, pages HBM could not keep
put back) and the shared pool (write-back and write-through), and the SegmentCache
hand-off (once: those tests build their own cache, or none)."""

from __future__ import annotations

import pytest
from fakes import HAND_TRACE, page_of, resident
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, TTLMode, TTLRule
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tiers import LowerHit, TierSpec, TierStack
from prefixsim.engine.cache_only import CacheOnlyResult, lower_tier_tokens, replay_cache_only
from prefixsim.engine.records import CacheOnlyRecord, RecordTable
from prefixsim.errors import InputError
from prefixsim.trace import Request

TRACE = HAND_TRACE  # tests/fakes.py: the replay worked by hand

pytestmark = pytest.mark.usefixtures("each_cache")
Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


def lru(capacity: int | None, ttl: TTLRule | None = None):
    """An LRU cache of `capacity` tokens, of the kind the test runs on (`Cache`)."""
    return Cache(capacity, POLICIES.build("lru"), ttl)

ROWS = [(0.0, 8, 0, 0), (1.0, 10, 0, 0), (3.0, 21, 0, 0)]


def fields(records) -> list[tuple]:
    return [tuple(r) for r in records]


def test_records_field_by_field():
    cache = lru(None)
    result = replay_cache_only(TRACE, cache)
    assert isinstance(result, CacheOnlyResult) and isinstance(result.records, RecordTable)
    assert fields(result.records) == [
        (10, "a", "completed", 0.0, 8, 3, 0, 0, 0, 0),
        (11, None, "completed", 0.5, 10, 2, 8, 0, 0, 0),
        (12, "b", "completed", 2.5, 8, 1, 7, 0, 0, 0),
        (13, None, "completed", 2.5, 6, 1, 0, 0, 0, 0),
        (14, None, "completed", 3.0, 9, 5, 4, 0, 0, 0),
    ]
    assert all(isinstance(r, CacheOnlyRecord) for r in result.records)
    assert result.counters is cache.counters and result.states is None
    assert cache.resident_tokens == 21
    # the matched paths were refreshed: page 1 by r11, r12, r14; page 2 by r11, r12
    assert page_of(cache, 1).num_hits == 3 and page_of(cache, 2).num_hits == 2
    assert page_of(cache, 1).recency == 4 and page_of(cache, 2).recency == 2
    assert page_of(cache, 1).last_access_s == 3.0 and page_of(cache, 2).last_access_s == 2.5
    assert page_of(cache, 6).recency == 4 and page_of(cache, 6).created_s == 3.0
    cache.check_invariants()


def test_the_given_table_is_appended_to():
    table = RecordTable(CacheOnlyRecord)
    result = replay_cache_only(TRACE[:2], lru(None), records=table)
    assert result.records is table and [r.cached_tokens for r in table] == [0, 8]


def test_progress_every_two_then_the_rest():
    progress: list[int] = []
    replay_cache_only(TRACE, lru(None), progress.append, progress_every=2)
    assert progress == [2, 2, 1]
    progress.clear()
    replay_cache_only(TRACE[:4], lru(None), progress.append, progress_every=2)
    assert progress == [2, 2, 0]
    progress.clear()
    replay_cache_only(TRACE, lru(None), progress.append, progress_every=3)
    assert progress == [3, 2]  # after the third, then the last two


def test_nothing_to_replay():
    progress: list[int] = []
    result = replay_cache_only([], lru(None), progress.append, 3, sample_interval_s=1.0)
    assert len(result.records) == 0 and progress == [0] and result.states == [(0.0, 0, 0, 0)]


def test_the_default_cadence_is_2000():
    progress: list[int] = []
    replay_cache_only([Request(i, float(i), 1, 1, (i,), 1) for i in range(2000)], lru(None),
                      progress.append)
    assert progress == [2000, 0]


def test_sampled_rows():
    assert replay_cache_only(TRACE, lru(None), sample_interval_s=1.0).states == ROWS
    assert replay_cache_only(TRACE, lru(None), sample_interval_s=2.0).states == [
        (0.0, 8, 0, 0), (2.0, 10, 0, 0), (4.0, 21, 0, 0)]


def test_sampled_rows_count_evictions():
    """8 tokens: r1 (t=1) evicts r0's page 1 (one page), r2 (t=3) evicts page 2."""
    trace = [Request(0, 0.0, 8, 1, (1,), 8), Request(1, 1.0, 8, 1, (2,), 8),
             Request(2, 3.0, 8, 1, (3,), 8)]
    states = replay_cache_only(trace, lru(8), sample_interval_s=1.0).states
    assert states == [(0.0, 8, 0, 0), (1.0, 8, 1, 0), (3.0, 8, 2, 0)]


def eviction_trace() -> list[Request]:
    """8 tokens of 4-token pages, every arrival at t = 0: pages 3, 2, 1 in that order, so
    the third insert evicts page 3 (replayed first, the least recent) and not page 2 (the
    lower id); then 2 is still there (a 4-token hit) and 3 is not. r5 touches page 2 at
    position 5; r6's insert evicts page 1 (position 2), not 2 or its child 9."""
    return [Request(0, 0.0, 4, 1, (3,), 4), Request(1, 0.0, 4, 1, (2,), 4),
            Request(2, 0.0, 4, 1, (1,), 4), Request(3, 0.0, 5, 1, (2, 9), 4),
            Request(4, 0.0, 5, 1, (3, 8), 4)]


def test_eviction_follows_the_replay_position():
    records = replay_cache_only(eviction_trace(), lru(8)).records
    assert [r.cached_tokens for r in records] == [0, 0, 0, 4, 0]


def test_a_refresh_moves_a_page_to_the_back():
    """8 tokens of 4-token pages, all at t = 0: 1, then 2, then 1 again (a hit: recency 2),
    then 3 evicts 2 (recency 1), so 1 still hits."""
    trace = [Request(0, 0.0, 4, 1, (1,), 4), Request(1, 0.0, 4, 1, (2,), 4),
             Request(2, 0.0, 5, 1, (1, 7), 4), Request(3, 0.0, 4, 1, (3,), 4),
             Request(4, 0.0, 5, 1, (1, 8), 4), Request(5, 0.0, 5, 1, (2, 9), 4)]
    cache = lru(12)
    records = replay_cache_only(trace, cache).records
    assert [r.cached_tokens for r in records] == [0, 0, 4, 0, 4, 0]


def conflicting() -> list[Request]:
    """Page 2 names the prefix (1, 2); request 7 puts it under page 3."""
    return [Request(5, 0.0, 8, 1, (1, 2), 4), Request(7, 1.0, 8, 1, (3, 2), 4)]


def test_ids_not_chained_are_an_input_error():
    with pytest.raises(InputError, match=r"request 7: .*\(hash ids are not chained\)$") as err:
        replay_cache_only(conflicting(), lru(None))
    assert err.value.message.startswith("request 7: ")
    assert err.value.field == "hash_ids" and err.value.__cause__ is None


# --- the SegmentCache hand-off


@pytest.mark.parametrize("each_cache", ["segments"], indirect=True)  # builds its own
def test_a_segment_cache_is_replayed_by_the_fast_path():
    cache = SegmentCache(None, POLICIES.build("lru"))
    progress: list[int] = []
    table = RecordTable(CacheOnlyRecord)
    result = replay_cache_only(TRACE, cache, progress.append, 2, sample_interval_s=1.0,
                               records=table)
    assert result.records is table
    assert [r.cached_tokens for r in table] == [0, 8, 7, 0, 4]
    assert result.states == ROWS and progress == [2, 2, 1]
    assert result.counters is cache.counters
    plain = replay_cache_only(TRACE, SegmentCache(None, POLICIES.build("lru")))
    assert plain.states is None and len(plain.records) == 5


# --- request classes


def test_a_short_prompt_bypasses_the_cache():
    """Prompts under 8 tokens are not cacheable: r1 (L=6) neither matches r0's page 1 nor
    inserts page 3, so r2 finds only page 1."""
    rules = CacheRules(min_cacheable_tokens=8)
    trace = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 6, 1, (1, 3), 4),
             Request(2, 2.0, 9, 1, (1, 3, 4), 4)]
    cache = lru(None)
    records = replay_cache_only(trace, cache, rules=rules).records
    assert [r.cached_tokens for r in records] == [0, 0, 4]
    assert page_of(cache, 1).num_hits == 1  # r2's hit only
    assert cache.resident_tokens == 8 + 4 + 1  # r0's 1, 2; r2's 3, 4


def test_a_class_ttl_reaches_the_insert_and_the_refresh():
    """Sliding TTL 100 s by default; sessions "short..." live 2 s. r0 (short, t=0) inserts
    pages 1, 2 with deadline 2; r1 (default, t=1) refreshes page 1 to 101 and adds 3;
    at t=4 page 2 is gone and page 1 alive: r2 (short) matches page 1 only and refreshes it
    to 6 (a class's TTL never shortens a deadline: still 101)."""
    rules = CacheRules([RequestClass("short", ttl_s=2.0, session_regex="^short")])
    cache = Cache(None, POLICIES.build("lru"), TTLRule(100.0, TTLMode.SLIDING))
    trace = [Request(0, 0.0, 8, 1, (1, 2), 4, "short-a"),
             Request(1, 1.0, 8, 1, (1, 3), 4, "long"),
             Request(2, 4.0, 9, 1, (1, 2, 5), 4, "short-b")]
    records = replay_cache_only(trace, cache, rules=rules).records
    assert [r.cached_tokens for r in records] == [0, 4, 4]
    assert page_of(cache, 1).deadline_s == 101.0
    assert page_of(cache, 3).deadline_s == 101.0
    assert page_of(cache, 2).deadline_s == 6.0 and page_of(cache, 5).deadline_s == 6.0


def test_a_class_priority_reaches_the_insert_and_the_refresh():
    """Priority eviction, 8 tokens of 4-token pages, all at t=0; "vip" sessions have
    priority 1. r0 (vip) inserts page 1 with priority 1, r1 page 2, and r2's page 3 evicts
    2 (the lowest priority, though newer than 1); r3 (default) hits page 1 (3 tokens: the
    cap). r4's page 5 evicts 3; r5 (vip) hits 5, raising it to 1; r6's page 6 then evicts
    the least recent of the two priority-1 pages, 1 (touched by r3; 5 by r5)."""
    rules = CacheRules([RequestClass("vip", priority=1, session_regex="^vip")])
    cache = Cache(8, POLICIES.build("priority"))
    trace = [Request(0, 0.0, 4, 1, (1,), 4, "vip"), Request(1, 0.0, 4, 1, (2,), 4),
             Request(2, 0.0, 4, 1, (3,), 4), Request(3, 0.0, 4, 1, (1,), 4),
             Request(4, 0.0, 4, 1, (5,), 4), Request(5, 0.0, 4, 1, (5,), 4, "vip"),
             Request(6, 0.0, 4, 1, (6,), 4)]
    records = replay_cache_only(trace, cache, rules=rules).records
    assert [r.cached_tokens for r in records] == [0, 0, 0, 3, 0, 3, 0]
    assert sorted(resident(cache)) == [5, 6]
    assert page_of(cache, 5).priority == 1 and page_of(cache, 6).priority == 0


# --- lower tiers


@pytest.mark.parametrize("each_cache", ["segments"], indirect=True)  # builds its own
def test_lower_tier_tokens_by_hand():
    """L=10 over pages 1, 2, 3 (4, 4, 2 tokens; the cap L - 1 = 9 trims page 3 to 1)."""
    request = Request(0, 0.0, 10, 1, (1, 2, 3), 4)
    assert lower_tier_tokens(request, 0, LowerHit((0, 1), (4, 4), (1, 2))) == (4, 4)
    assert lower_tier_tokens(request, 0, LowerHit((0, 0, 1), (4, 4, 2), (1, 2, 3))) == (8, 1)
    assert lower_tier_tokens(request, 1, LowerHit((1, 2), (4, 2), (2, 3))) == (0, 5)
    assert lower_tier_tokens(request, 1, LowerHit((0,), (4,), (2,))) == (4, 0)
    assert lower_tier_tokens(request, 2, LowerHit((1,), (2,), (3,))) == (0, 1)
    assert lower_tier_tokens(request, 2, LowerHit((), (), ())) == (0, 0)


def two_tiers(hbm: int, host: int, disk: int = 100) -> tuple[Cache, TierStack]:
    cache = lru(hbm)
    return cache, TierStack(cache, [TierSpec("host", host, 1.0), TierSpec("disk", disk, 1.0)])


def test_host_and_disk_hits():
    """HBM 8 tokens, host 4, disk 100; 4-token pages. r0 (1, 2) fills HBM; r1 (3, 4)
    evicts 2 then 1 to host, 1 pushing 2 down to disk. r2 (L=10: 1, 2, 5) misses HBM, finds
    1 in host and 2 on disk (4 + 4 tokens), evicts 3, 4 (4 to host, then 3 pushing it to
    disk) and keeps 1, 2 but not 5 (no room). r3 (L=8: 1, 2) hits both in HBM, capped at 7.
    r4 (L=8: 3, 4): 3 in host, 4 on disk, the cap trimming 4 to 3 tokens."""
    cache, tiers = two_tiers(8, 4)
    trace = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 8, 1, (3, 4), 4),
             Request(2, 2.0, 10, 1, (1, 2, 5), 4), Request(3, 3.0, 8, 1, (1, 2), 4),
             Request(4, 4.0, 8, 1, (3, 4), 4)]
    records = replay_cache_only(trace, cache, tiers=tiers).records
    assert fields(records)[2] == (2, None, "completed", 2.0, 10, 1, 8, 4, 4, 0)
    assert [(r.cached_tokens, r.cached_tokens_host, r.cached_tokens_disk)
            for r in records] == [(0, 0, 0), (0, 0, 0), (8, 4, 4), (7, 0, 0), (7, 4, 3)]
    cache.check_invariants()


def test_a_run_hbm_cannot_keep_goes_back_to_its_tiers():
    """HBM 8 tokens, host 8, disk 100; 4-token pages. r0 (1, 2, 3: 12 tokens) keeps 1, 2;
    r1 (4, 5) evicts 2 and 1 to host. r2 (1, 2, 3) takes 1, 2 out of host (3 is nowhere),
    evicts 5, 4 to host and keeps 1, 2: the whole run found below fits, nothing goes back."""
    cache, tiers = two_tiers(8, 8)
    trace = [Request(0, 0.0, 12, 1, (1, 2, 3), 4), Request(1, 1.0, 8, 1, (4, 5), 4),
             Request(2, 2.0, 12, 1, (1, 2, 3), 4)]
    records = replay_cache_only(trace, cache, tiers=tiers).records
    assert [(r.cached_tokens, r.cached_tokens_host) for r in records] == [
        (0, 0), (0, 0), (8, 8)]
    assert 4 in tiers.tiers[0] and 5 in tiers.tiers[0]
    assert 1 not in tiers.tiers[0] and 2 not in tiers.tiers[0]


def test_pages_loaded_but_not_kept_return_to_their_tier():
    """HBM 8 tokens, host 100; 4-token pages. Host is filled by hand with pages 1, 2, 3
    (a chain, 12 tokens). r0 (L=12: 1, 2, 3) misses HBM and takes the whole run from host,
    a 12-token hit of which HBM keeps 1, 2: page 3 goes back to host (and 1, 2 stay out)."""
    cache, tiers = two_tiers(8, 100)
    for page_id in (1, 2, 3):
        tiers.tiers[0].put(page_id, 4)
    records = replay_cache_only([Request(0, 0.0, 12, 1, (1, 2, 3), 4)], cache,
                                tiers=tiers).records
    assert (records[0].cached_tokens, records[0].cached_tokens_host) == (11, 11)
    assert 3 in tiers.tiers[0] and 1 not in tiers.tiers[0] and 2 not in tiers.tiers[0]
    assert sorted(resident(cache)) == [1, 2]
    # a disk page not kept goes back to disk, not to host
    cache, tiers = two_tiers(4, 100)
    tiers.tiers[0].put(1, 4)
    tiers.tiers[1].put(2, 4)
    records = replay_cache_only([Request(0, 0.0, 9, 1, (1, 2, 3), 4)], cache,
                                tiers=tiers).records
    assert (records[0].cached_tokens_host, records[0].cached_tokens_disk) == (4, 4)
    assert 2 in tiers.tiers[1] and 2 not in tiers.tiers[0] and 1 not in tiers.tiers[0]


def test_a_run_that_fits_whole_stays_out_of_the_tiers():
    cache, tiers = two_tiers(100, 100)
    tiers.tiers[0].put(1, 4)
    tiers.tiers[1].put(2, 4)
    records = replay_cache_only([Request(0, 0.0, 10, 1, (1, 2, 3), 4)], cache,
                                tiers=tiers).records
    assert (records[0].cached_tokens_host, records[0].cached_tokens_disk) == (4, 4)
    assert tiers.tiers[0].resident_tokens == tiers.tiers[1].resident_tokens == 0
    assert sorted(resident(cache)) == [1, 2, 3]


def test_the_tier_run_follows_the_hbm_match():
    """HBM holds page 1; host holds 2. r0 (L=10: 1, 2, 3) matches 1 in HBM and 2 in host."""
    cache, tiers = two_tiers(100, 100)
    cache.insert(None, [1], [4], 0.0, 0)
    tiers.tiers[0].put(2, 4)
    tiers.tiers[0].put(9, 4)
    records = replay_cache_only([Request(0, 1.0, 10, 1, (1, 2, 3), 4)], cache,
                                tiers=tiers).records
    assert fields(records) == [(0, None, "completed", 1.0, 10, 1, 8, 4, 0, 0)]
    assert 9 in tiers.tiers[0] and 2 not in tiers.tiers[0]


# --- the shared pool


def test_pool_write_back():
    """HBM 8 tokens, 4-token pages, an unbounded pool written on eviction. r0 (1, 2) fills
    HBM; r1 (3, 4) evicts 2 then 1, each written to the pool with its chain (8 tokens).
    r2 (L=10: 1, 2, 5) misses HBM, reads 1, 2 from the pool (8 tokens), evicts 3, 4 (to the
    pool: 8 more) and keeps 1, 2 but not 5, so the whole chain is written (5: 2 tokens).
    r3 (L=9: 1, 6, 7) hits 1 in HBM (the pool holds nothing beyond it), evicts 2 (in the
    pool already) and keeps 6 but not 7: the chain's new 5 tokens are written."""
    pool_cache = lru(None)
    shared = SharedPool(pool_cache, PoolSpec(1.0, 1.0), lambda: -1.0)
    cache = lru(8)
    trace = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 8, 1, (3, 4), 4),
             Request(2, 2.0, 10, 1, (1, 2, 5), 4), Request(3, 3.0, 9, 1, (1, 6, 7), 4)]
    records = replay_cache_only(trace, cache, pool=shared).records
    assert fields(records) == [
        (0, None, "completed", 0.0, 8, 1, 0, 0, 0, 0),
        (1, None, "completed", 1.0, 8, 1, 0, 0, 0, 0),
        (2, None, "completed", 2.0, 10, 1, 8, 0, 0, 8),
        (3, None, "completed", 3.0, 9, 1, 4, 0, 0, 0),
    ]
    assert shared.read_tokens == 8 and shared.write_tokens == 8 + 8 + 2 + 5
    assert shared.clock() == 3.0
    assert sorted(resident(pool_cache)) == [1, 2, 3, 4, 5, 6, 7]
    assert page_of(pool_cache, 5).created_s == 2.0 and page_of(pool_cache, 3).created_s == 2.0
    assert page_of(pool_cache, 1).num_hits == 1 and page_of(pool_cache, 1).last_access_s == 2.0


def test_pool_write_through():
    """The same trace written through: every prefilled chain is written at once (r0: 8
    tokens, r1: 8, r2: page 5, 2 tokens), and evictions write nothing more."""
    pool_cache = lru(None)
    shared = SharedPool(pool_cache, PoolSpec(1.0, 1.0, write_through=True), lambda: -1.0)
    cache = lru(8)
    trace = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 8, 1, (3, 4), 4),
             Request(2, 2.0, 10, 1, (1, 2, 5), 4)]
    records = replay_cache_only(trace, cache, pool=shared).records
    assert [(r.cached_tokens, r.cached_tokens_pool) for r in records] == [
        (0, 0), (0, 0), (8, 8)]
    assert cache.on_demote is None
    assert shared.write_tokens == 8 + 8 + 2 and shared.read_tokens == 8
    assert page_of(pool_cache, 1).created_s == 0.0 and page_of(pool_cache, 3).created_s == 1.0


def test_a_pool_run_is_capped_and_counted_after_hbm():
    """HBM holds page 1 (inserted by hand); the pool holds 1, 2, 3. r0 (L=12: 1, 2, 3)
    matches 1 in HBM and 2, 3 in the pool, the cap trimming page 3: 4 + 7 = 11 tokens."""
    pool_cache = lru(None)
    shared = SharedPool(pool_cache, PoolSpec(1.0, 1.0), lambda: 0.0)
    shared.write([1, 2, 3], [4, 4, 4])
    cache = lru(100)
    cache.insert(None, [1], [4], 0.0, 0)
    records = replay_cache_only([Request(0, 1.0, 12, 1, (1, 2, 3), 4)], cache,
                                pool=shared).records
    assert fields(records) == [(0, None, "completed", 1.0, 12, 1, 11, 0, 0, 7)]
    assert shared.read_tokens == 8


def test_the_pool_matches_at_the_arrival_time():
    """A pool whose pages live 1 s (fixed TTL) holds 1, 2 written at t = 0: a request at
    t = 0.5 (L=9: 1, 2, 3) reads both from it; one at t = 5 finds them expired."""
    for arrival, hit in [(0.5, 8), (5.0, 0)]:
        shared = SharedPool(lru(None, TTLRule(1.0, TTLMode.FIXED)), PoolSpec(1.0, 1.0),
                            lambda: 0.0)
        shared.write([1, 2], [4, 4])
        records = replay_cache_only([Request(0, arrival, 9, 1, (1, 2, 3), 4)], lru(100),
                                    pool=shared).records
        assert (records[0].cached_tokens, records[0].cached_tokens_pool) == (hit, hit)


def test_the_pool_clock_starts_at_zero():
    """The replay sets the pool's clock to the latest arrival, 0.0 before the first."""
    shared = SharedPool(lru(None), PoolSpec(1.0, 1.0), lambda: -1.0)
    replay_cache_only([], lru(8), pool=shared)
    assert shared.clock() == 0.0
