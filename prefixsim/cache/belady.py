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

A cache-only replay runs it on SegmentCache (`page_keyed`): there a page's key is fixed by
the request that last touched it, so `request_keys(position)` gives that request's keys
up front, from the next use of every page use in replay order (8 bytes more a use; with
arrivals in replay order, the first use after (arrival, position) is the next position
naming the page). A trace whose arrivals go back in time, a timed replica's cache and a
shared pool's (whose recency is not the replay position) run on a SegmentCache built
`by_access`, which reads a page's key from its segment's last access and recency
(`access_keyed`, `access_key`) whenever a per-page cache would call `key`.
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
    page_keyed = True
    access_keyed = True

    def __init__(self) -> None:
        self._uses: _Uses | None = None

    def prepare(self, requests: Iterable[Request], time_scale: float = 1.0) -> None:
        """Learn every page's future uses from the trace in replay order; `time_scale` is
        the timed engine's (a request arrives at arrival_s x time_scale simulated seconds,
        the clock pages' last access is read on)."""
        self._uses = _Uses.of(requests, time_scale)
        if not self._uses.in_order:  # next uses in time are not the next positions
            self.page_keyed = False

    def request_keys(self, recency: int) -> list[float]:
        """The keys of the pages of the request at replay position `recency` once it touched
        them: minus the position of each page's next use, -inf for none."""
        if self._uses is None:
            raise RuntimeError("belady is offline: call prepare(requests) before the replay")
        starts = self._uses.request_starts
        return self._uses.next_keys[starts[recency]:starts[recency + 1]].tolist()

    def key(self, page: Page) -> float:
        return self.access_key(page.page_id, page.last_access_s, page.recency)

    def access_key(self, page_id: int, last_access_s: float, recency: int) -> float:
        """The key of page `page_id` last accessed at `last_access_s` by `recency` (what
        `key` reads of a page; a SegmentCache built `by_access` reads them of a segment)."""
        if self._uses is None:
            raise RuntimeError("belady is offline: call prepare(requests) before the replay")
        position = self._uses.next_use(page_id, last_access_s, recency)
        return -INFINITY if position is None else -position


class _Uses:
    """Every (page id, arrival time, replay position) use of the trace as flat arrays sorted
    by page id then position: 8 bytes per distinct page and 16 per use (a dict of lists of
    tuples took about 100 per use). A page's uses are a slice found by bisection. Also, in
    replay order, each use's key once its request touched the page (`next_keys`: minus the
    position of the next use of its id, -inf for none; 8 bytes a use), request i's uses
    being `request_starts[i]` to `request_starts[i + 1]`, and whether the arrivals are in
    replay order (`in_order`: only then are those keys the ones `next_use` gives)."""

    __slots__ = ("page_ids", "starts", "times", "positions", "next_keys", "request_starts",
                 "in_order")

    def __init__(self, page_ids: array, starts: array, times: array, positions: array,
                 next_keys: np.ndarray, request_starts: list[int], in_order: bool) -> None:
        self.page_ids, self.starts, self.times, self.positions = (page_ids, starts, times,
                                                                  positions)
        self.next_keys, self.request_starts, self.in_order = (next_keys, request_starts,
                                                              in_order)

    @classmethod
    def of(cls, requests: Iterable[Request], time_scale: float) -> _Uses:
        ids, counts, arrivals = array("q"), array("q"), array("d")
        for request in requests:
            ids.extend(request.page_ids)
            counts.append(len(request.page_ids))
            arrivals.append(request.arrival_s)
        id_array = np.frombuffer(ids, dtype=np.int64) if ids else np.zeros(0, np.int64)
        count_array = np.frombuffer(counts, dtype=np.int64) if counts else np.zeros(0, np.int64)
        arrival_array = np.frombuffer(arrivals, dtype=np.float64) if arrivals else np.zeros(0)
        position_array = np.repeat(np.arange(len(count_array), dtype=np.int64), count_array)
        time_array = np.repeat(arrival_array * time_scale, count_array)
        request_starts = np.concatenate(([0], np.cumsum(count_array))).tolist()
        order = np.argsort(id_array, kind="stable")  # positions stay ascending per page
        sorted_ids = id_array[order]
        sorted_positions = position_array[order]
        same = sorted_ids[1:] == sorted_ids[:-1]  # a use and the next of the same id
        starts = np.flatnonzero(np.concatenate(([True], ~same))) if len(sorted_ids) else \
            np.zeros(0, np.int64)
        unique = sorted_ids[starts]
        following = _following(sorted_ids, sorted_positions, same)  # next use's position
        next_use = np.empty_like(following)
        next_use[order] = following
        next_keys = _keys_of(next_use)
        in_order = bool(np.all(arrival_array[1:] >= arrival_array[:-1]))
        return cls(_array("q", unique), _array("q", np.append(starts, len(sorted_ids))),
                   _array("d", time_array[order]), _array("q", sorted_positions), next_keys,
                   request_starts, in_order)

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


