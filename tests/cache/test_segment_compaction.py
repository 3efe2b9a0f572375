"""Compaction of the compressed cache's queues (cache/segment_tree.py `_compact`,
`DeadlineRun.keep`) where the contract tests of leaf mode do not reach: block mode, where
every unlocked segment is a victim and the victim queue keeps its entries by `_live_any`,
and a deadline run compacted after some of it was consumed. Known answers worked by hand:
compaction drops stale entries only, so what leaves next is what would have left without it.
"""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, CacheMode, TTLRule
from prefixsim.cache.segment_tree import DeadlineRun, Segment, SegmentCache

P = 4  # tokens per page


def block_cache(capacity: int, ttl: float | None = None, policy: str = "lru") -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build(policy), None if ttl is None else TTLRule(ttl),
                        mode=CacheMode.BLOCK)


def pages(cache: SegmentCache) -> list[int]:
    return sorted(cache.page_ids())


def hammer(cache: SegmentCache, page: int, times: int, first_recency: int) -> None:
    """Hit one page `times` times (t < times / 100): each hit queues its segment again,
    leaving its earlier entries stale."""
    for step in range(times):
        cache.access([page], step / 100, first_recency + step, P, P)


@pytest.mark.parametrize("policy", ["lru", "fifo", "gdsf", "s3fifo"])
def test_block_mode_compaction_keeps_an_untouched_victim(policy):
    """Block mode, capacity 2 pages, no TTL: [1] then [2] at t=0; page 2 is hit 5,000
    times, so the victim queue holds thousands of stale entries of [2] and compacts (it
    looks every 1,024 queue operations, and compacts past 4 x segments + 2,048 entries). The
    one entry of [1] is live and must survive: freeing a page's tokens then takes page 1
    (least recently used; first inserted for FIFO; least valued for GDSF; unhit in S3-FIFO's
    small queue). GDSF and S3-FIFO keep an entry per page (`_live_page` keeps them)."""
    cache = block_cache(2 * P, policy=policy)
    cache.access([1], 0, 0, P, P)
    cache.access([2], 0, 1, P, P)
    hammer(cache, 2, 5000, 2)
    assert len(cache._victims) <= 4 * cache.num_segments + 2048 + 1024
    assert cache.evict(P) and pages(cache) == [2]
    cache.check_invariants()


def test_block_mode_compaction_keeps_an_inner_segment_a_victim():
    """Block mode under FIFO, capacity 4 pages: [1, 2] then [1, 2, 3] at t=0 (a child [3]
    below [1, 2]), then [9] hit 5,000 times. In block mode the inner segment [1, 2] is a
    victim too, and its head holds the first page inserted: after compaction, freeing a
    page takes page 1 (its suffix [2] and below become orphans), not a leaf."""
    cache = block_cache(4 * P, policy="fifo")
    cache.access([1, 2], 0, 0, P, 2 * P)
    cache.access([1, 2, 3], 0, 1, P, 3 * P)
    hammer(cache, 9, 5000, 2)
    assert cache.evict(P) and pages(cache) == [2, 3, 9]
    cache.check_invariants()


def test_block_mode_compaction_keeps_deadlines_of_every_segment():
    """Block mode, sliding TTL 100: [1] at t=0 (deadline 100), then [5] hit 3,000 times
    (t < 30: its deadline rises to about 130). Both queues compact; at t=120 page 1 expires
    and page 5 does not."""
    cache = block_cache(10 * P, ttl=100)
    cache.access([1], 0, 0, P, P)
    hammer(cache, 5, 3000, 1)
    assert len(cache._deadlines) <= 4 * cache.num_segments + 2048 + 1024
    assert cache.expire(120) == 1 and pages(cache) == [5]
    cache.check_invariants()


def leaf(name: int, deadline_s: float) -> Segment:
    return Segment([name], None, 0, P, P, 0.0, name, deadline_s)


def test_keep_after_a_pop_keeps_the_run_past_its_consumed_head():
    """A run of deadlines 1, 2, 3; popping below 1.5 takes A and leaves the run's head one
    position on (`first` 1). `keep` must keep B and C (their entries are positions 1 and 2,
    past the consumed head) and number them past every position given before (3 and 4);
    then they pop in deadline order."""
    queue = DeadlineRun()
    a, b, c = leaf(1, 1.0), leaf(2, 2.0), leaf(3, 3.0)
    for node in (a, b, c):
        queue.push(node)
    assert queue.pop_below(1.5) is a and queue.first == 1
    queue.keep()
    assert queue.run == [b, c] and (b.deadline_entry, c.deadline_entry) == (3, 4)
    queue.keep()  # again: past positions 0-4, never reused
    assert queue.base == 5 and (b.deadline_entry, c.deadline_entry) == (5, 6)
    assert len(queue) == 2
    assert queue.pop_below(10.0) is b and queue.pop_below(10.0) is c
    assert queue.pop_below(10.0) is None


