"""FIFO (docs/cache-semantics.md, policies): the key is the insertion order the cache
numbers its pages with (`Page.inserted`): first inserted, first evicted; hits do not move a
page; a page evicted and inserted again comes last. The policy keeps no state."""

import pytest
from radix_reference import RadixCache

from prefixsim.cache import POLICIES
from prefixsim.cache.fifo import FIFO
from prefixsim.cache.page import Page


def test_the_key_is_the_insertion_order_the_page_carries():
    fifo = FIFO()
    pages = [Page(page_id, None, 4, 0.0, 0, inserted=order)
             for page_id, order in ((30, 0), (10, 1), (20, 2))]
    assert [fifo.key(p) for p in pages] == [0, 1, 2]
    assert not vars(fifo)  # no bookkeeping of its own


def test_the_cache_numbers_pages_as_it_inserts_them_and_evicts_the_first():
    """Capacity 12 tokens, 4 per page. A = pages 1, 2 (orders 0, 1); B = page 3 (order 2).
    A hit on A's pages does not move them (LRU would now evict B's page 3): of the leaves 2
    (order 1) and 3 (order 2), page 2 goes. Page 4 gets order 3; the next eviction takes
    page 1 (a leaf now, order 0). Page 1 inserted again gets order 4, so the next eviction
    takes page 3 (order 2), then page 4 (order 3)."""
    cache = RadixCache(12, POLICIES.build("fifo"))  # pages numbered: the reference's
    a = cache.insert(None, [1, 2], [4, 4], 0.0, 0)
    b = cache.insert(None, [3], [4], 1.0, 1)
    assert [p.inserted for p in a + b] == [0, 1, 2]
    cache.touch(cache.match([1, 2], 2.0).pages, 2.0, 2)
    assert [p.inserted for p in a] == [0, 1]
    resident = []
    for page_id in (4, 1):
        assert cache.evict(4)
        resident.append(sorted(p.page_id for p in cache.pages()))
        [page] = cache.insert(None, [page_id], [4], 3.0, 3)
        assert page.inserted == {4: 3, 1: 4}[page_id]
    for free in (4, 8):  # 4 tokens free: page 3 goes; 8: page 4 too
        assert cache.evict(free)
        resident.append(sorted(p.page_id for p in cache.pages()))
    assert resident == [[1, 3], [3, 4], [1, 4], [1]]


Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


@pytest.mark.usefixtures("each_cache")
def test_each_cache_evicts_in_insertion_order_whatever_the_hits():
    """The known answer above through the calls both caches answer (no page numbers read):
    the same pages resident after each eviction, on the segments too (where a hit on A
    splits nothing and moves no page)."""
    cache = Cache(12, POLICIES.build("fifo"))
    cache.insert(None, [1, 2], [4, 4], 0.0, 0)
    cache.insert(None, [3], [4], 1.0, 1)
    cache.touch(cache.match([1, 2], 2.0).pages, 2.0, 2)
    resident = []
    for page_id in (4, 1):
        assert cache.evict(4)
        resident.append(sorted(p.page_id for p in cache.pages()))
        cache.insert(None, [page_id], [4], 3.0, 3)
        cache.check_invariants()
    for free in (4, 8):
        assert cache.evict(free)
        resident.append(sorted(p.page_id for p in cache.pages()))
    assert resident == [[1, 3], [3, 4], [1, 4], [1]]
