"""The prefix cache: radix tree, eviction policies and the TTL rule."""

from prefixsim.cache import lru as _lru  # noqa: F401  (registers "lru")
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, EvictionPolicy
from prefixsim.cache.tree import CacheCounters, ChainConflict, MatchResult, RadixCache
from prefixsim.cache.ttl import TTLMode, TTLRule

__all__ = [
    "POLICIES",
    "CacheCounters",
    "ChainConflict",
    "EvictionPolicy",
    "MatchResult",
    "Page",
    "RadixCache",
    "TTLMode",
    "TTLRule",
]
