"""The eviction-policy interface and its registry.

A policy only *orders* victims: `key(page)` returns a sortable value, lowest evicted first,
computed when a page becomes an evictable leaf or is accessed while it is one. The tree
breaks ties by older access, then deeper page, then page id (cache-spec R11), and owns all
structure, locks, TTL and accounting. Stateful policies use the hooks; none may mutate pages.
"""

from __future__ import annotations

from typing import Protocol

from prefixsim.cache.page import Page
from prefixsim.registry import Registry


class EvictionPolicy(Protocol):
    """Victim order over evictable pages (unlocked leaves)."""

    def key(self, page: Page) -> float:
        """Sort key of `page` as a victim; lower goes first. Read-only on `page`."""
        ...

    def on_insert(self, page: Page) -> None:
        """Called after `page` becomes resident."""
        ...

    def on_access(self, page: Page) -> None:
        """Called after a hit refreshed `page` (its stats are already updated)."""
        ...

    def on_evict(self, page: Page) -> None:
        """Called after `page` left the cache by eviction or expiry."""
        ...


class StatelessPolicy:
    """Hooks that do nothing, for policies whose key reads only page fields."""

    def on_insert(self, page: Page) -> None:
        return None

    def on_access(self, page: Page) -> None:
        return None

    def on_evict(self, page: Page) -> None:
        return None


POLICIES: Registry[EvictionPolicy] = Registry("eviction policy")
