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
        live = queue.run[queue.first:]
        assert live == sorted(live)  # the run stays sorted
        assert all(entry is None for entry in queue.run[:queue.first])  # consumed: let go
    assert [queue.pop() for _ in range(len(heap))] == sorted(heap)


def test_entries_in_order_stay_out_of_the_heap():
    """Keys 5, 6, 7 come in order (the run); 5 is popped, and 4, before the run, takes the
    place it freed; 6.5 falls inside the run (the heap); pops give 4, 6, 6.5, 7, the last
    two by comparing the two heads. With no freed place in front (nothing popped yet) an
    entry before the run goes to the heap; an emptied run starts again at the next push."""
    queue = OrderedQueue()
    for key in (5, 6, 7):
        queue.push((key,))
    assert queue.pop() == (5,)
    for key in (4, 6.5):
        queue.push((key,))
    assert queue.run[queue.first:] == [(4,), (6,), (7,)] and queue.heap == [(6.5,)]
    assert queue.head() == (4,) and queue.run_first() == (4,)
    assert [queue.pop() for _ in range(4)] == [(4,), (6,), (6.5,), (7,)]
    assert not queue and len(queue) == 0 and queue.run_first() is None
    queue.push((9,))
    queue.push((8,))  # nothing popped from this run: the heap
    assert queue.run == [(9,)] and queue.heap == [(8,)]
    assert [queue.pop(), queue.pop()] == [(8,), (9,)]


def test_the_consumed_front_is_dropped():
    """3,000 entries in order, popped one by one: once 1,500 are consumed (at least 1,024,
    and half the list) the front goes, and the pops go on in order."""
    queue = OrderedQueue()
    for key in range(3000):
        queue.push((key,))
    popped = [queue.pop() for _ in range(1499)]
    assert len(queue.run) == 3000 and queue.first == 1499
    popped.append(queue.pop())
    assert len(queue.run) == 1500 and queue.first == 0 and queue.run[0] == (1500,)
    popped += [queue.pop() for _ in range(1500)]
    assert popped == [(key,) for key in range(3000)] and not queue


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), max_size=40), st.floats(-6, 6))
def test_first_below_is_the_least_entrys_first_item_below(pushes, bound):
    """`first_below(bound)` answers as `head()[0] < bound` (False when empty), whichever of
    the run and the heap holds the least entry."""
    queue = OrderedQueue()
    for serial, (key, pop) in enumerate(pushes):
        queue.push((key, serial))
        if pop:
            queue.pop()
        assert queue.first_below(bound) == (bool(queue) and queue.head()[0] < bound)


NUMBERS = st.one_of(st.integers(-2**62, 2**62), st.floats(),
                    st.sampled_from([0, 0.0, -0.0, 1, 1.0, 2**53, 2.0**53, 2**53 + 1, True]),
                    st.builds(lambda: float("nan")))  # a NaN object of its own each time


@settings(max_examples=500, deadline=None)
@given(NUMBERS, NUMBERS, NUMBERS, NUMBERS)
def test_entries_compare_as_tuples(a0, a1, b0, b1):
    """The queue's comparison (`_less`; compiled, leading floats and ints compared in C) is
    Python's tuple order, for ints and floats mixed, equal across types, NaN and infinities,
    ints a double cannot hold: of two entries pushed, the pop takes the first if it is
    below the second (`a < b`), else the second."""
    a, b = (a0, a1, 0), (b0, b1, 1)
    queue = OrderedQueue()
    queue.push(a)
    queue.push(b)
    assert queue.pop() is (a if a < b else b)
    assert queue.pop() is (b if a < b else a)


def test_head_and_pop_with_only_the_heap_left():
    """By hand: 1 and 5 arrive in order (the run), 3 between them (the heap); keeping only 3
    empties the run, and the head and the pop are the heap's."""
    queue = OrderedQueue()
    for key in (1, 5, 3):
        queue.push((key, 0))
    assert queue.heap == [(3, 0)]
    queue.keep(lambda entry: entry[0] == 3)
    assert queue.run_first() is None and queue.head() == (3, 0) and queue.pop() == (3, 0)
    assert not queue


def test_order_tells_apart_two_floats_or_two_ints_only():
    """`_order`'s answers by hand (the interpreted function: compiled, it is a C function the
    module does not export, and the test above checks the order it gives)."""
    from prefixsim.cache import ordered_queue

    order = getattr(ordered_queue, "_order", None)
    if order is None:
        pytest.skip("compiled: _order is a C function")
    nan = float("nan")
    assert [order(1.0, 2.5), order(2.5, 1.0), order(-0.0, 0.0), order(nan, nan),
            order(nan, 1.0)] == [-1, 1, 0, 2, 2]
    assert [order(1, 2), order(2**62, -2**62), order(7, 7)] == [-1, 1, 0]
    assert [order(1, 1.0), order(2.0, 1), order(True, 0), order("a", "b")] == [2, 2, 2, 2]
