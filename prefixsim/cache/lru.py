"""LRU: evict the least recently used leaf (by logical recency, docs/cache-semantics.md Part A)."""

from __future__ import annotations

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy


@POLICIES.register("lru")
class LRU(Policy):
    """Least recently used first; recency is the replay position of the last access."""

    # The key reads only statistics every page of a segment shares, and the hooks are
    # stateless: the cache-only replay may use the compressed tree (cache/segment_tree.py).
    node_uniform = True
    parents_outlast_children = True  # block mode as radix in a cache-only replay
    shared_key = True  # block mode on segments, tail first (cache/segment_tree.py)
    key_field = "recency"  # what `key` returns

    def key(self, page: Page) -> float:
        return page.recency
