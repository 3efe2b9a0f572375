"""Priority: lowest request priority class first, LRU within a class (docs/cache-semantics.md R16).

A page's priority is the highest priority of any request that touched it (the tree keeps
it); the tree's tie order (older access first) makes each class LRU inside.
"""

from __future__ import annotations

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy


@POLICIES.register("priority")
class Priority(Policy):
    """Key = page priority (higher stays); ties by recency."""

    # The key reads only statistics every page of a segment shares, and the hooks are
    # stateless: the cache-only replay may use the compressed tree (cache/segment_tree.py).
    node_uniform = True
    parents_outlast_children = True  # block mode as radix in a cache-only replay
    shared_key = True  # block mode on segments, tail first (cache/segment_tree.py)

    def key(self, page: Page) -> float:
        return float(page.priority)
