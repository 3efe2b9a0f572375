"""Which cache class a cache-only replay runs on.

SegmentCache gives exactly RadixCache's Part A results, several times faster, in radix mode
with a node-uniform, page-keyed, run-keyed or page-state policy (with lower tiers, a shared
pool, request classes or a minimum cacheable prompt too), in a cache-only replay in
block mode with a policy under which parents outlast their children (lru, priority:
there block mode evicts the leaves radix mode does), and in block mode anywhere with a
policy that declares how a segment's pages go (every unlocked segment a victim, orphans
kept: tail first where its pages share their key, lru, priority, lfu, ttl; head first,
fifo); everything else runs on RadixCache. A
timed replica's cache comes from here too (pipeline/build.py; docs/architecture.md
"One prefix cache").
"""

from __future__ import annotations

from prefixsim.cache.policy import EvictionPolicy
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tree import CacheMode, RadixCache
from prefixsim.cache.ttl import TTLRule


def replay_cache(
    capacity_tokens: int | None,
    policy: EvictionPolicy,
    ttl: TTLRule | None = None,
    mode: CacheMode | str = CacheMode.RADIX,
    plain: bool = True,
    chained: bool = False,
    by_access: bool = False,
    whole_paths: bool = False,
) -> RadixCache | SegmentCache:
    """A fresh cache for a replay: a SegmentCache where `SegmentCache.supports` the policy
    and mode, else a RadixCache (`plain=False`: a RadixCache regardless). `chained`: the
    page ids are checked chained already (a SegmentCache then keeps no resident-id set:
    cache/segment_tree.py). `by_access`: a page-keyed policy's keys read from a page's last
    access, so it must be `access_keyed` (a timed replica's or a pool's cache, a cache-only
    belady over arrivals out of order: SegmentCache's constructor). `whole_paths`: every
    request touches its whole path from the root (a cache-only replay), which lets block
    mode run on segments for some policies (`SegmentCache.supports`)."""
    if plain and SegmentCache.supports(policy, mode, by_access, whole_paths):
        return SegmentCache(capacity_tokens, policy, ttl, chained=chained,
                            by_access=by_access, mode=mode, whole_paths=whole_paths)
    return RadixCache(capacity_tokens, policy, ttl, CacheMode(mode))