def _following(ids: np.ndarray, positions: np.ndarray, same: np.ndarray) -> np.ndarray:
    """For each use (sorted by id, then position; `same`: whether a use and the next have one
    id), the position of the first use of its id by a later request, -1 for none. A request
    that names an id twice (ids not chained) makes uses of one position: none of them is
    the other's next use, as `_Uses.next_use` looks strictly after a position."""
    count = len(ids)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    # runs of uses of one id by one request; a run's next use is the next run's position
    new_run = np.concatenate(([True], ~(same & (positions[1:] == positions[:-1]))))
    run_starts = np.flatnonzero(new_run)
    run_next = np.full(len(run_starts), -1, dtype=np.int64)
    run_next[:-1] = np.where(ids[run_starts[1:]] == ids[run_starts[:-1]],
                             positions[run_starts[1:]], -1)
    return np.repeat(run_next, np.diff(np.append(run_starts, count)))


def _keys_of(next_uses: np.ndarray) -> np.ndarray:
    """Belady's keys of page uses from their next uses' positions: minus the position, -inf
    for none (-1)."""
    return np.where(next_uses < 0, -INFINITY, -np.asarray(next_uses, dtype=np.float64))


def _array(typecode: str, values: np.ndarray) -> array:
    return array(typecode, values.astype(np.float64 if typecode == "d" else np.int64).tobytes())


class StreamedBelady(Belady):
    """Belady over a streamed trace, with the same keys: the replay calls `begin(next_uses)`
    before each request, with the replay position of the next use of each of its pages in
    page order (analysis/next_uses.py; -1: none), and the policy keeps the one a resident
    page had at its last access (a page's depth is its index in the request naming it).
    That is the position `_Uses.next_use` finds from the page's last access in a cache-only
    replay, where the last access is the request's (arrival, position) and the trace is in
    arrival order. Memory: one number per resident page. The streamed pipeline tells it a
    chunk's next uses at once (`begin_chunk`): a replay by chunk then reads `request_keys`,
    a step-by-step one (request classes, tiers, a pool) calls `begin_request(i)` for each. Not
    registered: the streamed pipeline builds it for `belady`."""

    access_keyed = False  # its keys come from `begin`, not from a page's last access

    def __init__(self) -> None:
        super().__init__()
        self._next: dict[int, int] = {}
        self._current: Sequence[int] = ()
        self._chunk_first = 0  # replay position of the chunk's first request
        self._chunk_uses: np.ndarray = np.zeros(0, dtype=np.int64)
        self._chunk_keys: np.ndarray = np.zeros(0)
        self._chunk_offsets: Sequence[int] = (0,)

    def prepare(self, requests: Iterable[Request], time_scale: float = 1.0) -> None:
        return None  # the uses come a request at a time (`begin`)

    def begin(self, next_uses: Sequence[int]) -> None:
        """The next uses of the pages of the request replayed now, first page first."""
        self._current = next_uses

    def begin_chunk(self, first: int, next_uses: np.ndarray, offsets: Sequence[int]) -> None:
        """The next uses of a chunk's pages: request `first + i`'s are
        `next_uses[offsets[i]:offsets[i + 1]]`, first page first."""
        self._chunk_first = first
        self._chunk_uses = next_uses
        self._chunk_keys = _keys_of(next_uses)
        self._chunk_offsets = offsets

    def begin_request(self, i: int) -> None:
        """`begin` with the next uses of the told chunk's request `i` (a replay that takes
        requests one by one: request classes, tiers, a pool)."""
        offsets = self._chunk_offsets
        self._current = self._chunk_uses[offsets[i]:offsets[i + 1]].tolist()

    def request_keys(self, recency: int) -> list[float]:
        i = recency - self._chunk_first
        offsets = self._chunk_offsets
        return self._chunk_keys[offsets[i]:offsets[i + 1]].tolist()

    def key(self, page: Page) -> float:
        position = self._next[page.page_id]
        return -INFINITY if position < 0 else -position

    def on_access(self, page: Page) -> None:
        self._next[page.page_id] = self._current[page.depth]

    def on_insert(self, page: Page) -> None:
        self._next[page.page_id] = self._current[page.depth]

    def on_evict(self, page: Page) -> None:
        self._next.pop(page.page_id, None)
