"""FIFO's bookkeeping (docs/cache-semantics.md, policies): insertion order is the key, an
evicted page's entry is dropped (memory stays bounded by the resident pages), and evicting
a page FIFO never saw is a no-op."""

from prefixsim.cache.fifo import FIFO
from prefixsim.cache.page import Page


def test_order_is_insertion_and_evicted_pages_are_forgotten():
    fifo = FIFO()
    pages = [Page(page_id, None, 4, 0.0, 0) for page_id in (30, 10, 20)]
    for page in pages:
        fifo.on_insert(page)
    assert [fifo.key(p) for p in pages] == [0, 1, 2]
    fifo.on_evict(pages[1])
    assert fifo._order == {30: 0, 20: 2}
    fifo.on_insert(pages[1])  # re-inserted: at the back
    assert fifo.key(pages[1]) == 3


def test_evicting_an_unknown_page_is_a_no_op():
    fifo = FIFO()
    fifo.on_evict(Page(99, None, 4, 0.0, 0))
    assert fifo._order == {}
