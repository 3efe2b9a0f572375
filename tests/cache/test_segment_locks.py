"""Differential state machine: SegmentCache's Part B steps (docs/cache-semantics.md R5-R13:
a timed replica's match, lock, touch, chunk inserts with reuse, relock, unlock, reservations,
eviction and expiry) against RadixCache's, step for step.

Requests are prompts over a small trie of chained page ids (a prompt's id at a position names
its whole prefix), so running requests share prefixes, insert the same pages concurrently
(R7: the first insert wins, the later one reuses) and lock paths that end inside another's
segment. After every step both caches must hold the same pages with the same statistics
(last access, recency, deadline, hits, locks), the same token accounts and the same
counters, and pass their own invariant checks. Every node-uniform policy, sliding and fixed
TTLs, tiny capacities.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode, TTLMode, TTLRule
from prefixsim.cache.segment_tree import SegmentCache

P = 4  # tokens of a full page
NODE_UNIFORM = ["fifo", "gdsf", "lfu", "lru", "priority", "ttl"]


class Running:
    """A running request: its ids, its tips in both caches, the pages in the tree so far."""

    def __init__(self, ids, radix_tip, segment_tip, num_pages):
        self.ids = ids
        self.radix_tip = radix_tip
        self.segment_tip = segment_tip
        self.num_pages = num_pages


class SegmentLocksMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.radix = self.segments = None

    @initialize(capacity=st.one_of(st.none(), st.integers(0, 16), st.integers(16, 80)),
                policy=st.sampled_from([*NODE_UNIFORM, "s3fifo", "workload_aware"]),
                ttl=st.one_of(st.none(), st.builds(TTLRule, st.sampled_from([0.5, 1.0, 3.0]),
                                                   st.sampled_from(list(TTLMode)))))
    def build(self, capacity, policy, ttl):
        self.radix = RadixCache(capacity, POLICIES.build(policy), ttl)
        self.segments = SegmentCache(capacity, POLICIES.build(policy), ttl, chained=True)
        self.now = 0.0
        self.recency = 0
        self.running: list[Running] = []
        self.ids: dict[tuple[int, ...], int] = {}

    def chain(self, branches):
        """Chained ids of a prompt: the id at position i names branches[:i + 1]."""
        out = []
        for i in range(len(branches)):
            out.append(self.ids.setdefault(tuple(branches[:i + 1]), len(self.ids) + 1))
        return out

    # ---------------------------------------------------------------------- steps
    @rule(branches=st.lists(st.integers(0, 2), min_size=1, max_size=7),
          dt=st.sampled_from([0.0, 0.0, 0.25, 1.0]))
    def admit(self, branches, dt):
        """Match, lock the tip, refresh the path (replica_memory.admit's order)."""
        self.now += dt
        ids = self.chain(branches)
        pages = self.radix.match(ids, self.now).pages
        run = self.segments.match(ids, self.now).pages  # the same calls on both trees
        assert len(run) == len(pages)
        assert [node.ids[i - node.depth] for i, node in enumerate(run)] == [
            page.page_id for page in pages]
        radix_tip = pages[-1] if pages else None
        segment_tip = run[-1] if run else None
        if radix_tip is not None:
            assert segment_tip.ids[-1] == radix_tip.page_id
            self.radix.lock(radix_tip)
            self.segments.lock(segment_tip)
        self.recency += 1
        self.radix.touch(pages, self.now, self.recency)
        self.segments.touch(run, self.now, self.recency)
        self.running.append(Running(ids, radix_tip, segment_tip, len(pages)))

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 10), pages=st.integers(1, 4), last=st.integers(1, P),
          dt=st.sampled_from([0.0, 0.5]))
    def insert_chunk(self, index, pages, last, dt):
        """A prefill chunk's pages go into the tree below the request's tip (space made
        first, as the reservation would have), then the lock moves down."""
        self.now += dt
        state = self.running[index % len(self.running)]
        first = state.num_pages
        stop = min(len(state.ids), first + pages)
        if stop <= first:
            return
        tokens = [P] * (stop - first)
        if stop == len(state.ids):
            tokens[-1] = last
        need = sum(tokens)
        assert self.radix.evict(need) == self.segments.evict(need)
        self.recency += 1
        placed = self.radix.insert(state.radix_tip, state.ids[first:stop], tokens, self.now,
                                   self.recency)
        run = self.segments.insert(state.segment_tip, state.ids[first:stop], tokens,
                                   self.now, self.recency)
        assert len(run) == len(placed)
        if placed:
            assert run[-1].ids[-1] == placed[-1].page_id
            self.radix.relock(state.radix_tip, placed[-1], self.now)
            self.segments.relock(state.segment_tip, run[-1], self.now)
            state.radix_tip, state.segment_tip = placed[-1], run[-1]
            state.num_pages = first + len(placed)

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 10), dt=st.sampled_from([0.0, 0.5, 2.0]))
    def finish(self, index, dt):
        self.now += dt
        state = self.running.pop(index % len(self.running))
        if state.radix_tip is not None:
            self.radix.unlock(state.radix_tip, self.now)
            self.segments.unlock(state.segment_tip, self.now)

    @rule(tokens=st.integers(0, 12))
    def reserve(self, tokens):
        assert self.radix.evict(tokens) == self.segments.evict(tokens)
        if tokens <= self.radix.free_tokens:
            self.radix.reserve(tokens)
            self.segments.reserve(tokens)
        else:
            with pytest.raises(ValueError):
                self.segments.reserve(tokens)

    @rule(fraction=st.floats(0, 1))
    def release(self, fraction):
        tokens = int(self.radix.reserved_tokens * fraction)
        self.radix.release(tokens)
        self.segments.release(tokens)

    @rule(tokens=st.integers(0, 30))
    def evict(self, tokens):
        assert self.radix.evict(tokens) == self.segments.evict(tokens)

    @rule(dt=st.sampled_from([0.5, 1.0, 4.0]))
    def advance(self, dt):
        self.now += dt
        self.radix.expire(self.now)
        self.segments.expire(self.now)

    # ------------------------------------------------------------------ the check
    @invariant()
    def same_state(self):
        if self.radix is None:
            return
        radix, segments = self.radix, self.segments
        radix.check_invariants()
        segments.check_invariants()
        pages = {page.page_id: (page.last_access_s, page.recency, page.deadline_s,
                                page.num_hits, page.lock_count) for page in radix.pages()}
        held = {}
        for node in segments.segments():
            for page_id in node.ids:
                held[page_id] = (node.last_access_s, node.recency, node.deadline_s,
                                 node.num_hits, node.lock_count)
        assert held == pages
        for name in ("resident_tokens", "locked_tokens", "reserved_tokens", "free_tokens",
                     "evictable_tokens"):
            assert getattr(segments, name) == getattr(radix, name), name
        assert segments.available_tokens() == radix.available_tokens()
        ours, theirs = segments.counters, radix.counters
        for name in ("evicted_pages", "evicted_tokens", "expired_pages", "expired_tokens",
                     "inserted_pages", "inserted_tokens", "peak_tokens"):
            assert getattr(ours, name) == getattr(theirs, name), name
        for name in ("hit_ages", "evicted_ages", "expired_ages"):
            assert list(getattr(ours, name).counts) == list(getattr(theirs, name).counts), name


SegmentLocksMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestSegmentLocks = SegmentLocksMachine.TestCase


class BlockModeMachine(SegmentLocksMachine):
    """The same steps in block mode (R3: any unlocked page a victim; the pages below one
    that leaves stay as orphans until a match or an insert reaches their lost parent):
    every policy that runs block mode on segments (tail first, head first, or each page
    by its own entry), every unlocked segment a victim; the orphans' tokens checked
    too."""

    @initialize(capacity=st.one_of(st.none(), st.integers(0, 16), st.integers(16, 80)),
                policy=st.sampled_from(["fifo", "gdsf", "lfu", "lru", "priority", "s3fifo",
                                        "ttl", "workload_aware"]),
                ttl=st.one_of(st.none(), st.builds(TTLRule, st.sampled_from([0.5, 1.0, 3.0]),
                                                   st.sampled_from(list(TTLMode)))))
    def build(self, capacity, policy, ttl):
        self.radix = RadixCache(capacity, POLICIES.build(policy), ttl, CacheMode.BLOCK)
        self.segments = SegmentCache(capacity, POLICIES.build(policy), ttl, chained=True,
                                     mode=CacheMode.BLOCK)
        assert self.segments.block
        self.now = 0.0
        self.recency = 0
        self.running = []
        self.ids = {}

    @invariant()
    def same_orphans(self):
        if self.radix is not None:
            assert self.segments.orphan_tokens() == self.radix.orphan_tokens()


BlockModeMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestBlockMode = BlockModeMachine.TestCase


