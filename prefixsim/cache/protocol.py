"""`PrefixCache`: the calls a replay makes on its prefix cache, as a typing protocol.

`SegmentCache` (cache/segment_tree.py) is the one implementation; the engines, the pool,
the tiers and the prefix index are typed against this protocol, which is also what the test
suite's per-page reference must answer (tests check both against it). Kept out of the
compiled modules: a protocol is read by `isinstance` and type checkers only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from prefixsim.cache.cache_types import CacheCounters, MatchResult


@runtime_checkable
class PrefixCache(Protocol):
    """The calls a replay makes on its prefix cache, step by step (docs/cache-semantics.md
    Parts A and B): what the timed engine's replicas, the step-by-step cache-only loop, the
    lower tiers, the shared pool and the prefix index use. `SegmentCache` implements it
    (with a whole request's `access` besides, which the cache-only fast path calls); the
    test suite's per-page reference answers the same calls. A run of pages (what `match`
    gives in `pages`, what `insert` returns, what `touch` takes) is a sequence whose item i
    holds page i; `lock`, `relock`, `unlock` and `evict`'s `protect` take its last item."""

    capacity_tokens: int | None
    resident_tokens: int
    locked_tokens: int
    reserved_tokens: int
    counters: CacheCounters
    # told of each page evicted (not expired), after its removal (lower tiers, a pool)
    on_demote: Callable[[Any], None] | None

    @property
    def free_tokens(self) -> float: ...

    @property
    def evictable_tokens(self) -> int: ...

    def available_tokens(self) -> float: ...

    def match(self, page_ids: Sequence[int], now: float) -> MatchResult: ...

    def touch(self, pages: Sequence[Any], now: float, recency: int,
              ttl_s: float | None = None, priority: int = 0) -> None: ...

    def insert(self, parent: Any, page_ids: Sequence[int], page_tokens: Sequence[int],
               now: float, recency: int, ttl_s: float | None = None,
               priority: int = 0) -> Sequence[Any]: ...

    def lock(self, tip: Any) -> None: ...

    def relock(self, old: Any, tip: Any, now: float) -> None: ...

    def unlock(self, tip: Any, now: float) -> None: ...

    def reserve(self, num_tokens: int) -> None: ...

    def release(self, num_tokens: int) -> None: ...

    def evict(self, num_tokens: int, protect: Any = None) -> bool: ...

    def expire(self, now: float) -> int: ...

    def next_expiry_s(self) -> float: ...

    def pages(self) -> Iterable[Any]: ...

    def check_invariants(self) -> None: ...
