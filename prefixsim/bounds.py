"""Reference hit rates a policy is read against: the unbounded cache and offline Belady.

`cache_unbounded_token_hit_rate`: the same trace, TTL and request rules with no capacity
limit (no policy can do better at any capacity). `cache_belady_token_hit_rate` (on request,
as it costs one more replay): the offline `belady` policy at the same capacity. Lower tiers
are left out of both: they describe the HBM cache alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prefixsim.cache import RadixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request

CacheFactory = Callable[[str, bool], RadixCache]
"""(policy name, unbounded) -> a fresh cache with the run's other settings, at the run's
capacity or (unbounded=True) without a capacity limit."""


def replay_hit_rate(
    requests: Sequence[Request], cache: RadixCache, rules: CacheRules | None = None
) -> float:
    """Token hit rate of one cache-only replay through `cache`."""
    records = replay_cache_only(requests, cache, rules=rules).records
    query = sum(r.input_tokens for r in records)
    return sum(r.cached_tokens for r in records) / query if query else 0.0


def bounds_summary(
    requests: Sequence[Request],
    hit_rate: float,
    with_belady: bool,
    unbounded: bool,
    make_cache: CacheFactory,
    rules: CacheRules | None = None,
) -> dict[str, float]:
    """The bounds for a run whose HBM hit rate was `hit_rate` (`unbounded`: it had no
    capacity limit, so it is its own bound)."""
    rate = hit_rate if unbounded else replay_hit_rate(requests, make_cache("lru", True), rules)
    summary = {"cache_unbounded_token_hit_rate": rate}
    if with_belady:
        summary["cache_belady_token_hit_rate"] = replay_hit_rate(
            requests, make_cache("belady", False), rules
        )
    return summary
