"""prefix_aware's refusals word for word, the index's lower runs at their edges and the
tier-weighted scores, worked by hand: a pool page alive at its very deadline, an expired one
counted while locked (and only then), pages the pool evicts (whole segments or a tail)
leaving the index, host tiers holding a prompt's every page or none after an HBM run, two
replicas' host tiers at the root, host and pool tokens credited at their weights."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes import BoardView

from prefixsim.cache import POLICIES, SegmentCache, TTLMode, TTLRule
from prefixsim.cache.tiers import FlatTier, TierSpec
from prefixsim.engine.load_board import LoadBoard
from prefixsim.router import ROUTERS
from prefixsim.router.index import PrefixIndex
from prefixsim.trace import Request

P = 16


def lru(capacity=None, ttl=None) -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build("lru"),
                        None if ttl is None else TTLRule(ttl, TTLMode.SLIDING))


@pytest.mark.parametrize(("knobs", "message"), [
    ({"load_weight": -1.0}, "load_weight must be >= 0, got -1.0"),
    ({"load_weight": float("nan")}, "load_weight must be >= 0, got nan"),
    ({"staleness_s": -0.5}, "staleness_s must be >= 0, got -0.5"),
    ({"event_delay_s": -2.0}, "event_delay_s must be >= 0, got -2.0"),
    ({"tier_weights": {"disk": 0.5}}, "tier_weights: unknown tier 'disk' (hbm, host, pool)"),
    ({"tier_weights": {"host": "0.8"}}, "tier_weights.host must be a number >= 0, got '0.8'"),
    ({"tier_weights": {"pool": float("inf")}},
     "tier_weights.pool must be a number >= 0, got inf"),
    ({"tier_weights": {"pool": -0.1}}, "tier_weights.pool must be a number >= 0, got -0.1"),
])
def test_prefix_aware_refuses_with_the_knob_and_value(knobs, message):
    with pytest.raises(ValueError) as caught:
        ROUTERS.build("prefix_aware", **knobs)
    assert str(caught.value) == message


def test_prefix_aware_takes_its_knobs_and_keeps_the_other_weights():
    router = ROUTERS.build("prefix_aware", load_weight=0.0, staleness_s=0.0,
                           tier_weights={"host": 1})
    assert router.tier_weights == {"hbm": 1.0, "host": 1.0, "pool": 0.8}
    assert isinstance(router.tier_weights["host"], float)


def pool_of(ids, ttl=10.0):
    """A pool tree (sliding TTL) holding `ids` as one chain inserted at t = 0, followed by an
    index."""
    pool = lru(ttl=ttl)
    pool.insert(None, ids, [P] * len(ids), 0.0, 0)
    index = PrefixIndex(lambda: 0.0)
    index.attach_pool(pool)
    return pool, index


def test_a_pool_page_is_alive_at_its_deadline_and_while_locked():
    """Pages 1, 2 in the pool, deadline 10 s. For a prompt of pages 1-3 (48 tokens: pages 1
    and 2 matchable, R3), the pool's run is 32 tokens up to t = 10 (the deadline itself:
    R12 frees pages whose deadline is before now), none after; locked, it counts after its
    deadline too, and not once the lock is gone."""
    pool, index = pool_of([1, 2])
    request = Request(0, 0.0, 3 * P, 1, (1, 2, 3), P)
    assert index.lower_runs(request, 9.0, {}) == (32, {})
    assert index.lower_runs(request, 10.0, {}) == (32, {})
    assert index.lower_runs(request, 10.5, {}) == (0, {})
    tip = pool.match([1, 2], 0.0).pages[-1]
    pool.lock(tip)
    assert index.lower_runs(request, 11.0, {}) == (32, {})
    pool.unlock(tip, 0.0)
    assert index.lower_runs(request, 11.0, {}) == (0, {})


def test_a_pool_run_stops_at_the_first_page_it_lacks():
    """Pages 1, 2, 4 of a prompt 1-5 in the pool (4 below 2, another branch's id): the run
    from the root is pages 1 and 2, 32 tokens."""
    pool, index = pool_of([1, 2])
    pool.insert(None, [9, 4], [P, P], 0.0, 1)
    request = Request(0, 0.0, 5 * P, 1, (1, 2, 3, 4, 5), P)
    assert index.lower_runs(request, 0.0, {}) == (32, {})


def hosts_index(hbm_ids=(), replicas=2):
    """An index over `replicas` HBM caches (replica 0 holding `hbm_ids`) and their host
    tiers, returned with the tiers."""
    index = PrefixIndex(lambda: 0.0)
    for replica in range(replicas):
        cache = lru(1000)
        if replica == 0 and hbm_ids:
            cache.insert(None, list(hbm_ids), [P] * len(hbm_ids), 0.0, 0)
        index.attach(replica, cache)
    tiers = [FlatTier(TierSpec("host", 1000, 1.0)) for _ in range(replicas)]
    for replica, tier in enumerate(tiers):
        index.attach_host(replica, tier)
    return index, tiers


def test_host_tiers_at_the_root_for_two_replicas_at_once():
    """Neither replica holds page 1 in HBM; both host tiers do (and replica 1's page 2
    too): each gets its run from the root, replica 0 16 tokens, replica 1 32. One tier's
    page taken out leaves the other's."""
    index, tiers = hosts_index()
    for tier in tiers:
        tier.put(1, P)
    tiers[1].put(2, P)
    request = Request(0, 0.0, 4 * P, 1, (1, 2, 3, 4), P)
    found = index.prefix_tokens(request, 0.0)
    assert found == {}
    assert index.lower_runs(request, 0.0, found) == (0, {0: 16, 1: 32})
    tiers[0].take(1)  # replica 1's copy of page 1 stays
    assert index.lower_runs(request, 0.0, found) == (0, {1: 32})
    tiers[1].take(2)
    assert index.lower_runs(request, 0.0, found) == (0, {1: 16})


def test_a_host_tier_holding_every_page_after_the_hbm_run():
    """Replica 0 holds page 1 in HBM and pages 2-3 in its host tier: for a prompt of pages
    1-4 (three matchable, R3's cap) the host run is pages 2 and 3, to the end of what can
    match; replica 1 holds nothing anywhere and gets no entry, nor does a replica whose
    host tier holds nothing right after its HBM run."""
    index, tiers = hosts_index(hbm_ids=(1,))
    tiers[0].put(2, P)
    tiers[0].put(3, P)
    request = Request(0, 0.0, 4 * P, 1, (1, 2, 3, 4), P)
    found = index.prefix_tokens(request, 0.0)
    assert found == {0: 16}
    assert index.lower_runs(request, 0.0, found) == (0, {0: 32})
    tiers[0].take(2)
    assert index.lower_runs(request, 0.0, found) == (0, {})


def test_pages_the_pool_evicts_leave_the_index_and_a_split_keeps_the_rest():
    """A pool of 2 pages (LRU, no TTL) holding 1, 2. A match of page 1 alone splits its
    segment (page 1 is the new prefix's now); making room for page 5 below it evicts the
    leaf page 2: the pool's run for a prompt of pages 1-3 is 16 tokens. Then pages 7, 8
    evict everything before them: that prompt finds nothing, and 7-9 finds 32 tokens."""
    pool = lru(capacity=2 * P)
    pool.insert(None, [1, 2], [P, P], 0.0, 0)
    index = PrefixIndex(lambda: 0.0)
    index.attach_pool(pool)
    request = Request(0, 0.0, 3 * P, 1, (1, 2, 3), P)
    assert index.lower_runs(request, 0.0, {}) == (32, {})
    tip = pool.match([1], 1.0).pages[-1]
    pool.touch(pool.match([1], 1.0).pages, 1.0, 1)
    assert pool.evict(P, tip)
    pool.insert(tip, [5], [P], 1.0, 1)
    assert index.lower_runs(request, 1.0, {}) == (16, {})
    assert pool.evict(2 * P)
    pool.insert(None, [7, 8], [P, P], 2.0, 2)
    assert index.lower_runs(request, 2.0, {}) == (0, {})
    assert index.lower_runs(Request(1, 2.0, 3 * P, 1, (7, 8, 9), P), 2.0, {}) == (32, {})


def test_a_pool_segment_losing_its_tail_keeps_its_head_in_the_index():
    """A pool of 3 pages holding 1, 2, 3 as one segment: room for page 7 evicts the tail
    page 3 only, so a prompt of pages 1-4 still finds 1 and 2 in the pool (32 tokens)."""
    pool = lru(capacity=3 * P)
    pool.insert(None, [1, 2, 3], [P] * 3, 0.0, 0)
    index = PrefixIndex(lambda: 0.0)
    index.attach_pool(pool)
    request = Request(0, 0.0, 4 * P, 1, (1, 2, 3, 4), P)
    assert index.lower_runs(request, 0.0, {}) == (48, {})
    assert pool.evict(P)
    pool.insert(None, [7], [P], 1.0, 1)
    assert index.lower_runs(request, 1.0, {}) == (32, {})


def routed(router, loads, request):
    """prefix_aware's choice among replicas of these outstanding tokens (no load board)."""
    return router.route(request, [SimpleNamespace(outstanding_tokens=load) for load in loads],
                        0.0)


def test_host_tokens_are_credited_at_their_weight():
    """Host weight 0.5. Replica 0 holds page 1 in HBM and pages 2, 3 in its host tier
    (16 + 0.5 x 32 = 32), replica 1 pages 1, 2 in its host tier only (0.5 x 32 = 16),
    replica 2 page 1 in HBM and nothing below (16). With 15 tokens outstanding on replica 0
    and none elsewhere: 17 > 16, replica 0; one more token on replica 0 and all three tie,
    which the lowest load, then the lowest index, wins: replica 1."""
    caches = [lru(1000), lru(1000), lru(1000)]
    for replica in (0, 2):
        caches[replica].insert(None, [1], [P], 0.0, 0)
    hosts = [FlatTier(TierSpec("host", 1000, 1.0)) for _ in range(3)]
    router = ROUTERS.build("prefix_aware", tier_weights={"host": 0.5})
    router.bind_caches(caches, lambda: 0.0)
    router.bind_lower_tiers(None, hosts)
    hosts[0].put(2, P)
    hosts[0].put(3, P)
    hosts[1].put(1, P)
    hosts[1].put(2, P)
    request = Request(0, 0.0, 5 * P, 1, (1, 2, 3, 4, 5), P)
    assert routed(router, [15, 0, 0], request) == 0
    assert routed(router, [16, 0, 0], request) == 1


def pool_router(hbm_ids):
    """prefix_aware (pool weight 0.8) over two replicas, replica 0's HBM holding `hbm_ids`,
    and a pool holding pages 1-3; with the request of pages 1-5 it is asked about."""
    caches = [lru(1000), lru(1000)]
    caches[0].insert(None, list(hbm_ids), [P] * len(hbm_ids), 0.0, 0)
    pool = lru(1000)
    pool.insert(None, [1, 2, 3], [P] * 3, 0.0, 0)
    router = ROUTERS.build("prefix_aware", tier_weights={"pool": 0.8})
    router.bind_caches(caches, lambda: 0.0)
    router.bind_lower_tiers(pool, [None, None])
    return router, Request(0, 0.0, 5 * P, 1, (1, 2, 3, 4, 5), P)


def test_pool_tokens_beyond_the_hbm_run_are_credited_at_their_weight():
    """Pool weight 0.8, the pool holding pages 1-3 (48 tokens), replica 0's HBM page 1:
    replica 0 scores 16 + 0.8 x 32 = 41.6 - its load, replica 1 0.8 x 48 = 38.4 - its
    load. Loads 3 and 0: 38.6 > 38.4, replica 0; 4 and 0: replica 1; 0 and 4: replica 0."""
    router, request = pool_router([1])
    assert routed(router, [3, 0], request) == 0
    assert routed(router, [4, 0], request) == 1
    assert routed(router, [0, 4], request) == 0


def test_a_pool_run_no_longer_than_the_hbm_run_adds_nothing():
    """Replica 0 holds pages 1-3 in HBM and the pool the same 48 tokens: its score is 48 -
    its load, replica 1's 0.8 x 48 = 38.4. Loads 10 and 0: 38 < 38.4, replica 1."""
    router, request = pool_router([1, 2, 3])
    assert routed(router, [10, 0], request) == 1
    assert routed(router, [9, 0], request) == 0


def test_a_stale_view_is_refreshed_every_staleness_s_from_the_last_refresh():
    """staleness_s 10: the router sees each cache as it was at its last snapshot, taken at
    the first request and again once 10 s have passed since the one before (0, 10, 20).
    Replica 1 gains page 1 at 11 s: a request for it at 12 s still sees the 10 s snapshot
    (nothing anywhere: the tie goes to replica 0); at 20 s the new one (replica 1)."""
    held = [set(), set()]
    views = [SimpleNamespace(outstanding_tokens=0, cached_page_ids=lambda r=r: held[r])
             for r in range(2)]
    router = ROUTERS.build("prefix_aware", staleness_s=10.0)
    request = Request(0, 0.0, 2 * P, 1, (1, 2), P)
    assert [router.route(request, views, now) for now in (0.0, 10.0)] == [0, 0]
    held[1].add(1)
    assert router.route(request, views, 12.0) == 0
    assert router.route(request, views, 20.0) == 1


def test_a_stale_view_under_a_second_is_still_a_snapshot():
    """staleness_s 0.5 (any value > 0) keeps the snapshot rule: bound to the caches, the
    router builds no index. Replica 1 gains page 1 right after the snapshot at 0 s: at
    0.4 s the router still sees nothing (tie: replica 0), at 0.5 s the new snapshot."""
    held = [set(), set()]
    caches = [lru(1000), lru(1000)]
    views = [SimpleNamespace(outstanding_tokens=0, cached_page_ids=lambda r=r: held[r])
             for r in range(2)]
    router = ROUTERS.build("prefix_aware", staleness_s=0.5)
    router.bind_caches(caches, lambda: 0.0)
    request = Request(0, 0.0, 2 * P, 1, (1, 2), P)
    assert router.route(request, views, 0.0) == 0
    held[1].add(1)
    caches[1].insert(None, [1], [P], 0.0, 0)
    assert router.route(request, views, 0.4) == 0
    assert router.route(request, views, 0.5) == 1


@pytest.mark.parametrize("tiered", [False, True])
def test_bind_caches_gives_the_index_the_engines_clock_and_the_event_delay(tiered):
    """event_delay_s 5: replica 1 caches page 1 at 2 s by the clock bound with the caches,
    after binding: the router credits it from 7 s on, not at 6.9 s (loads equal: the tie
    goes to replica 0); so with a pool bound (weight 0.8, holding nothing) as well."""
    caches = [lru(1000), lru(1000)]
    clock = {"now": 0.0}
    router = ROUTERS.build("prefix_aware", event_delay_s=5.0)
    router.bind_caches(caches, lambda: clock["now"])
    if tiered:
        router.bind_lower_tiers(lru(1000), [None, None])
    clock["now"] = 2.0
    caches[1].insert(None, [1], [P], 2.0, 0)
    request = Request(0, 0.0, 2 * P, 1, (1, 2), P)
    views = [SimpleNamespace(outstanding_tokens=0) for _ in range(2)]
    assert router.route(request, views, 6.9) == 0
    assert router.route(request, views, 7.0) == 1


def test_lower_tiers_weighted_zero_are_not_followed():
    """Weights 0 (the host tier's default, the pool's set here): binding a pool and host
    tiers leaves the router reading HBM only, so an eviction can still only lower a score
    (`scores_fall_with_evictions`, which the engine relies on)."""
    router = ROUTERS.build("prefix_aware", tier_weights={"pool": 0.0})
    router.bind_caches([lru(1000), lru(1000)], lambda: 0.0)
    router.bind_lower_tiers(lru(1000), [FlatTier(TierSpec("host", 1000, 1.0)), None])
    assert router.scores_fall_with_evictions


def test_a_tiered_choice_reads_the_running_replicas_loads_at_the_routing_time():
    """Pool weight 0.8 over two replicas in decode runs on a load board, nothing cached:
    both clocks are read, then both exact loads (5 and 3: replica 1), at 4.5 s, the time
    the request is routed."""
    router = ROUTERS.build("prefix_aware")
    router.bind_caches([lru(1000), lru(1000)], lambda: 4.5)
    router.bind_lower_tiers(lru(1000), [None, None])
    views = [BoardView(0, 5, 0, 100, 2), BoardView(1, 3, 0, 100, 1)]
    LoadBoard(views)
    assert router.route(Request(0, 4.5, 2 * P, 1, (1, 2), P), views, 4.5) == 1
    assert [view.asked for view in views] == [[4.5, 4.5], [4.5, 4.5]]
