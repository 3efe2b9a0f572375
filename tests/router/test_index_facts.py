"""More of PrefixIndex (router/index.py) by hand: the walk of a delayed (stale) view, the
walk that checks each page alive (TTLs), a TTL cache attached after caches without one
(the index moves from bit masks to pages, the earlier caches indexed again), resident pages
known at once whatever the delay, `event` on a live index, positions past `count`, and the
shared pool's pages leaving. Each test runs on the package's cache and on the per-page
reference (conftest: each_cache)."""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, SegmentCache, TTLMode, TTLRule
from prefixsim.router.index import PrefixIndex
from prefixsim.trace import Request

pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache
P = 16


def lru(ttl=None):
    return Cache(10_000, POLICIES.build("lru"),
                 None if ttl is None else TTLRule(ttl, TTLMode.SLIDING))


def put(cache, ids, now=0.0):
    cache.insert(None, ids, [P] * len(ids), now, 0)


def req(ids):
    return Request(0, 0.0, len(ids) * P, 1, tuple(ids), P)


def filled(index, holdings, ttl=None):
    """Replica r's cache holding holdings[r] (inserted at t = 0), each attached."""
    caches = []
    for replica, ids in enumerate(holdings):
        cache = lru(ttl)
        if ids:
            put(cache, ids)
        index.attach(replica, cache)
        caches.append(cache)
    return caches


@pytest.mark.parametrize("ttl", [None, 100.0])
def test_a_delayed_views_walk_by_hand(ttl):
    """A 1 s delay (the walk over sets, every indexed page counted): replica 0 holds
    [1, 2, 3], replica 1 [1, 2], replica 2 [1], replica 3 [7]. [1, 2, 3, 4, 5]: 48, 32 and
    16 tokens; a 2-page prompt matches at most 1 page (R3's cap): 16 each."""
    index = PrefixIndex(lambda: 0.0, event_delay_s=1.0)
    filled(index, [[1, 2, 3], [1, 2], [1], [7]], ttl)
    assert index.prefix_tokens(req([1, 2, 3, 4, 5]), 2.0) == {0: 48, 1: 32, 2: 16}
    assert index.prefix_tokens(req([1, 2]), 2.0) == {0: 16, 1: 16, 2: 16}
    assert index.prefix_tokens(req([7, 8, 9]), 2.0) == {3: 16}
    assert index.prefix_token_list(req([1, 2, 3, 4, 5]), 2.0, 4) == [48.0, 32.0, 16.0, 0.0]


def test_the_walk_that_checks_each_page_alive_by_hand():
    """TTLs (live): the same holdings; each page checked alive as it is walked."""
    index = PrefixIndex(lambda: 0.0)
    filled(index, [[1, 2, 3], [1, 2], [1], [7]], ttl=100.0)
    assert index.prefix_tokens(req([1, 2, 3, 4, 5]), 50.0) == {0: 48, 1: 32, 2: 16}
    assert index.prefix_tokens(req([1, 2]), 50.0) == {0: 16, 1: 16, 2: 16}
    assert index.prefix_tokens(req([1, 2, 3, 4, 5]), 100.5) == {}  # all dead


def test_a_stale_view_counts_a_dead_page_until_its_removal_arrives():
    """A 10 s delay, TTL 5 s: [1, 2] inserted at 0 reach the index at 10, dead since 5;
    nothing has told the index they are gone, so it still counts them at 12 (the stale
    view of a router fed by KV events), unlike a live index."""
    stale = PrefixIndex(lambda: 0.0, event_delay_s=10.0)
    live = PrefixIndex(lambda: 0.0)
    for index in (stale, live):
        filled(index, [[], []], ttl=5.0)
    cache = lru(5.0)
    put(cache, [1, 2])
    stale.attach(2, cache)
    later = lru(5.0)
    stale.attach(3, later)
    put(later, [1, 2])  # inserted after attaching: an event, 10 s late
    assert stale.prefix_tokens(req([1, 2, 3]), 9.0) == {2: 32}  # resident at attach: now
    assert stale.prefix_tokens(req([1, 2, 3]), 12.0) == {2: 32, 3: 32}
    live_cache = lru(5.0)
    put(live_cache, [1, 2])
    live.attach(2, live_cache)
    assert live.prefix_tokens(req([1, 2, 3]), 12.0) == {}


@pytest.mark.parametrize("delay", [0.0, 3.0])
def test_resident_pages_are_known_at_once_whatever_the_delay(delay):
    index = PrefixIndex(lambda: 0.0, event_delay_s=delay)
    filled(index, [[1, 2], [1]], ttl=50.0)
    assert index.prefix_tokens(req([1, 2, 3]), 0.0) == {0: 32, 1: 16}


def test_a_ttl_cache_attached_after_caches_without_one():
    """Replicas 0 and 1 without a TTL (bit masks), then replica 2 with one: the index keeps
    pages from then on, the first two indexed again, and all three keep reporting."""
    index = PrefixIndex(lambda: 0.0)
    caches = filled(index, [[1, 2], [1]])
    assert index.prefix_tokens(req([1, 2, 3]), 0.0) == {0: 32, 1: 16}
    timed = lru(ttl=100.0)
    put(timed, [1, 2, 3])
    index.attach(2, timed)
    assert index.prefix_tokens(req([1, 2, 3, 4]), 0.0) == {0: 32, 1: 16, 2: 48}
    put(caches[1], [1, 2, 3])  # events of the earlier caches reach the index
    caches[0].evict(10_000)
    assert index.prefix_tokens(req([1, 2, 3, 4]), 1.0) == {1: 48, 2: 48}
    assert index.prefix_tokens(req([1, 2, 3, 4]), 100.5) == {1: 48}  # 2's pages dead


class Holder:
    """What a page's liveness is read from (a Segment or a Page): locked, so alive."""

    lock_count = 1
    deadline_s = 0.0


def test_an_event_on_a_live_index_is_applied_at_once():
    index = PrefixIndex(lambda: 0.0)
    filled(index, [[]], ttl=10.0)  # a TTL: the index keeps pages
    holder = Holder()
    index.event(1, 42, holder, True)
    index.event(1, 43, holder, True)
    assert index.prefix_tokens(req([42, 43, 44]), 5.0) == {1: 32}
    index.event(1, 43, Holder(), False)  # another holder's removal: not this page's
    assert index.prefix_tokens(req([42, 43, 44]), 5.0) == {1: 32}
    index.event(1, 43, holder, False)
    assert index.prefix_tokens(req([42, 43, 44]), 5.0) == {1: 16}


def test_positions_past_count_are_left_out_of_the_walk_over_pages():
    index = PrefixIndex(lambda: 0.0)
    filled(index, [[1, 2], [1, 2], [1]], ttl=10.0)
    assert index.prefix_token_list(req([1, 2, 3]), 0.0, 2) == [32.0, 32.0]
    assert index.prefix_token_list(req([1, 2, 3]), 0.0, 4) == [32.0, 32.0, 16.0, 0.0]


def test_the_pools_pages_leave_with_their_removal():
    index = PrefixIndex(lambda: 0.0)
    pool = lru()
    put(pool, [1, 2])
    index.attach_pool(pool)
    put(pool, [1, 2, 3])
    assert index.lower_runs(req([1, 2, 3, 4]), 0.0, {}) == (48, {})
    pool.evict(10_000 - 48 + P)  # room for one page more: the leaf page 3 goes
    assert index.lower_runs(req([1, 2, 3, 4]), 0.0, {}) == (32, {})
    pool.evict(10_000)
    assert index.lower_runs(req([1, 2, 3, 4]), 0.0, {}) == (0, {})