def test_keep_in_block_mode_keeps_inner_segments():
    """A deadline run of every segment (`leaves_only` False, block mode): a segment with a
    child keeps its entries through `keep`, in the run and in the heap (queued before a
    later deadline), and pops; in a run of leaves only, both entries are stale and dropped."""
    for leaves_only in (False, True):
        queue = DeadlineRun(leaves_only)
        parent, early = leaf(1, 1.0), leaf(3, 0.5)
        queue.push(parent)
        queue.push(early)  # before the run's last deadline: a heap entry
        assert len(queue.heap) == 1
        for node in (parent, early):
            node.children = {9: leaf(9, 5.0)}
        queue.keep()
        kept = [] if leaves_only else [parent]
        assert queue.run == kept and len(queue.heap) == len(kept)
        assert len(queue) == 2 * len(kept)
        assert queue.pop_below(2.0) is (None if leaves_only else early)


def test_check_finds_a_run_out_of_deadline_order():
    """A live run entry whose segment's deadline fell below the one before it."""
    queue = DeadlineRun()
    a, b = leaf(1, 1.0), leaf(2, 2.0)
    queue.push(a)
    queue.push(b)
    queue.check([a, b])
    b.deadline_s = 0.5
    with pytest.raises(AssertionError, match="^deadline run out of order$"):
        queue.check([a, b])


def test_check_reads_every_segment_past_a_locked_one_and_bounds_run_positions():
    """A locked segment is skipped, not the end of the check: the leaf after it without a
    live entry is found. A run position one past the run's end is no entry either."""
    queue = DeadlineRun()
    locked, missing, past = leaf(1, 1.0), leaf(2, 2.0), leaf(3, 3.0)
    queue.push(locked)
    locked.lock_count = 1
    missing.deadline_entry = -1 - 99  # a heap entry number never given
    with pytest.raises(AssertionError, match="^no live entry$"):
        queue.check([locked, missing])
    past.deadline_entry = queue.base + len(queue.run)
    with pytest.raises(AssertionError, match="^no live entry$"):
        queue.check([past])


def test_check_finds_a_heap_entry_of_another_segment():
    """A segment naming a heap entry that holds another segment has no live entry."""
    queue = DeadlineRun()
    late, early, other = leaf(1, 5.0), leaf(2, 1.0), leaf(3, 1.0)
    queue.push(late)
    queue.push(early)  # below the run's last deadline: heap entry -1
    queue.check([late, early])
    other.deadline_entry = early.deadline_entry
    with pytest.raises(AssertionError, match="^no live entry$"):
        queue.check([other])


def test_check_finds_a_heap_entry_off_its_segments_deadline():
    """A heap entry holding its segment at a deadline the segment no longer has."""
    queue = DeadlineRun()
    late, early = leaf(1, 5.0), leaf(2, 1.0)
    queue.push(late)
    queue.push(early)  # a heap entry at 1.0
    early.deadline_s = 2.0
    with pytest.raises(AssertionError, match="^a live entry off its deadline$"):
        queue.check([late, early])


def test_a_long_consumed_run_head_is_cut_off_and_the_rest_keeps_its_positions():
    """3,000 leaves at deadlines 0, 1, ..., 2,999; popping those below 2,000 consumes the
    run's first 2,000 entries, which the run drops once 1,024 or more are consumed and they
    are at least half of it: the base moves past them, so the 1,000 left are still live
    and pop in order."""
    queue = DeadlineRun()
    nodes = [leaf(i, float(i)) for i in range(3000)]
    for node in nodes:
        queue.push(node)
    popped = []
    while (node := queue.pop_below(1999.5)) is not None:
        popped.append(node)
    assert popped == nodes[:2000]
    assert queue.base >= 1024 and len(queue.run) - queue.first == 1000
    queue.check(nodes[2000:])
    assert [queue.pop_below(1e9) for _ in range(1000)] == nodes[2000:]
    assert queue.pop_below(1e9) is None
