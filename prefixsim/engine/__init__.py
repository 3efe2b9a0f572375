"""Engines that replay requests through caches: cache-only now, timed (simpy) later."""

from prefixsim.engine.cache_only import (
    CacheOnlyResult,
    ProgressCallback,
    hit_tokens,
    replay_cache_only,
)
from prefixsim.engine.records import CacheOnlyRecord

__all__ = [
    "CacheOnlyRecord",
    "CacheOnlyResult",
    "ProgressCallback",
    "hit_tokens",
    "replay_cache_only",
]
