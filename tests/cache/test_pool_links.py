"""The shared pool's links and figures worked by hand (prefixsim/cache/pool.py,
docs/cache-semantics.md R18): a link direction's checks and bookings, which copy a fetch
reads, the lookup before it, and PoolFigures. Timed runs with a pool are in
tests/engine/test_shared_pool.py."""

from __future__ import annotations

import re

import pytest
from fakes import resident
from radix_reference import RadixCache

from prefixsim.cache import POLICIES
from prefixsim.cache.page import Page
from prefixsim.cache.pool import (
    LinkDirection,
    PoolFigures,
    PoolLink,
    PoolSpec,
    SharedPool,
    page_sizes,
)

MESSAGE = "a link needs a bandwidth > 0 and a finite latency >= 0"


def seven_seconds(num_bytes: int, bandwidth: float) -> float:
    return 7.0


@pytest.mark.parametrize("bytes_s, latency_s", [(0, 0.0), (-1, 0.0), (100, float("inf")),
                                                (100, -1.0)])
def test_a_link_direction_needs_a_bandwidth_and_a_finite_latency(bytes_s, latency_s):
    with pytest.raises(ValueError, match=f"^{re.escape(MESSAGE)}$"):
        LinkDirection(bytes_s, latency_s)


def test_a_booking_takes_bytes_over_bandwidth_or_the_given_rule():
    """100 bytes at 200 B/s, no latency by default: 0.5 s; a slow link of 0.5 B/s is a
    link; with a transfer rule, its 7 s (after the first booking: 7.5 s from 0)."""
    link = LinkDirection(200)
    assert link.book(100, 0.0) == 0.5
    assert link.book(100, 0.0, seven_seconds) == 7.5
    assert LinkDirection(0.5).book(1, 0.0) == 2.0
    assert PoolLink(PoolSpec(200, 200)).read(100, 1.0, seven_seconds) == 7.0


def pool_of(links: int, replicas: int = 2, lookup_s: float = 0.0,
            capacity: int | None = None) -> SharedPool:
    spec = PoolSpec(100, 100, replicas=replicas, lookup_s=lookup_s)
    pool = SharedPool(RadixCache(capacity, POLICIES.build("lru")), spec, lambda: 0.0)
    pool.links = [PoolLink(spec, index) for index in range(links)]
    return pool


def served_by(pool: SharedPool) -> list[int]:
    return [index for index, link in enumerate(pool.links) if link.serves.bytes]


def test_a_fetch_reads_the_copy_whose_holder_is_free_soonest_ties_the_first():
    """Two copies of each page, three replicas: page 9 written by replica 0 is held by 0
    and 1 (the next in index order, not 2). Holder 0 busy until 10, 1 until 5, 2 idle:
    replica 1 serves. With 0 and 1 equally busy, the first copy (0) serves."""
    pool = pool_of(3)
    pool.holder[9] = 0
    page = Page(9, None, 4, 0.0, 0)
    for index, free_s in enumerate((10.0, 5.0, 0.0)):
        pool.links[index].serves.free_s = free_s
    pool.fetch([page], pool.links[2], 1, 0.0)
    assert served_by(pool) == [1]
    tied = pool_of(3)
    tied.holder[9] = 0
    tied.fetch([page], tied.links[2], 1, 0.0)
    assert served_by(tied) == [0]


def test_a_fetch_waits_for_the_lookup_then_reads_even_without_holders():
    """Lookup 1 s, 4 tokens of 25 bytes at 100 B/s: done 1 + 1 = 2 s after now. With no
    links set (no holders known) it reads over the reader's link alone; a transfer rule
    replaces bytes / bandwidth."""
    pool = pool_of(0, lookup_s=1.0)
    reader = PoolLink(pool.spec)
    page = Page(9, None, 4, 0.0, 0)
    assert pool.fetch([page], reader, 25, 0.0) == 2.0
    assert reader.reads.free_s == 2.0
    assert pool.fetch([page], PoolLink(pool.spec), 25, 0.0, seven_seconds) == 8.0


@pytest.mark.parametrize("busy, share", [((3.0, 0.0, 0.0), 0.75), ((0.0, 3.0, 0.0), 0.75),
                                         ((0.0, 0.0, 3.0), 0.75)])
