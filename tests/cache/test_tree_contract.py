"""The tree's own contract where the other suites were silent (found by mutation testing):
a hit raising a page's priority (R16), block-mode chain checks and re-adoption,
reserve/release, error messages, heap compaction, and `check_invariants` — the oracle of the
state machine — failing on corrupted trees. Pages hold P = 4 tokens."""

from __future__ import annotations

import pytest
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode, ChainConflict, TTLRule

P = 4


def cache(capacity=None, mode=CacheMode.RADIX, ttl=None, policy="lru") -> RadixCache:
    return RadixCache(capacity, POLICIES.build(policy), None if ttl is None else TTLRule(ttl),
                      mode)


# ------------------------------------------------------------------------------ R16
def test_a_hit_raises_a_pages_priority_and_a_lower_one_does_not_lower_it():
    """Inserted at priority 0; a hit of priority 2 raises both pages to 2; a later hit of
    priority 1 leaves them at 2 (a page keeps the highest priority that touched it)."""
    tree = cache()
    pages = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.touch(pages, now=1, recency=1, priority=2)
    assert [p.priority for p in pages] == [2, 2]
    tree.touch(pages, now=2, recency=2, priority=1)
    assert [p.priority for p in pages] == [2, 2]


def test_the_priority_policy_keeps_the_page_a_hit_raised():
    """Capacity 2 pages, priority policy. Page 1 inserted at priority 0, page 2 at priority
    0, then page 1 hit at priority 5. Inserting page 3 needs one eviction: the lowest
    priority goes, page 2 (priority 0), though page 1 was inserted first."""
    tree = cache(capacity=2 * P, policy="priority")
    (one,) = tree.insert(None, [1], [P], now=0, recency=0)
    tree.insert(None, [2], [P], now=1, recency=1)
    tree.touch([one], now=2, recency=2, priority=5)
    assert tree.evict(P)
    assert tree.get(1) is one and tree.get(2) is None


# -------------------------------------------------------------- block-mode chains
def test_block_mode_refuses_an_id_cached_after_another_prefix():
    """Block mode, [1, 2] cached, page 1 evicted: page 2 is an orphan whose parent was 1.
    Inserting 2 after page 3 is a mis-chained id (it names the prefix 1, 2): ChainConflict,
    and so is inserting 2 as a first page. Matching [2] alone finds nothing (its parent is
    not the root)."""
    tree = cache(capacity=2 * P, mode=CacheMode.BLOCK)
    one, two = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.touch([two], now=1, recency=1)  # page 1 is now the older victim
    assert tree.evict(P) and tree.get(1) is None and tree.get(2) is two
    (three,) = tree.insert(None, [3], [P], now=2, recency=2)
    with pytest.raises(ChainConflict, match="already cached after a different prefix"):
        tree.insert(three, [2], [P], now=3, recency=3)
    with pytest.raises(ChainConflict, match="page id 2"):
        tree.insert(None, [2], [P], now=3, recency=3)
    assert tree.match([2], 4).num_pages == 0
    tree.check_invariants()


def test_radix_mode_refuses_a_mis_chained_id():
    tree = cache()
    tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    (three,) = tree.insert(None, [3], [P], now=1, recency=1)
    with pytest.raises(ChainConflict, match="page id 2"):
        tree.insert(three, [2], [P], now=2, recency=2)


def test_block_mode_insert_re_adopts_an_orphan_below_its_re_inserted_parent():
    """Block mode: [1, 2] cached, page 1 evicted (page 2 an orphan, 4 orphan tokens).
    insert(None, [1, 2]) at t=5 makes a new page 1 and re-adopts page 2 as its child: no
    orphan, page 1 has one child, and match [1, 2] finds both pages."""
    tree = cache(capacity=3 * P, mode=CacheMode.BLOCK)
    one, two = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.touch([two], now=1, recency=1)
    assert tree.evict(2 * P) and tree.get(1) is None
    assert tree.orphan_tokens() == P
    placed = tree.insert(None, [1, 2], [P, P], now=5, recency=5)
    assert placed[1] is two and two.parent is placed[0] and placed[0].num_children == 1
    assert tree.orphan_tokens() == 0 and tree.match([1, 2], 6).num_pages == 2
    tree.check_invariants()


