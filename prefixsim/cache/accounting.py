"""Token figures of the prefix cache (`SegmentCache`, and the test suite's per-page
reference): free and evictable tokens, derived from the counts each cache keeps
(docs/cache-semantics.md R10).

It owns only these derived figures. Each cache owns and updates `capacity_tokens`,
`resident_tokens`, `locked_tokens` and `reserved_tokens` (a cache-only replay takes no locks
or reservations and keeps the last two at 0), and its own page count.
"""

from __future__ import annotations

from prefixsim.cache.page import INFINITY


class TokenAccounting:
    """Mixin of a cache's free and evictable tokens (capacity in tokens, None = unbounded)."""

    __slots__ = ()

    capacity_tokens: int | None
    resident_tokens: int
    locked_tokens: int
    reserved_tokens: int

    @property
    def free_tokens(self) -> float:
        """Unused capacity (inf when unbounded)."""
        if self.capacity_tokens is None:
            return INFINITY
        return self.capacity_tokens - self.resident_tokens - self.reserved_tokens

    @property
    def evictable_tokens(self) -> int:
        """Tokens that eviction could free: every unlocked resident page (R10)."""
        return self.resident_tokens - self.locked_tokens
