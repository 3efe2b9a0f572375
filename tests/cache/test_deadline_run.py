"""DeadlineRun, the compressed cache's deadline queue (cache/segment_tree.py): segments in
order go in the run with no entry object, the others in a heap; an entry is live iff it is
its segment's latest and the segment is a resident leaf. Known answers by hand, then a
property test against a plain reference (the least live deadline, searched)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache.segment_tree import DeadlineRun, Segment


def segment(page_id: int, deadline: float) -> Segment:
    return Segment((page_id,), None, 0, 4, 4, 0.0, 0, deadline)


def drain(queue: DeadlineRun, now: float) -> list[int]:
    out = []
    while (node := queue.pop_below(now)) is not None:
        out.append(node.ids[0])
    return out


def a_refreshed_after_b_and_c() -> tuple[DeadlineRun, Segment, Segment, Segment]:
    """A, B, C queued at deadlines 1, 2, 3 (run positions 0-2), then A refreshed to 4 and
    queued again (position 3): A's first entry is stale."""
    queue = DeadlineRun()
    a, b, c = segment(1, 1.0), segment(2, 2.0), segment(3, 3.0)
    for node in (a, b, c):
        queue.push(node)
    a.deadline_s = 4.0
    queue.push(a)
    return queue, a, b, c


def test_segments_in_deadline_order_go_in_the_run_and_leave_while_below_now():
    """Deadlines 1, 2, 3 pushed in order: all in the run, no heap; below 2.5 the first two
    leave (2 < 2.5), 3 stays until a later now."""
    queue = DeadlineRun()
    nodes = [segment(i, float(i)) for i in (1, 2, 3)]
    for node in nodes:
        queue.push(node)
    assert queue.heap == [] and len(queue) == 3
    assert [node.deadline_entry for node in nodes] == [0, 1, 2]
    assert drain(queue, 2.5) == [1, 2]
    assert drain(queue, 3.0) == []  # 3 is not before 3
    assert drain(queue, 3.5) == [3]
    assert len(queue) == 0


def test_a_push_before_the_runs_last_deadline_goes_to_the_heap_and_leaves_in_order():
    """Deadlines 5 then 3 then 4: 3 and 4 are out of order (heap entries -1 and -2); they
    leave by deadline, before and after the run's 5 as their deadlines say."""
    queue = DeadlineRun()
    five, three, four = segment(5, 5.0), segment(3, 3.0), segment(4, 4.0)
    for node in (five, three, four):
        queue.push(node)
    assert five.deadline_entry == 0 and three.deadline_entry == -1 and four.deadline_entry == -2
    assert len(queue.heap) == 2
    assert drain(queue, 3.0) == []  # a heap entry's 3 is not before 3 either
    assert drain(queue, 10.0) == [3, 4, 5]


def test_an_entry_goes_stale_when_its_segment_is_queued_again_leaves_or_gets_a_child():
    """A (deadline 1) refreshed to 4 and queued again: its first entry is stale, so below 2
    nothing leaves and below 5 A leaves once. B left the cache and C got a child: neither
    leaves, and their heads are dropped."""
    queue, a, b, c = a_refreshed_after_b_and_c()
    b.resident = False
    c.children = {9: segment(9, 3.0)}
    assert drain(queue, 2.0) == []
    assert drain(queue, 5.0) == [1]
    assert len(queue) == 0 and queue.run == [] and queue.base == 4


def test_keep_drops_stale_entries_and_numbers_the_live_ones_past_every_old_position():
    """Run positions 0-3 with A's first entry stale and B gone: keep leaves C and A's latest,
    at new positions 4 and 5; the heap keeps its live entry only."""
    queue, a, b, c = a_refreshed_after_b_and_c()
    late, gone = segment(7, 3.5), segment(8, 3.6)
    queue.push(late)
    queue.push(gone)
    b.resident = gone.resident = False
    queue.keep()
    assert queue.run == [c, a] and (c.deadline_entry, a.deadline_entry) == (4, 5)
    assert [entry[2] for entry in queue.heap] == [late]
    queue.check([a, c, late])
    assert drain(queue, 10.0) == [3, 7, 1]


def test_the_floor_is_the_least_live_deadline_a_pop_found_lowered_by_pushes():
    """`floor_s`: a push lowers it, a pop that finds nothing due leaves the least live
    deadline there (the heap's live head, 3; the run's head once the heap is empty, 5;
    none left, inf), and a pop while it is not before now looks at nothing."""
    queue = DeadlineRun()
    assert queue.floor_s == float("inf")
    five, three, one = segment(5, 5.0), segment(3, 3.0), segment(1, 1.0)
    for node in (five, three, one):  # 3 and 1 out of order: the heap
        queue.push(node)
    assert queue.floor_s == 1.0
    one.resident = False  # its heap entry is stale now
    assert queue.pop_below(2.0) is None and queue.floor_s == 3.0  # the heap's live head
    three.resident = False
    assert queue.pop_below(2.0) is None and queue.floor_s == 3.0  # not looked at: 3 >= 2
    assert queue.pop_below(4.0) is None and queue.floor_s == 5.0  # the run's head
    queue.push(segment(7, 7.0))
    assert queue.floor_s == 5.0
    assert queue.pop_below(6.0) is five and queue.pop_below(6.0) is None
    assert queue.floor_s == 7.0
    queue.run[queue.first].resident = False
    assert queue.pop_below(8.0) is None and queue.floor_s == float("inf")


