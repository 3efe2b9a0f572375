"""LRU: evict the least recently used leaf (by logical recency, cache-spec Part A)."""

from __future__ import annotations

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, StatelessPolicy


@POLICIES.register("lru")
class LRU(StatelessPolicy):
    """Least recently used first; recency is the replay position of the last access."""

    def key(self, page: Page) -> float:
        return page.recency
