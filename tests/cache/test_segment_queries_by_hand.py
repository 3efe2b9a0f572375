"""SegmentCache's read-only queries and its Segment constructor, by hand (found by mutation
testing: the differential suites reach them only through a shared pool or a prefix index):
`matched_pages` over a path of several segments, on ids that are not chained, and its clock;
`announce_pages`' runs; the fields a new Segment starts with. Pages hold P = 4 tokens."""

from __future__ import annotations

from array import array

from prefixsim.cache import POLICIES
from prefixsim.cache.idle_ages import age_bin
from prefixsim.cache.segment_tree import Segment, SegmentCache

P = 4


def lru(capacity: int | None = None) -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build("lru"))


def three_segments() -> SegmentCache:
    """[1, 2] with children [3] (its child [4]) and [9]: [1, 2, 3, 4] then [1, 2, 9]
    split the first request's segment after page 2; [1, 2, 3] then [1, 2, 3, 4] below it
    would not split, so [4] is inserted below a resident [3] as its own segment."""
    cache = lru()
    cache.access([1, 2, 3], 0, 0, P, 3 * P)
    cache.access([1, 2, 3, 4], 0, 1, P, 4 * P)
    cache.access([1, 2, 9], 0, 2, P, 3 * P)
    assert sorted(tuple(s.ids) for s in cache.segments()) == [(1, 2), (3,), (4,), (9,)]
    return cache


def test_matched_pages_walks_a_path_of_several_segments():
    """Down [1, 2] -> [3] -> [4]: every position is counted from the request's start."""
    cache = three_segments()
    assert [cache.matched_pages(ids, 1.0) for ids in (
        [1, 2, 3, 4], [1, 2, 3, 4, 5], [1, 2, 3], [1, 2, 9, 4], [1, 2, 3, 7], [1, 2])] == [
        4, 4, 3, 3, 3, 2]
    assert cache.num_segments == 4  # nothing split


def test_matched_pages_compares_whole_runs_where_ids_are_not_chained():
    """Ids not chained (the default: an id may end several prefixes): [1, 5, 3] against the
    resident [1, 2, 3] shares page 1 only, though both end in 3."""
    cache = lru()
    cache.access([1, 2, 3], 0, 0, P, 3 * P)
    assert cache.matched_pages([1, 5, 3], 1.0) == 1
    assert cache.matched_pages(array("q", [1, 2, 7]), 1.0) == 2


def test_matched_pages_sets_the_clock_later_evictions_age_pages_by():
    """A query at t=10 moves the cache's clock: a page last used at t=0 and evicted next is
    10 s idle."""
    cache = lru(2 * P)
    cache.access([1], 0.0, 0, P, P)
    cache.access([2], 0.0, 1, P, P)
    assert cache.matched_pages([1], 10.0) == 1
    assert cache.evict(P)
    ages = cache.counters.evicted_ages.counts
    assert sum(ages) == 1 and ages[age_bin(10.0)] == 1 and age_bin(10.0) != age_bin(0.0)


class Runs:
    """A RunFeed that records what it is told."""

    def __init__(self) -> None:
        self.added: list[tuple] = []

    def added_run(self, ids, start: int, stop: int, holder) -> None:
        self.added.append((tuple(ids[start:stop]), start, stop, holder))


def test_announce_pages_tells_each_segment_as_one_run_from_its_start():
    cache = three_segments()
    feed = Runs()
    cache.announce_pages(feed)
    by_ids = {tuple(s.ids): s for s in cache.segments()}
    assert sorted(feed.added, key=lambda run: run[0]) == [
        ((1, 2), 0, 2, by_ids[(1, 2)]), ((3,), 0, 1, by_ids[(3,)]),
        ((4,), 0, 1, by_ids[(4,)]), ((9,), 0, 1, by_ids[(9,)])]


def test_a_new_segment_starts_with_the_fields_it_is_given():
    """Segment(ids, parent, depth, page_tokens, last_tokens, now, recency, deadline_s,
    priority): 3 pages of 4, 4 and 3 tokens; an array of ids is kept as given, a list is
    made an array; priority 0 unless given."""
    parent = Segment([7], None, 0, P, P, 0.0, 0, 50.0)
    ids = array("q", [5, 6, 8])
    node = Segment(ids, parent, 1, P, 3, 1.5, 9, 60.0, 2)
    assert node.ids is ids and node.first == 5 and node.parent is parent
    assert (node.depth, node.page_tokens, node.last_tokens, node.num_tokens) == (1, P, 3, 11)
    assert (node.created_s, node.last_access_s, node.recency) == (1.5, 1.5, 9)
    assert (node.deadline_s, node.priority, node.num_hits) == (60.0, 2, 0)
    assert node.children is None and node.resident and node.lock_count == 0
    listed = Segment([5, 6], None, 0, P, P, 0.0, 0, 1.0)
    assert type(listed.ids) is array and listed.ids.typecode == "q" and listed.priority == 0
