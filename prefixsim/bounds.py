"""Reference hit rates a policy is read against: the unbounded cache and offline Belady.

`cache_unbounded_token_hit_rate`: the same trace and TTL rule with no capacity limit (no
policy can do better at any capacity). `cache_belady_token_hit_rate` (on request, as it costs
one more replay): the offline `belady` policy at the same capacity and TTL. Tiers are not
included in either (they describe the HBM cache alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.cache import RadixCache, TTLRule, build_policy
from prefixsim.config import CacheConfig
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request


def replay_hit_rate(
    requests: Sequence[Request], config: CacheConfig, policy: str, capacity_tokens: int | None
) -> float:
    """Token hit rate of one cache-only replay with `policy` at `capacity_tokens`."""
    ttl = None if config.ttl_s is None else TTLRule(config.ttl_s, config.ttl_mode)
    cache = RadixCache(capacity_tokens, build_policy(policy, requests), ttl, config.mode)
    records = replay_cache_only(requests, cache).records
    query = sum(r.input_tokens for r in records)
    return sum(r.cached_tokens for r in records) / query if query else 0.0


def bounds_summary(
    requests: Sequence[Request], config: CacheConfig, hit_rate: float
) -> dict[str, float]:
    """The bounds for a run whose (HBM-only) hit rate was `hit_rate`."""
    if config.capacity_tokens is None and config.host_capacity_tokens is None:
        unbounded = hit_rate
    else:
        unbounded = replay_hit_rate(requests, config, "lru", None)
    summary = {"cache_unbounded_token_hit_rate": unbounded}
    if config.bounds:
        summary["cache_belady_token_hit_rate"] = replay_hit_rate(
            requests, config, "belady", config.capacity_tokens
        )
    return summary
