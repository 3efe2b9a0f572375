"""PrefixIndex (router/index.py): one index of which replica holds which prefix.

Known answers on hand-filled caches; the live index equals each replica's own live lookup at
every arrival of timed runs (with TTLs); prefix_aware's decisions through the index equal
its decisions reading every replica (a differential test); delayed events arrive late.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fakes import Ticks

from prefixsim.cache import POLICIES, SegmentCache, TTLMode, TTLRule
from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.cache.tiers import FlatTier, TierSpec
from prefixsim.costmodel import Roofline
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.request_state import ServedRecord
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.requests import records_frame
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.router.index import PrefixIndex
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


P = 16
COST = Roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))


def lru(capacity=10_000, ttl=None):
    return Cache(capacity, POLICIES.build("lru"),
                 None if ttl is None else TTLRule(ttl, TTLMode.SLIDING))


def put(cache, ids, now=0.0):
    cache.insert(None, ids, [P] * len(ids), now, 0)


def req(ids, tokens=None):
    return Request(0, 0.0, tokens or len(ids) * P, 1, tuple(ids), P)


def test_known_answer_by_hand():
    """Replica 0 holds [1, 2, 3], replica 1 holds [1, 2], replica 2 holds [7]. A 5-page
    prompt [1, 2, 3, 4, 5] (80 tokens): replica 0 serves 48 tokens, replica 1 32, replica 2
    none (absent from the answer). A fully cached [1, 2, 3] (48 tokens) is capped
    page-aligned at L - 1 = 47: 2 pages, 32 tokens, on both."""
    caches = [lru(), lru(), lru()]
    put(caches[0], [1, 2, 3])
    put(caches[1], [1, 2])
    put(caches[2], [7])
    index = PrefixIndex(lambda: 0.0)
    for replica, cache in enumerate(caches):
        index.attach(replica, cache)
    assert index.prefix_tokens(req([1, 2, 3, 4, 5]), 0.0) == {0: 48, 1: 32}
    assert index.prefix_tokens(req([1, 2, 3]), 0.0) == {0: 32, 1: 32}
    assert index.prefix_tokens(req([9]), 0.0) == {}
    # by position, as floats; 0.0 for replicas holding none, positions past count left out
    assert index.prefix_token_list(req([1, 2, 3, 4, 5]), 0.0, 3) == [48.0, 32.0, 0.0]
    assert index.prefix_token_list(req([1, 2, 3, 4, 5]), 0.0, 1) == [48.0]
    assert index.prefix_token_list(req([9]), 0.0, 3) == [0.0, 0.0, 0.0]
    caches[0].evict(10_000)  # leaf by leaf: 3, 2, 1 leave replica 0; events remove them
    assert index.prefix_tokens(req([1, 2, 3, 4, 5]), 0.0) == {1: 32}
    assert index.prefix_token_list(req([1, 2, 3, 4, 5]), 0.0, 2) == [0.0, 32.0]


def test_dead_pages_do_not_count_and_locked_ones_do():
    """TTL 10: [1, 2] inserted at 0 are alive through t = 10 and dead after; a lock keeps
    them (R8), as the cache's match would see them."""
    cache = lru(ttl=10.0)
    put(cache, [1, 2])
    index = PrefixIndex(lambda: 0.0)
    index.attach(0, cache)
    probe = req([1, 2, 3])
    assert index.prefix_tokens(probe, 10.0) == {0: 32}
    assert index.prefix_token_list(probe, 10.0, 2) == [32.0, 0.0]  # the walk over sets
    assert index.prefix_tokens(probe, 10.5) == {}
    assert index.prefix_token_list(probe, 10.5, 1) == [0.0]
    path = cache.match([1, 2], 5.0)
    cache.lock(path.last)
    assert index.prefix_tokens(probe, 50.0) == {0: 32}


