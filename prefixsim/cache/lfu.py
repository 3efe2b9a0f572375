"""LFU with dynamic aging (LFU-DA): fewest hits first, aged by the GreedyDual clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixsim.cache.aging import GreedyDualPolicy
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES

if TYPE_CHECKING:
    from prefixsim.cache.segment_tree import Segment


@POLICIES.register("lfu")
class LFU(GreedyDualPolicy):
    """Key = L + (hits + 1): frequency counts, but a page hit long ago is overtaken by
    pages hit since (L rises to the key of each leaver), so old popularity fades.

    The pages of a compressed cache segment share their hits and their priority, which the
    segment keeps (cache/segment_tree.py), so cache-only replays run there."""

    node_uniform = True
    shared_key = True  # block mode on segments, tail first (cache/segment_tree.py)

    def value(self, page: Page) -> float:
        return float(page.num_hits + 1)

    def segment_value(self, segment: Segment) -> float:
        return float(segment.num_hits + 1)
