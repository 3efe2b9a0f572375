"""Engines that replay requests through caches: the cache-only replay (cache_only.py, and
cache_only_fast.py over a SegmentCache) and the timed simpy engine (timed.py: replicas,
scheduler, request state). They emit frozen records; no pandas (metrics/ makes frames)."""

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