# ------------------------------------------------------------- reserve / release
def test_reserve_and_release_charge_private_tokens_against_capacity():
    """Capacity 10: reserve 0 is fine; reserve 6 leaves 4 free; reserving 5 more fails and
    says how much is free; release 6 frees it all; releasing more than reserved fails."""
    tree = cache(capacity=10)
    tree.reserve(0)
    tree.reserve(6)
    assert tree.free_tokens == 4 and tree.reserved_tokens == 6
    with pytest.raises(ValueError, match="reserving 5 tokens, only 4 free"):
        tree.reserve(5)
    with pytest.raises(ValueError, match="cannot reserve -1 tokens"):
        tree.reserve(-1)
    assert tree.insert(None, [1, 2], [P, P], now=0, recency=0)[-1].page_id == 1  # 4 fit
    tree.release(6)
    assert tree.free_tokens == 10 - P and tree.reserved_tokens == 0
    with pytest.raises(ValueError, match="releasing 1 of 0 reserved"):
        tree.release(1)
    with pytest.raises(ValueError, match="releasing -1"):
        tree.release(-1)
    tree.check_invariants()


def test_unlocking_an_unlocked_page_names_it():
    tree = cache()
    (one,) = tree.insert(None, [1], [P], now=0, recency=0)
    with pytest.raises(ValueError, match="unlock of an unlocked page"):
        tree.unlock(one, now=0)
    with pytest.raises(ValueError, match="capacity_tokens must be >= 0, got -1"):
        cache(capacity=-1)


def test_an_unlocked_page_becomes_a_victim_again():
    """Radix mode, capacity 2 pages: [1, 2] locked through page 2, so evicting fails; after
    unlock, page 2 (the leaf) and then page 1 can be evicted."""
    tree = cache(capacity=2 * P)
    one, two = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.lock(two)
    assert not tree.evict(P) and tree.num_pages == 2
    tree.unlock(two, now=1)
    assert tree.evict(2 * P) and tree.num_pages == 0


# ---------------------------------------------------------------- compaction
@pytest.mark.parametrize("mode", [CacheMode.RADIX, CacheMode.BLOCK])
def test_heaps_stay_bounded_and_eviction_order_survives_compaction(mode):
    """20,000 hits on 10 resident leaves leave stale heap entries behind (lazy
    invalidation); compaction keeps the heaps within 4 x pages + 2048 (+ the 1024
    operations between looks) and keeps the LRU order: page 0, touched first in the last
    round, is the first victim; freeing 2 pages' tokens then takes page 1."""
    tree = cache(capacity=10 * P, mode=mode, ttl=1e9)
    pages = [tree.insert(None, [i], [P], now=0, recency=0)[0] for i in range(10)]
    for step in range(2000):
        for page in pages:
            tree.touch([page], now=step, recency=step * 10 + page.page_id)
    bound = 4 * tree.num_pages + 2048 + 1024
    assert len(tree._victims) <= bound and len(tree._deadlines) <= bound
    assert tree.evict(P) and tree.get(0) is None
    assert tree.evict(2 * P) and tree.get(1) is None and tree.num_pages == 8
    tree.check_invariants()


# ------------------------------------------------------- the oracle can fail
def _corrupt(edit):
    tree = cache(capacity=100, ttl=100)
    one, two = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    edit(tree, one, two)
    return tree


@pytest.mark.parametrize("name, edit, message", [
    ("not resident", lambda t, a, b: setattr(b, "resident", False), None),
    ("wrong key", lambda t, a, b: t._pages.__setitem__(7, t._pages.pop(2)), None),
    ("child count", lambda t, a, b: setattr(a, "num_children", 2), "child count of 1"),
    ("resident tokens", lambda t, a, b: setattr(t, "resident_tokens", 9), "resident tokens"),
    ("locked tokens", lambda t, a, b: setattr(t, "locked_tokens", 4), "locked tokens"),
    ("partial lock", lambda t, a, b: setattr(b, "lock_count", 1), "lock not on the whole prefix"),
    ("deadline order", lambda t, a, b: setattr(b, "deadline_s", a.deadline_s + 1),
     "parent expires before child"),
    ("orphan", lambda t, a, b: t._pages.pop(1), "orphan page"),
    ("capacity", lambda t, a, b: setattr(t, "reserved_tokens", 99), "capacity exceeded"),
    ("negative reservation", lambda t, a, b: setattr(t, "reserved_tokens", -1),
     "negative reservation"),
])
def test_check_invariants_fails_on_a_corrupted_tree(name, edit, message):
    """Each edit breaks one invariant the state machine relies on; check_invariants must
    say so (an oracle that cannot fail proves nothing)."""
    _corrupt(lambda t, a, b: None).check_invariants()  # the uncorrupted tree passes
    tree = _corrupt(edit)
    with pytest.raises(AssertionError, match=None if message is None else f"^{message}$"):
        tree.check_invariants()


def test_check_invariants_fails_on_an_orphan_whose_parent_is_still_listed():
    """Block mode: an orphan's gone parent must not still be the page listed under its id
    (the orphan, listed first here, is checked before its parent)."""
    tree = cache(capacity=100, mode=CacheMode.BLOCK)
    one, two = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    one.resident = False
    tree._pages = {2: two, 1: one}
    with pytest.raises(AssertionError, match="^orphan of a resident parent$"):
        tree.check_invariants()


