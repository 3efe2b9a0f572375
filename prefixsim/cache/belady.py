"""Belady (offline MIN): evict the leaf whose next use in the trace is farthest away.

The upper bound every online policy is read against (`cache_belady_token_hit_rate`). It
needs the whole trace before the replay: `prepare(requests)` records, for each page id, the
(arrival time, replay position) of the requests that name it, in flat arrays (16 bytes per
page use; see `_Uses`). A page's next use is the first
such use after (its last access time, its recency); pages never used again go first. The key
stays valid while queued because it only changes when the page is accessed (re-queued).
In the cache-only replay the last access is exactly (arrival, position); in timed mode the
engine's recency is an event counter, so at equal times the order is approximate, and a
request that arrived earlier but is served later is not seen as a future use. With variable
page sizes and leaf-only eviction it is the classic heuristic, not a proven optimum.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

import numpy as np

from prefixsim.cache.page import INFINITY, Page
from prefixsim.cache.policy import POLICIES, Policy
from prefixsim.trace import Request


@POLICIES.register("belady")
class Belady(Policy):
    """Key = -(position of next use); never used again = -inf (evicted first)."""

    offline = True

    def __init__(self) -> None:
        self._uses: _Uses | None = None

    def prepare(self, requests: Iterable[Request], time_scale: float = 1.0) -> None:
        """Learn every page's future uses from the trace in replay order; `time_scale` is
        the timed engine's (a request arrives at arrival_s x time_scale simulated seconds,
        the clock pages' last access is read on)."""
        self._uses = _Uses.of(requests, time_scale)

    def key(self, page: Page) -> float:
        if self._uses is None:
            raise RuntimeError("belady is offline: call prepare(requests) before the replay")
        position = self._uses.next_use(page.page_id, page.last_access_s, page.recency)
        return -INFINITY if position is None else -position


class _Uses:
    """Every (page id, arrival time, replay position) use of the trace as flat arrays sorted
    by page id then position: 8 bytes per distinct page and 16 per use (a dict of lists of
    tuples took about 100 per use). A page's uses are a slice found by bisection."""

    __slots__ = ("page_ids", "starts", "times", "positions")

    def __init__(self, page_ids: array, starts: array, times: array, positions: array) -> None:
        self.page_ids, self.starts, self.times, self.positions = (page_ids, starts, times,
                                                                  positions)

    @classmethod
    def of(cls, requests: Iterable[Request], time_scale: float) -> _Uses:
        ids, times, positions = array("q"), array("d"), array("q")
        for position, request in enumerate(requests):
            count = len(request.page_ids)
            ids.extend(request.page_ids)
            times.extend([request.arrival_s * time_scale] * count)
            positions.extend([position] * count)
        id_array = np.frombuffer(ids, dtype=np.int64) if ids else np.zeros(0, np.int64)
        order = np.argsort(id_array, kind="stable")  # positions stay ascending per page
        sorted_ids = id_array[order]
        unique, starts = np.unique(sorted_ids, return_index=True)
        return cls(_array("q", unique), _array("q", np.append(starts, len(sorted_ids))),
                   _array("d", np.frombuffer(times, dtype=np.float64)[order]
                          if times else np.zeros(0)),
                   _array("q", np.frombuffer(positions, dtype=np.int64)[order]
                          if positions else np.zeros(0, np.int64)))

    def next_use(self, page_id: int, last_access_s: float, recency: int) -> int | None:
        """The position of the first use after (last_access_s, recency), or None."""
        ids = self.page_ids
        slot = bisect_left(ids, page_id)
        if slot == len(ids) or ids[slot] != page_id:
            return None
        lo, hi = self.starts[slot], self.starts[slot + 1]
        times = self.times
        first = bisect_left(times, last_access_s, lo, hi)  # uses at that time: by position
        if first == hi:
            return None
        if times[first] > last_access_s:  # no use at exactly that time
            return self.positions[first]
        same_end = bisect_right(times, last_access_s, first, hi)
        index = bisect_right(self.positions, recency, first, same_end)
        return self.positions[index] if index < hi else None


def _array(typecode: str, values: np.ndarray) -> array:
    return array(typecode, values.astype(np.float64 if typecode == "d" else np.int64).tobytes())


class StreamedBelady(Belady):
    """Belady over a streamed trace, with the same keys: the replay calls `begin(next_uses)`
    before each request, with the replay position of the next use of each of its pages in
    page order (analysis/next_uses.py; -1: none), and the policy keeps the one a resident
    page had at its last access (a page's depth is its index in the request naming it).
    That is the position `_Uses.next_use` finds from the page's last access in a cache-only
    replay, where the last access is the request's (arrival, position) and the trace is in
    arrival order. Memory: one number per resident page. Not registered: the streamed
    pipeline builds it for `belady`."""

    def __init__(self) -> None:
        super().__init__()
        self._next: dict[int, int] = {}
        self._current: Sequence[int] = ()

    def prepare(self, requests: Iterable[Request], time_scale: float = 1.0) -> None:
        return None  # the uses come a request at a time (`begin`)

    def begin(self, next_uses: Sequence[int]) -> None:
        """The next uses of the pages of the request replayed now, first page first."""
        self._current = next_uses

    def key(self, page: Page) -> float:
        position = self._next[page.page_id]
        return -INFINITY if position < 0 else -position

    def on_access(self, page: Page) -> None:
        self._next[page.page_id] = self._current[page.depth]

    def on_insert(self, page: Page) -> None:
        self._next[page.page_id] = self._current[page.depth]

    def on_evict(self, page: Page) -> None:
        self._next.pop(page.page_id, None)
