"""Belady (offline MIN): evict the leaf whose next use in the trace is farthest away.

The upper bound every online policy is read against (`cache_belady_token_hit_rate`). It
needs the whole trace before the replay: `prepare(requests)` records, for each page id, the
(arrival time, replay position) of the requests that name it. A page's next use is the first
such use after (its last access time, its recency); pages never used again go first. The key
stays valid while queued because it only changes when the page is accessed (re-queued).
In the cache-only replay the last access is exactly (arrival, position); in timed mode the
engine's recency is an event counter, so at equal times the order is approximate, and a
request that arrived earlier but is served later is not seen as a future use. With variable
page sizes and leaf-only eviction it is the classic heuristic, not a proven optimum.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from prefixsim.cache.page import INFINITY, Page
from prefixsim.cache.policy import POLICIES, Policy
from prefixsim.trace import Request


@POLICIES.register("belady")
class Belady(Policy):
    """Key = -(position of next use); never used again = -inf (evicted first)."""

    offline = True

    def __init__(self) -> None:
        self._uses: dict[int, list[tuple[float, int]]] | None = None

    def prepare(self, requests: Sequence[Request], time_scale: float = 1.0) -> None:
        """Learn every page's future uses from the trace in replay order; `time_scale` is
        the timed engine's (a request arrives at arrival_s x time_scale simulated seconds,
        the clock pages' last access is read on)."""
        uses: dict[int, list[tuple[float, int]]] = {}
        for position, request in enumerate(requests):
            use = (request.arrival_s * time_scale, position)
            for page_id in request.page_ids:
                uses.setdefault(page_id, []).append(use)
        self._uses = uses

    def key(self, page: Page) -> float:
        if self._uses is None:
            raise RuntimeError("belady is offline: call prepare(requests) before the replay")
        uses = self._uses.get(page.page_id, ())
        index = bisect_right(uses, (page.last_access_s, page.recency))
        return -uses[index][1] if index < len(uses) else -INFINITY