def test_block_mode_refuses_a_first_page_id_below_another_page():
    """Block mode: page 1 is a first page (no parent); inserting id 1 below page 3 is a
    mis-chained id: ChainConflict (the adoption check must not take a root for an orphan)."""
    tree = cache(mode=CacheMode.BLOCK)
    tree.insert(None, [1], [P], now=0, recency=0)
    (three,) = tree.insert(None, [3], [P], now=0, recency=0)
    with pytest.raises(ChainConflict, match="page id 1"):
        tree.insert(three, [1], [P], now=1, recency=1)


def test_reserve_adds_up_and_may_take_every_free_token():
    """Capacity 10: reserve 6 then 4 (exactly what is free) leaves 0 free, reserved 10;
    releasing 0 is a no-op; release 10 frees it all."""
    tree = cache(capacity=10)
    tree.reserve(6)
    tree.reserve(4)
    assert tree.reserved_tokens == 10 and tree.free_tokens == 0
    tree.release(0)
    assert tree.reserved_tokens == 10
    tree.release(10)
    assert tree.free_tokens == 10


@pytest.mark.parametrize("mode", [CacheMode.RADIX, CacheMode.BLOCK])
def test_compaction_keeps_an_untouched_victim_and_its_deadline(mode):
    """Capacity 2 pages, sliding TTL 100: pages 1 and 2 at t=0. Page 2 is hit 3,000 times
    (t < 50: deadline up to 150), leaving thousands of stale entries, so the heaps compact;
    page 1's one valid entry in each must survive it: freeing a page's tokens takes page 1
    (least recently used), and at t=120 page 1 expires (deadline 100), page 2 does not."""
    for check in ("evict", "expire"):
        tree = cache(capacity=2 * P, mode=mode, ttl=100)
        tree.insert(None, [1], [P], now=0, recency=0)
        (two,) = tree.insert(None, [2], [P], now=0, recency=1)
        for step in range(3000):
            tree.touch([two], now=step / 100, recency=2 + step)
        if check == "evict":
            assert tree.evict(P) and tree.get(1) is None and tree.get(2) is two
        else:
            assert tree.expire(120) == 1 and tree.get(1) is None and tree.get(2) is two


# ------------------------------------------------- more gaps mutation testing found
def test_a_new_page_starts_at_priority_0_and_unhit():
    (page,) = cache().insert(None, [1], [P], now=0, recency=0)
    assert (page.priority, page.num_hits) == (0, 0)


def test_insert_refuses_ids_and_token_counts_of_different_lengths():
    """Refused before anything is inserted."""
    tree = cache()
    with pytest.raises(ValueError, match="^2 page ids but 1 page token counts$"):
        tree.insert(None, [1, 2], [P], now=0, recency=0)
    assert tree.num_pages == 0 and tree.resident_tokens == 0
    assert tree.counters.inserted_pages == 0


def test_evict_counts_reserved_tokens_as_used():
    """Capacity 12: pages 1, 2 (8 tokens) and 4 reserved: nothing is free, so freeing 4
    evicts one page (the LRU leaf, page 2: radix mode evicts leaves)."""
    tree = cache(capacity=12)
    tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.reserve(4)
    assert tree.evict(4) and tree.num_pages == 1 and tree.get(2) is None


def test_expire_goes_on_after_re_queueing_a_raised_deadline():
    """Block mode, TTL 10 fixed: pages 1 and 5 at t=0 (deadlines 10); page 2 inserted below
    page 1 at t=5 raises page 1 to 15, leaving its old entry (10) queued first (lower id).
    expire(12) re-queues page 1 and must still expire page 5: 1 page freed."""
    from prefixsim.cache import TTLMode

    tree = RadixCache(None, POLICIES.build("lru"), TTLRule(10, TTLMode.FIXED), CacheMode.BLOCK)
    (one,) = tree.insert(None, [1], [P], now=0, recency=0)
    tree.insert(None, [5], [P], now=0, recency=0)
    tree.insert(one, [2], [P], now=5, recency=1)
    assert tree.expire(12) == 1 and tree.get(5) is None and tree.get(1) is one


def test_block_mode_insert_raises_adopted_pages_between_new_ones():
    """Block mode, TTL 10: [1, 2, 3] at t=0 (deadlines 10); page 1 evicted (2 and 3 stay,
    orphans). At t=5 insert [1, 2, 3, 4]: page 1 new, 2 and 3 re-adopted, 4 new (deadline
    15): the adopted pages are ancestors of page 4 and are raised to 15 (R12), so at t=12
    all four pages match; an adopted page after the last new one would not be raised."""
    tree = cache(capacity=4 * P, mode=CacheMode.BLOCK, ttl=10)
    one, two, three = tree.insert(None, [1, 2, 3], [P, P, P], now=0, recency=0)
    tree.touch([two, three], now=0, recency=1)  # page 1 becomes the LRU victim
    assert tree.evict(2 * P) and tree.get(1) is None and tree.get(2) is two
    placed = tree.insert(None, [1, 2, 3, 4], [P, P, P, P], now=5, recency=2)
    assert [p.deadline_s for p in placed] == [15, 15, 15, 15]
    assert tree.match([1, 2, 3, 4], 12).num_pages == 4
    tree.check_invariants()


