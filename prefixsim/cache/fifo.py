"""FIFO: evict the leaf that was inserted first; hits do not change the order."""

from __future__ import annotations

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy


@POLICIES.register("fifo")
class FIFO(Policy):
    """First in, first out by insertion order (a re-inserted page starts at the back).

    The order is a statistic the cache keeps (`Page.inserted`, numbered by the cache as it
    inserts pages), so the policy holds no state, and on the compressed cache of cache-only
    replays (cache/segment_tree.py) a segment's key is its last page's order: its leaf
    page's, as on the per-page tree."""

    node_uniform = True
    head_first = True  # block mode on segments, head first (cache/segment_tree.py)
    key_field = "inserted"  # what `key` returns

    def key(self, page: Page) -> float:
        return page.inserted
