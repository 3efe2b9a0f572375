"""The prefix cache a replay runs on, cache-only or timed: a `SegmentCache`.

Every registered policy declares how a segment's pages go (docs/architecture.md "One
prefix cache", "Eviction policies"), so one cache serves every policy in both modes: in
radix mode a node-uniform, page-keyed, run-keyed or page-state policy; in block mode one
that declares `shared_key` (tail first), `head_first`, per-page keys or states, a
GreedyDual policy's `run_valued`, or, in a cache-only replay (every request touches its
whole path), `parents_outlast_children`. A policy that declares none of these is refused
here with the flags it could declare: its per-page hooks alone describe what the test
suite's per-page reference does with it, not how the segment cache would.
"""

from __future__ import annotations

from prefixsim.cache.cache_types import CacheMode
from prefixsim.cache.policy import EvictionPolicy
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.ttl import TTLRule


class UnsupportedPolicy(ValueError):
    """A policy that declares no way for the segment cache to evict its pages."""


def replay_cache(
    capacity_tokens: int | None,
    policy: EvictionPolicy,
    ttl: TTLRule | None = None,
    mode: CacheMode | str = CacheMode.RADIX,
    chained: bool = False,
    by_access: bool = False,
    whole_paths: bool = False,
) -> SegmentCache:
    """A fresh cache for a replay. `chained`: the page ids are checked chained already (the
    cache then keeps no resident-id set: cache/segment_tree.py). `by_access`: a page-keyed
    policy's keys read from a page's last access, so it must be `access_keyed` (a timed
    replica's or a pool's cache, a cache-only belady over arrivals out of order:
    SegmentCache's constructor). `whole_paths`: every request touches its whole path from
    the root (a cache-only replay), which lets block mode take the leaves radix mode takes
    under a policy whose parents outlast their children. Raises UnsupportedPolicy where
    `SegmentCache.supports` refuses the policy in this mode."""
    if not SegmentCache.supports(policy, mode, by_access, whole_paths):
        raise UnsupportedPolicy(
            f"policy {getattr(policy, 'name', type(policy).__name__)!r} cannot run in "
            f"{CacheMode(mode).value} mode: its class declares none of node_uniform, "
            "page_keyed/access_keyed, run_keyed, page_states (radix mode) or shared_key, "
            "head_first, run_valued, parents_outlast_children (block mode); "
            "docs/architecture.md \"Eviction policies\"")
    return SegmentCache(capacity_tokens, policy, ttl, chained=chained, by_access=by_access,
                        mode=mode, whole_paths=whole_paths)
