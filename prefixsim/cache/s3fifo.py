"""S3-FIFO (Yang et al., SOSP'23) over the evictable leaves, with the tree's second chance.

Pages enter a small FIFO S, or the main FIFO M when their id is in the ghost list G (ids
recently dropped from S). Hits only bump a 2-bit frequency. When the tree pops a victim it
asks `reconsider`: an S page that was hit moves to M (back of the queue, frequency reset);
an M page that was hit loses one frequency and goes to the back of M; a page never hit is
evicted (an S page leaves its id in G, which holds as many ids as there are resident pages).

Simplification, documented: S and M share one insertion clock, so the victim is the oldest
entry of either queue rather than S-first while S exceeds 10% of the cache. The quick
demotion of one-hit pages and the ghost-based admission to M are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import count

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES

MAX_FREQUENCY = 3


@POLICIES.register("s3fifo")
class S3FIFO:
    """Small/main FIFO queues with a ghost list; see the module docstring."""

    def __init__(self) -> None:
        self._clock = count()
        self._position: dict[int, int] = {}
        self._frequency: dict[int, int] = {}
        self._main: set[int] = set()
        self._ghost: OrderedDict[int, None] = OrderedDict()

    def key(self, page: Page) -> float:
        return self._position[page.page_id]

    def on_insert(self, page: Page) -> None:
        page_id = page.page_id
        self._position[page_id] = next(self._clock)
        self._frequency[page_id] = 0
        if page_id in self._ghost:
            del self._ghost[page_id]
            self._main.add(page_id)

    def on_access(self, page: Page) -> None:
        page_id = page.page_id
        self._frequency[page_id] = min(self._frequency[page_id] + 1, MAX_FREQUENCY)

    def reconsider(self, page: Page) -> bool:
        """Whether the popped victim gets a second chance (re-queued at the back)."""
        page_id = page.page_id
        frequency = self._frequency[page_id]
        if frequency == 0:
            return False
        if page_id in self._main:
            self._frequency[page_id] = frequency - 1
        else:
            self._main.add(page_id)
            self._frequency[page_id] = 0
        self._position[page_id] = next(self._clock)
        return True

    def on_evict(self, page: Page) -> None:
        page_id = page.page_id
        self._position.pop(page_id, None)
        self._frequency.pop(page_id, None)
        if page_id in self._main:
            self._main.discard(page_id)
            return
        self._ghost[page_id] = None
        while len(self._ghost) > max(len(self._position), 1):
            self._ghost.popitem(last=False)
