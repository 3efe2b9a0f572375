"""Reference hit rates a policy is read against: the unbounded cache and offline Belady.

`cache_unbounded_token_hit_rate`: the same trace, TTL and request rules with no capacity
limit (no policy can do better at any capacity). `cache_belady_token_hit_rate` (on request,
as it costs one more replay): the offline `belady` policy at the same capacity. Lower tiers
are left out of both: they describe the HBM cache alone. In a timed run the bound is taken
over the requests a replica accepts (`accepted`): one it rejects on arrival, longer than its
KV pool or the model's context, never reaches a cache, and the run's hit rate leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice

import numpy as np

from prefixsim.analysis.seen_pages import unbounded_hit_tokens, unbounded_hit_tokens_columns
from prefixsim.cache import PrefixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.engine import replay_cache_only
from prefixsim.metrics.facts import Bounds
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns

CacheFactory = Callable[[str, bool], PrefixCache]
"""(policy name, unbounded) -> a fresh cache with the run's other settings, at the run's
capacity or (unbounded=True) without a capacity limit."""


def accepted(requests: Sequence[Request] | RequestColumns, limit: int | None
             ) -> Sequence[Request] | RequestColumns:
    """`requests` less those a replica rejects on arrival: prompt plus output (at least one
    token) over `limit`, the longest it accepts (engine/replica.py `submit`); all of them
    (the same object) when `limit` is None or every one fits."""
    if limit is None:
        return requests
    if isinstance(requests, RequestColumns):
        fits = requests.input_tokens + np.maximum(requests.output_tokens, 1) <= limit
        return requests if fits.all() else requests.take(np.flatnonzero(fits))
    if all(r.input_tokens + max(1, r.output_tokens) <= limit for r in requests):
        return requests
    return [r for r in requests if r.input_tokens + max(1, r.output_tokens) <= limit]


def replay_hit_rate(
    requests: Iterable[Request], cache: PrefixCache, rules: CacheRules | None = None
) -> float:
    """Token hit rate of one cache-only replay through `cache`."""
    records = replay_cache_only(requests, cache, rules=rules).records
    query = sum(r.input_tokens for r in records)
    return sum(r.cached_tokens for r in records) / query if query else 0.0


def unbounded_hit_rate(
    requests: Iterable[Request], cache: PrefixCache, rules: CacheRules | None = None,
    chunk_size: int = 50_000,
) -> float:
    """Token hit rate of `cache` (unbounded). Without a TTL or request rules nothing ever
    leaves it, so a request hits exactly its leading pages whose ids were seen before (ids
    are chained): analysis/seen_pages.py answers that chunk by chunk with 8 bytes per
    distinct page. Otherwise a replay."""
    if cache.capacity_tokens is not None or cache.ttl is not None or rules is not None:
        return replay_hit_rate(requests, cache, rules)
    if isinstance(requests, RequestColumns):
        hits, query = unbounded_hit_tokens_columns(requests, chunk_size)
    else:
        hits, query = unbounded_hit_tokens(batched(requests, chunk_size))
    return hits / query if query else 0.0


def batched(requests: Iterable[Request], size: int) -> Iterator[list[Request]]:
    """Lists of up to `size` requests, in order."""
    iterator = iter(requests)
    while chunk := list(islice(iterator, size)):
        yield chunk


def reference_bounds(
    requests: Sequence[Request],
    hit_rate: float,
    with_belady: bool,
    unbounded: bool,
    make_cache: CacheFactory,
    rules: CacheRules | None = None,
) -> Bounds:
    """The bounds for a run whose HBM hit rate was `hit_rate` (`unbounded`: it had no
    capacity limit, so it is its own bound)."""
    rate = hit_rate if unbounded else unbounded_hit_rate(requests, make_cache("lru", True), rules)
    belady = (replay_hit_rate(requests, make_cache("belady", False), rules)
              if with_belady else None)
    return Bounds(rate, belady)
