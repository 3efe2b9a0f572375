"""The prefix cache: the segment tree, eviction policies and the TTL rule."""

from prefixsim.cache import belady as _belady  # noqa: F401  (each import registers a policy)
from prefixsim.cache import fifo as _fifo  # noqa: F401
from prefixsim.cache import gdsf as _gdsf  # noqa: F401
from prefixsim.cache import lfu as _lfu  # noqa: F401
from prefixsim.cache import lru as _lru  # noqa: F401
from prefixsim.cache import priority as _priority  # noqa: F401
from prefixsim.cache import s3fifo as _s3fifo  # noqa: F401
from prefixsim.cache import ttl_first as _ttl_first  # noqa: F401
from prefixsim.cache import workload_aware as _workload_aware  # noqa: F401
from prefixsim.cache.cache_types import CacheCounters, CacheMode, ChainConflict, MatchResult
from prefixsim.cache.factory import UnsupportedPolicy, replay_cache
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, EvictionPolicy, build_policy, check_policy_params
from prefixsim.cache.protocol import PrefixCache
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.ttl import TTLMode, TTLRule

__all__ = [
    "POLICIES",
    "CacheCounters",
    "CacheMode",
    "ChainConflict",
    "EvictionPolicy",
    "MatchResult",
    "Page",
    "PrefixCache",
    "SegmentCache",
    "TTLMode",
    "TTLRule",
    "UnsupportedPolicy",
    "build_policy",
    "check_policy_params",
    "replay_cache",
]
