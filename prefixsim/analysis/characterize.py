"""Workload characterisation of a trace (what `prefixsim trace inspect` prints).

Counts, length statistics, arrival rate, page reuse and the hit rate an unbounded cache
and TTL-only caches would reach (cache-only replay, docs/cache-semantics.md Part A). Plots live
elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from prefixsim.cache import POLICIES, TTLRule, replay_cache
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request

INSPECT_TTLS_S: tuple[tuple[str, float], ...] = (
    ("10s", 10.0),
    ("1min", 60.0),
    ("5min", 300.0),
    ("1h", 3600.0),
)


def _stats(values: np.ndarray) -> dict[str, float]:
    return {
        "mean": float(values.mean()),
        "median": float(np.median(values)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def token_hit_rate(requests: Sequence[Request], ttl_s: float | None = None) -> float:
    """Token hit rate of an unbounded LRU cache (optionally with a sliding TTL)."""
    ttl = None if ttl_s is None else TTLRule(ttl_s)
    result = replay_cache_only(requests, replay_cache(None, POLICIES.build("lru"), ttl))
    query = sum(r.input_tokens for r in result.records)
    return sum(r.cached_tokens for r in result.records) / query if query else 0.0


def characterize(requests: Sequence[Request]) -> dict[str, object]:
    """A flat-ish dict describing the trace; `requests` is the request count."""
    arrivals = np.array([r.arrival_s for r in requests])
    inputs = np.array([r.input_tokens for r in requests], dtype=float)
    outputs = np.array([r.output_tokens for r in requests], dtype=float)
    span_s = float(arrivals.max() - arrivals.min()) if len(requests) else 0.0
    num_pages = sum(r.num_pages for r in requests)
    distinct = len({pid for r in requests for pid in r.page_ids})
    sessions = {r.session_id for r in requests if r.session_id is not None}
    return {
        "requests": len(requests),
        "sessions": len(sessions) or None,
        "time_span_s": span_s,
        "arrival_rate_per_s": len(requests) / span_s if span_s > 0 else None,
        "page_size_tokens": requests[0].page_size_tokens if requests else None,
        "input_tokens": _stats(inputs),
        "output_tokens": _stats(outputs),
        "total_input_tokens": int(inputs.sum()),
        "total_output_tokens": int(outputs.sum()),
        "pages": num_pages,
        "distinct_pages": distinct,
        "unbounded_token_hit_rate": token_hit_rate(requests),
        "ttl_token_hit_rate": {name: token_hit_rate(requests, ttl) for name, ttl in INSPECT_TTLS_S},
    }
