"""Workload characterisation of a trace (what `prefixsim trace inspect` prints).

Counts, length statistics, arrival rate, page reuse and the hit rate an unbounded cache
and TTL-only caches would reach (cache-only replay, docs/cache-semantics.md Part A). Plots live
elsewhere. A trace read whole is kept by column (trace/columns.py): its figures are taken from
the columns and its replays go through the compressed cache chunk-wise, building no Request
(the figures are those of the same requests one by one: a test compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from prefixsim.cache import POLICIES, TTLRule, replay_cache
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine import replay_cache_only
from prefixsim.engine.cache_only_fast import replay_segment_chunks
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.trace import Request
from prefixsim.trace.chains import requests_chained
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.pages import distinct_ids

INSPECT_TTLS_S: tuple[tuple[str, float], ...] = (
    ("10s", 10.0),
    ("1min", 60.0),
    ("5min", 300.0),
    ("1h", 3600.0),
)


def _stats(values: np.ndarray, counts: bool = False) -> dict[str, float | int]:
    """Mean, median, p90, p99, min and max; the min and max of `counts` (token counts) are
    integers, so `trace inspect` prints `min=7`, not `min=7.0000`."""
    whole = int if counts else float
    return {
        "mean": float(values.mean()),
        "median": float(np.median(values)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "min": whole(values.min()),
        "max": whole(values.max()),
    }


def token_hit_rate(requests: Sequence[Request], ttl_s: float | None = None) -> float:
    """Token hit rate of an unbounded LRU cache (optionally with a sliding TTL)."""
    ttl = None if ttl_s is None else TTLRule(ttl_s)
    cache = replay_cache(None, POLICIES.build("lru"), ttl, chained=requests_chained(requests))
    if isinstance(requests, RequestColumns) and isinstance(cache, SegmentCache):
        hits = [0]

        def tally(_chunk: RequestColumns, cached: np.ndarray) -> None:
            hits[0] += int(cached.sum())

        with paused_gc():  # the replay makes no cycles (engine/gc_pause.py)
            replay_segment_chunks([requests], cache, tally)
        query = int(requests.input_tokens.sum())
        return hits[0] / query if query else 0.0
    with paused_gc():
        result = replay_cache_only(requests, cache)
    query = sum(r.input_tokens for r in result.records)
    return sum(r.cached_tokens for r in result.records) / query if query else 0.0


def _figures(requests: Sequence[Request]) -> dict[str, object]:
    """Arrays and counts of `requests`: from the columns when it is kept by column."""
    if isinstance(requests, RequestColumns):
        start, end = int(requests.page_start[0]), int(requests.page_start[-1])
        sessions = (set() if requests.sessions is None
                    else set(requests.sessions.to_pylist()) - {None})
        return {"arrivals": np.asarray(requests.arrival_s, dtype=float),
                "inputs": np.asarray(requests.input_tokens, dtype=float),
                "outputs": np.asarray(requests.output_tokens, dtype=float),
                "pages": end - start,
                "distinct": len(distinct_ids(requests.page_ids[start:end])),
                "sessions": len(sessions)}
    return {"arrivals": np.array([r.arrival_s for r in requests]),
            "inputs": np.array([r.input_tokens for r in requests], dtype=float),
            "outputs": np.array([r.output_tokens for r in requests], dtype=float),
            "pages": sum(r.num_pages for r in requests),
            "distinct": len({pid for r in requests for pid in r.page_ids}),
            "sessions": len({r.session_id for r in requests if r.session_id is not None})}


def characterize(requests: Sequence[Request],
                 on_replay: Callable[[], None] | None = None) -> dict[str, object]:
    """A flat-ish dict describing the trace; `requests` is the request count.
    `on_replay()` is called after each of its hit-rate replays (1 + len(INSPECT_TTLS_S)):
    they are most of its time on a large trace."""

    def hit_rate(ttl_s: float | None) -> float:
        rate = token_hit_rate(requests, ttl_s)
        if on_replay is not None:
            on_replay()
        return rate

    figures = _figures(requests)
    arrivals, inputs, outputs = figures["arrivals"], figures["inputs"], figures["outputs"]
    span_s = float(arrivals.max() - arrivals.min()) if len(requests) else 0.0
    return {
        "requests": len(requests),
        "sessions": figures["sessions"] or None,
        "time_span_s": span_s,
        "arrival_rate_per_s": len(requests) / span_s if span_s > 0 else None,
        "page_size_tokens": requests[0].page_size_tokens if requests else None,
        "input_tokens": _stats(inputs, counts=True),
        "output_tokens": _stats(outputs, counts=True),
        "total_input_tokens": int(inputs.sum()),
        "total_output_tokens": int(outputs.sum()),
        "pages": figures["pages"],
        "distinct_pages": figures["distinct"],
        "unbounded_token_hit_rate": hit_rate(None),
        "ttl_token_hit_rate": {name: hit_rate(ttl) for name, ttl in INSPECT_TTLS_S},
    }
