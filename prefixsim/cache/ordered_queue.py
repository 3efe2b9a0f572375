"""A priority queue of distinct, comparable entries that often arrive in order: the caches'
victim and deadline queues.

A victim entry is a tuple whose order is the victim order (docs/cache-semantics.md Part A
rule 3: the policy's key, then recency, depth and page id), with the version of the node it
was made for and the node; a deadline entry is (deadline, a sequence number, node). The
caches drop entries that went stale when they pop them. `OrderedQueue` gives the least
entry of all those pushed and not yet popped, exactly as one binary heap of them would
(entries are distinct), but keeps entries that arrive in order apart: a push after the last
entry of the sorted run is appended to it (LRU's refreshed and new leaves mostly are, their
key being the request's position; so are a sliding TTL's deadlines, now + TTL), one before
its first entry goes in front (a leaf re-queued after losing its tail pages stays the
least), and any other goes to the heap. A pop compares the two heads. An LRU or TTL replay
then does one or two comparisons per entry instead of a heap's path of them; entries in no
order pay one comparison more per push and pop.

It owns the order of entries; it leaves out what they mean (staleness, protection), which
the caches (cache/tree.py, cache/segment_tree.py) decide as they pop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heapify, heappop, heappush


class OrderedQueue:
    """Entries in order: a sorted run (`run`, a deque) and a heap of the rest (`heap`)."""

    __slots__ = ("run", "heap")

    def __init__(self) -> None:
        self.run: deque[tuple] = deque()
        self.heap: list[tuple] = []

    def __len__(self) -> int:
        return len(self.run) + len(self.heap)

    def __bool__(self) -> bool:
        return bool(self.run) or bool(self.heap)

    def push(self, entry: tuple) -> None:
        run = self.run
        if not run or entry > run[-1]:
            run.append(entry)
        elif entry < run[0]:
            run.appendleft(entry)
        else:
            heappush(self.heap, entry)

    def pop(self) -> tuple:
        """The least entry, taken out (IndexError when empty)."""
        run, heap = self.run, self.heap
        if run and (not heap or run[0] < heap[0]):
            return run.popleft()
        return heappop(heap)

    def head(self) -> tuple:
        """The least entry, left in (IndexError when empty)."""
        run, heap = self.run, self.heap
        if run and (not heap or run[0] < heap[0]):
            return run[0]
        return heap[0]

    def keep(self, wanted: Callable[[tuple], bool]) -> None:
        """Drop every entry for which `wanted` is false (the run stays sorted)."""
        self.run = deque(filter(wanted, self.run))
        self.heap = list(filter(wanted, self.heap))
        heapify(self.heap)
