"""`OrderedQueue` (cache/ordered_queue.py) pops exactly as one binary heap of the same entries
would, whatever order they come in; entries that come in order stay out of its heap."""

import heapq

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache.ordered_queue import OrderedQueue

# an operation: push a key (made distinct by a counter), pop, look at the head, or keep
# only the entries whose key is not divisible by the given number
OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(-20, 60)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("head"), st.none()),
    st.tuples(st.just("keep"), st.integers(2, 5)),
), max_size=120)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_pops_as_a_heap_does(ops):
    queue, heap = OrderedQueue(), []
    for serial, (op, value) in enumerate(ops):
        if op == "push":
            entry = (value, serial)
            queue.push(entry)
            heapq.heappush(heap, entry)
        elif op == "pop":
            if heap:
                assert queue.pop() == heapq.heappop(heap)
            else:
                with pytest.raises(IndexError):
                    queue.pop()
        elif op == "head":
            if heap:
                assert queue.head() == heap[0]
        else:
            queue.keep(lambda entry, d=value: entry[0] % d != 0)
            heap = [entry for entry in heap if entry[0] % value != 0]
            heapq.heapify(heap)
        assert len(queue) == len(heap) and bool(queue) == bool(heap)
        assert list(queue.run) == sorted(queue.run)  # the run stays sorted
    assert [queue.pop() for _ in range(len(heap))] == sorted(heap)


def test_entries_in_order_stay_out_of_the_heap():
    """Keys 5, 6, 7 come in order (the run), 4 goes in front of it, 6.5 falls inside it
    (the heap); pops give 4, 5, 6, 6.5, 7, the last two by comparing the two heads."""
    queue = OrderedQueue()
    for key in (5, 6, 7, 4, 6.5):
        queue.push((key,))
    assert list(queue.run) == [(4,), (5,), (6,), (7,)] and queue.heap == [(6.5,)]
    assert queue.head() == (4,)
    assert [queue.pop() for _ in range(5)] == [(4,), (5,), (6,), (6.5,), (7,)]
    assert not queue and len(queue) == 0
