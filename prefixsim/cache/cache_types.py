"""The prefix cache's shared vocabulary: its mode, its counters, a match's result and the
error for ids that are not chained (the calls a replay makes on it: cache/protocol.py).

The cache itself is `SegmentCache` (cache/segment_tree.py; docs/architecture.md "One prefix
cache"); these types are what its callers (the engines, the pool, the samplers, the
prefix index) and the test suite's per-page reference read. Nothing here acts on pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from prefixsim.cache.idle_ages import AgeHistogram


class CacheMode(StrEnum):
    """Which pages may be evicted: leaves only (radix, SGLang) or any unlocked page (block)."""

    RADIX = "radix"
    BLOCK = "block"


class ChainConflict(ValueError):
    """A page id already names a resident page under a different parent (ids not chained)."""


@dataclass(frozen=True, slots=True)
class MatchResult:
    """The longest resident, alive prefix of a page-id chain, first page first (a
    SegmentCache's `SegmentRun`: its pages by position)."""

    pages: Sequence[Any]

    @property
    def last(self) -> Any:
        return self.pages[-1] if self.pages else None

    @property
    def num_pages(self) -> int:
        return len(self.pages)


@dataclass
class CacheCounters:
    """Cumulative counts of what the cache did (tokens as charged against capacity), and
    the idle ages of pages at hits, evictions and expiries (cache/idle_ages.py).

    Compiled (cache_types.pxd), an extension type with 64-bit integer counts, which the
    typed cache adds to in C."""

    evicted_pages: int = 0
    evicted_tokens: int = 0
    expired_pages: int = 0
    expired_tokens: int = 0
    inserted_pages: int = 0
    inserted_tokens: int = 0
    peak_tokens: int = 0
    hit_ages: AgeHistogram = field(default_factory=AgeHistogram)
    evicted_ages: AgeHistogram = field(default_factory=AgeHistogram)
    expired_ages: AgeHistogram = field(default_factory=AgeHistogram)