def test_delayed_events_arrive_late():
    """With a 2 s event delay, pages inserted at t = 1 become visible at t = 3, and their
    removal at t = 4 is seen at t = 6."""
    clock = {"now": 1.0}
    cache = lru()
    index = PrefixIndex(lambda: clock["now"], event_delay_s=2.0)
    index.attach(0, cache)
    put(cache, [1, 2], now=1.0)
    probe = req([1, 2, 3])
    assert index.prefix_tokens(probe, 2.9) == {}
    assert index.prefix_tokens(probe, 3.0) == {0: 32}
    clock["now"] = 4.0
    cache.evict(10_000)
    assert index.prefix_tokens(probe, 5.9) == {0: 32}
    assert index.prefix_tokens(probe, 6.0) == {}
    with pytest.raises(ValueError, match="event_delay_s"):
        PrefixIndex(lambda: 0.0, event_delay_s=-1)


def workload(seed, sessions=10, turns=4):
    """Multi-turn sessions over a shared system prompt (chained ids), seeded."""
    rng = np.random.default_rng(seed)
    out, next_id = [], 1
    system = tuple(range(10**6, 10**6 + 6))
    for session in range(sessions):
        t = float(rng.exponential(0.4)) + session * 0.05
        ids, tokens = system, len(system) * P
        for _ in range(turns):
            total = tokens + int(rng.integers(20, 500))
            pages, full = -(-total // P), tokens // P
            ids = ids[:full] + tuple(range(next_id, next_id + pages - full))
            next_id += pages - full
            out.append((t, total, int(rng.integers(1, 150)), ids))
            tokens = total
            t += float(rng.exponential(0.6))
    out.sort(key=lambda r: r[0])
    return [Request(i, t, n, o, ids, P) for i, (t, n, o, ids) in enumerate(out)]


class ReadsEveryReplica:
    """prefix_aware without the index (not an IndexedRouter): reads each replica live."""

    def __init__(self, inner):
        self.inner = inner

    def route(self, request, replicas, now):
        return self.inner.route(request, replicas, now)


class ChecksTheIndex:
    """prefix_aware through the index, checking at every arrival that the index equals
    every replica's own live lookup (which also expires dead pages: the index hears it)."""

    def __init__(self):
        self.inner = ROUTERS.build("prefix_aware")
        self.checked = 0

    def bind_caches(self, caches, clock):
        self.inner.bind_caches(caches, clock)

    def route(self, request, replicas, now):
        found = self.inner._index.prefix_tokens(request, now)
        live = [r.cached_prefix_tokens(request, now) for r in replicas]
        assert [found.get(r.index, 0) for r in replicas] == live
        listed = self.inner._index.prefix_token_list(request, now, len(replicas))
        assert listed == live and all(type(tokens) is float for tokens in listed)
        self.checked += 1
        return self.inner.route(request, replicas, now)


def _run(requests, router, replicas=4, capacity=3000, ttl=None):
    caches = [lru(capacity, ttl) for _ in range(replicas)]
    return replay_timed(requests, Fleet(caches, COST, ContinuousBatching(512, 8), router),
                        Sampling(check_invariants=True))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_decisions_through_the_index_equal_reading_every_replica(seed):
    requests = workload(seed)
    indexed = _run(requests, ROUTERS.build("prefix_aware"))
    live = _run(requests, ReadsEveryReplica(ROUTERS.build("prefix_aware")))
    assert indexed.records == live.records
    assert len({r.replica for r in indexed.records}) > 1  # the runs did spread


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("ttl", [0.5, 1.0, 3.0])
def test_decisions_through_the_index_equal_reading_every_replica_with_ttls(seed, ttl):
    """With TTLs the decisions stay identical. (The records may not: a router reading the
    caches live expires dead pages on every replica it looks at, R11, which the index does
    not, so a replica's later evictions and expirations can come in another order.)"""
    requests = workload(seed)
    indexed = _run(requests, ROUTERS.build("prefix_aware"), ttl=ttl)
    live = _run(requests, ReadsEveryReplica(ROUTERS.build("prefix_aware")), ttl=ttl)
    assert [r.replica for r in indexed.records] == [r.replica for r in live.records]


@pytest.mark.parametrize("seed,ttl", [(0, 1.0), (1, 0.5), (2, None)])
def test_the_live_index_equals_each_replicas_lookup_at_every_arrival(seed, ttl):
    router = ChecksTheIndex()
    requests = workload(seed)
    _run(requests, router, ttl=ttl)
    assert router.checked == len(requests)


@pytest.mark.parametrize(("pool_weight", "chosen"), [(0.8, 1), (0.0, 0)])
def test_prefix_aware_credits_the_pool_with_its_weight(pool_weight, chosen):
    """Two replicas, 1 s steps, a write-through pool. A (L=16, pages 1-4, 15 out) goes to
    replica 0 (ties: the lower index), which writes pages 1-4 to the pool by t=1. B (L=20,
    pages 1-5) at 4.5: replica 0 holds 16 of its tokens in HBM but still has 11 of A's to
    generate (score 16 - 11 = 5); replica 1 holds none, but the pool has 16 (score
    pool_weight x 16 - 0). Weight 0.8: 12.8 > 5, replica 1; weight 0: replica 0."""
    pool = SharedPool(lru(None), PoolSpec(1000.0, 1000.0, write_through=True), lambda: 0.0)
    router = ROUTERS.build("prefix_aware", tier_weights={"pool": pool_weight})
    result = replay_timed([Request(0, 0.0, 16, 15, (1, 2, 3, 4), 4),
                           Request(1, 4.5, 20, 1, (1, 2, 3, 4, 5), 4)],
                          Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(64, 8),
                                router, pool=pool, kv_bytes_per_token=1),
                          Sampling(check_invariants=True, max_run_steps=1))
    assert [r.replica for r in result.records] == [0, chosen]


