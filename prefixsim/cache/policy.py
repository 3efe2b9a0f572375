"""The eviction-policy interface and its registry.

A policy only *orders* victims: `key(page)` returns a sortable value, lowest evicted first,
computed when a page becomes an evictable leaf or is accessed while it is one. The tree
breaks ties by older access, then deeper page, then page id (cache-spec R11), and owns all
structure, locks, TTL and accounting. Stateful policies use the hooks; none may mutate pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from prefixsim.cache.page import Page
from prefixsim.registry import Registry
from prefixsim.trace import Request


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


def build_policy(
    name: str,
    requests: Sequence[Request] | None = None,
    prefill_time_s: Callable[[int, int], float] | None = None,
    time_scale: float = 1.0,
) -> EvictionPolicy:
    """Build policy `name`; an offline one (it has `prepare(requests)`, e.g. belady) is
    given the whole trace in replay order first, so it must be passed `requests`.

    Optional extras a policy may define, found by the tree with getattr:
      prepare(requests, time_scale)  offline policies: learn the future from the trace
                          (arrivals at arrival_s x time_scale, the timed engine's clock)
      reconsider(page)    second chance: True re-queues a popped victim under its new key
      on_expire(page)     called instead of on_evict when a page leaves by TTL expiry
      bind_cache(cache)   called by the RadixCache built over the policy (s3fifo: learns
                          the capacity, calls `cache.requeue(page)` when a key changes)
      bind_prefill_time(f)  cost-aware policies (gdsf): price recomputation with
                            `prefill_time_s(new_tokens, cached_tokens)` from the run's
                            cost model, when it is given
      node_uniform = True   a class attribute: `key` reads only statistics shared by all
                            pages of a segment (recency, last access, deadline, hits,
                            priority) and the hooks are stateless, so the cache-only
                            replay may run on SegmentCache (cache/segment_tree.py)
    """
    policy = POLICIES.build(name)
    bind = getattr(policy, "bind_prefill_time", None)
    if bind is not None and prefill_time_s is not None:
        bind(prefill_time_s)
    prepare = getattr(policy, "prepare", None)
    if prepare is not None:
        if requests is None:
            raise ValueError(f"eviction policy {name!r} is offline: it needs the trace")
        prepare(requests, time_scale)
    return policy