def test_check_finds_a_leaf_without_a_live_entry():
    queue = DeadlineRun()
    a = segment(1, 1.0)
    queue.push(a)
    queue.check([a])
    a.deadline_entry = 5
    try:
        queue.check([a])
    except AssertionError as error:
        assert "no live entry" in str(error)
    else:  # pragma: no cover
        raise AssertionError("check passed a leaf without an entry")


OPS = st.lists(st.tuples(st.sampled_from(["new", "refresh", "leave", "child", "unchild",
                                          "pop", "keep"]),
                         st.integers(0, 9), st.integers(0, 40)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_pops_the_least_live_deadline_below_now_as_a_search_would(ops):
    """Random pushes (new segments, refreshed ones queued again), segments leaving or getting
    and losing a child (queued again when they lose it, as the cache does), compactions, and
    pops: each pop returns a live segment of the least live deadline when that is before now,
    else None, as a search over the live segments says."""
    queue = DeadlineRun()
    nodes: list[Segment] = []
    queued: set[int] = set()  # indices of the live segments the queue should hold
    clock = 0.0
    for op, pick, value in ops:
        if op == "new":
            node = segment(len(nodes), clock + value)
            nodes.append(node)
            queue.push(node)
            queued.add(len(nodes) - 1)
            continue
        if op == "keep":
            queue.keep()
            continue
        if op == "pop":
            clock += value / 4
            live = [nodes[i].deadline_s for i in queued]
            least = min(live) if live else None
            node = queue.pop_below(clock)
            if least is None or not least < clock:
                assert node is None
            else:
                assert node is not None and node.deadline_s == least
                queued.discard(node.ids[0])
                node.resident = False
            continue
        if not nodes:
            continue
        index = pick % len(nodes)
        node = nodes[index]
        if not node.resident:
            continue
        if op == "refresh" and not node.children:
            node.deadline_s = max(node.deadline_s, clock + value)
            queue.push(node)
        elif op == "leave":
            node.resident = False
            queued.discard(index)
        elif op == "child" and not node.children:
            node.children = {-1: node}
            queued.discard(index)
        elif op == "unchild" and node.children:
            node.children = None
            queue.push(node)
            queued.add(index)
        queue.check([nodes[i] for i in queued])


def test_keep_after_a_pop_keeps_the_run_past_its_consumed_head():
    """A run of deadlines 1, 2, 3; popping below 1.5 takes A and leaves the run's head one
    position on (`first` 1). `keep` must keep B and C (their entries are positions 1 and 2,
    past the consumed head) and number them past every position given before (3 and 4);
    then they pop in deadline order."""
    queue = DeadlineRun()
    a, b, c = segment(1, 1.0), segment(2, 2.0), segment(3, 3.0)
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
        parent, early = segment(1, 1.0), segment(3, 0.5)
        queue.push(parent)
        queue.push(early)  # before the run's last deadline: a heap entry
        assert len(queue.heap) == 1
        for node in (parent, early):
            node.children = {9: segment(9, 5.0)}
        queue.keep()
        kept = [] if leaves_only else [parent]
        assert queue.run == kept and len(queue.heap) == len(kept)
        assert len(queue) == 2 * len(kept)
        assert queue.pop_below(2.0) is (None if leaves_only else early)


def test_check_finds_a_run_out_of_deadline_order():
    """A live run entry whose segment's deadline fell below the one before it."""
    queue = DeadlineRun()
    a, b = segment(1, 1.0), segment(2, 2.0)
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
    locked, missing, past = segment(1, 1.0), segment(2, 2.0), segment(3, 3.0)
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
    late, early, other = segment(1, 5.0), segment(2, 1.0), segment(3, 1.0)
    queue.push(late)
    queue.push(early)  # below the run's last deadline: heap entry -1
    queue.check([late, early])
    other.deadline_entry = early.deadline_entry
    with pytest.raises(AssertionError, match="^no live entry$"):
        queue.check([other])


def test_check_finds_a_heap_entry_off_its_segments_deadline():
    """A heap entry holding its segment at a deadline the segment no longer has."""
    queue = DeadlineRun()
    late, early = segment(1, 5.0), segment(2, 1.0)
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
    nodes = [segment(i, float(i)) for i in range(3000)]
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
