"""The prefix cache: radix tree, eviction policies and the TTL rule."""

from prefixsim.cache import belady as _belady  # noqa: F401  (each import registers a policy)
from prefixsim.cache import fifo as _fifo  # noqa: F401
from prefixsim.cache import gdsf as _gdsf  # noqa: F401
from prefixsim.cache import lfu as _lfu  # noqa: F401
from prefixsim.cache import lru as _lru  # noqa: F401
from prefixsim.cache import priority as _priority  # noqa: F401
from prefixsim.cache import s3fifo as _s3fifo  # noqa: F401
from prefixsim.cache import ttl_first as _ttl_first  # noqa: F401
from prefixsim.cache import workload_aware as _workload_aware  # noqa: F401
from prefixsim.cache.factory import replay_cache
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, EvictionPolicy, build_policy, check_policy_params
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tree import (
    CacheCounters,
    CacheMode,
    ChainConflict,
    MatchResult,
    RadixCache,
)
from prefixsim.cache.ttl import TTLMode, TTLRule

# either tree: what a replay, cache-only or timed, drives (docs/architecture.md "One prefix
# cache": the compressed one where the policy and mode allow)
PrefixCache = RadixCache | SegmentCache

__all__ = [
    "POLICIES",
    "CacheCounters",
    "CacheMode",
    "ChainConflict",
    "EvictionPolicy",
    "MatchResult",
    "Page",
    "PrefixCache",
    "RadixCache",
    "SegmentCache",
    "TTLMode",
    "TTLRule",
    "build_policy",
    "check_policy_params",
    "replay_cache",
]