def test_pool_figures_count_bytes_and_the_busiest_direction(busy, share):
    """Two links; the second's busiest direction (reads, writes or serves: 3 s) over a run
    of 4 s is 0.75; bytes are summed over the links; the pool's capacity is 64 tokens."""
    pool = pool_of(2, capacity=64)
    pool.read_tokens, pool.write_tokens = 11, 13
    first, second = pool.links
    first.reads.bytes, second.reads.bytes = 100, 20
    first.writes.bytes, second.writes.bytes = 5, 6
    first.reads.busy_s = 1.0
    second.reads.busy_s, second.writes.busy_s, second.serves.busy_s = busy
    figures = PoolFigures.of(pool, pool.links, 4.0)
    assert figures == PoolFigures(64, pool.cache.counters, 11, 13, 120, 11, share)
    assert PoolFigures.of(pool, pool.links, 0.5).busiest_link_share == 6.0
    assert PoolFigures.of(pool, pool.links).busiest_link_share == 0.0  # untimed


def test_pool_figures_without_links_or_time_are_zero():
    pool = pool_of(0)
    assert PoolFigures.of(pool, (), 10.0).busiest_link_share == 0.0
    assert PoolFigures.of(pool).read_bytes == 0


@pytest.mark.parametrize("fields, message", [
    ({"write_bytes_s": 0}, "pool bandwidths must be > 0"),
    ({"latency_s": float("inf")}, "pool latency must be a finite number >= 0, got inf"),
    ({"lookup_s": float("inf")}, "pool lookup must be a finite number >= 0, got inf"),
    ({"replicas": 0}, "pool replicas must be >= 1, got 0"),
])
def test_a_pool_spec_refuses_what_cannot_be_a_link(fields, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        PoolSpec(**{"read_bytes_s": 100, "write_bytes_s": 100, **fields})


def test_a_transfer_across_two_directions_starts_when_both_are_free_and_counts_on_both():
    """200 B/s, latency 1 s: 100 bytes take 1.5 s and keep the far end busy as long; a
    second such transfer waits for both (done at 3 s). A direction named as its own far
    end counts once."""
    near, far = LinkDirection(200, 1.0), LinkDirection(200, 1.0)
    assert near.book(100, 0.0, other=far) == 1.5
    assert near.book(100, 0.0, other=far) == 3.0
    assert (far.free_s, far.busy_s, far.bytes) == (3.0, 3.0, 200)
    assert (near.busy_s, near.bytes) == (3.0, 200)
    near.book(100, 10.0, other=near)
    assert near.bytes == 300


def test_a_pool_link_is_replica_0s_by_default_and_serves_with_the_spec_latency():
    link = PoolLink(PoolSpec(100, 100, latency_s=2.0))
    assert link.index == 0 and link.serves.latency_s == 2.0


def test_a_fresh_pool_fetches_over_the_reader_alone():
    spec = PoolSpec(100, 100)
    pool = SharedPool(RadixCache(None, POLICIES.build("lru")), spec, lambda: 0.0)
    assert pool.fetch([Page(9, None, 4, 0.0, 0)], PoolLink(spec), 25, 0.0) == 1.0


Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


def lru_pool(pages: int, ttl_s: float | None = None) -> tuple[SharedPool, list[float]]:
    """An LRU pool of `pages` 4-token pages whose clock is the returned one-item list, over
    the cache the test runs on (`Cache`)."""
    from prefixsim.cache import TTLRule

    now = [0.0]
    cache = Cache(4 * pages, POLICIES.build("lru"), None if ttl_s is None else
                       TTLRule(ttl_s))
    return SharedPool(cache, PoolSpec(100, 100), lambda: now[0]), now


@pytest.mark.usefixtures("each_cache")
def test_pool_writes_and_reads_keep_lru_order_and_count_tokens():
    """Room for 2 pages: write 5 then 4; a read of 5 makes 4 the LRU page, so writing 3
    evicts 4. Writing 2 then evicts 5 (older than 3). Tokens add up over calls."""
    pool, now = lru_pool(2)
    assert pool.write([5], [4]) == 4 and pool.write([4], [4]) == 4
    now[0] = 1.0
    pool.read(pool.cache.match([5], 1.0).pages, 4, 1.0)
    pool.read(pool.cache.match([5], 1.0).pages, 4, 1.0)
    pool.write([3], [4])
    assert resident(pool.cache) == {5, 3}
    pool.write([2], [4])
    assert resident(pool.cache) == {3, 2}
    assert (pool.read_tokens, pool.write_tokens) == (8, 16)
    pool.cache.check_invariants()


@pytest.mark.usefixtures("each_cache")
def test_pool_writes_evict_older_pages_first_whatever_their_ids():
    """Room for 2 pages: 5, 4, then 3 evicts 5, the oldest (not 4, the lower id)."""
    pool, _ = lru_pool(2)
    for page_id in (5, 4, 3):
        pool.write([page_id], [4])
    assert resident(pool.cache) == {4, 3}


@pytest.mark.usefixtures("each_cache")
def test_a_write_keeps_the_chain_it_extends_and_says_what_it_added():
    """Room for 2 pages: 1 then 2 written; writing [1, 3] must evict, and takes 2, though
    1 is older: 3 is written onto 1. Writing [1, 3] again adds nothing: 0."""
    pool, _ = lru_pool(2)
    pool.write([1], [4])
    pool.write([2], [4])
    assert pool.write([1, 3], [4, 4]) == 4
    assert resident(pool.cache) == {1, 3} and len(pool.cache.match([1, 3], 0.0).pages) == 2
    assert pool.write([1, 3], [4, 4]) == 0
    pool.cache.check_invariants()


def test_pool_pages_are_held_by_their_writer_replica_0_by_default():
    pool, _ = lru_pool(4)
    pool.links = [PoolLink(pool.spec, i) for i in range(3)]
    pool.write([1], [4])
    pool.write_evicted(Page(2, None, 4, 0.0, 0), holder=2)
    pool.write_evicted(Page(3, None, 4, 0.0, 0))
    assert pool.holder == {1: 0, 2: 2, 3: 0}


@pytest.mark.usefixtures("each_cache")
def test_run_after_drops_expired_pages_first():
    """TTL 10: pages 1, 2 written at 0. At 5 the pool's run after 1 HBM page is [2]; at 20
    both have expired: nothing."""
    pool, now = lru_pool(4, ttl_s=10.0)
    pool.write([1, 2], [4, 4])
    assert [page_id for page_id, _ in page_sizes(pool.run_after([1, 2], 1, 5.0))] == [2]
    now[0] = 20.0
    assert pool.run_after([1, 2], 1, 20.0) == []


def test_a_pool_spec_takes_any_bandwidths_above_0():
    assert PoolSpec(0.5, 0.5).read_bytes_s == 0.5
    with pytest.raises(ValueError, match="^pool bandwidths must be > 0$"):
        PoolSpec(0, 100)


def test_a_pool_links_directions_share_the_spec_latency_and_a_write_is_booked():
    """Latency 2 s at 100 B/s: a write of 100 bytes keeps the write direction busy 3 s;
    a transfer rule is given the bytes and the bandwidth."""
    link = PoolLink(PoolSpec(100, 100, latency_s=2.0))
    assert link.reads.latency_s == link.writes.latency_s == 2.0
    link.write(100, 1.0)
    assert (link.writes.bytes, link.writes.free_s, link.writes.busy_s) == (100, 4.0, 3.0)
    asked: list[tuple[int, float]] = []
    link.read(50, 0.0, lambda num_bytes, bandwidth: asked.append((num_bytes, bandwidth)) or 1.0)
    assert asked == [(50, 100)]


def test_a_fetch_of_pages_no_one_holds_reads_the_readers_copy_in_one_part():
    """Pages 7 (4 tokens) and 8 (6) without a holder count as the reader's (replica 1);
    with 2 copies the next replica (2) could serve, but it is busier: replica 1 serves both
    pages in one part of 10 tokens x 25 bytes."""
    pool = pool_of(3)
    pool.links[2].serves.free_s = 9.0
    pages = [Page(7, None, 4, 0.0, 0), Page(8, None, 6, 0.0, 0)]
    pool.fetch(pages, pool.links[1], 25, 0.0)
    assert served_by(pool) == [1] and pool.links[1].serves.bytes == 250
