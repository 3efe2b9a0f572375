"""GreedyDual aging shared by value-based policies (LFU-DA, GDSF, workload-aware).

A victim key is frozen into the tree's heap when a page is queued, so a key may not drift
with time on its own. The GreedyDual formulation avoids that: each page's priority is
`H = L + value(page)`, fixed when the page is inserted or hit, where `L` (the inflation
clock) is raised to the `H` of each page that leaves the cache. Pages that stop being hit
keep their old, lower `H` and are overtaken by pages refreshed later: that is the aging.
Subclasses only define `value`. Expired pages (TTL) leave through `on_expire` and do not
raise `L`: they are not victims the policy chose, and their priority may be high.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixsim.cache.page import Page
from prefixsim.cache.policy import Policy

if TYPE_CHECKING:
    from prefixsim.cache.segment_tree import Segment


class GreedyDualPolicy(Policy):
    """Key = L + value(page), set at insert and at every hit; L = H of the last leaver."""

    def __init__(self) -> None:
        self.clock = 0.0
        self._priority: dict[int, float] = {}

    def value(self, page: Page) -> float:
        """What keeping `page` is worth (higher stays longer); read-only on `page`."""
        raise NotImplementedError

    def segment_value(self, segment: Segment) -> float:
        """`value` of the last page of a compressed cache's segment (cache/segment_tree.py),
        for a policy that declares `node_uniform`: a segment's pages share their hits, and the
        value must not fall with depth along a segment."""
        raise NotImplementedError

    def key(self, page: Page) -> float:
        priority = self._priority.get(page.page_id)
        if priority is None:
            priority = self._priority[page.page_id] = self.clock + self.value(page)
        return priority

    def on_insert(self, page: Page) -> None:
        self._priority[page.page_id] = self.clock + self.value(page)

    def on_access(self, page: Page) -> None:
        self._priority[page.page_id] = self.clock + self.value(page)

    def on_evict(self, page: Page) -> None:
        priority = self._priority.pop(page.page_id, None)
        if priority is not None and priority > self.clock:
            self.clock = priority
        self.forget(page)

    def on_expire(self, page: Page) -> None:
        self._priority.pop(page.page_id, None)
        self.forget(page)

    def forget(self, page: Page) -> None:
        """Drop any per-page state of a subclass (page left by eviction or expiry)."""
        return None