def test_an_observer_hears_every_page_added_and_removed():
    """A prefix index (router) sets `observer`: it is told of each new page and of each page
    evicted or expired, with the page itself. Setting another observer, or None, silences
    the first."""
    events = []

    class Observer:
        __slots__ = ()

        def added(self, page):
            events.append(("added", page.page_id))

        def removed(self, page):
            events.append(("removed", page.page_id))

    tree = cache(capacity=2 * P, ttl=10)
    tree.observer = first = Observer()
    assert tree.observer is first
    tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    tree.evict(P)
    tree.expire(20)
    assert events == [("added", 1), ("added", 2), ("removed", 2), ("removed", 1)]
    tree.observer = None
    tree.insert(None, [3], [P], now=30, recency=1)
    tree.evict(P)
    assert len(events) == 4 and tree.observer is None


@pytest.mark.parametrize("name", ["lru", "fifo", "ttl"])
def test_a_key_read_as_a_field_evicts_as_the_key_called(name):
    """lru, fifo and ttl declare the field their key returns, which the tree reads rather
    than calling `key`; a subclass overriding `key` (the same values) without declaring it
    is called. Both evict the same pages in the same order on a workload of repeated
    chains, hits and inserts (40 requests over 7 chains, a cache of 6 pages), where lru's
    and fifo's orders differ."""

    def evictions(policy) -> list[int]:
        events = []

        class Observer:
            def added(self, page):
                pass

            def removed(self, page):
                events.append(page.page_id)

        tree = RadixCache(6 * P, policy, TTLRule(50) if name == "ttl" else None)
        tree.observer = Observer()
        for recency in range(40):
            chain = (recency * recency + 3 * recency) % 7
            ids = [chain * 10 + k for k in range(1 + chain % 3)]
            hit = tree.match(ids, recency)
            tree.touch(hit.pages, now=recency, recency=recency)
            tree.evict(P * (len(ids) - hit.num_pages), protect=hit.last)
            tree.insert(hit.last, ids[hit.num_pages:], [P] * (len(ids) - hit.num_pages),
                        now=recency, recency=recency)
        return events

    built = POLICIES.build(name)
    called = type(f"Called{name}", (type(built),), {"key": lambda self, page:
                                                   type(built).key(self, page)})()
    read = evictions(built)
    assert len(read) >= 8 and read == evictions(called)
    other = POLICIES.build("fifo" if name == "lru" else "lru")
    assert evictions(other) != read or name == "ttl"


# ---------------------------------------------------------------- removed pages
@pytest.mark.parametrize("policy", ["lru", "s3fifo"])
def test_an_evicted_page_lets_go_of_its_parent_in_radix_mode(policy):
    """Radix mode: an evicted page drops its pointer to its parent (after the hooks and a
    demotion have read it), so a stale heap entry of it does not keep its evicted
    ancestors alive. Both eviction loops (LRU's leaves, S3-FIFO's second chances)."""
    tree = cache(capacity=3 * P, policy=policy)
    pages = tree.insert(None, [1, 2, 3], [P, P, P], now=0, recency=0)
    assert pages[2].parent is pages[1]
    assert tree.evict(3 * P)
    assert [p.resident for p in pages] == [False] * 3
    assert [p.parent for p in pages] == [None] * 3


def test_an_expired_page_lets_go_of_its_parent_in_radix_mode():
    tree = cache(ttl=10)
    pages = tree.insert(None, [1, 2], [P, P], now=0, recency=0)
    assert tree.expire(now=20) == 2
    assert [p.parent for p in pages] == [None, None]


def test_a_page_evicted_in_block_mode_keeps_its_parent_for_its_orphans():
    """Block mode: pages 1 <- 2 <- 3, older first; evicting two pages takes 1, then 2, and
    leaves 3 resident, an orphan naming 2, which still names 1 (the chain a pool write
    of 3 would follow)."""
    tree = cache(capacity=3 * P, mode=CacheMode.BLOCK)
    (one,) = tree.insert(None, [1], [P], now=1, recency=1)
    (two,) = tree.insert(one, [2], [P], now=2, recency=2)
    (three,) = tree.insert(two, [3], [P], now=3, recency=3)
    assert tree.evict(2 * P)
    assert (one.resident, two.resident, three.resident) == (False, False, True)
    assert three.parent is two and two.parent is one
