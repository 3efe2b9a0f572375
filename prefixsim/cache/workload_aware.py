"""Workload-aware eviction (after Alibaba's "KVCache in the Wild", ATC'25).

Each page belongs to a category and a position bucket. The category is the first page of
its prefix (a proxy for the application or system prompt, available in every hash-id
trace); the bucket is the page's depth on a log2 scale (0, 1, 2-3, 4-7, ..., >= 16), so
heads of prompts and their tails are learned apart. Online, per (category, bucket), the
policy counts inserted pages and pages hit at least once; the reuse probability is
(reused + 1) / (inserted + 2). A page's key is GreedyDual-aged: L + reuse probability, so
pages of rarely reused categories and tail positions go first, and idle pages age out. Equal
keys fall back to the tree's order (older, then deeper first: the tail before the head).
"""

from __future__ import annotations

from prefixsim.cache.aging import GreedyDualPolicy
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES

NUM_BUCKETS = 6


def position_bucket(depth: int) -> int:
    """0 for the first page, then log2 buckets capped at NUM_BUCKETS - 1."""
    return min(depth.bit_length(), NUM_BUCKETS - 1)


@POLICIES.register("workload_aware")
class WorkloadAware(GreedyDualPolicy):
    """Key = L + P(reuse | category, position bucket), learned online.

    `run_keyed`: a page's key is set when a request touches it, so a SegmentCache keeps
    each page's and asks `run_keys` for a run of them (their category is the prompt's
    first page id, as `on_insert` derives it page by page from the parent)."""

    run_keyed = True

    def __init__(self) -> None:
        super().__init__()
        self._category: dict[int, int] = {}
        self._inserted: dict[tuple[int, int], int] = {}
        self._reused: dict[tuple[int, int], int] = {}

    def _class_of(self, page: Page) -> tuple[int, int]:
        return self._category[page.page_id], position_bucket(page.depth)

    def reuse_probability(self, page: Page) -> float:
        cls = self._class_of(page)
        return (self._reused.get(cls, 0) + 1) / (self._inserted.get(cls, 0) + 2)

    def value(self, page: Page) -> float:
        return self.reuse_probability(page)

    def _touched(self, category: int, depth: int, num_hits: int) -> float:
        """Count a page of `category` at `depth` as inserted (`num_hits` 0) or first reused
        (1), and return its priority L + P(reuse) after the count."""
        cls = (category, position_bucket(depth))
        inserted = self._inserted
        reused = self._reused
        if num_hits == 0:
            inserted[cls] = inserted.get(cls, 0) + 1
        elif num_hits == 1:
            reused[cls] = reused.get(cls, 0) + 1
        return self.clock + (reused.get(cls, 0) + 1) / (inserted.get(cls, 0) + 2)

    def run_keys(self, category: int, depth: int, count: int,
                 num_hits: int) -> tuple[float, ...]:
        return tuple([self._touched(category, d, num_hits)
                      for d in range(depth, depth + count)])

    def on_insert(self, page: Page) -> None:
        parent = page.parent
        root = page.page_id if parent is None else self._category.get(parent.page_id)
        category = page.page_id if root is None else root
        self._category[page.page_id] = category
        self._priority[page.page_id] = self._touched(category, page.depth, 0)

    def on_access(self, page: Page) -> None:
        self._priority[page.page_id] = self._touched(self._category[page.page_id],
                                                     page.depth, page.num_hits)

    def forget(self, page: Page) -> None:
        self._category.pop(page.page_id, None)
