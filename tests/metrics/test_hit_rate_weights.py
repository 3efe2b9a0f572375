"""Token- and request-weighted hit rates, the trace's span and footprint, and the pages'
idle ages in a run's summary, each against an answer worked by hand or a replay."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.config import load_config
from prefixsim.engine import replay_cache_only
from prefixsim.metrics.requests import request_weighted_hit_rate
from prefixsim.pipeline import simulate
from prefixsim.trace import Request
from prefixsim.trace.pages import distinct_prefix_tokens


def test_request_weighted_differs_from_token_weighted():
    """Two requests: 1,000 tokens with 900 cached and 10 tokens with none. Token-weighted:
    900 / 1,010 = 0.891; request-weighted: (0.9 + 0) / 2 = 0.45. A 0-token prompt counts
    as 0."""
    frame = pd.DataFrame({"input_tokens": [1000, 10], "cached_tokens": [900, 0]})
    assert request_weighted_hit_rate(frame) == pytest.approx(0.45)
    frame = pd.DataFrame({"input_tokens": [0, 10], "cached_tokens": [0, 5]})
    assert request_weighted_hit_rate(frame) == pytest.approx(0.25)
    assert request_weighted_hit_rate(frame.iloc[:0]) == 0.0


def test_distinct_prefix_tokens_known_answer():
    """Pages of 4 tokens. r0 [1,2,3] with 10 tokens: full 1, 2 and a last page 3 of 2.
    r1 [1,2,3,5] with 15 tokens: 3 is now full (4), 5 holds 3. r2 [1,6] with 5: 6 holds 1.
    Distinct: 1, 2, 3 full (12) + 5 (3) + 6 (1) = 16."""
    requests = [Request(0, 0.0, 10, 1, (1, 2, 3), 4), Request(1, 1.0, 15, 1, (1, 2, 3, 5), 4),
                Request(2, 2.0, 5, 1, (1, 6), 4)]
    assert distinct_prefix_tokens(requests) == 16
    assert distinct_prefix_tokens([]) == 0


@st.composite
def chained_traces(draw):
    """Prompts that extend earlier prompts' prefixes (full pages of 4), so ids are chained
    and each id always holds the same tokens."""
    prompts: list[tuple[int, ...]] = []
    requests = []
    next_id = 1
    for i in range(draw(st.integers(1, 12))):
        base = prompts[draw(st.integers(0, len(prompts) - 1))] if prompts else ()
        keep = draw(st.integers(0, len(base)))
        ids = base[:keep] + tuple(range(next_id, next_id + draw(st.integers(0 if keep else 1, 4))))
        next_id += len(ids) - keep
        prompts.append(ids)
        requests.append(Request(i, float(i), 4 * len(ids), 1, ids, 4))
    return requests


@settings(max_examples=150, deadline=None)
@given(chained_traces())
def test_distinct_prefix_tokens_is_what_an_unbounded_cache_inserts(requests):
    """Differential: an unbounded, TTL-less replay inserts each distinct page exactly once."""
    cache = SegmentCache(None, POLICIES.build("lru"))
    replay_cache_only(requests, cache)
    assert distinct_prefix_tokens(requests) == cache.counters.inserted_tokens


def test_summary_of_the_demo_has_the_new_keys():
    """The demo trace, 60 requests, LRU at 20,000 tokens with a 60 s TTL: hits and
    evictions happen, so the age percentiles are set and ordered; the weighted rates are
    shares; the footprint is at least the peak the cache held."""
    config = load_config(None, {"trace.path": "traces/demo_chat.jsonl", "cache_only": True,
                                "trace.max_requests": 60, "cache.capacity_tokens": 20000,
                                "cache.ttl_s": 60})
    result = simulate(config)
    summary = result.summary
    arrivals = result.requests["arrival_s"]
    assert summary["trace_span_s"] == pytest.approx(arrivals.max() - arrivals.min())
    assert summary["trace_distinct_prefix_tokens"] >= summary["cache_peak_tokens"]
    assert 0 < summary["cache_request_weighted_hit_rate"] < 1
    for event in ("hit", "evicted"):
        ages = [summary[f"cache_{event}_age_p{p}_s"] for p in (10, 50, 90)]
        assert all(a is not None for a in ages) and ages == sorted(ages)