def test_a_lock_holds_the_path_and_an_unlock_frees_what_expired_meanwhile():
    """Known answer, TTL 1 s sliding, LRU: [1, 2, 3] inserted at 0 and locked; at 5 s the
    match sees it all (locked pages do not expire) and after the unlock at 5 s all three are
    gone (12 tokens expired); the lock counted 12 tokens while held."""
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(1.0), chained=True)
    run = cache.insert(None, [1, 2, 3], [P, P, P], 0.0, 1)
    cache.lock(run[-1])
    assert cache.locked_tokens == 12 and cache.evictable_tokens == 0
    assert cache.expire(5.0) == 0
    assert [list(node.ids) for node in cache.match([1, 2, 3], 5.0).pages.segments] == [
        [1, 2, 3]]
    cache.unlock(run[-1], 5.0)
    assert cache.num_pages == 0 and cache.counters.expired_tokens == 12
    assert cache.locked_tokens == 0
    cache.check_invariants()


def test_a_lock_ending_inside_a_segment_splits_it_and_eviction_takes_only_the_rest():
    """Capacity 16: [1, 2, 3, 4] in one segment; a request matching [1, 2] locks a path
    whose tip splits it; freeing 16 tokens can take pages 4 and 3 only (8 tokens)."""
    cache = SegmentCache(16, POLICIES.build("lru"), chained=True)
    cache.insert(None, [1, 2, 3, 4], [P] * 4, 0.0, 1)
    run = cache.match([1, 2, 9], 1.0).pages
    assert [list(node.ids) for node in run.segments] == [[1, 2]]
    assert len(run) == 2 and run[0] is run[1] is run[-1]
    cache.lock(run[-1])
    assert cache.available_tokens() == 8
    assert cache.evict(16) is False
    assert [list(node.ids) for node in cache.segments()] == [[1, 2]]
    assert cache.counters.evicted_pages == 2 and math.isclose(cache.free_tokens, 8)
    cache.check_invariants()


def test_relock_elsewhere_unlocks_the_old_path_and_bad_calls_are_refused():
    """A lock moved to a path that does not pass through the old tip releases the old path
    whole (RadixCache.relock); unlocking an unlocked segment, a negative reservation, a
    release beyond the reservation, ids and token counts of different lengths and pages of
    mixed sizes before the last are refused."""
    cache = SegmentCache(100, POLICIES.build("lru"), chained=True)
    a = cache.insert(None, [1, 2], [P, P], 0.0, 1)[-1]
    b = cache.insert(None, [3], [P], 0.0, 2)[-1]
    cache.lock(a)
    cache.relock(a, b, 1.0)
    assert (a.lock_count, b.lock_count, cache.locked_tokens) == (0, 1, 4)
    with pytest.raises(ValueError, match="unlocked segment"):
        cache.unlock(a, 1.0)
    with pytest.raises(ValueError, match="cannot reserve"):
        cache.reserve(-1)
    with pytest.raises(ValueError, match="only 88 free"):
        cache.reserve(89)
    cache.reserve(88)
    with pytest.raises(ValueError, match="releasing 89 of 88"):
        cache.release(89)
    with pytest.raises(ValueError, match="2 page ids but 1"):
        cache.insert(b, [4, 5], [P], 1.0, 3)
    cache.release(88)
    with pytest.raises(ValueError, match="one size"):
        cache.insert(b, [4, 5, 6], [P, 2, 1], 1.0, 3)
    assert cache.num_pages == 3
    cache.check_invariants()


def test_an_insert_reuses_what_another_request_placed_and_refuses_what_does_not_fit():
    """R7: [1, 2, 3] resident; a second request inserting [1, 2, 4] below no tip reuses 1 and
    2 (splitting the segment) and adds 4; with 8 tokens free of a 28-token cache (16 resident,
    4 reserved), an insert of three 4-token pages places two (no eviction)."""
    cache = SegmentCache(28, POLICIES.build("lru"), chained=True)
    cache.insert(None, [1, 2, 3], [P] * 3, 0.0, 1)
    run = cache.insert(None, [1, 2, 4], [P] * 3, 1.0, 2)
    assert [list(node.ids) for node in run.segments] == [[1, 2], [4]]
    assert len(run) == 3 and run[1] is not run[2] and run[-1].ids[0] == 4
    assert cache.counters.inserted_pages == 4
    cache.reserve(4)
    placed = cache.insert(run[-1], [5, 6, 7], [P] * 3, 2.0, 3)
    assert [list(node.ids) for node in placed.segments] == [[5, 6]]
    with pytest.raises(IndexError):
        placed[2]
    with pytest.raises(TypeError):
        placed[0:1]
    assert cache.resident_tokens == 24 and cache.free_tokens == 0
    cache.check_invariants()
