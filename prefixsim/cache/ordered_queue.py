"""A priority queue of distinct, comparable entries that often arrive in order: the caches'
victim and deadline queues.

A victim entry is a tuple whose order is the victim order (docs/cache-semantics.md Part A
rule 3: the policy's key, then recency, depth and page id), with the version of the node it
was made for and the node; a deadline entry is (deadline, a sequence number, node). The
caches drop entries that went stale when they pop them. `OrderedQueue` gives the least entry
of all those pushed and not yet popped, exactly as one binary heap of them would (entries
are distinct), but keeps entries that arrive in order apart: a push after the last entry of
the sorted run is appended to it (LRU's refreshed and new leaves mostly are, their key being
the request's position; so are a sliding TTL's deadlines, now + TTL), one before its first
entry takes the place the last pop freed in front of it, when there is one (a leaf re-queued
after losing its tail pages stays the least), and any other goes to the heap. A pop compares
the two heads (`_less`: as tuples, the leading numbers compared in C when compiled). An LRU
or TTL replay then does one or two comparisons per entry instead of a heap's path of them;
entries in no order pay one comparison more per push and pop. The run is a list consumed
from a head index (`first`), which the compiled module reads and writes without a method
call (a deque's `popleft` and `appendleft` are Python method calls); its consumed front is
dropped once it is half the list.

It owns the order of entries; it leaves out what they mean (staleness, protection), which
the caches (cache/tree.py, cache/segment_tree.py) decide as they pop.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush


class OrderedQueue:
    """Entries in order: a sorted run (`run[first:]`, a list) and a heap of the rest
    (`heap`)."""

    __slots__ = ("run", "first", "heap")

    def __init__(self) -> None:
        self.run: list[tuple | None] = []
        self.first = 0  # run[:first] are consumed (None)
        self.heap: list[tuple] = []

    def __len__(self) -> int:
        return len(self.run) - self.first + len(self.heap)

    def __bool__(self) -> bool:
        return self.first < len(self.run) or len(self.heap) > 0

    def push(self, entry: tuple) -> None:
        run = self.run
        first = self.first
        if first == len(run) or _less(run[-1], entry):
            run.append(entry)
        elif first > 0 and _less(entry, run[first]):
            first -= 1
            run[first] = entry
            self.first = first
        else:
            heappush(self.heap, entry)

    def pop(self) -> tuple:
        """The least entry, taken out (IndexError when empty)."""
        run = self.run
        heap = self.heap
        first = self.first
        if first < len(run) and (not heap or _less(run[first], heap[0])):
            entry = run[first]
            run[first] = None
            first += 1
            if first == len(run):
                run.clear()
                first = 0
            elif first >= _DROP_AFTER and 2 * first >= len(run):
                del run[:first]
                first = 0
            self.first = first
            return entry
        return heappop(heap)

    def head(self) -> tuple:
        """The least entry, left in (IndexError when empty)."""
        run = self.run
        heap = self.heap
        first = self.first
        if first < len(run) and (not heap or _less(run[first], heap[0])):
            return run[first]
        return heap[0]

    def first_below(self, bound: float) -> bool:
        """Whether the least entry's first item (a number) is below `bound` (False when
        empty): the least entry has the least first item of the two heads, so no entries
        are compared."""
        run = self.run
        first = self.first
        if first < len(run):
            head = run[first]
            if head[0] < bound:
                return True
        heap = self.heap
        if heap:
            head = heap[0]
            return head[0] < bound
        return False

    def run_first(self) -> tuple | None:
        """The sorted run's least entry (None when the run is empty)."""
        return self.run[self.first] if self.first < len(self.run) else None

    def keep(self, wanted: Callable[[tuple], bool]) -> None:
        """Drop every entry for which `wanted` is false (the run stays sorted)."""
        self.run = [entry for entry in self.run[self.first:] if wanted(entry)]
        self.first = 0
        self.heap = list(filter(wanted, self.heap))
        heapify(self.heap)


def _less(a: tuple, b: tuple) -> bool:
    """`a < b` for two entries, as tuples compare: by their first items, then their second
    (numbers), then the rest. Compiled (ordered_queue.pxd), two floats or two ints among the
    first two items are compared in C (`_order`), without a Python comparison."""
    order = _order(a[0], b[0])
    if order == 0:
        order = _order(a[1], b[1])
    if order == -1:
        return True
    if order == 1:
        return False
    return a < b  # equal so far, or not told apart by `_order`


def _order(x: object, y: object) -> int:
    """Where both are floats or both are ints: -1 if x < y, 1 if x > y, 0 if equal; else 2
    (NaN, or of other or mixed types: the caller compares as Python does). Compiled, floats
    are read as C doubles and ints as C long longs (the entries' numbers, in range)."""
    if type(x) is float and type(y) is float:
        u = x
        v = y
        return -1 if u < v else 1 if v < u else 0 if u == v else 2
    if type(x) is int and type(y) is int:
        i = x
        j = y
        return -1 if i < j else 1 if j < i else 0
    return 2


_DROP_AFTER = 1024  # the run's consumed front is dropped once this long and half the list
