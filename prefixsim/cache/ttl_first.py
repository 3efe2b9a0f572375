"""Earliest deadline first: evict the page whose TTL runs out soonest (docs/cache-semantics.md R11).

Deadlines come from the cache's TTL rule (per-request TTL classes included); without a TTL
every deadline is infinite and the tree's tie order makes this LRU.
"""

from __future__ import annotations

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy


@POLICIES.register("ttl")
class EarliestDeadlineFirst(Policy):
    """Key = TTL deadline (simulated seconds); the soonest to expire goes first."""

    # The key reads only statistics every page of a segment shares, and the hooks are
    # stateless: the cache-only replay may use the compressed tree (cache/segment_tree.py).
    node_uniform = True
    shared_key = True  # block mode on segments, tail first (cache/segment_tree.py)
    key_field = "deadline_s"  # what `key` returns

    def key(self, page: Page) -> float:
        return page.deadline_s