def test_the_index_follows_host_tiers_after_each_hbm_run():
    """lower_runs by hand: replica 0's HBM holds page 1, its host tier pages 2 and 3;
    replica 1's host tier page 1 only. For pages 1-4 (+ a last page, R3's cap), replica 0
    gets 8 host tokens after its 4 in HBM, replica 1 4 host tokens from the root; a page
    taken back out of a host tier stops counting."""
    index = PrefixIndex(lambda: 0.0)
    hbm = lru(100)
    hbm.insert(None, [1], [4], 0.0, 0)
    index.attach(0, hbm)
    hosts = [FlatTier(TierSpec("host", 100, 1.0)) for _ in range(2)]
    for replica, tier in enumerate(hosts):
        index.attach_host(replica, tier)
    hosts[0].put(2, 4)
    hosts[0].put(3, 4)
    hosts[1].put(1, 4)
    request = Request(0, 0.0, 20, 1, (1, 2, 3, 4, 5), 4)
    found = index.prefix_tokens(request, 0.0)
    assert found == {0: 4}
    assert index.lower_runs(request, 0.0, found) == (0, {0: 8, 1: 4})
    hosts[0].take(3)
    assert index.lower_runs(request, 0.0, found) == (0, {0: 4, 1: 4})


@pytest.mark.parametrize(("seed", "load_weight"), [(0, 1.0), (1, 0.25), (2, 0.0), (3, 4.0)])
def test_bounded_load_reads_choose_as_a_scan_of_every_exact_load(seed, load_weight):
    """12 replicas: prefix_aware through the index reads exact loads only of replicas whose
    bounds (Replica.load_bounds) let them win or tie; its decisions equal a scan of every
    replica's exact load, whatever the load weight (0: ties on load decide)."""
    requests = workload(seed, sessions=24)
    params = {"load_weight": load_weight}
    bounded = _run(requests, ROUTERS.build("prefix_aware", **params), replicas=12)
    scanned = _run(requests, ReadsEveryReplica(ROUTERS.build("prefix_aware", **params)),
                   replicas=12)
    pd.testing.assert_frame_equal(records_frame(bounded.records, ServedRecord),
                                  records_frame(scanned.records, ServedRecord))  # NaN-aware
    assert load_weight == 0 or len({r.replica for r in bounded.records}) > 3
